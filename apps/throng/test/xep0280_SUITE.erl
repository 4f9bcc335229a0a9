%% @doc XEP-0280 Message Carbons (throng_mod_carbons) against the real
%% server: enabling per resource, received and sent copies to exactly the
%% resources that enabled carbons, the eligibility rules of §6 (types,
%% private, no-copy, chat states), messages to the bare JID, and that a
%% blocked message is not copied.
-module(xep0280_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(NS, <<"urn:xmpp:carbons:2">>).
-define(NS_FORWARD, <<"urn:xmpp:forward:0">>).

all() ->
    [advertised_in_disco, enable_and_disable, received_copy_to_enabled_resources,
     sent_copy_to_enabled_resources, bare_jid_message_copied_to_others,
     private_not_copied_and_removed, no_copy_hint, types_and_payloads,
     disabled_gets_no_copies, other_account_cannot_enable, blocked_message_not_copied,
     flag_gone_with_session].

init_per_testcase(_TC, Config) ->
    throng_ct:start(Config),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

login(User, Res) -> ?C:login(User, <<"password">>, Res).

%% A resource, available with Prio, with carbons on or off, its own
%% presence (and the others') read.
resource(User, Res, Prio, Carbons) ->
    C = login(User, Res),
    ?C:send(C, #xmlel{name = <<"presence">>,
                      children = [#xmlel{name = <<"priority">>,
                                         children = [{xmlcdata, integer_to_binary(Prio)}]}]}),
    case Carbons of
        true -> <<"result">> = type(enable(C));
        false -> ok
    end,
    C.

