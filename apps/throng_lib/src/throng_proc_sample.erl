%% @doc What /proc says about one OS process: its CPU time and resident
%% memory (throng-bench samples the server under test with it, the
%% statistics collector its own node), and the kernel's units for them.
%%
%% CPU times in /proc count clock ticks of USER_HZ per second. The rate is
%% read, not assumed: it is AT_CLKTCK of the ELF auxiliary vector
%% (/proc/self/auxv), the value sysconf(_SC_CLK_TCK) and `getconf CLK_TCK'
%% report; likewise the page size (AT_PAGESZ). Both are read once per VM.
-module(throng_proc_sample).

-include_lib("kernel/include/file.hrl").

-export([sample/1, cpu_seconds/1, cpu_percent/2, sys_percent/2, clock_ticks/0, page_size/0,
         alive/1, open_fds/1]).

-type os_pid() :: non_neg_integer().
-type sample() :: #{rss := non_neg_integer(),       %% bytes (VmRSS)
                    cpu_ticks := non_neg_integer(), %% utime + stime, clock ticks
                    sys_ticks := non_neg_integer(), %% stime (in the kernel), clock ticks
                    t := integer()}.                %% monotonic ms
-export_type([os_pid/0, sample/0]).

-define(AT_PAGESZ, 6).
-define(AT_CLKTCK, 17).

%% @doc One sample of a process (self: this VM), or undefined when it is
%% gone (or this is not Linux).
-spec sample(os_pid() | self | undefined) -> sample() | undefined.
sample(undefined) ->
    undefined;
sample(Pid) ->
    Dir = dir(Pid),
    case {file:read_file(Dir ++ "/stat"), file:read_file(Dir ++ "/status")} of
        {{ok, Stat}, {ok, Status}} ->
            try {throng_proc:stat(Stat), throng_proc:status(Status, [<<"VmRSS">>])} of
                {#{utime := U, stime := S}, #{<<"VmRSS">> := Rss}} ->
                    #{rss => Rss, cpu_ticks => U + S, sys_ticks => S,
                      t => erlang:monotonic_time(millisecond)};
                _ ->
                    undefined   %% a kernel thread: no VmRSS
            catch error:_ ->
                    undefined   %% not the format of Linux's /proc
            end;
        _ ->
            undefined
    end.

%% @doc The CPU time (user + system) of a sample, in seconds.
-spec cpu_seconds(sample()) -> float().
cpu_seconds(#{cpu_ticks := T}) ->
    T / clock_ticks().

%% @doc CPU use between two samples, in percent of one core.
-spec cpu_percent(sample() | undefined, sample() | undefined) -> float() | undefined.
cpu_percent(#{t := T0} = S0, #{t := T1} = S1) when T1 > T0 ->
    (cpu_seconds(S1) - cpu_seconds(S0)) / ((T1 - T0) / 1000) * 100;
cpu_percent(_, _) ->
    undefined.

%% @doc CPU time spent in the kernel (system time) between two samples, in
%% percent of one core: the part of cpu_percent/2 that is system calls,
%% interrupts on the process's behalf and page faults.
-spec sys_percent(sample() | undefined, sample() | undefined) -> float() | undefined.
sys_percent(#{t := T0, sys_ticks := S0}, #{t := T1, sys_ticks := S1}) when T1 > T0 ->
    (S1 - S0) / clock_ticks() / ((T1 - T0) / 1000) * 100;
sys_percent(_, _) ->
    undefined.

%% @doc Clock ticks per second of /proc's CPU times (USER_HZ; 100 when the
%% auxiliary vector cannot be read).
-spec clock_ticks() -> pos_integer().
clock_ticks() ->
    auxv(?AT_CLKTCK, 100).

%% @doc The page size in bytes (4096 when the auxiliary vector cannot be read).
-spec page_size() -> pos_integer().
page_size() ->
    auxv(?AT_PAGESZ, 4096).

%% @doc The files a process holds open: the size of /proc/PID/fd where the
%% kernel reports it there (Linux 6.2 and later), else the length of its
%% listing; undefined when the process is gone.
-spec open_fds(os_pid() | self) -> non_neg_integer() | undefined.
open_fds(Pid) ->
    Dir = dir(Pid) ++ "/fd",
    case file:read_file_info(Dir) of
        {ok, #file_info{size = Size}} when Size > 0 -> Size;
        _ ->
            case file:list_dir(Dir) of
                {ok, Names} -> length(Names);
                {error, _} -> undefined
            end
    end.

%% @doc Whether the OS process exists.
-spec alive(os_pid()) -> boolean().
alive(Pid) ->
    filelib:is_dir(dir(Pid)).

dir(self) -> "/proc/self";
dir(Pid) -> "/proc/" ++ integer_to_list(Pid).

auxv(Type, Default) ->
    Aux = case persistent_term:get({?MODULE, auxv}, undefined) of
              undefined ->
                  A = case file:read_file("/proc/self/auxv") of
                          {ok, Bin} -> throng_proc:auxv(Bin);
                          {error, _} -> #{}
                      end,
                  persistent_term:put({?MODULE, auxv}, A),
                  A;
              A ->
                  A
          end,
    case maps:get(Type, Aux, Default) of
        N when is_integer(N), N > 0 -> N;
        _ -> Default
    end.
