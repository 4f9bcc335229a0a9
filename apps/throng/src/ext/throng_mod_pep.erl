%% @doc XEP-0163 Personal Eventing Protocol: every account is a small
%% publish-subscribe service at its bare JID (the subset of XEP-0060 that
%% PEP needs), so that avatars (XEP-0084), bookmarks (XEP-0402), OMEMO
%% device lists and bundles (XEP-0384), nicknames, moods and the like work.
%%
%% <ul>
%% <li>The owner publishes (nodes are created on first publish, with
%% publish-options as the configuration, or as preconditions on an existing
%% node: `conflict' + `precondition-not-met'), retracts, configures
%% (`pubsub#owner' configure get/set) and deletes nodes.</li>
%% <li>Items are read by the owner and by whom the node's access model
%% allows: `presence' (contacts with a subscription from/both, the default),
%% `open' (anyone), `whitelist' (the owner only).</li>
%% <li>Notifications go to the available resources of the owner and of the
%% contacts allowed to see the node whose capabilities (XEP-0115,
%% {@link throng_caps}) include `NODE+notify' ("auto-subscription"), and to
%% the JIDs subscribed explicitly (XEP-0060 §6.1: `subscribe', whom the
%% access model allows; `unsubscribe'; the asker's `subscriptions' and
%% `affiliations'; the owner's `subscriptions' get and set), kept by
%% {@link throng_pep_subs}. Subscription options are not offered.</li>
%% <li>At a resource's first available presence it gets the last item of
%% every node it is interested in, of its own account and of each contact
%% whose presence it receives. If its capabilities are not known yet the
%% server asks the resource once (disco#info) and delivers when the answer
%% (checked against its hash) arrives.</li>
%% </ul>
%% Nodes are kept in the per-module store (bucket `pep', key `{User,
%% Server, Node}'; the list of a user's nodes under `pep_nodes'); nothing is
%% kept per session. Every notification goes through the router, so a
%% blocked contact (XEP-0191) gets none.
-module(throng_mod_pep).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1, disco_identities/1,
         account_features/1, account_identities/1]).
-export([pubsub/2, owner/2, initial_presence/2, stanza_from_session/2, user_removed/2,
         disco_info/2, disco_items/2]).
%% IQ handlers and hooks named in iq_handlers/0 and hooks/0 (throng_ext).
-ignore_xref([{pubsub, 2}, {owner, 2}, {initial_presence, 2}, {stanza_from_session, 2},
              {user_removed, 2}, {disco_info, 2}, {disco_items, 2}]).

-define(NS_PUBSUB, <<"http://jabber.org/protocol/pubsub">>).
-define(NS_OWNER, <<"http://jabber.org/protocol/pubsub#owner">>).
-define(NS_EVENT, <<"http://jabber.org/protocol/pubsub#event">>).
-define(NS_ERRORS, <<"http://jabber.org/protocol/pubsub#errors">>).
-define(BUCKET, pep).
-define(NODES, pep_nodes).

-spec options() -> throng_config_spec:spec().
options() ->
    #{max_items => #{type => {int, 1, 100000}, default => 1000,
                     doc => "Items a node may keep at most (what `pubsub#max_items` `max` "
                            "means). A node keeps 1 unless configured otherwise."},
      max_nodes => #{type => {int, 1, 100000}, default => 256,
                     doc => "Nodes per account. A publish that would create one more is "
                            "refused with not-allowed."},
      max_item_bytes => #{type => {int, 64, 16777216}, default => 262144,
                          doc => "Bytes of one item's payload at most (an avatar's data is "
                                 "the largest usual item). Beyond: not-acceptable + "
                                 "payload-too-big."}}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{account, ?NS_PUBSUB, pubsub},
     {account, ?NS_OWNER, owner}].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    %% The caps answer is consumed before anything else sees it.
    [{stanza_from_session, 5, stanza_from_session},
     {initial_presence, 60, initial_presence},
     {user_removed, 50, user_removed},
     {disco_info, 50, disco_info},
     {disco_items, 50, disco_items}].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    features().

-spec disco_identities(binary()) -> [throng_ext:identity()].
disco_identities(_Host) ->
    [{<<"pubsub">>, <<"pep">>, <<>>}].

%% The account itself is the PEP service (XEP-0163 §6.1): clients look for
%% the identity and the features at the user's bare JID.
-spec account_features(binary()) -> [binary()].
account_features(_Host) ->
    features().

-spec account_identities(binary()) -> [throng_ext:identity()].
account_identities(_Host) ->
    [{<<"pubsub">>, <<"pep">>, <<>>}].

features() ->
    [?NS_PUBSUB | [<<?NS_PUBSUB/binary, "#", F/binary>>
                   || F <- [<<"publish">>, <<"publish-options">>, <<"retract-items">>,
                            <<"retrieve-items">>, <<"delete-nodes">>, <<"auto-create">>,
                            <<"create-nodes">>, <<"create-and-configure">>,
                            <<"auto-subscribe">>, <<"persistent-items">>, <<"last-published">>,
                            <<"subscribe">>, <<"retrieve-subscriptions">>,
                            <<"retrieve-affiliations">>, <<"manage-subscriptions">>,
                            <<"filtered-notifications">>, <<"config-node">>,
                            <<"access-presence">>, <<"access-open">>, <<"access-whitelist">>,
                            <<"item-ids">>, <<"multi-items">>]]].

