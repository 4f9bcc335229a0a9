%% @doc XEP-0133 Service Administration (throng_adhoc_admin, through
%% throng_mod_adhoc) against the real server over real sockets: each
%% command end to end as an administrator (admin@localhost, in `admins')
%% runs it from a client, and what it did seen from other clients — a new
%% account logs in, an old password stops working, a deleted or kicked
%% user's sessions end, the counts and lists match who is online, an
%% announcement reaches every session, a user's roster and statistics are
%% what the user has. Wrong input is an error that changes
%% nothing.
-module(xep0133_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(A, throng_adhoc_client).
-define(HOST, <<"localhost">>).
-define(ADMIN_NS, <<"http://jabber.org/protocol/admin">>).

all() ->
    [commands_listed, get_user_password_not_offered, add_user_form, add_user_then_login,
     add_user_existing_account, add_user_passwords_differ_then_retry, add_user_bad_input,
     change_password, change_password_bad_input, delete_user, delete_user_bad_input,
     end_user_session_bare_jid, end_user_session_full_jid, registered_users_num,
     online_users_num, online_users_list, online_users_list_max_items, announce,
     announce_bad_input, user_roster, user_stats, user_roster_and_stats_bad_input,
     disable_and_reenable_user, disable_user_bad_input, disabled_account_deleted_and_made_again,
     motd_once_per_account, motd_edit_and_delete, motd_bad_input].

init_per_testcase(_TC, Config) ->
    throng_ct:start(Config, #{admins => [<<"admin@localhost">>]}),
    [throng_ct:register(U, <<"password">>) || U <- [<<"admin">>, <<"alice">>, <<"bob">>, <<"carol">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

login(User) ->
    login(User, <<"r">>).

login(User, Resource) ->
    ?C:login(User, <<"password">>, Resource).

cmd_node(Cmd) ->
    ?A:admin_node(Cmd).

%% Runs an admin command with a form ([{Var, [Value]}]) as the admin.
admin(Ad, Cmd, Fields) ->
    ?A:submit(Ad, cmd_node(Cmd), Fields).

%% SASL PLAIN on a new connection: ok or {failure, Condition}.
auth(User, Password) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    R = ?C:auth_plain(C, User, Password),
    ?C:close(C),
    R.

%% SASL SCRAM-SHA-256 on a new connection: ok or {failure, Condition}.
scram(User, Password) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    R = ?C:auth_scram(C, User, Password, sha256),
    ?C:close(C),
    R.

completed_note(R) ->
    ?assertEqual(<<"completed">>, ?A:status(R)),
    [{<<"info">>, Note}] = ?A:notes(R),
    Note.

%% The single value of a result field.
result_value(R, Var) ->
    ?assertEqual(<<"completed">>, ?A:status(R)),
    ?assertEqual([?ADMIN_NS], ?A:field_values(R, <<"FORM_TYPE">>)),
    [V] = ?A:field_values(R, Var),
    V.

%% The next message a client gets (other stanzas skipped).
next_message(C) ->
    case ?C:recv_stanza(C) of
        #xmlel{name = <<"message">>} = M -> M;
        _ -> next_message(C)
    end.

%% Nothing but presence arrives within half a second.
no_message(C) ->
    case ?C:recv(C, 500) of
        timeout -> ok;
        #xmlel{name = <<"presence">>} -> no_message(C);
        Other -> ct:fail({unexpected, Other})
    end.

%%% Cases

%% An admin's command list is exactly the XEP-0133 commands Throng offers,
%% by their XEP node names.
commands_listed(_) ->
    Items = ?A:items(login(<<"admin">>), ?A:ns()),
    ?assertEqual(lists:sort([cmd_node(N) || N <- [<<"add-user">>, <<"delete-user">>,
                                              <<"change-user-password">>, <<"end-user-session">>,
                                              <<"disable-user">>, <<"reenable-user">>,
                                              <<"get-disabled-users-num">>,
                                              <<"get-disabled-users-list">>,
                                              <<"get-user-roster">>, <<"user-stats">>,
                                              <<"get-registered-users-num">>,
                                              <<"get-online-users-num">>,
                                              <<"get-online-users-list">>, <<"announce">>,
                                              <<"set-motd">>, <<"edit-motd">>,
                                              <<"delete-motd">>]]),
                 lists:sort([N || {_, N, _} <- Items])).

%% get-user-password is not offered (only SCRAM keys are stored): the node
%% is not found.
get_user_password_not_offered(_) ->
    ?assertEqual({error, <<"item-not-found">>},
                 ?A:failure(?A:run(login(<<"admin">>), cmd_node(<<"get-user-password">>), []))).

%% add-user shows XEP-0133's form: FORM_TYPE, accountjid, password,
%% password-verify; one stage, completed by complete.
add_user_form(_) ->
    F = ?A:run(login(<<"admin">>), cmd_node(<<"add-user">>), [{<<"action">>, <<"execute">>}]),
    ?assertEqual(<<"executing">>, ?A:status(F)),
    ?assertEqual({<<"complete">>, [<<"complete">>]}, ?A:actions(F)),
    ?assertEqual([<<"FORM_TYPE">>, <<"accountjid">>, <<"password">>, <<"password-verify">>],
                 ?A:field_vars(F)),
    ?assertEqual([?ADMIN_NS], ?A:field_values(F, <<"FORM_TYPE">>)).

%% A user added by the admin logs in with that password (and not another).
add_user_then_login(_) ->
    Ad = login(<<"admin">>),
    ?assertEqual({failure, <<"not-authorized">>}, auth(<<"juliet">>, <<"R0m30">>)),
    R = admin(Ad, <<"add-user">>, [{<<"accountjid">>, [<<"juliet@localhost">>]},
                                   {<<"password">>, [<<"R0m30">>]},
                                   {<<"password-verify">>, [<<"R0m30">>]}]),
    ?assertEqual(<<"Added juliet@localhost">>, completed_note(R)),
    J = ?C:login(<<"juliet">>, <<"R0m30">>, <<"balcony">>),
    ?assertEqual(<<"juliet@localhost/balcony">>, ?C:jid(J)),
    ?assertEqual({failure, <<"not-authorized">>}, auth(<<"juliet">>, <<"wrong">>)).

%% Adding an account that exists is conflict, and changes nothing.
add_user_existing_account(_) ->
    R = admin(login(<<"admin">>), <<"add-user">>, [{<<"accountjid">>, [<<"alice@localhost">>]},
                                                   {<<"password">>, [<<"new">>]},
                                                   {<<"password-verify">>, [<<"new">>]}]),
    ?assertEqual({error, <<"conflict">>}, ?A:failure(R)),
    ?assertEqual(ok, auth(<<"alice">>, <<"password">>)).

%% Passwords that differ are not-acceptable; the session stays, and the
%% corrected form completes it.
add_user_passwords_differ_then_retry(_) ->
    Ad = login(<<"admin">>),
    F = ?A:run(Ad, cmd_node(<<"add-user">>), []),
    Sid = ?A:sessionid(F),
    Bad = ?A:submit(Ad, cmd_node(<<"add-user">>), Sid, [{<<"accountjid">>, [<<"dan@localhost">>]},
                                                    {<<"password">>, [<<"one">>]},
                                                    {<<"password-verify">>, [<<"two">>]}]),
    ?assertEqual({error, <<"not-acceptable">>}, ?A:failure(Bad)),
    ?assertEqual({failure, <<"not-authorized">>}, auth(<<"dan">>, <<"one">>)),
    Good = ?A:submit(Ad, cmd_node(<<"add-user">>), Sid, [{<<"accountjid">>, [<<"dan@localhost">>]},
                                                     {<<"password">>, [<<"two">>]},
                                                     {<<"password-verify">>, [<<"two">>]}]),
    ?assertEqual(<<"completed">>, ?A:status(Good)),
    ?assertEqual(ok, auth(<<"dan">>, <<"two">>)).

%% Missing fields are bad-payload; a JID that is not a user's bare JID
%% is jid-malformed, one of another domain not-acceptable; none creates an
%% account.
add_user_bad_input(_) ->
    Ad = login(<<"admin">>),
    Add = fun(Jid, Pw) ->
                  ?A:failure(admin(Ad, <<"add-user">>, [{<<"accountjid">>, Jid} || Jid =/= none] ++
                                       [{<<"password">>, Pw} || Pw =/= none]))
          end,
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>}, Add(none, [<<"pw">>])),
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>}, Add([<<>>], [<<"pw">>])),
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>}, Add([<<"eve@localhost">>], none)),
    ?assertEqual({error, <<"jid-malformed">>}, Add([<<"eve@localhost/r">>], [<<"pw">>])),
    ?assertEqual({error, <<"jid-malformed">>}, Add([<<"localhost">>], [<<"pw">>])),
    ?assertEqual({error, <<"jid-malformed">>}, Add([<<"e ve@localhost">>], [<<"pw">>])),
    ?assertEqual({error, <<"not-acceptable">>}, Add([<<"eve@example.org">>], [<<"pw">>])),
    ?assertEqual({error, <<"not-acceptable">>}, Add([<<"eve@elsewhere.net">>], [<<"pw">>])),
    ?assertNot(throng_storage:account_exists(<<"eve">>, <<"localhost">>)),
    ?assertNot(throng_storage:account_exists(<<"eve">>, <<"example.org">>)).

%% After change-user-password the old password fails and the new one works.
change_password(_) ->
    R = admin(login(<<"admin">>), <<"change-user-password">>,
              [{<<"accountjid">>, [<<"bob@localhost">>]}, {<<"password">>, [<<"s3cret">>]}]),
    ?assertEqual(<<"Changed the password of bob@localhost">>, completed_note(R)),
    ?assertEqual({failure, <<"not-authorized">>}, auth(<<"bob">>, <<"password">>)),
    ?assertEqual(ok, auth(<<"bob">>, <<"s3cret">>)).

%% An account that does not exist is item-not-found; no password is
%% bad-payload; the password stays.
change_password_bad_input(_) ->
    Ad = login(<<"admin">>),
    ?assertEqual({error, <<"item-not-found">>},
                 ?A:failure(admin(Ad, <<"change-user-password">>,
                                  [{<<"accountjid">>, [<<"nobody@localhost">>]},
                                   {<<"password">>, [<<"x">>]}]))),
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>},
                 ?A:failure(admin(Ad, <<"change-user-password">>,
                                  [{<<"accountjid">>, [<<"bob@localhost">>]}]))),
    ?assertEqual(ok, auth(<<"bob">>, <<"password">>)).

%% delete-user ends every session of the account (a stream error on each)
%% and removes it: it cannot log in, and exists no more.
delete_user(_) ->
    Ad = login(<<"admin">>),
    B1 = login(<<"bob">>, <<"one">>),
    B2 = login(<<"bob">>, <<"two">>),
    R = admin(Ad, <<"delete-user">>, [{<<"accountjids">>, [<<"bob@localhost">>, <<"carol@localhost">>]}]),
    ?assertEqual(<<"Deleted 2 account(s)">>, completed_note(R)),
    ?assertEqual(<<"policy-violation">>, ?C:closed(B1, 5000)),
    ?assertEqual(<<"policy-violation">>, ?C:closed(B2, 5000)),
    ?assertEqual({failure, <<"not-authorized">>}, auth(<<"bob">>, <<"password">>)),
    ?assertNot(throng_storage:account_exists(<<"bob">>, ?HOST)),
    ?assertNot(throng_storage:account_exists(<<"carol">>, ?HOST)),
    ?assert(throng_storage:account_exists(<<"alice">>, ?HOST)).

%% A list naming an account that does not exist, a full JID, or nothing is
%% refused and deletes nothing of the list.
delete_user_bad_input(_) ->
    Ad = login(<<"admin">>),
    Del = fun(Jids) -> ?A:failure(admin(Ad, <<"delete-user">>, [{<<"accountjids">>, Jids}])) end,
    ?assertEqual({error, <<"item-not-found">>}, Del([<<"bob@localhost">>, <<"nobody@localhost">>])),
    ?assertEqual({error, <<"jid-malformed">>}, Del([<<"bob@localhost">>, <<"carol@localhost/r">>])),
    ?assertEqual({error, <<"not-acceptable">>}, Del([<<"bob@localhost">>, <<"bob@example.org">>])),
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>}, Del([])),
    [?assert(throng_storage:account_exists(U, ?HOST)) || U <- [<<"bob">>, <<"carol">>]].

%% end-user-session with a bare JID ends every session of the account; the
%% account stays and logs in again.
end_user_session_bare_jid(_) ->
    Ad = login(<<"admin">>),
    B1 = login(<<"bob">>, <<"one">>),
    B2 = login(<<"bob">>, <<"two">>),
    A = login(<<"alice">>),
    R = admin(Ad, <<"end-user-session">>, [{<<"accountjids">>, [<<"bob@localhost">>]}]),
    ?assertEqual(<<"Ended 2 session(s)">>, completed_note(R)),
    ?assertEqual(<<"policy-violation">>, ?C:closed(B1, 5000)),
    ?assertEqual(<<"policy-violation">>, ?C:closed(B2, 5000)),
    ?C:expect_nothing(A, 200),
    ?assertEqual(<<"bob@localhost/again">>, ?C:jid(login(<<"bob">>, <<"again">>))).

%% With a full JID only that session ends.
end_user_session_full_jid(_) ->
    Ad = login(<<"admin">>),
    B1 = login(<<"bob">>, <<"one">>),
    _B2 = login(<<"bob">>, <<"two">>),
    R = admin(Ad, <<"end-user-session">>, [{<<"accountjids">>, [<<"bob@localhost/one">>]}]),
    ?assertEqual(<<"Ended 1 session(s)">>, completed_note(R)),
    ?assertEqual(<<"policy-violation">>, ?C:closed(B1, 5000)),
    throng_ct:wait_until(fun() -> throng_sm:lookup(#jid{user = <<"bob">>, server = ?HOST,
                                                        resource = <<"one">>}) =:= undefined end,
                         2000),
    ?assert(is_pid(throng_sm:lookup(#jid{user = <<"bob">>, server = ?HOST, resource = <<"two">>}))).

%% get-registered-users-num answers at once with the accounts of the host,
%% and counts one more after add-user.
registered_users_num(_) ->
    Ad = login(<<"admin">>),
    Num = fun() -> result_value(?A:run(Ad, cmd_node(<<"get-registered-users-num">>), []),
                                <<"registeredusersnum">>) end,
    ?assertEqual(<<"4">>, Num()),
    throng_ct:register(<<"dan">>, <<"password">>),
    throng_ct:register(<<"erin">>, <<"example.org">>, <<"password">>),
    ?assertEqual(<<"5">>, Num()).

%% get-online-users-num counts users with a session, once however many
%% they have: the admin, alice (two resources) and bob.
online_users_num(_) ->
    Ad = login(<<"admin">>),
    Num = fun() -> result_value(?A:run(Ad, cmd_node(<<"get-online-users-num">>), []),
                                <<"onlineusersnum">>) end,
    ?assertEqual(<<"1">>, Num()),
    _ = [login(<<"alice">>, R) || R <- [<<"one">>, <<"two">>]],
    B = login(<<"bob">>),
    ?assertEqual(<<"3">>, Num()),
    ?C:close(B),
    throng_ct:wait_until(fun() -> throng_sm:resources({<<"bob">>, ?HOST}) =:= [] end, 2000),
    ?assertEqual(<<"2">>, Num()).

%% get-online-users-list shows a max_items form; with `none' it lists every
%% online user's bare JID, sorted, once.
online_users_list(_) ->
    Ad = login(<<"admin">>),
    _ = [login(<<"alice">>, R) || R <- [<<"one">>, <<"two">>]],
    _ = login(<<"carol">>),
    F = ?A:run(Ad, cmd_node(<<"get-online-users-list">>), []),
    ?assertEqual([<<"FORM_TYPE">>, <<"max_items">>], ?A:field_vars(F)),
    R = ?A:submit(Ad, cmd_node(<<"get-online-users-list">>), ?A:sessionid(F),
                  [{<<"max_items">>, [<<"none">>]}]),
    ?assertEqual([<<"admin@localhost">>, <<"alice@localhost">>, <<"carol@localhost">>],
                 ?A:field_values(R, <<"onlineuserjids">>)).

%% max_items 25 shows the first 25 of 27 online users; a value that is not
%% one of the form's options is not-acceptable.
online_users_list_max_items(_) ->
    Ad = login(<<"admin">>),
    Users = [iolist_to_binary(io_lib:format("u~2..0b", [I])) || I <- lists:seq(1, 26)],
    _ = [begin throng_ct:register(U, <<"password">>), login(U) end || U <- Users],
    R = admin(Ad, <<"get-online-users-list">>, [{<<"max_items">>, [<<"25">>]}]),
    Expected = lists:sublist(lists:sort([<<U/binary, "@localhost">> || U <- [<<"admin">> | Users]]), 25),
    ?assertEqual(Expected, ?A:field_values(R, <<"onlineuserjids">>)),
    ?assertEqual(27, length(?A:field_values(admin(Ad, <<"get-online-users-list">>, []),
                                            <<"onlineuserjids">>))),
    ?assertEqual({error, <<"not-acceptable">>},
                 ?A:failure(admin(Ad, <<"get-online-users-list">>, [{<<"max_items">>, [<<"7">>]}]))).

%% announce sends a headline from the domain, with the subject and the
%% lines of the announcement, to every session of the host (both of
%% alice's, bob's, the admin's own); an offline user gets nothing later.
announce(_) ->
    Ad = login(<<"admin">>),
    A1 = login(<<"alice">>, <<"one">>),
    A2 = login(<<"alice">>, <<"two">>),
    B = login(<<"bob">>),
    R = admin(Ad, <<"announce">>, [{<<"subject">>, [<<"Maintenance">>]},
                                   {<<"announcement">>, [<<"Down at 2:00.">>, <<"Sorry.">>]}]),
    ?assertEqual(<<"Sent to 4 session(s)">>, completed_note(R)),
    [begin
         M = next_message(C),
         ?assertEqual({?HOST, <<"headline">>, <<"Maintenance">>, <<"Down at 2:00.\nSorry.">>},
                      {throng_xml:attr(<<"from">>, M), throng_xml:attr(<<"type">>, M),
                       throng_xml:subel_cdata(M, <<"subject">>), throng_xml:subel_cdata(M, <<"body">>)}),
         ?assertEqual(?C:jid(C), throng_xml:attr(<<"to">>, M))
     end || C <- [A1, A2, B, Ad]],
    C = login(<<"carol">>),
    ?C:send(C, ?C:presence([])),
    no_message(C).

%% An announcement with no text is bad-payload, and nothing is sent.
announce_bad_input(_) ->
    Ad = login(<<"admin">>),
    B = login(<<"bob">>),
    [?assertEqual({error, <<"bad-request">>, <<"bad-payload">>},
                  ?A:failure(admin(Ad, <<"announce">>, Fields)))
     || Fields <- [[], [{<<"subject">>, [<<"s">>]}], [{<<"announcement">>, [<<" ">>, <<>>]}]]],
    ?C:expect_nothing(B, 300).

%% get-user-roster (§4.19): a form asking for the account; the result
%% names it and holds its roster as a roster query, the items a roster get
%% by the user shows.
user_roster(_) ->
    throng_ct:mutual(<<"alice">>, <<"bob">>),
    throng_ct:mutual(<<"alice">>, <<"carol">>),
    Ad = login(<<"admin">>),
    F = ?A:run(Ad, cmd_node(<<"get-user-roster">>), []),
    ?assertEqual([<<"FORM_TYPE">>, <<"accountjid">>], ?A:field_vars(F)),
    R = ?A:submit(Ad, cmd_node(<<"get-user-roster">>), ?A:sessionid(F),
                  [{<<"accountjid">>, [<<"alice@localhost">>]}]),
    ?assertEqual(<<"alice@localhost">>, result_value(R, <<"accountjid">>)),
    Query = throng_xml:subel(throng_xml:subel(R, <<"x">>), <<"query">>, <<"jabber:iq:roster">>),
    ?assertEqual([{<<"bob@localhost">>, <<"both">>}, {<<"carol@localhost">>, <<"both">>}],
                 lists:sort([{throng_xml:attr(<<"jid">>, I), throng_xml:attr(<<"subscription">>, I)}
                             || I <- throng_xml:subels(Query)])).

%% user-stats (§4.20): the roster's size and the resources online now.
user_stats(_) ->
    throng_ct:mutual(<<"alice">>, <<"bob">>),
    _ = [login(<<"alice">>, Res) || Res <- [<<"phone">>, <<"desk">>]],
    Ad = login(<<"admin">>),
    R = admin(Ad, <<"user-stats">>, [{<<"accountjid">>, [<<"alice@localhost">>]}]),
    ?assertEqual(<<"alice@localhost">>, result_value(R, <<"accountjid">>)),
    ?assertEqual(<<"1">>, result_value(R, <<"rostersize">>)),
    ?assertEqual([<<"desk">>, <<"phone">>], ?A:field_values(R, <<"onlineresources">>)),
    R2 = admin(Ad, <<"user-stats">>, [{<<"accountjid">>, [<<"carol@localhost">>]}]),
    ?assertEqual(<<"0">>, result_value(R2, <<"rostersize">>)),
    ?assertEqual([], ?A:field_values(R2, <<"onlineresources">>)).

%% An account that does not exist is item-not-found, a full JID
%% jid-malformed, no account bad-request.
user_roster_and_stats_bad_input(_) ->
    Ad = login(<<"admin">>),
    [begin
         ?assertMatch({error, <<"item-not-found">>},
                      ?A:failure(admin(Ad, Cmd, [{<<"accountjid">>, [<<"nobody@localhost">>]}]))),
         ?assertMatch({error, <<"jid-malformed">>},
                      ?A:failure(admin(Ad, Cmd, [{<<"accountjid">>, [<<"alice@localhost/r">>]}]))),
         ?assertMatch({error, <<"bad-request">>, _}, ?A:failure(admin(Ad, Cmd, [])))
     end || Cmd <- [<<"get-user-roster">>, <<"user-stats">>]].

%% disable-user (§4.3) ends the account's sessions and refuses its logins
%% with account-disabled (RFC 6120 §6.5.1), SCRAM as PLAIN; the counts and
%% lists show it; reenable-user (§4.4) lets it log in again.
disable_and_reenable_user(_) ->
    Ad = login(<<"admin">>),
    B1 = login(<<"bob">>, <<"one">>),
    B2 = login(<<"bob">>, <<"two">>),
    R = admin(Ad, <<"disable-user">>, [{<<"accountjids">>, [<<"bob@localhost">>, <<"carol@localhost">>]}]),
    ?assertEqual(<<"Disabled 2 account(s)">>, completed_note(R)),
    ?assertEqual(<<"policy-violation">>, ?C:closed(B1, 5000)),
    ?assertEqual(<<"policy-violation">>, ?C:closed(B2, 5000)),
    ?assertEqual({failure, <<"account-disabled">>}, auth(<<"bob">>, <<"password">>)),
    ?assertEqual({failure, <<"account-disabled">>}, scram(<<"bob">>, <<"password">>)),
    ?assert(throng_storage:account_exists(<<"bob">>, ?HOST)),
    ?assertEqual(ok, auth(<<"alice">>, <<"password">>)),
    ?assertEqual(<<"2">>, result_value(?A:run(Ad, cmd_node(<<"get-disabled-users-num">>), []),
                                       <<"disabledusersnum">>)),
    L = ?A:submit(Ad, cmd_node(<<"get-disabled-users-list">>), [{<<"max_items">>, [<<"none">>]}]),
    ?assertEqual([<<"bob@localhost">>, <<"carol@localhost">>], ?A:field_values(L, <<"disableduserjids">>)),
    R2 = admin(Ad, <<"reenable-user">>, [{<<"accountjids">>, [<<"bob@localhost">>]}]),
    ?assertEqual(<<"Re-enabled 1 account(s)">>, completed_note(R2)),
    ?assertEqual(ok, auth(<<"bob">>, <<"password">>)),
    ?assertEqual(ok, scram(<<"bob">>, <<"password">>)),
    ?assertEqual({failure, <<"account-disabled">>}, auth(<<"carol">>, <<"password">>)).

%% Naming an account that does not exist (or, to re-enable, one that is
%% not disabled) is item-not-found and changes nothing in the list.
disable_user_bad_input(_) ->
    Ad = login(<<"admin">>),
    Run = fun(Cmd, Jids) -> ?A:failure(admin(Ad, Cmd, [{<<"accountjids">>, Jids}])) end,
    ?assertEqual({error, <<"item-not-found">>},
                 Run(<<"disable-user">>, [<<"bob@localhost">>, <<"nobody@localhost">>])),
    ?assertEqual({error, <<"jid-malformed">>}, Run(<<"disable-user">>, [<<"bob@localhost/r">>])),
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>}, Run(<<"disable-user">>, [])),
    ?assertEqual(ok, auth(<<"bob">>, <<"password">>)),
    _ = completed_note(admin(Ad, <<"disable-user">>, [{<<"accountjids">>, [<<"bob@localhost">>]}])),
    ?assertEqual({error, <<"item-not-found">>},
                 Run(<<"reenable-user">>, [<<"bob@localhost">>, <<"carol@localhost">>])),
    ?assertEqual({failure, <<"account-disabled">>}, auth(<<"bob">>, <<"password">>)).

