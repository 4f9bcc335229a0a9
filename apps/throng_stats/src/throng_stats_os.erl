%% @doc The operating-system part of the per-second sample, read from
%% Linux /proc.
%%
%% Cost is what matters here: opening a /proc file from the BEAM costs about
%% as much CPU as generating it, so every file is opened once, kept open
%% (raw, owned by the collector) and re-read with pread at offset 0, which
%% makes the kernel generate fresh contents. The count of open descriptors
%% is the size of /proc/self/fd (Linux 6.2 and later report it there); on an
%% older kernel the directory is listed, at most every 10 seconds.
%%
%% /proc/self/status counts the context switches of the main thread only;
%% the node's are the sum over its threads (/proc/self/task/*/status), whose
%% files are kept open too and re-listed when the thread count changes.
-module(throng_stats_os).

-include_lib("kernel/include/file.hrl").

-export([init/0, sample/1, close/1]).

-type sample() :: {atom(), [{atom(), binary()}], number()}.
-export_type([sample/0]).

-record(os, {files = #{} :: #{atom() => file:io_device()},
             tasks = [] :: [file:io_device()],
             hz = 100 :: pos_integer(),
             page = 4096 :: pos_integer(),
             max_fds = infinity :: non_neg_integer() | infinity,
             limits_at = 0 :: integer(),
             fds = 0 :: non_neg_integer(),
             fds_listed_at :: integer() | undefined}).
-opaque state() :: #os{}.
-export_type([state/0]).

-define(FILES, [{stat, "/proc/self/stat"}, {status, "/proc/self/status"},
                {host, "/proc/stat"}, {netstat, "/proc/net/netstat"},
                {sockstat, "/proc/net/sockstat"}]).
-define(SWITCHES, [<<"voluntary_ctxt_switches">>, <<"nonvoluntary_ctxt_switches">>]).

-spec init() -> state().
init() ->
    Files = maps:from_list([{K, F} || {K, P} <- ?FILES, {ok, F} <- [open(P)]]),
    #os{files = Files, hz = throng_proc_sample:clock_ticks(), page = throng_proc_sample:page_size()}.

