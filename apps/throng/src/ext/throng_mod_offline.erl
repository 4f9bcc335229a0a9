%% @doc Offline messages (RFC 6121 §8.5.2.1.1, XEP-0160): a message for a
%% user with no available resource is stored durably and delivered, with a
%% XEP-0203 delay stamp, when the user next sends initial presence with a
%% non-negative priority. Without this module such a message is bounced
%% with service-unavailable.
%%
%% Messages are stored serialized (the bytes that will be sent) to keep
%% Mnesia's in-memory copy small; the delay stamp is spliced in at delivery.
%% What a user may have stored is bounded in messages and in bytes, and the
%% node's store as a whole in bytes (the embedded store keeps every message
%% in memory as well as on disk).
%%
%% At delivery the messages are not deleted but moved into flight
%% ({@link throng_storage:inflight_claim/3}) in one transaction, and travel
%% in the session's XEP-0198 queue as kept items ({@link
%% throng_session:item()}): one is forgotten when the client acknowledges
%% it, goes back to storage with its original timestamp when the session
%% ends without that, and is back in storage after a restart if the node
%% was killed meanwhile.
-module(throng_mod_offline).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1, item_bytes/2]).
-export([offline_message/2, initial_presence/2]).
-export([count/1]).
%% Hooks named in hooks/0, run through throng_hooks.
-ignore_xref([{offline_message, 2}, {initial_presence, 2}]).
%% API used by tests and operators: how many messages a user has stored.
-ignore_xref([{count, 1}]).

-spec options() -> throng_config_spec:spec().
options() ->
    #{max_messages => #{type => {int, 0, 10000000}, default => 1000,
                        doc => "Offline messages kept per user. A message beyond this is "
                               "refused with a service-unavailable error to its sender."},
      max_bytes => #{type => {int, 0, 1073741824}, default => 4194304,
                     doc => "Bytes of offline messages (the stored stanzas) kept per user. "
                            "A message that would go beyond is refused like one beyond "
                            "max_messages."},
      max_node_bytes => #{type => {int, 0, 1099511627776}, default => 1073741824,
                          doc => "Bytes of offline messages the node keeps for all users "
                                 "together (the embedded store holds them in memory too). "
                                 "Beyond it every new offline message is refused; checked "
                                 "before each store, so concurrent stores may pass it by a "
                                 "few messages."}}.

-spec iq_handlers() -> [].
iq_handlers() ->
    [].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{offline_message, 50, offline_message},
     {initial_presence, 50, initial_presence}].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    [?NS_DELAY, <<"msgoffline">>].

%% @doc Hook: no resource can take a message; keep it.
-spec offline_message(bounce, #{from := #jid{}, to := #jid{}, el := #xmlel{}}) ->
    {stop, stored | full | failed}.
offline_message(_Acc, #{from := From, to := To, el := El}) ->
    try store(From, To, El) of
        ok -> {stop, stored};
        {error, full} -> {stop, full}
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => offline_store_failed, to => throng_jid:to_binary(To),
                           reason => Why}),
            {stop, failed}
    end.

%% @doc Hook: a session sent its initial presence; with a non-negative
%% priority it gets the stored messages, oldest first, moved into flight to
%% it (they stay durable until the client acknowledges them).
-spec initial_presence([throng_session:item()], #{jid := #jid{}, priority := integer()}) ->
    ok | {ok, [throng_session:item()]}.
initial_presence(Items, #{jid := #jid{user = U, server = S}, priority := Prio}) when Prio >= 0 ->
    Claimed = throng_storage:inflight_claim(U, S, self()),
    throng_metrics:add(offline_delivered, length(Claimed)),
    {ok, Items ++ [{kept, Key, {ext, ?MODULE, M}} || {Key, M} <- Claimed]};
initial_presence(_Items, _Args) ->
    ok.

%% @doc The bytes of a stored message delivered to a session.
-spec item_bytes(#offline_msg{}, binary()) -> {message, binary()}.
item_bytes(Msg, Host) ->
    {message, stamp(Msg, Host)}.

%% @doc Stores a message for the bare JID To. `{error, full}' when it would
%% take the user past max_messages or max_bytes, or the node past
%% max_node_bytes (the caller bounces it).
-spec store(#jid{}, #jid{}, #xmlel{}) -> ok | {error, full}.
store(From, #jid{user = U, server = S} = To, El) ->
    Msg = #offline_msg{packet = Packet} = throng_inflight:stored(From, To, El),
    Opt = fun(Key) -> throng_ext:opt(S, ?MODULE, Key) end,
    Result = case throng_storage:offline_bytes() + byte_size(Packet) > Opt(max_node_bytes) of
                 true -> {error, full};
                 false -> throng_storage:offline_store(U, S, Msg, {Opt(max_messages), Opt(max_bytes)})
             end,
    case Result of
        ok ->
            throng_metrics:incr(offline_stored),
            ok;
        {error, full} = Full ->
            throng_metrics:incr(offline_rejected),
            logger:info(#{what => offline_store_full, user => U, server => S,
                          bytes => byte_size(Packet)}),
            Full
    end.

%% @doc The bytes to send for a stored message: the stanza with a XEP-0203
%% delay stamp from the server.
-spec stamp(#offline_msg{}, binary()) -> binary().
stamp(#offline_msg{timestamp = T, packet = P}, Server) ->
    Delay = ["<delay xmlns='", ?NS_DELAY, "' from='", Server, "' stamp='", throng_stanza:stamp(T),
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
