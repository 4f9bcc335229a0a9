%% @doc XEP-0352 Client State Indication (throng_mod_csi, throng_c2s_csi)
%% against the real server: the stream feature; while a client is
%% inactive, presence updates and bodyless messages are held (the latest
%% presence per JID only) and urgent stanzas go out at once after them; the
%% queue's bound; active writes everything out; a dropped connection with
%% XEP-0198 gets the held stanzas on resumption; without the module the
%% element is not part of the stream.
-module(xep0352_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(NS, <<"urn:xmpp:csi:0">>).

all() ->
    [feature_advertised, presence_held_until_active, latest_presence_only,
     message_with_body_goes_at_once_after_held, chat_states_held,
     iq_and_subscription_requests_are_urgent, queue_bound_writes_out,
     held_stanzas_survive_resumption, inactive_twice_is_harmless,
     without_module_not_part_of_stream].

init_per_testcase(queue_bound_writes_out, Config) ->
    start(Config, #{modules => #{csi => #{queue_max => 3}}});
init_per_testcase(without_module_not_part_of_stream, Config) ->
    Dir = filename:join(?config(priv_dir, Config),
                        "data-" ++ integer_to_list(erlang:unique_integer([positive]))),
    Base = throng_ct:config(#{data_dir => list_to_binary(Dir)}),
    ok = application:set_env(throng, config, Base#{modules => #{disco => #{}}}),
    {ok, _} = application:ensure_all_started(throng),
    users(Config);
init_per_testcase(_TC, Config) ->
    start(Config, #{}).

start(Config, Overrides) ->
    throng_ct:start(Config, Overrides),
    users(Config).

users(Config) ->
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    throng_ct:mutual(<<"alice">>, <<"bob">>),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

online(User, Res) ->
    C = ?C:login(User, <<"password">>, Res),
    ?C:send(C, ?C:presence([])),
    timer:sleep(150),
    ?C:flush(C),
    C.

inactive(C) -> ?C:send(C, #xmlel{name = <<"inactive">>, attrs = [{<<"xmlns">>, ?NS}]}).
active(C) -> ?C:send(C, #xmlel{name = <<"active">>, attrs = [{<<"xmlns">>, ?NS}]}).

show(Show) ->
    #xmlel{name = <<"presence">>, children = [#xmlel{name = <<"show">>, children = [{xmlcdata, Show}]}]}.

%% Everything that arrives within Ms, in order.
collect(C, Ms) ->
    case ?C:recv(C, Ms) of
        #xmlel{} = El -> [El | collect(C, Ms)];
        _ -> []
    end.

summary(Els) ->
    [case El of
         #xmlel{name = <<"presence">>} -> {presence, throng_xml:subel_cdata(El, <<"show">>)};
         #xmlel{name = <<"message">>} ->
             case throng_xml:subel(El, <<"body">>) of
                 undefined -> {message, state};
                 _ -> {message, throng_xml:subel_cdata(El, <<"body">>)}
             end;
         #xmlel{name = N} -> {N, throng_xml:attr(<<"type">>, El)}
     end || El <- Els].

composing(To) ->
    #xmlel{name = <<"message">>, attrs = [{<<"to">>, To}, {<<"type">>, <<"chat">>}],
           children = [#xmlel{name = <<"composing">>,
                              attrs = [{<<"xmlns">>, <<"http://jabber.org/protocol/chatstates">>}]}]}.

%% The client is inactive once the server has read the element: a ping
%% answered after it proves the order.
sync(C) ->
    R = ?C:iq(C, <<"get">>, #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, <<"urn:xmpp:ping">>}]}),
    <<"result">> = throng_xml:attr(<<"type">>, R),
    ok.

%% Alice online and inactive, Bob (her contact) online.
inactive_alice() ->
    A = online(<<"alice">>, <<"r">>),
    B = online(<<"bob">>, <<"r">>),
    ?C:flush(A),
    inactive(A),
    sync(A),
    {A, B}.

%%% Cases

%% After authentication the stream features offer <csi xmlns='urn:xmpp:csi:0'/> (§3).
feature_advertised(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ok = ?C:auth_plain(C, <<"alice">>, <<"password">>),
    F = ?C:open_stream(C),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"csi">>, ?NS)).

%% A contact's presence update waits while the client is inactive, and
%% comes when it says it is active.
presence_held_until_active(_) ->
    {A, B} = inactive_alice(),
    Held0 = throng_metrics:value(csi_held),
    ?C:send(B, show(<<"away">>)),
    ?assertEqual([], collect(A, 400)),
    ?assertEqual(Held0 + 1, throng_metrics:value(csi_held)),
    active(A),
    ?assertEqual([{presence, <<"away">>}], summary(collect(A, 300))).

%% Of several updates from one resource only the latest is written; the
%% replaced ones are counted as dropped.
latest_presence_only(_) ->
    {A, B} = inactive_alice(),
    Dropped0 = throng_metrics:value(csi_dropped),
    [?C:send(B, show(S)) || S <- [<<"away">>, <<"xa">>, <<"dnd">>]],
    timer:sleep(300),
    ?assertEqual(Dropped0 + 2, throng_metrics:value(csi_dropped)),
    active(A),
    ?assertEqual([{presence, <<"dnd">>}], summary(collect(A, 300))).

%% A message with a body is urgent: it goes out at once, after what was
%% held (order kept); the client stays inactive.
message_with_body_goes_at_once_after_held(_) ->
    {A, B} = inactive_alice(),
    ?C:send(B, show(<<"away">>)),
    ?C:send(B, ?C:message(<<"alice@localhost/r">>, <<"chat">>, <<"wake up">>)),
    ?assertEqual([{presence, <<"away">>}, {message, <<"wake up">>}], summary(collect(A, 400))),
    ?C:send(B, show(<<"xa">>)),
    ?assertEqual([], collect(A, 300)).

%% A chat state alone waits; it goes out before the next message with a body.
chat_states_held(_) ->
    {A, B} = inactive_alice(),
    ?C:send(B, composing(<<"alice@localhost/r">>)),
    ?assertEqual([], collect(A, 300)),
    ?C:send(B, ?C:message(<<"alice@localhost/r">>, <<"chat">>, <<"done typing">>)),
    ?assertEqual([{message, state}, {message, <<"done typing">>}], summary(collect(A, 400))).

%% An IQ and a subscription request reach an inactive client at once.
iq_and_subscription_requests_are_urgent(_) ->
    A = online(<<"alice">>, <<"r">>),
    B = online(<<"bob">>, <<"r">>),
    Cc = online(<<"carol">>, <<"r">>),
    ?C:flush(A),
    inactive(A),
    sync(A),
    ?C:send(B, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"get">>}, {<<"id">>, <<"v1">>},
                                                {<<"to">>, <<"alice@localhost/r">>}],
                      children = [#xmlel{name = <<"query">>,
                                         attrs = [{<<"xmlns">>, <<"jabber:iq:version">>}]}]}),
    ?assertEqual([{<<"iq">>, <<"get">>}], summary(collect(A, 400))),
    ?C:send(Cc, #xmlel{name = <<"presence">>, attrs = [{<<"to">>, <<"alice@localhost">>},
                                                       {<<"type">>, <<"subscribe">>}]}),
    [P] = collect(A, 400),
    ?assertEqual(<<"subscribe">>, throng_xml:attr(<<"type">>, P)).

