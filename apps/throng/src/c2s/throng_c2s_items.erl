%% @doc What a session does with the items of its XEP-0198 queue
%% ({@link throng_session:item()}): their bytes when they are sent again,
%% what happens when the client acknowledges them, making them durable when
%% the session is detached, and routing them again when the session ends
%% before they were acknowledged — nothing the server accepted is dropped.
-module(throng_c2s_items).

-include("throng.hrl").

-export([bytes/2, acked/1, keep/3, reroute/2, drain_mailbox/1]).

%% How long an ending session in a cluster waits for late messages: until
%% none came for LINGER_MS, at most LINGER_MAX_MS.
-define(LINGER_MS, 200).
-define(LINGER_MAX_MS, 2000).

%% @doc The bytes of an item, to send (again) to the client.
-spec bytes(throng_session:item(), binary()) -> {atom(), iodata()}.
bytes({kept, _Key, Item}, Server) -> bytes(Item, Server);
bytes({ext, Mod, Data}, Server) -> Mod:item_bytes(Data, Server);
bytes({From, To, El}, _Server) ->
    {throng_stanza:kind(El),
     throng_xml:to_iolist(throng_stanza:set_from_to(El, throng_jid:to_binary(From),
                                                    throng_jid:to_binary(To)))};
bytes(none, _Server) -> {other, []}.

%% @doc The client has the items (it acknowledged them, or the session
%% wrote them without XEP-0198): their durable copies are forgotten.
-spec acked([throng_session:item()]) -> ok.
acked(Items) ->
    throng_inflight:forget([Key || {kept, Key, _} <- Items]).

%% @doc Makes the routed messages among Items durable for the session of
%% JID (this process), in one write: the session is detached. Items come
%% back in the same order. When the write fails they stay as they were (in
%% memory only) and the failure is logged.
-spec keep(#jid{}, [throng_session:item()], pid()) -> [throng_session:item()].
keep(JID, Items, Owner) ->
    ToKeep = [I || {_, _, El} = I <- Items, is_record(El, xmlel), throng_inflight:keepable(El)],
    try throng_inflight:keep(JID, Owner, ToKeep) of
        Keys -> wrap(Items, lists:zip(ToKeep, Keys))
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => inflight_keep_failed, jid => throng_jid:to_binary(JID),
                           messages => length(ToKeep), reason => Why}),
            Items
    end.

wrap(Items, []) -> Items;
wrap([I | Items], [{I, Key} | Kept]) -> [{kept, Key, I} | wrap(Items, Kept)];
wrap([I | Items], Kept) -> [I | wrap(Items, Kept)].

%% @doc The session ends with these items unacknowledged: each goes where
%% it would have gone without this session (another resource, offline
%% storage, an error to its sender). Kept copies are returned to offline
%% storage or, once routed again, forgotten.
%% The writes (offline storage) are made durable together, with one sync.
%% Nothing to re-route costs nothing: no transaction, no fsync (most
%% sessions end this way).
-spec reroute([throng_session:item()], #jid{}) -> ok.
reroute([], _JID) ->
    ok;
reroute(Items, JID) ->
    try throng_storage:batch(fun() -> reroute_all(Items, JID) end)
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => reroute_sync_failed, jid => throng_jid:to_binary(JID),
                           items => length(Items), reason => Why})
    end.

reroute_all(Items, JID) ->
    lists:foreach(fun(Item) -> reroute_one(Item, JID) end, Items),
    throng_inflight:return([Key || {kept, Key, {ext, _, _}} <- Items]),
    throng_inflight:forget([Key || {kept, Key, {_, _, _}} <- Items]).

reroute_one(Item, JID) ->
    %% One failure (storage) must not drop the items after it.
    try route_again(Item, JID)
    catch
        Class:Reason ->
            logger:error(#{what => reroute_failed, jid => throng_jid:to_binary(JID),
                           class => Class, reason => Reason}),
            ok
    end.

route_again(none, _JID) -> ok;
route_again({kept, _Key, {ext, _, _}}, _JID) -> ok;   %% returned to storage as it is
route_again({kept, _Key, Item}, JID) -> route_again(Item, JID);
route_again({ext, Mod, Data}, JID) ->
    case erlang:function_exported(Mod, item_reroute, 2) of
        true -> Mod:item_reroute(Data, JID);
        false -> ok
    end;
route_again({From, To, #xmlel{name = <<"message">>} = El}, _JID) -> throng_router:route(From, To, El);
route_again({From, To, #xmlel{name = <<"iq">>} = El}, _JID) ->
    case throng_stanza:type(El) of
        T when T =:= <<"get">>; T =:= <<"set">> ->
            throng_router:bounce(From, To, El, 'service-unavailable');
        _ -> ok
    end;
route_again({_From, _To, _Presence}, _JID) -> ok.

%% @doc Stanzas still in the mailbox of an ending session are routed again.
%% In a cluster, a sender on another node may have looked the session up
%% just before it left the directory, and its message is still on the way:
%% the session waits for such late messages ({@value LINGER_MS} ms without
%% one) before it goes, and routes them again too.
-spec drain_mailbox(#jid{}) -> ok.
drain_mailbox(JID) ->
    reroute(mailbox([], 0), JID),
    case throng_members:clustered() of
        true -> linger(JID, erlang:monotonic_time(millisecond) + ?LINGER_MAX_MS);
        false -> ok
    end.

linger(JID, Deadline) ->
    case mailbox([], ?LINGER_MS) of
        [] -> ok;
        Late ->
            reroute(Late, JID),
            case erlang:monotonic_time(millisecond) < Deadline of
                true -> linger(JID, Deadline);
                false -> ok
            end
    end.

%% The routed stanzas in the mailbox; the first may take up to Wait ms.
mailbox(Acc, Wait) ->
    receive
        {route, From, To, El} -> mailbox([{From, To, El} | Acc], 0);
        {route_kept, Key, From, To, El} -> mailbox([{kept, Key, {From, To, El}} | Acc], 0)
    after Wait -> lists:reverse(Acc)
    end.
