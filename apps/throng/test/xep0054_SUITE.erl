%% @doc XEP-0054 vcard-temp (throng_mod_vcard) against the real server: a
%% user sets and gets their own vCard (no 'to', or their own bare JID) and
%% gets an empty vCard while none is stored; anyone gets another user's
%% vCard at the bare JID, answered by the server, and service-unavailable
%% both when there is none and when there is no such user (XEP-0054 1.3);
%% nobody sets another's (forbidden); the server's own vCard comes from the
%% options; a size limit; the vCard is gone with the account and survives
%% a restart. The cases that touch storage run on both backends (groups
%% mnesia and pgsql). XEP-0153 avatar hashes: xep0153_SUITE.
-module(xep0054_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(NS_VCARD, <<"vcard-temp">>).

all() ->
    [advertised_in_disco, own_vcard_none_is_empty, unknown_user_service_unavailable,
     server_vcard_empty_by_default, server_vcard_from_options, server_vcard_set_forbidden,
     wrong_element_bad_request, disabled_module_answers_nothing,
     {group, mnesia}, {group, pgsql}].

groups() ->
    throng_ct:backend_groups(
      [set_and_get_own, own_bare_jid_as_to, set_replaces_whole_vcard, other_users_vcard,
       other_user_without_vcard_service_unavailable, set_on_other_forbidden,
       answered_by_server_not_forwarded, size_limit, removed_account_forgotten,
       survives_restart]).

init_per_group(Group, Config) ->
    throng_ct:init_backend(Group, Config).

end_per_group(_Group, Config) ->
    throng_ct:end_backend(Config).

init_per_testcase(disabled_module_answers_nothing, Config) ->
    throng_ct:start_exact(Config, #{disco => #{}}),
    throng_ct:register(<<"alice">>, <<"password">>),
    Config;
init_per_testcase(server_vcard_from_options, Config) ->
    start(Config, #{modules => #{vcard => #{server_vcard => #{fn => <<"Throng at localhost">>,
                                                              url => <<"https://localhost/">>,
                                                              desc => <<"Tests & more">>}}}});
init_per_testcase(size_limit, Config) ->
    start(Config, #{modules => #{vcard => #{max_bytes => 200}}});
init_per_testcase(_TC, Config) ->
    start(Config, #{}).

start(Config, Overrides) ->
    throng_ct:start_backend(Config, Overrides),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

login(User) ->
    ?C:login(User, <<"password">>, <<"r">>).

text(Name, Text) ->
    #xmlel{name = Name, children = [{xmlcdata, Text}]}.

vcard(Children) ->
    #xmlel{name = <<"vCard">>, attrs = [{<<"xmlns">>, ?NS_VCARD}], children = Children}.

%% Part of the XEP's example.
peter() ->
    vcard([text(<<"FN">>, <<"Peter Saint-Andre">>),
           #xmlel{name = <<"N">>, children = [text(<<"FAMILY">>, <<"Saint-Andre">>),
                                             text(<<"GIVEN">>, <<"Peter">>),
                                             #xmlel{name = <<"MIDDLE">>}]},
           text(<<"NICKNAME">>, <<"stpeter">>),
           #xmlel{name = <<"TEL">>, children = [#xmlel{name = <<"WORK">>}, #xmlel{name = <<"VOICE">>},
                                               text(<<"NUMBER">>, <<"303-308-3282">>)]},
           text(<<"DESC">>, <<"\n      More information about me & <things>\n    ">>)]).

%% A vCard IQ: {result, vCard | none} or {error, Condition}.
vc(C, Type, Payload) ->
    vc(C, Type, Payload, []).

vc(C, Type, Payload, Attrs) ->
    answer(?C:iq(C, Type, Payload, Attrs)).

answer(R) ->
    case throng_xml:attr(<<"type">>, R) of
        <<"result">> ->
            case throng_xml:subels(R) of
                [] -> {result, none};
                [V] -> {result, V}
            end;
        <<"error">> ->
            #xmlel{children = [#xmlel{name = Cond} | _]} = throng_xml:subel(R, <<"error">>),
            {error, Cond}
    end.

set(C, VCard) ->
    ?assertEqual({result, none}, vc(C, <<"set">>, VCard)).

%% The vCard a get returns, serialized (to compare).
own(C) ->
    own(C, []).

own(C, Attrs) ->
    {result, V} = vc(C, <<"get">>, vcard([]), Attrs),
    throng_xml:to_binary(V).

bin(El) ->
    throng_xml:to_binary(El).

%%% Cases outside the backend groups