%% With queue_max 3, the fourth held stanza writes all four out.
queue_bound_writes_out(_) ->
    {A, B} = inactive_alice(),
    [?C:send(B, composing(<<"alice@localhost/r">>)) || _ <- lists:seq(1, 3)],
    ?assertEqual([], collect(A, 300)),
    ?C:send(B, composing(<<"alice@localhost/r">>)),
    ?assertEqual(lists:duplicate(4, {message, state}), summary(collect(A, 400))).

%% The connection drops while the client is inactive: a resumption
%% (XEP-0198) gets what was held.
held_stanzas_survive_resumption(_) ->
    A = online(<<"alice">>, <<"r">>),
    B = online(<<"bob">>, <<"r">>),
    ?C:flush(A),
    ?C:send(A, #xmlel{name = <<"enable">>, attrs = [{<<"xmlns">>, ?NS_SM}, {<<"resume">>, <<"true">>}]}),
    E = ?C:recv_stanza(A),
    Id = throng_xml:attr(<<"id">>, E),
    inactive(A),
    sync(A),
    ?C:send(B, show(<<"away">>)),
    ?assertEqual([], collect(A, 300)),
    ?C:abort(A),
    timer:sleep(200),
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ok = ?C:auth_plain(C, <<"alice">>, <<"password">>),
    _ = ?C:open_stream(C),
    %% One stanza acknowledged so far: the ping's answer.
    ?C:send(C, #xmlel{name = <<"resume">>, attrs = [{<<"xmlns">>, ?NS_SM}, {<<"previd">>, Id},
                                                    {<<"h">>, <<"1">>}]}),
    Resumed = ?C:recv_stanza(C),
    ?assertEqual(<<"resumed">>, Resumed#xmlel.name),
    Got = [El || #xmlel{name = N} = El <- collect(C, 400), N =/= <<"r">>],
    ?assertEqual([{presence, <<"away">>}], summary(Got)),
    %% The new stream starts active.
    ?C:send(B, show(<<"xa">>)),
    ?assertEqual([{presence, <<"xa">>}],
                 summary([El || #xmlel{name = N} = El <- collect(C, 400), N =/= <<"r">>])).

%% Saying inactive twice changes nothing and loses nothing.
inactive_twice_is_harmless(_) ->
    {A, B} = inactive_alice(),
    ?C:send(B, show(<<"away">>)),
    timer:sleep(200),
    inactive(A),
    sync(A),
    active(A),
    ?assertEqual([{presence, <<"away">>}], summary(collect(A, 300))).

%% Without the csi module the feature is not offered, and the element is
%% not part of the stream (unsupported-stanza-type).
without_module_not_part_of_stream(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ok = ?C:auth_plain(C, <<"alice">>, <<"password">>),
    F = ?C:open_stream(C),
    ?assertEqual(undefined, throng_xml:subel(F, <<"csi">>, ?NS)),
    C2 = ?C:bind(C, <<"r">>),
    inactive(C2),
    Err = ?C:recv_stanza(C2),
    ?assertNotEqual(undefined, throng_xml:subel(Err, <<"unsupported-stanza-type">>)).
