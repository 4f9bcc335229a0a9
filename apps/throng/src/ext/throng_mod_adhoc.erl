%% @doc XEP-0050 Ad-Hoc Commands on the server's domain: the command list
%% and each command's node in service discovery, execution with data forms
%% (XEP-0004, {@link throng_xdata}), multi-stage sessions (next, prev,
%% complete, cancel) and the errors of §4.4.
%%
%% The commands come from providers, modules that implement this module's
%% callbacks: {@link throng_adhoc_admin} (XEP-0133 service administration,
%% always on with this module) and every extension module enabled on the
%% host that exports `adhoc_commands/1'. A provider lists its commands, each
%% with who may run it (`admin': a JID of the top-level `admins' list;
%% `local': any user of the host), and runs one stage of a command at a
%% time; this module keeps the session and speaks the protocol. Whoever may
%% not run a command does not see it in the list, and gets `forbidden'.
%%
%% == Sessions ==
%% A command that shows a form is a session. Its state (the stages shown,
%% for `prev', and the provider's term for each) is a row of an ETS table,
%% created once in start/2 and written by the sessions that run commands,
%% no process in between. A row expires `session_timeout' seconds after the
%% requester's last step; expired rows are removed when a requester starts a
%% new session (and a lookup of an expired row removes it), so the table
%% never holds more than the sessions started within one timeout, at most
%% `max_sessions' per requester, and needs no timer of its own.
%%
%% The session id is 9 random bytes and a MAC (HMAC-SHA-256 with the
%% per-boot secret, 12 bytes) over them, the host, the requester's full JID
%% and the command's node. The row holds the state; the MAC tells an id this
%% node issued to this requester for this command, whose session ended
%% (completed, canceled, timed out: `not-allowed' + `session-expired'), from
%% one it never issued, or issued to someone else (`bad-request' +
%% `bad-sessionid'), without keeping a row for every ended session. A
%% session lives on the node of the requester's connection; after a
%% restart, or from another resource, its id is `bad-sessionid'.
-module(throng_mod_adhoc).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1, start/2, stop/1]).
-export([command/2, disco_info/2, disco_items/2, initial_presence/2, user_removed/2]).
-export([plan/2, new_sessionid/3, issued/4]).
%% IQ handler and hooks named in iq_handlers/0 and hooks/0 (throng_ext).
-ignore_xref([{command, 2}, {disco_info, 2}, {disco_items, 2}, {initial_presence, 2},
              {user_removed, 2}]).
%% Pure parts, tested by throng_mod_adhoc_tests.
-ignore_xref([{plan, 2}, {new_sessionid, 3}, {issued, 4}]).

-define(NS, <<"http://jabber.org/protocol/commands">>).
-define(NS_XDATA, <<"jabber:x:data">>).
-define(TAB, throng_mod_adhoc).

%% Who may run a command: a server administrator, or any user of the host.
-type access() :: admin | local.
-type command() :: #{node := binary(), name := binary(), access := access()}.
-type action() :: next | complete.
%% One call of a provider: `start' when a session begins (with the form
%% the requester submitted along, if any: a one-shot execution), then the
%% requester's next or complete with the form of the current stage and the
%% term the provider returned with it.
-type request() :: #{host := binary(), from := #jid{}, node := binary(),
                     action := start | action(), stage := term(),
                     values := throng_xdata:values() | none}.
