%% @doc One process per active room, and the node's table of them.
%%
%% A room has a process only while it has occupants (or for the one stanza
%% that finds it empty). The process is started on demand by whoever sends
%% the room a stanza ({@link dispatch/4}, in the sender's process): a stored
%% persistent room is loaded, an entering presence to an unknown room
%% creates it (locked, §10.1.1), anything else to an unknown room is
%% answered `item-not-found'. When the last occupant leaves, a temporary
%% room is gone and a persistent one is written (with its history) and its
%% process stops: an idle persistent room is its stored entry and nothing
%% else. The process hibernates after a second without stanzas.
%%
%% The process is only on the path of its own room's stanzas: a room of
%% 1,000 occupants fans a message out from its own process, and no other
%% room waits for it. The rooms of a node are found through one public ETS
%% table `{{Service, Room}, Pid, Listing}' (Listing: how the service's
%% disco#items shows it), written by the rooms themselves; a room claims
%% its row with `ets:insert_new', so two senders starting the same room at
%% once end with one process.
%%
%% The room's state and what it does with a stanza are pure
%% ({@link throng_muc_logic}, {@link throng_muc_admin}); this module routes
%% what they return and decides when to write the room to the store.
-module(throng_muc_room).
-behaviour(gen_server).

-include("throng_muc.hrl").

-export([init_table/0, set_service/2, unset_service/1, limits/1, dispatch/4, running/1,
         stop_all/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).
%% Called remotely (erpc:cast) by throng_mod_muc on the room's home node.
-ignore_xref([{dispatch, 4}]).

-define(TAB, throng_muc_room).
-define(HIBERNATE_AFTER, 1000).
-define(SERVICE(Service), {?MODULE, service, Service}).

%% What a service's rooms need: the limits of its configuration.
-type service() :: #{limits := throng_muc_config:limits()}.
%% How the service's disco#items shows a running room.
-type listing() :: hidden | {listed, binary()}.
-export_type([service/0, listing/0]).

%% The process's state: the room, what was last written of it,
%% {durable(Room), History} (undefined: the room is not stored), and its
%% listing as last written to the table (init writes `hidden').
-record(st, {room :: #muc{}, saved :: term(), listing = hidden :: listing()}).

%% @doc Creates the node's table of running rooms (once; the caller owns it).
-spec init_table() -> ok.
init_table() ->
    case ets:whereis(?TAB) of
        undefined ->
            _ = ets:new(?TAB, [named_table, public, set, {read_concurrency, true}]),
            ok;
        _ -> ok
    end.

%% @doc Publishes what the rooms of Service need (at module start).
-spec set_service(binary(), service()) -> ok.
set_service(Service, Ctx) ->
    persistent_term:put(?SERVICE(Service), Ctx).

%% @doc The limits of a service's rooms.
-spec limits(binary()) -> throng_muc_config:limits().
limits(Service) ->
    map_get(limits, persistent_term:get(?SERVICE(Service))).

-spec unset_service(binary()) -> ok.
unset_service(Service) ->
    _ = persistent_term:erase(?SERVICE(Service)),
    ok.

%% @doc Hands a stanza from the real JID From to the room To (bare or
%% room/nick) of this node, starting its process if needed. Runs in the
%% sender's process.
-spec dispatch(binary(), #jid{}, #jid{}, #xmlel{}) -> ok.
dispatch(Service, From, To, El) ->
    Key = {Service, To#jid.user},
    case ets:lookup(?TAB, Key) of
        [{_, Pid, _}] -> Pid ! {route, From, To, El}, ok;
        [] -> start_for(Service, Key, From, To, El)
    end.

start_for(Service, {_, Room} = Key, From, To, El) ->
    #{limits := Limits} = Ctx = persistent_term:get(?SERVICE(Service)),
    Init = try throng_muc_store:load(Service, Room, Limits) of
               {ok, C, Affs, Subject, H} ->
                   {stored, C, Affs, Subject, H, throng_muc_store:secret(Service)};
               not_found ->
                   case is_enter(To, El) of
                       true -> {new, From, throng_muc_store:secret(Service)};
                       false -> none
                   end
           catch
               error:{storage_failed, Why} ->
                   logger:error(#{what => muc_room_load_failed, room => Room,
                                  service => Service, reason => Why}),
                   failed
           end,
    case Init of
        none -> reply_error(From, To, El, 'item-not-found');
        failed -> reply_error(From, To, El, 'internal-server-error');
        _ ->
            case gen_server:start(?MODULE, {Key, Init, Ctx}, [{hibernate_after, ?HIBERNATE_AFTER}]) of
                {ok, Pid} -> Pid ! {route, From, To, El}, ok;
                %% Another sender started it first.
                {error, normal} -> dispatch(Service, From, To, El)
            end
    end.

is_enter(#jid{resource = Nick}, #xmlel{name = <<"presence">>} = El) ->
    Nick =/= <<>> andalso throng_stanza:type(El) =:= <<>>;
is_enter(_, _) ->
    false.

reply_error(From, To, El, Cond) ->
    case throng_stanza:kind(El) of
        presence when Cond =:= 'item-not-found' -> ok;
        _ -> throng_router:bounce(From, To, El, Cond)
    end.

%% @doc The running rooms of a service, with their listing.
-spec running(binary()) -> [{binary(), pid(), listing()}].
running(Service) ->
    [{R, P, L} || [R, P, L] <- ets:match(?TAB, {{Service, '$1'}, '$2', '$3'})].

%% @doc Ends every running room of a service (module stop: the sessions
%% have ended, so rooms still running are only those just emptying).
-spec stop_all(binary()) -> ok.
stop_all(Service) ->
    case ets:whereis(?TAB) of
        undefined -> ok;
        _ -> [exit(P, shutdown) || {_, P, _} <- running(Service)], ok
    end.

%%% The room's process

-spec init({{binary(), binary()}, term(), service()}) -> {ok, #st{}} | {stop, normal}.
init({{Service, Room} = Key, Init, #{limits := Limits}}) ->
    case ets:insert_new(?TAB, {Key, self(), hidden}) of
        false -> {stop, normal};
        true ->
            JID = #jid{user = Room, server = Service},
            Secret = crypto:mac(hmac, sha256, element(tuple_size(Init), Init),
                                throng_jid:to_binary(JID)),
            {C, Affs, Subject, H, Locked} =
                case Init of
                    {stored, C0, A0, S0, H0, _} -> {C0, A0, S0, H0, false};
                    {new, Creator, _} ->
                        C0 = throng_muc_config:default(Limits),
                        {C0, #{throng_muc_xml:bare(Creator) => owner},
                         {<<>>, <<>>}, throng_muc_history:new(map_get(history_length, C0)), true}
                end,
            S = #muc{jid = JID, limits = Limits, secret = Secret, config = C, affs = Affs,
                     subject = Subject, history = H, locked = Locked},
            St = case Init of
                     {stored, _, _, _, _, _} -> #st{room = S, saved = {durable(S), H}};
                     {new, _, _} -> #st{room = S}
                 end,
            {ok, St}
    end.

-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, ok, #st{}}.
handle_call(_Req, _From, St) ->
    {reply, ok, St}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}} | {stop, normal, #st{}}.
handle_info({route, From, To, El}, #st{room = S0} = St) ->
    Now = erlang:system_time(microsecond),
    {Status, S, Out} =
        try handle(From, To, El, Now, S0)
        catch
            C:R:Stack ->
                logger:error(#{what => muc_room_crashed, room => throng_jid:to_binary(S0#muc.jid),
                               class => C, reason => R, stacktrace => Stack}),
                {ok, S0, throng_muc_xml:error(From, To, El, 'internal-server-error')}
        end,
    [throng_router:route(F, T, E) || {F, T, E} <- Out],
    after_stanza(Status, St#st{room = S});
handle_info(_Other, St) ->
    {noreply, St}.

handle(From, To, El, Now, S) ->
    case throng_stanza:kind(El) of
        presence -> with_ok(throng_muc_logic:presence(From, To, El, Now, S));
        message -> with_ok(throng_muc_logic:message(From, To, El, Now, S));
        iq ->
            case {To#jid.resource, throng_xml:subels(El)} of
                {<<>>, [P]} ->
                    case throng_muc_mam:is_iq(P) of
                        true -> {ok, S, throng_muc_mam:iq(From, To, El, P, S)};
                        false -> throng_muc_admin:iq(From, To, El, Now, S)
                    end;
                _ -> throng_muc_admin:iq(From, To, El, Now, S)
            end;
        other -> {ok, S, []}
    end.

with_ok({S, Out}) -> {ok, S, Out}.

%% What is written of a persistent room right away when it changes
%% (history is written when the room empties).
durable(#muc{config = C, affs = A, subject = Sub}) -> {C, A, Sub}.

after_stanza(destroyed, #st{room = S} = St) ->
    [store(fun() -> throng_muc_store:delete(S#muc.jid) end) || St#st.saved =/= undefined],
    ok = throng_muc_mam:delete(S#muc.jid),
    close(St);
after_stanza(ok, #st{room = S, saved = Saved} = St) ->
    Persistent = map_get(persistent, S#muc.config) andalso not S#muc.locked,
    Empty = map_size(S#muc.occs) =:= 0,
    Now = {durable(S), S#muc.history},
    St1 = case Saved of
              %% Configuration, affiliations or subject changed: now; only
              %% the history: when the room empties.
              {Durable, _} when Persistent, Durable =/= element(1, Now) -> save(St);
              {_, H} when Persistent, Empty, H =/= S#muc.history -> save(St);
              undefined when Persistent -> save(St);
              _ when Persistent -> St;
              undefined -> St;
              _ ->
                  store(fun() -> throng_muc_store:delete(S#muc.jid) end),
                  St#st{saved = undefined}
          end,
    St2 = list(St1),
    case Empty of
        %% A temporary room ends with its last occupant, and its archive
        %% with it.
        true when not Persistent ->
            [ok = throng_muc_mam:delete(S#muc.jid) || throng_muc_mam:enabled(S)],
            close(St2);
        true -> close(St2);
        false -> {noreply, St2}
    end.

save(#st{room = S} = St) ->
    store(fun() -> throng_muc_store:save(S) end),
    St#st{saved = {durable(S), S#muc.history}}.

store(Fun) ->
    try Fun()
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => muc_room_store_failed, reason => Why})
    end.

%% The service's disco#items lists public rooms that are not locked. The
%% table is written only when the listing changed.
list(#st{room = #muc{jid = #jid{user = Room, server = Service}, config = C, locked = Locked},
         listing = Last} = St) ->
    Listing = case map_get(public, C) andalso not Locked of
                  true -> {listed, map_get(title, C)};
                  false -> hidden
              end,
    case Listing =:= Last of
        true -> St;
        false ->
            _ = ets:update_element(?TAB, {Service, Room}, {3, Listing}),
            St#st{listing = Listing}
    end.

%% The room leaves the table first, then hands on what reached it meanwhile
%% (a new process takes it, loading the room again if it is stored).
close(#st{room = #muc{jid = #jid{user = Room, server = Service}}} = St) ->
    ets:match_delete(?TAB, {{Service, Room}, self(), '_'}),
    drain(Service),
    {stop, normal, St}.

drain(Service) ->
    receive
        {route, From, To, El} -> dispatch(Service, From, To, El), drain(Service)
    after 0 ->
            ok
    end.
