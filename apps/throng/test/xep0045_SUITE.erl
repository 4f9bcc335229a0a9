%% @doc XEP-0045 Multi-User Chat (throng_mod_muc) against the real server
%% over real sockets, by the XEP's sections: discovery (§6), entering and
%% creating rooms (§7.2, §10.1), presence and status codes, nicks (§7.6),
%% messages (§7.4, §7.5), subject (§8.1), password and members-only rooms,
%% affiliations and roles with their refusals (§8, §9, §10), kick and ban,
%% voice in moderated rooms, invitations (§7.8, §7.9), history (§7.2.14),
%% destroy (§10.9), persistent and temporary rooms.
-module(xep0045_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(M, throng_muc_client).
-define(NS_MUC_OWNER, <<"http://jabber.org/protocol/muc#owner">>).
-define(NS_MUC_ADMIN, <<"http://jabber.org/protocol/muc#admin">>).
-define(NS_MUC_USER, <<"http://jabber.org/protocol/muc#user">>).

all() ->
    [{group, disco}, {group, enter}, {group, occupants}, {group, messages},
     {group, access}, {group, moderation}, {group, lifecycle}].

groups() ->
    [{disco, [], [service_listed_on_domain, service_info, public_rooms_listed, room_info,
                  room_items_are_occupants, occupant_disco_needs_occupancy]},
     {enter, [], [create_locked_room, instant_room, configured_room, enter_without_nick,
                  unknown_room_item_not_found]},
     {occupants, [], [presence_exchange, non_anonymous_room, nick_conflict, nick_change,
                      presence_update_broadcast, leave, session_end_leaves_room]},
     {messages, [], [groupchat_fan_out, groupchat_from_non_occupant, private_message,
                     subject_change, subject_restricted, history_on_join, invitation_and_decline]},
     {access, [], [password_protected, members_only, max_users]},
     {moderation, [], [affiliation_refusals, lists_need_privileges, kick, ban_and_no_rejoin,
                       voice_in_moderated_room, moderator_grant_needs_admin,
                       owner_keeps_voice_and_moderator, no_self_ban]},
     {lifecycle, [], [destroy_room, temporary_room_gone_when_empty,
                      persistent_room_not_running_when_empty, persistent_room_survives_restart,
                      owner_and_admin_lists_in_the_form,
                      cancel_initial_configuration]}].

init_per_testcase(_TC, Config) ->
    throng_ct:start(Config),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Discovery (§6)

%% §6.1: the server's disco#items lists the MUC service.
service_listed_on_domain(_) ->
    A = ?M:online(<<"alice">>),
    ?assert(lists:member(?M:service(), ?M:disco_items(A, <<"localhost">>))).

%% §6.2: the service is a conference/text with the MUC feature (and
%% XEP-0421, XEP-0410's ping).
service_info(_) ->
    A = ?M:online(<<"alice">>),
    R = ?M:disco_info(A, ?M:service()),
    #xmlel{} = Id = throng_xml:subel(throng_xml:subel(R, <<"query">>), <<"identity">>),
    ?assertEqual({<<"conference">>, <<"text">>},
                 {throng_xml:attr(<<"category">>, Id), throng_xml:attr(<<"type">>, Id)}),
    Fs = ?M:features(R),
    [?assert(lists:member(F, Fs)) || F <- [<<"http://jabber.org/protocol/muc">>,
                                          <<"urn:xmpp:occupant-id:0">>]].

%% §6.3: disco#items of the service lists public rooms, not hidden ones.
public_rooms_listed(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"open">>, <<"a">>),
    ?M:create(A, <<"secret">>, <<"a">>, [{<<"muc#roomconfig_publicroom">>, <<"0">>}]),
    Items = ?M:disco_items(A, ?M:service()),
    ?assert(lists:member(?M:room(<<"open">>), Items)),
    ?assertNot(lists:member(?M:room(<<"secret">>), Items)).

%% §6.4: disco#info of a room: identity, the features of its configuration
%% and the muc#roominfo form; they follow the configuration.
room_info(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    F1 = ?M:features(?M:disco_info(A, ?M:room(<<"r">>))),
    [?assert(lists:member(F, F1)) || F <- [<<"http://jabber.org/protocol/muc">>, <<"muc_temporary">>,
                                          <<"muc_public">>, <<"muc_open">>, <<"muc_unmoderated">>,
                                          <<"muc_semianonymous">>, <<"muc_unsecured">>]],
    <<"result">> = ?M:type(?M:owner_submit(A, <<"r">>,
                                           [{<<"muc#roomconfig_persistentroom">>, <<"1">>},
                                            {<<"muc#roomconfig_publicroom">>, <<"0">>},
                                            {<<"muc#roomconfig_membersonly">>, <<"1">>},
                                            {<<"muc#roomconfig_moderatedroom">>, <<"1">>},
                                            {<<"muc#roomconfig_whois">>, <<"anyone">>},
                                            {<<"muc#roomconfig_passwordprotectedroom">>, <<"1">>},
                                            {<<"muc#roomconfig_roomsecret">>, <<"pw">>},
                                            {<<"muc#roomconfig_roomname">>, <<"The R">>}])),
    R = ?M:disco_info(A, ?M:room(<<"r">>)),
    F2 = ?M:features(R),
    [?assert(lists:member(F, F2)) || F <- [<<"muc_persistent">>, <<"muc_hidden">>,
                                          <<"muc_membersonly">>, <<"muc_moderated">>,
                                          <<"muc_nonanonymous">>, <<"muc_passwordprotected">>]],
    Q = throng_xml:subel(R, <<"query">>),
    ?assertEqual(<<"The R">>, throng_xml:attr(<<"name">>, throng_xml:subel(Q, <<"identity">>))),
    X = throng_xml:subel(Q, <<"x">>, <<"jabber:x:data">>),
    ?assertNotEqual(undefined, X),
    Vars = [throng_xml:attr(<<"var">>, Fd) || Fd <- throng_xml:subels(X)],
    ?assert(lists:member(<<"muc#roominfo_occupants">>, Vars)).

%% §6.5: a room's items are its occupants' room JIDs, for anyone when the
%% room is public; a hidden room shows them to its occupants only.
room_items_are_occupants(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    Cc = ?M:online(<<"carol">>),
    ?assertEqual([?M:occ(<<"r">>, <<"a">>)], ?M:disco_items(Cc, ?M:room(<<"r">>))),
    <<"result">> = ?M:type(?M:owner_submit(A, <<"r">>, [{<<"muc#roomconfig_publicroom">>, <<"0">>}])),
    ?assertEqual([], ?M:disco_items(Cc, ?M:room(<<"r">>))),
    ?assertEqual([?M:occ(<<"r">>, <<"a">>)], ?M:disco_items(A, ?M:room(<<"r">>))).

%% §6.6: a non-occupant's disco query to an occupant is bad-request (a
%% ping from it is XEP-0410's not-acceptable, xep0410_SUITE).
occupant_disco_needs_occupancy(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    Cc = ?M:online(<<"carol">>),
    ?assertEqual(<<"bad-request">>,
                 ?M:condition(?M:iq(Cc, <<"get">>, ?M:occ(<<"r">>, <<"a">>),
                                    ?M:query(<<"http://jabber.org/protocol/disco#items">>, [])))),
    ?assertEqual(<<"bad-request">>, ?M:condition(?M:disco_info(Cc, ?M:occ(<<"r">>, <<"a">>)))).

%%% Entering and creating (§7.2, §10.1)

%% §10.1.1: entering an unknown room creates it, locked: the creator is
%% owner and moderator with 201; others get item-not-found until it is
%% configured.
create_locked_room(_) ->
    A = ?M:online(<<"alice">>),
    Got = ?M:enter(A, <<"new">>, <<"a">>),
    Self = ?M:self_presence(Got),
    ?assert(lists:member(201, ?M:codes(Self))),
    ?assertMatch(#{<<"affiliation">> := <<"owner">>, <<"role">> := <<"moderator">>}, ?M:item(Self)),
    B = ?M:online(<<"bob">>),
    ?M:enter_send(B, <<"new">>, <<"b">>, []),
    E = ?C:recv_stanza(B),
    ?assertEqual(<<"error">>, ?M:type(E)),
    ?assertEqual(<<"item-not-found">>, ?M:condition(E)).

%% §10.1.2: an empty submitted form makes an instant room that others enter.
instant_room(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"inst">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    Got = ?M:enter(B, <<"inst">>, <<"b">>),
    Self = ?M:self_presence(Got),
    ?assertNot(lists:member(201, ?M:codes(Self))),
    ?assertMatch(#{<<"affiliation">> := <<"none">>, <<"role">> := <<"participant">>}, ?M:item(Self)).

%% §10.1.3: the owner gets the muc#roomconfig form and submits it; a
%% non-owner may not see it (forbidden); an invalid value is not-acceptable.
configured_room(_) ->
    A = ?M:online(<<"alice">>),
    ?M:enter(A, <<"conf">>, <<"a">>),
    R = ?M:iq(A, <<"get">>, ?M:room(<<"conf">>), ?M:query(?NS_MUC_OWNER, [])),
    X = throng_xml:subel(throng_xml:subel(R, <<"query">>), <<"x">>, <<"jabber:x:data">>),
    Vars = [throng_xml:attr(<<"var">>, F) || F <- throng_xml:subels(X)],
    [?assert(lists:member(V, Vars))
     || V <- [<<"FORM_TYPE">>, <<"muc#roomconfig_roomname">>, <<"muc#roomconfig_roomdesc">>,
              <<"muc#roomconfig_persistentroom">>, <<"muc#roomconfig_publicroom">>,
              <<"muc#roomconfig_membersonly">>, <<"muc#roomconfig_passwordprotectedroom">>,
              <<"muc#roomconfig_roomsecret">>, <<"muc#roomconfig_moderatedroom">>,
              <<"muc#roomconfig_whois">>, <<"muc#roomconfig_maxusers">>, <<"muc#maxhistoryfetch">>,
              <<"muc#roomconfig_changesubject">>, <<"muc#roomconfig_allowinvites">>]],
    Bad = ?M:owner_submit(A, <<"conf">>, [{<<"muc#roomconfig_maxusers">>, <<"many">>}]),
    ?assertEqual(<<"not-acceptable">>, ?M:condition(Bad)),
    <<"result">> = ?M:type(?M:owner_submit(A, <<"conf">>, [{<<"muc#roomconfig_roomname">>, <<"Conf">>}])),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"conf">>, <<"b">>),
    R2 = ?M:iq(B, <<"get">>, ?M:room(<<"conf">>), ?M:query(?NS_MUC_OWNER, [])),
    ?assertEqual(<<"forbidden">>, ?M:condition(R2)).

%% §7.2.1: presence to the bare room JID (no nick) is jid-malformed.
enter_without_nick(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?C:send(B, #xmlel{name = <<"presence">>, attrs = [{<<"to">>, ?M:room(<<"r">>)}],
                      children = [#xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, <<"http://jabber.org/protocol/muc">>}]}]}),
    ?assertEqual(<<"jid-malformed">>, ?M:condition(?C:recv_stanza(B))).

%% A message or IQ to a room that does not exist is item-not-found, and
%% starts nothing.
unknown_room_item_not_found(_) ->
    A = ?M:online(<<"alice">>),
    ?M:groupchat(A, <<"nowhere">>, <<"hello">>),
    ?assertEqual(<<"item-not-found">>, ?M:condition(?C:recv_stanza(A))),
    ?assertEqual(<<"item-not-found">>, ?M:condition(?M:disco_info(A, ?M:room(<<"nowhere">>)))),
    ?assertEqual([], throng_muc_room:running(?M:service())).

%%% Occupants and presence (§7.2.3, §7.6, §7.14)

%% §7.2.3: the newcomer gets the others' presence, then its own with 110;
%% the others get its presence. Semi-anonymous: the real JID only to
%% moderators.
presence_exchange(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    Got = ?M:enter(B, <<"r">>, <<"b">>),
    [First | _] = [E || E <- Got, ?M:is_presence(E)],
    ?assertEqual(?M:occ(<<"r">>, <<"a">>), ?M:from(First)),
    ?assertMatch(#{<<"affiliation">> := <<"owner">>, <<"role">> := <<"moderator">>}, ?M:item(First)),
    ?assertNot(maps:is_key(<<"jid">>, ?M:item(First))),
    Self = ?M:self_presence(Got),
    ?assertEqual(?M:occ(<<"r">>, <<"b">>), ?M:from(Self)),
    ?assertNot(lists:member(100, ?M:codes(Self))),
    PB = ?M:presence_from(A, ?M:occ(<<"r">>, <<"b">>)),
    ?assertEqual(<<"bob@localhost/r">>, maps:get(<<"jid">>, ?M:item(PB))),
    ?assertEqual([], ?M:codes(PB)).

%% §7.2.4: in a non-anonymous room everyone sees real JIDs, and the
%% self-presence carries 100.
non_anonymous_room(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>, [{<<"muc#roomconfig_whois">>, <<"anyone">>}]),
    B = ?M:online(<<"bob">>),
    Got = ?M:enter(B, <<"r">>, <<"b">>),
    [First | _] = [E || E <- Got, ?M:is_presence(E)],
    ?assertEqual(<<"alice@localhost/r">>, maps:get(<<"jid">>, ?M:item(First))),
    ?assert(lists:member(100, ?M:codes(?M:self_presence(Got)))).

%% §7.2.9: a nick in use by another occupant is a conflict (409).
nick_conflict(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"same">>),
    B = ?M:online(<<"bob">>),
    ?M:enter_send(B, <<"r">>, <<"same">>, []),
    E = ?C:recv_stanza(B),
    ?assertEqual(<<"conflict">>, ?M:condition(E)),
    ?assertEqual(?M:occ(<<"r">>, <<"same">>), ?M:from(E)).

%% §7.6: a nick change is unavailable from the old nick with 303 and the
%% new nick, then available from the new one; to a nick in use, 409.
nick_change(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?M:settle([A]),
    ?C:send(B, ?C:presence([{<<"to">>, ?M:occ(<<"r">>, <<"a">>)}])),
    ?assertEqual(<<"conflict">>, ?M:condition(?C:recv_stanza(B))),
    ?C:send(B, ?C:presence([{<<"to">>, ?M:occ(<<"r">>, <<"bee">>)}])),
    Gone = ?M:presence_from(A, ?M:occ(<<"r">>, <<"b">>)),
    ?assertEqual(<<"unavailable">>, ?M:type(Gone)),
    ?assert(lists:member(303, ?M:codes(Gone))),
    ?assertEqual(<<"bee">>, maps:get(<<"nick">>, ?M:item(Gone))),
    New = ?C:recv_stanza(A),
    ?assertEqual(?M:occ(<<"r">>, <<"bee">>), ?M:from(New)),
    SelfGone = ?M:presence_from(B, ?M:occ(<<"r">>, <<"b">>)),
    ?assertEqual([110, 303], ?M:codes(SelfGone)),
    SelfNew = ?C:recv_stanza(B),
    ?assertEqual(?M:occ(<<"r">>, <<"bee">>), ?M:from(SelfNew)),
    ?assert(lists:member(110, ?M:codes(SelfNew))).

%% §7.7: a presence update to the room goes to every occupant.
presence_update_broadcast(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?M:settle([A]),
    ?C:send(B, #xmlel{name = <<"presence">>, attrs = [{<<"to">>, ?M:occ(<<"r">>, <<"b">>)}],
                      children = [#xmlel{name = <<"show">>, children = [{xmlcdata, <<"away">>}]}]}),
    P = ?M:presence_from(A, ?M:occ(<<"r">>, <<"b">>)),
    ?assertEqual(<<"away">>, throng_xml:subel_cdata(P, <<"show">>)).

%% §7.14: leaving: everyone, the leaver too (110), gets unavailable with
%% role none.
leave(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?M:settle([A]),
    ?C:send(B, ?C:presence([{<<"to">>, ?M:occ(<<"r">>, <<"b">>)}, {<<"type">>, <<"unavailable">>}])),
    Self = ?C:recv_stanza(B),
    ?assertEqual(<<"unavailable">>, ?M:type(Self)),
    ?assert(lists:member(110, ?M:codes(Self))),
    P = ?C:recv_stanza(A),
    ?assertEqual(<<"unavailable">>, ?M:type(P)),
    ?assertEqual(<<"none">>, maps:get(<<"role">>, ?M:item(P))).

%% A client whose connection ends leaves its rooms (its directed presence
%% gets unavailable, RFC 6121 §4.6.3).
session_end_leaves_room(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?M:settle([A]),
    ?C:close(B),
    P = ?M:presence_from(A, ?M:occ(<<"r">>, <<"b">>)),
    ?assertEqual(<<"unavailable">>, ?M:type(P)).

%%% Messages (§7.4, §7.5, §8.1)

%% §7.4: a groupchat message reaches every occupant, the sender too, from
%% the sender's room JID.
groupchat_fan_out(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    Cc = ?M:online(<<"carol">>),
    ?M:enter(Cc, <<"r">>, <<"c">>),
    ?M:settle([A, B]),
    ?M:groupchat(B, <<"r">>, <<"hello all">>),
    [begin
         M = ?C:recv_stanza(X),
         ?assertEqual(<<"groupchat">>, ?M:type(M)),
         ?assertEqual(?M:occ(<<"r">>, <<"b">>), ?M:from(M)),
         ?assertEqual(<<"hello all">>, ?M:body(M))
     end || X <- [A, B, Cc]].

%% §7.4: a groupchat message from a non-occupant is not-acceptable.
groupchat_from_non_occupant(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:groupchat(B, <<"r">>, <<"intruding">>),
    ?assertEqual(<<"not-acceptable">>, ?M:condition(?C:recv_stanza(B))),
    ?C:expect_nothing(A, 200).

%% §7.5: a private message goes to the occupant from the sender's room JID,
%% marked with muc#user; to a missing nick item-not-found; groupchat to an
%% occupant JID bad-request.
private_message(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?M:settle([A]),
    ?C:send(A, ?C:message(?M:occ(<<"r">>, <<"b">>), <<"chat">>, <<"psst">>)),
    M = ?C:recv_stanza(B),
    ?assertEqual(?M:occ(<<"r">>, <<"a">>), ?M:from(M)),
    ?assertEqual(<<"psst">>, ?M:body(M)),
    ?assertNotEqual(undefined, ?M:user_x(M)),
    ?C:send(A, ?C:message(?M:occ(<<"r">>, <<"nobody">>), <<"chat">>, <<"psst">>)),
    ?assertEqual(<<"item-not-found">>, ?M:condition(?C:recv_stanza(A))),
    ?C:send(A, ?C:message(?M:occ(<<"r">>, <<"b">>), <<"groupchat">>, <<"psst">>)),
    ?assertEqual(<<"bad-request">>, ?M:condition(?C:recv_stanza(A))).

%% §8.1: a subject change goes to everyone, and a newcomer gets it last.
subject_change(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?M:settle([A]),
    ?C:send(B, #xmlel{name = <<"message">>, attrs = [{<<"to">>, ?M:room(<<"r">>)}, {<<"type">>, <<"groupchat">>}],
                      children = [#xmlel{name = <<"subject">>, children = [{xmlcdata, <<"Topic">>}]}]}),
    S = ?C:recv_stanza(A),
    ?assertEqual(<<"Topic">>, throng_xml:subel_cdata(S, <<"subject">>)),
    Cc = ?M:online(<<"carol">>),
    Got = ?M:enter(Cc, <<"r">>, <<"c">>),
    Last = lists:last(Got),
    ?assertEqual(<<"Topic">>, throng_xml:subel_cdata(Last, <<"subject">>)),
    ?assertEqual(?M:occ(<<"r">>, <<"b">>), ?M:from(Last)).

%% §8.1: with changesubject off a participant may not change the subject
%% (forbidden); a moderator may.
subject_restricted(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>, [{<<"muc#roomconfig_changesubject">>, <<"0">>}]),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?M:settle([A]),
    Subj = fun(Text) -> #xmlel{name = <<"message">>,
                               attrs = [{<<"to">>, ?M:room(<<"r">>)}, {<<"type">>, <<"groupchat">>}],
                               children = [#xmlel{name = <<"subject">>, children = [{xmlcdata, Text}]}]}
           end,
    ?C:send(B, Subj(<<"mine">>)),
    ?assertEqual(<<"forbidden">>, ?M:condition(?C:recv_stanza(B))),
    ?C:expect_nothing(A, 200),
    ?C:send(A, Subj(<<"ours">>)),
    ?assertEqual(<<"ours">>, throng_xml:subel_cdata(?C:recv_stanza(B), <<"subject">>)).

%% §7.2.14: history on entering: the room's default, maxstanzas,
%% maxchars=0 (none), since after the messages (none); each with a delay.
history_on_join(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    [begin ?M:groupchat(A, <<"r">>, <<"m", (integer_to_binary(I))/binary>>), ?C:recv_stanza(A) end
     || I <- lists:seq(1, 3)],
    Bodies = fun(Got) -> [?M:body(E) || #xmlel{name = <<"message">>} = E <- Got, ?M:body(E) =/= <<>>] end,
    B = ?M:online(<<"bob">>),
    Got1 = ?M:enter(B, <<"r">>, <<"b">>),
    ?assertEqual([<<"m1">>, <<"m2">>, <<"m3">>], Bodies(Got1)),
    [H | _] = [E || #xmlel{name = <<"message">>} = E <- Got1],
    ?assertEqual(?M:occ(<<"r">>, <<"a">>), ?M:from(H)),
    ?assertNotEqual(undefined, throng_xml:subel(H, <<"delay">>, <<"urn:xmpp:delay">>)),
    Hist = fun(Attrs) -> [#xmlel{name = <<"history">>, attrs = Attrs}] end,
    Cc = ?M:online(<<"carol">>),
    ?assertEqual([<<"m2">>, <<"m3">>],
                 Bodies(?M:enter(Cc, <<"r">>, <<"c1">>, Hist([{<<"maxstanzas">>, <<"2">>}])))),
    C2 = ?M:online(<<"carol">>, <<"two">>),
    ?assertEqual([], Bodies(?M:enter(C2, <<"r">>, <<"c2">>, Hist([{<<"maxchars">>, <<"0">>}])))),
    C3 = ?M:online(<<"carol">>, <<"three">>),
    ?assertEqual([], Bodies(?M:enter(C3, <<"r">>, <<"c3">>,
                                     Hist([{<<"since">>, <<"2999-01-01T00:00:00Z">>}])))),
    C4 = ?M:online(<<"carol">>, <<"four">>),
    ?assertEqual([<<"m1">>, <<"m2">>, <<"m3">>],
                 Bodies(?M:enter(C4, <<"r">>, <<"c4">>, Hist([{<<"seconds">>, <<"3600">>}])))).

%% §7.8.2, §7.9: a mediated invitation reaches the invitee from the room
%% with the inviter's JID; its decline reaches the inviter. With invites
%% off, a participant may not invite (forbidden).
invitation_and_decline(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    Cc = ?M:online(<<"carol">>),
    Invite = fun(To) ->
                     #xmlel{name = <<"message">>, attrs = [{<<"to">>, ?M:room(<<"r">>)}],
                            children = [#xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, ?NS_MUC_USER}],
                                               children = [#xmlel{name = <<"invite">>, attrs = [{<<"to">>, To}],
                                                                  children = [#xmlel{name = <<"reason">>,
                                                                                     children = [{xmlcdata, <<"join us">>}]}]}]}]}
             end,
    ?C:send(A, Invite(<<"carol@localhost">>)),
    M = ?C:recv_stanza(Cc),
    ?assertEqual(?M:room(<<"r">>), ?M:from(M)),
    I = throng_xml:subel(?M:user_x(M), <<"invite">>),
    ?assertEqual(<<"alice@localhost">>, throng_xml:attr(<<"from">>, I)),
    ?assertEqual(<<"join us">>, throng_xml:subel_cdata(I, <<"reason">>)),
    ?C:send(Cc, #xmlel{name = <<"message">>, attrs = [{<<"to">>, ?M:room(<<"r">>)}],
                       children = [#xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, ?NS_MUC_USER}],
                                          children = [#xmlel{name = <<"decline">>,
                                                             attrs = [{<<"to">>, <<"alice@localhost">>}]}]}]}),
    D = ?C:recv_stanza(A),
    ?assertEqual(<<"carol@localhost">>,
                 throng_xml:attr(<<"from">>, throng_xml:subel(?M:user_x(D), <<"decline">>))),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?C:send(B, Invite(<<"carol@localhost">>)),
    ?assertEqual(<<"forbidden">>, ?M:condition(?C:recv_stanza(B))),
    ?C:expect_nothing(Cc, 200).

%%% Password-protected, members-only and full rooms

%% §7.2.6: without the password, or with a wrong one, not-authorized; with
%% it, in.
password_protected(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>, [{<<"muc#roomconfig_passwordprotectedroom">>, <<"1">>},
                                    {<<"muc#roomconfig_roomsecret">>, <<"s3cret">>}]),
    B = ?M:online(<<"bob">>),
    ?M:enter_send(B, <<"r">>, <<"b">>, []),
    ?assertEqual(<<"not-authorized">>, ?M:condition(?C:recv_stanza(B))),
    Pw = fun(P) -> [#xmlel{name = <<"password">>, children = [{xmlcdata, P}]}] end,
    ?M:enter_send(B, <<"r">>, <<"b">>, Pw(<<"wrong">>)),
    ?assertEqual(<<"not-authorized">>, ?M:condition(?C:recv_stanza(B))),
    Got = ?M:enter(B, <<"r">>, <<"b">>, Pw(<<"s3cret">>)),
    ?assertNotEqual([], [E || E <- Got, ?M:is_presence(E), lists:member(110, ?M:codes(E))]).

%% §7.2.7: a non-member gets registration-required; once the owner makes
%% it a member (§9.3), it enters.
members_only(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>, [{<<"muc#roomconfig_membersonly">>, <<"1">>}]),
    B = ?M:online(<<"bob">>),
    ?M:enter_send(B, <<"r">>, <<"b">>, []),
    ?assertEqual(<<"registration-required">>, ?M:condition(?C:recv_stanza(B))),
    ?assertEqual(<<"result">>, ?M:type(?M:admin(A, <<"r">>, [{<<"jid">>, <<"bob@localhost">>},
                                                            {<<"affiliation">>, <<"member">>}]))),
    Self = ?M:self_presence(?M:enter(B, <<"r">>, <<"b">>)),
    ?assertEqual(<<"member">>, maps:get(<<"affiliation">>, ?M:item(Self))).

%% §7.2.10: a full room refuses the next occupant (service-unavailable),
%% but not an owner.
max_users(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>, [{<<"muc#roomconfig_maxusers">>, <<"2">>}]),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    Cc = ?M:online(<<"carol">>),
    ?M:enter_send(Cc, <<"r">>, <<"c">>, []),
    ?assertEqual(<<"service-unavailable">>, ?M:condition(?C:recv_stanza(Cc))),
    A2 = ?M:online(<<"alice">>, <<"two">>),
    ?M:self_presence(?M:enter(A2, <<"r">>, <<"a2">>)).

%%% Affiliations and roles (§8, §9, §10)

%% The XEP's refusals: a participant may not grant membership (forbidden);
%% an admin may not make admins (forbidden) nor ban the owner
%% (not-allowed); the only owner may not give up ownership (conflict).
affiliation_refusals(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    Set = fun(C, Jid, Aff) -> ?M:admin(C, <<"r">>, [{<<"jid">>, Jid}, {<<"affiliation">>, Aff}]) end,
    ?assertEqual(<<"forbidden">>, ?M:condition(Set(B, <<"carol@localhost">>, <<"member">>))),
    ?assertEqual(<<"result">>, ?M:type(Set(A, <<"bob@localhost">>, <<"admin">>))),
    %% Bob, now admin, is a moderator: everyone sees his new presence.
    P = ?M:next(A, fun(E) -> ?M:is_presence(E) andalso ?M:from(E) =:= ?M:occ(<<"r">>, <<"b">>) end),
    ?assertMatch(#{<<"affiliation">> := <<"admin">>, <<"role">> := <<"moderator">>}, ?M:item(P)),
    ?assertEqual(<<"forbidden">>, ?M:condition(Set(B, <<"carol@localhost">>, <<"admin">>))),
    ?assertEqual(<<"not-allowed">>, ?M:condition(Set(B, <<"alice@localhost">>, <<"outcast">>))),
    ?assertEqual(<<"result">>, ?M:type(Set(B, <<"carol@localhost">>, <<"member">>))),
    ?assertEqual(<<"conflict">>, ?M:condition(Set(A, <<"alice@localhost">>, <<"member">>))),
    %% With a second owner, the first may step down.
    ?assertEqual(<<"result">>, ?M:type(Set(A, <<"carol@localhost">>, <<"owner">>))),
    ?assertEqual(<<"result">>, ?M:type(Set(A, <<"alice@localhost">>, <<"member">>))).

%% §9.5, §10.5, §8.5: the member list is for admins, the owner list for
%% owners, the moderator list for moderators.
lists_need_privileges(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    <<"result">> = ?M:type(?M:admin(A, <<"r">>, [{<<"jid">>, <<"carol@localhost">>}, {<<"affiliation">>, <<"member">>}])),
    Get = fun(C, Attr, V) ->
                  ?M:iq(C, <<"get">>, ?M:room(<<"r">>),
                        ?M:query(?NS_MUC_ADMIN, [#xmlel{name = <<"item">>, attrs = [{Attr, V}]}]))
          end,
    R = Get(A, <<"affiliation">>, <<"member">>),
    ?assertEqual([<<"carol@localhost">>],
                 [throng_xml:attr(<<"jid">>, I) || I <- throng_xml:subels(throng_xml:subel(R, <<"query">>))]),
    Owners = Get(A, <<"affiliation">>, <<"owner">>),
    ?assertEqual([<<"alice@localhost">>],
                 [throng_xml:attr(<<"jid">>, I) || I <- throng_xml:subels(throng_xml:subel(Owners, <<"query">>))]),
    ?assertEqual(<<"forbidden">>, ?M:condition(Get(B, <<"affiliation">>, <<"member">>))),
    ?assertEqual(<<"forbidden">>, ?M:condition(Get(B, <<"role">>, <<"moderator">>))),
    Mods = Get(A, <<"role">>, <<"moderator">>),
    ?assertEqual([<<"a">>], [throng_xml:attr(<<"nick">>, I)
                             || I <- throng_xml:subels(throng_xml:subel(Mods, <<"query">>))]).

%% §8.2: a moderator kicks a participant: 307 to everyone, the kicked one
%% is out; a participant may not kick (forbidden), nobody kicks an owner
%% (not-allowed).
kick(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    Cc = ?M:online(<<"carol">>),
    ?M:enter(Cc, <<"r">>, <<"c">>),
    ?M:settle([A, B]),
    Kick = fun(C, Nick) -> ?M:admin(C, <<"r">>, [{<<"nick">>, Nick}, {<<"role">>, <<"none">>}]) end,
    ?assertEqual(<<"forbidden">>, ?M:condition(Kick(B, <<"c">>))),
    ?assertEqual(<<"not-allowed">>, ?M:condition(Kick(A, <<"a">>))),
    ?assertEqual(<<"result">>, ?M:type(Kick(A, <<"c">>))),
    Seen = ?M:presence_from(B, ?M:occ(<<"r">>, <<"c">>)),
    ?assertEqual(<<"unavailable">>, ?M:type(Seen)),
    ?assert(lists:member(307, ?M:codes(Seen))),
    Own = ?M:presence_from(Cc, ?M:occ(<<"r">>, <<"c">>)),
    ?assertEqual([110, 307], ?M:codes(Own)),
    ?M:groupchat(Cc, <<"r">>, <<"still here?">>),
    ?assertEqual(<<"not-acceptable">>, ?M:condition(?M:next(Cc, fun(E) -> ?M:type(E) =:= <<"error">> end))).

%% §9.1: banning (outcast) removes the occupant with 301, and it cannot
%% enter again (forbidden).
ban_and_no_rejoin(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?M:settle([A]),
    ?assertEqual(<<"result">>, ?M:type(?M:admin(A, <<"r">>, [{<<"jid">>, <<"bob@localhost">>},
                                                            {<<"affiliation">>, <<"outcast">>}],
                                               [#xmlel{name = <<"reason">>, children = [{xmlcdata, <<"spam">>}]}]))),
    Own = ?M:presence_from(B, ?M:occ(<<"r">>, <<"b">>)),
    ?assertEqual(<<"unavailable">>, ?M:type(Own)),
    ?assert(lists:member(301, ?M:codes(Own))),
    ?assertEqual(<<"outcast">>, maps:get(<<"affiliation">>, ?M:item(Own))),
    ?M:enter_send(B, <<"r">>, <<"b">>, []),
    ?assertEqual(<<"forbidden">>, ?M:condition(?C:recv_stanza(B))).

%% §8.3, §8.4: in a moderated room a newcomer is a visitor whose groupchat
%% is forbidden; with voice granted it speaks; revoked, silent again.
voice_in_moderated_room(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>, [{<<"muc#roomconfig_moderatedroom">>, <<"1">>}]),
    B = ?M:online(<<"bob">>),
    Self = ?M:self_presence(?M:enter(B, <<"r">>, <<"b">>)),
    ?assertEqual(<<"visitor">>, maps:get(<<"role">>, ?M:item(Self))),
    ?M:groupchat(B, <<"r">>, <<"hi">>),
    ?assertEqual(<<"forbidden">>, ?M:condition(?C:recv_stanza(B))),
    Voice = fun(Role) -> ?M:admin(A, <<"r">>, [{<<"nick">>, <<"b">>}, {<<"role">>, Role}]) end,
    ?assertEqual(<<"result">>, ?M:type(Voice(<<"participant">>))),
    P = ?M:presence_from(B, ?M:occ(<<"r">>, <<"b">>)),
    ?assertEqual(<<"participant">>, maps:get(<<"role">>, ?M:item(P))),
    ?M:groupchat(B, <<"r">>, <<"hi">>),
    ?assertEqual(<<"hi">>, ?M:body(?M:next(B, fun(E) -> E#xmlel.name =:= <<"message">> end))),
    ?assertEqual(<<"result">>, ?M:type(Voice(<<"visitor">>))),
    ?M:settle([B]),
    ?M:groupchat(B, <<"r">>, <<"again">>),
    ?assertEqual(<<"forbidden">>, ?M:condition(?C:recv_stanza(B))).

%% §9.6: granting moderator needs an admin or owner: a moderator by grant
%% (member) may not (forbidden).
moderator_grant_needs_admin(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    Cc = ?M:online(<<"carol">>),
    ?M:enter(Cc, <<"r">>, <<"c">>),
    ?assertEqual(<<"result">>, ?M:type(?M:admin(A, <<"r">>, [{<<"nick">>, <<"b">>}, {<<"role">>, <<"moderator">>}]))),
    ?assertEqual(<<"forbidden">>,
                 ?M:condition(?M:admin(B, <<"r">>, [{<<"nick">>, <<"c">>}, {<<"role">>, <<"moderator">>}]))),
    %% ... but, a moderator, it may kick the participant.
    ?assertEqual(<<"result">>, ?M:type(?M:admin(B, <<"r">>, [{<<"nick">>, <<"c">>}, {<<"role">>, <<"none">>}]))).

%% §8.4, §9.7: a moderator may not take an owner's voice or moderator role
%% (not-allowed, the target's affiliation, before forbidden); granting an
%% admin the moderator role it has already is a success that changes
%% nothing.
owner_keeps_voice_and_moderator(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    Cc = ?M:online(<<"carol">>),
    ?M:enter(Cc, <<"r">>, <<"c">>),
    Role = fun(C, Nick, R) -> ?M:admin(C, <<"r">>, [{<<"nick">>, Nick}, {<<"role">>, R}]) end,
    <<"result">> = ?M:type(Role(A, <<"b">>, <<"moderator">>)),
    ?assertEqual(<<"not-allowed">>, ?M:condition(Role(B, <<"a">>, <<"visitor">>))),
    ?assertEqual(<<"not-allowed">>, ?M:condition(Role(B, <<"a">>, <<"participant">>))),
    ?assertEqual(<<"not-allowed">>, ?M:condition(Role(B, <<"a">>, <<"none">>))),
    <<"result">> = ?M:type(?M:admin(A, <<"r">>, [{<<"jid">>, <<"carol@localhost">>},
                                                 {<<"affiliation">>, <<"admin">>}])),
    ?assertEqual(<<"result">>, ?M:type(Role(A, <<"c">>, <<"moderator">>))).

%% An admin or owner may not ban itself (conflict).
no_self_ban(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    <<"result">> = ?M:type(?M:admin(A, <<"r">>, [{<<"jid">>, <<"bob@localhost">>},
                                                 {<<"affiliation">>, <<"admin">>}])),
    ?assertEqual(<<"conflict">>,
                 ?M:condition(?M:admin(B, <<"r">>, [{<<"jid">>, <<"bob@localhost">>},
                                                    {<<"affiliation">>, <<"outcast">>}]))),
    ?assertEqual(<<"conflict">>,
                 ?M:condition(?M:admin(A, <<"r">>, [{<<"jid">>, <<"alice@localhost/r">>},
                                                    {<<"affiliation">>, <<"outcast">>}]))).

%%% Lifecycle (§10.9, temporary and persistent rooms)

%% §10.9: destroying: every occupant gets unavailable with <destroy/> and
%% the reason; the room is gone; only an owner may (forbidden).
destroy_room(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>, [{<<"muc#roomconfig_persistentroom">>, <<"1">>}]),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    Destroy = ?M:query(?NS_MUC_OWNER, [#xmlel{name = <<"destroy">>, attrs = [{<<"jid">>, ?M:room(<<"other">>)}],
                                              children = [#xmlel{name = <<"reason">>, children = [{xmlcdata, <<"bye">>}]},
                                                          #xmlel{name = <<"password">>, children = [{xmlcdata, <<"venue-pw">>}]}]}]),
    ?assertEqual(<<"forbidden">>, ?M:condition(?M:iq(B, <<"set">>, ?M:room(<<"r">>), Destroy))),
    %% The owner is told it is out before it gets the result (§10.9's order).
    [OwnOut, Result] = owner_answer(A, Destroy),
    ?assertEqual(<<"result">>, ?M:type(Result)),
    ?assertNotEqual(undefined, throng_xml:subel(?M:user_x(OwnOut), <<"destroy">>)),
    P = ?M:next(B, fun(E) -> ?M:is_presence(E) andalso ?M:type(E) =:= <<"unavailable">> end),
    D = throng_xml:subel(?M:user_x(P), <<"destroy">>),
    ?assertEqual(?M:room(<<"other">>), throng_xml:attr(<<"jid">>, D)),
    ?assertEqual(<<"bye">>, throng_xml:subel_cdata(D, <<"reason">>)),
    %% The alternate venue's password goes with it.
    ?assertEqual(<<"venue-pw">>, throng_xml:subel_cdata(D, <<"password">>)),
    ?assertEqual(<<"item-not-found">>, ?M:condition(?M:disco_info(A, ?M:room(<<"r">>)))),
    ?assertEqual(not_found, throng_storage:kv_get(muc_room, {?M:service(), <<"r">>})).

%% A temporary room is gone when its last occupant leaves.
temporary_room_gone_when_empty(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    ?assertMatch([_], throng_muc_room:running(?M:service())),
    ?C:send(A, ?C:presence([{<<"to">>, ?M:occ(<<"r">>, <<"a">>)}, {<<"type">>, <<"unavailable">>}])),
    ?C:recv_stanza(A),
    ?assertEqual(<<"item-not-found">>, ?M:condition(?M:disco_info(A, ?M:room(<<"r">>)))),
    ?assertEqual([], throng_muc_room:running(?M:service())),
    %% Entering again creates a new, locked room.
    ?assert(lists:member(201, ?M:codes(?M:self_presence(?M:enter(A, <<"r">>, <<"a">>))))).

%% A persistent room with nobody in it has no process; it still answers
%% disco (from the store) and is entered without 201.
persistent_room_not_running_when_empty(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"p">>, <<"a">>, [{<<"muc#roomconfig_persistentroom">>, <<"1">>}]),
    ?C:send(A, ?C:presence([{<<"to">>, ?M:occ(<<"p">>, <<"a">>)}, {<<"type">>, <<"unavailable">>}])),
    ?C:recv_stanza(A),
    throng_ct:wait_until(fun() -> throng_muc_room:running(?M:service()) =:= [] end, 2000),
    ?assert(lists:member(<<"muc_persistent">>, ?M:features(?M:disco_info(A, ?M:room(<<"p">>))))),
    ?assert(lists:member(?M:room(<<"p">>), ?M:disco_items(A, ?M:service()))),
    Self = ?M:self_presence(?M:enter(A, <<"p">>, <<"a">>)),
    ?assertNot(lists:member(201, ?M:codes(Self))).

%% A persistent room survives a restart: configuration, affiliations
%% (a ban), subject and history.
persistent_room_survives_restart(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"p">>, <<"a">>, [{<<"muc#roomconfig_persistentroom">>, <<"1">>},
                                    {<<"muc#roomconfig_roomname">>, <<"Kept">>}]),
    <<"result">> = ?M:type(?M:admin(A, <<"p">>, [{<<"jid">>, <<"bob@localhost">>}, {<<"affiliation">>, <<"outcast">>}])),
    ?C:send(A, #xmlel{name = <<"message">>, attrs = [{<<"to">>, ?M:room(<<"p">>)}, {<<"type">>, <<"groupchat">>}],
                      children = [#xmlel{name = <<"subject">>, children = [{xmlcdata, <<"Kept topic">>}]}]}),
    ?M:groupchat(A, <<"p">>, <<"remember me">>),
    ?M:settle([A]),
    ?C:close(A),
    throng_ct:wait_until(fun() -> throng_muc_room:running(?M:service()) =:= [] end, 2000),
    throng_ct:restart(),
    A2 = ?M:online(<<"alice">>),
    R = ?M:disco_info(A2, ?M:room(<<"p">>)),
    ?assertEqual(<<"Kept">>, throng_xml:attr(<<"name">>, throng_xml:subel(throng_xml:subel(R, <<"query">>), <<"identity">>))),
    Got = ?M:enter(A2, <<"p">>, <<"a">>),
    Self = ?M:self_presence(Got),
    ?assertNot(lists:member(201, ?M:codes(Self))),
    ?assertEqual(<<"owner">>, maps:get(<<"affiliation">>, ?M:item(Self))),
    ?assert(lists:member(<<"remember me">>, [?M:body(E) || E <- Got])),
    ?assertEqual(<<"Kept topic">>, throng_xml:subel_cdata(lists:last(Got), <<"subject">>)),
    B = ?M:online(<<"bob">>),
    ?M:enter_send(B, <<"p">>, <<"b">>, []),
    ?assertEqual(<<"forbidden">>, ?M:condition(?C:recv_stanza(B))).

%% §10.2, §10.5, §10.8: the configuration form carries the full owner and
%% admin lists (jid-multi); submitting them sets the affiliations (an
%% occupant whose affiliation changes gets its new role), and a form that
%% would leave no owner is refused (conflict) and changes nothing.
owner_and_admin_lists_in_the_form(_) ->
    A = ?M:online(<<"alice">>),
    ?M:create(A, <<"r">>, <<"a">>),
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?M:settle([A, B]),
    Lists = fun() ->
                    Form = ?M:iq(A, <<"get">>, ?M:room(<<"r">>), ?M:query(?NS_MUC_OWNER, [])),
                    X = throng_xml:subel(throng_xml:subel(Form, <<"query">>), <<"x">>),
                    maps:from_list([{throng_xml:attr(<<"var">>, F),
                                     [throng_xml:cdata(V) || V <- throng_xml:subels(F)]}
                                    || #xmlel{name = <<"field">>} = F <- throng_xml:subels(X),
                                       throng_xml:attr(<<"type">>, F) =:= <<"jid-multi">>])
            end,
    ?assertEqual(#{<<"muc#roomconfig_roomowners">> => [<<"alice@localhost">>],
                   <<"muc#roomconfig_roomadmins">> => []}, Lists()),
    <<"result">> = ?M:type(?M:owner_submit(A, <<"r">>, [{<<"muc#roomconfig_roomadmins">>,
                                                         <<"bob@localhost">>}])),
    P = ?M:presence_from(B, ?M:occ(<<"r">>, <<"b">>)),
    ?assertMatch(#{<<"affiliation">> := <<"admin">>, <<"role">> := <<"moderator">>}, ?M:item(P)),
    ?assertEqual(<<"conflict">>,
                 ?M:condition(?M:owner_submit(A, <<"r">>, [{<<"muc#roomconfig_roomowners">>, <<>>}]))),
    ?assertEqual(<<"not-acceptable">>,
                 ?M:condition(?M:owner_submit(A, <<"r">>, [{<<"muc#roomconfig_roomadmins">>,
                                                            <<"not a jid@@">>}]))),
    %% A jid-multi field has one value per JID.
    X = #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, <<"jabber:x:data">>}, {<<"type">>, <<"submit">>}],
               children = [#xmlel{name = <<"field">>, attrs = [{<<"var">>, <<"muc#roomconfig_roomowners">>}],
                                  children = [#xmlel{name = <<"value">>, children = [{xmlcdata, J}]}
                                              || J <- [<<"alice@localhost">>, <<"carol@localhost">>]]}]},
    <<"result">> = ?M:type(?M:iq(A, <<"set">>, ?M:room(<<"r">>), ?M:query(?NS_MUC_OWNER, [X]))),
    ?assertEqual(#{<<"muc#roomconfig_roomowners">> => [<<"alice@localhost">>, <<"carol@localhost">>],
                   <<"muc#roomconfig_roomadmins">> => [<<"bob@localhost">>]}, Lists()).

%% §10.1.3: cancelling the initial configuration destroys the new room.
cancel_initial_configuration(_) ->
    A = ?M:online(<<"alice">>),
    ?M:enter(A, <<"r">>, <<"a">>),
    X = #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, <<"jabber:x:data">>}, {<<"type">>, <<"cancel">>}]},
    %% The owner learns it is out of the destroyed room, then the result.
    [OwnOut, Result] = owner_answer(A, ?M:query(?NS_MUC_OWNER, [X])),
    ?assertEqual(<<"result">>, ?M:type(Result)),
    ?assertNotEqual(undefined, throng_xml:subel(?M:user_x(OwnOut), <<"destroy">>)),
    ?assertEqual(<<"item-not-found">>, ?M:condition(?M:disco_info(A, ?M:room(<<"r">>)))).

%% An owner's IQ to room r: its own unavailable presence (110), and the
%% answer, in the order they came (anything else skipped).
owner_answer(C, Query) ->
    ?C:send(C, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, <<"own1">>},
                                                {<<"to">>, ?M:room(<<"r">>)}], children = [Query]}),
    Got = ?M:until(C, fun(E) -> E#xmlel.name =:= <<"iq">> andalso throng_xml:attr(<<"id">>, E) =:= <<"own1">> end),
    [E || E <- Got, (?M:is_presence(E) andalso ?M:type(E) =:= <<"unavailable">>
                     andalso lists:member(110, ?M:codes(E))) orelse E#xmlel.name =:= <<"iq">>].