%%% The owner's and the askers' requests

%% @doc IQ handler, `http://jabber.org/protocol/pubsub' on a bare JID.
-spec pubsub(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{} | noreply.
pubsub(IQ, #{payload := Payload, from := From, to := To} = Ctx) ->
    case answer(IQ, fun() -> request(throng_stanza:type(IQ), action(Payload), Payload, Ctx) end) of
        {Reply, Then} ->
            %% What must follow the reply (XEP-0060 §6.1.7: the last item
            %% after the subscription's result) is routed after it.
            throng_router:route(To, From, throng_stanza:strip_from_to(Reply)),
            Then(),
            noreply;
        Reply ->
            Reply
    end.

%% @doc IQ handler, `http://jabber.org/protocol/pubsub#owner': the owner
%% configures and deletes its nodes.
-spec owner(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
owner(IQ, #{payload := Payload} = Ctx) ->
    case is_owner(Ctx) of
        false -> throng_stanza:error_reply(IQ, forbidden);
        true -> answer(IQ, fun() -> owner_request(throng_stanza:type(IQ), action(Payload), Ctx) end)
    end.

%% The reply to a request: its result, or its error with the pubsub
%% condition; a store that fails is internal-server-error.
answer(IQ, Request) ->
    try Request() of
        {result, {after_reply, Children, Then}} -> {throng_stanza:iq_result(IQ, Children), Then};
        {result, Children} -> throng_stanza:iq_result(IQ, Children);
        {error, Cond} -> throng_stanza:error_reply(IQ, Cond);
        {error, Cond, App} -> throng_stanza:error_reply(IQ, Cond, <<>>, pubsub_error(App))
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => pep_storage_failed, reason => Why}),
            throng_stanza:error_reply(IQ, 'internal-server-error')
    end.

