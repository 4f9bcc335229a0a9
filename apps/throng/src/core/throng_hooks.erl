%% @doc Hooks: the events extension modules (and the built-in IM handlers)
%% attach to. A hook runs in the calling process — the session, the sender's
%% process, an admin command — never through a central process: the
%% handlers of an event for a host are one `persistent_term' entry, read at
%% each run (a few tens of nanoseconds, no copy), written only when modules
%% are installed at boot.
%%
%% A handler is `Mod:Fun(Acc, Args)' and returns
%% <ul>
%% <li>`ok': pass, the accumulator unchanged;</li>
%% <li>`{ok, NewAcc}': pass with a changed accumulator;</li>
%% <li>`stop' / `{stop, NewAcc}': no later handler runs.</li>
%% </ul>
%% Handlers run in ascending sequence number (ties: installation order).
%% {@link run/4} returns `{ok, Acc}' or `{stop, Acc}' so the caller knows
%% whether a handler took the event over. A handler that crashes is logged
%% and skipped: one module's bug does not end the session that ran it.
%%
%% The events are listed in {@link events/0} with their accumulator and
%% arguments; docs/extensions.md describes each.
-module(throng_hooks).

-export([run/4, notify/3, handlers/2, install/2, uninstall/1, events/0]).
%% API used by tests and operators (docs/extensions.md).
-ignore_xref([{events, 0}, {handlers, 2}]).

-type event() :: stanza_from_session | stanza_to_session | presence_in
               | session_opened | session_closed | initial_presence
               | user_registered | user_removed | roster_item_changed
               | roster_version | offline_message | stanza_to_user | message_delivered
               | disco_info | disco_items | login_keys | login_values.
-type handler() :: {Seq :: integer(), module(), Fun :: atom()}.
-type result() :: ok | stop | {ok, term()} | {stop, term()}.
-export_type([event/0, handler/0, result/0]).

-define(KEY(Event, Host), {?MODULE, Event, Host}).

%% @doc Every event a handler can attach to, with what it gets.
-spec events() -> [{event(), Acc :: string(), Args :: string()}].
events() ->
    [{stanza_from_session, "#xmlel{} the stanza (from/to as the client wrote them)",
      "#{from := #jid{} (the session's full JID), to := #jid{}}: stop = consumed, not routed"},
     {stanza_to_session, "#xmlel{} the stanza about to be written to the client",
      "#{from := #jid{}, to := #jid{}, jid := #jid{} (the session)}: stop = not delivered"},
     {presence_in, "ok", "#{from := #jid{}, to := #jid{} (a local user), el := #xmlel{}}: "
      "a presence stanza routed to a local user (built-in roster and presence handlers)"},
     {session_opened, "ok", "#{jid := #jid{}}: a resource was bound (runs in the session)"},
     {session_closed, "ok", "#{jid := #jid{}, available := boolean()}: the session ended "
      "(runs in the session; available: it had not sent unavailable presence)"},
     {initial_presence, "[throng_session:item()] stanzas to deliver to the new resource",
      "#{jid := #jid{}, priority := integer()}: first available presence of a session"},
     {user_registered, "ok", "#{user := binary(), server := binary()}"},
     {user_removed, "ok", "#{user := binary(), server := binary()}"},
     {roster_item_changed, "ok", "#{user := #jid{} (bare), old := item | undefined, "
      "new := item | undefined, version := integer()}"},
     {roster_version, "undefined | binary() the 'ver' to advertise",
      "#{version := integer()}: roster versioning (RFC 6121 §2.6)"},
     {offline_message, "bounce | stored | full",
      "#{from := #jid{}, to := #jid{} (bare), el := #xmlel{}}: a message no resource can take"},
     {stanza_to_user, "#xmlel{} a message or IQ routed to a local user (bare or full JID)",
      "#{from := #jid{}, to := #jid{}}: runs in the sender's process before the delivery "
      "decision; stop = consumed (the handler answered or dropped it)"},
     {message_delivered, "ok", "#{from := #jid{}, to := #jid{}, el := #xmlel{}, "
      "pids := [pid()]}: a message to a local user was handed to these sessions "
      "([] when none took it); runs in the sender's process"},
     {disco_info, "{[identity()], [Feature]} | not_found | {error, Condition}: the answer "
      "(without a node: the registry's identities and features; with one: not_found)",
      "#{from := #jid{}, to := #jid{} (the domain), node := binary() | undefined}: "
      "disco#info of the domain; a module that owns the node answers it"},
     {disco_items, "[{JID, Node, Name}] (binaries, <<>> when absent) | not_found | "
      "{error, Condition} (without a node: []; with one: not_found)",
      "#{from := #jid{}, to := #jid{} (the domain), node := binary() | undefined}: "
      "disco#items of the domain; modules add items or answer their node"},
     {login_keys, "[{Bucket, Key}] keys of the key-value store to read with the credentials",
      "#{user := binary(), server := binary()}: a login is about to read the account "
      "(runs in the connection's process)"},
     {login_values, "ok", "#{user := binary(), server := binary(), "
      "values := [{{Bucket, Key}, {ok, Value} | not_found}]}: what that read found "
      "(only when the account exists)"}].