enable(C) -> iq(C, <<"set">>, #xmlel{name = <<"enable">>, attrs = [{<<"xmlns">>, ?NS}]}, []).
disable(C) -> iq(C, <<"set">>, #xmlel{name = <<"disable">>, attrs = [{<<"xmlns">>, ?NS}]}, []).

iq(C, Type, Payload, Attrs) -> ?C:iq_skipping(C, Type, Payload, Attrs).

type(El) -> throng_xml:attr(<<"type">>, El).

settle(Cs) ->
    timer:sleep(250),
    [?C:flush(C) || C <- Cs],
    ok.

%% The next message a client gets (presence skipped).
next_message(C) ->
    case ?C:recv_stanza(C) of
        #xmlel{name = <<"message">>} = M -> M;
        _ -> next_message(C)
    end.

%% {Direction, Forwarded message} of a carbon, or not_a_carbon.
carbon(M) ->
    case [{D, W} || D <- [<<"received">>, <<"sent">>],
                    W <- [throng_xml:subel(M, D, ?NS)], W =/= undefined] of
        [{D, W}] ->
            F = throng_xml:subel(W, <<"forwarded">>, ?NS_FORWARD),
            {binary_to_atom(D), throng_xml:subel(F, <<"message">>)};
        [] -> not_a_carbon
    end.

chat(To, Body) -> ?C:message(To, <<"chat">>, Body).

with_child(#xmlel{children = C} = M, Child) -> M#xmlel{children = C ++ [Child]}.

no_messages(C, Ms) ->
    case ?C:recv(C, Ms) of
        #xmlel{name = <<"message">>} = M -> ct:fail({unexpected, M});
        #xmlel{} -> no_messages(C, Ms);
        _ -> ok
    end.

%%% Cases

%% disco#info of the domain lists urn:xmpp:carbons:2 and the rules feature.
advertised_in_disco(_) ->
    A = login(<<"alice">>, <<"r">>),
    R = iq(A, <<"get">>, #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_DISCO_INFO}]},
           [{<<"to">>, <<"localhost">>}]),
    Features = [throng_xml:attr(<<"var">>, F)
                || #xmlel{name = <<"feature">>} = F <- throng_xml:subels(throng_xml:subel(R, <<"query">>))],
    ?assert(lists:member(?NS, Features)),
    ?assert(lists:member(<<"urn:xmpp:carbons:rules:0">>, Features)).

%% Enable and disable are answered with an empty result (§4, §5).
enable_and_disable(_) ->
    A = login(<<"alice">>, <<"r">>),
    ?assertEqual(<<"result">>, type(enable(A))),
    ?assertEqual(<<"result">>, type(disable(A))),
    ?assertEqual(<<"result">>, type(disable(A))).

%% A message to one resource is copied, wrapped in <received/>, to the
%% user's other resources with carbons on, and to no other (§7.2).
received_copy_to_enabled_resources(_) ->
    A1 = resource(<<"alice">>, <<"one">>, 0, true),
    A2 = resource(<<"alice">>, <<"two">>, 0, true),
    A3 = resource(<<"alice">>, <<"three">>, 0, false),
    B = resource(<<"bob">>, <<"r">>, 0, false),
    settle([A1, A2, A3, B]),
    ?C:send(B, chat(<<"alice@localhost/one">>, <<"hello one">>)),
    M1 = next_message(A1),
    ?assertEqual(not_a_carbon, carbon(M1)),
    M2 = next_message(A2),
    ?assertEqual(<<"alice@localhost">>, throng_xml:attr(<<"from">>, M2)),
    ?assertEqual(<<"alice@localhost/two">>, throng_xml:attr(<<"to">>, M2)),
    {received, F} = carbon(M2),
    ?assertEqual(<<"bob@localhost/r">>, throng_xml:attr(<<"from">>, F)),
    ?assertEqual(<<"alice@localhost/one">>, throng_xml:attr(<<"to">>, F)),
    ?assertEqual(<<"hello one">>, throng_xml:subel_cdata(F, <<"body">>)),
    no_messages(A3, 300),
    no_messages(A1, 100).

%% A message a resource sends is copied, wrapped in <sent/>, to the user's
%% other resources with carbons on; not to the sender (§7.3).
sent_copy_to_enabled_resources(_) ->
    A1 = resource(<<"alice">>, <<"one">>, 0, true),
    A2 = resource(<<"alice">>, <<"two">>, 0, true),
    A3 = resource(<<"alice">>, <<"three">>, 0, false),
    B = resource(<<"bob">>, <<"r">>, 0, false),
    settle([A1, A2, A3, B]),
    ?C:send(A1, chat(<<"bob@localhost">>, <<"hi bob">>)),
    ?assertEqual(<<"hi bob">>, throng_xml:subel_cdata(next_message(B), <<"body">>)),
    M2 = next_message(A2),
    {sent, F} = carbon(M2),
    ?assertEqual(<<"alice@localhost">>, throng_xml:attr(<<"from">>, M2)),
    ?assertEqual(<<"alice@localhost/one">>, throng_xml:attr(<<"from">>, F)),
    ?assertEqual(<<"bob@localhost">>, throng_xml:attr(<<"to">>, F)),
    no_messages(A1, 300),
    no_messages(A3, 100).

%% A message to the bare JID goes to the highest priority; the other
%% resources with carbons on get a received copy.
bare_jid_message_copied_to_others(_) ->
    A1 = resource(<<"alice">>, <<"high">>, 5, true),
    A2 = resource(<<"alice">>, <<"low">>, 0, true),
    B = resource(<<"bob">>, <<"r">>, 0, false),
    settle([A1, A2, B]),
    ?C:send(B, chat(<<"alice@localhost">>, <<"to the bare jid">>)),
    ?assertEqual(not_a_carbon, carbon(next_message(A1))),
    {received, F} = carbon(next_message(A2)),
    ?assertEqual(<<"alice@localhost">>, throng_xml:attr(<<"to">>, F)),
    no_messages(A1, 200).

%% A message with <private/> is not copied, and the element does not reach
%% the recipient (§6).
private_not_copied_and_removed(_) ->
    A1 = resource(<<"alice">>, <<"one">>, 0, true),
    A2 = resource(<<"alice">>, <<"two">>, 0, true),
    B1 = resource(<<"bob">>, <<"one">>, 0, true),
    B2 = resource(<<"bob">>, <<"two">>, 0, true),
    settle([A1, A2, B1, B2]),
    Private = #xmlel{name = <<"private">>, attrs = [{<<"xmlns">>, ?NS}]},
    ?C:send(A1, with_child(chat(<<"bob@localhost/one">>, <<"secret">>), Private)),
    M = next_message(B1),
    ?assertEqual(undefined, throng_xml:subel(M, <<"private">>, ?NS)),
    %% Without the element the recipient's side copies as usual.
    {received, _} = carbon(next_message(B2)),
    no_messages(A2, 300).

%% A message with the XEP-0334 <no-copy/> hint is not copied.
no_copy_hint(_) ->
    A1 = resource(<<"alice">>, <<"one">>, 0, true),
    A2 = resource(<<"alice">>, <<"two">>, 0, true),
    B = resource(<<"bob">>, <<"r">>, 0, false),
    settle([A1, A2, B]),
    NoCopy = #xmlel{name = <<"no-copy">>, attrs = [{<<"xmlns">>, <<"urn:xmpp:hints">>}]},
    ?C:send(B, with_child(chat(<<"alice@localhost/one">>, <<"x">>), NoCopy)),
    _ = next_message(A1),
    no_messages(A2, 300).

%% §6: normal with a body and a bare chat state are copied; headline and a
%% normal message without body are not.
types_and_payloads(_) ->
    A1 = resource(<<"alice">>, <<"one">>, 0, true),
    A2 = resource(<<"alice">>, <<"two">>, 0, true),
    B = resource(<<"bob">>, <<"r">>, 0, false),
    settle([A1, A2, B]),
    To = <<"alice@localhost/one">>,
    ?C:send(B, ?C:message(To, <<"headline">>, <<"news">>)),
    ?C:send(B, #xmlel{name = <<"message">>, attrs = [{<<"to">>, To}],
                      children = [#xmlel{name = <<"subject">>, children = [{xmlcdata, <<"s">>}]}]}),
    ?C:send(B, ?C:message(To, <<"normal">>, <<"normal body">>)),
    ?C:send(B, #xmlel{name = <<"message">>, attrs = [{<<"to">>, To}, {<<"type">>, <<"chat">>}],
                      children = [#xmlel{name = <<"composing">>,
                                         attrs = [{<<"xmlns">>, <<"http://jabber.org/protocol/chatstates">>}]}]}),
    {received, F1} = carbon(next_message(A2)),
    ?assertEqual(<<"normal body">>, throng_xml:subel_cdata(F1, <<"body">>)),
    {received, F2} = carbon(next_message(A2)),
    ?assertNotEqual(undefined, throng_xml:subel(F2, <<"composing">>)),
    no_messages(A2, 300).

%% After disable, a resource gets no more copies.
disabled_gets_no_copies(_) ->
    A1 = resource(<<"alice">>, <<"one">>, 0, true),
    A2 = resource(<<"alice">>, <<"two">>, 0, true),
    B = resource(<<"bob">>, <<"r">>, 0, false),
    settle([A1, A2, B]),
    <<"result">> = type(disable(A2)),
    ?C:send(B, chat(<<"alice@localhost/one">>, <<"x">>)),
    _ = next_message(A1),
    no_messages(A2, 300).

%% Carbons are a resource's own setting: enabling them for another account
%% is forbidden.
other_account_cannot_enable(_) ->
    B = login(<<"bob">>, <<"r">>),
    R = iq(B, <<"set">>, #xmlel{name = <<"enable">>, attrs = [{<<"xmlns">>, ?NS}]},
           [{<<"to">>, <<"alice@localhost">>}]),
    ?assertEqual(<<"error">>, type(R)).

%% A message the recipient blocked (XEP-0191) is not copied either.
blocked_message_not_copied(_) ->
    A1 = resource(<<"alice">>, <<"one">>, 0, true),
    A2 = resource(<<"alice">>, <<"two">>, 0, true),
    B = resource(<<"bob">>, <<"r">>, 0, false),
    Block = #xmlel{name = <<"block">>, attrs = [{<<"xmlns">>, <<"urn:xmpp:blocking">>}],
                   children = [#xmlel{name = <<"item">>, attrs = [{<<"jid">>, <<"bob@localhost">>}]}]},
    <<"result">> = type(iq(A1, <<"set">>, Block, [])),
    settle([A1, A2, B]),
    ?C:send(B, chat(<<"alice@localhost/one">>, <<"x">>)),
    no_messages(A1, 300),
    no_messages(A2, 100).

%% The flag lives as long as the session: nothing is left once it ends.
flag_gone_with_session(_) ->
    A = resource(<<"alice">>, <<"one">>, 0, true),
    ?assertEqual(1, ets:info(throng_session_flags, size)),
    ?C:close(A),
    throng_ct:wait_until(fun() -> ets:info(throng_session_flags, size) =:= 0 end, 5000).
