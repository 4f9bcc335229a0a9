%% @doc XEP-0352 Client State Indication, the session's side: what an
%% inactive client (a phone with its screen off) can do without until it
%% becomes active again, and the queue that holds it. Pure functions; the
%% session (throng_c2s_stanza) keeps the queue in its state.
%%
%% Held back while the client is inactive (not urgent):
%% <ul>
%% <li>presence updates (available, unavailable) — only the latest from
%% each full JID is kept: a contact going away and back costs nothing;</li>
%% <li>messages with nothing a user would be notified of: chat states,
%% receipts, chat markers, bodyless messages.</li>
%% </ul>
%% Everything else is urgent and goes out at once, after what is held (so
%% the order between a contact's stanzas is kept): IQs, messages with a
%% body, subject or encrypted payload (or a carbon or forward of one),
%% subscription requests and answers, errors. The queue is also written
%% out when it reaches its bound, when the client says it is active, and
%% becomes part of the XEP-0198 queue if the connection drops.
-module(throng_c2s_csi).

-include("throng.hrl").

-export([urgent/1, hold/4, items/1, size/1]).

-define(NS_CARBONS, <<"urn:xmpp:carbons:2">>).
-define(NS_FORWARD, <<"urn:xmpp:forward:0">>).
%% Payloads that make a bodyless message urgent: encrypted messages
%% (OMEMO, OpenPGP for XMPP), call invitations.
-define(URGENT_PAYLOADS, [<<"eu.siacs.conversations.axolotl">>, <<"urn:xmpp:omemo:2">>,
                          <<"urn:xmpp:openpgp:0">>, <<"jabber:x:encrypted">>,
                          <<"urn:xmpp:jingle-message:0">>]).

%% A held stanza: {From, To, Element}, newest first.
-type queue() :: [{#jid{}, #jid{}, #xmlel{}}].
-export_type([queue/0]).

%% @doc Whether a stanza for an inactive client must go out now.
-spec urgent(#xmlel{}) -> boolean().
urgent(#xmlel{name = <<"presence">>} = El) ->
    not lists:member(throng_stanza:type(El), [<<>>, <<"unavailable">>]);
urgent(#xmlel{name = <<"message">>} = El) ->
    throng_stanza:is_error(El) orelse important(El);
urgent(_) ->
    true.

important(El) ->
    throng_xml:subel(El, <<"body">>) =/= undefined
        orelse throng_xml:subel(El, <<"subject">>) =/= undefined
        orelse lists:any(fun(#xmlel{} = C) -> lists:member(throng_xml:ns(C), ?URGENT_PAYLOADS)
                                                  orelse forwards_important(C);
                            (_) -> false
                         end, El#xmlel.children).

%% A carbon (XEP-0280) or forward (XEP-0297) is as urgent as what it carries.
forwards_important(#xmlel{name = Name} = C) when Name =:= <<"received">>; Name =:= <<"sent">> ->
    throng_xml:ns(C) =:= ?NS_CARBONS andalso
        case throng_xml:subel(C, <<"forwarded">>, ?NS_FORWARD) of
            undefined -> false;
            F -> forwards_important(F)
        end;
forwards_important(#xmlel{name = <<"forwarded">>} = F) ->
    throng_xml:ns(F) =:= ?NS_FORWARD andalso
        case throng_xml:subel(F, <<"message">>) of
            undefined -> false;
            M -> important(M)
        end;
forwards_important(_) ->
    false.

%% @doc Holds a stanza that is not urgent. A presence replaces the one held
%% from the same full JID. `full' when the queue would pass Max: the
%% caller writes everything out (the new stanza included, last).
-spec hold(#jid{}, #jid{}, #xmlel{}, {queue(), non_neg_integer()}) ->
    {ok, queue()} | {full, queue()}.
hold(From, To, #xmlel{name = <<"presence">>} = El, {Q, Max}) ->
    Q1 = [{From, To, El} | [H || {F, _, #xmlel{name = N}} = H <- Q,
                                 not (F =:= From andalso N =:= <<"presence">>)]],
    bound(Q1, Max);
hold(From, To, El, {Q, Max}) ->
    bound([{From, To, El} | Q], Max).

bound(Q, Max) when length(Q) > Max -> {full, Q};
bound(Q, _Max) -> {ok, Q}.

%% @doc The held stanzas, oldest first.
-spec items(queue()) -> [{#jid{}, #jid{}, #xmlel{}}].
items(Q) ->
    lists:reverse(Q).

-spec size(queue()) -> non_neg_integer().
size(Q) ->
    length(Q).
