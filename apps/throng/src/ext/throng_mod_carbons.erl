%% @doc XEP-0280 Message Carbons: every client of a user sees the whole
%% conversation, whichever resource sent or received each message.
%%
%% A resource enables carbons with an IQ (`urn:xmpp:carbons:2'); that sets
%% a flag of its session ({@link throng_sm:set_flag/2}: one ETS row only
%% for a session that enabled it, none for the others). Then
%% <ul>
%% <li>a message to the user that the router handed to some of its
%% sessions (hook `message_delivered') is copied, wrapped in
%% `&lt;received/&gt;', to each other resource with carbons enabled;</li>
%% <li>a message one resource sends (hook `stanza_from_session') is copied,
%% wrapped in `&lt;sent/&gt;', to the user's other resources with carbons
%% enabled.</li>
%% </ul>
%% Which messages are copied follows the XEP's rules (§6, "urn:xmpp:carbons:rules:0"):
%% `chat'; `normal' with a body; any message with a receipt, chat state or
%% chat marker; errors; never `groupchat' or `headline', never one that
%% carries `&lt;private/&gt;' (removed before it is routed) or the XEP-0334
%% `&lt;no-copy/&gt;' hint, never a carbon itself, and no received copy of a
%% MUC private message addressed to one full JID.
%%
%% Copies go straight to the sessions (flags are checked on the session's
%% node: one asynchronous call per other node, {@link
%% throng_session:route_flagged/4}); they are not stored for a resource that
%% is offline: the archive (XEP-0313) is where a client catches up. A
%% sender's other resources come from {@link throng_sm:own_others/1}, which
%% in a cluster asks the account's home only until it learns that the
%% session is the account's only one.
-module(throng_mod_carbons).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1]).
-export([iq/2, stanza_from_session/2, message_delivered/2]).
-export([eligible/1]).
%% IQ handler and hooks named in iq_handlers/0 and hooks/0 (throng_ext).
-ignore_xref([{iq, 2}, {stanza_from_session, 2}, {message_delivered, 2}]).
%% The §6 rules, tested by throng_mod_carbons_tests.
-ignore_xref([{eligible, 1}]).

-define(NS, <<"urn:xmpp:carbons:2">>).
-define(NS_RULES, <<"urn:xmpp:carbons:rules:0">>).
-define(NS_HINTS, <<"urn:xmpp:hints">>).
-define(NS_MUC_USER, <<"http://jabber.org/protocol/muc#user">>).
%% Payloads that make a message worth copying whatever its type.
-define(IM_PAYLOADS, [<<"urn:xmpp:receipts">>, <<"http://jabber.org/protocol/chatstates">>,
                      <<"urn:xmpp:chat-markers:0">>]).

-spec options() -> throng_config_spec:spec().
options() ->
    #{}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{account, ?NS, iq}].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    %% After blocking (10) and archiving (50): a blocked message is not
    %% copied, and a copy carries the archive's stanza-id.
    [{stanza_from_session, 90, stanza_from_session},
     {message_delivered, 50, message_delivered}].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    [?NS, ?NS_RULES].

