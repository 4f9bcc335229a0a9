%% @doc XEP-0050 Ad-Hoc Commands (throng_mod_adhoc) against the real server:
%% the feature and the command list in service discovery (per asker), the
%% nodes' disco#info, and the execution of commands through their stages
%% (execute, next, prev, complete, cancel) with the errors of §4.4
%% (malformed-action, bad-action, bad-sessionid, session-expired,
%% forbidden, item-not-found). Besides the XEP-0133 commands, a test module
%% ({@link throng_test_adhoc}) offers a three-stage `wizard' (admins) and a
%% one-stage `echo' (every user of the host).
-module(xep0050_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(A, throng_adhoc_client).
-define(HOST, <<"localhost">>).

all() ->
    [feature_on_domain, command_list_node_info, admin_lists_every_command,
     user_lists_public_commands_only, other_domain_user_lists_nothing, no_admins_configured,
     command_node_info, command_node_info_forbidden, unknown_node,
     forbidden_for_non_admin, multi_stage_next_prev_complete, execute_is_the_default_action,
     complete_early, bad_action, malformed_action, action_needs_session, unknown_sessionid,
     sessionid_of_another_requester, sessionid_of_another_command, cancel_ends_session,
     completed_session_expired, session_timeout, form_error_keeps_stage, not_a_submission,
     public_command_one_stage, one_shot_submission, max_sessions_per_requester, iq_get_refused,
     command_to_an_account, module_disabled].

init_per_testcase(no_admins_configured, Config) ->
    start(Config, #{}),
    Config;
init_per_testcase(session_timeout, Config) ->
    start(Config, #{admins => [<<"admin@localhost">>],
                    modules => #{adhoc => #{session_timeout => 2}}}),
    Config;
init_per_testcase(max_sessions_per_requester, Config) ->
    start(Config, #{admins => [<<"admin@localhost">>],
                    modules => #{adhoc => #{max_sessions => 2}}}),
    Config;
init_per_testcase(module_disabled, Config) ->
    Dir = filename:join(?config(priv_dir, Config),
                        "data-" ++ integer_to_list(erlang:unique_integer([positive]))),
    Base = throng_ct:config(#{data_dir => list_to_binary(Dir), admins => [<<"admin@localhost">>]}),
    ok = application:set_env(throng, config,
                             Base#{modules => maps:remove(adhoc, maps:get(modules, Base))}),
    {ok, _} = application:ensure_all_started(throng),
    throng_ct:register(<<"admin">>, <<"password">>),
    Config;
init_per_testcase(_TC, Config) ->
    start(Config, #{admins => [<<"admin@localhost">>]}),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

start(Config, Overrides) ->
    throng_ct:start(Config, Overrides),
    [throng_ct:register(U, <<"password">>) || U <- [<<"admin">>, <<"alice">>]],
    throng_ct:register(<<"erin">>, <<"example.org">>, <<"password">>),
    ok = throng_ext:start_host(?HOST, (throng_config:modules(?HOST))#{throng_test_adhoc => #{}}).

%%% Helpers

login(User) ->
    ?C:login(User, <<"password">>, <<"r">>).

admin_nodes() ->
    [?A:admin_node(N) || N <- [<<"add-user">>, <<"delete-user">>, <<"disable-user">>,
                               <<"reenable-user">>, <<"change-user-password">>,
                               <<"end-user-session">>, <<"get-user-roster">>, <<"user-stats">>,
                               <<"get-registered-users-num">>, <<"get-disabled-users-num">>,
                               <<"get-disabled-users-list">>,
                               <<"get-online-users-num">>, <<"get-online-users-list">>,
                               <<"announce">>, <<"set-motd">>, <<"edit-motd">>,
                               <<"delete-motd">>]].

command_nodes(Items) ->
    lists:sort([N || {_, N, _} <- Items]).

%% Starts the wizard: its first answer (stage "name").
wizard(C) ->
    R = ?A:run(C, <<"wizard">>, [{<<"action">>, <<"execute">>}]),
    ?assertEqual(<<"executing">>, ?A:status(R)),
    R.

step(C, Sid, Action, Fields) ->
    ?A:run(C, <<"wizard">>, [{<<"sessionid">>, Sid}, {<<"action">>, Action}],
           [form(Fields) || Fields =/= none]).

%% A submitted form of single values: [{Var, Value}].
form(Fields) ->
    ?A:form([{V, [X]} || {V, X} <- Fields]).

%% The title of the form in an answered command.
title(Cmd) ->
    throng_xml:subel_cdata(throng_xml:subel(Cmd, <<"x">>, <<"jabber:x:data">>), <<"title">>).

%%% Cases

%% disco#info of the domain lists http://jabber.org/protocol/commands (§2.1).
feature_on_domain(_) ->
    A = login(<<"alice">>),
    R = ?C:iq(A, <<"get">>, #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_DISCO_INFO}]},
              [{<<"to">>, ?HOST}]),
    Fs = [throng_xml:attr(<<"var">>, F) || F <- throng_xml:subels(throng_xml:subel(R, <<"query">>))],
    ?assert(lists:member(?A:ns(), Fs)).

%% The command list's node has identity automation/command-list (§7.2).
command_list_node_info(_) ->
    A = login(<<"alice">>),
    ?assertMatch({[{<<"automation">>, <<"command-list">>, _}], _}, ?A:info(A, ?A:ns())).

%% An admin's command list: every XEP-0133 command and both test commands,
%% each an item of the domain with a name (§2.2).
admin_lists_every_command(_) ->
    Items = ?A:items(login(<<"admin">>), ?A:ns()),
    ?assertEqual(lists:sort(admin_nodes() ++ [<<"wizard">>, <<"echo">>]), command_nodes(Items)),
    [?assertMatch({?HOST, _, Name} when is_binary(Name) andalso Name =/= <<>>, I) || I <- Items],
    ?assertEqual({?HOST, ?A:admin_node(<<"add-user">>), <<"Add a User">>},
                 lists:keyfind(?A:admin_node(<<"add-user">>), 2, Items)).

%% A user who is not an admin sees only the command every user may run.
user_lists_public_commands_only(_) ->
    ?assertEqual([{?HOST, <<"echo">>, <<"Echo">>}], ?A:items(login(<<"alice">>), ?A:ns())).

%% A user of another domain of the server sees none of localhost's commands.
other_domain_user_lists_nothing(_) ->
    E = ?C:login(<<"erin">>, <<"password">>, <<"r">>, #{server => <<"example.org">>}),
    ?assertEqual([], ?A:items(E, ?A:ns())).

%% With no admins configured, nobody runs or sees an admin command.
no_admins_configured(_) ->
    Ad = login(<<"admin">>),
    ?assertEqual([<<"echo">>], command_nodes(?A:items(Ad, ?A:ns()))),
    ?assertEqual({error, <<"forbidden">>},
                 ?A:failure(?A:run(Ad, ?A:admin_node(<<"add-user">>), []))).

%% disco#info of a command's node: automation/command-node with the
%% command's name, the commands and jabber:x:data features (§2.2).
command_node_info(_) ->
    ?assertEqual({[{<<"automation">>, <<"command-node">>, <<"Add a User">>}],
                  [<<"http://jabber.org/protocol/commands">>, <<"jabber:x:data">>]},
                 ?A:info(login(<<"admin">>), ?A:admin_node(<<"add-user">>))).

%% The node of a command the asker may not run answers forbidden (§2.2).
command_node_info_forbidden(_) ->
    A = login(<<"alice">>),
    ?assertEqual({error, <<"forbidden">>}, ?A:info(A, ?A:admin_node(<<"add-user">>))),
    ?assertMatch({[{<<"automation">>, <<"command-node">>, <<"Echo">>}], _}, ?A:info(A, <<"echo">>)).

%% A node no command has: item-not-found, in disco and when executed (§4.4).
unknown_node(_) ->
    Ad = login(<<"admin">>),
    ?assertEqual({error, <<"item-not-found">>}, ?A:info(Ad, <<"no-such-command">>)),
    ?assertEqual({error, <<"item-not-found">>}, ?A:failure(?A:run(Ad, <<"no-such-command">>, []))),
    ?assertEqual({error, <<"item-not-found">>},
                 ?A:failure(?A:run(Ad, ?A:admin_node(<<"get-user-password">>), []))).

%% Every admin command, and the admins' wizard, is forbidden to a user who
%% is not an admin (§4.4); nothing is executed.
forbidden_for_non_admin(_) ->
    A = login(<<"alice">>),
    [?assertEqual({error, <<"forbidden">>}, ?A:failure(?A:run(A, N, [{<<"action">>, <<"execute">>}])))
     || N <- [<<"wizard">> | admin_nodes()]].

%% The three stages of the wizard with a step back: next, next, prev
%% (the previous form again, same session), next, complete (§2.4.2). Each
%% executing answer says what may come next and what execute means.
multi_stage_next_prev_complete(_) ->
    Ad = login(<<"admin">>),
    S1 = wizard(Ad),
    Sid = ?A:sessionid(S1),
    ?assert(is_binary(Sid) andalso Sid =/= <<>>),
    ?assertEqual({<<"next">>, [<<"next">>]}, ?A:actions(S1)),
    ?assertEqual(<<"Your name">>, title(S1)),
    S2 = step(Ad, Sid, <<"next">>, [{<<"name">>, <<"ann">>}]),
    ?assertEqual({<<"executing">>, Sid, <<"Your color">>}, {?A:status(S2), ?A:sessionid(S2), title(S2)}),
    ?assertEqual({<<"next">>, [<<"prev">>, <<"next">>, <<"complete">>]}, ?A:actions(S2)),
    S3 = step(Ad, Sid, <<"next">>, [{<<"color">>, <<"red">>}]),
    ?assertEqual(<<"Sure?">>, title(S3)),
    ?assertEqual({<<"complete">>, [<<"prev">>, <<"complete">>]}, ?A:actions(S3)),
    Back = step(Ad, Sid, <<"prev">>, none),
    ?assertEqual({<<"executing">>, Sid, <<"Your color">>}, {?A:status(Back), ?A:sessionid(Back), title(Back)}),
    ?assertEqual({<<"next">>, [<<"prev">>, <<"next">>, <<"complete">>]}, ?A:actions(Back)),
    Again = step(Ad, Sid, <<"next">>, [{<<"color">>, <<"blue">>}]),
    ?assertEqual(<<"Sure?">>, title(Again)),
    Done = step(Ad, Sid, <<"complete">>, none),
    ?assertEqual({<<"completed">>, Sid}, {?A:status(Done), ?A:sessionid(Done)}),
    ?assertEqual([{<<"info">>, <<"ann likes blue">>}], ?A:notes(Done)),
    ?assertEqual(none, ?A:actions(Done)).

%% In a session, action execute (or no action) is the stage's default
%% action, the `execute' attribute of <actions/> (§3.4).
execute_is_the_default_action(_) ->
    Ad = login(<<"admin">>),
    Sid = ?A:sessionid(wizard(Ad)),
    S2 = ?A:run(Ad, <<"wizard">>, [{<<"sessionid">>, Sid}], [form([{<<"name">>, <<"bo">>}])]),
    ?assertEqual(<<"Your color">>, title(S2)),
    S3 = step(Ad, Sid, <<"execute">>, [{<<"color">>, <<"green">>}]),
    ?assertEqual(<<"Sure?">>, title(S3)),
    Done = ?A:run(Ad, <<"wizard">>, [{<<"sessionid">>, Sid}]),
    ?assertEqual([{<<"info">>, <<"bo likes green">>}], ?A:notes(Done)).

%% complete where the stage allows it ends the command there (§2.4.2).
complete_early(_) ->
    Ad = login(<<"admin">>),
    Sid = ?A:sessionid(wizard(Ad)),
    _ = step(Ad, Sid, <<"next">>, [{<<"name">>, <<"cy">>}]),
    Done = step(Ad, Sid, <<"complete">>, [{<<"color">>, <<"teal">>}]),
    ?assertEqual({<<"completed">>, [{<<"info">>, <<"cy likes teal">>}]}, {?A:status(Done), ?A:notes(Done)}).

%% An action the stage does not allow is bad-request + bad-action, and the
%% session stays where it was: complete and prev at the first stage.
bad_action(_) ->
    Ad = login(<<"admin">>),
    Sid = ?A:sessionid(wizard(Ad)),
    ?assertEqual({error, <<"bad-request">>, <<"bad-action">>},
                 ?A:failure(step(Ad, Sid, <<"complete">>, [{<<"name">>, <<"x">>}]))),
    ?assertEqual({error, <<"bad-request">>, <<"bad-action">>}, ?A:failure(step(Ad, Sid, <<"prev">>, none))),
    ?assertEqual(<<"Your color">>, title(step(Ad, Sid, <<"next">>, [{<<"name">>, <<"x">>}]))).

%% An action the protocol does not define is bad-request + malformed-action.
malformed_action(_) ->
    Ad = login(<<"admin">>),
    ?assertEqual({error, <<"bad-request">>, <<"malformed-action">>},
                 ?A:failure(?A:run(Ad, <<"wizard">>, [{<<"action">>, <<"jump">>}]))),
    Sid = ?A:sessionid(wizard(Ad)),
    ?assertEqual({error, <<"bad-request">>, <<"malformed-action">>},
                 ?A:failure(step(Ad, Sid, <<"finish">>, none))).

%% next, prev and cancel continue a session: without a session id they are
%% bad-request + bad-sessionid.
action_needs_session(_) ->
    Ad = login(<<"admin">>),
    [?assertEqual({error, <<"bad-request">>, <<"bad-sessionid">>},
                  ?A:failure(?A:run(Ad, <<"wizard">>, [{<<"action">>, A}])))
     || A <- [<<"next">>, <<"prev">>, <<"cancel">>]].

%% A session id the server never issued is bad-request + bad-sessionid.
unknown_sessionid(_) ->
    Ad = login(<<"admin">>),
    _ = wizard(Ad),
    [?assertEqual({error, <<"bad-request">>, <<"bad-sessionid">>},
                  ?A:failure(step(Ad, Sid, <<"next">>, [{<<"name">>, <<"x">>}])))
     || Sid <- [<<"made-up">>, <<"AAAAAAAAAAAAAAAAAAAAAAAAAAAA">>, <<"!!">>]].

%% A session is its requester's (full JID): another resource of the same
%% admin gets bad-sessionid for it; the owner goes on.
sessionid_of_another_requester(_) ->
    Ad = login(<<"admin">>),
    Sid = ?A:sessionid(wizard(Ad)),
    Ad2 = ?C:login(<<"admin">>, <<"password">>, <<"other">>),
    ?assertEqual({error, <<"bad-request">>, <<"bad-sessionid">>},
                 ?A:failure(step(Ad2, Sid, <<"next">>, [{<<"name">>, <<"x">>}]))),
    ?assertEqual(<<"Your color">>, title(step(Ad, Sid, <<"next">>, [{<<"name">>, <<"x">>}]))).

%% A session id is valid only with the command it was issued for.
sessionid_of_another_command(_) ->
    Ad = login(<<"admin">>),
    Sid = ?A:sessionid(wizard(Ad)),
    ?assertEqual({error, <<"bad-request">>, <<"bad-sessionid">>},
                 ?A:failure(?A:run(Ad, <<"echo">>, [{<<"sessionid">>, Sid},
                                                   {<<"action">>, <<"complete">>}]))).

%% cancel ends the session: status canceled, and the id is then
%% not-allowed + session-expired (§2.4.3, §4.4).
cancel_ends_session(_) ->
    Ad = login(<<"admin">>),
    Sid = ?A:sessionid(wizard(Ad)),
    _ = step(Ad, Sid, <<"next">>, [{<<"name">>, <<"x">>}]),
    C = ?A:cancel(Ad, <<"wizard">>, Sid),
    ?assertEqual({<<"canceled">>, Sid}, {?A:status(C), ?A:sessionid(C)}),
    ?assertEqual({error, <<"not-allowed">>, <<"session-expired">>},
                 ?A:failure(step(Ad, Sid, <<"next">>, [{<<"color">>, <<"x">>}]))),
    ?assertEqual({error, <<"not-allowed">>, <<"session-expired">>},
                 ?A:failure(?A:cancel(Ad, <<"wizard">>, Sid))).

%% A completed session's id is session-expired too (§3.3).
completed_session_expired(_) ->
    Ad = login(<<"admin">>),
    Sid = ?A:sessionid(wizard(Ad)),
    _ = step(Ad, Sid, <<"next">>, [{<<"name">>, <<"x">>}]),
    <<"completed">> = ?A:status(step(Ad, Sid, <<"complete">>, [{<<"color">>, <<"y">>}])),
    ?assertEqual({error, <<"not-allowed">>, <<"session-expired">>},
                 ?A:failure(step(Ad, Sid, <<"prev">>, none))).

%% With session_timeout 2, a session left alone for 3.5 s has expired:
%% session-expired; a session whose requester keeps going does not. (Expiry
%% counts whole seconds, so a session lives 2 to 3 s after its last step:
%% steps 0.7 s apart leave a slow machine 1.3 s.)
session_timeout(_) ->
    Ad = login(<<"admin">>),
    Idle = ?A:sessionid(wizard(Ad)),
    Busy = ?A:sessionid(wizard(Ad)),
    [begin
         timer:sleep(700),
         _ = step(Ad, Busy, <<"next">>, [{<<"name">>, <<"x">>}]),
         timer:sleep(700),
         _ = step(Ad, Busy, <<"prev">>, none)
     end || _ <- [1, 2]],
    timer:sleep(700),
    ?assertEqual({error, <<"not-allowed">>, <<"session-expired">>},
                 ?A:failure(step(Ad, Idle, <<"next">>, [{<<"name">>, <<"x">>}]))),
    ?assertEqual(<<"Your color">>, title(step(Ad, Busy, <<"next">>, [{<<"name">>, <<"y">>}]))).

%% A form the command cannot accept (a required field missing) is
%% bad-request + bad-payload; the session stays at its stage.
form_error_keeps_stage(_) ->
    Ad = login(<<"admin">>),
    Sid = ?A:sessionid(wizard(Ad)),
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>},
                 ?A:failure(step(Ad, Sid, <<"next">>, [{<<"other">>, <<"x">>}]))),
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>}, ?A:failure(step(Ad, Sid, <<"next">>, none))),
    ?assertEqual(<<"Your color">>, title(step(Ad, Sid, <<"next">>, [{<<"name">>, <<"x">>}]))).

%% A form that is not a submission (type form), or that names a field
%% twice, is bad-payload.
not_a_submission(_) ->
    Ad = login(<<"admin">>),
    Sid = ?A:sessionid(wizard(Ad)),
    Form = #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, <<"jabber:x:data">>}, {<<"type">>, <<"form">>}]},
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>},
                 ?A:failure(?A:run(Ad, <<"wizard">>, [{<<"sessionid">>, Sid}, {<<"action">>, <<"next">>}],
                                 [Form]))),
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>},
                 ?A:failure(step(Ad, Sid, <<"next">>, [{<<"name">>, <<"a">>}, {<<"name">>, <<"b">>}]))).

%% A command every user may run: one stage, its form then completed with a
%% result form and a note; the default action is complete.
public_command_one_stage(_) ->
    A = login(<<"alice">>),
    F = ?A:run(A, <<"echo">>, []),
    ?assertEqual({<<"complete">>, [<<"complete">>]}, ?A:actions(F)),
    Done = ?A:submit(A, <<"echo">>, ?A:sessionid(F), [{<<"text">>, [<<"hello">>]}]),
    ?assertEqual(<<"completed">>, ?A:status(Done)),
    ?assertEqual([<<"hello">>], ?A:field_values(Done, <<"text">>)),
    ?assertEqual([{<<"info">>, <<"echoed">>}], ?A:notes(Done)).

%% A form submitted with the first request completes the command at once.
one_shot_submission(_) ->
    A = login(<<"alice">>),
    Done = ?A:run(A, <<"echo">>, [{<<"action">>, <<"complete">>}], [form([{<<"text">>, <<"hi">>}])]),
    ?assertEqual({<<"completed">>, [<<"hi">>]}, {?A:status(Done), ?A:field_values(Done, <<"text">>)}).

%% With max_sessions 2 a third open session of one requester is refused
%% with not-allowed; ending one makes room.
max_sessions_per_requester(_) ->
    Ad = login(<<"admin">>),
    S1 = ?A:sessionid(wizard(Ad)),
    _ = wizard(Ad),
    ?assertEqual({error, <<"not-allowed">>}, ?A:failure(?A:run(Ad, <<"wizard">>, []))),
    Other = ?C:login(<<"admin">>, <<"password">>, <<"other">>),
    ?assertEqual(<<"executing">>, ?A:status(wizard(Other))),
    <<"canceled">> = ?A:status(?A:cancel(Ad, <<"wizard">>, S1)),
    ?assertEqual(<<"executing">>, ?A:status(wizard(Ad))).

%% A command is an IQ set; a get is bad-request.
iq_get_refused(_) ->
    Ad = login(<<"admin">>),
    R = ?C:iq(Ad, <<"get">>, #xmlel{name = <<"command">>, attrs = [{<<"xmlns">>, ?A:ns()},
                                                                   {<<"node">>, <<"wizard">>}]},
              [{<<"to">>, ?HOST}]),
    ?assertEqual({error, <<"bad-request">>}, ?A:failure(R)).

%% The commands are the domain's: a command to the admin's own bare JID
%% gets service-unavailable.
command_to_an_account(_) ->
    Ad = login(<<"admin">>),
    R = ?C:iq(Ad, <<"set">>, #xmlel{name = <<"command">>, attrs = [{<<"xmlns">>, ?A:ns()},
                                                                   {<<"node">>, <<"wizard">>}]},
              [{<<"to">>, <<"admin@localhost">>}]),
    ?assertEqual({error, <<"service-unavailable">>}, ?A:failure(R)).

%% Without the module: no feature, no command list, commands unanswered.
module_disabled(_) ->
    Ad = login(<<"admin">>),
    ?assertEqual({error, <<"item-not-found">>}, ?A:items(Ad, ?A:ns())),
    ?assertEqual({error, <<"service-unavailable">>},
                 ?A:failure(?A:run(Ad, ?A:admin_node(<<"add-user">>), []))).
