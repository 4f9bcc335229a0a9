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
