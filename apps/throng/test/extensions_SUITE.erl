%% @doc Extension modules against the real server over real sockets: a test
%% module ({@link throng_test_ext}) installed for localhost with
%% throng_ext:start_host/2 answers IQs in each scope, adds disco features,
%% identities and stream features, hooks every event a session runs, and
%% drives a session through session_info/2 actions. Also: which modules a
%% configuration enables, per host.
%%
%% The test case registers itself under the name `throng_test_ext' to hear
%% from the module ({@link hook/1}).
-module(extensions_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(X, throng_test_ext).
-define(HOST, <<"localhost">>).

all() ->
    [iq_only_when_enabled, iq_server_scope, iq_account_scope, iq_own_account_falls_back_to_server,
     iq_preauth_scope, disco_only_when_enabled, disco_node_answered_by_module,
     stream_feature_only_when_enabled,
     from_session_stop, from_session_change, to_session_drop, to_session_change,
     session_opened_and_closed, user_registered_and_removed, roster_item_changed,
     initial_presence_adds_items, unacked_item_rerouted,
     session_info_send, session_info_stop, session_info_timer, session_info_compact_timer,
     crashing_iq_handler, crashing_session_info, iq_namespace_conflict,
     start_failure_names_module, start_runs_when_not_loaded,
     only_disco_configured, host_config_module_sets, docs_worked_example].

%% Cases that install the test module themselves, or need another config.
-define(NOT_INSTALLED, [iq_only_when_enabled, disco_only_when_enabled,
                        stream_feature_only_when_enabled, start_failure_names_module,
                        iq_namespace_conflict,
                        start_runs_when_not_loaded, docs_worked_example]).

init_per_testcase(only_disco_configured, Config) ->
    start_exact(Config, #{disco => #{}}),
    throng_ct:register(<<"alice">>, <<"password">>),
    Config;
init_per_testcase(host_config_module_sets, Config) ->
    throng_ct:start(Config, #{host_config => [#{host => <<"example.org">>,
                                                modules => #{disco => #{}}}]}),
    throng_ct:register(<<"alice">>, <<"password">>),
    throng_ct:register(<<"erin">>, <<"example.org">>, <<"password">>),
    Config;
init_per_testcase(TC, Config) ->
    throng_ct:start(Config),
    throng_ct:register(<<"alice">>, <<"password">>),
    throng_ct:register(<<"bob">>, <<"password">>),
    lists:member(TC, ?NOT_INSTALLED) orelse install(),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

%% The host's configured modules plus the test module.
install() ->
    ok = throng_ext:start_host(?HOST, (throng_config:modules(?HOST))#{?X => #{}}).

%% Starts the server with exactly these modules (throng_ct:start/2 would
%% merge them into the test defaults).
start_exact(CTConfig, Modules) ->
    Dir = filename:join(?config(priv_dir, CTConfig),
                        "data-" ++ integer_to_list(erlang:unique_integer([positive]))),
    Config = throng_ct:config(#{data_dir => list_to_binary(Dir)}),
    ok = application:set_env(throng, config, Config#{modules => Modules}),
    {ok, _} = application:ensure_all_started(throng).

%% Hear from the test module in this process.
observe() ->
    true = register(?X, self()).

%% What the test module said it ran: {Pid it ran in, Args}.
hook(What) ->
    receive {?X, What, Pid, Args} -> {Pid, Args}
    after 5000 -> error({no_report, What})
    end.

no_hook(What, Ms) ->
    receive {?X, What, _, Args} -> error({unexpected_report, What, Args})
    after Ms -> ok
    end.

login(User) ->
    ?C:login(User, <<"password">>, <<"r">>).

jid(C) ->
    {ok, J} = throng_jid:parse(?C:jid(C)),
    J.

session_pid(C) ->
    Pid = throng_sm:lookup(jid(C)),
    true = is_pid(Pid),
    Pid.

q(NS) -> #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, NS}]}.

%% An IQ get of a query in NS to To; returns the reply.
ask(C, NS, To) ->
    ?C:iq(C, <<"get">>, q(NS), [{<<"to">>, To} || To =/= none]).

%% The scope attribute of the test module's answer, or the error condition.
answered(R) ->
    case throng_xml:attr(<<"type">>, R) of
        <<"result">> -> {result, throng_xml:attr(<<"scope">>, throng_xml:subel(R, <<"query">>))};
        <<"error">> -> {error, condition(R)}
    end.

condition(R) ->
    [Cond | _] = [N || #xmlel{name = N} <- throng_xml:subels(throng_xml:subel(R, <<"error">>)),
                       N =/= <<"text">>],
    Cond.

disco(C, Host) ->
    R = ask(C, ?NS_DISCO_INFO, Host),
    <<"result">> = throng_xml:attr(<<"type">>, R),
    Q = throng_xml:subel(R, <<"query">>),
    {[{throng_xml:attr(<<"category">>, I), throng_xml:attr(<<"type">>, I),
       throng_xml:attr(<<"name">>, I)} || #xmlel{name = <<"identity">>} = I <- throng_xml:subels(Q)],
     [throng_xml:attr(<<"var">>, F) || #xmlel{name = <<"feature">>} = F <- throng_xml:subels(Q)]}.

%% The features after authentication, on a new connection.
features_after_auth(User) ->
    C = ?C:connect(#{}),
    Pre = ?C:open_stream(C),
    ok = ?C:auth_plain(C, User, <<"password">>),
    Post = ?C:open_stream(C),
    ?C:close(C),
    {Pre, Post}.

has_test_feature(Features) ->
    throng_xml:subel(Features, <<"test">>, ?X:ns()) =/= undefined.

msg(To, Body) ->
    ?C:message(To, <<"chat">>, Body).

%% The next message the client gets (anything else skipped); fails after 5 s.
next_message(C) ->
    case ?C:recv_stanza(C) of
        #xmlel{name = <<"message">>} = M -> M;
        _ -> next_message(C)
    end.

%% Alice sends Bob a message with this body; the module reports that Event
%% stopped it, Bob gets nothing, and Alice's next message reaches him.
%% Returns the clients and the report.
dropped(Body, Event) ->
    observe(),
    A = login(<<"alice">>),
    B = login(<<"bob">>),
    ?C:send(A, msg(?C:jid(B), Body)),
    {Pid, Args} = hook(Event),
    ?C:expect_nothing(B, 300),
    ?C:send(A, msg(?C:jid(B), <<"hello">>)),
    ?assertEqual(<<"hello">>, ?X:body(next_message(B))),
    {A, B, Pid, Args}.

%% Alice sends Bob a message with this body; returns the body Bob gets
%% (from Alice).
changed(Body) ->
    A = login(<<"alice">>),
    B = login(<<"bob">>),
    ?C:send(A, msg(?C:jid(B), Body)),
    M = next_message(B),
    ?assertEqual(?C:jid(A), throng_xml:attr(<<"from">>, M)),
    ?X:body(M).

%%% IQ handlers and their scopes

%% A namespace of the test module gets service-unavailable (to the domain
%% and to an account) until start_host/2 installs the module; then it is
%% answered.
iq_only_when_enabled(_) ->
    A = login(<<"alice">>),
    ?assertEqual({error, <<"service-unavailable">>}, answered(ask(A, ?X:ns(), ?HOST))),
    ?assertEqual({error, <<"service-unavailable">>}, answered(ask(A, ?X:ns(), <<"bob@localhost">>))),
    install(),
    ?assertEqual({result, <<"server">>}, answered(ask(A, ?X:ns(), ?HOST))),
    ?assertEqual({result, <<"account">>}, answered(ask(A, ?X:ns(), <<"bob@localhost">>))).

%% An IQ to the domain is answered by the server-scope handler, from the domain.
iq_server_scope(_) ->
    A = login(<<"alice">>),
    R = ask(A, ?X:ns(), ?HOST),
    ?assertEqual({result, <<"server">>}, answered(R)),
    ?assertEqual(?HOST, throng_xml:attr(<<"from">>, R)),
    ?assertEqual(?HOST, throng_xml:attr(<<"to">>, throng_xml:subel(R, <<"query">>))).

%% An IQ to another user's bare JID (and to one's own) is answered by the
%% account-scope handler on that account's behalf; a server-only namespace
%% to another account gets service-unavailable.
iq_account_scope(_) ->
    A = login(<<"alice">>),
    R = ask(A, ?X:ns(), <<"bob@localhost">>),
    ?assertEqual({result, <<"account">>}, answered(R)),
    ?assertEqual(<<"bob@localhost">>, throng_xml:attr(<<"from">>, R)),
    ?assertEqual(<<"bob@localhost">>, throng_xml:attr(<<"to">>, throng_xml:subel(R, <<"query">>))),
    ?assertEqual({result, <<"account">>}, answered(ask(A, ?X:ns(), <<"alice@localhost">>))),
    ?assertEqual({result, <<"account">>}, answered(ask(A, ?X:ns(), none))),
    ?assertEqual({error, <<"service-unavailable">>},
                 answered(ask(A, ?X:ns_server_only(), <<"bob@localhost">>))).

%% An IQ to one's own account (or with no 'to') in a namespace with no
%% account handler is answered by the server-scope handler.
iq_own_account_falls_back_to_server(_) ->
    A = login(<<"alice">>),
    ?assertEqual({result, <<"server">>}, answered(ask(A, ?X:ns_server_only(), none))),
    ?assertEqual({result, <<"server">>},
                 answered(ask(A, ?X:ns_server_only(), <<"alice@localhost">>))).

%% An IQ on a stream that has not authenticated is answered by the
%% preauth-scope handler.
iq_preauth_scope(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    R = ask(C, ?X:ns(), none),
    ?assertEqual({result, <<"preauth">>}, answered(R)),
    %% Without a preauth handler the stream is closed: authenticate first.
    ?C:send(C, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"get">>}, {<<"id">>, <<"x">>}],
                      children = [q(?X:ns_server_only())]}),
    ?assertEqual(<<"not-authorized">>, ?C:closed(C, 5000)).

%%% What a module adds to the server's description

%% Through the disco_info and disco_items hooks a module adds an item to the
%% domain's disco#items and answers disco#info and #items of its own node
%% (the answer names the node), per asker: bob gets the module's forbidden.
%% A node no module answers is still item-not-found.
disco_node_answered_by_module(_) ->
    A = login(<<"alice">>),
    Node = ?X:node(),
    NodeQ = fun(NS, N) -> #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, NS}, {<<"node">>, N}]} end,
    Items = ?C:iq(A, <<"get">>, q(?NS_DISCO_ITEMS), [{<<"to">>, ?HOST}]),
    %% (The MUC service, enabled by default, lists itself on the domain too.)
    ?assertEqual([[{<<"jid">>, ?HOST}, {<<"node">>, Node}, {<<"name">>, <<"Test node">>}]],
                 [I#xmlel.attrs || I <- throng_xml:subels(throng_xml:subel(Items, <<"query">>)),
                                   throng_xml:attr(<<"jid">>, I) =/= <<"conference.", ?HOST/binary>>]),
    Info = ?C:iq(A, <<"get">>, NodeQ(?NS_DISCO_INFO, Node), [{<<"to">>, ?HOST}]),
    Q = throng_xml:subel(Info, <<"query">>),
    ?assertEqual(Node, throng_xml:attr(<<"node">>, Q)),
    ?assertEqual([{<<"identity">>, <<"node">>}, {<<"feature">>, ?X:ns()}],
                 [{E#xmlel.name, throng_xml:attr(<<"type">>, E, throng_xml:attr(<<"var">>, E))}
                  || E <- throng_xml:subels(Q)]),
    NodeItems = ?C:iq(A, <<"get">>, NodeQ(?NS_DISCO_ITEMS, Node), [{<<"to">>, ?HOST}]),
    ?assertEqual(Node, throng_xml:attr(<<"node">>, throng_xml:subel(NodeItems, <<"query">>))),
    ?assertEqual([<<Node/binary, "/child">>],
                 [throng_xml:attr(<<"node">>, I)
                  || I <- throng_xml:subels(throng_xml:subel(NodeItems, <<"query">>))]),
    B = login(<<"bob">>),
    [?assertEqual({error, <<"forbidden">>}, answered(?C:iq(B, <<"get">>, NodeQ(NS, Node),
                                                             [{<<"to">>, ?HOST}])))
     || NS <- [?NS_DISCO_INFO, ?NS_DISCO_ITEMS]],
    [?assertEqual({error, <<"item-not-found">>},
                  answered(?C:iq(A, <<"get">>, NodeQ(NS, <<"nobody's">>), [{<<"to">>, ?HOST}])))
     || NS <- [?NS_DISCO_INFO, ?NS_DISCO_ITEMS]].

%% The module's feature and identity are in the domain's disco#info, and
%% its account feature in that of a user's bare JID (not the domain's),
%% only once it is enabled.
disco_only_when_enabled(_) ->
    A = login(<<"alice">>),
    {Ids0, Fs0} = disco(A, ?HOST),
    ?assertNot(lists:member(?X:ns(), Fs0)),
    ?assertNot(lists:member(?X:identity(), Ids0)),
    {_, Account0} = disco(A, <<"alice@", ?HOST/binary>>),
    ?assertNot(lists:member(?X:ns_account(), Account0)),
    install(),
    {Ids1, Fs1} = disco(A, ?HOST),
    ?assert(lists:member(?X:ns(), Fs1)),
    ?assert(lists:member(?X:identity(), Ids1)),
    ?assertNot(lists:member(?X:ns_account(), Fs1)),
    {_, Account1} = disco(A, <<"alice@", ?HOST/binary>>),
    ?assert(lists:member(?X:ns_account(), Account1)),
    ?assertEqual([], Account0 -- Account1),
    %% The server's own identity and features stay.
    ?assert(lists:member({<<"server">>, <<"im">>, <<"Throng">>}, Ids1)),
    ?assertEqual([], Fs0 -- Fs1).

%% The module's stream feature is offered after authentication (not before),
%% and only once the module is enabled.
stream_feature_only_when_enabled(_) ->
    {Pre0, Post0} = features_after_auth(<<"alice">>),
    ?assertNot(has_test_feature(Pre0)),
    ?assertNot(has_test_feature(Post0)),
    install(),
    {Pre1, Post1} = features_after_auth(<<"alice">>),
    ?assertNot(has_test_feature(Pre1)),
    ?assert(has_test_feature(Post1)),
    ?assertNotEqual(undefined, throng_xml:subel(Post1, <<"bind">>, ?NS_BIND)).

%%% Stanza hooks

%% stanza_from_session runs in the sender's session with its full JID; a
%% handler that stops a message keeps it from being routed at all.
from_session_stop(_) ->
    {A, B, Pid, #{from := From, to := To}} = dropped(<<"drop-out">>, stanza_from_session),
    ?assertEqual(session_pid(A), Pid),
    ?assertEqual({jid(A), jid(B)}, {From, To}).

%% A stanza_from_session handler that changes a message changes what the
%% recipient gets.
from_session_change(_) ->
    ?assertEqual(<<"changed-out">>, changed(<<"change-out">>)).

%% stanza_to_session runs in the recipient's session, with the sender, the
%% address and the session's JID; a handler that stops it keeps it from the
%% client.
to_session_drop(_) ->
    {A, B, Pid, #{from := From, to := To, jid := JID}} = dropped(<<"drop-in">>, stanza_to_session),
    ?assertEqual(session_pid(B), Pid),
    ?assertEqual({jid(A), jid(B), jid(B)}, {From, To, JID}).

%% A stanza_to_session handler that changes a stanza changes what the
%% client gets.
to_session_change(_) ->
    ?assertEqual(<<"changed-in">>, changed(<<"change-in">>)).

%%% Session, account and roster events

%% session_opened runs in the session process once the resource is bound,
%% session_closed in the same process when it ends, both with the full JID.
session_opened_and_closed(_) ->
    observe(),
    A = login(<<"alice">>),
    {Opened, #{jid := JID}} = hook(session_opened),
    ?assertEqual(jid(A), JID),
    ?assertEqual(session_pid(A), Opened),
    MRef = erlang:monitor(process, Opened),
    ?C:send(A, #xmlel{name = <<"presence">>}),
    ?C:flush(A),
    ?C:close(A),
    {Closed, #{jid := JID2, available := Available}} = hook(session_closed),
    ?assertEqual({Opened, JID, true}, {Closed, JID2, Available}),
    receive {'DOWN', MRef, process, Opened, _} -> ok after 5000 -> error(session_alive) end,
    %% A session that never sent available presence closes with available false.
    B = login(<<"bob">>),
    {_, _} = hook(session_opened),
    ?C:close(B),
    {_, #{available := false}} = hook(session_closed).

%% user_registered and user_removed run in the caller of
%% throng_auth:register/3 and unregister/2, with the normalized user and
%% server, and not when the call fails.
user_registered_and_removed(_) ->
    observe(),
    ok = throng_auth:register(<<"Carol">>, ?HOST, <<"secret">>),
    ?assertEqual({self(), #{user => <<"carol">>, server => ?HOST}}, hook(user_registered)),
    {error, exists} = throng_auth:register(<<"carol">>, ?HOST, <<"secret">>),
    no_hook(user_registered, 100),
    ok = throng_auth:unregister(<<"carol">>, ?HOST),
    ?assertEqual({self(), #{user => <<"carol">>, server => ?HOST}}, hook(user_removed)),
    {error, not_found} = throng_auth:unregister(<<"carol">>, ?HOST),
    no_hook(user_removed, 100).

%% roster_item_changed runs in the session that set the roster, with the
%% user's bare JID, the old and new item, and a growing version.
roster_item_changed(_) ->
    observe(),
    A = login(<<"alice">>),
    Set = fun(Attrs) ->
                  Item = #xmlel{name = <<"item">>, attrs = [{<<"jid">>, <<"bob@localhost">>} | Attrs]},
                  R = ?C:iq(A, <<"set">>, (q(?NS_ROSTER))#xmlel{children = [Item]}),
                  <<"result">> = throng_xml:attr(<<"type">>, R),
                  hook(roster_item_changed)
          end,
    Bob = {<<"bob">>, ?HOST},
    {Pid, #{user := User, old := undefined, new := New1, version := V1}} =
        Set([{<<"name">>, <<"Bob">>}]),
    ?assertEqual(session_pid(A), Pid),
    ?assertEqual(#jid{user = <<"alice">>, server = ?HOST}, User),
    ?assertMatch(#roster_item{jid = Bob, name = <<"Bob">>}, New1),
    {_, #{old := Old2, new := New2, version := V2}} = Set([{<<"name">>, <<"Robert">>}]),
    ?assertEqual(New1, Old2),
    ?assertMatch(#roster_item{name = <<"Robert">>}, New2),
    {_, #{old := Old3, new := undefined, version := V3}} =
        Set([{<<"subscription">>, <<"remove">>}]),
    ?assertEqual(New2, Old3),
    ?assert(V1 < V2 andalso V2 < V3).

%% Items an initial_presence handler adds reach the new resource after its
%% presence stanzas, as the bytes the module's item_bytes/2 gives.
initial_presence_adds_items(_) ->
    A = login(<<"alice">>),
    ?C:send(A, #xmlel{name = <<"presence">>}),
    ?assertMatch(#xmlel{name = <<"presence">>}, ?C:recv_stanza(A)),
    M = ?C:recv_stanza(A),
    ?assertEqual(<<"welcome">>, ?X:body(M)),
    ?assertEqual(?HOST, throng_xml:attr(<<"from">>, M)),
    ?assertEqual(?C:jid(A), throng_xml:attr(<<"to">>, M)),
    %% Only the first available presence of a session runs the hook.
    ?C:send(A, #xmlel{name = <<"presence">>, children = [#xmlel{name = <<"show">>,
                                                                children = [{xmlcdata, <<"away">>}]}]}),
    ?assertMatch(#xmlel{name = <<"presence">>}, ?C:recv_stanza(A)),
    ?C:expect_nothing(A, 300).

%% A module item that the client never acknowledged (XEP-0198) is handed to
%% the module's item_reroute/2 when the session ends.
unacked_item_rerouted(_) ->
    observe(),
    A = login(<<"alice">>),
    JID = jid(A),
    ?C:send(A, #xmlel{name = <<"enable">>, attrs = [{<<"xmlns">>, ?NS_SM}]}),
    ?assertMatch(#xmlel{name = <<"enabled">>}, ?C:recv_stanza(A)),
    ?C:send(A, #xmlel{name = <<"presence">>}),
    ?assertEqual(<<"welcome">>, ?X:body(next_message(A))),
    ?C:abort(A),
    {_, #{data := Data, jid := To}} = hook(item_reroute),
    ?assertEqual({{welcome, JID}, JID}, {Data, To}).

%%% Session actions (throng_session:action())

%% A message from outside the session (throng_session:ext_message/3) reaches
%% the module's session_info/2 in the session, with its JID; {send, El}
%% writes El to the client.
session_info_send(_) ->
    observe(),
    A = login(<<"alice">>),
    Pid = session_pid(A),
    Msg = ?X:message(#jid{server = ?HOST}, jid(A), <<"from outside">>),
    ok = throng_session:ext_message(Pid, ?X, {actions, [{send, Msg}]}),
    {Ran, #{jid := JID}} = hook(session_info),
    ?assertEqual({Pid, jid(A)}, {Ran, JID}),
    ?assertEqual(<<"from outside">>, ?X:body(?C:recv_stanza(A))).

%% {stop, Condition, Text} ends the stream with that stream error (after the
%% actions before it); the actions after it are not carried out.
session_info_stop(_) ->
    A = login(<<"alice">>),
    Pid = session_pid(A),
    MRef = erlang:monitor(process, Pid),
    Bye = ?X:message(#jid{server = ?HOST}, jid(A), <<"bye">>),
    Later = ?X:message(#jid{server = ?HOST}, jid(A), <<"never">>),
    ok = throng_session:ext_message(Pid, ?X, {actions, [{send, Bye},
                                                        {stop, 'policy-violation', <<"test stop">>},
                                                        {send, Later}]}),
    ?assertEqual(<<"bye">>, ?X:body(?C:recv_stanza(A))),
    #xmlel{name = <<"stream:error">>} = Err = ?C:recv_stanza(A),
    ?assertNotEqual(undefined, throng_xml:subel(Err, <<"policy-violation">>, ?NS_STREAM_ERRORS)),
    ?assertEqual(<<"test stop">>, throng_xml:subel_cdata(Err, <<"text">>)),
    ?assertEqual(none, ?C:closed(A, 5000)),
    receive {'DOWN', MRef, process, Pid, _} -> ok after 5000 -> error(session_alive) end.

%% {timer, Ms, Msg} calls session_info(Msg) in the session Ms later.
session_info_timer(_) ->
    A = login(<<"alice">>),
    Later = ?X:message(#jid{server = ?HOST}, jid(A), <<"later">>),
    T0 = erlang:monotonic_time(millisecond),
    ok = throng_session:ext_message(session_pid(A), ?X,
                                    {actions, [{timer, 200, {actions, [{send, Later}]}}]}),
    ?assertEqual(<<"later">>, ?X:body(?C:recv_stanza(A))),
    ?assert(erlang:monotonic_time(millisecond) - T0 >= 200).

%% {timer, Ms} calls session_info(timer) Ms later; the timer's message is
%% the module's bare name (no memory of its own while it waits).
session_info_compact_timer(_) ->
    A = login(<<"alice">>),
    ok = throng_session:ext_message(session_pid(A), ?X, {actions, [{timer, 100}]}),
    ?assertEqual(<<"tick">>, ?X:body(?C:recv_stanza(A))).

%%% Failures

%% An IQ handler that crashes answers internal-server-error; the session
%% stays up and keeps answering.
crashing_iq_handler(_) ->
    A = login(<<"alice">>),
    Pid = session_pid(A),
    ?assertEqual({error, <<"internal-server-error">>}, answered(ask(A, ?X:ns_crash(), ?HOST))),
    ?assertEqual({result, <<"server">>}, answered(ask(A, ?X:ns(), ?HOST))),
    ?assertEqual(Pid, session_pid(A)).

%% A module's session_info/2 that crashes is logged; the session goes on
%% and still takes module messages.
crashing_session_info(_) ->
    A = login(<<"alice">>),
    Pid = session_pid(A),
    ok = throng_session:ext_message(Pid, ?X, crash),
    Hello = ?X:message(#jid{server = ?HOST}, jid(A), <<"still here">>),
    ok = throng_session:ext_message(Pid, ?X, {actions, [{send, Hello}]}),
    ?assertEqual(<<"still here">>, ?X:body(?C:recv_stanza(A))),
    ?assertEqual(Pid, session_pid(A)).

%% Two enabled modules answering the same IQ namespace in the same scope are
%% a configuration error: start_host/2 names both and starts nothing.
iq_namespace_conflict(_) ->
    {error, Msg} = throng_ext:start_host(?HOST, (throng_config:modules(?HOST))#{
                                                  throng_mod_version => #{show_os => false},
                                                  throng_test_ext_twin => #{}}),
    ?assertMatch({match, _}, re:run(Msg, "throng_mod_version and throng_test_ext_twin")),
    ?assertMatch({match, _}, re:run(Msg, "jabber:iq:version")).

%% A module whose start/2 fails makes start_host/2 return an error naming
%% the module and the host, and is not installed.
start_failure_names_module(_) ->
    {error, Msg} = throng_ext:start_host(?HOST, (throng_config:modules(?HOST))#{
                                                  ?X => #{fail => <<"no database">>}}),
    ?assertMatch({match, _}, re:run(Msg, "throng_test_ext")),
    ?assertMatch({match, _}, re:run(Msg, "localhost")),
    ?assertMatch({match, _}, re:run(Msg, "no database")),
    ?assertNot(throng_ext:is_enabled(?HOST, ?X)),
    A = login(<<"alice">>),
    ?assertEqual({error, <<"service-unavailable">>}, answered(ask(A, ?X:ns(), ?HOST))).

%% start/2 runs, with the module's options, even when the module's code was
%% not loaded before start_host/2 (interactive code loading); stop_host/1
%% runs stop/1.
start_runs_when_not_loaded(_) ->
    observe(),
    _ = code:purge(?X),
    true = code:delete(?X),
    _ = code:purge(?X),
    false = code:is_loaded(?X),
    ok = throng_ext:start_host(?HOST, (throng_config:modules(?HOST))#{?X => #{}}),
    ?assertEqual({self(), #{host => ?HOST, opts => #{}}}, hook(start)),
    ok = throng_ext:stop_host(?HOST),
    ?assertEqual({self(), #{host => ?HOST}}, hook(stop)).

%%% Which modules a configuration enables

%% With `modules: {disco: {}}' only disco runs: a ping, a version query and
%% a registration query get service-unavailable, disco#info lists disco
%% alone, and no in-band registration is offered.
only_disco_configured(_) ->
    ?assertEqual([throng_mod_disco], throng_ext:modules(?HOST)),
    {Pre, _} = features_after_auth(<<"alice">>),
    ?assertEqual(undefined, throng_xml:subel(Pre, <<"register">>, ?NS_REGISTER_FEATURE)),
    A = login(<<"alice">>),
    [?assertEqual({error, <<"service-unavailable">>}, answered(ask(A, NS, ?HOST)))
     || NS <- [?NS_PING, ?NS_VERSION, ?NS_REGISTER, <<"jabber:iq:last">>]],
    {Ids, Fs} = disco(A, ?HOST),
    ?assertEqual([{<<"server">>, <<"im">>, <<"Throng">>}], Ids),
    ?assertEqual(lists:sort([?NS_DISCO_INFO, ?NS_DISCO_ITEMS, ?NS_ROSTER]), lists:sort(Fs)).