-type note() :: {info | warn | error, binary()}.
%% form: the session goes on with this form; the allowed actions, the first
%% being the default (what `execute' means); the provider gets Stage back
%% with the next step. completed: the session ends. error: the IQ is
%% answered with the error (a XEP-0050 application condition such as
%% 'bad-payload' when given) and the session stays at its stage.
-type response() :: {form, Stage :: term(), [action(), ...], #xmlel{}}
                  | {completed, [note()], [#xmlel{}]}
                  | {error, throng_stanza:condition(), binary()}
                  | {error, throng_stanza:condition(), atom(), binary()}.
-export_type([access/0, command/0, request/0, response/0, note/0]).

-callback adhoc_commands(Host :: binary()) -> [command()].
-callback adhoc_execute(request()) -> response().

%% A stage shown to the requester: the provider's term, the actions it
%% allows, the form (kept for `prev').
-type stage() :: {term(), [action(), ...], #xmlel{}}.
%% (Match specs spell the record as a plain tuple, {session, Id, Host,
%% Owner, Node, Provider, Stages, Expires}: '_' is not of the fields' types.)
-record(session, {id :: binary(),
                  host :: binary(),
                  owner :: binary(),          %% the requester's full JID
                  node :: binary(),
                  provider :: module(),
                  stages :: [stage()],        %% the current one first ([]: not begun)
                  expires :: integer()}).     %% monotonic seconds

-spec options() -> throng_config_spec:spec().
options() ->
    #{session_timeout =>
          #{type => {int, 1, 86400}, default => 600,
            doc => "Seconds a command session (a command showing a form) waits for the "
                   "requester's next step; then its id answers session-expired."},
      max_sessions =>
          #{type => {int, 1, 1000}, default => 10,
            doc => "Command sessions one requester (full JID) may have open at once; one "
                   "more is refused with not-allowed."}}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{server, ?NS, command}].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{disco_info, 50, disco_info},
     {disco_items, 50, disco_items},
     %% The built-in provider's message of the day.
     {initial_presence, 70, initial_presence},
     {user_removed, 50, user_removed}].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    [?NS].

