%% @doc XEP-0198 counters and queue: acknowledgements, 32-bit wrap-around,
%% and signed resumption ids.
-module(throng_stream_mgmt_tests).

-include_lib("eunit/include/eunit.hrl").

secret() ->
    persistent_term:put({throng_tables, secret}, <<"0123456789abcdef0123456789abcdef">>).

sent_n(SM, Items) -> lists:foldl(fun throng_stream_mgmt:sent/2, SM, Items).

ack_drops_what_was_acknowledged_test() ->
    secret(),
    SM = sent_n(throng_stream_mgmt:new(true), [a, b, c, d]),
    ?assertEqual(4, throng_stream_mgmt:pending(SM)),
    {ok, SM1, [a, b]} = throng_stream_mgmt:ack(2, SM),
    ?assertEqual([c, d], throng_stream_mgmt:unacked(SM1)),
    {ok, SM2, []} = throng_stream_mgmt:ack(2, SM1),   %% a repeated ack changes nothing
    ?assertEqual([c, d], throng_stream_mgmt:unacked(SM2)),
    ?assertEqual({error, too_high}, throng_stream_mgmt:ack(5, SM2)),
    {ok, SM3, [c, d]} = throng_stream_mgmt:ack(4, SM2),
    ?assertEqual([], throng_stream_mgmt:unacked(SM3)).

%% The unacknowledged items can be replaced one for one (made durable);
%% their numbering, and so later acknowledgements, stay as they were.
set_unacked_keeps_the_numbering_test() ->
    secret(),
    SM = sent_n(throng_stream_mgmt:new(true), [a, b, c]),
    {ok, SM1, [a]} = throng_stream_mgmt:ack(1, SM),
    SM2 = throng_stream_mgmt:set_unacked([{kept, b}, c], SM1),
    ?assertEqual([{kept, b}, c], throng_stream_mgmt:unacked(SM2)),
    {ok, SM3, [{kept, b}]} = throng_stream_mgmt:ack(2, SM2),
    ?assertEqual([c], throng_stream_mgmt:unacked(SM3)).

handled_counts_and_wraps_test() ->
    secret(),
    SM = throng_stream_mgmt:new(false),
    ?assertEqual(3, throng_stream_mgmt:in_count(
                      lists:foldl(fun(_, S) -> throng_stream_mgmt:handled(S) end, SM, [1, 2, 3]))).

%% h counts modulo 2^32: acknowledging across the wrap works.
wrap_around_test() ->
    secret(),
    Near = 4294967294,
    SM0 = throng_stream_mgmt:new(true),
    %% Simulate a stream that already sent Near stanzas, all acknowledged.
    SM1 = setelement(5, setelement(6, SM0, Near), Near),   %% #sm.out and #sm.acked
    SM2 = sent_n(SM1, [x, y, z]),                          %% numbered ..95, 0, 1
    {ok, SM3, [x, y]} = throng_stream_mgmt:ack(0, SM2),
    ?assertEqual([z], throng_stream_mgmt:unacked(SM3)),
    ?assertEqual({error, too_high}, throng_stream_mgmt:ack(2, SM3)).

should_request_test() ->
    secret(),
    SM = sent_n(throng_stream_mgmt:new(false), [a, b]),
    ?assertNot(throng_stream_mgmt:should_request(SM, 3)),
    SM1 = throng_stream_mgmt:sent(c, SM),
    ?assert(throng_stream_mgmt:should_request(SM1, 3)),
    ?assertNot(throng_stream_mgmt:should_request(throng_stream_mgmt:requested(SM1), 3)).

ids_are_signed_test() ->
    secret(),
    Id = throng_stream_mgmt:id(throng_stream_mgmt:new(true)),
    ?assertEqual({ok, self()}, throng_stream_mgmt:parse_id(Id)),
    <<First, Rest/binary>> = base64:decode(Id),
    Forged = base64:encode(<<(First bxor 1), Rest/binary>>),
    ?assertEqual(error, throng_stream_mgmt:parse_id(Forged)),
    ?assertEqual(error, throng_stream_mgmt:parse_id(<<"not base64!">>)),
    ?assertEqual(error, throng_stream_mgmt:parse_id(base64:encode(<<"short">>))).