%% host_config gives example.org its own module set (disco only) while
%% localhost keeps the top-level modules.
host_config_module_sets(_) ->
    ?assertEqual([throng_mod_disco], throng_ext:modules(<<"example.org">>)),
    ?assert(throng_ext:is_enabled(?HOST, throng_mod_ping)),
    A = login(<<"alice">>),
    E = ?C:login(<<"erin">>, <<"password">>, <<"r">>, #{server => <<"example.org">>}),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, ask(A, ?NS_PING, ?HOST))),
    ?assertEqual({error, <<"service-unavailable">>}, answered(ask(E, ?NS_PING, <<"example.org">>))),
    {_, FsA} = disco(A, ?HOST),
    {_, FsE} = disco(E, <<"example.org">>),
    ?assert(lists:member(?NS_PING, FsA)),
    ?assertNot(lists:member(?NS_PING, FsE)),
    ?assert(lists:member(?NS_DISCO_INFO, FsE)).

%%% The documentation

%% The worked example of docs/extensions.md compiles as written (specs on
%% every export, no warnings) and does what the page says: a session that
%% becomes available gets the text as a headline; with no text, nothing.
docs_worked_example(Config) ->
    Root = root(),
    {ok, Doc} = file:read_file(filename:join(Root, "docs/extensions.md")),
    Start = <<"%% @doc Message of the day">>,
    [_, After] = binary:split(Doc, <<"```erlang\n", Start/binary>>),
    [Code, _] = binary:split(After, <<"```">>),
    File = filename:join(?config(priv_dir, Config), "throng_mod_motd.erl"),
    ok = file:write_file(File, [Start, Code]),
    {ok, throng_mod_motd, Bin} =
        compile:file(File, [binary, return_errors, warnings_as_errors, warn_missing_spec,
                            {i, filename:join(Root, "apps/throng/include")}]),
    {module, _} = code:load_binary(throng_mod_motd, File, Bin),
    Motd = fun(Text) ->
                   ok = throng_ext:start_host(?HOST, (throng_config:modules(?HOST))#{
                                                        throng_mod_motd => #{text => Text}})
           end,
    Motd(<<"Maintenance on Sunday">>),
    A = login(<<"alice">>),
    ?C:send(A, #xmlel{name = <<"presence">>}),
    M = next_message(A),
    ?assertEqual({<<"Maintenance on Sunday">>, <<"headline">>, ?HOST},
                 {?X:body(M), throng_xml:attr(<<"type">>, M), throng_xml:attr(<<"from">>, M)}),
    Motd(<<>>),
    B = login(<<"bob">>),
    ?C:send(B, #xmlel{name = <<"presence">>}),
    ?assertMatch(#xmlel{name = <<"presence">>}, ?C:recv_stanza(B)),
    ?C:expect_nothing(B, 300).

%% The repository's root, from where this suite's source is.
root() ->
    Src = proplists:get_value(source, ?MODULE:module_info(compile)),
    filename:dirname(filename:dirname(filename:dirname(filename:dirname(Src)))).