action(#xmlel{children = Children}) ->
    case [C || #xmlel{name = N} = C <- Children, N =/= <<"publish-options">>] of
        [#xmlel{} = A | _] -> A;
        [] -> none
    end.

pubsub_error({App, Feature}) ->
    #xmlel{name = App, attrs = [{<<"xmlns">>, ?NS_ERRORS}, {<<"feature">>, Feature}]};
pubsub_error(App) ->
    #xmlel{name = App, attrs = [{<<"xmlns">>, ?NS_ERRORS}]}.

is_owner(#{from := #jid{user = U, server = S}, to := #jid{user = U, server = S}}) -> true;
is_owner(_) -> false.

request(<<"set">>, #xmlel{name = <<"publish">>} = P, Payload, Ctx) ->
    case is_owner(Ctx) of
        true -> publish(P, throng_xml:subel(Payload, <<"publish-options">>), Ctx);
        false -> {error, forbidden}
    end;
request(<<"set">>, #xmlel{name = <<"retract">>} = R, _Payload, Ctx) ->
    case is_owner(Ctx) of
        true -> retract(R, Ctx);
        false -> {error, forbidden}
    end;
request(<<"get">>, #xmlel{name = <<"items">>} = I, _Payload, Ctx) ->
    items(I, Ctx);
request(<<"set">>, #xmlel{name = <<"create">>} = C, Payload, Ctx) ->
    case is_owner(Ctx) of
        true -> create(C, throng_xml:subel(Payload, <<"configure">>), Ctx);
        false -> {error, forbidden}
    end;
request(<<"set">>, #xmlel{name = <<"subscribe">>} = Sub, Payload, Ctx) ->
    case throng_xml:subel(Payload, <<"options">>) of
        undefined -> subscribe(Sub, Ctx);
        _ -> {error, 'feature-not-implemented', {<<"unsupported">>, <<"subscription-options">>}}
    end;
request(<<"set">>, #xmlel{name = <<"unsubscribe">>} = Unsub, _Payload, Ctx) ->
    unsubscribe(Unsub, Ctx);
request(<<"get">>, #xmlel{name = <<"subscriptions">>} = Subs, _Payload, Ctx) ->
    subscriptions(Subs, Ctx);
request(<<"get">>, #xmlel{name = <<"affiliations">>} = Affs, _Payload, Ctx) ->
    affiliations(Affs, Ctx);
request(_Type, #xmlel{name = <<"options">>}, _Payload, _Ctx) ->
    {error, 'feature-not-implemented', {<<"unsupported">>, <<"subscription-options">>}};
request(_Type, _Action, _Payload, _Ctx) ->
    {error, 'bad-request'}.

node_name(El) ->
    case throng_xml:attr(<<"node">>, El) of
        undefined -> {error, 'bad-request', <<"nodeid-required">>};
        <<>> -> {error, 'bad-request', <<"nodeid-required">>};
        N -> {ok, N}
    end.

publish(P, Options, #{to := #jid{user = U, server = S} = Owner, host := Host}) ->
    Max = opt(Host, max_items),
    chain([fun() -> node_name(P) end,
           fun(Node) ->
                   case [I || #xmlel{name = <<"item">>} = I <- P#xmlel.children] of
                       [Item] -> {ok, {Node, Item}};
                       [] -> {error, 'bad-request', <<"item-required">>};
                       _ -> {error, 'bad-request', <<"invalid-payload">>}
                   end
           end,
           fun({Node, Item}) ->
                   case [C || #xmlel{} = C <- Item#xmlel.children] of
                       [Data] ->
                           case byte_size(throng_xml:to_binary(Data)) > opt(Host, max_item_bytes) of
                               true -> {error, 'not-acceptable', <<"payload-too-big">>};
                               false -> {ok, {Node, Item, Data}}
                           end;
                       [] -> {error, 'bad-request', <<"payload-required">>};
                       _ -> {error, 'bad-request', <<"invalid-payload">>}
                   end
           end,
           fun({Node, Item, Data}) ->
                   case options(Options) of
                       {ok, Values} -> {ok, {Node, Item, Data, Values}};
                       error -> {error, 'bad-request', <<"invalid-options">>}
                   end
           end,
           fun({Node, Item, Data, Values}) ->
                   case get_node(U, S, Node) of
                       not_found ->
                           case length(node_names(U, S)) >= opt(Host, max_nodes) of
                               true -> {error, 'not-allowed', <<"max-nodes-exceeded">>};
                               false ->
                                   case throng_pep_node:config_from_form(Values, {default_config(), Max}) of
                                       {ok, C} -> {ok, {new, Node, Item, Data, throng_pep_node:new(C)}};
                                       {error, _} -> {error, conflict, <<"precondition-not-met">>}
                                   end
                           end;
                       Existing ->
                           case throng_pep_node:preconditions(Values, {throng_pep_node:config(Existing), Max}) of
                               ok -> {ok, {old, Node, Item, Data, Existing}};
                               {error, _} -> {error, conflict, <<"precondition-not-met">>}
                           end
                   end
           end,
           fun({Age, Node, Item, Data, N0}) ->
                   Id = case throng_xml:attr(<<"id">>, Item) of
                            undefined -> new_id();
                            <<>> -> new_id();
                            I -> I
                        end,
                   Publisher = throng_jid:to_binary(Owner),
                   N1 = throng_pep_node:publish({Id, throng_stanza:copy(Data), Publisher,
                                                 erlang:system_time(microsecond)}, N0),
                   Age =:= new andalso add_node_name(U, S, Node),
                   ok = throng_storage:kv_put(?BUCKET, {U, S, Node}, N1),
                   notify(Owner, Node, throng_pep_node:config(N1),
                          items_event(Node, [item_el(Id, Data, Publisher)])),
                   {ok, [#xmlel{name = <<"pubsub">>, attrs = [{<<"xmlns">>, ?NS_PUBSUB}],
                                children = [#xmlel{name = <<"publish">>, attrs = [{<<"node">>, Node}],
                                                   children = [#xmlel{name = <<"item">>,
                                                                      attrs = [{<<"id">>, Id}]}]}]}]}
           end], start).

%% XEP-0060 §8.1: a node created explicitly, with the configuration of the
%% request's `<configure/>' form (or the defaults); conflict if it exists.
create(C, Configure, #{to := #jid{user = U, server = S}, host := Host}) ->
    chain([fun() -> node_name(C) end,
           fun(Node) ->
                   case {get_node(U, S, Node), options(Configure)} of
                       {not_found, {ok, Values}} ->
                           case length(node_names(U, S)) >= opt(Host, max_nodes) of
                               true -> {error, 'not-allowed', <<"max-nodes-exceeded">>};
                               false ->
                                   case throng_pep_node:config_from_form(
                                          Values, {default_config(), opt(Host, max_items)}) of
                                       {ok, Config} -> {ok, {Node, Config}};
                                       {error, _} -> {error, 'not-acceptable'}
                                   end
                           end;
                       {not_found, error} -> {error, 'bad-request'};
                       {_, _} -> {error, conflict}
                   end
           end,
           fun({Node, Config}) ->
                   add_node_name(U, S, Node),
                   ok = throng_storage:kv_put(?BUCKET, {U, S, Node}, throng_pep_node:new(Config)),
                   {ok, []}
           end], start).

%% Runs the steps in turn, each getting what the last one returned: the
%% first error ends it; the last step's value is the result.
chain([], Acc) -> {result, Acc};
chain([F | Rest], start) -> step(F(), Rest);
chain([F | Rest], Acc) -> step(F(Acc), Rest).

step({ok, V}, Rest) -> chain(Rest, V);
step({error, _} = E, _) -> E;
step({error, _, _} = E, _) -> E.

options(undefined) ->
    {ok, #{}};
options(Options) ->
    case throng_xdata:parse(Options) of
        {ok, Values} -> {ok, Values};
        none -> {ok, #{}};
        {error, _} -> error
    end.

retract(R, #{to := #jid{user = U, server = S} = Owner}) ->
    chain([fun() -> node_name(R) end,
           fun(Node) ->
                   case [throng_xml:attr(<<"id">>, I) || #xmlel{name = <<"item">>} = I <- R#xmlel.children] of
                       [Id] when is_binary(Id) -> {ok, {Node, Id}};
                       _ -> {error, 'bad-request', <<"item-required">>}
                   end
           end,
           fun({Node, Id}) ->
                   case get_node(U, S, Node) of
                       not_found -> {error, 'item-not-found'};
                       N0 ->
                           case throng_pep_node:retract(Id, N0) of
                               not_found -> {error, 'item-not-found'};
                               {ok, N1} ->
                                   ok = throng_storage:kv_put(?BUCKET, {U, S, Node}, N1),
                                   Config = throng_pep_node:config(N1),
                                   Notify = maps:get(notify_retract, Config) orelse
                                       lists:member(throng_xml:attr(<<"notify">>, R), [<<"1">>, <<"true">>]),
                                   Notify andalso
                                       notify(Owner, Node, Config,
                                              items_event(Node, [#xmlel{name = <<"retract">>,
                                                                        attrs = [{<<"id">>, Id}]}])),
                                   {ok, []}
                           end
                   end
           end], start).

items(I, #{to := #jid{user = U, server = S}} = Ctx) ->
    chain([fun() -> node_name(I) end,
           fun(Node) ->
                   case get_node(U, S, Node) of
                       not_found -> {error, 'item-not-found'};
                       N ->
                           #{from := #jid{user = FU, server = FS}} = Ctx,
                           case throng_pep_node:may_access(asker({U, S}, {FU, FS}), throng_pep_node:config(N)) of
                               false ->
                                   {error, 'not-authorized', <<"presence-subscription-required">>};
                               true -> {ok, {Node, N}}
                           end
                   end
           end,
           fun({Node, N}) ->
                   Wanted = [Id || #xmlel{name = <<"item">>} = E <- I#xmlel.children,
                                   Id <- [throng_xml:attr(<<"id">>, E)], is_binary(Id)],
                   Items = case {Wanted, throng_xml:attr(<<"max_items">>, I)} of
                               {[_ | _], _} ->
                                   [It || {Id, _, _, _} = It <- throng_pep_node:items(N),
                                          lists:member(Id, Wanted)];
                               {[], undefined} -> throng_pep_node:items(N);
                               {[], M} ->
                                   case string:to_integer(M) of
                                       {K, <<>>} when K > 0 -> throng_pep_node:items(N, K);
                                       _ -> throng_pep_node:items(N)
                                   end
                           end,
                   {ok, [#xmlel{name = <<"pubsub">>, attrs = [{<<"xmlns">>, ?NS_PUBSUB}],
                                children = [#xmlel{name = <<"items">>, attrs = [{<<"node">>, Node}],
                                                   children = [item_el(Id, D, P)
                                                               || {Id, D, P, _} <- Items]}]}]}
           end], start).

%%% Explicit subscriptions (XEP-0060 §5.6, §5.7, §6.1, §6.2)

%% §6.1: From subscribes itself (its bare or a full JID) to a node it may
%% see; it gets the node's last item at once (send_last_published_item).
subscribe(Sub, #{to := #jid{user = U, server = S}, from := From}) ->
    chain([fun() -> node_name(Sub) end,
           fun(Node) ->
                   case sub_jid(Sub, From) of
                       {ok, SubJid} -> {ok, {Node, SubJid}};
                       error -> {error, 'bad-request', <<"invalid-jid">>}
                   end
           end,
           fun({Node, SubJid}) ->
                   case get_node(U, S, Node) of
                       not_found -> {error, 'item-not-found'};
                       N ->
                           Config = throng_pep_node:config(N),
                           case may_subscribe(asker({U, S}, {From#jid.user, From#jid.server}), Config) of
                               ok -> {ok, {Node, SubJid, N}};
                               Error -> Error
                           end
                   end
           end,
           fun({Node, #jid{user = SU, server = SS, resource = SR} = SubJid, N}) ->
                   ok = throng_pep_subs:add(U, S, Node, {SU, SS, SR}),
                   Last = fun() ->
                                  case maps:get(send_last_published_item, throng_pep_node:config(N))
                                      andalso throng_pep_node:last(N) of
                                      {Id, Data, Publisher, _} ->
                                          throng_router:route(#jid{user = U, server = S}, SubJid,
                                                              items_event(Node, [item_el(Id, Data, Publisher)]));
                                      _ -> ok
                                  end
                          end,
                   {ok, {after_reply, [pubsub_el(?NS_PUBSUB, [subscription_el(Node, SubJid)])], Last}}
           end], start).

%% §6.2: the subscription ends; one the asker does not hold is
%% unexpected-request + not-subscribed.
unsubscribe(Unsub, #{to := #jid{user = U, server = S}, from := From}) ->
    chain([fun() -> node_name(Unsub) end,
           fun(Node) ->
                   case sub_jid(Unsub, From) of
                       {ok, SubJid} -> {ok, {Node, SubJid}};
                       error -> {error, forbidden}
                   end
           end,
           fun({Node, #jid{user = SU, server = SS, resource = SR}}) ->
                   case get_node(U, S, Node) =:= not_found of
                       true -> {error, 'item-not-found'};
                       false ->
                           case throng_pep_subs:remove(U, S, Node, {SU, SS, SR}) of
                               ok -> {ok, []};
                               not_subscribed -> {error, 'unexpected-request', <<"not-subscribed">>}
                           end
                   end
           end], start).

%% §5.6: the asker's subscriptions to this account's nodes (to one node,
%% with `node').
subscriptions(Subs, #{to := #jid{user = U, server = S}, from := #jid{user = FU, server = FS}}) ->
    Nodes = case throng_xml:attr(<<"node">>, Subs) of
                undefined -> node_names(U, S);
                Node -> [Node]
            end,
    Mine = [subscription_el(Node, #jid{user = SU, server = SS, resource = SR})
            || Node <- Nodes, {SU, SS, SR} <- throng_pep_subs:list(U, S, Node), {SU, SS} =:= {FU, FS}],
    {result, [pubsub_el(?NS_PUBSUB, [#xmlel{name = <<"subscriptions">>, children = Mine}])]}.

%% §5.7: the owner owns every node; nobody else has an affiliation.
affiliations(Affs, #{to := #jid{user = U, server = S}} = Ctx) ->
    Nodes = case {is_owner(Ctx), throng_xml:attr(<<"node">>, Affs)} of
                {false, _} -> [];
                {true, undefined} -> node_names(U, S);
                {true, Node} -> [N || N <- node_names(U, S), N =:= Node]
            end,
    {result, [pubsub_el(?NS_PUBSUB,
                        [#xmlel{name = <<"affiliations">>,
                                children = [#xmlel{name = <<"affiliation">>,
                                                   attrs = [{<<"node">>, N}, {<<"affiliation">>, <<"owner">>}]}
                                            || N <- Nodes]}])]}.

%% The JID of a (un)subscribe: the `jid' attribute, which must be the
%% asker's own (its bare JID or one of its full JIDs, XEP-0060 §6.1.3.1).
sub_jid(El, #jid{user = FU, server = FS}) ->
    case throng_jid:parse(throng_xml:attr(<<"jid">>, El, <<>>)) of
        {ok, #jid{user = FU, server = FS} = J} -> {ok, J};
        _ -> error
    end.

may_subscribe(Who, Config) ->
    case {throng_pep_node:may_access(Who, Config), Config} of
        {true, _} -> ok;
        {false, #{access_model := whitelist}} -> {error, 'not-allowed', <<"closed-node">>};
        {false, _} -> {error, 'not-authorized', <<"presence-subscription-required">>}
    end.

subscription_el(Node, Jid) ->
    #xmlel{name = <<"subscription">>,
           attrs = [{<<"node">>, Node}, {<<"jid">>, throng_jid:to_binary(Jid)},
                    {<<"subscription">>, <<"subscribed">>}]}.

pubsub_el(NS, Children) ->
    #xmlel{name = <<"pubsub">>, attrs = [{<<"xmlns">>, NS}], children = Children}.

%% Who asks for Owner's node: the owner itself, a contact Owner shares its
%% presence with (subscription from/both), or anyone else.
asker(Owner, Owner) ->
    owner;
asker({OU, OS}, Asker) ->
    case throng_presence:shares_with(OU, OS, Asker) of
        true -> subscriber;
        false -> other
    end.

owner_request(<<"get">>, #xmlel{name = <<"configure">>} = C, #{to := #jid{user = U, server = S}}) ->
    chain([fun() -> node_name(C) end,
           fun(Node) ->
                   case get_node(U, S, Node) of
                       not_found -> {error, 'item-not-found'};
                       N -> {ok, [#xmlel{name = <<"pubsub">>, attrs = [{<<"xmlns">>, ?NS_OWNER}],
                                         children = [#xmlel{name = <<"configure">>,
                                                            attrs = [{<<"node">>, Node}],
                                                            children = [throng_pep_node:config_form(
                                                                          throng_pep_node:config(N))]}]}]}
                   end
           end], start);
owner_request(<<"set">>, #xmlel{name = <<"configure">>} = C, #{to := #jid{user = U, server = S}, host := Host}) ->
    chain([fun() -> node_name(C) end,
           fun(Node) ->
                   case {get_node(U, S, Node), options(C)} of
                       {not_found, _} -> {error, 'item-not-found'};
                       {_, error} -> {error, 'bad-request'};
                       {N, {ok, Values}} ->
                           case throng_pep_node:config_from_form(
                                  Values, {throng_pep_node:config(N), opt(Host, max_items)}) of
                               {ok, Config} ->
                                   %% A lower max_items drops the oldest items now.
                                   #{items := Items} = N,
                                   N1 = N#{config := Config,
                                           items := lists:sublist(Items, maps:get(max_items, Config))},
                                   ok = throng_storage:kv_put(?BUCKET, {U, S, Node}, N1),
                                   {ok, []};
                               {error, _} -> {error, 'not-acceptable'}
                           end
                   end
           end], start);
owner_request(<<"set">>, #xmlel{name = <<"delete">>} = D, #{to := #jid{user = U, server = S} = Owner}) ->
    chain([fun() -> node_name(D) end,
           fun(Node) ->
                   case get_node(U, S, Node) of
                       not_found -> {error, 'item-not-found'};
                       N ->
                           ok = throng_storage:kv_delete(?BUCKET, {U, S, Node}),
                           remove_node_name(U, S, Node),
                           notify(Owner, Node, throng_pep_node:config(N),
                                  event([#xmlel{name = <<"delete">>, attrs = [{<<"node">>, Node}]}])),
                           ok = throng_pep_subs:drop_node(U, S, Node),
                           {ok, []}
                   end
           end], start);
owner_request(<<"get">>, #xmlel{name = <<"subscriptions">>} = Subs, #{to := #jid{user = U, server = S}}) ->
    %% §8.8.1: the node's subscribers.
    chain([fun() -> node_name(Subs) end,
           fun(Node) ->
                   case get_node(U, S, Node) of
                       not_found -> {error, 'item-not-found'};
                       _ ->
                           Els = [#xmlel{name = <<"subscription">>,
                                         attrs = [{<<"jid">>, throng_jid:to_binary(
                                                                 #jid{user = SU, server = SS, resource = SR})},
                                                  {<<"subscription">>, <<"subscribed">>}]}
                                  || {SU, SS, SR} <- throng_pep_subs:list(U, S, Node)],
                           {ok, [pubsub_el(?NS_OWNER, [#xmlel{name = <<"subscriptions">>,
                                                               attrs = [{<<"node">>, Node}],
                                                               children = Els}])]}
                   end
           end], start);
owner_request(<<"set">>, #xmlel{name = <<"subscriptions">>} = Subs, #{to := #jid{user = U, server = S}}) ->
    %% §8.8.2: the owner subscribes or unsubscribes anyone (`subscribed',
    %% `none'); one bad entry and nothing changes.
    chain([fun() -> node_name(Subs) end,
           fun(Node) ->
                   case get_node(U, S, Node) of
                       not_found -> {error, 'item-not-found'};
                       _ -> {ok, Node}
                   end
           end,
           fun(Node) ->
                   Changes = [subscription_change(E) || #xmlel{name = <<"subscription">>} = E
                                                            <- Subs#xmlel.children],
                   case lists:member(error, Changes) of
                       true -> {error, 'bad-request'};
                       false ->
                           ok = throng_pep_subs:set(U, S, Node, Changes),
                           {ok, []}
                   end
           end], start);
owner_request(<<"get">>, #xmlel{name = <<"affiliations">>} = Affs,
              #{to := #jid{user = U, server = S} = Owner}) ->
    %% §8.9.1: the owner is the node's only affiliate.
    chain([fun() -> node_name(Affs) end,
           fun(Node) ->
                   case get_node(U, S, Node) of
                       not_found -> {error, 'item-not-found'};
                       _ ->
                           Aff = #xmlel{name = <<"affiliation">>,
                                        attrs = [{<<"jid">>, throng_jid:to_binary(throng_jid:bare(Owner))},
                                                 {<<"affiliation">>, <<"owner">>}]},
                           {ok, [pubsub_el(?NS_OWNER, [#xmlel{name = <<"affiliations">>,
                                                               attrs = [{<<"node">>, Node}],
                                                               children = [Aff]}])]}
                   end
           end], start);
owner_request(<<"set">>, #xmlel{name = <<"affiliations">>}, _Ctx) ->
    %% A PEP node has one publisher, its owner.
    {error, 'feature-not-implemented', {<<"unsupported">>, <<"modify-affiliations">>}};
owner_request(<<"get">>, #xmlel{name = <<"default">>}, _Ctx) ->
    {result, [#xmlel{name = <<"pubsub">>, attrs = [{<<"xmlns">>, ?NS_OWNER}],
                     children = [#xmlel{name = <<"default">>,
                                        children = [throng_pep_node:config_form(default_config())]}]}]};
owner_request(_Type, _Action, _Ctx) ->
    {error, 'bad-request'}.

subscription_change(E) ->
    case {throng_jid:parse(throng_xml:attr(<<"jid">>, E, <<>>)), throng_xml:attr(<<"subscription">>, E)} of
        {{ok, #jid{user = SU, server = SS, resource = SR}}, <<"subscribed">>} -> {{SU, SS, SR}, subscribed};
        {{ok, #jid{user = SU, server = SS, resource = SR}}, <<"none">>} -> {{SU, SS, SR}, none};
        _ -> error
    end.

%%% Notifications

%% Sends an event about Owner's node to every available resource that is
%% allowed to see it and interested in it (NODE+notify in its caps): the
%% owner's own, and those of contacts with a subscription from/both; then
%% to the explicit subscribers still allowed to see it, unless the
%% subscribed JID (a full JID, or any resource of a bare one) already got
%% it.
notify(#jid{user = U, server = S} = Owner, Node, Config, Event) ->
    {_Ver, Roster} = throng_storage:roster_get(U, S),
    Contacts = [{asker_of(Sub), C} || #roster_item{jid = {_, CS} = C, subscription = Sub} <- Roster,
                                      throng_router:is_local(CS)],
    Allowed = [{U, S} | [C || {Who, C} <- Contacts, throng_pep_node:may_access(Who, Config)]],
    Online = throng_sm:available_many(lists:usort(Allowed)),
    Notify = <<Node/binary, "+notify">>,
    Implicit = [{CU, CS, R} || {CU, CS} <- lists:usort(Allowed),
                               {R, _Pid, _Prio, Pres} <- maps:get({CU, CS}, Online, []),
                               wants(Pres, Notify)],
    Reached = lists:usort([{CU, CS} || {CU, CS, _} <- Implicit]),
    Explicit = [X || {XU, XS, XR} = X <- throng_pep_subs:list(U, S, Node),
                     not lists:member(X, Implicit),
                     XR =/= <<>> orelse not lists:member({XU, XS}, Reached),
                     throng_pep_node:may_access(subscriber_asker({U, S}, {XU, XS}, Roster), Config)],
    [throng_router:route(Owner, #jid{user = XU, server = XS, resource = XR}, Event)
     || {XU, XS, XR} <- Implicit ++ Explicit],
    ok.

%% asker/2 for an explicit subscriber, from the roster already read.
subscriber_asker(Owner, Owner, _Roster) ->
    owner;
subscriber_asker(_Owner, Contact, Roster) ->
    case lists:keyfind(Contact, #roster_item.jid, Roster) of
        #roster_item{subscription = Sub} -> asker_of(Sub);
        false -> other
    end.

asker_of(Sub) when Sub =:= from; Sub =:= both -> subscriber;
asker_of(_) -> other.

wants(Pres, Notify) ->
    case throng_caps:features(Pres) of
        {ok, Features} -> lists:member(Notify, Features);
        _ -> false
    end.

items_event(Node, Children) ->
    event([#xmlel{name = <<"items">>, attrs = [{<<"node">>, Node}], children = Children}]).

event(Children) ->
    #xmlel{name = <<"message">>, attrs = [{<<"type">>, <<"headline">>}],
           children = [#xmlel{name = <<"event">>, attrs = [{<<"xmlns">>, ?NS_EVENT}],
                              children = Children}]}.

item_el(Id, Data, Publisher) ->
    #xmlel{name = <<"item">>, attrs = [{<<"id">>, Id}, {<<"publisher">>, Publisher}],
           children = [Data]}.

%%% Last items for a new resource

%% @doc Hook: a resource sent its first available presence; it gets the
%% last item of every node it wants, of its own account and of the
%% contacts it receives presence from — now, or once its capabilities are
%% learnt.
-spec initial_presence([throng_session:item()], #{jid := #jid{}}) -> ok.
initial_presence(_Items, #{jid := JID}) ->
    Pres = case throng_sm:own_presence(JID) of
               {_Prio, P} -> P;
               undefined -> undefined
           end,
    case throng_caps:from_presence(Pres) of
        none -> ok;
        Caps ->
            case throng_caps:lookup(Caps) of
                {ok, Features} -> send_last(JID, Features);
                unknown -> ask_caps(JID, Caps)
            end
    end,
    ok.

%% @doc Hook: the answer to our capabilities query is consumed here; when
%% it proves right, the resource gets the last items it missed.
-spec stanza_from_session(#xmlel{}, #{from := #jid{}, to := #jid{}}) -> ok | stop.
stanza_from_session(#xmlel{name = <<"presence">>} = El,
                    #{from := #jid{user = U, server = S} = JID, to := To}) ->
    %% A later presence (a broadcast, not directed) whose capabilities
    %% changed: the resource gets the last items of the nodes it now wants
    %% (learning the new ver first if it is unknown). The first presence is
    %% initial_presence/2's.
    Broadcast = case To of
                    #jid{user = U, server = S, resource = <<>>} -> throng_stanza:type(El) =:= <<>>;
                    _ -> false
                end,
    case Broadcast of
        true ->
            try caps_changed(JID, El)
            catch error:{storage_failed, Why} ->
                    logger:error(#{what => pep_last_items_failed, reason => Why})
            end;
        false -> ok
    end,
    ok;
stanza_from_session(El, #{from := JID}) ->
    case throng_caps:answer(El) of
        no -> ok;
        bad -> stop;
        {learnt, Features} ->
            try send_last(JID, Features)
            catch error:{storage_failed, Why} ->
                    logger:error(#{what => pep_last_items_failed, reason => Why})
            end,
            stop
    end.

%% Runs for every presence a client broadcasts: a presence without
%% capabilities costs nothing more, and one with them a read of the
%% session's own row (the presence it had before this one).
caps_changed(JID, El) ->
    case throng_caps:from_presence(El) of
        none -> ok;
        New ->
            case throng_sm:own_presence(JID) of
                {Prio, Old} when Prio =/= undefined -> caps_changed(JID, New, throng_caps:from_presence(Old));
                _ -> ok
            end
    end.

caps_changed(_JID, Same, Same) ->
    ok;
caps_changed(JID, New, Old) ->
    case throng_caps:lookup(New) of
        {ok, Features} ->
            Before = case Old =/= none andalso throng_caps:lookup(Old) of
                         {ok, F} -> F;
                         _ -> []
                     end,
            send_last(JID, Features -- Before);
        unknown ->
            ask_caps(JID, New)
    end.

%% The resource is asked for the disco#info its ver stands for, from its
%% own account (so that the answer passes through its own session).
ask_caps(JID, Caps) ->
    throng_router:route(throng_jid:bare(JID), JID, throng_caps:query(Caps)).

send_last(#jid{user = U, server = S} = JID, Features) ->
    Wanted = [binary:part(F, 0, byte_size(F) - 7) || F <- Features, byte_size(F) > 7,
                                                     binary:part(F, byte_size(F), -7) =:= <<"+notify">>],
    case Wanted of
        [] -> ok;
        _ ->
            {_Ver, Roster} = throng_storage:roster_get(U, S),
            Owners = [{U, S} | [C || #roster_item{jid = {_, CS} = C, subscription = Sub} <- Roster,
                                     Sub =:= to orelse Sub =:= both, throng_router:is_local(CS)]],
            %% The node list first: a contact without a wanted node costs
            %% one read, and its roster is read only for a node that needs
            %% it (access model presence).
            [last_of({U, S}, Owner, Node, JID)
             || {OU, OS} = Owner <- Owners, Node <- node_names(OU, OS), lists:member(Node, Wanted)],
            ok
    end.

last_of(Me, {OU, OS} = Owner, Node, JID) ->
    case get_node(OU, OS, Node) of
        not_found -> ok;
        N ->
            Config = throng_pep_node:config(N),
            case maps:get(send_last_published_item, Config) andalso visible(Owner, Me, Config)
                andalso throng_pep_node:last(N) of
                {Id, Data, Publisher, _} ->
                    throng_router:route(#jid{user = OU, server = OS}, JID,
                                        items_event(Node, [item_el(Id, Data, Publisher)]));
                _ -> ok
            end
    end.

%% Whether Me may see Owner's node; the roster is read only when the access
%% model depends on it.
visible(Owner, Me, #{access_model := presence} = Config) ->
    throng_pep_node:may_access(asker(Owner, Me), Config);
visible(Owner, Me, Config) ->
    throng_pep_node:may_access(case Owner =:= Me of true -> owner; false -> other end, Config).

%%% Service discovery (XEP-0060 §5)

%% @doc Hook: disco#info of one of the account's nodes (§5.3, §5.4): a leaf
%% node, with its meta-data (XEP-0128), for those who may see it.
-spec disco_info(term(), #{from := #jid{}, to := #jid{}, node := binary() | undefined}) ->
    ok | {stop, term()}.
disco_info(_Acc, #{from := From, to := #jid{user = U, server = S}, node := Node})
  when U =/= <<>>, is_binary(Node) ->
    case seen_node(From, U, S, Node) of
        not_found -> ok;
        hidden -> {stop, {error, 'item-not-found'}};
        {ok, N} -> {stop, {[{<<"pubsub">>, <<"leaf">>, <<>>}], [?NS_PUBSUB],
                           [meta_data(U, S, throng_pep_node:config(N))]}}
    end;
disco_info(_Acc, _Args) ->
    ok.

%% @doc Hook: disco#items of the account, its nodes the asker may see
%% (§5.2); with a node, the node's items by id (§5.5).
-spec disco_items(term(), #{from := #jid{}, to := #jid{}, node := binary() | undefined}) ->
    ok | {ok, list()} | {stop, term()}.
disco_items(Items, #{from := From, to := #jid{user = U, server = S}, node := undefined})
  when U =/= <<>>, is_list(Items) ->
    Bare = throng_jid:to_binary(#jid{user = U, server = S}),
    {ok, Items ++ [{Bare, Name, <<>>} || Name <- node_names(U, S),
                                         {ok, _} <- [seen_node(From, U, S, Name)]]};
disco_items(_Acc, #{from := From, to := #jid{user = U, server = S}, node := Node})
  when U =/= <<>>, is_binary(Node) ->
    case seen_node(From, U, S, Node) of
        not_found -> ok;
        hidden -> {stop, {error, 'item-not-found'}};
        {ok, N} ->
            Bare = throng_jid:to_binary(#jid{user = U, server = S}),
            {stop, [{Bare, <<>>, Id} || {Id, _, _, _} <- throng_pep_node:items(N)]}
    end;
disco_items(_Acc, _Args) ->
    ok.

%% The node Name of U@S as the asker From may see it in service discovery.
seen_node(#jid{user = FU, server = FS}, U, S, Name) ->
    case get_node(U, S, Name) of
        not_found -> not_found;
        N ->
            case visible({U, S}, {FU, FS}, throng_pep_node:config(N)) of
                true -> {ok, N};
                false -> hidden
            end
    end.

meta_data(U, S, #{access_model := Access, max_items := Max}) ->
    throng_xdata:result(<<>>,
        [#{var => <<"FORM_TYPE">>, type => <<"hidden">>,
           values => [<<"http://jabber.org/protocol/pubsub#meta-data">>]},
         #{var => <<"pubsub#owner">>, type => <<"jid-multi">>,
           values => [throng_jid:to_binary(#jid{user = U, server = S})]},
         #{var => <<"pubsub#access_model">>, values => [atom_to_binary(Access)]},
         #{var => <<"pubsub#max_items">>, values => [integer_to_binary(Max)]}]).

%%% Storage

get_node(U, S, Node) ->
    case throng_storage:kv_get(?BUCKET, {U, S, Node}) of
        {ok, N} -> N;
        not_found -> not_found
    end.

node_names(U, S) ->
    case throng_storage:kv_get(?NODES, {U, S}) of
        {ok, Names} -> Names;
        not_found -> []
    end.

add_node_name(U, S, Node) ->
    ok = throng_storage:kv_put(?NODES, {U, S}, lists:usort([Node | node_names(U, S)])).

remove_node_name(U, S, Node) ->
    case lists:delete(Node, node_names(U, S)) of
        [] -> ok = throng_storage:kv_delete(?NODES, {U, S});
        Names -> ok = throng_storage:kv_put(?NODES, {U, S}, Names)
    end.

%% @doc Hook: the account is gone, and its nodes with it.
-spec user_removed(ok, #{user := binary(), server := binary()}) -> ok.
user_removed(ok, #{user := U, server := S}) ->
    [begin
         ok = throng_storage:kv_delete(?BUCKET, {U, S, Node}),
         ok = throng_pep_subs:drop_node(U, S, Node)
     end || Node <- node_names(U, S)],
    ok = throng_pep_subs:account_removed(U, S),
    ok = throng_storage:kv_delete(?NODES, {U, S}).

default_config() ->
    #{access_model => presence, max_items => 1, send_last_published_item => true,
      notify_retract => true}.

opt(Host, Key) ->
    throng_ext:opt(Host, ?MODULE, Key).

new_id() ->
    binary:encode_hex(crypto:strong_rand_bytes(8)).
