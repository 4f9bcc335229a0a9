%% @doc Readings of a live OS process from /proc, and the kernel's units
%% (skipped where there is no /proc).
-module(throng_proc_sample_tests).

-include_lib("eunit/include/eunit.hrl").

proc_sample_test_() ->
    case filelib:is_dir("/proc/self") of
        true ->
            [{"this VM: resident memory and CPU time", fun self_sample/0},
             {"the tick rate and page size are the kernel's (getconf)", fun units/0},
             {"CPU use between two samples of a busy VM", fun cpu_percent/0},
             {"a process that does not exist", fun gone/0}];
        false ->
            []
    end.

self_sample() ->
    OsPid = list_to_integer(os:getpid()),
    #{rss := Rss, cpu_ticks := Ticks, t := _} = throng_proc_sample:sample(OsPid),
    ?assert(Rss > 1000000),
    ?assert(Ticks >= 0),
    ?assertMatch(#{rss := _}, throng_proc_sample:sample(self)),
    ?assert(throng_proc_sample:alive(OsPid)).

units() ->
    ?assertEqual(getconf("CLK_TCK"), throng_proc_sample:clock_ticks()),
    ?assertEqual(getconf("PAGESIZE"), throng_proc_sample:page_size()).

cpu_percent() ->
    S0 = throng_proc_sample:sample(self),
    busy(erlang:monotonic_time(millisecond) + 300),
    S1 = throng_proc_sample:sample(self),
    Pct = throng_proc_sample:cpu_percent(S0, S1),
    ?assert(Pct > 0),
    ?assert(throng_proc_sample:cpu_seconds(S1) >= throng_proc_sample:cpu_seconds(S0)),
    ?assertEqual(undefined, throng_proc_sample:cpu_percent(S1, S1)),
    ?assertEqual(undefined, throng_proc_sample:cpu_percent(undefined, S1)).

gone() ->
    ?assertEqual(undefined, throng_proc_sample:sample(undefined)),
    ?assertEqual(undefined, throng_proc_sample:sample(999999999)),
    ?assertNot(throng_proc_sample:alive(999999999)).

busy(Until) ->
    case erlang:monotonic_time(millisecond) < Until of
        true -> _ = lists:sum(lists:seq(1, 1000)), busy(Until);
        false -> ok
    end.

getconf(Var) ->
    list_to_integer(string:trim(os:cmd("getconf " ++ Var))).

open_fds_counts_the_descriptors_test() ->
    {ok, Names} = file:list_dir("/proc/self/fd"),
    N = throng_proc_sample:open_fds(self),
    %% the listing itself holds one descriptor while it runs
    ?assert(abs(N - length(Names)) =< 1),
    {ok, F} = file:open("/proc/self/stat", [read, raw]),
    try ?assert(throng_proc_sample:open_fds(self) >= N)
    after file:close(F)
    end,
    ?assertEqual(undefined, throng_proc_sample:open_fds(999999999)).
