%% @doc Explicit subscriptions to PEP nodes (XEP-0060 §6.1–6.2, XEP-0163
%% §4.3): who asked, with a `<subscribe/>', to be notified of a node of
%% another account, whatever its capabilities say. Most PEP interest is
%% implicit (presence plus `+notify' capabilities, {@link throng_mod_pep});
%% these are the rest: clients that do not advertise `+notify', services
%% and readers of open nodes who are not contacts.
%%
%% Stored in the per-module store, beside the nodes:
%% <ul>
%% <li>bucket `pep_subs', key `{User, Server, Node}': the node's
%% subscribers, `[{SubUser, SubServer, SubResource}]' sorted (resource
%% `<<>>' for a bare JID);</li>
%% <li>bucket `pep_subscribed', key `{SubUser, SubServer}': the nodes a
%% local account subscribed to, `[{User, Server, Node}]', read only when
%% that account is removed (so that a later account of the same name
%% inherits nothing).</li>
%% </ul>
%% A change is one step of the storage ({@link throng_storage:kv_update/3}:
%% the node's entry locked in the database, not in the cluster), so that
%% two subscribers at once both stay subscribed. Nothing is read
%% at login, and a publish reads one key more only for the node it
%% publishes to.
-module(throng_pep_subs).

-export([list/3, add/4, remove/4, set/4, drop_node/3, account_removed/2]).

-define(SUBS, pep_subs).
-define(SUBSCRIBED, pep_subscribed).

%% A subscriber's JID: {User, Server, Resource}, Resource <<>> when bare.
-type sub() :: {binary(), binary(), binary()}.
-export_type([sub/0]).

%% @doc The subscribers of the node Node of U@S.
-spec list(binary(), binary(), binary()) -> [sub()].
list(U, S, Node) ->
    listed(throng_storage:kv_get(?SUBS, {U, S, Node})).

%% @doc Subscribes Sub to the node (again: no change).
-spec add(binary(), binary(), binary(), sub()) -> ok.
add(U, S, Node, Sub) ->
    set(U, S, Node, [{Sub, subscribed}]).

%% @doc Ends Sub's subscription: not_subscribed when it had none.
-spec remove(binary(), binary(), binary(), sub()) -> ok | not_subscribed.
remove(U, S, Node, Sub) ->
    update(U, S, Node,
           fun(Subs) ->
                   case lists:member(Sub, Subs) of
                       false -> {not_subscribed, Subs};
                       true -> {ok, Subs -- [Sub]}
                   end
           end).

%% @doc Applies a list of changes at once (the owner's XEP-0060 §8.8.2):
%% `subscribed' adds a subscriber, `none' removes it.
-spec set(binary(), binary(), binary(), [{sub(), subscribed | none}]) -> ok.
set(U, S, Node, Changes) ->
    update(U, S, Node,
           fun(Subs) ->
                   {ok, lists:foldl(fun({Sub, subscribed}, Acc) -> lists:usort([Sub | Acc]);
                                       ({Sub, none}, Acc) -> Acc -- [Sub]
                                    end, Subs, Changes)}
           end).

%% @doc The node is gone, and its subscriptions with it.
-spec drop_node(binary(), binary(), binary()) -> ok.
drop_node(U, S, Node) ->
    update(U, S, Node, fun(_) -> {ok, []} end).

%% @doc The local account U@S is gone: its subscriptions to other accounts'
%% nodes end (its own nodes' subscriptions go with drop_node/3).
-spec account_removed(binary(), binary()) -> ok.
account_removed(U, S) ->
    Nodes = listed(throng_storage:kv_get(?SUBSCRIBED, {U, S})),
    _ = [update(OU, OS, Node,
                fun(Subs) -> {ok, [X || {XU, XS, _} = X <- Subs, {XU, XS} =/= {U, S}]} end)
         || {OU, OS, Node} <- Nodes],
    ok = throng_storage:kv_delete(?SUBSCRIBED, {U, S}).

%% Changes the node's list (F: the list to its reply and the new list) and
%% the reverse entries of the local accounts that joined or left it, in
%% one step of the storage (throng_storage:kv_update/3: the entries are
%% locked in the database, the node's first, then the accounts' in sorted
%% order): two subscribers at once both stay, two nodes joined at once both
%% stay listed.
update(U, S, Node, F) ->
    throng_storage:kv_update(
      ?SUBS, {U, S, Node},
      fun(Found) ->
              Old = listed(Found),
              {Reply, New} = F(Old),
              New =:= Old orelse reverse_entries(U, S, Node, Old, New),
              {Reply, change(Old, New)}
      end).

reverse_entries(U, S, Node, Old, New) ->
    Accounts = fun(L) -> lists:usort([{XU, XS} || {XU, XS, _} <- L, throng_router:is_local(XS)]) end,
    Before = Accounts(Old),
    After = Accounts(New),
    Joined = After -- Before,
    %% One pass in sorted order: the accounts' entries are locked in one
    %% order by every change (two changes at once would otherwise each hold
    %% one and wait for the other's).
    _ = [case lists:member(A, Joined) of
             true -> reverse(A, fun(Ns) -> lists:usort([{U, S, Node} | Ns]) end);
             false -> reverse(A, fun(Ns) -> Ns -- [{U, S, Node}] end)
         end || A <- lists:usort(Joined ++ (Before -- After))],
    ok.

reverse(Account, Change) ->
    throng_storage:kv_update(
      ?SUBSCRIBED, Account,
      fun(Found) ->
              Ns = listed(Found),
              {ok, change(Ns, Change(Ns))}
      end).

%% A list as stored: absent when empty.
listed({ok, L}) -> L;
listed(not_found) -> [].

change(Same, Same) -> keep;
change(_, []) -> delete;
change(_, New) -> {put, New}.