%% @doc Runs the handlers of Event for Host, folding Acc through them.
-spec run(event(), binary(), Acc, map()) -> {ok, Acc} | {stop, Acc} when Acc :: term().
run(Event, Host, Acc, Args) ->
    fold(persistent_term:get(?KEY(Event, Host), []), Event, Acc, Args).

%% @doc Runs the handlers of an event whose accumulator is unused.
-spec notify(event(), binary(), map()) -> ok.
notify(Event, Host, Args) ->
    _ = run(Event, Host, ok, Args),
    ok.

fold([], _Event, Acc, _Args) ->
    {ok, Acc};
fold([{_Seq, Mod, Fun} | Rest], Event, Acc, Args) ->
    try Mod:Fun(Acc, Args) of
        ok -> fold(Rest, Event, Acc, Args);
        {ok, Acc1} -> fold(Rest, Event, Acc1, Args);
        stop -> {stop, Acc};
        {stop, Acc1} -> {stop, Acc1};
        Other ->
            logger:error(#{what => hook_bad_return, event => Event, module => Mod,
                           function => Fun, returned => Other}),
            fold(Rest, Event, Acc, Args)
    catch
        Class:Reason:Stack ->
            logger:error(#{what => hook_crashed, event => Event, module => Mod,
                           function => Fun, class => Class, reason => Reason,
                           stacktrace => Stack}),
            fold(Rest, Event, Acc, Args)
    end.

%% @doc The handlers of an event for a host, in the order they run.
-spec handlers(event(), binary()) -> [handler()].
handlers(Event, Host) ->
    persistent_term:get(?KEY(Event, Host), []).

%% @doc Replaces every handler of a host by the given ones ({Event, Seq,
%% Mod, Fun}, in installation order). Called at boot: a persistent_term
%% write is expensive for a node with many processes. An event that
%% {@link events/0} does not list raises `{unknown_hook, Event, Mod}' and
%% leaves the host's handlers as they were.
-spec install(binary(), [{event(), integer(), module(), atom()}]) -> ok.
install(Host, Handlers) ->
    Known = [E || {E, _, _} <- events()],
    ByEvent = lists:foldl(
                fun({Event, Seq, Mod, Fun}, Acc) ->
                        lists:member(Event, Known) orelse error({unknown_hook, Event, Mod}),
                        maps:update_with(Event, fun(L) -> [{Seq, Mod, Fun} | L] end,
                                         [{Seq, Mod, Fun}], Acc)
                end, #{}, Handlers),
    uninstall(Host),
    maps:foreach(fun(Event, Rev) ->
                         %% keysort is stable: equal sequence numbers keep their order.
                         persistent_term:put(?KEY(Event, Host), lists:keysort(1, lists:reverse(Rev)))
                 end, ByEvent).

%% @doc Removes every handler of a host.
-spec uninstall(binary()) -> ok.
uninstall(Host) ->
    _ = [persistent_term:erase(?KEY(E, Host)) || {E, _, _} <- events(),
                                               persistent_term:get(?KEY(E, Host), none) =/= none],
    ok.
