%% @doc The one API for messages to a session process (a `throng_c2s'):
%% every module that wants something of a session calls a function here
%% instead of sending it a tuple, so the session's message protocol is
%% written in one place. All are asynchronous sends; a dead pid is a no-op.
%%
%% Extension modules talk to the session they run in through
%% {@link ext_message/3} and {@link ext_timer/3}: the session calls the
%% module's `session_info/2' with the message and carries out the actions
%% it returns ({@link action()}).
-module(throng_session).

-include("throng.hrl").

-export([route/4, route_kept/5, roster_push/3, kick/2, replace/2, place_again/1,
         ext_message/3, ext_timer/2, ext_timer/3, route_flagged/4]).
%% Called remotely (erpc:cast) by route_flagged/4 on another node.
-ignore_xref([{route_flagged, 4}]).
%% API of extension modules (docs/extensions.md), used by tests.
-ignore_xref([{ext_message, 3}]).

%% What a session carries out for a module.
-type action() :: {send, #xmlel{}}                          %% write a stanza to the client
                | {timer, Ms :: non_neg_integer()}          %% session_info(timer) later
                | {timer, Ms :: non_neg_integer(), Msg :: term()} %% session_info(Msg) later
                | {stop, Condition :: atom(), Text :: binary()}.  %% stream error, end
%% What session_info/2 gets.
-type ctx() :: #{jid := #jid{}, last_in := integer()}.     %% last_in: monotonic seconds
%% A stanza queued for the client (and kept for XEP-0198 until acknowledged):
%% routed {From, To, Element}, a module's own item, a stanza that is not
%% re-sent (none), or one of these also kept durably in flight
%% ({@link throng_inflight}) under a storage key.
-type item() :: {#jid{}, #jid{}, #xmlel{}} | {ext, module(), term()} | none
              | {kept, throng_storage:inflight_key(), {#jid{}, #jid{}, #xmlel{}} | {ext, module(), term()}}.
-export_type([action/0, ctx/0, item/0]).

%% @doc Delivers a routed stanza to a session.
-spec route(pid(), #jid{}, #jid{}, #xmlel{}) -> ok.
route(Pid, From, To, El) ->
    Pid ! {route, From, To, El},
    ok.

%% @doc Delivers a stanza from From to each of Targets ({Pid, To}) whose
%% session has Flag set ({@link throng_sm:set_flag/2}). Flags are known on
%% the session's own node: targets on another node are handed to it in one
%% asynchronous call per node, which checks and delivers there.
-spec route_flagged(throng_sm:flag(), [{pid(), #jid{}}], #jid{}, #xmlel{}) -> ok.
route_flagged(Flag, Targets, From, El) ->
    Me = node(),
    ByNode = maps:groups_from_list(fun({Pid, _}) -> node(Pid) end, Targets),
    maps:foreach(
      fun(Node, Ts) when Node =:= Me ->
              [route(Pid, From, To, El) || {Pid, To} <- Ts, throng_sm:has_flag(Pid, Flag)];
         (Node, Ts) ->
              erpc:cast(Node, ?MODULE, route_flagged, [Flag, Ts, From, El])
      end, ByNode).

%% @doc Delivers a routed message that is also kept durably in flight under
%% Key (the session is detached; {@link throng_inflight}).
-spec route_kept(pid(), throng_storage:inflight_key(), #jid{}, #jid{}, #xmlel{}) -> ok.
route_kept(Pid, Key, From, To, El) ->
    Pid ! {route_kept, Key, From, To, El},
    ok.

%% @doc A roster change for the session's user; the session forwards it to
%% its client if the client requested the roster.
-spec roster_push(pid(), #roster_item{} | {removed, {binary(), binary()}}, non_neg_integer()) -> ok.
roster_push(Pid, Item, Version) ->
    Pid ! {roster_push, Item, Version},
    ok.

%% @doc Ends a session with a policy-violation stream error (admin kick,
%% account removed).
-spec kick(pid(), binary()) -> ok.
kick(Pid, Reason) ->
    Pid ! {kick, Reason},
    ok.

%% @doc A newer session (By) binds the same full JID: the old one ends with
%% a conflict stream error (RFC 6120 §7.7.2.2).
-spec replace(pid(), pid()) -> ok.
replace(Pid, By) ->
    Pid ! {replaced, By},
    ok.

%% @doc The cluster's members changed: the session enters itself again in
%% the directory where it now belongs ({@link throng_sm:place_again/2}).
-spec place_again(pid()) -> ok.
place_again(Pid) ->
    Pid ! {throng_session, place_again},
    ok.

%% @doc A message for module Mod's `session_info/2', run in the session.
-spec ext_message(pid(), module(), term()) -> ok.
ext_message(Pid, Mod, Msg) ->
    Pid ! {throng_session, ext, Mod, Msg},
    ok.

%% @doc From a module's code running in a session: call the module's
%% `session_info(timer, Ctx)' in this session after Ms milliseconds. The
%% timer carries only the module's name (an atom): it costs no memory of
%% its own while it waits, which matters for a timer every idle session
%% keeps (the keepalive).
-spec ext_timer(non_neg_integer(), module()) -> ok.
ext_timer(Ms, Mod) ->
    _ = erlang:send_after(Ms, self(), Mod),
    ok.

%% @doc From a module's code running in a session: call the module's
%% `session_info(Msg, Ctx)' in this session after Ms milliseconds. The
%% timer keeps a copy of Msg (about 100 bytes for a small tuple): for a
%% timer of every idle session prefer {@link ext_timer/2}.
-spec ext_timer(non_neg_integer(), module(), term()) -> ok.
ext_timer(Ms, Mod, Msg) ->
    _ = erlang:send_after(Ms, self(), {throng_session, ext, Mod, Msg}),
    ok.