%% @doc IQ handler: enable or disable carbons for the sending resource.
-spec iq(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
iq(IQ, #{from := #jid{user = U, server = S}, to := #jid{user = U, server = S},
         payload := #xmlel{name = Name}}) ->
    case {throng_stanza:type(IQ), Name} of
        {<<"set">>, <<"enable">>} ->
            throng_sm:set_flag(carbons, true),
            throng_stanza:iq_result(IQ);
        {<<"set">>, <<"disable">>} ->
            throng_sm:set_flag(carbons, false),
            throng_stanza:iq_result(IQ);
        _ ->
            throng_stanza:error_reply(IQ, 'bad-request')
    end;
iq(IQ, _Ctx) ->
    throng_stanza:error_reply(IQ, 'forbidden').

%% @doc Hook: the user's resource sends a message: its other resources with
%% carbons enabled get a `sent' copy. A `private' element keeps it from
%% them, and is removed from what is routed.
-spec stanza_from_session(#xmlel{}, #{from := #jid{}, to := #jid{}}) -> ok | {ok, #xmlel{}}.
stanza_from_session(#xmlel{name = <<"message">>} = El, #{from := From, to := To}) ->
    case is_private(El) of
        true ->
            {ok, El#xmlel{children = [C || C <- El#xmlel.children, not is_private_el(C)]}};
        false ->
            case eligible(El) andalso not same_account(From, To) of
                true -> copy(sent, From, To, El, throng_sm:own_others(From));
                false -> ok
            end,
            ok
    end;
stanza_from_session(_El, _Args) ->
    ok.

%% @doc Hook: a message to the user went to the sessions in Pids: the other
%% resources with carbons enabled get a `received' copy.
-spec message_delivered(ok, #{from := #jid{}, to := #jid{}, el := #xmlel{}, pids := [pid()]}) -> ok.
message_delivered(ok, #{from := From, to := To, el := El, pids := Pids}) ->
    case eligible(El) andalso not muc_pm_to_resource(El, To) of
        true ->
            #jid{user = U, server = S} = To,
            copy(received, From, To, El, [E || {_, Pid, _, _} = E <- throng_sm:resources({U, S}),
                                              not lists:member(Pid, Pids)]);
        false -> ok
    end.

%% Wraps the message (with its addresses) and sends it to the resources
%% among Entries (the user's, of the account this copy is for) that have
%% carbons on.
copy(Dir, From, To, El, Entries) ->
    #jid{user = U, server = S} = case Dir of sent -> From; received -> To end,
    Targets = [{Pid, #jid{user = U, server = S, resource = R}} || {R, Pid, _, _} <- Entries],
    case Targets of
        [] -> ok;
        _ ->
            Bare = #jid{user = U, server = S},
            throng_session:route_flagged(carbons, Targets, Bare, wrap(Dir, From, To, El))
    end.

wrap(Dir, From, To, #xmlel{} = El) ->
    Orig = throng_stanza:set_from_to(El, throng_jid:to_binary(From), throng_jid:to_binary(To)),
    Forwarded = throng_stanza:forwarded([], Orig, last),
    #xmlel{name = <<"message">>,
           attrs = [{<<"type">>, throng_stanza:type(El)} || throng_stanza:type(El) =/= <<>>],
           children = [#xmlel{name = atom_to_binary(Dir), attrs = [{<<"xmlns">>, ?NS}],
                              children = [Forwarded]}]}.

%% @doc Whether a message is copied (XEP-0280 §6, without the private
%% element, which the sender's hook handles).
-spec eligible(#xmlel{}) -> boolean().
eligible(El) ->
    Type = throng_stanza:type(El),
    not lists:member(Type, [<<"groupchat">>, <<"headline">>])
        andalso not is_carbon(El)
        andalso not is_private(El)
        andalso throng_xml:subel(El, <<"no-copy">>, ?NS_HINTS) =:= undefined
        andalso (Type =:= <<"chat">> orelse Type =:= <<"error">>
                 orelse ((Type =:= <<>> orelse Type =:= <<"normal">>)
                         andalso throng_xml:subel(El, <<"body">>) =/= undefined)
                 orelse has_im_payload(El)).

has_im_payload(#xmlel{children = Children}) ->
    lists:any(fun(#xmlel{} = C) -> lists:member(throng_xml:ns(C), ?IM_PAYLOADS);
                 (_) -> false
              end, Children).

is_carbon(El) ->
    throng_xml:subel(El, <<"received">>, ?NS) =/= undefined
        orelse throng_xml:subel(El, <<"sent">>, ?NS) =/= undefined.

is_private(#xmlel{children = Children}) ->
    lists:any(fun is_private_el/1, Children).

is_private_el(#xmlel{name = <<"private">>} = C) -> throng_xml:ns(C) =:= ?NS;
is_private_el(_) -> false.

%% A private message from a room occupant to one of the user's resources
%% (XEP-0045): the other resources are not in the room.
muc_pm_to_resource(El, #jid{resource = R}) ->
    R =/= <<>> andalso throng_xml:subel(El, <<"x">>, ?NS_MUC_USER) =/= undefined.

same_account(#jid{user = U, server = S}, #jid{user = U, server = S}) -> true;
same_account(_, _) -> false.
