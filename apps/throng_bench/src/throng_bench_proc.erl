%% @doc Resident memory and CPU time of an OS process, from /proc (Linux).
-module(throng_bench_proc).

-export([sample/1, cpu_percent/2, clock_ticks/0, parse_stat/1, parse_status_rss/1, alive/1]).

-type sample() :: #{rss := non_neg_integer(),      % bytes (VmRSS)
                    cpu_ticks := non_neg_integer(), % utime + stime, clock ticks
                    t := integer()}.                % monotonic ms
-export_type([sample/0]).

%% @doc One sample, or `undefined' when the process is gone (or not Linux).
-spec sample(non_neg_integer() | undefined) -> sample() | undefined.
sample(undefined) -> undefined;
sample(Pid) ->
    Dir = "/proc/" ++ integer_to_list(Pid),
    case {file:read_file(Dir ++ "/stat"), file:read_file(Dir ++ "/status")} of
        {{ok, Stat}, {ok, Status}} ->
            case {parse_stat(Stat), parse_status_rss(Status)} of
                {{ok, Ticks}, {ok, Rss}} ->
                    #{rss => Rss, cpu_ticks => Ticks, t => erlang:monotonic_time(millisecond)};
                _ -> undefined
            end;
        _ -> undefined
    end.

%% @doc CPU use between two samples, in percent of one core.
-spec cpu_percent(sample() | undefined, sample() | undefined) -> float() | undefined.
cpu_percent(#{cpu_ticks := C0, t := T0}, #{cpu_ticks := C1, t := T1}) when T1 > T0 ->
    (C1 - C0) / clock_ticks() / ((T1 - T0) / 1000) * 100;
cpu_percent(_, _) -> undefined.

%% @doc Clock ticks per second (sysconf(_SC_CLK_TCK)); 100 on Linux unless
%% `getconf' says otherwise.
-spec clock_ticks() -> pos_integer().
clock_ticks() ->
    case persistent_term:get({?MODULE, clk_tck}, undefined) of
        undefined ->
            T = case string:to_integer(string:trim(os:cmd("getconf CLK_TCK 2>/dev/null"))) of
                    {N, []} when N > 0 -> N;
                    _ -> 100
                end,
            persistent_term:put({?MODULE, clk_tck}, T),
            T;
        T -> T
    end.

%% @doc utime + stime (fields 14 and 15) of /proc/PID/stat. The command
%% name (field 2) is in parentheses and may contain spaces: fields are
%% counted after its closing parenthesis.
-spec parse_stat(binary()) -> {ok, non_neg_integer()} | error.
parse_stat(Bin) ->
    case string:split(Bin, <<")">>, trailing) of
        [_, Rest] ->
            %% Rest starts with field 3 (state)
            Fields = binary:split(Rest, [<<" ">>, <<"\n">>], [global, trim_all]),
            try
                U = binary_to_integer(lists:nth(12, Fields)),
                S = binary_to_integer(lists:nth(13, Fields)),
                {ok, U + S}
            catch _:_ -> error
            end;
        _ -> error
    end.

%% @doc VmRSS of /proc/PID/status, in bytes.
-spec parse_status_rss(binary()) -> {ok, non_neg_integer()} | error.
parse_status_rss(Bin) ->
    case re:run(Bin, <<"^VmRSS:\\s+(\\d+)\\s+kB">>, [multiline, {capture, all_but_first, binary}]) of
        {match, [Kb]} -> {ok, binary_to_integer(Kb) * 1024};
        nomatch -> error
    end.

%% @doc Whether the OS process exists.
-spec alive(non_neg_integer()) -> boolean().
alive(Pid) -> filelib:is_dir("/proc/" ++ integer_to_list(Pid)).
