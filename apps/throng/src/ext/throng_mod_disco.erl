%% @doc XEP-0030 Service Discovery. disco#info of the domain lists the
%% identities and features of every module enabled on the host (assembled
%% once at boot, {@link throng_ext}); disco#info of a user's bare JID
%% answers for the account, to the account itself and to entities it shares
%% its presence with (XEP-0030 §8; others get service-unavailable), with the
%% features modules add for accounts (an archive, XEP-0313 §8).
%%
%% Queries to the domain also run the `disco_info' and `disco_items' hooks,
%% so that a module can add items to the domain's list and answer the nodes
%% it owns, per asker (XEP-0050's command list); a node no module answers is
%% item-not-found. So do queries to an account with a node, and its
%% disco#items (the account's PEP nodes and their items, XEP-0060 §5).
-module(throng_mod_disco).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1, disco_identities/1]).
-export([server_info/2, server_items/2, account_info/2, account_items/2]).
%% IQ handlers named in iq_handlers/0, called through the throng_ext registry.
-ignore_xref([{server_info, 2}, {server_items, 2}, {account_info, 2}, {account_items, 2}]).

-spec options() -> throng_config_spec:spec().
options() ->
    #{}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{server, ?NS_DISCO_INFO, server_info},
     {server, ?NS_DISCO_ITEMS, server_items},
     {account, ?NS_DISCO_INFO, account_info},
     {account, ?NS_DISCO_ITEMS, account_items}].

-spec hooks() -> [].
hooks() ->
    [].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    [?NS_DISCO_INFO, ?NS_DISCO_ITEMS].

-spec disco_identities(binary()) -> [throng_ext:identity()].
disco_identities(_Host) ->
    [{<<"server">>, <<"im">>, <<"Throng">>}].

%% @doc disco#info of the domain: without a node, the identities and
%% features of the enabled modules; then the `disco_info' hook, where a
%% module answers a node of its own.
-spec server_info(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
server_info(IQ, #{host := Host} = Ctx) ->
    on_domain(IQ, Ctx, disco_info,
              {throng_ext:disco_identities(Host), throng_ext:disco_features(Host)},
              fun render_info/2).

%% @doc disco#items of the domain: what the `disco_items' hook's handlers
%% list (nothing when none does).
-spec server_items(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
server_items(IQ, Ctx) ->
    on_domain(IQ, Ctx, disco_items, [], fun items/2).

%% The hook starts from the answer without a node (Default) or, for a node,
%% from not_found; a handler that owns the node replaces it, with an answer
%% or {error, Condition} (e.g. forbidden for a node the asker may not see).
on_domain(IQ, #{host := Host, from := From, to := To, payload := Payload} = Ctx,
          Event, Default, Render) ->
    case is_get(IQ) of
        false -> bad_type(IQ, Ctx);
        true ->
            Node = throng_xml:attr(<<"node">>, Payload),
            Start = case Node of
                        undefined -> Default;
                        _ -> not_found
                    end,
            {_, Answer} = throng_hooks:run(Event, Host, Start,
                                           #{from => From, to => To, node => Node}),
            case Answer of
                not_found -> throng_stanza:error_reply(IQ, 'item-not-found');
                {error, Cond} -> throng_stanza:error_reply(IQ, Cond);
                _ -> throng_stanza:iq_result(IQ, [Render(Node, Answer)])
            end
    end.

%% @doc disco#info of a user's bare JID, answered by the server on the
%% account's behalf to those allowed to see it (see authorized/1).
-spec account_info(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
account_info(IQ, #{host := Host, payload := Payload} = Ctx) ->
    for_account(IQ, Ctx, fun() ->
        case is_get(IQ) andalso throng_xml:attr(<<"node">>, Payload) =:= undefined of
            true ->
                throng_stanza:iq_result(
                  IQ, [info(undefined, [{<<"account">>, <<"registered">>, <<>>}
                                        | throng_ext:account_identities(Host)],
                            [?NS_DISCO_INFO, ?NS_DISCO_ITEMS | throng_ext:account_features(Host)])]);
            false ->
                on_domain(IQ, Ctx, disco_info, none, fun render_info/2)
        end
    end).

%% @doc disco#items of a user's bare JID: what the `disco_items' hook's
%% handlers list (the account's PEP nodes; with a node, its items).
-spec account_items(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
account_items(IQ, Ctx) ->
    for_account(IQ, Ctx, fun() -> on_domain(IQ, Ctx, disco_items, [], fun items/2) end).

%% A node's answer may carry extended information (XEP-0128 forms).
render_info(Node, {Ids, Features, Extra}) ->
    Q = info(Node, Ids, Features),
    Q#xmlel{children = Q#xmlel.children ++ Extra};
render_info(Node, {Ids, Features}) ->
    info(Node, Ids, Features).

%% XEP-0030 §8: "the server MUST return a <service-unavailable/> error if
%% ... the requesting entity is not authorized to receive presence from the
%% target entity (i.e., via the target having a presence subscription to
%% the requesting entity of type "both" or "from") or is not otherwise
%% trusted (e.g., another resource of the same user)", whatever the node:
%% any other answer would tell that the account exists (the router answers
%% service-unavailable for an account that does not).
for_account(IQ, Ctx, Answer) ->
    case authorized(Ctx) of
        true -> Answer();
        false -> throng_stanza:error_reply(IQ, 'service-unavailable')
    end.

authorized(#{from := #jid{user = U, server = S}, to := #jid{user = U, server = S}}) ->
    true;
authorized(#{from := #jid{user = FU, server = FS}, to := #jid{user = U, server = S}}) ->
    throng_presence:shares_with(U, S, {FU, FS});
authorized(_) ->
    false.

is_get(IQ) ->
    throng_stanza:type(IQ) =:= <<"get">>.

bad_type(IQ, _Ctx) ->
    throng_stanza:error_reply(IQ, 'service-unavailable').

%% The answer to a query with a node says which node (XEP-0030 §3.2, §4.2).
info(Node, Identities, Features) ->
    #xmlel{name = <<"query">>, attrs = query_attrs(?NS_DISCO_INFO, Node),
           children = [#xmlel{name = <<"identity">>,
                              attrs = [{<<"category">>, C}, {<<"type">>, T}] ++
                                  [{<<"name">>, N} || N =/= <<>>]}
                       || {C, T, N} <- Identities] ++
               [#xmlel{name = <<"feature">>, attrs = [{<<"var">>, F}]}
                || F <- lists:usort(Features)]}.

items(Node, Items) ->
    #xmlel{name = <<"query">>, attrs = query_attrs(?NS_DISCO_ITEMS, Node),
           children = [#xmlel{name = <<"item">>,
                              attrs = [{<<"jid">>, J}] ++ [{<<"node">>, N} || N =/= <<>>] ++
                                  [{<<"name">>, Name} || Name =/= <<>>]}
                       || {J, N, Name} <- Items]}.

query_attrs(NS, undefined) -> [{<<"xmlns">>, NS}];
query_attrs(NS, Node) -> [{<<"xmlns">>, NS}, {<<"node">>, Node}].
