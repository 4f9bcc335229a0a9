%% @doc The PostgreSQL storage backend (`storage.backend: pgsql'): the
%% tables of priv/pgsql/schema.sql ({@link throng_pgsql_schema}), reached
%% through a pool of connections ({@link throng_pgsql_sup}) with Debian's
%% p1_pgsql driver. Several nodes may share one database.
%%
%% Results and failures follow {@link throng_storage}, with the reasons of
%% {@link throng_pgsql}: `{aborted, _}' when nothing was committed (among
%% them `{aborted, db_down}' while the database cannot be reached), `{sync,
%% {commit_unknown, _}}' when the connection broke after a commit was sent,
%% so that the write may or may not have been kept. A write that returns is
%% on the server's disk (`synchronous_commit' on).
%%
%% How each contract is kept:
%% <ul>
%% <li>login_read: one statement (the account's row, UNION ALL the kv rows
%%     of the keys, passed as two arrays).</li>
%% <li>roster_update: one transaction that first locks the user's
%%     roster_versions row (`SELECT ... FOR UPDATE', the row created if
%%     missing), so that changes of one user's roster run one at a time.</li>
%% <li>offline_store with limits: one transaction that takes an advisory
%%     lock on the user (`pg_advisory_xact_lock'; a user without stored
%%     messages has no row to lock), then inserts only if the user's count
%%     and bytes stay within the limits.</li>
%% <li>offline_total, offline_bytes: the totals of every stored message in
%%     the database (every node sharing it), kept by triggers in
%%     offline_totals: a read of 16 rows.</li>
%% <li>inflight_*: rows keyed by user, node and a number unique on the
%%     node; a claim moves a user's messages in one transaction; a return
%%     is one statement; a delete does not wait for the disk.</li>
%% <li>batch/1 only runs its function: every write in it is a transaction
%%     of its own, durable when it returns (PostgreSQL flushes commits of
%%     concurrent connections together).</li>
%% <li>mam_*: the archive is read by ranges of the primary key (server,
%%     user, id) with LIMIT, from either end; an id taken by another node
%%     in the same microsecond moves the new message to the next free
%%     id (`ON CONFLICT DO NOTHING', then the next).</li>
%% <li>kv: keys are stored in a canonical encoding (`term_to_binary' with
%%     `deterministic' and a fixed minor version), so equal terms are equal
%%     bytes, on every node and OTP release.</li>
%% </ul>
-module(throng_storage_pgsql).
-behaviour(throng_storage).

-include("throng.hrl").

-export([init/0, child_specs/0, create_account/3, set_credentials/3, get_credentials/2, login_read/3,
         remove_account/2, account_exists/2, count_accounts/1, bulk_create/2,
         roster_get/2, roster_get_item/3, roster_update/4,
         offline_store/4, offline_count/2, offline_total/0, offline_bytes/0,
         inflight_put/4, inflight_delete/1, inflight_claim/3, inflight_return/1,
         inflight_recover/1, inflight_nodes/0, inflight_count/0, batch/1, cluster_identity/0,
         kv_get/2, kv_put/3, kv_put_soon/3, kv_delete/2, kv_keys/1, kv_update/3,
         mam_store/3, mam_store_many/1, mam_query/5, mam_count/4, mam_delete_user/2, mam_expire/3]).

-import(throng_pgsql, [read/2, write/2, transaction/1]).

%% The keys of a claim being committed (process dictionary of the caller).
-define(CLAIMED, {?MODULE, claimed}).
%% Users (or keys) per statement of a batch.
-define(BATCH, 500).
%% The first key of the advisory locks on users (the second is the user's
%% hash): keeps them apart from other users of advisory locks.
-define(USER_LOCK, 16#7468).
%% The first key of the advisory locks on key-value entries (kv_update/3).
-define(KV_LOCK, 16#746b).

%%% Start-up

-spec child_specs() -> [supervisor:child_spec()].
child_specs() ->
    [#{id => throng_pgsql_sup, start => {throng_pgsql_sup, start_link, []},
       type => supervisor, shutdown => infinity},
     #{id => throng_pgsql_orphans, start => {throng_pgsql_orphans, start_link, []}}].

%% @doc Connects once to check (or create) the schema and to move this
%% node's messages in flight back to offline storage; `{error, Text}' when
%% the database cannot be used.
-spec init() -> ok | {error, string()}.
init() ->
    #{query_timeout := Timeout} = Opts = throng_pgsql_sup:options(),
    Where = where(Opts),
    case throng_pgsql_conn:open(Opts) of
        {error, Why} ->
            {error, fmt("cannot connect to PostgreSQL at ~ts: ~ts", [Where, describe(Why)])};
        {ok, Conn} ->
            %% Closed below whatever happens; a connection that breaks
            %% meanwhile is an error to return, not an exit to die of.
            unlink(Conn),
            try throng_pgsql_schema:ensure(Conn, Timeout) of
                ok ->
                    case throng_pgsql_conn:prepare(Conn) of
                        ok -> throng_pgsql:using(Conn, Timeout, fun recover_at_boot/0);
                        {error, Why} -> {error, fmt("PostgreSQL at ~ts: ~0tp", [Where, Why])}
                    end;
                {error, Text} ->
                    {error, fmt("PostgreSQL at ~ts: ~ts", [Where, Text])}
            catch
                error:{storage_failed, Why} ->
                    {error, fmt("PostgreSQL at ~ts: ~0tp", [Where, Why])}
            after
                throng_pgsql_conn:close(Conn)
            end
    end.

where(#{user := U, host := H, port := P, database := D}) ->
    fmt("~ts@~ts:~b/~ts", [U, H, P, D]).

describe({init, {error, econnrefused}}) ->
    "connection refused (is the server running and listening on that address?)";
describe({init, {error, Why}}) -> fmt("~0tp", [Why]);
describe({Kind, Fields}) when is_list(Fields), (Kind =:= authentication orelse
                                                Kind =:= error_response) ->
    fmt("~ts", [proplists:get_value(message, Fields, io_lib:format("~0tp", [Fields]))]);
describe(Why) -> fmt("~0tp", [Why]).

fmt(Format, Args) ->
    lists:flatten(io_lib:format(Format, Args)).

recover_at_boot() ->
    case inflight_recover(all) of
        0 -> ok;
        N -> logger:notice(#{what => inflight_recovered, messages => N,
                             text => "unacknowledged messages of the last run are offline again"})
    end.

%%% Accounts

-spec create_account(binary(), binary(), #scram_creds{}) -> ok | {error, exists}.
create_account(U, S, Creds) ->
    case write(account_insert, [S, U | creds(Creds)]) of
        {count, 1} -> ok;
        {count, 0} -> {error, exists}
    end.

-spec set_credentials(binary(), binary(), #scram_creds{}) -> ok | {error, not_found}.
set_credentials(U, S, Creds) ->
    case write(account_update, [S, U | creds(Creds)]) of
        {count, 1} -> ok;
        {count, 0} -> {error, not_found}
    end.

creds(#scram_creds{salt = Salt, iterations = I, sha_stored = S1, sha_server = K1,
                   sha256_stored = S2, sha256_server = K2}) ->
    [Salt, I, S1, K1, S2, K2].

-spec get_credentials(binary(), binary()) -> {ok, #scram_creds{}} | not_found.
get_credentials(U, S) ->
    case read(account_get, [S, U]) of
        [Row] -> {ok, creds_of(Row)};
        [] -> not_found
    end.

creds_of([Salt, I, S1, K1, S2, K2]) ->
    #scram_creds{salt = Salt, iterations = I, sha_stored = S1, sha_server = K1,
                 sha256_stored = S2, sha256_server = K2}.

%% One statement: the account's row and the rows of the keys that have one.
-spec login_read(binary(), binary(), [{atom(), term()}]) ->
    {ok, #scram_creds{}, [{ok, term()} | not_found]} | not_found.
login_read(U, S, Keys) ->
    Rows = read(login_get, [S, U, {array, text, [atom_to_binary(B) || {B, _} <- Keys]},
                            {array, bytea, [key(K) || {_, K} <- Keys]}]),
    case lists:keytake(0, 1, [{N, Rest} || [N | Rest] <- Rows]) of
        {value, {0, Account}, Found} ->
            {ok, creds_of(Account),
             [case lists:keyfind(I, 1, Found) of
                  {I, [Value | _]} -> {ok, binary_to_term(Value)};
                  false -> not_found
              end || I <- lists:seq(1, length(Keys))]};
        false ->
            not_found
    end.

%% The account, then what hangs on it; the roster's version row before its
%% items, in the order roster_update locks them.
-spec remove_account(binary(), binary()) -> ok | {error, not_found}.
remove_account(U, S) ->
    transaction(
      fun() ->
              case write(account_delete, [S, U]) of
                  {count, 0} -> {error, not_found};
                  {count, 1} ->
                      lists:foreach(fun(Q) -> write(Q, [S, U]) end,
                                    [account_delete_inflight, account_delete_offline,
                                     account_delete_version, account_delete_roster])
              end
      end).

-spec account_exists(binary(), binary()) -> boolean().
account_exists(U, S) ->
    read(account_exists, [S, U]) =/= [].

-spec count_accounts(binary()) -> non_neg_integer().
count_accounts(S) ->
    [[N]] = read(account_count, [S]),
    N.

%% @doc In transactions of ?BATCH users: accounts replaced, rosters replaced,
%% versions set to 1.
-spec bulk_create(binary(), [throng_storage:bulk_user()]) -> ok.
bulk_create(_S, []) ->
    ok;
bulk_create(S, Users) ->
    {Batch, Rest} = split(Users),
    transaction(fun() -> bulk_batch(S, last_of_each(Batch)) end),
    bulk_create(S, Rest).

bulk_batch(S, Users) ->
    Names = {array, text, [U || {U, _, _} <- Users]},
    Column = fun(F) -> [F(C) || {_, C, _} <- Users] end,
    _ = write(bulk_accounts,
              [S, Names,
               {array, bytea, Column(fun(C) -> C#scram_creds.salt end)},
               {array, int8, Column(fun(C) -> C#scram_creds.iterations end)},
               {array, bytea, Column(fun(C) -> C#scram_creds.sha_stored end)},
               {array, bytea, Column(fun(C) -> C#scram_creds.sha_server end)},
               {array, bytea, Column(fun(C) -> C#scram_creds.sha256_stored end)},
               {array, bytea, Column(fun(C) -> C#scram_creds.sha256_server end)}]),
    _ = write(bulk_clear_rosters, [S, Names]),
    Items = [{U, I} || {U, _, Is} <- Users,
                       I <- lists:reverse(lists:ukeysort(#roster_item.jid, lists:reverse(Is)))],
    Item = fun(F) -> [F(I) || {_, I} <- Items] end,
    _ = write(bulk_roster_items,
              [S, {array, text, [U || {U, _} <- Items]},
               {array, text, Item(fun(#roster_item{jid = {_, CS}}) -> CS end)},
               {array, text, Item(fun(#roster_item{jid = {CU, _}}) -> CU end)},
               {array, text, Item(fun(I) -> I#roster_item.name end)},
               {array, text, Item(fun(I) -> atom_to_binary(I#roster_item.subscription) end)},
               {array, text, Item(fun(I) -> atom_to_binary(I#roster_item.ask) end)},
               {array, bool, Item(fun(I) -> I#roster_item.approved end)},
               {array, text, Item(fun(I) -> throng_pgsql:groups_literal(I#roster_item.groups) end)}]),
    _ = write(bulk_versions, [S, Names]),
    ok.

%% A user named twice in a batch: the last one counts (as the later of two
%% writes would).
last_of_each(Users) ->
    lists:reverse(lists:ukeysort(1, lists:reverse(Users))).

split(L) when length(L) =< ?BATCH -> {L, []};
split(L) -> lists:split(?BATCH, L).

%%% Rosters

-spec roster_get(binary(), binary()) -> {non_neg_integer(), [#roster_item{}]}.
roster_get(U, S) ->
    [[Ver | _] | _] = Rows = read(roster_get, [S, U]),
    {Ver, [item(Item) || [_ | [CU | _] = Item] <- Rows, CU =/= null]}.

-spec roster_get_item(binary(), binary(), throng_storage:contact()) -> #roster_item{} | undefined.
roster_get_item(U, S, {CU, CS}) ->
    case read(roster_get_item, [S, U, CS, CU]) of
        [Row] -> item(Row);
        [] -> undefined
    end.

item([CU, CS, Name, Sub, Ask, Approved, Groups]) ->
    #roster_item{jid = {CU, CS}, name = Name, subscription = subscription(Sub),
                 ask = ask(Ask), approved = Approved, groups = Groups}.

subscription(<<"none">>) -> none;
subscription(<<"to">>) -> to;
subscription(<<"from">>) -> from;
subscription(<<"both">>) -> both.

ask(<<"none">>) -> none;
ask(<<"out">>) -> out;
ask(<<"in">>) -> in;
ask(<<"both">>) -> both.

-spec roster_update(binary(), binary(), throng_storage:contact(), throng_storage:roster_fun()) ->
    {ok, #roster_item{} | undefined, #roster_item{} | undefined, non_neg_integer()}.
roster_update(U, S, {CU, CS} = Contact, Fun) ->
    transaction(
      fun() ->
              Ver = lock_roster(U, S),
              Old = roster_get_item(U, S, Contact),
              case Fun(Old) of
                  keep ->
                      {ok, Old, Old, Ver};
                  {set, Old} ->
                      {ok, Old, Old, Ver};
                  {set, #roster_item{jid = Contact} = New} ->
                      #roster_item{name = Name, subscription = Sub, ask = Ask,
                                   approved = Approved, groups = Groups} = New,
                      _ = write(roster_put, [S, U, CS, CU, Name, atom_to_binary(Sub),
                                             atom_to_binary(Ask), Approved,
                                             throng_pgsql:groups_literal(Groups)]),
                      {ok, Old, New, bump(U, S, Ver)};
                  delete when Old =:= undefined ->
                      {ok, undefined, undefined, Ver};
                  delete ->
                      _ = write(roster_delete, [S, U, CS, CU]),
                      {ok, Old, undefined, bump(U, S, Ver)}
              end
      end).

%% Locks the user's roster (its version row, made if missing); its version.
lock_roster(U, S) ->
    case read(roster_lock, [S, U]) of
        [[Ver]] -> Ver;
        [] ->
            _ = write(roster_version_create, [S, U]),
            [[Ver]] = read(roster_lock, [S, U]),
            Ver
    end.

bump(U, S, Ver) ->
    {count, 1} = write(roster_version_set, [S, U, Ver + 1]),
    Ver + 1.

%%% Offline messages

-spec offline_store(binary(), binary(), #offline_msg{}, throng_storage:offline_limits()) ->
    ok | {error, full}.
offline_store(U, S, #offline_msg{timestamp = T, from = F, packet = P}, unlimited) ->
    {count, 1} = write(offline_insert, [S, U, T, F, P]),
    ok;
offline_store(U, S, #offline_msg{timestamp = T, from = F, packet = P}, {MaxMessages, MaxBytes}) ->
    transaction(
      fun() ->
              ok = xact_lock(?USER_LOCK, {U, S}),
              case write(offline_insert_within, [S, U, T, F, P, MaxMessages, MaxBytes]) of
                  {count, 1} -> ok;
                  {count, 0} -> {error, full}
              end
      end).

-spec offline_count(binary(), binary()) -> non_neg_integer().
offline_count(U, S) ->
    [[N]] = read(offline_count, [S, U]),
    N.

%% @doc Messages stored for every user of the database.
-spec offline_total() -> non_neg_integer().
offline_total() ->
    [[Messages, _Bytes]] = read(offline_totals, []),
    Messages.

%% @doc The bytes of every message stored in the database.
-spec offline_bytes() -> non_neg_integer().
offline_bytes() ->
    [[_Messages, Bytes]] = read(offline_totals, []),
    Bytes.

%% @doc The database every node of one cluster must share.
-spec cluster_identity() -> {pgsql, term(), term(), term()}.
cluster_identity() ->
    Get = fun(K) -> throng_config:get([storage, pgsql, K]) end,
    {pgsql, Get(host), Get(port), Get(database)}.

%%% Messages in flight to sessions (XEP-0198)

node_name() ->
    atom_to_binary(node()).

new_key(U, S) ->
    {{U, S}, node(), erlang:unique_integer([positive])}.

-spec inflight_put(binary(), binary(), pid(), [#offline_msg{}]) -> [throng_storage:inflight_key()].
inflight_put(_U, _S, _Owner, []) ->
    [];
inflight_put(U, S, Owner, Msgs) ->
    Keys = [new_key(U, S) || _ <- Msgs],
    _ = write(inflight_insert, inflight_rows(U, S, Owner, lists:zip(Keys, Msgs))),
    Keys.

inflight_rows(U, S, Owner, Rows) ->
    [S, U, node_name(), term_to_binary(Owner),
     {array, int8, [Seq || {{_, _, Seq}, _} <- Rows]},
     {array, int8, [T || {_, #offline_msg{timestamp = T}} <- Rows]},
     {array, text, [F || {_, #offline_msg{from = F}} <- Rows]},
     {array, bytea, [P || {_, #offline_msg{packet = P}} <- Rows]}].

%% Keys as four arrays: servers, users, nodes, numbers.
keys(Keys) ->
    [{array, text, [S || {{_, S}, _, _} <- Keys]},
     {array, text, [U || {{U, _}, _, _} <- Keys]},
     {array, text, [atom_to_binary(N) || {_, N, _} <- Keys]},
     {array, int8, [Seq || {_, _, Seq} <- Keys]}].

%% Not waited on: a delete lost in a crash only makes a message delivered
%% twice.
-spec inflight_delete([throng_storage:inflight_key()]) -> ok.
inflight_delete(Keys) ->
    transaction(fun() -> write(inflight_delete, keys(Keys)) end, #{wait => false}),
    ok.

transaction(Fun, Opts) ->
    throng_pgsql:transaction(Fun, Opts).

%% The user's offline messages move into flight in one transaction, oldest
%% first; a user with none costs one read. When the commit's outcome is
%% unknown (the connection broke or timed out after COMMIT was sent), the
%% messages are put back before the error is raised, as the contract asks:
%% if the commit did land they would otherwise sit in flight, owned by a
%% session that never got them, until that session ends. Putting back is
%% harmless if it did not (the statement moves only rows that exist).
-spec inflight_claim(binary(), binary(), pid()) -> [{throng_storage:inflight_key(), #offline_msg{}}].
inflight_claim(U, S, Owner) ->
    case read(offline_exists, [S, U]) of
        [[false]] -> [];
        [[true]] ->
            try claim(U, S, Owner)
            catch error:{storage_failed, {sync, _}} = E:Stack ->
                    put_back(get(?CLAIMED)),
                    erlang:raise(error, E, Stack)
            after
                erase(?CLAIMED)
            end
    end.

claim(U, S, Owner) ->
    transaction(
      fun() ->
              {rows, Rows} = write(offline_take, [S, U]),
              Msgs = [#offline_msg{timestamp = T, from = F, packet = P}
                      || {T, _Id, F, P} <- lists:sort([list_to_tuple([T, Id, F, P])
                                                        || [Id, T, F, P] <- Rows])],
              Claimed = [{new_key(U, S), M} || M <- Msgs],
              put(?CLAIMED, [K || {K, _} <- Claimed]),
              case Claimed of
                  [] -> [];
                  _ -> _ = write(inflight_insert, inflight_rows(U, S, Owner, Claimed)),
                       Claimed
              end
      end).

put_back(undefined) -> ok;
put_back([]) -> ok;
put_back(Keys) ->
    try inflight_return(Keys)
    catch error:{storage_failed, Why} ->
            logger:error(#{what => offline_put_back_failed, reason => Why,
                           messages => length(Keys)})
    end.

%% In flight back to offline storage, in one statement, outside the user's
%% limits (these messages had been accepted).
-spec inflight_return([throng_storage:inflight_key()]) -> ok.
inflight_return(Keys) ->
    _ = write(inflight_return, keys(Keys)),
    ok.

%% This node's rows go back to offline storage: every one (at start-up), or
%% those whose session process is gone (orphans); or every row of another
%% node (it went down: a cluster member does this). Returns how many.
-spec inflight_recover(all | orphans | {node, node()}) -> non_neg_integer().
inflight_recover({node, Node}) ->
    Lost = [{{U, S}, Node, Seq}
            || [S, U, Seq, _Owner] <- read(inflight_of_node, [atom_to_binary(Node)])],
    return_batches(Lost),
    length(Lost);
inflight_recover(Which) ->
    Lost = [{{U, S}, node(), Seq} || [S, U, Seq, Owner] <- read(inflight_of_node, [node_name()]),
                                     Which =:= all orelse not alive(Owner)],
    return_batches(Lost),
    length(Lost).

return_batches([]) -> ok;
return_batches(Keys) ->
    {Batch, Rest} = split(Keys),
    inflight_return(Batch),
    return_batches(Rest).

%% A session of an earlier run of this node is a pid that is_process_alive
%% refuses.
alive(Owner) ->
    try is_process_alive(binary_to_term(Owner))
    catch error:badarg -> false
    end.

-spec inflight_nodes() -> [node()].
inflight_nodes() ->
    [binary_to_atom(N) || [N] <- read(inflight_nodes, [])].

-spec inflight_count() -> non_neg_integer().
inflight_count() ->
    [[N]] = read(inflight_count, [node_name()]),
    N.

%% @doc Runs F. Each write in it is durable when it returns; there is
%% nothing left to make durable at the end.
-spec batch(fun(() -> Result)) -> Result.
batch(F) ->
    F().

%% Holds, until the end of the transaction, the advisory lock of Term among
%% the locks of kind Kind (two terms may share one: they then wait for each
%% other, no more).
xact_lock(Kind, Term) ->
    _ = read(xact_lock, [Kind, erlang:phash2(Term, 1 bsl 31)]),
    ok.

%%% Key-value store of extension modules

key(Key) ->
    term_to_binary(Key, [deterministic, {minor_version, 2}]).

-spec kv_get(atom(), term()) -> {ok, term()} | not_found.
kv_get(Bucket, Key) when is_atom(Bucket) ->
    case read(kv_get, [atom_to_binary(Bucket), key(Key)]) of
        [[Value]] -> {ok, binary_to_term(Value)};
        [] -> not_found
    end.

%% One transaction under an advisory lock on the entry (there may be no
%% row to lock); inside another transaction, part of it.
-spec kv_update(atom(), term(), throng_storage:kv_fun(R)) -> R.
kv_update(Bucket, Key, Fun) when is_atom(Bucket) ->
    transaction(
      fun() ->
              ok = xact_lock(?KV_LOCK, {Bucket, Key}),
              {Reply, Change} = Fun(kv_get(Bucket, Key)),
              ok = case Change of
                       keep -> ok;
                       delete -> kv_delete(Bucket, Key);
                       {put, New} -> kv_put(Bucket, Key, New)
                   end,
              Reply
      end).

-spec kv_put(atom(), term(), term()) -> ok.
kv_put(Bucket, Key, Value) when is_atom(Bucket) ->
    {count, 1} = write(kv_put, [atom_to_binary(Bucket), key(Key), term_to_binary(Value)]),
    ok.

%% The commit does not wait for the server's WAL flush
%% (synchronous_commit off for this transaction).
-spec kv_put_soon(atom(), term(), term()) -> ok.
kv_put_soon(Bucket, Key, Value) ->
    transaction(fun() -> kv_put(Bucket, Key, Value) end, #{wait => false}).

-spec kv_delete(atom(), term()) -> ok.
kv_delete(Bucket, Key) when is_atom(Bucket) ->
    _ = write(kv_delete, [atom_to_binary(Bucket), key(Key)]),
    ok.

%% A scan of the bucket: for administration and tests.
-spec kv_keys(atom()) -> [term()].
kv_keys(Bucket) when is_atom(Bucket) ->
    [binary_to_term(K) || [K] <- read(kv_keys, [atom_to_binary(Bucket)])].

%%% Message archive (XEP-0313)

-spec mam_store(binary(), binary(), #mam_msg{}) -> non_neg_integer().
mam_store(U, S, #mam_msg{id = Id, peer = {Bare, Res}, packet = Packet} = Msg) ->
    case write(mam_insert, [S, U, Id, Bare, Res, Packet]) of
        {count, 1} -> Id;
        {count, 0} -> mam_store(U, S, Msg#mam_msg{id = Id + 1})
    end.

%% One transaction: one commit (and one flush of the log) for all.
-spec mam_store_many([{binary(), binary(), #mam_msg{}}]) -> [non_neg_integer()].
mam_store_many([{U, S, Msg}]) ->
    [mam_store(U, S, Msg)];
mam_store_many(Items) ->
    transaction(fun() -> [mam_store(U, S, Msg) || {U, S, Msg} <- Items] end, #{}).

-spec mam_query(binary(), binary(), #mam_filter{}, throng_storage:mam_direction(),
                non_neg_integer()) -> [#mam_msg{}].
mam_query(U, S, #mam_filter{ids = any, min = Min, max = Max, with = With}, Direction, Limit) ->
    {Name, WithParams} = case {With, Direction} of
                             {any, forward} -> {mam_query_asc, []};
                             {any, backward} -> {mam_query_desc, []};
                             {{Bare, any}, forward} -> {mam_query_bare_asc, [Bare]};
                             {{Bare, any}, backward} -> {mam_query_bare_desc, [Bare]};
                             {{Bare, Res}, forward} -> {mam_query_full_asc, [Bare, Res]};
                             {{Bare, Res}, backward} -> {mam_query_full_desc, [Bare, Res]}
                         end,
    Msgs = [mam_msg(Row) || Row <- read(Name, [S, U, Min, Max] ++ WithParams ++ [Limit])],
    case Direction of
        forward -> Msgs;
        backward -> lists:reverse(Msgs)
    end;
mam_query(U, S, Filter, Direction, Limit) ->
    Found = mam_ids(U, S, Filter),
    case Direction of
        forward -> lists:sublist(Found, Limit);
        backward -> lists:nthtail(max(0, length(Found) - Limit), Found)
    end.

%% The messages among the filter's ids (a client names a page's worth).
mam_ids(U, S, #mam_filter{ids = Ids, min = Min, max = Max, with = With}) ->
    {Bare, Res} = case With of
                      any -> {null, null};
                      {B, any} -> {B, null};
                      {B, R} -> {B, R}
                  end,
    [mam_msg(Row) || Row <- read(mam_query_ids, [S, U, Min, Max, {array, int8, Ids}, Bare, Res])].

mam_msg([Id, Bare, Res, Packet]) ->
    #mam_msg{id = Id, peer = {Bare, Res}, packet = Packet}.

%% One statement counts the set and, with a FILTER, the part below Before.
-spec mam_count(binary(), binary(), #mam_filter{}, non_neg_integer()) ->
    {non_neg_integer(), non_neg_integer()}.
mam_count(U, S, #mam_filter{ids = any, min = Min, max = Max, with = With}, Before) ->
    [[N, Below]] = case With of
                       any -> read(mam_count, [S, U, Min, Max, Before]);
                       {Bare, any} -> read(mam_count_bare, [S, U, Min, Max, Bare, Before]);
                       {Bare, Res} -> read(mam_count_full, [S, U, Min, Max, Bare, Res, Before])
                   end,
    {N, Below};
mam_count(U, S, Filter, Before) ->
    Ids = [Id || #mam_msg{id = Id} <- mam_ids(U, S, Filter)],
    {length(Ids), length([Id || Id <- Ids, Id < Before])}.

-spec mam_delete_user(binary(), binary()) -> ok.
mam_delete_user(U, S) ->
    _ = write(mam_delete_user, [S, U]),
    ok.

-spec mam_expire(binary(), non_neg_integer(), non_neg_integer() | infinity) -> non_neg_integer().
mam_expire(S, Before, MaxPerUser) ->
    {count, Old} = write(mam_expire_age, [S, Before]),
    case MaxPerUser of
        infinity -> Old;
        _ -> {count, Over} = write(mam_expire_count, [S, MaxPerUser]),
             Old + Over
    end.