%% A disabled account that is deleted takes its flag with it: an account
%% made later under the name logs in.
disabled_account_deleted_and_made_again(_) ->
    Ad = login(<<"admin">>),
    _ = completed_note(admin(Ad, <<"disable-user">>, [{<<"accountjids">>, [<<"bob@localhost">>]}])),
    _ = completed_note(admin(Ad, <<"delete-user">>, [{<<"accountjids">>, [<<"bob@localhost">>]}])),
    throng_ct:register(<<"bob">>, <<"password">>),
    ?assertEqual(ok, auth(<<"bob">>, <<"password">>)).

%%% The message of the day (§4.25–4.27)

%% Logs in and sends initial presence; returns the client and the message
%% of the day it got right after, or none.
online_motd(User, Res) ->
    C = login(User, Res),
    ?C:send(C, #xmlel{name = <<"presence">>}),
    {C, motd_of(C)}.

motd_of(C) ->
    case ?C:recv(C, 500) of
        timeout -> none;
        #xmlel{name = <<"message">>} = M ->
            ?assertEqual(<<"headline">>, throng_xml:attr(<<"type">>, M)),
            ?assertEqual(?HOST, throng_xml:attr(<<"from">>, M)),
            throng_xml:subel_cdata(M, <<"body">>);
        _ -> motd_of(C)
    end.

%% set-motd: each account gets the message once, at the initial presence
%% of its next session, whatever resource, also after a restart; an
%% account that had it gets it again only when it changes.
motd_once_per_account(_) ->
    Ad = login(<<"admin">>),
    {_, none} = online_motd(<<"bob">>, <<"before">>),
    R = admin(Ad, <<"set-motd">>, [{<<"motd">>, [<<"Maintenance at 02:00.">>, <<"Be back soon.">>]}]),
    ?assertEqual(<<"The message of the day of localhost is set">>, completed_note(R)),
    ?assertMatch({_, <<"Maintenance at 02:00.\nBe back soon.">>}, online_motd(<<"bob">>, <<"one">>)),
    ?assertMatch({_, none}, online_motd(<<"bob">>, <<"two">>)),
    ?assertMatch({_, <<"Maintenance at 02:00.\nBe back soon.">>}, online_motd(<<"carol">>, <<"r">>)),
    throng_ct:restart(),
    ?assertMatch({_, none}, online_motd(<<"bob">>, <<"three">>)),
    ?assertMatch({_, <<"Maintenance at 02:00.\nBe back soon.">>}, online_motd(<<"alice">>, <<"r">>)).

%% edit-motd shows the message as it is and replaces it (everyone gets the
%% new one); delete-motd ends it.
motd_edit_and_delete(_) ->
    Ad = login(<<"admin">>),
    _ = completed_note(admin(Ad, <<"set-motd">>, [{<<"motd">>, [<<"First.">>]}])),
    ?assertMatch({_, <<"First.">>}, online_motd(<<"bob">>, <<"one">>)),
    F = ?A:run(Ad, cmd_node(<<"edit-motd">>), []),
    ?assertEqual([<<"First.">>], ?A:field_values(F, <<"motd">>)),
    R = ?A:submit(Ad, cmd_node(<<"edit-motd">>), ?A:sessionid(F), [{<<"motd">>, [<<"Second.">>]}]),
    ?assertEqual(<<"completed">>, ?A:status(R)),
    ?assertMatch({_, <<"Second.">>}, online_motd(<<"bob">>, <<"two">>)),
    _ = completed_note(?A:run(Ad, cmd_node(<<"delete-motd">>), [])),
    ?assertMatch({_, none}, online_motd(<<"carol">>, <<"r">>)),
    ?assertEqual([], ?A:field_values(?A:run(Ad, cmd_node(<<"edit-motd">>), []), <<"motd">>)).

%% An empty message is bad-payload and leaves the message as it was.
motd_bad_input(_) ->
    Ad = login(<<"admin">>),
    _ = completed_note(admin(Ad, <<"set-motd">>, [{<<"motd">>, [<<"Kept.">>]}])),
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>},
                 ?A:failure(admin(Ad, <<"set-motd">>, [{<<"motd">>, [<<"  ">>]}]))),
    ?assertEqual({error, <<"bad-request">>, <<"bad-payload">>},
                 ?A:failure(admin(Ad, <<"set-motd">>, []))),
    ?assertMatch({_, <<"Kept.">>}, online_motd(<<"bob">>, <<"r">>)).