-spec close(state()) -> ok.
close(#os{files = Files, tasks = Tasks}) ->
    _ = [file:close(F) || F <- maps:values(Files) ++ Tasks],
    ok.

%% @doc The OS figures now (counters as running totals).
-spec sample(state()) -> {[sample()], state()}.
sample(S0) ->
    Now = erlang:monotonic_time(millisecond),
    S1 = limits(Now, S0),
    {Proc, S2} = process(S1),
    {Fds, S3} = fds(Now, S2),
    {Switches, S4} = switches(Proc, S3),
    {lists:append([Proc, Fds, Switches, host(S4), net(S4)]), S4}.

%%% The node's process

process(#os{hz = Hz} = S) ->
    Stat = case read(stat, S) of
               {ok, B1} ->
                   #{utime := U, stime := Sys, threads := T, vsize := V} =
                       throng_proc:stat(B1),
                   [{throng_process_cpu_seconds, [{mode, <<"user">>}], U / Hz},
                    {throng_process_cpu_seconds, [{mode, <<"system">>}], Sys / Hz},
                    {throng_process_threads, [], T},
                    {throng_process_virtual_memory_bytes, [], V}];
               error -> []
           end,
    Status = case read(status, S) of
                 {ok, B2} ->
                     St = throng_proc:status(B2, [<<"VmRSS">>]),
                     [{throng_process_resident_memory_bytes, [], maps:get(<<"VmRSS">>, St, 0)}];
                 error -> []
             end,
    {Stat ++ Status, S}.

limits(Now, #os{limits_at = At} = S) when Now - At < 60000, At =/= 0 ->
    S;
limits(Now, S) ->
    Max = case file:read_file("/proc/self/limits") of
              {ok, B} ->
                  case throng_proc:limits(B) of
                      #{max_open_files := {Soft, _}} -> Soft;
                      #{} -> infinity
                  end;
              {error, _} -> infinity
          end,
    S#os{max_fds = Max, limits_at = Now}.

fds(Now, #os{max_fds = Max} = S0) ->
    S = case file:read_file_info("/proc/self/fd") of
            {ok, #file_info{size = Size}} when Size > 0 ->
                S0#os{fds = Size};
            _ when S0#os.fds_listed_at =:= undefined; Now - S0#os.fds_listed_at >= 10000 ->
                case file:list_dir("/proc/self/fd") of
                    {ok, Names} -> S0#os{fds = length(Names), fds_listed_at = Now};
                    {error, _} -> S0#os{fds_listed_at = Now}
                end;
            _ ->
                S0
        end,
    Open = S#os.fds,
    Limit = case Max of
                infinity -> [];
                _ -> [{throng_process_max_fds, [], Max},
                      {throng_process_fds_usage, [], Open / max(1, Max)}]
            end,
    {[{throng_process_open_fds, [], Open} | Limit], S}.

switches(Proc, #os{tasks = Tasks0} = S0) ->
    Threads = case lists:keyfind(throng_process_threads, 1, Proc) of
                  {_, _, T} -> T;
                  false -> length(Tasks0)
              end,
    S = case length(Tasks0) =:= Threads of
            true -> S0;
            false -> open_tasks(S0)
        end,
    {V, I, Ok} = lists:foldl(
                   fun(F, {V0, I0, Ok0}) ->
                           case pread_all(F) of
                               {ok, B} ->
                                   St = throng_proc:status(B, ?SWITCHES),
                                   {V0 + maps:get(<<"voluntary_ctxt_switches">>, St, 0),
                                    I0 + maps:get(<<"nonvoluntary_ctxt_switches">>, St, 0), Ok0};
                               error ->
                                   {V0, I0, false}
                           end
                   end, {0, 0, true}, S#os.tasks),
    S1 = case Ok of
             true -> S;
             false -> S#os{tasks = []}   %% a thread ended: list them again next time
         end,
    Samples = case S#os.tasks of
                  [] -> [];
                  _ -> [{throng_process_context_switches, [{kind, <<"voluntary">>}], V},
                        {throng_process_context_switches, [{kind, <<"involuntary">>}], I}]
              end,
    {Samples, S1}.

open_tasks(#os{tasks = Old} = S) ->
    _ = [file:close(F) || F <- Old],
    Tasks = case file:list_dir("/proc/self/task") of
                {ok, Tids} ->
                    [F || T <- Tids, {ok, F} <- [open("/proc/self/task/" ++ T ++ "/status")]];
                {error, _} ->
                    []
            end,
    S#os{tasks = Tasks}.

%%% The host

host(#os{hz = Hz} = S) ->
    Cpus = [{throng_host_cpus, [], erlang:system_info(logical_processors_available)}
            || is_integer(erlang:system_info(logical_processors_available))],
    case read(host, S) of
        {ok, B} ->
            H = throng_proc:host_stat(B),
            [{throng_host_cpu_seconds, [{mode, atom_to_binary(M)}], T / Hz}
             || {M, T} <- lists:sort(maps:to_list(maps:get(cpu, H)))] ++
                [{throng_host_context_switches, [], C} || #{ctxt := C} <- [H]] ++
                [{throng_host_procs_running, [], R} || #{procs_running := R} <- [H]] ++
                Cpus;
        error ->
            Cpus
    end.

net(#os{page = Page} = S) ->
    Listen = case read(netstat, S) of
                 {ok, B1} ->
                     Ext = throng_proc:netstat(B1, <<"TcpExt">>),
                     [{throng_tcp_listen_overflows, [], V} || #{<<"ListenOverflows">> := V} <- [Ext]] ++
                         [{throng_tcp_listen_drops, [], V} || #{<<"ListenDrops">> := V} <- [Ext]];
                 error -> []
             end,
    Sockets = case read(sockstat, S) of
                  {ok, B2} ->
                      case throng_proc:sockstat(B2) of
                          #{<<"TCP">> := Tcp} ->
                              [{throng_tcp_sockets, [{state, Label}], V}
                               || {Key, Label} <- [{<<"inuse">>, <<"inuse">>},
                                                   {<<"orphan">>, <<"orphan">>},
                                                   {<<"tw">>, <<"time_wait">>},
                                                   {<<"alloc">>, <<"alloc">>}],
                                  V <- [maps:get(Key, Tcp, undefined)], is_integer(V)] ++
                                  [{throng_tcp_memory_bytes, [], M * Page}
                                   || M <- [maps:get(<<"mem">>, Tcp, undefined)], is_integer(M)];
                          #{} -> []
                      end;
                  error -> []
              end,
    Listen ++ Sockets.

%%% Reading

open(Path) ->
    file:open(Path, [raw, binary, read]).

read(Key, #os{files = Files}) ->
    case Files of
        #{Key := F} -> pread_all(F);
        #{} -> error
    end.

-define(CHUNK, 65536).

pread_all(F) ->
    pread_all(F, 0, []).

pread_all(F, Offset, Acc) ->
    case file:pread(F, Offset, ?CHUNK) of
        {ok, Data} when byte_size(Data) =:= ?CHUNK ->
            pread_all(F, Offset + ?CHUNK, [Data | Acc]);
        {ok, Data} ->
            {ok, iolist_to_binary(lists:reverse([Data | Acc]))};
        eof when Acc =/= [] ->
            {ok, iolist_to_binary(lists:reverse(Acc))};
        _ ->
            error
    end.
