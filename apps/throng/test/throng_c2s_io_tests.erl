%% Tests of throng_c2s_io's mailbox measurement: a session's backlog in
%% bytes is counted at every event while the mailbox is short, and on a
%% sample of the events once it is long (a count walks the whole mailbox).
-module(throng_c2s_io_tests).

-include_lib("eunit/include/eunit.hrl").

short_mailboxes_are_always_measured_test() ->
    ?assert(lists:all(fun(Len) -> throng_c2s_io:measure_bytes(Len, Len * 7919) end,
                      lists:seq(1, 32))).

%% A mailbox of 10,000 stanzas is measured at about 32 calls in 10,000: a
%% constant cost per event on average (32 stanzas walked), not 10,000.
long_mailboxes_are_measured_on_a_sample_test() ->
    Len = 10000,
    Tokens = [erlang:monotonic_time() + I * 1000003 || I <- lists:seq(1, 100000)],
    Measured = length([T || T <- Tokens, throng_c2s_io:measure_bytes(Len, T)]),
    %% Expected 320; a test that no sample, or every call, would fail.
    ?assert(Measured > 100),
    ?assert(Measured < 1000).

%% Measured or not, the stanza count is exact; the bytes are a number when
%% measured, and include what the mailbox holds off the heap.
backlog_counts_the_mailbox_test() ->
    Self = self(),
    %% Off the heap, as a session's mailbox is.
    P = spawn_opt(fun() ->
                      receive go -> ok end,
                      Self ! {small, throng_c2s_io:backlog()},
                      receive go2 -> ok end,
                      Self ! {large, [throng_c2s_io:backlog() || _ <- lists:seq(1, 2000)]}
              end, [{message_queue_data, off_heap}]),
    [P ! {stanza, lists:seq(1, 100)} || _ <- lists:seq(1, 10)],
    P ! go,
    receive {small, {10, Bytes}} -> ?assert(Bytes >= 10 * 100 * 16) after 5000 -> error(timeout) end,
    [P ! {stanza, lists:seq(1, 100)} || _ <- lists:seq(1, 990)],
    P ! go2,
    receive
        {large, Results} ->
            ?assert(lists:all(fun({1000, _}) -> true; (_) -> false end, Results)),
            Measured = [B || {_, B} <- Results, is_integer(B)],
            ?assert(length(Measured) > 0),
            ?assert(length(Measured) < 2000),
            ?assert(lists:all(fun(B) -> B >= 1000 * 100 * 16 end, Measured))
    after 5000 -> error(timeout)
    end.
