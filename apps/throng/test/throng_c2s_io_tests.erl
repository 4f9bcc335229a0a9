%% Tests of throng_c2s_io's mailbox measurement: what waits for a client is
%% counted in stanzas after every event, and in bytes (a count that walks
%% the whole mailbox) after every event while at most 32 stanzas wait, then
%% at the first event 100 ms after the last count, or sooner when the
%% stanzas come since would pass max_queued_bytes at the size last counted.
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

%% Then at the first event 100 ms after the last count, not before.
then_at_most_every_100_ms_test() ->
    Last = {1000, 1000, 100000},
    ?assertEqual([], [Now || Now <- lists:seq(1000, 1099),
                             ?M:measure_bytes(1000, Now, Last, ?MAX)]),
    ?assert(?M:measure_bytes(1000, 1100, Last, ?MAX)),
    ?assert(?M:measure_bytes(1000, 60000, Last, ?MAX)).

%% Sooner when the stanzas queued since would pass the bound at the size
%% of those last counted (100 stanzas in 60,000 bytes, a bound of 65,536:
%% 109 stanzas would be 65,400 bytes, 110 would be 66,000).
sooner_when_growth_at_the_counted_size_passes_the_bound_test() ->
    Last = {0, 100, 60000},
    ?assertNot(?M:measure_bytes(109, 1, Last, 65536)),
    ?assert(?M:measure_bytes(110, 1, Last, 65536)).

%% The promise of max_queued_bytes: a mailbox that grows past it is
%% counted past it within 100 ms of the first event that finds it there,
%% however often the session has events (every event of a session whose
%% events are 100 ms or more apart is counted). The stanzas here grow ten
%% times larger half-way, so that the last count's size underestimates
%% them and only the interval finds them.
a_growing_backlog_is_found_within_100_ms_test() ->
    [?assertEqual({Every, true}, {Every, found_within(Every, 100)})
     || Every <- [1, 3, 10, 50, 99, 100, 101, 150, 1000]].

%% Simulated milliseconds: 2 stanzas come every ms, the session takes one
%% per event, an event every Every ms.
found_within(Every, Limit) ->
    Max = 1000000,
    Events = [T || T <- lists:seq(0, 200000, Every)],
    Run = lists:foldl(
            fun(_, {found, _} = Found) ->
                    Found;
               (T, {Len0, Bytes0, Last, Over}) ->
                    Size = case T < 1000 of true -> 100; false -> 1000 end,
                    Len = Len0 + 2 * Every,
                    Bytes = Bytes0 + 2 * Every * Size,
                    Over1 = case Over =:= undefined andalso Bytes > Max of
                                true -> T;
                                false -> Over
                            end,
                    case Len > 32 andalso ?M:measure_bytes(Len, T, Last, Max) of
                        true when Bytes > Max -> {found, T - Over1};
                        true -> {Len - 1, Bytes - Size, {T, Len, Bytes}, Over1};
                        false -> {Len - 1, Bytes - Size, Last, Over1}
                    end
            end, {0, 0, undefined, undefined}, Events),
    {found, Delay} = Run,
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
     {1000, Later, {100, 1000, Later}}] = [result() || _ <- lists:seq(1, 3)],
    ?assert(First >= 1000 * 100 * 16),
    ?assert(Later >= 1000 * 100 * 16),
    P ! drain,
    ?assertMatch({0, 0, undefined}, result()).

backlog_steps(Parent) ->
    receive go -> ok end,
    Parent ! {result, with_memo(?M:backlog(?MAX))},
    receive go -> ok end,
    [Parent ! {result, with_memo(?M:backlog(1000, ?MAX, Now))} || Now <- [0, 50, 100]],
    receive drain -> ok end,
    flush(),
    Parent ! {result, with_memo(?M:backlog(?MAX))}.

with_memo({Len, Bytes}) -> {Len, Bytes, ?M:last_backlog()}.

flush() ->
    receive {stanza, _} -> flush() after 0 -> ok end.

result() ->
    receive {result, R} -> R after 5000 -> error(timeout) end.
