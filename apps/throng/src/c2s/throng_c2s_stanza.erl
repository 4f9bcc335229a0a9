%% @doc Stanzas of a bound session: those from the client (RFC 6120 §8,
%% RFC 6121: 'from' checks, presence, IQs to the server or the user's own
%% account, routing) and those routed to it (delivery, batching, XEP-0198
%% queueing), with the hooks extension modules see them through; and, when
%% the session ends, re-routing of everything it was given but did not
%% deliver.
-module(throng_c2s_stanza).

-include("throng.hrl").
-include("throng_c2s.hrl").

-export([stanza/2, deliver/6, routed_batch/3, send_stanza/3, csi/3, csi_release/1, csi_held/1]).

%%% Stanzas from the client (RFC 6120 §8, RFC 6121)

-spec stanza(#xmlel{}, data()) -> throng_c2s:element_result().
stanza(El, D) ->
    case top_level(El) of
        stanza -> client_stanza(El, D);
        {error, Cond, Text} -> throng_c2s_io:stream_error(Cond, Text, D)
    end.

%% What a first-level element of the session is: a jabber:client stanza,
%% or a stream error. RFC 6120 §4.8.5: elements qualified by the content
%% namespace carry no prefix, so a prefix is unsupported
%% (bad-namespace-prefix, §4.9.3.2); a message, presence or iq of another
%% namespace is not a stanza of this stream, and any other element is not
%% supported (unsupported-stanza-type, §4.9.3.22), nor is an element of
%% the stream namespace.
top_level(#xmlel{name = Name} = El)
  when Name =:= <<"message">>; Name =:= <<"presence">>; Name =:= <<"iq">> ->
    case throng_xml:ns(El) of
        <<>> -> stanza;
        ?NS_CLIENT -> stanza;
        _ -> {error, 'unsupported-stanza-type', <<"not a jabber:client stanza">>}
    end;
top_level(#xmlel{name = <<"stream:", _/binary>>}) ->
    %% The stream prefix of the header: no such stream element is sent by a
    %% client.
    {error, 'unsupported-stanza-type', <<"unexpected stream element">>};
top_level(#xmlel{name = Name}) ->
    case binary:match(Name, <<":">>) of
        nomatch -> {error, 'unsupported-stanza-type', <<"not a jabber:client stanza">>};
        _ -> {error, 'bad-namespace-prefix', <<"stanzas of jabber:client carry no prefix">>}
    end.

client_stanza(#xmlel{name = Name} = El, D) ->
    throng_metrics:stanza_in(Name),
    D1 = throng_c2s_sm:handled(D),
    #d{jid = JID} = D1,
    case check_from(El, JID) of
        false ->
            throng_c2s_io:stream_error('invalid-from', <<"from does not match the session">>, D1);
        true ->
            case throng_xml:attr(<<"to">>, El) of
                undefined -> from_session(El, JID, throng_jid:bare(JID), true, D1);
                ToBin ->
                    case throng_jid:parse(ToBin) of
                        {ok, To} -> from_session(El, JID, To, false, D1);
                        error -> reply(throng_stanza:error_reply(El, 'jid-malformed'), D1)
                    end
            end
    end.

%% Modules see every stanza from the client first (a stanza with no 'to' is
%% addressed to the user's bare JID), and may consume or change it.
from_session(#xmlel{name = <<"message">>} = El0, JID, To, NoTo, D) ->
    %% The carbons, the archive and the route ask about the same users.
    throng_sm:memo(fun() -> hooks_from_session(El0, JID, To, NoTo, D) end);
from_session(El0, JID, To, NoTo, D) ->
    hooks_from_session(El0, JID, To, NoTo, D).

hooks_from_session(El0, JID, To, NoTo, D) ->
    case throng_hooks:run(stanza_from_session, D#d.server, El0, #{from => JID, to => To}) of
        {stop, _} -> {next, session, D};
        {ok, El} when NoTo -> no_to(El, JID, D);
        {ok, El} -> to(El, JID, To, D)
    end.

check_from(El, #jid{} = JID) ->
    case throng_xml:attr(<<"from">>, El) of
        undefined -> true;
        From ->
            case throng_jid:parse(From) of
                {ok, JID} -> true;
                {ok, #jid{resource = <<>>} = J} -> J =:= throng_jid:bare(JID);
                _ -> false
            end
    end.

no_to(#xmlel{name = <<"presence">>} = El, JID, D) ->
    presence_broadcast(El, JID, D);
no_to(#xmlel{name = <<"iq">>} = El, JID, D) ->
    local_iq(El, JID, throng_jid:bare(JID), D);
no_to(El, JID, D) ->
    to(El, JID, throng_jid:bare(JID), D).

to(#xmlel{name = <<"iq">>} = El, #jid{user = U, server = S} = JID,
   #jid{server = S, resource = <<>>} = To, D)
  when To#jid.user =:= <<>>; To#jid.user =:= U ->
    local_iq(El, JID, To, D);
to(#xmlel{name = <<"presence">>} = El, JID, To, D) ->
    presence_to(El, JID, To, D);
to(El, JID, To, D) ->
    throng_router:route(JID, To, strip(El)),
    {next, session, D}.

strip(El) -> throng_stanza:strip_from_to(El).

%% IQs to the server or to the user's own account.
local_iq(El, JID, To, D) ->
    case throng_xml:subel(El, <<"query">>, ?NS_ROSTER) of
        #xmlel{} ->
            IQ = set_from_to(El, JID, To),
            {Reply, Requested} =
                try throng_roster:process_iq(JID, IQ)
                catch
                    %% A write that did not reach the disk is not a success.
                    error:{storage_failed, Why} ->
                        logger:error(#{what => roster_write_failed,
                                       jid => throng_jid:to_binary(JID), reason => Why}),
                        {throng_stanza:error_reply(IQ, 'internal-server-error'), unchanged}
                end,
            D1 = D#d{roster = D#d.roster orelse Requested =:= requested},
            %% A roster set pushes to every interested resource; this one gets
            %% its push before the result, as in RFC 6121 §2.3.2.
            reply(Reply, own_pushes(D1));
        undefined ->
            case throng_iq:process(JID, To, set_from_to(El, JID, To)) of
                noreply -> {next, session, D};
                Reply -> reply(Reply, D)
            end
    end.

own_pushes(D) ->
    receive
        {roster_push, Item, Ver} when D#d.roster ->
            own_pushes(send_stanza(session, throng_roster:push_el(D#d.server, Item, Ver), D))
    after 0 ->
            D
    end.

set_from_to(El, From, To) ->
    throng_stanza:set_from_to(El, throng_jid:to_binary(From), throng_jid:to_binary(To)).

reply(El, D) ->
    {next, session, send_stanza(session, El, D)}.

%%% Presence from the client

presence_broadcast(El, JID, D) ->
    P = strip(El),
    case throng_stanza:type(El) of
        <<>> ->
            Prio = throng_presence:priority(El),
            throng_sm:set_presence(JID, Prio, throng_stanza:copy(P)),
            case D#d.prio of
                undefined -> initial_presence(P, JID, D#d{prio = Prio});
                _ -> throng_presence:update(JID, P), {next, session, D#d{prio = Prio}}
            end;
        <<"unavailable">> ->
            throng_sm:set_presence(JID, undefined, undefined),
            case D#d.prio of
                undefined -> ok;
                _ -> throng_presence:unavailable(JID, P, D#d.directed)
            end,
            {next, session, D#d{prio = undefined, directed = throng_directed:new()}};
        <<"error">> ->
            {next, session, D};
        _ ->
            reply(throng_stanza:error_reply(El, 'bad-request'), D)
    end.

%% Initial presence: broadcast it, receive the contacts' presence, pending
%% subscription requests, then offline messages if the priority allows.
initial_presence(P, JID, D) ->
    Incoming = throng_presence:initial(JID, P),
    D1 = lists:foldl(fun({From, To, El}, Acc) -> send_routed(session, none, From, To, El, Acc) end,
                     D, Incoming),
    %% Modules add what the new resource gets after the presence of its
    %% contacts (stored offline messages).
    {_, Items} = throng_hooks:run(initial_presence, JID#jid.server, [],
                                  #{jid => JID, priority => D1#d.prio}),
    D2 = lists:foldl(fun(Item, Acc) ->
                             {Kind, Bytes} = throng_c2s_items:bytes(Item, Acc#d.server),
                             output(Kind, Item, Bytes, Acc)
                     end, D1, Items),
    {next, session, D2}.

presence_to(El, JID, To, D) ->
    case throng_stanza:type(El) of
        T when T =:= <<"subscribe">>; T =:= <<"subscribed">>;
               T =:= <<"unsubscribe">>; T =:= <<"unsubscribed">> ->
            try throng_roster:outbound(JID, To, El)
            catch
                error:{storage_failed, Why} ->
                    %% The subscription change was not kept: the client is told.
                    logger:error(#{what => subscription_write_failed,
                                   jid => throng_jid:to_binary(JID), reason => Why}),
                    throng_router:bounce(JID, To, El, 'internal-server-error')
            end,
            {next, session, D};
        <<>> ->
            directed_available(El, JID, To, D);
        <<"unavailable">> ->
            throng_router:route(JID, To, strip(El)),
            {next, session, D#d{directed = throng_directed:remove(To, D#d.directed)}};
        <<"probe">> ->
            {next, session, D};
        <<"error">> ->
            throng_router:route(JID, To, strip(El)),
            {next, session, D};
        _ ->
            reply(throng_stanza:error_reply(El, 'bad-request'), D)
    end.

%% Directed available presence (RFC 6121 §4.6): the target is remembered,
%% to be sent unavailable presence when this session becomes unavailable.
%% Past limits.directed_presence_max targets, presence to a new one is not
%% sent (it could not be withdrawn) and the client gets policy-violation.
directed_available(El, JID, To, D) ->
    case throng_directed:add(To, D#d.directed, throng_config:get([limits, directed_presence_max])) of
        {ok, Directed} ->
            throng_router:route(JID, To, strip(El)),
            {next, session, D#d{directed = Directed}};
        full ->
            logger:info(#{what => directed_presence_limit, jid => throng_jid:to_binary(JID)}),
            reply(throng_stanza:error_reply(El, 'policy-violation',
                                            <<"too many directed presence targets">>), D)
    end.

%%% Stanzas routed to this session

%% Key: the stanza is also kept durably in flight under this storage key
%% (none: it is not).
-spec deliver(atom(), none | throng_storage:inflight_key(), #jid{}, #jid{}, #xmlel{}, data()) -> data().
deliver(State, Key, From, To, El, D) ->
    send_routed(State, Key, From, To, El, D).

send_routed(State, Key, From, To, El0, #d{jid = JID} = D) ->
    %% Modules see every stanza before it is written, and may change it or
    %% keep it from the client.
    case throng_hooks:run(stanza_to_session, D#d.server, El0,
                          #{from => From, to => To, jid => JID}) of
        {stop, _} ->
            throng_c2s_items:acked([kept(Key, none)]),
            D;
        {ok, El} when State =:= resumable ->
            queue_only(kept(Key, {From, To, El}), D);
        {ok, El} when D#d.csi =:= active ->
            write_routed(Key, From, To, El, D);
        {ok, El} ->
            %% XEP-0352: the client is inactive. A stanza kept durably in
            %% flight is a message that must not wait.
            case Key =:= none andalso not throng_c2s_csi:urgent(El) of
                true -> csi_hold(From, To, El, D);
                false -> write_routed(Key, From, To, El, csi_flush(D))
            end
    end.

write_routed(Key, From, To, El, D) ->
    Out = throng_stanza:set_from_to(El, throng_jid:to_binary(From), throng_jid:to_binary(To)),
    output(throng_stanza:kind(El), kept(Key, {From, To, El}), throng_xml:to_iolist(Out), D).

%%% XEP-0352 client state indication (throng_c2s_csi)

%% @doc The client says it is inactive or active (a top-level element of
%% urn:xmpp:csi:0). Active writes out what was held. Without the csi
%% module the element is not part of this stream.
-spec csi(binary(), #xmlel{}, data()) -> throng_c2s:element_result().
csi(Name, El, #d{server = Server} = D) ->
    case {throng_ext:is_enabled(Server, throng_mod_csi), Name} of
        {true, <<"inactive">>} when D#d.csi =:= active -> {next, session, D#d{csi = []}};
        {true, <<"inactive">>} -> {next, session, D};
        {true, <<"active">>} -> {next, session, (csi_flush(D))#d{csi = active}};
        _ -> stanza(El, D)
    end.

csi_hold(From, To, El, #d{csi = Q, server = Server} = D) ->
    throng_metrics:incr(csi_held),
    Max = throng_ext:opt(Server, throng_mod_csi, queue_max),
    case throng_c2s_csi:hold(From, To, El, {Q, Max}) of
        {ok, Q1} ->
            %% A presence replaced by a newer one from the same JID.
            Replaced = throng_c2s_csi:size(Q) + 1 - throng_c2s_csi:size(Q1),
            Replaced > 0 andalso throng_metrics:add(csi_dropped, Replaced),
            D#d{csi = Q1};
        {full, Q1} ->
            csi_flush(D#d{csi = Q1})
    end.

%% Writes what was held, oldest first, in one write; stays inactive.
csi_flush(#d{csi = active} = D) ->
    D;
csi_flush(#d{csi = []} = D) ->
    D;
csi_flush(#d{csi = Q} = D) ->
    throng_metrics:incr(csi_flushes),
    lists:foldl(fun({From, To, El}, Acc) -> write_routed(none, From, To, El, Acc) end,
                D#d{csi = []}, throng_c2s_csi:items(Q)).

%% @doc The connection dropped or moved (XEP-0198): what was held joins the
%% queue a resumption re-sends, and the next stream starts active.
-spec csi_release(data()) -> data().
csi_release(#d{csi = active} = D) ->
    D;
csi_release(#d{csi = Q} = D) ->
    lists:foldl(fun(Item, Acc) -> queue_only(Item, Acc) end,
                D#d{csi = active}, throng_c2s_csi:items(Q)).

%% @doc What is held for an inactive client (routed again when the session
%% ends).
-spec csi_held(data()) -> [throng_session:item()].
csi_held(#d{csi = active}) -> [];
csi_held(#d{csi = Q}) -> throng_c2s_csi:items(Q).

kept(none, Item) -> Item;
kept(Key, Item) -> {kept, Key, Item}.

%% Routed stanzas already in the mailbox go out in the same write (in the
%% order they came, kept or not).
-spec routed_batch(atom(), data(), non_neg_integer()) -> data().
routed_batch(_State, D, 0) ->
    D;
routed_batch(State, D, N) ->
    receive
        {route, From, To, El} -> routed_batch(State, deliver(State, none, From, To, El, D), N - 1);
        {route_kept, Key, From, To, El} -> routed_batch(State, deliver(State, Key, From, To, El, D), N - 1)
    after 0 ->
            D
    end.

-spec send_stanza(atom(), #xmlel{}, data()) -> data().
send_stanza(State, El, D) ->
    case State of
        resumable -> D;
        _ -> output(throng_stanza:kind(El), none, throng_xml:to_iolist(El), D)
    end.

%% A stanza to the client: counted, queued for XEP-0198 if enabled. Without
%% XEP-0198 nothing will be acknowledged: a kept copy is forgotten once the
%% stanza is written.
output(Kind, Item, Bytes, #d{sm = undefined} = D) ->
    throng_metrics:stanza_out(Kind, Bytes),
    throng_c2s_items:acked([Item]),
    throng_c2s_io:emit(Bytes, D);
output(Kind, Item, Bytes, #d{sm = SM} = D) ->
    throng_metrics:stanza_out(Kind, Bytes),
    D1 = throng_c2s_io:emit(Bytes, D#d{sm = throng_stream_mgmt:sent(Item, SM)}),
    throng_c2s_sm:maybe_request(D1).

%% A detached session queues what comes, durably for a message that was
%% not kept yet (routed before the session was marked detached).
queue_only(Item0, #d{sm = SM, jid = JID} = D) ->
    [Item] = case Item0 of
                 {kept, _, _} -> [Item0];
                 _ -> throng_c2s_items:keep(JID, [Item0], self())
             end,
    D1 = D#d{sm = throng_stream_mgmt:sent(Item, SM)},
    case throng_stream_mgmt:pending(D1#d.sm) > throng_config:get([stream_management, max_unacked]) of
        true -> self() ! resume_overflow, D1;
        false -> D1
    end.
