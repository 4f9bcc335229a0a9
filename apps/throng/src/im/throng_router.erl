%% @doc Routes a stanza to a local JID, in the sending process: the rules of
%% RFC 6121 §8.5 (local domain, local user). No storage is touched when the
%% recipient is online; offline storage and account checks happen only when
%% no resource can take the stanza.
%%
%% A delivered stanza reaches the recipient's session process through
%% {@link throng_session:route/4}. IQs to the server or to an account are
%% answered by {@link throng_iq} (extension modules); presence for a local
%% user is handed to the `presence_in' hook (the built-in subscription and
%% presence handlers, {@link throng_roster} and {@link throng_presence});
%% a message no resource can take goes to the `offline_message' hook
%% (offline storage, when the module is enabled) or is bounced.
%%
%% == Service domains ==
%% A domain that is not one of the configured hosts may be served by an
%% extension module (the XEP-0045 service on `conference.<host>'): the
%% module registers it with {@link register_service/2} when it starts, and
%% every stanza to that domain or a JID in it is handed to the module's
%% `route/3' (`Module:route(From, To, El)'), in the sender's process like
%% everything here. The registry is one `persistent_term' map, written only
%% when a module starts or stops, read at each route: no process on the
%% path.
-module(throng_router).

-include("throng.hrl").

-export([route/3, route_at_home/3, is_local/1, bounce/4, error_answer/5, deliver/4]).
-export([register_service/2, unregister_service/1, is_served/1]).
-export([keep_and_deliver/4, defer_keeps/1]).
%% Called remotely (erpc) by deliver/4 on another node.
-ignore_xref([{keep_and_deliver, 4}]).

-define(SERVICES, {?MODULE, services}).
%% How long a sender waits for another node to keep a message for its
%% detached session.
-define(KEEP_TIMEOUT, 10000).
%% In a process running defer_keeps/1: the keeps it started.
-define(DEFERRED, {?MODULE, deferred_keeps}).

-spec route(#jid{}, #jid{}, #xmlel{}) -> ok.
route(From, #jid{server = S} = To, El) ->
    case is_local(S) of
        false ->
            case persistent_term:get(?SERVICES, #{}) of
                #{S := Mod} -> Mod:route(From, To, El);
                _ -> bounce(From, To, El, 'remote-server-not-found')
            end;
        true when To#jid.user =:= <<>> -> to_server(From, To, El);
        true -> to_user(From, To, El)
    end.

-spec is_local(binary()) -> boolean().
is_local(Server) ->
    lists:member(Server, throng_config:get([hosts])).

%% @doc Whether stanzas to Server are handled here: a configured host, or a
%% service domain of a module.
-spec is_served(binary()) -> boolean().
is_served(Server) ->
    is_local(Server) orelse is_map_key(Server, persistent_term:get(?SERVICES, #{})).

%% @doc From now on stanzas to Domain (which must not be a configured host)
%% and to any JID in it go to `Module:route(From, To, El)'. Called when the
%% module starts (again, when a host's modules are started again: a no-op);
%% a domain another module serves is an error.
-spec register_service(binary(), module()) -> ok | {error, string()}.
register_service(Domain, Module) ->
    Services = persistent_term:get(?SERVICES, #{}),
    case {is_local(Domain), Services} of
        {true, _} -> {error, "service domain " ++ binary_to_list(Domain) ++ " is a host"};
        {_, #{Domain := Module}} -> ok;
        {_, #{Domain := Other}} ->
            {error, lists:flatten(io_lib:format("service domain ~ts is already served by ~s",
                                                [Domain, Other]))};
        _ -> persistent_term:put(?SERVICES, Services#{Domain => Module})
    end.

%% @doc Stanzas to Domain are no longer handed to a module (module stop).
-spec unregister_service(binary()) -> ok.
unregister_service(Domain) ->
    Services = persistent_term:get(?SERVICES, #{}),
    case maps:take(Domain, Services) of
        {_, Rest} when map_size(Rest) =:= 0 -> _ = persistent_term:erase(?SERVICES), ok;
        {_, Rest} -> persistent_term:put(?SERVICES, Rest);
        error -> ok
    end.

%% @doc Sends a stanza to a session process (a session of To's bare JID).
%% A message for a detached session is first kept durably ({@link
%% throng_inflight}), before the sender's process goes on, so that the
%% sender's acknowledgement covers it: here for a session of this node; by
%% the session's own node for a session of another (its rows go back to
%% offline storage when that node dies), in one call.
-spec deliver(pid(), #jid{}, #jid{}, #xmlel{}) -> ok.
deliver(Pid, From, #jid{user = U, server = S} = To, El) ->
    case throng_inflight:keepable(El) andalso throng_sm:is_detached(Pid, {U, S}) of
        false -> throng_session:route(Pid, From, To, El);
        true when node(Pid) =:= node() -> deliver_kept(Pid, From, To, El);
        true -> deliver_kept_at(Pid, From, To, El)
    end.

%% @doc On the node of the session Pid, for a sender on another node: keeps
%% a message for the (detached) session and hands it over, as deliver/4
%% does for a sender of this node.
-spec keep_and_deliver(pid(), #jid{}, #jid{}, #xmlel{}) -> ok.
keep_and_deliver(Pid, From, To, El) ->
    deliver_kept(Pid, From, To, El).

%% Waited for here, or, under defer_keeps/1, in a process of its own.
deliver_kept_at(Pid, From, #jid{user = U, server = S} = To, El) ->
    case get(?DEFERRED) of
        undefined -> keep_at(Pid, From, To, El);
        Started ->
            {_, MRef} = spawn_monitor(fun() -> keep_at(Pid, From, To, El) end),
            put(?DEFERRED, [{MRef, {U, S}} | Started]),
            ok
    end.

%% @doc Runs Fun in the calling process, where a message for a detached
%% session of another node is not waited for: the call that has that node
%% keep and hand it over (or, failing that, stores it offline) runs in a
%% process of its own. Returns how Fun ended and those keeps, each the
%% monitor of its process (a 'DOWN' when it is over, whatever happened)
%% and the bare JID it is for. For a home's hand-off workers
%% (throng_handoff_worker), whose other users' stanzas would otherwise
%% wait behind a node that does not answer; the caller holds the bare
%% JID's later stanzas until its keeps are over, so they keep their order.
-spec defer_keeps(fun(() -> T)) ->
          {{ok, T} | {error | exit | throw, term(), list()}, [{reference(), {binary(), binary()}}]}.
defer_keeps(Fun) ->
    put(?DEFERRED, []),
    Ended = try {ok, Fun()}
            catch Class:Why:Stack -> {Class, Why, Stack}
            end,
    {Ended, erase(?DEFERRED)}.

%% The session's node does not answer (it went down, or is cut off): the
%% message goes to offline storage, as it would a moment later once the
%% session is known gone. If that node did keep it, it comes twice (from
%% the session, or from its node's recovered rows, and from offline
%% storage): never lost. A node of an earlier version (no
%% keep_and_deliver/4) gets the message as before.
keep_at(Pid, From, To, El) ->
    try erpc:call(node(Pid), ?MODULE, keep_and_deliver, [Pid, From, To, El], ?KEEP_TIMEOUT)
    catch
        error:{exception, undef, [{?MODULE, keep_and_deliver, _, _} | _]} ->
            throng_session:route(Pid, From, To, El);
        Class:Why ->
            logger:warning(#{what => inflight_keep_unreachable, node => node(Pid),
                             to => throng_jid:to_binary(To), class => Class, reason => Why}),
            offline(From, To, El)
    end.

deliver_kept(Pid, From, To, El) ->
    try throng_inflight:keep(To, Pid, [{From, To, El}]) of
        [Key] ->
            throng_session:route_kept(Pid, Key, From, To, El),
            %% The session ended meanwhile (it unregisters before it reroutes
            %% its mailbox): the message goes back to storage, not lost.
            case is_process_alive(Pid) of
                true -> ok;
                false -> throng_inflight:return([Key])
            end
    catch
        error:{storage_failed, Why} ->
            %% Not kept: delivered as before, held in the session's memory.
            logger:error(#{what => inflight_keep_failed, to => throng_jid:to_binary(To),
                           reason => Why}),
            throng_session:route(Pid, From, To, El)
    end.

%% @doc Answers a stanza with an error, unless it is an error itself (errors
%% are never answered, so two entities cannot bounce forever).
-spec bounce(#jid{}, #jid{}, #xmlel{}, throng_stanza:condition()) -> ok.
bounce(From, To, El, Cond) ->
    case error_answer(From, To, El, Cond, []) of
        none -> ok;
        Err ->
            throng_metrics:incr(stanza_errors),
            route(To, From, Err)
    end.

%% @doc The error answer to a stanza From sent To, addressed back to From,
%% with an application-specific condition (or []); none for an error or an
%% IQ result, which are never answered.
-spec error_answer(#jid{}, #jid{}, #xmlel{}, throng_stanza:condition(), #xmlel{} | []) ->
    #xmlel{} | none.
error_answer(From, To, El, Cond, App) ->
    case throng_stanza:is_error(El) orelse
        (throng_stanza:kind(El) =:= iq andalso throng_stanza:type(El) =:= <<"result">>) of
        true -> none;
        false ->
            throng_stanza:error_reply(
              throng_stanza:set_from_to(El, throng_jid:to_binary(From), throng_jid:to_binary(To)),
              Cond, <<>>, App)
    end.

%% Stanzas to the domain itself: IQs are answered by the server's handlers;
%% messages and presence to the server are not for anyone.
to_server(From, To, El) ->
    case throng_stanza:kind(El) of
        iq -> answer_iq(From, To, El);
        message -> bounce(From, To, El, 'service-unavailable');
        _ -> ok
    end.

%% In a cluster with cluster.route_at_home, a stanza for a user whose home
%% is another node is routed there ({@link throng_handoff}). An IQ needs no
%% view of the user's sessions when the server answers it for the account
%% (to the bare JID), or when the server sends it (from an account's bare
%% JID or the domain: the answer to such an IQ) to a session of this node:
%% it is routed here, as on its home. An IQ from a session to another
%% session is handed over like its messages, so that the two stay in order.
to_user(From, To, El) ->
    case throng_handoff:home_elsewhere(To) of
        {home, Home} ->
            case throng_stanza:kind(El) =:= iq andalso
                (To#jid.resource =:= <<>> orelse
                 (From#jid.resource =:= <<>> andalso throng_sm:is_local(To))) of
                true -> route_at_home(From, To, El);
                false ->
                    case throng_handoff:route(Home, From, To, El) of
                        ok -> ok;
                        here -> route_at_home(From, To, El)
                    end
            end;
        here -> route_at_home(From, To, El)
    end.

%% @doc Routes a stanza for the local user To here, with this node's view of
%% To's sessions (on To's home, its own; elsewhere, asked of the home):
%% never handed on to the home.
-spec route_at_home(#jid{}, #jid{}, #xmlel{}) -> ok.
route_at_home(From, To, El) ->
    case throng_stanza:kind(El) of
        message -> throng_sm:memo(fun() -> to_user(message, From, To, El) end);
        presence ->
            throng_hooks:notify(presence_in, To#jid.server, #{from => From, to => To, el => El});
        iq -> to_user(iq, From, To, El);
        other -> ok
    end.

%% Modules see every message and IQ for a local user before it is
%% delivered (blocking, archiving), and may consume or change it.
to_user(Kind, From, To, El0) ->
    case throng_hooks:run(stanza_to_user, To#jid.server, El0, #{from => From, to => To}) of
        {stop, _} -> ok;
        {ok, El} when Kind =:= message -> message(From, To, El);
        {ok, El} -> iq(From, To, El)
    end.

%% Modules learn which sessions a message was handed to (carbons).
delivered(From, To, El, Pids) ->
    throng_hooks:notify(message_delivered, To#jid.server,
                        #{from => From, to => To, el => El, pids => Pids}).

%%% Messages, RFC 6121 §8.5.2 (bare) and §8.5.3 (full)

message(From, #jid{resource = <<>>} = To, El) ->
    message_bare(From, To, El);
message(From, To, El) ->
    case throng_sm:lookup(To) of
        Pid when is_pid(Pid) ->
            throng_metrics:incr(messages_routed),
            deliver(Pid, From, To, El),
            delivered(From, To, El, [Pid]);
        undefined ->
            no_such_resource(From, To, El, message_type(El))
    end.

%% §8.5.3.2.1, no resource matches the full JID: only "chat" is handled as
%% if sent to the bare JID; "error" is silently ignored; "normal" (also a
%% message with no or an unknown type, RFC 6121 §5.2.2) and "groupchat" get
%% service-unavailable; "headline" is silently ignored (the RFC allows
%% either).
no_such_resource(From, To, El, chat) -> message_bare(From, To, El);
no_such_resource(_From, _To, _El, error) -> ok;
no_such_resource(_From, _To, _El, headline) -> ok;
no_such_resource(From, To, El, _NormalOrGroupchat) ->
    bounce(From, To, El, 'service-unavailable').

%% The message types of RFC 6121 §5.2.2; an absent or unknown type is normal.
message_type(El) ->
    case throng_stanza:type(El) of
        <<"chat">> -> chat;
        <<"groupchat">> -> groupchat;
        <<"headline">> -> headline;
        <<"error">> -> error;
        _ -> normal
    end.

%% §8.5.2: to the bare JID (or a chat message that found no full JID).
%% "error": silently ignored (§8.5.2.1.1, §8.5.2.2.1); "groupchat":
%% service-unavailable; "headline": every non-negative resource, or nothing;
%% "normal" and "chat": the highest non-negative priority, or offline storage.
message_bare(From, To, El) ->
    case message_type(El) of
        error -> ok;
        groupchat -> bounce(From, To, El, 'service-unavailable');
        Type -> message_bare(From, To, El, Type)
    end.

message_bare(From, #jid{user = U, server = S} = To, El, Type) ->
    Available = non_negative(throng_sm:available({U, S})),
    Targets = case Type of
                  headline -> Available;
                  _ -> highest(Available)
              end,
    case {Targets, Type} of
        {[_ | _], _} ->
            throng_metrics:add(messages_routed, length(Targets)),
            Pids = [Pid || {_R, Pid, _, _} <- Targets],
            [deliver(Pid, From, To, El) || Pid <- Pids],
            delivered(From, To, El, Pids);
        {[], headline} -> ok;
        {[], _} ->
            offline(From, To, El),
            delivered(From, To, El, [])
    end.

%% §8.5.2.2.1: no resource with a non-negative priority: stored offline (the
%% `offline_message' hook), or service-unavailable.
offline(From, #jid{user = U, server = S} = To, El) ->
    case account_exists(U, S) of
        unknown -> bounce(From, To, El, 'internal-server-error');
        false -> bounce(From, To, El, 'service-unavailable');
        true ->
            case throng_hooks:run(offline_message, S, bounce,
                                  #{from => From, to => To, el => El}) of
                {_, stored} -> ok;
                %% Storage failed: the sender learns the message was not kept.
                {_, failed} -> bounce(From, To, El, 'internal-server-error');
                {_, _BounceOrFull} -> bounce(From, To, El, 'service-unavailable')
            end
    end.

%% Whether the account exists; unknown when the store cannot answer (the
%% sender then learns the stanza was not handled, and its session goes on).
account_exists(U, S) ->
    try throng_storage:account_exists(U, S)
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => account_lookup_failed, user => U, server => S,
                           reason => Why}),
            unknown
    end.

non_negative(Resources) ->
    [E || {_, _, Prio, _} = E <- Resources, Prio >= 0].

highest([]) -> [];
highest(Resources) ->
    Max = lists:max([P || {_, _, P, _} <- Resources]),
    [E || {_, _, P, _} = E <- Resources, P =:= Max].

%%% IQ, RFC 6121 §8.5.2.1.3 and §8.5.3.1

iq(From, #jid{resource = <<>>} = To, El) ->
    %% An IQ to a bare JID is answered by the server on the account's behalf.
    case account_exists(To#jid.user, To#jid.server) of
        unknown -> bounce(From, To, El, 'internal-server-error');
        false -> bounce(From, To, El, 'service-unavailable');
        true ->
            case is_roster(El) andalso not same_account(From, To) of
                %% RFC 6121 §2.1.5, §2.3.3: only the account's own resources
                %% may read or change its roster.
                true -> bounce(From, To, El, forbidden);
                false -> answer_iq(From, To, El)
            end
    end;
iq(From, To, El) ->
    case throng_sm:lookup(To) of
        Pid when is_pid(Pid) -> deliver(Pid, From, To, El);
        undefined -> bounce(From, To, El, 'service-unavailable')
    end.

is_roster(El) ->
    throng_xml:subel(El, <<"query">>, ?NS_ROSTER) =/= undefined.

same_account(#jid{user = U, server = S}, #jid{user = U, server = S}) -> true;
same_account(_, _) -> false.

%% The server answers an IQ to the domain or to an account; the reply goes
%% back to the sender.
answer_iq(From, To, IQ) ->
    case throng_iq:process(From, To, IQ) of
        noreply -> ok;
        Reply -> route(To, From, throng_stanza:strip_from_to(Reply))
    end.
