%% @doc XEP-0421 Anonymous unique occupant identifiers against the real
%% server: the room advertises the feature, puts an occupant id on the
%% presence and messages of each occupant, the same for every resource and
%% every visit of one bare JID, different between users and between rooms,
%% and replaces any id a client tries to set.
-module(xep0421_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(M, throng_muc_client).
-define(NS, <<"urn:xmpp:occupant-id:0">>).

all() ->
    [feature_advertised, on_presence_and_messages, stable_per_bare_jid, differs_between_users_and_rooms,
     rejoin_at_once_under_another_nick,
     client_id_replaced].

init_per_testcase(_TC, Config) ->
    throng_ct:start(Config),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

self_id(Got) -> ?M:occupant_id(?M:self_presence(Got)).

%% §3: the room's disco#info lists urn:xmpp:occupant-id:0.
feature_advertised(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    ?assert(lists:member(?NS, ?M:features(?M:disco_info(A, ?M:room(<<"r">>))))).

%% §4: presence and groupchat messages carry the sender's occupant id.
on_presence_and_messages(_) ->
    A = ?M:online(<<"alice">>),
    Id = self_id(?M:create(A, <<"r">>, <<"a">>)),
    ?assert(is_binary(Id) andalso Id =/= <<>>),
    ?M:groupchat(A, <<"r">>, <<"hi">>),
    ?assertEqual(Id, ?M:occupant_id(?C:recv_stanza(A))),
    B = ?M:online(<<"bob">>),
    Got = ?M:enter(B, <<"r">>, <<"b">>),
    [PA] = [E || E <- Got, ?M:is_presence(E), ?M:from(E) =:= ?M:occ(<<"r">>, <<"a">>)],
    ?assertEqual(Id, ?M:occupant_id(PA)).

%% §4: one bare JID has one id in a room: another resource, another nick,
%% another visit.
stable_per_bare_jid(_) ->
    A = ?M:online(<<"alice">>),
    Id = self_id(?M:create(A, <<"r">>, <<"a">>)),
    A2 = ?M:online(<<"alice">>, <<"phone">>),
    ?assertEqual(Id, self_id(?M:enter(A2, <<"r">>, <<"a-phone">>))),
    ?C:send(A2, ?C:presence([{<<"to">>, ?M:occ(<<"r">>, <<"a-phone">>)}, {<<"type">>, <<"unavailable">>}])),
    ?M:settle([A2]),
    ?assertEqual(Id, self_id(?M:enter(A2, <<"r">>, <<"again">>))).

%% §4: different users, and the same user in different rooms, have
%% different ids.
differs_between_users_and_rooms(_) ->
    A = ?M:online(<<"alice">>),
    IdR = self_id(?M:create(A, <<"r">>, <<"a">>)),
    IdS = self_id(?M:create(A, <<"s">>, <<"a">>)),
    ?assertNotEqual(IdR, IdS),
    B = ?M:online(<<"bob">>),
    ?assertNotEqual(IdR, self_id(?M:enter(B, <<"r">>, <<"b">>))).

%% §4: an occupant-id a client puts in its message is removed and the
%% room's own is set.
client_id_replaced(_) ->
    A = ?M:online(<<"alice">>),
    Id = self_id(?M:create(A, <<"r">>, <<"a">>)),
    ?C:send(A, #xmlel{name = <<"message">>, attrs = [{<<"to">>, ?M:room(<<"r">>)}, {<<"type">>, <<"groupchat">>}],
                      children = [#xmlel{name = <<"body">>, children = [{xmlcdata, <<"x">>}]},
                                  #xmlel{name = <<"occupant-id">>, attrs = [{<<"xmlns">>, ?NS}, {<<"id">>, <<"forged">>}]}]}),
    M = ?C:recv_stanza(A),
    ?assertEqual([Id], [throng_xml:attr(<<"id">>, O) || #xmlel{name = <<"occupant-id">>} = O <- throng_xml:subels(M)]).

%% Leaving and entering again at once under another nick (what the interop
%% suite's "...AfterNicknameChangeAndRejoin" tests do, with a client that
%% puts capabilities in its presence): the newcomer gets its own presence,
%% with its presence's id and the same occupant id the others see.
rejoin_at_once_under_another_nick(_) ->
    Caps = #xmlel{name = <<"c">>, attrs = [{<<"xmlns">>, <<"http://jabber.org/protocol/caps">>},
                                           {<<"hash">>, <<"sha-1">>}, {<<"node">>, <<"https://example.org">>},
                                           {<<"ver">>, <<"abc=">>}]},
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"joiner-A">>, []),
    ?M:settle([A, B]),
    Join = fun(Nick) ->
                   ?C:send(B, #xmlel{name = <<"presence">>, attrs = [{<<"to">>, ?M:occ(<<"r">>, Nick)},
                                                                     {<<"id">>, <<"join-", Nick/binary>>}],
                                     children = [Caps, #xmlel{name = <<"x">>,
                                                              attrs = [{<<"xmlns">>, <<"http://jabber.org/protocol/muc">>}]}]})
           end,
    ?C:send(B, ?C:presence([{<<"to">>, ?M:occ(<<"r">>, <<"joiner-A">>)}, {<<"type">>, <<"unavailable">>},
                            {<<"id">>, <<"leave-1">>}])),
    Left = ?M:presence_from(B, ?M:occ(<<"r">>, <<"joiner-A">>)),
    %% §7.2.3, §7.14: the self-presence carries the client's presence id.
    ?assertEqual(<<"leave-1">>, throng_xml:attr(<<"id">>, Left)),
    T0 = erlang:monotonic_time(millisecond),
    Join(<<"joiner-B">>),
    Self = ?M:next(B, fun(E) -> ?M:is_presence(E) andalso lists:member(110, ?M:codes(E)) end),
    Took = erlang:monotonic_time(millisecond) - T0,
    ct:pal("self-presence after ~b ms", [Took]),
    ?assertEqual(?M:occ(<<"r">>, <<"joiner-B">>), ?M:from(Self)),
    ?assertEqual(<<"join-joiner-B">>, throng_xml:attr(<<"id">>, Self)),
    Seen = ?M:presence_from(A, ?M:occ(<<"r">>, <<"joiner-B">>)),
    ?assertEqual(?M:occupant_id(Self), ?M:occupant_id(Seen)).
