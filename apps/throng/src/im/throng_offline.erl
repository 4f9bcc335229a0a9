%% @doc Offline messages (RFC 6121 §8.5.2.1.1, XEP-0160): a message for a
%% user with no available resource is stored durably and delivered, with a
%% XEP-0203 delay stamp, when the user next sends initial presence.
%%
%% Messages are stored serialized (the bytes that will be sent) to keep
%% Mnesia's in-memory copy small; the delay stamp is spliced in at delivery.
-module(throng_offline).

-include("throng.hrl").

-export([store/3, pop/1, restore/2, stamp/2, count/1]).

%% @doc Stores a message for the bare JID To. `{error, full}' when the user
%% already has offline.max_messages stored (the caller bounces it).
-spec store(#jid{}, #jid{}, #xmlel{}) -> ok | {error, full}.
store(From, #jid{user = U, server = S} = To, El) ->
    FromBin = throng_jid:to_binary(From),
    Packet = throng_xml:to_binary(throng_stanza:set_from_to(El, FromBin, throng_jid:to_binary(To))),
    Msg = #offline_msg{timestamp = os:system_time(microsecond), from = FromBin, packet = Packet},
    case throng_storage:offline_store(U, S, Msg, throng_config:get([offline, max_messages])) of
        ok ->
            throng_metrics:incr(offline_stored),
            ok;
        {error, full} = Full ->
            throng_metrics:incr(offline_rejected),
            logger:info(#{what => offline_store_full, user => U, server => S}),
            Full
    end.

%% @doc Removes and returns a user's stored messages, oldest first.
-spec pop(#jid{}) -> [#offline_msg{}].
pop(#jid{user = U, server = S}) ->
    Msgs = throng_storage:offline_pop(U, S),
    throng_metrics:add(offline_delivered, length(Msgs)),
    Msgs.

%% @doc Puts back a message that was popped for the user but never
%% acknowledged by the client (its session ended). It is not subject to the
%% per-user limit, since it had already been accepted.
-spec restore(#jid{}, #offline_msg{}) -> ok.
restore(#jid{user = U, server = S}, Msg) ->
    ok = throng_storage:offline_store(U, S, Msg, 16#FFFFFFFF),
    throng_metrics:incr(offline_stored).

%% @doc The bytes to send for a stored message: the stanza with a XEP-0203
%% delay stamp from the server.
-spec stamp(#offline_msg{}, binary()) -> binary().
stamp(#offline_msg{timestamp = T, packet = P}, Server) ->
    Stamp = calendar:system_time_to_rfc3339(T, [{unit, microsecond}, {offset, "Z"}]),
    Delay = ["<delay xmlns='", ?NS_DELAY, "' from='", Server, "' stamp='", Stamp,
             "'>Offline storage</delay>"],
    Size = byte_size(P),
    case P of
        <<Head:(Size - 10)/binary, "</message>">> ->
            iolist_to_binary([Head, Delay, "</message>"]);
        <<Head:(Size - 2)/binary, "/>">> ->
            iolist_to_binary([Head, ">", Delay, "</message>"])
    end.

%% @doc How many messages a user has stored.
-spec count(#jid{}) -> non_neg_integer().
count(#jid{user = U, server = S}) ->
    throng_storage:offline_count(U, S).
