%% @doc An extension module for extensions_SUITE. It implements every
%% callback of the {@link throng_ext} behaviour and tells the test what ran:
%% each hook, start/2, session_info/2 and item_reroute/2 send
%% `{throng_test_ext, What, Pid, Args}' (Pid: the process it ran in) to the
%% process registered under this module's name, when there is one.
%%
%% What it does to a message is chosen by the message's body, so a test
%% picks the behaviour with the stanza it sends:
%% <ul>
%% <li>stanza_from_session: `drop-out' is stopped, `change-out' becomes
%% `changed-out';</li>
%% <li>stanza_to_session: `drop-in' is stopped, `change-in' becomes
%% `changed-in'.</li>
%% </ul>
%% Every initial presence gets one more item: a `welcome' message from the
%% domain. session_info(`{actions, Actions}', Ctx) returns Actions.
%%
%% It owns the disco node {@link node/0} of the domain (disco_info and
%% disco_items hooks): answered for everyone but bob, who gets forbidden;
%% the domain's disco#items lists it.
-module(throng_test_ext).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1, disco_identities/1,
         account_features/1, stream_features/2, start/2, stop/1, session_info/2, item_bytes/2, item_reroute/2]).
-export([answer/2, crash/2]).
-export([from_session/2, to_session/2, opened/2, closed/2, registered/2, removed/2,
         roster_changed/2, initial_presence/2, disco_info/2, disco_items/2]).
-export([node/0, ns/0, ns_server_only/0, ns_crash/0, ns_account/0, identity/0, body/1, message/3]).

-define(NS, <<"urn:throng:test">>).
-define(NS_SERVER_ONLY, <<"urn:throng:test:server-only">>).
-define(NS_CRASH, <<"urn:throng:test:crash">>).
-define(NODE, <<"urn:throng:test#node">>).
-define(NS_ACCOUNT, <<"urn:throng:test:account">>).

%%% What the suite checks against

%% @doc The disco node of the domain the module answers.
-spec node() -> binary().
node() -> ?NODE.

%% @doc The namespace answered in the server, account and preauth scopes.
-spec ns() -> binary().
ns() -> ?NS.

%% @doc A namespace answered in the server scope only.
-spec ns_server_only() -> binary().
ns_server_only() -> ?NS_SERVER_ONLY.

%% @doc A namespace whose handler crashes.
-spec ns_crash() -> binary().
ns_crash() -> ?NS_CRASH.

%% @doc The feature the module adds to every account's disco#info.
-spec ns_account() -> binary().
ns_account() -> ?NS_ACCOUNT.

%% @doc The disco identity the module adds.
-spec identity() -> throng_ext:identity().
identity() -> {<<"test">>, <<"throng">>, <<"Throng test module">>}.

%%% The behaviour

-spec options() -> throng_config_spec:spec().
options() ->
    #{fail => #{type => string, default => <<>>,
                doc => "Not empty: start/2 fails with this reason."}}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{server, ?NS, answer},
     {account, ?NS, answer},
     {preauth, ?NS, answer},
     {server, ?NS_SERVER_ONLY, answer},
     {server, ?NS_CRASH, crash}].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{stanza_from_session, 50, from_session},
     {stanza_to_session, 50, to_session},
     {session_opened, 50, opened},
     {session_closed, 50, closed},
     {user_registered, 50, registered},
     {user_removed, 50, removed},
     {roster_item_changed, 50, roster_changed},
     {initial_presence, 60, initial_presence},
     {disco_info, 50, disco_info},
     {disco_items, 50, disco_items}].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    [?NS].

-spec disco_identities(binary()) -> [throng_ext:identity()].
disco_identities(_Host) ->
    [identity()].

-spec account_features(binary()) -> [binary()].
account_features(_Host) ->
    [?NS_ACCOUNT].

-spec stream_features(pre_auth | authenticated, binary()) -> iodata().
stream_features(authenticated, _Host) ->
    ["<test xmlns='", ?NS, "'/>"];
stream_features(pre_auth, _Host) ->
    [].

-spec start(binary(), map()) -> ok | {error, binary()}.
start(Host, Opts) ->
    case maps:get(fail, Opts, <<>>) of
        <<>> -> tell(start, #{host => Host, opts => Opts});
        Why -> {error, Why}
    end.

-spec stop(binary()) -> ok.
stop(Host) ->
    tell(stop, #{host => Host}).

-spec session_info({actions, [throng_session:action()]} | crash | timer, throng_session:ctx()) ->
    [throng_session:action()].
session_info({actions, Actions}, Ctx) ->
    ok = tell(session_info, Ctx),
    Actions;
session_info(crash, _Ctx) ->
    error(test_crash);
session_info(timer, #{jid := JID} = Ctx) ->
    %% A compact timer (throng_session:ext_timer/2) fired.
    ok = tell(session_info, Ctx),
    [{send, message(#jid{server = JID#jid.server}, JID, <<"tick">>)}].

-spec item_bytes({welcome, #jid{}}, binary()) -> {message, iodata()}.
item_bytes({welcome, JID}, Host) ->
    {message, throng_xml:to_iolist(message(#jid{server = Host}, JID, <<"welcome">>))}.

-spec item_reroute({welcome, #jid{}}, #jid{}) -> ok.
item_reroute(Data, JID) ->
    tell(item_reroute, #{data => Data, jid => JID}).

%%% IQ handlers

%% @doc A result whose query says which scope answered, for whom.
-spec answer(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
answer(IQ, #{scope := Scope, to := To, payload := Payload}) ->
    throng_stanza:iq_result(
      IQ, [Payload#xmlel{attrs = [{<<"xmlns">>, throng_xml:ns(Payload)},
                                  {<<"scope">>, atom_to_binary(Scope)},
                                  {<<"to">>, throng_jid:to_binary(To)}]}]).

-spec crash(#xmlel{}, throng_ext:iq_ctx()) -> no_return().
crash(_IQ, _Ctx) ->
    error(test_module_bug).

%%% Hooks

-spec from_session(#xmlel{}, map()) -> ok | stop | {ok, #xmlel{}}.
from_session(El, Args) ->
    by_body(stanza_from_session, <<"out">>, El, Args).

-spec to_session(#xmlel{}, map()) -> ok | stop | {ok, #xmlel{}}.
to_session(El, Args) ->
    by_body(stanza_to_session, <<"in">>, El, Args).

%% drop-Dir: stop (and tell); change-Dir: the body becomes changed-Dir.
by_body(Event, Dir, El, Args) ->
    Drop = <<"drop-", Dir/binary>>,
    Change = <<"change-", Dir/binary>>,
    case body(El) of
        Drop -> ok = tell(Event, Args), stop;
        Change -> {ok, set_body(El, <<"changed-", Dir/binary>>)};
        _ -> ok
    end.

-spec opened(ok, map()) -> ok.
opened(ok, Args) -> tell(session_opened, Args).

-spec closed(ok, map()) -> ok.
closed(ok, Args) -> tell(session_closed, Args).

-spec registered(ok, map()) -> ok.
registered(ok, Args) -> tell(user_registered, Args).

-spec removed(ok, map()) -> ok.
removed(ok, Args) -> tell(user_removed, Args).

-spec roster_changed(ok, map()) -> ok.
roster_changed(ok, Args) -> tell(roster_item_changed, Args).

-spec initial_presence([throng_session:item()], #{jid := #jid{}}) ->
    {ok, [throng_session:item()]}.
initial_presence(Items, #{jid := JID}) ->
    {ok, Items ++ [{ext, ?MODULE, {welcome, JID}}]}.

-spec disco_info(term(), #{node := binary() | undefined, from := #jid{}}) -> ok | {stop, term()}.
disco_info(_Acc, #{node := ?NODE, from := #jid{user = <<"bob">>}}) ->
    {stop, {error, forbidden}};
disco_info(_Acc, #{node := ?NODE}) ->
    {stop, {[{<<"test">>, <<"node">>, <<"Test node">>}], [?NS]}};
disco_info(_Acc, _Args) ->
    ok.

-spec disco_items(term(), #{node := binary() | undefined, from := #jid{}, to := #jid{}}) ->
    ok | {ok, list()} | {stop, term()}.
disco_items(Items, #{node := undefined, to := #jid{server = Host}}) ->
    {ok, Items ++ [{Host, ?NODE, <<"Test node">>}]};
disco_items(_Acc, #{node := ?NODE, from := #jid{user = <<"bob">>}}) ->
    {stop, {error, forbidden}};
disco_items(_Acc, #{node := ?NODE, to := #jid{server = Host}}) ->
    {stop, [{Host, <<?NODE/binary, "/child">>, <<>>}]};
disco_items(_Acc, _Args) ->
    ok.

%%% Helpers

%% @doc The text of a stanza's body (<<>> without one).
-spec body(#xmlel{}) -> binary().
body(El) ->
    throng_xml:subel_cdata(El, <<"body">>).

%% @doc A chat message with a body.
-spec message(#jid{}, #jid{}, binary()) -> #xmlel{}.
message(From, To, Body) ->
    #xmlel{name = <<"message">>,
           attrs = [{<<"from">>, throng_jid:to_binary(From)}, {<<"to">>, throng_jid:to_binary(To)},
                    {<<"type">>, <<"chat">>}],
           children = [#xmlel{name = <<"body">>, children = [{xmlcdata, Body}]}]}.

set_body(#xmlel{children = Children} = El, Body) ->
    El#xmlel{children = [case C of
                             #xmlel{name = <<"body">>} -> C#xmlel{children = [{xmlcdata, Body}]};
                             _ -> C
                         end || C <- Children]}.

tell(What, Args) ->
    case whereis(?MODULE) of
        undefined -> ok;
        Pid -> Pid ! {?MODULE, What, self(), Args}, ok
    end.
