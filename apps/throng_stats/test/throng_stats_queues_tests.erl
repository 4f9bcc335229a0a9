%% @doc The message-queue watch, each of its paths on its own: processes
%% that report themselves (the hot table), registered processes, and the
%% rolling sweep that finds the others; the alarm and its clearing.
-module(throng_stats_queues_tests).

-include_lib("eunit/include/eunit.hrl").

-define(HOT, throng_hot_queues).

setup() ->
    case ets:whereis(?HOT) of
        undefined -> ?HOT = ets:new(?HOT, [set, public, named_table]);
        _ -> ets:delete_all_objects(?HOT)
    end,
    ok.

%% A process that holds whatever it is sent until told to drain.
sink() ->
    spawn(fun Loop() ->
                  receive
                      drain -> drain(), Loop();
                      stop -> ok
                  end
          end).

drain() ->
    receive {msg, _} -> drain() after 0 -> ok end.

fill(Pid, N) ->
    [Pid ! {msg, I} || I <- lists:seq(1, N)],
    ok.

wait_len(Pid, N) ->
    case process_info(Pid, message_queue_len) of
        {message_queue_len, L} when L >= N -> ok;
        _ -> timer:sleep(5), wait_len(Pid, N)
    end.

queues_test_() ->
    {foreach, fun setup/0, fun(_) -> ok end,
     [{"a registered process with a long queue raises the alarm", fun registered/0},
      {"a reported (hot) process is re-checked and its row cleared when drained", fun hot/0},
      {"the sweep finds an unreported long queue and then watches it", fun sweep/0},
      {"short queues raise nothing", fun quiet/0}]}.

registered() ->
    Pid = sink(),
    true = register(throng_stats_queues_test_sink, Pid),
    fill(Pid, 30),
    wait_len(Pid, 30),
    Q0 = throng_stats_queues:init(#{threshold => 20, sweep_rate => 0}),
    {Samples, Report, Q1} = throng_stats_queues:tick(Q0),
    ?assertMatch(#{alarm := true, over := 1, max := 30}, Report),
    #{top := [Top | _]} = Report,
    ?assertEqual(<<"throng_stats_queues_test_sink">>, maps:get(name, Top)),
    ?assertEqual(30, maps:get(len, Top)),
    ?assertEqual(1, sample(throng_message_queue_alarm, Samples)),
    ?assertEqual(1, sample(throng_message_queue_alarms, Samples)),
    ?assert(sample(throng_message_queue_total, Samples) >= 30),
    %% Still raised: counted once.
    {S2, _, Q2} = throng_stats_queues:tick(Q1),
    ?assertEqual(1, sample(throng_message_queue_alarms, S2)),
    Pid ! drain,
    wait_len_below(Pid, 1),
    {S3, R3, _} = throng_stats_queues:tick(Q2),
    ?assertMatch(#{alarm := false, over := 0}, R3),
    ?assertEqual(0, sample(throng_message_queue_alarm, S3)),
    Pid ! stop.

hot() ->
    Pid = sink(),
    fill(Pid, 30),
    wait_len(Pid, 30),
    Drained = sink(),
    ets:insert(?HOT, [{Pid, 30, erlang:system_time(millisecond)},
                      {Drained, 25, erlang:system_time(millisecond)}]),
    Q0 = throng_stats_queues:init(#{threshold => 20, sweep_rate => 0}),
    {_, Report, Q1} = throng_stats_queues:tick(Q0),
    ?assertMatch(#{alarm := true, over := 1}, Report),
    ?assertEqual([Pid], [P || {P, _, _} <- ets:tab2list(?HOT)]),   %% the drained row went
    ?assertEqual(list_to_binary(pid_to_list(Pid)), maps:get(pid, hd(maps:get(top, Report)))),
    Pid ! drain,
    wait_len_below(Pid, 1),
    {_, R2, _} = throng_stats_queues:tick(Q1),
    ?assertMatch(#{alarm := false}, R2),
    ?assertEqual([], ets:tab2list(?HOT)),
    [P ! stop || P <- [Pid, Drained]].

sweep() ->
    Pid = sink(),
    fill(Pid, 30),
    wait_len(Pid, 30),
    %% Without the sweep nothing finds it (not registered, not reported).
    {_, R0, _} = throng_stats_queues:tick(throng_stats_queues:init(#{threshold => 20,
                                                                    sweep_rate => 0})),
    ?assertMatch(#{alarm := false}, R0),
    %% The sweep visits a tenth of the processes each tick: within a few
    %% ticks it has seen them all and found it.
    {S1, Q1} = tick_until_alarm(throng_stats_queues:init(#{threshold => 20,
                                                          sweep_rate => 10000000}), 12),
    ?assert(sample(throng_message_queue_swept, S1) >= 1),
    %% From then on it is watched: found at once though the sweep goes on.
    {_, R2, _} = throng_stats_queues:tick(Q1),
    ?assertMatch(#{alarm := true}, R2),
    ?assert(maps:get(watched, R2) >= 1),
    Pid ! stop.

quiet() ->
    Pid = sink(),
    fill(Pid, 3),
    wait_len(Pid, 3),
    {S, R, _} = throng_stats_queues:tick(throng_stats_queues:init(#{threshold => 20,
                                                                   sweep_rate => 10000000})),
    ?assertMatch(#{alarm := false, over := 0}, R),
    ?assertEqual(0, sample(throng_message_queue_alarms, S)),
    Pid ! stop.

tick_until_alarm(_Q, 0) ->
    error(sweep_never_found_the_queue);
tick_until_alarm(Q0, N) ->
    case throng_stats_queues:tick(Q0) of
        {S, #{alarm := true}, Q} -> {S, Q};
        {_, _, Q} -> tick_until_alarm(Q, N - 1)
    end.

wait_len_below(Pid, N) ->
    case process_info(Pid, message_queue_len) of
        {message_queue_len, L} when L < N -> ok;
        _ -> timer:sleep(5), wait_len_below(Pid, N)
    end.

sample(Name, Samples) ->
    {_, _, V} = lists:keyfind(Name, 1, Samples),
    V.