%% disco#info of the domain lists vcard-temp (XEP-0054 §4).
advertised_in_disco(_) ->
    A = login(<<"alice">>),
    ?assert(lists:member(?NS_VCARD, ?C:disco_features(A, <<"localhost">>))).

%% With no vCard stored, a user's own get is a result with an empty vCard
%% (§3.1 allows that or item-not-found).
own_vcard_none_is_empty(_) ->
    A = login(<<"alice">>),
    ?assertEqual(bin(vcard([])), own(A)).

%% A get to the bare JID of an account that does not exist is
%% service-unavailable, the same condition as for an account with no vCard
%% (§3.3, 1.3: no directory harvesting).
unknown_user_service_unavailable(_) ->
    A = login(<<"alice">>),
    ?assertEqual({error, <<"service-unavailable">>},
                 vc(A, <<"get">>, vcard([]), [{<<"to">>, <<"nobody@localhost">>}])).

%% Without configured fields the server's vCard (to the domain) is empty.
server_vcard_empty_by_default(_) ->
    A = login(<<"alice">>),
    ?assertEqual({result, vcard([])}, vc(A, <<"get">>, vcard([]), [{<<"to">>, <<"localhost">>}])).

%% The server's vCard carries the fields set in the module's server_vcard
%% options (FN, URL, DESC here; an empty one is left out).
server_vcard_from_options(_) ->
    A = login(<<"alice">>),
    ?assertEqual({result, vcard([text(<<"FN">>, <<"Throng at localhost">>),
                                 text(<<"URL">>, <<"https://localhost/">>),
                                 text(<<"DESC">>, <<"Tests & more">>)])},
                 vc(A, <<"get">>, vcard([]), [{<<"to">>, <<"localhost">>}])).

%% Nobody sets the server's vCard over XMPP: forbidden.
server_vcard_set_forbidden(_) ->
    A = login(<<"alice">>),
    ?assertEqual({error, <<"forbidden">>},
                 vc(A, <<"set">>, peter(), [{<<"to">>, <<"localhost">>}])),
    ?assertEqual({result, vcard([])}, vc(A, <<"get">>, vcard([]), [{<<"to">>, <<"localhost">>}])).