%% One table for every host, owned by the application's start process.
-spec start(binary(), map()) -> ok.
start(Host, _Opts) ->
    case ets:whereis(?TAB) of
        undefined ->
            _ = ets:new(?TAB, [set, public, named_table, {keypos, #session.id},
                               {write_concurrency, true}]),
            ok;
        _ -> ok
    end,
    throng_adhoc_admin:reset_motd(Host).

%% @doc Hook: a session's initial presence; its account gets the host's
%% message of the day if it has not had it yet (XEP-0133 set-motd).
-spec initial_presence([throng_session:item()], #{jid := #jid{}}) -> ok.
initial_presence(_Items, #{jid := JID}) ->
    throng_adhoc_admin:motd_at_login(JID).

%% @doc Hook: the account is gone.
-spec user_removed(ok, #{user := binary(), server := binary()}) -> ok.
user_removed(ok, #{user := U, server := S}) ->
    throng_adhoc_admin:motd_account_removed(U, S).

-spec stop(binary()) -> ok.
stop(Host) ->
    case ets:whereis(?TAB) of
        undefined -> ok;
        _ -> _ = ets:match_delete(?TAB, {session, '_', Host, '_', '_', '_', '_', '_'}), ok
    end.

%%% Service discovery

%% @doc Hook: the command list (the commands the asker may run) is the
%% items of the node `http://jabber.org/protocol/commands' (§2.2).
-spec disco_items(term(), #{from := #jid{}, to := #jid{}, node := binary() | undefined}) ->
    ok | {stop, [{binary(), binary(), binary()}]}.
disco_items(_Acc, #{node := ?NS, from := From, to := #jid{user = <<>>, server = Host}}) ->
    {stop, [{Host, N, Name} || {_, #{node := N, name := Name} = C} <- commands(Host),
                               allowed(C, Host, From)]};
disco_items(_Acc, _Args) ->
    ok.

%% @doc Hook: disco#info of the command list's node, and of each command's
%% node: for one the asker may not run, forbidden (§2.2).
-spec disco_info(term(), #{from := #jid{}, to := #jid{}, node := binary() | undefined}) ->
    ok | {stop, term()}.
disco_info(_Acc, #{node := ?NS, to := #jid{user = <<>>}}) ->
    {stop, {[{<<"automation">>, <<"command-list">>, <<"Commands">>}], [?NS]}};
disco_info(_Acc, #{node := Node, from := From, to := #jid{user = <<>>, server = Host}})
  when is_binary(Node) ->
    case find(Host, Node) of
        undefined -> ok;
        {_, #{name := Name} = C} ->
            case allowed(C, Host, From) of
                true -> {stop, {[{<<"automation">>, <<"command-node">>, Name}], [?NS, ?NS_XDATA]}};
                false -> {stop, {error, forbidden}}
            end
    end;
disco_info(_Acc, _Args) ->
    ok.

%%% Execution

%% @doc IQ handler: a `<command/>' to the domain.
-spec command(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
command(IQ, #{host := Host, from := From, to := To, payload := Cmd}) ->
    Node = throng_xml:attr(<<"node">>, Cmd),
    case {To#jid.user, throng_stanza:type(IQ), Node} of
        {U, _, _} when U =/= <<>> ->
            %% The commands are the server's, not an account's.
            throng_stanza:error_reply(IQ, 'service-unavailable');
        {_, <<"set">>, N} when is_binary(N) ->
            case find(Host, Node) of
                undefined -> throng_stanza:error_reply(IQ, 'item-not-found');
                {Provider, C} ->
                    case allowed(C, Host, From) of
                        true -> step(IQ, Cmd, #{host => Host, from => From, node => Node,
                                                provider => Provider});
                        false -> throng_stanza:error_reply(IQ, forbidden)
                    end
            end;
        _ ->
            throng_stanza:error_reply(IQ, 'bad-request')
    end.

step(IQ, Cmd, Ctx) ->
    Sid = throng_xml:attr(<<"sessionid">>, Cmd),
    Session = case Sid of
                  undefined -> none;
                  _ -> session(Sid, Ctx)
              end,
    Stages = case Session of
                 #session{stages = Shown} -> Shown;
                 _ -> none
             end,
    case {Session, plan(throng_xml:attr(<<"action">>, Cmd, <<"execute">>), Stages)} of
        {_, {error, 'malformed-action'}} -> cmd_error(IQ, 'bad-request', 'malformed-action', <<>>);
        {expired, _} -> cmd_error(IQ, 'not-allowed', 'session-expired', <<>>);
        {unknown, _} -> cmd_error(IQ, 'bad-request', 'bad-sessionid', <<>>);
        {_, {error, Cond}} -> cmd_error(IQ, 'bad-request', Cond, <<>>);
        {none, start} -> begin_session(IQ, Cmd, Ctx);
        {S, cancel} ->
            true = ets:delete(?TAB, S#session.id),
            throng_stanza:iq_result(IQ, [command_el(S#session.node, S#session.id, <<"canceled">>, [])]);
        {#session{stages = [_ | Older]} = S, prev} ->
            remember(S#session{stages = Older}, Ctx),
            executing(IQ, S#session.node, S#session.id, Older);
        {#session{stages = [{Stage, _, _} | _]} = S, Action} ->
            go_on(IQ, Cmd, Ctx, S, Action, Stage)
    end.

%% @doc What a command request asks for, from its action attribute and the
%% stages of its session (none: it names no session). `execute' in a
%% session is the current stage's default action (§3.4); `prev' needs a
%% stage to go back to; next and complete must be allowed at this stage.
%% Without a session only execute (or complete, a one-shot submission)
%% starts one.
-spec plan(binary(), none | [stage()]) ->
    start | cancel | prev | action() | {error, 'malformed-action' | 'bad-action' | 'bad-sessionid'}.
plan(Attr, Stages) ->
    case action(Attr) of
        undefined -> {error, 'malformed-action'};
        Action -> plan_action(Action, Stages)
    end.

plan_action(A, none) when A =:= execute; A =:= complete -> start;
plan_action(_, none) -> {error, 'bad-sessionid'};
plan_action(cancel, _) -> cancel;
plan_action(execute, [{_, [Default | _], _} | _] = Stages) -> plan_action(Default, Stages);
plan_action(prev, [_, _ | _]) -> prev;
plan_action(prev, _) -> {error, 'bad-action'};
plan_action(A, [{_, Allowed, _} | _]) ->
    case lists:member(A, Allowed) of
        true -> A;
        false -> {error, 'bad-action'}
    end.

action(<<"execute">>) -> execute;
action(<<"next">>) -> next;
action(<<"complete">>) -> complete;
action(<<"prev">>) -> prev;
action(<<"cancel">>) -> cancel;
action(_) -> undefined.

%% The session a request names: its row, or `expired' (this node issued
%% the id to this requester for this command, and the session is over),
%% or `unknown'.
session(Sid, #{host := Host, from := From, node := Node}) ->
    Owner = throng_jid:to_binary(From),
    Now = now_s(),
    case ets:lookup(?TAB, Sid) of
        [#session{host = Host, owner = Owner, node = Node, expires = E} = S] when E >= Now -> S;
        [#session{host = Host, owner = Owner, node = Node}] ->
            true = ets:delete(?TAB, Sid),
            expired;
        _ ->
            case issued(Sid, Host, Owner, Node) of
                true -> expired;
                false -> unknown
            end
    end.

begin_session(IQ, Cmd, #{host := Host, from := From, node := Node, provider := P} = Ctx) ->
    Owner = throng_jid:to_binary(From),
    sweep(),
    Open = ets:select_count(?TAB, [{{session, '_', '_', Owner, '_', '_', '_', '_'}, [], [true]}]),
    case Open >= throng_ext:opt(Host, ?MODULE, max_sessions) of
        true ->
            throng_stanza:error_reply(IQ, 'not-allowed', <<"too many open command sessions">>);
        false ->
            with_values(IQ, Cmd, fun(Values) ->
                Sid = new_sessionid(Host, Owner, Node),
                New = #session{id = Sid, host = Host, owner = Owner, node = Node, provider = P,
                               stages = [], expires = 0},
                answer(IQ, Ctx, New, P:adhoc_execute(request(Ctx, start, undefined, Values)))
            end)
    end.

go_on(IQ, Cmd, Ctx, #session{provider = P} = S, Action, Stage) ->
    with_values(IQ, Cmd, fun(Values) ->
        answer(IQ, Ctx, S, P:adhoc_execute(request(Ctx, Action, Stage, Values)))
    end).

request(#{host := Host, from := From, node := Node}, Action, Stage, Values) ->
    #{host => Host, from => From, node => Node, action => Action, stage => Stage,
      values => Values}.

%% The submitted form's values (none without a form); a malformed form is
%% bad-payload.
with_values(IQ, Cmd, Fun) ->
    case throng_xdata:parse(Cmd) of
        none -> Fun(none);
        {ok, Values} -> Fun(Values);
        {error, not_submit} ->
            cmd_error(IQ, 'bad-request', 'bad-payload', <<"the form must be of type submit">>);
        {error, duplicate_field} ->
            cmd_error(IQ, 'bad-request', 'bad-payload', <<"a field is given twice">>)
    end.

%% The provider's answer to one step of session S.
answer(IQ, Ctx, #session{id = Sid, node = Node, stages = Stages} = S, Response) ->
    case Response of
        {form, Stage, [_ | _] = Actions, #xmlel{} = Form} ->
            New = [{Stage, Actions, Form} | Stages],
            remember(S#session{stages = New}, Ctx),
            executing(IQ, Node, Sid, New);
        {completed, Notes, Payload} ->
            _ = ets:delete(?TAB, Sid),
            throng_stanza:iq_result(
              IQ, [command_el(Node, Sid, <<"completed">>,
                              [note_el(T, Text) || {T, Text} <- Notes] ++ Payload)]);
        {error, Cond, Text} ->
            keep(S, Ctx),
            throng_stanza:error_reply(IQ, Cond, Text);
        {error, Cond, AppCond, Text} ->
            keep(S, Ctx),
            cmd_error(IQ, Cond, AppCond, Text)
    end.

%% A session (not a first step that failed) stays, with its time renewed.
keep(#session{stages = []}, _Ctx) -> ok;
keep(S, Ctx) -> remember(S, Ctx).

remember(S, #{host := Host}) ->
    true = ets:insert(?TAB, S#session{expires = now_s() + throng_ext:opt(Host, ?MODULE,
                                                                          session_timeout)}),
    ok.

%% Drops every expired session.
sweep() ->
    Now = now_s(),
    _ = ets:select_delete(?TAB, [{{session, '_', '_', '_', '_', '_', '_', '$1'},
                                  [{'<', '$1', Now}], [true]}]),
    ok.

now_s() ->
    erlang:monotonic_time(second).

%%% Session ids

%% @doc A new session id for Owner (full JID) running Node on Host.
-spec new_sessionid(binary(), binary(), binary()) -> binary().
new_sessionid(Host, Owner, Node) ->
    R = crypto:strong_rand_bytes(9),
    base64:encode(<<R/binary, (mac(R, Host, Owner, Node))/binary>>).

%% @doc Whether this node (since it started) issued Sid to Owner for Node
%% on Host.
-spec issued(binary(), binary(), binary(), binary()) -> boolean().
issued(Sid, Host, Owner, Node) ->
    try base64:decode(Sid) of
        <<R:9/binary, Mac:12/binary>> -> crypto:hash_equals(Mac, mac(R, Host, Owner, Node));
        _ -> false
    catch
        error:_ -> false
    end.

%% NUL cannot occur in a JID or a node name (XML): the fields stay apart.
mac(R, Host, Owner, Node) ->
    crypto:macN(hmac, sha256, throng_tables:boot_secret(),
                [R, 0, Host, 0, Owner, 0, Node], 12).

%%% Commands and who may run them

%% Every provider's commands on Host, as {Provider, Command}: the XEP-0133
%% set first, then the enabled modules that offer commands. A node offered
%% twice is the first one's.
commands(Host) ->
    Providers = [throng_adhoc_admin |
                 [M || M <- throng_ext:modules(Host), M =/= ?MODULE,
                       erlang:function_exported(M, adhoc_commands, 1)]],
    [{P, C} || P <- Providers, C <- P:adhoc_commands(Host)].

find(Host, Node) ->
    case [PC || {_, #{node := N}} = PC <- commands(Host), N =:= Node] of
        [First | _] -> First;
        [] -> undefined
    end.

allowed(#{access := admin}, _Host, From) -> throng_config:is_admin(From);
allowed(#{access := local}, Host, #jid{server = S}) -> S =:= Host.

%%% Elements

executing(IQ, Node, Sid, [{_, Actions, Form} | Older]) ->
    Allowed = [prev || Older =/= []] ++ [A || A <- [next, complete], lists:member(A, Actions)],
    ActionsEl = #xmlel{name = <<"actions">>,
                       attrs = [{<<"execute">>, atom_to_binary(hd(Actions))}],
                       children = [#xmlel{name = atom_to_binary(A)} || A <- Allowed]},
    throng_stanza:iq_result(IQ, [command_el(Node, Sid, <<"executing">>, [ActionsEl, Form])]).

command_el(Node, Sid, Status, Children) ->
    #xmlel{name = <<"command">>,
           attrs = [{<<"xmlns">>, ?NS}, {<<"node">>, Node}, {<<"sessionid">>, Sid},
                    {<<"status">>, Status}],
           children = Children}.

note_el(Type, Text) ->
    #xmlel{name = <<"note">>, attrs = [{<<"type">>, atom_to_binary(Type)}],
           children = [{xmlcdata, Text}]}.

%% An error with XEP-0050's application condition (§4.4).
cmd_error(IQ, Cond, AppCond, Text) ->
    throng_stanza:error_reply(IQ, Cond, Text,
                              #xmlel{name = atom_to_binary(AppCond), attrs = [{<<"xmlns">>, ?NS}]}).
