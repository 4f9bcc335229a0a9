%% Tests of throng_c2s_io's mailbox measurement: what waits for a client is
%% counted in stanzas after every event, and in bytes (a count that walks
%% the whole mailbox) after every event while at most 32 stanzas wait, then
%% at the first event a second after the last count, or sooner when the
%% stanzas have doubled since or would pass max_queued_bytes at the size
%% last counted.
%% Time is given to the functions here: nothing depends on the machine's
%% speed.
-module(throng_c2s_io_tests).

-include_lib("eunit/include/eunit.hrl").

-define(M, throng_c2s_io).
-define(MAX, 4194304).

short_mailboxes_are_measured_at_every_event_test() ->
    Recent = {1000, 40, 4000},
    ?assert(lists:all(fun(Len) -> ?M:measure_bytes(Len, 1000, Recent, ?MAX) end,
                      lists:seq(1, 32))).

a_long_mailbox_is_measured_when_it_has_not_been_test() ->
    ?assert(?M:measure_bytes(33, 0, undefined, ?MAX)),
    ?assert(?M:measure_bytes(100000, 0, undefined, ?MAX)).

%% Then, while the mailbox neither doubles nor nears the bound, at the
%% first event a second after the last count, not before.
then_once_a_second_test() ->
    Last = {1000, 1000, 100000},
    ?assertEqual([], [Now || Now <- lists:seq(1000, 1999),
                             ?M:measure_bytes(1999, Now, Last, ?MAX)]),
    ?assert(?M:measure_bytes(1000, 2000, Last, ?MAX)),
    ?assert(?M:measure_bytes(1000, 60000, Last, ?MAX)).

%% Sooner when the mailbox has twice the stanzas of the last count.
sooner_when_the_mailbox_doubles_test() ->
    Last = {0, 40, 4000},
    ?assertNot(?M:measure_bytes(79, 1, Last, ?MAX)),
    ?assert(?M:measure_bytes(80, 1, Last, ?MAX)).

%% Sooner when the stanzas queued since would pass the bound at the size
%% of those last counted (100 stanzas in 60,000 bytes, a bound of 65,536:
%% 109 stanzas would be 65,400 bytes, 110 would be 66,000).
sooner_when_growth_at_the_counted_size_passes_the_bound_test() ->
    Last = {0, 100, 60000},
    ?assertNot(?M:measure_bytes(109, 1, Last, 65536)),
    ?assert(?M:measure_bytes(110, 1, Last, 65536)).

%% The promise of max_queued_bytes: a mailbox that grows past it is
%% counted past it within a second of the first event that finds it there,
%% however often the session has events (every event of a session whose
%% events are a second or more apart is counted). The stanzas become ten
%% times larger after 5 s, so that the last count's size underestimates
%% them: in a mailbox that keeps growing (the doubling and the estimate
%% find it), and in one whose length stays the same (only the interval
%% does).
a_backlog_past_the_bound_is_found_within_a_second_test() ->
    [?assertEqual({Kind, Every, true}, {Kind, Every, found_within(Kind, Every, 1000)})
     || Kind <- [growing, steady], Every <- [1, 3, 10, 50, 100, 999, 1000, 1001, 1500, 5000]].

%% Simulated milliseconds: the stanzas of a FIFO mailbox, an event every
%% Every ms. Growing: 2 stanzas come every ms, an event takes one. Steady:
%% 1,000 wait from the start, one comes every ms and an event takes as many
%% as came since the last.
found_within(Kind, Every, Limit) ->
    Max = 500000,
    {Initial, Take} = case Kind of
                          growing -> {0, 1};
                          steady -> {1000, Every}
                      end,
    Size = fun(T) when T < 5000 -> 100; (_) -> 1000 end,
    Q0 = queue:from_list(lists:duplicate(Initial, 100)),
    Step = fun(_, {found, _} = Found) ->
                   Found;
              (T, {Q1, Last, Over}) ->
                   Come = case Kind of growing -> 2 * Every; steady -> Every end,
                   Q2 = lists:foldl(fun queue:in/2, Q1, lists:duplicate(Come, Size(T))),
                   {Len, Bytes} = {queue:len(Q2), lists:sum(queue:to_list(Q2))},
                   Over1 = case Over =:= undefined andalso Bytes > Max of
                               true -> T;
                               false -> Over
                           end,
                   {_, Q3} = lists:foldl(fun(_, {_, Q}) -> queue:out(Q) end, {x, Q2},
                                         lists:seq(1, Take)),
                   case ?M:measure_bytes(Len, T, Last, Max) of
                       true when Bytes > Max -> {found, T - Over1};
                       true -> {Q3, {T, Len, Bytes}, Over1};
                       false -> {Q3, Last, Over1}
                   end
           end,
    {found, Delay} = lists:foldl(Step, {Q0, undefined, undefined}, lists:seq(0, 60000, Every)),
    Delay =< Limit.

%% With a real mailbox (kept off the heap, as a session's is): the stanza
%% count is exact at every call; the bytes are counted as the rule says,
%% include what the mailbox holds, and what the rule remembers is dropped
%% once 32 stanzas or fewer wait (an idle session keeps nothing of it).
backlog_follows_the_rule_on_a_real_mailbox_test() ->
    Self = self(),
    P = spawn_opt(fun() -> backlog_steps(Self) end, [{message_queue_data, off_heap}]),
    Stanza = {stanza, lists:seq(1, 100)},
    [P ! Stanza || _ <- lists:seq(1, 10)],
    P ! go,
    {10, Small, undefined} = result(),
    ?assert(Small >= 10 * 100 * 16),
    [P ! Stanza || _ <- lists:seq(1, 990)],
    P ! go,
    [{1000, First, {0, 1000, First}}, {1000, unmeasured, {0, 1000, First}},
     {1000, Later, {1000, 1000, Later}}] = [result() || _ <- lists:seq(1, 3)],
    ?assert(First >= 1000 * 100 * 16),
    ?assert(Later >= 1000 * 100 * 16),
    P ! drain,
    ?assertMatch({0, 0, undefined}, result()).

backlog_steps(Parent) ->
    receive go -> ok end,
    Parent ! {result, with_memo(?M:backlog(?MAX))},
    receive go -> ok end,
    [Parent ! {result, with_memo(?M:backlog(1000, ?MAX, Now))} || Now <- [0, 500, 1000]],
    receive drain -> ok end,
    flush(),
    Parent ! {result, with_memo(?M:backlog(?MAX))}.

with_memo({Len, Bytes}) -> {Len, Bytes, ?M:last_backlog()}.

flush() ->
    receive {stanza, _} -> flush() after 0 -> ok end.

result() ->
    receive {result, R} -> R after 5000 -> error(timeout) end.
