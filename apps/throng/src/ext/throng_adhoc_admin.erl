%% @doc XEP-0133 Service Administration: the commands a server administrator
%% (a JID of the top-level `admins' list) runs from a client, through
%% {@link throng_mod_adhoc}. The same operations as `bin/throng' (the
%% functions of {@link throng_auth}, {@link throng_sm},
%% {@link throng_session}), with XEP-0133's node names and form fields:
%%
%% <ul>
%% <li>add-user (`accountjid', `password', `password-verify'),
%% delete-user (`accountjids': the account, its roster and offline
%% messages, its sessions ended), change-user-password (`accountjid',
%% `password'), end-user-session (`accountjids': a bare JID ends every
%% session of the account, a full JID that one);</li>
%% <li>get-registered-users-num, get-online-users-num, and
%% get-online-users-list (`max_items'): an online user has at least one
%% session, on any node of the cluster;</li>
%% <li>disable-user and reenable-user (`accountjids': a disabled account
%% keeps its data, cannot log in — SASL `account-disabled' — and its
%% sessions end; {@link throng_auth:disable/2}), get-disabled-users-num and
%% get-disabled-users-list (`max_items');</li>
%% <li>get-user-roster (`accountjid': the result form holds the roster's
%% `<query xmlns="jabber:iq:roster"/>') and user-stats (`rostersize',
%% `onlineresources');</li>
%% <li>announce (`announcement', and an optional `subject'): a headline
%% from the domain to every session of the host;</li>
%% <li>set-motd, edit-motd (`motd', shown as it is) and delete-motd: the
%% message of the day, a headline each account gets once, at the initial
%% presence of its next session.</li>
%% </ul>
%%
%% Not offered: get-user-password (only SCRAM keys are stored, never a
%% password); user-stats' IP addresses; blacklists, active and idle
%% users, last login, restart and shutdown (nothing in the server to back
%% them yet). Each command is one stage: a form, then its submission (or
%% the submission right away). Input that does not fit is an error
%% (bad-request with bad-payload for a missing field, jid-malformed,
%% not-acceptable, conflict, item-not-found) and changes nothing.
-module(throng_adhoc_admin).
-behaviour(throng_mod_adhoc).

-include("throng.hrl").

-export([adhoc_commands/1, adhoc_execute/1]).
-export([reset_motd/1, cache_motd/2, motd_at_login/1, motd_account_removed/2]).
%% Called on every cluster node by erpc (set_motd/2).
-ignore_xref([{cache_motd, 2}]).
%% Provider callbacks, called by throng_mod_adhoc.
-ignore_xref([{adhoc_commands, 1}, {adhoc_execute, 1}]).

-define(NS_ADMIN, <<"http://jabber.org/protocol/admin">>).
-define(PREFIX, "http://jabber.org/protocol/admin#").

%% The commands: the last part of the node, and the name clients show.
commands() ->
    [{<<"add-user">>, <<"Add a User">>},
     {<<"delete-user">>, <<"Delete a User">>},
     {<<"disable-user">>, <<"Disable a User">>},
     {<<"reenable-user">>, <<"Re-Enable a User">>},
     {<<"change-user-password">>, <<"Change User Password">>},
     {<<"end-user-session">>, <<"End User Session">>},
     {<<"get-user-roster">>, <<"Get User Roster">>},
     {<<"user-stats">>, <<"Get User Statistics">>},
     {<<"get-registered-users-num">>, <<"Get Number of Registered Users">>},
     {<<"get-disabled-users-num">>, <<"Get Number of Disabled Users">>},
     {<<"get-disabled-users-list">>, <<"Get List of Disabled Users">>},
     {<<"get-online-users-num">>, <<"Get Number of Online Users">>},
     {<<"get-online-users-list">>, <<"Get List of Online Users">>},
     {<<"announce">>, <<"Send Announcement to Online Users">>},
     {<<"set-motd">>, <<"Set Message of the Day">>},
     {<<"edit-motd">>, <<"Edit Message of the Day">>},
     {<<"delete-motd">>, <<"Delete Message of the Day">>}].

-spec adhoc_commands(binary()) -> [throng_mod_adhoc:command()].
adhoc_commands(_Host) ->
    [#{node => <<?PREFIX, N/binary>>, name => Name, access => admin} || {N, Name} <- commands()].

-spec adhoc_execute(throng_mod_adhoc:request()) -> throng_mod_adhoc:response().
adhoc_execute(#{node := <<?PREFIX, Cmd/binary>>, action := start, values := none} = Req) ->
    case form(Cmd, Req) of
        none -> run(Cmd, #{}, Req);
        Form -> {form, Cmd, [complete], Form}
    end;
adhoc_execute(#{node := <<?PREFIX, Cmd/binary>>, values := none} = Req) ->
    run(Cmd, #{}, Req);
adhoc_execute(#{node := <<?PREFIX, Cmd/binary>>, values := Values} = Req) ->
    run(Cmd, Values, Req).

%%% The forms

%% edit-motd shows the message it edits; the others' forms are fixed.
form(<<"edit-motd">>, #{host := Host}) ->
    Lines = case motd(Host) of
                none -> [];
                {_Version, Text} -> binary:split(Text, <<"\n">>, [global])
            end,
    form(<<"Editing the Message of the Day">>,
         <<"Fill out this form to edit the message of the day.">>,
         [(motd_field())#{values => Lines}]);
form(Cmd, _Req) ->
    form(Cmd).

form(<<"add-user">>) ->
    form(<<"Adding a User">>, <<"Fill out this form to add a user.">>,
         [jid_single(<<"accountjid">>, <<"The Jabber ID for the account to be added">>),
          private(<<"password">>, <<"The password for this account">>),
          private(<<"password-verify">>, <<"Retype password">>)]);
form(<<"delete-user">>) ->
    form(<<"Deleting a User">>, <<"Fill out this form to delete a user.">>,
         [jid_multi(<<"accountjids">>, <<"The Jabber ID(s) to delete">>)]);
form(<<"disable-user">>) ->
    form(<<"Disabling a User">>, <<"Fill out this form to disable a user.">>,
         [jid_multi(<<"accountjids">>, <<"The Jabber ID(s) to disable">>)]);
form(<<"reenable-user">>) ->
    form(<<"Re-Enabling a User">>, <<"Fill out this form to re-enable a user.">>,
         [jid_multi(<<"accountjids">>, <<"The Jabber ID(s) to re-enable">>)]);
form(<<"get-disabled-users-list">>) ->
    form(<<"Requesting List of Disabled Users">>,
         <<"Fill out this form to request the disabled users of this service.">>,
         [max_items_field()]);
form(<<"change-user-password">>) ->
    form(<<"Changing a User Password">>, <<"Fill out this form to change a user's password.">>,
         [jid_single(<<"accountjid">>, <<"The Jabber ID for this account">>),
          private(<<"password">>, <<"The password for this account">>)]);
form(<<"end-user-session">>) ->
    form(<<"Ending a User Session">>, <<"Fill out this form to end a user's session.">>,
         [jid_multi(<<"accountjids">>, <<"The Jabber ID(s) for which to end sessions">>)]);
form(<<"set-motd">>) ->
    form(<<"Setting the Message of the Day">>,
         <<"Fill out this form to set the message of the day.">>, [motd_field()]);
form(<<"get-user-roster">>) ->
    form(<<"Getting a User's Roster">>, <<"Fill out this form to get a user's roster.">>,
         [jid_single(<<"accountjid">>, <<"The Jabber ID for which to retrieve the roster">>)]);
form(<<"user-stats">>) ->
    form(<<"Getting User Statistics">>, <<"Fill out this form to gather user statistics.">>,
         [jid_single(<<"accountjid">>, <<"The Jabber ID for which to retrieve statistics">>)]);
form(<<"get-online-users-list">>) ->
    form(<<"Requesting List of Online Users">>,
         <<"Fill out this form to request the online users of this service.">>,
         [max_items_field()]);
form(<<"announce">>) ->
    form(<<"Making an Announcement">>,
         <<"Fill out this form to make an announcement to all online users of this service.">>,
         [#{var => <<"subject">>, type => <<"text-single">>, label => <<"Subject">>},
          #{var => <<"announcement">>, type => <<"text-multi">>, label => <<"Announcement">>,
            required => true}]);
form(_) ->
    none.

form(Title, Instructions, Fields) ->
    throng_xdata:form(Title, Instructions, [form_type() | Fields]).

form_type() ->
    #{var => <<"FORM_TYPE">>, type => <<"hidden">>, values => [?NS_ADMIN]}.

jid_single(Var, Label) ->
    #{var => Var, type => <<"jid-single">>, label => Label, required => true}.

jid_multi(Var, Label) ->
    #{var => Var, type => <<"jid-multi">>, label => Label, required => true}.

private(Var, Label) ->
    #{var => Var, type => <<"text-private">>, label => Label, required => true}.

motd_field() ->
    #{var => <<"motd">>, type => <<"text-multi">>, label => <<"Message of the day">>,
      required => true}.

max_items_field() ->
    #{var => <<"max_items">>, type => <<"list-single">>,
      label => <<"Maximum number of items to show">>,
      options => [{V, V} || V <- max_items()] ++ [{<<"None">>, <<"none">>}]}.

max_items() ->
    [<<"25">>, <<"50">>, <<"75">>, <<"100">>, <<"150">>, <<"200">>].

%%% The commands

run(<<"add-user">>, V, #{host := Host}) ->
    with_account(<<"accountjid">>, V, Host, fun(U) ->
        with_password(V, fun(Pw) ->
            case throng_xdata:value(<<"password-verify">>, V) of
                Verify when Verify =:= undefined; Verify =:= Pw ->
                    case throng_auth:register(U, Host, Pw) of
                        ok -> done(info, [<<"Added ">>, U, $@, Host]);
                        {error, exists} -> {error, conflict, <<"the account exists">>};
                        {error, Why} -> account_error(Why)
                    end;
                _ ->
                    {error, 'not-acceptable', <<"the passwords differ">>}
            end
        end)
    end);
run(<<"change-user-password">>, V, #{host := Host}) ->
    with_account(<<"accountjid">>, V, Host, fun(U) ->
        with_password(V, fun(Pw) ->
            case throng_auth:set_password(U, Host, Pw) of
                ok -> done(info, [<<"Changed the password of ">>, U, $@, Host]);
                {error, not_found} -> no_account(U, Host);
                {error, Why} -> account_error(Why)
            end
        end)
    end);
run(<<"delete-user">>, V, #{host := Host}) ->
    with_accounts(V, Host, fun(Users) ->
        _ = [throng_auth:unregister(U, Host) || U <- Users],
        done(info, [<<"Deleted ">>, integer_to_binary(length(Users)), <<" account(s)">>])
    end);
run(<<"disable-user">>, V, #{host := Host}) ->
    %% §4.3: the accounts stay, they cannot log in, their sessions end.
    with_accounts(V, Host, fun(Users) ->
        _ = [ok = throng_auth:disable(U, Host) || U <- Users],
        done(info, [<<"Disabled ">>, integer_to_binary(length(Users)), <<" account(s)">>])
    end);
run(<<"reenable-user">>, V, #{host := Host}) ->
    %% §4.4: every account named must be disabled, else nothing changes.
    with_accounts(V, Host, fun(Users) ->
        case [U || U <- Users, not throng_auth:is_disabled(U, Host)] of
            [Enabled | _] ->
                {error, 'item-not-found', <<"not disabled: ", Enabled/binary, $@, Host/binary>>};
            [] ->
                _ = [ok = throng_auth:enable(U, Host) || U <- Users],
                done(info, [<<"Re-enabled ">>, integer_to_binary(length(Users)), <<" account(s)">>])
        end
    end);
run(<<"get-disabled-users-num">>, _V, #{host := Host}) ->
    result([#{var => <<"disabledusersnum">>, label => <<"The number of disabled users">>,
              values => [integer_to_binary(length(throng_auth:disabled_users(Host)))]}]);
run(<<"get-disabled-users-list">>, V, #{host := Host}) ->
    with_max_items(V, fun(Max) ->
        result([#{var => <<"disableduserjids">>, type => <<"jid-multi">>,
                  label => <<"The list of all disabled users">>,
                  values => [<<U/binary, $@, Host/binary>>
                             || U <- first(Max, throng_auth:disabled_users(Host))]}])
    end);
run(<<"end-user-session">>, V, #{host := Host}) ->
    with_jids(V, Host, fun(Jids) ->
        Pids = lists:usort(lists:append([sessions(J) || J <- Jids])),
        _ = [throng_session:kick(P, <<"session ended by an administrator">>) || P <- Pids],
        done(info, [<<"Ended ">>, integer_to_binary(length(Pids)), <<" session(s)">>])
    end);
run(<<"get-user-roster">>, V, #{host := Host}) ->
    %% §4.19: the roster as the roster query (what a client's roster get
    %% shows) inside the result form.
    with_existing(V, Host, fun(U) ->
        {_Ver, Items} = throng_storage:roster_get(U, Host),
        result([account_field(U, Host)], [throng_roster:query_el(Items, undefined)])
    end);
run(<<"user-stats">>, V, #{host := Host}) ->
    %% §4.20: the roster's size and the account's sessions, on any node of
    %% the cluster. IP addresses are not offered: a session's address is
    %% kept by its connection process only, which this would have to wake.
    with_existing(V, Host, fun(U) ->
        {_Ver, Items} = throng_storage:roster_get(U, Host),
        Resources = [R || {R, _Pid, _Prio, _Pres} <- throng_sm:resources({U, Host})],
        result([account_field(U, Host),
                #{var => <<"rostersize">>, label => <<"Roster size">>,
                  values => [integer_to_binary(length(Items))]},
                #{var => <<"onlineresources">>, type => <<"text-multi">>,
                  label => <<"Online resources">>, values => lists:sort(Resources)}])
    end);
run(<<"get-registered-users-num">>, _V, #{host := Host}) ->
    result([#{var => <<"registeredusersnum">>, label => <<"The number of registered users">>,
              values => [integer_to_binary(throng_storage:count_accounts(Host))]}]);
run(<<"get-online-users-num">>, _V, #{host := Host}) ->
    result([#{var => <<"onlineusersnum">>, label => <<"The number of online users">>,
              values => [integer_to_binary(length(online_users(Host)))]}]);
run(<<"get-online-users-list">>, V, #{host := Host}) ->
    with_max_items(V, fun(Max) -> online_list(Host, Max) end);
run(Set, V, #{host := Host}) when Set =:= <<"set-motd">>; Set =:= <<"edit-motd">> ->
    %% §4.25, §4.26: each account gets it once, at its next login.
    Text = throng_xdata:text(<<"motd">>, V),
    case string:trim(Text) of
        <<>> -> missing(<<"motd">>);
        _ ->
            set_motd(Host, {erlang:system_time(microsecond), Text}),
            done(info, [<<"The message of the day of ">>, Host, <<" is set">>])
    end;
run(<<"delete-motd">>, _V, #{host := Host}) ->
    %% §4.27.
    set_motd(Host, none),
    done(info, [<<"The message of the day of ">>, Host, <<" is deleted">>]);
run(<<"announce">>, V, #{host := Host}) ->
    case string:trim(throng_xdata:text(<<"announcement">>, V)) of
        <<>> -> missing(<<"announcement">>);
        _ -> announce(Host, throng_xdata:value(<<"subject">>, V),
                      throng_xdata:text(<<"announcement">>, V))
    end.

%% Users of Host with a session, as sorted user names.
online_users(Host) ->
    lists:usort([U || #jid{user = U} <- throng_sm:host_sessions(Host)]).

online_list(Host, Max) ->
    Shown = first(Max, online_users(Host)),
    result([#{var => <<"onlineuserjids">>, type => <<"jid-multi">>,
              label => <<"The list of all online users">>,
              values => [<<U/binary, $@, Host/binary>> || U <- Shown]}]).

%% The sessions a JID names: every one of a bare JID, the one of a full JID.
sessions(#jid{user = U, server = S, resource = <<>>}) ->
    [Pid || {_, Pid, _, _} <- throng_sm:resources({U, S})];
sessions(JID) ->
    case throng_sm:lookup(JID) of
        undefined -> [];
        Pid -> [Pid]
    end.

%% A headline from the domain to every session of the host, in this
%% process (the announcing admin's session): one routing step per session.
announce(Host, Subject, Text) ->
    Domain = #jid{server = Host},
    Msg = #xmlel{name = <<"message">>, attrs = [{<<"type">>, <<"headline">>}],
                 children = [#xmlel{name = <<"subject">>, children = [{xmlcdata, Subject}]}
                             || Subject =/= undefined] ++
                     [#xmlel{name = <<"body">>, children = [{xmlcdata, Text}]}]},
    Sessions = throng_sm:host_sessions(Host),
    _ = [throng_router:route(Domain, J, Msg) || J <- Sessions],
    done(info, [<<"Sent to ">>, integer_to_binary(length(Sessions)), <<" session(s)">>]).

%%% The message of the day

%% Kept in the store (bucket `motd', key Host: {Version, Text}) and, for
%% the login path, in a persistent_term on every node of the cluster (set
%% there by the commands; read from the store by the first login after a
%% start): a login costs one persistent_term read while no message is set,
%% and one read of the account's `motd_seen' key (its last version seen)
%% while one is.

%% Read from the store at the first login after the module starts (a start
%% must not need the database: it may be down, the logins then fail on
%% their own); a store that cannot answer means no message this time.
motd(Host) ->
    case persistent_term:get({?MODULE, motd, Host}, unknown) of
        unknown ->
            try throng_storage:kv_get(motd, Host) of
                {ok, Motd} -> cache_motd(Host, Motd), Motd;
                not_found -> cache_motd(Host, none), none
            catch error:{storage_failed, _} -> none
            end;
        Known -> Known
    end.

set_motd(Host, Motd) ->
    ok = case Motd of
             none -> throng_storage:kv_delete(motd, Host);
             _ -> throng_storage:kv_put(motd, Host, Motd)
         end,
    _ = erpc:multicall(throng_members:members(), ?MODULE, cache_motd, [Host, Motd], 5000),
    ok.

%% @doc The node's copy of Host's message of the day (set on every node by
%% set-motd, edit-motd and delete-motd).
-spec cache_motd(binary(), {integer(), binary()} | none) -> ok.
cache_motd(Host, Motd) ->
    case persistent_term:get({?MODULE, motd, Host}, unknown) of
        Motd -> ok;
        _ -> persistent_term:put({?MODULE, motd, Host}, Motd)
    end.

%% @doc This node forgets its copy of the host's message of the day (when
%% the module starts): the first login reads it from the store again.
-spec reset_motd(binary()) -> ok.
reset_motd(Host) ->
    _ = persistent_term:erase({?MODULE, motd, Host}),
    ok.

%% @doc A session sent its initial presence: its account gets the message
%% of the day once (a headline from the domain), if one is set and the
%% account has not had this one yet.
-spec motd_at_login(#jid{}) -> ok.
motd_at_login(#jid{user = U, server = S} = JID) ->
    case motd(S) of
        none -> ok;
        {Version, Text} ->
            try throng_storage:kv_get(motd_seen, {U, S}) of
                {ok, Version} -> ok;
                _ ->
                    ok = throng_storage:kv_put(motd_seen, {U, S}, Version),
                    throng_router:route(#jid{server = S}, JID,
                                        #xmlel{name = <<"message">>, attrs = [{<<"type">>, <<"headline">>}],
                                               children = [#xmlel{name = <<"subject">>,
                                                                  children = [{xmlcdata, <<"Message of the Day">>}]},
                                                           #xmlel{name = <<"body">>,
                                                                  children = [{xmlcdata, Text}]}]})
            catch error:{storage_failed, Why} ->
                    logger:error(#{what => motd_not_sent, user => U, server => S, reason => Why})
            end
    end.

%% @doc The account is gone: so is what it has seen.
-spec motd_account_removed(binary(), binary()) -> ok.
motd_account_removed(U, S) ->
    throng_storage:kv_delete(motd_seen, {U, S}).

%%% Input

%% The user name of a single bare JID of this host in field Var.
with_account(Var, V, Host, Fun) ->
    case throng_xdata:value(Var, V) of
        undefined -> missing(Var);
        Bin ->
            case jid(Bin, Host) of
                {ok, #jid{user = U, resource = <<>>}} -> Fun(U);
                {ok, Full} -> bare_expected(Full);
                {error, _, _} = E -> E
            end
    end.

%% The `max_items' of a list command: infinity for none (or no value).
with_max_items(V, Fun) ->
    case throng_xdata:value(<<"max_items">>, V) of
        Max when Max =:= undefined; Max =:= <<"none">> -> Fun(infinity);
        Max ->
            case lists:member(Max, max_items()) of
                true -> Fun(binary_to_integer(Max));
                false -> {error, 'not-acceptable', <<"max_items: not one of the options">>}
            end
    end.

first(infinity, L) -> L;
first(Max, L) -> lists:sublist(L, Max).

%% The user names of `accountjids': bare JIDs of existing accounts of this
%% host, else an error and nothing done.
with_accounts(V, Host, Fun) ->
    with_jids(V, Host, fun(Jids) ->
        case [J || #jid{resource = R} = J <- Jids, R =/= <<>>] of
            [Full | _] -> bare_expected(Full);
            [] ->
                Users = lists:usort([U || #jid{user = U} <- Jids]),
                case [U || U <- Users, not throng_storage:account_exists(U, Host)] of
                    [Missing | _] -> no_account(Missing, Host);
                    [] -> Fun(Users)
                end
        end
    end).

%% The JIDs of this host in `accountjids', all valid, at least one.
with_jids(V, Host, Fun) ->
    case throng_xdata:values(<<"accountjids">>, V) of
        [] -> missing(<<"accountjids">>);
        Bins ->
            Parsed = [jid(B, Host) || B <- Bins],
            case [E || {error, _, _} = E <- Parsed] of
                [E | _] -> E;
                [] -> Fun([J || {ok, J} <- Parsed])
            end
    end.

%% with_account/4 for an account that exists.
with_existing(V, Host, Fun) ->
    with_account(<<"accountjid">>, V, Host, fun(U) ->
        case throng_storage:account_exists(U, Host) of
            true -> Fun(U);
            false -> no_account(U, Host)
        end
    end).

account_field(U, Host) ->
    #{var => <<"accountjid">>, type => <<"jid-single">>, values => [<<U/binary, $@, Host/binary>>]}.

with_password(V, Fun) ->
    case throng_xdata:value(<<"password">>, V) of
        undefined -> missing(<<"password">>);
        Pw -> Fun(Pw)
    end.

%% A JID with a user part, of this host.
jid(Bin, Host) ->
    case throng_jid:parse(Bin) of
        {ok, #jid{user = U, server = Host} = J} when U =/= <<>> -> {ok, J};
        {ok, #jid{user = U}} when U =/= <<>> ->
            {error, 'not-acceptable', <<Bin/binary, ": not an account of ", Host/binary>>};
        _ ->
            {error, 'jid-malformed', <<Bin/binary, ": not a user's JID">>}
    end.

%%% Results

done(Type, Text) ->
    {completed, [{Type, iolist_to_binary(Text)}], []}.

result(Fields) ->
    result(Fields, []).

%% A result form, with elements of other namespaces after its fields.
result(Fields, Extra) ->
    #xmlel{children = Children} = Form = throng_xdata:result(<<>>, [form_type() | Fields]),
    {completed, [], [Form#xmlel{children = Children ++ Extra}]}.

missing(Var) ->
    {error, 'bad-request', 'bad-payload', <<Var/binary, " is required">>}.

bare_expected(JID) ->
    {error, 'jid-malformed', <<(throng_jid:to_binary(JID))/binary,
                               ": a bare JID (user@domain) is expected">>}.

no_account(U, Host) ->
    {error, 'item-not-found', <<"no account ", U/binary, $@, Host/binary>>}.

account_error(invalid_user) -> {error, 'jid-malformed', <<"invalid user name">>};
account_error(invalid_password) -> {error, 'not-acceptable', <<"invalid password">>};
account_error(unknown_host) -> {error, 'not-acceptable', <<"this server does not serve that domain">>}.
