%% @doc XEP-0198 counters and queue: acknowledgements, 32-bit wrap-around,
%% and resumption ids: opaque (encrypted), authenticated, bound to the
%% node's start unless a cluster-wide secret is configured.
-module(throng_stream_mgmt_tests).

-include_lib("eunit/include/eunit.hrl").

secret() ->
    boot_secret(<<"0123456789abcdef0123456789abcdef">>),
    resumption_secret(<<>>).

boot_secret(S) ->
    persistent_term:put({throng_tables, secret}, S).

%% The stream_management section of the configuration, defaults but for
%% resumption_secret.
resumption_secret(S) ->
    {ok, #{stream_management := SM}} = throng_config:validate(#{}),
    persistent_term:put({throng_config, stream_management}, SM#{resumption_secret => S}).

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

ids_round_trip_test() ->
    secret(),
    Id = throng_stream_mgmt:id(throng_stream_mgmt:new(true)),
    ?assertEqual({ok, self()}, throng_stream_mgmt:parse_id(Id)),
    ?assertEqual(error, throng_stream_mgmt:parse_id(<<"not base64!">>)),
    ?assertEqual(error, throng_stream_mgmt:parse_id(<<>>)),
    ?assertEqual(error, throng_stream_mgmt:parse_id(base64:encode(<<"short">>))).

%% Neither the node name nor the pid's external form (nor its numbers) can
%% be read from an id, and two ids of one session look unrelated.
ids_are_opaque_test() ->
    secret(),
    Pid = remote_pid('throng@some-host.example', 4711, 3, 17),
    [begin
         Id = throng_stream_mgmt:make_id(P),
         Raw = base64:decode(Id),
         PidBin = term_to_binary(P),
         Node = atom_to_binary(node(P)),
         [?assertEqual(nomatch, binary:match(B, Node)) || B <- [Id, Raw]],
         ?assertEqual(nomatch, binary:match(Raw, PidBin)),
         %% The pid's id/serial/creation words, wherever they are.
         <<_:3/binary, NodeAtom:(byte_size(PidBin) - 15)/binary, Words:12/binary>> = PidBin,
         ?assert(byte_size(NodeAtom) > 0),
         ?assertEqual(nomatch, binary:match(Raw, Words)),
         ?assertNotEqual(Id, throng_stream_mgmt:make_id(P)),
         %% Modest: sent in every <enabled/>.
         ?assert(byte_size(Id) =< 100)
     end || P <- [self(), Pid]].

%% Changing, dropping or adding any byte makes the id invalid.
tampered_ids_fail_test() ->
    secret(),
    Raw = base64:decode(throng_stream_mgmt:id(throng_stream_mgmt:new(true))),
    Size = byte_size(Raw),
    Flipped = [<<A:I/binary, (X bxor (1 bsl B)), Z/binary>>
                   || I <- lists:seq(0, Size - 1), B <- [0, 7],
                      <<A:I/binary, X, Z/binary>> <- [Raw]],
    Truncated = [binary:part(Raw, 0, N) || N <- lists:seq(0, Size - 1)],
    Extended = [<<Raw/binary, 0>>, <<0, Raw/binary>>],
    [?assertEqual({Bad, error}, {Bad, throng_stream_mgmt:parse_id(base64:encode(Bad))})
     || Bad <- Flipped ++ Truncated ++ Extended].

%% Without a configured secret an id dies with the node's start.
ids_from_another_start_fail_test() ->
    secret(),
    Id = throng_stream_mgmt:make_id(self()),
    boot_secret(<<"another start of the node 123456">>),
    ?assertEqual(error, throng_stream_mgmt:parse_id(Id)).

%% With a configured secret (the same on every node of a cluster), an id
%% made on another node (another boot secret) names that node's process;
%% one naming a process of this node made before this start does not.
cluster_secret_ids_test() ->
    boot_secret(<<"boot secret of node A 0123456789">>),
    resumption_secret(<<"a cluster-wide secret, 32 chars.">>),
    Remote = remote_pid('throng@node-a.example', 100, 0, 5),
    IdFromA = throng_stream_mgmt:make_id(Remote),
    LocalBefore = throng_stream_mgmt:make_id(self()),
    boot_secret(<<"boot secret of node B 0123456789">>),
    ?assertEqual({ok, Remote}, throng_stream_mgmt:parse_id(IdFromA)),
    ?assertEqual(error, throng_stream_mgmt:parse_id(LocalBefore)),
    ?assertEqual({ok, self()}, throng_stream_mgmt:parse_id(throng_stream_mgmt:make_id(self()))),
    %% Another secret: nothing decodes.
    resumption_secret(<<"another cluster's secret, 32 ch.">>),
    ?assertEqual(error, throng_stream_mgmt:parse_id(IdFromA)),
    secret().

%% A pid of another node (NEW_PID_EXT).
remote_pid(Node, Id, Serial, Creation) ->
    Name = atom_to_binary(Node),
    binary_to_term(<<131, 88, 119, (byte_size(Name)), Name/binary, Id:32, Serial:32,
                     Creation:32>>).