%% The payload of a vcard-temp IQ is a <vCard/> element: anything else in
%% that namespace is bad-request, and nothing is stored.
wrong_element_bad_request(_) ->
    A = login(<<"alice">>),
    Wrong = #xmlel{name = <<"vcard">>, attrs = [{<<"xmlns">>, ?NS_VCARD}],
                   children = [text(<<"FN">>, <<"x">>)]},
    ?assertEqual({error, <<"bad-request">>}, vc(A, <<"set">>, Wrong)),
    ?assertEqual({error, <<"bad-request">>}, vc(A, <<"get">>, Wrong#xmlel{children = []})),
    ?assertEqual(bin(vcard([])), own(A)).

%% Without the module the namespace gets service-unavailable.
disabled_module_answers_nothing(_) ->
    A = login(<<"alice">>),
    ?assertEqual({error, <<"service-unavailable">>}, vc(A, <<"get">>, vcard([]))),
    ?assertEqual({error, <<"service-unavailable">>}, vc(A, <<"set">>, peter())).

%%% Cases on both backends

%% The XEP's flow: a set with no 'to' gets an empty result (§3.2); a get
%% with no 'to' returns the vCard as it was set (§3.1).
set_and_get_own(_) ->
    A = login(<<"alice">>),
    set(A, peter()),
    ?assertEqual(bin(peter()), own(A)).

%% Addressed to the user's own bare JID, a set and a get work as with no
%% 'to'; the result comes from the bare JID.
own_bare_jid_as_to(_) ->
    A = login(<<"alice">>),
    To = [{<<"to">>, <<"alice@localhost">>}],
    ?assertEqual({result, none}, vc(A, <<"set">>, peter(), To)),
    R = ?C:iq(A, <<"get">>, vcard([]), To),
    ?assertEqual(<<"alice@localhost">>, throng_xml:attr(<<"from">>, R)),
    ?assertEqual({result, peter()}, answer(R)).

%% There are no partial updates (§3.2): a set replaces the whole vCard.
set_replaces_whole_vcard(_) ->
    A = login(<<"alice">>),
    set(A, peter()),
    Short = vcard([text(<<"NICKNAME">>, <<"alice">>)]),
    set(A, Short),
    ?assertEqual(bin(Short), own(A)),
    %% An empty vCard is a vCard too: stored as such.
    set(A, vcard([])),
    ?assertEqual(bin(vcard([])), own(A)).

%% Anyone gets a user's vCard at the bare JID (§3.3), whatever their
%% subscription, from the server on the user's behalf.
other_users_vcard(_) ->
    A = login(<<"alice">>),
    set(A, peter()),
    C = login(<<"carol">>),
    R = ?C:iq(C, <<"get">>, vcard([]), [{<<"to">>, <<"alice@localhost">>}]),
    ?assertEqual(<<"alice@localhost">>, throng_xml:attr(<<"from">>, R)),
    ?assertEqual(<<"carol@localhost/r">>, throng_xml:attr(<<"to">>, R)),
    ?assertEqual({result, peter()}, answer(R)).

%% Another user's get of a vCard that was never set is service-unavailable
%% (§3.3, version 1.3: the same error as for an account that does not
%% exist).
other_user_without_vcard_service_unavailable(_) ->
    B = login(<<"bob">>),
    ?assertEqual({error, <<"service-unavailable">>},
                 vc(B, <<"get">>, vcard([]), [{<<"to">>, <<"carol@localhost">>}])).

%% A set to another user's bare JID is forbidden (§3.2) and changes nothing.
set_on_other_forbidden(_) ->
    A = login(<<"alice">>),
    set(A, peter()),
    B = login(<<"bob">>),
    ?assertEqual({error, <<"forbidden">>},
                 vc(B, <<"set">>, vcard([text(<<"FN">>, <<"Mallory">>)]),
                    [{<<"to">>, <<"alice@localhost">>}])),
    ?assertEqual(bin(peter()), own(A)).

%% The server answers for the user: the user's online client never sees the
%% request (§3.3, RFC 6121 §8.5.2.1.3).
answered_by_server_not_forwarded(_) ->
    A = login(<<"alice">>),
    ?C:send(A, ?C:presence([])),
    #xmlel{name = <<"presence">>} = ?C:recv_stanza(A),
    set(A, peter()),
    B = login(<<"bob">>),
    ?assertEqual({result, peter()},
                 vc(B, <<"get">>, vcard([]), [{<<"to">>, <<"alice@localhost">>}])),
    ?C:expect_nothing(A, 300).

%% With max_bytes 200, a vCard of more than 200 bytes (serialized) is
%% refused with not-acceptable and a text naming the limit; the stored one
%% stays; exactly 200 is accepted.
size_limit(_) ->
    A = login(<<"alice">>),
    Small = vcard([text(<<"FN">>, <<"Alice">>)]),
    set(A, Small),
    %% <vCard xmlns='vcard-temp'><DESC>...</DESC></vCard>: 47 bytes of markup.
    Desc = fun(N) -> vcard([text(<<"DESC">>, binary:copy(<<"d">>, N))]) end,
    ?assertEqual(200, byte_size(bin(Desc(153)))),
    R = ?C:iq(A, <<"set">>, Desc(154)),
    ?assertEqual({error, <<"not-acceptable">>}, answer(R)),
    Text = throng_xml:cdata(throng_xml:subel(throng_xml:subel(R, <<"error">>), <<"text">>)),
    ?assertMatch({match, _}, re:run(Text, "200 bytes")),
    ?assertEqual(bin(Small), own(A)),
    set(A, Desc(153)),
    ?assertEqual(bin(Desc(153)), own(A)).

%% Removing the account removes its vCard: a new account of that name has
%% none.
removed_account_forgotten(_) ->
    A = login(<<"alice">>),
    set(A, peter()),
    ?C:close(A),
    ok = throng_auth:unregister(<<"alice">>, <<"localhost">>),
    ?assertEqual([], [K || K <- throng_storage:kv_keys(vcard), lists:member(<<"alice">>, tuple_to_list(K))]),
    throng_ct:register(<<"alice">>, <<"password">>),
    B = login(<<"bob">>),
    ?assertEqual({error, <<"service-unavailable">>},
                 vc(B, <<"get">>, vcard([]), [{<<"to">>, <<"alice@localhost">>}])),
    A2 = login(<<"alice">>),
    ?assertEqual(bin(vcard([])), own(A2)).

%% A vCard is durable: it is there after the server restarts.
survives_restart(_) ->
    A = login(<<"alice">>),
    set(A, peter()),
    ?C:close(A),
    throng_ct:restart(),
    B = login(<<"bob">>),
    ?assertEqual({result, peter()},
                 vc(B, <<"get">>, vcard([]), [{<<"to">>, <<"alice@localhost">>}])).
