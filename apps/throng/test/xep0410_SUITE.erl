%% @doc XEP-0410 MUC Self-Ping against the real server: an occupant pinging
%% its own occupant JID gets a result from the room; a non-occupant (or one
%% that left) gets not-acceptable; a ping to another occupant is passed to
%% it and its answer comes back through the room.
-module(xep0410_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(M, throng_muc_client).

all() ->
    [self_ping_occupant, self_ping_non_occupant, self_ping_after_leaving, ping_other_occupant,
     optimization_advertised].

init_per_testcase(_TC, Config) ->
    throng_ct:start(Config),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

ping() -> #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, <<"urn:xmpp:ping">>}]}.

%% §4: the room answers self-pings itself, and its disco#info says so.
optimization_advertised(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    R = ?M:iq(A, <<"get">>, ?M:room(<<"r">>), ?M:query(?NS_DISCO_INFO, [])),
    Features = [throng_xml:attr(<<"var">>, F)
                || #xmlel{name = <<"feature">>} = F <- throng_xml:subels(throng_xml:subel(R, <<"query">>))],
    ?assert(lists:member(<<"http://jabber.org/protocol/muc#self-ping-optimization">>, Features)).

%% §3: joined, a self-ping is answered with a result from the occupant JID.
self_ping_occupant(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    R = ?M:iq(A, <<"get">>, ?M:occ(<<"r">>, <<"a">>), ping()),
    ?assertEqual(<<"result">>, ?M:type(R)),
    ?assertEqual(?M:occ(<<"r">>, <<"a">>), ?M:from(R)).

%% §3: not joined, the ping of an occupant JID is not-acceptable.
self_ping_non_occupant(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?assertEqual(<<"not-acceptable">>, ?M:condition(?M:iq(B, <<"get">>, ?M:occ(<<"r">>, <<"a">>), ping()))).

%% §3: after leaving, the client learns it is out (not-acceptable).
self_ping_after_leaving(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?assertEqual(<<"result">>, ?M:type(?M:iq(B, <<"get">>, ?M:occ(<<"r">>, <<"b">>), ping()))),
    ?C:send(B, ?C:presence([{<<"to">>, ?M:occ(<<"r">>, <<"b">>)}, {<<"type">>, <<"unavailable">>}])),
    ?assertEqual(<<"not-acceptable">>, ?M:condition(?M:iq(B, <<"get">>, ?M:occ(<<"r">>, <<"b">>), ping()))).

%% §3: a ping to another occupant reaches its client from the sender's
%% occupant JID, and the answer returns from the target's occupant JID.
ping_other_occupant(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?M:settle([A, B]),
    ?C:send(A, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"get">>}, {<<"id">>, <<"p1">>},
                                                {<<"to">>, ?M:occ(<<"r">>, <<"b">>)}],
                      children = [ping()]}),
    In = ?C:recv_stanza(B),
    ?assertEqual({<<"iq">>, ?M:occ(<<"r">>, <<"a">>)}, {In#xmlel.name, ?M:from(In)}),
    ?C:send(B, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"result">>}, {<<"id">>, <<"p1">>},
                                                {<<"to">>, ?M:occ(<<"r">>, <<"a">>)}]}),
    R = ?C:recv_stanza(A),
    ?assertEqual({<<"result">>, <<"p1">>, ?M:occ(<<"r">>, <<"b">>)},
                 {?M:type(R), throng_xml:attr(<<"id">>, R), ?M:from(R)}).
