%% @doc Messages in flight to a session, kept durably until its client
%% acknowledges them (XEP-0198), so that a message the server accepted
%% survives `kill -9' of the node (docs/architecture.md, "What survives
%% kill -9").
%%
%% A message is kept when it is routed to a detached session (its
%% connection dropped, the session waits for a resumption; see
%% {@link throng_sm:is_detached/2}): the router ({@link
%% throng_router:deliver/4}) keeps it before the process routing it goes on
%% (the sender's session, or with `cluster.route_at_home' a hand-off
%% process at the recipient's home, which the sender's node keeps the
%% stanza for until then), so the sender's XEP-0198 acknowledgement covers
%% a durable copy. For a session on another node, that node writes it
%% ({@link throng_router:keep_and_deliver/4}, one call). A session that becomes
%% detached keeps the unacknowledged messages of its queue the same way.
%% Stored offline messages are moved into flight when a session takes them
%% ({@link throng_storage:inflight_claim/3}). The session forgets a kept
%% message when the client acknowledges it and, when the session ends
%% without that, routes it again or returns it to offline storage; at
%% start-up every kept message of the node goes back to offline storage.
-module(throng_inflight).

-include("throng.hrl").

-export([keepable/1, keep/3, forget/1, return/1, stored/3]).

%% @doc Whether a stanza is a message that offline storage would keep:
%% chat and normal messages (RFC 6121 §8.5.2.1.1), not headlines, group
%% chat or errors.
-spec keepable(#xmlel{}) -> boolean().
keepable(#xmlel{name = <<"message">>} = El) ->
    not lists:member(throng_stanza:type(El), [<<"headline">>, <<"groupchat">>, <<"error">>]);
keepable(_) ->
    false.

%% @doc Keeps routed messages for User's session Owner, durably when it
%% returns; one key per message, in order. Raises storage_failed.
-spec keep(#jid{}, pid(), [{#jid{}, #jid{}, #xmlel{}}]) -> [throng_storage:inflight_key()].
keep(_User, _Owner, []) ->
    [];
keep(#jid{user = U, server = S}, Owner, Stanzas) ->
    Msgs = [stored(From, To, El) || {From, To, El} <- Stanzas],
    throng_storage:inflight_put(U, S, Owner, Msgs).

%% @doc A routed message as storage keeps it: the stanza serialized with its
%% addresses (the bytes that will be sent), the sender, the time now.
-spec stored(#jid{}, #jid{}, #xmlel{}) -> #offline_msg{}.
stored(From, To, El) ->
    FromBin = throng_jid:to_binary(From),
    Packet = throng_stanza:set_from_to(El, FromBin, throng_jid:to_binary(To)),
    #offline_msg{timestamp = os:system_time(microsecond), from = FromBin,
                 packet = throng_xml:to_binary(Packet)}.

%% @doc Forgets kept messages (acknowledged, or delivered again elsewhere).
%% A failure is logged: the message stays kept and comes back from offline
%% storage after a restart (delivered twice, never lost).
-spec forget([throng_storage:inflight_key()]) -> ok.
forget([]) ->
    ok;
forget(Keys) ->
    safely(inflight_forget_failed, fun() -> throng_storage:inflight_delete(Keys) end, Keys).

%% @doc Returns kept messages to offline storage.
-spec return([throng_storage:inflight_key()]) -> ok.
return([]) ->
    ok;
return(Keys) ->
    safely(inflight_return_failed, fun() -> throng_storage:inflight_return(Keys) end, Keys).

safely(What, Fun, Keys) ->
    try Fun()
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => What, messages => length(Keys), reason => Why}),
            ok
    end.
