%% @doc The embedded storage backend: Mnesia disc_copies tables under
%% DATA_DIR/mnesia. Reads are dirty (a local ETS lookup); writes run in
%% `mnesia:sync_transaction', which returns only after the commit is written
%% to the transaction log, so a committed write survives `kill -9'.
-module(throng_storage_mnesia).
-behaviour(throng_storage).

-include("throng.hrl").

-export([init/0, child_specs/0, create_account/3, set_credentials/3, get_credentials/2, remove_account/2,
         account_exists/2, count_accounts/1, list_accounts/1, bulk_create/2,
         roster_get/2, roster_get_item/3, roster_update/4, roster_version/2,
         offline_store/4, offline_pop/2, offline_count/2, offline_total/0]).

-record(throng_account, {us :: {binary(), binary()}, creds :: #scram_creds{}}).
-record(throng_roster, {us :: {binary(), binary()}, item :: #roster_item{}}).
-record(throng_roster_ver, {us :: {binary(), binary()}, version :: non_neg_integer()}).
-record(throng_offline, {us :: {binary(), binary()}, msg :: #offline_msg{}}).

-define(TABLES,
        [{throng_account, set, record_info(fields, throng_account)},
         {throng_roster, bag, record_info(fields, throng_roster)},
         {throng_roster_ver, set, record_info(fields, throng_roster_ver)},
         {throng_offline, bag, record_info(fields, throng_offline)}]).

-spec child_specs() -> [supervisor:child_spec()].
child_specs() ->
    [#{id => throng_mnesia_sync, start => {throng_mnesia_sync, start_link, []}}].

-spec init() -> ok | {error, term()}.
init() ->
    Dir = filename:join(throng_paths:data_dir(), "mnesia"),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    %% Mnesia is started here, not as a dependency of the application,
    %% because its directory comes from Throng's configuration.
    _ = application:stop(mnesia),
    case application:load(mnesia) of
        ok -> ok;
        {error, {already_loaded, mnesia}} -> ok
    end,
    ok = application:set_env(mnesia, dir, Dir),
    %% Dump the transaction log less often: bulk registration writes
    %% millions of roster rows.
    ok = application:set_env(mnesia, dump_log_write_threshold, 50000),
    ok = application:set_env(mnesia, dc_dump_limit, 40),
    case filelib:is_regular(filename:join(Dir, "schema.DAT")) of
        true -> ok;
        false ->
            case mnesia:create_schema([node()]) of
                ok -> ok;
                {error, E} -> throw({storage, {create_schema, Dir, E}})
            end
    end,
    case application:ensure_all_started(mnesia) of
        {ok, _} -> ok;
        {error, E2} -> throw({storage, {mnesia_start, Dir, E2}})
    end,
    case lists:member(node(), mnesia:table_info(schema, disc_copies)) of
        true -> ok;
        false -> throw({storage, {schema_of_other_node, Dir, mnesia:table_info(schema, disc_copies)}})
    end,
    lists:foreach(fun create_table/1, ?TABLES),
    case mnesia:wait_for_tables([T || {T, _, _} <- ?TABLES], 600000) of
        ok -> ok;
        {timeout, Missing} -> {error, {tables_not_loaded, Missing}};
        {error, _} = Error -> Error
    end.

create_table({Name, Type, Fields}) ->
    case mnesia:create_table(Name, [{disc_copies, [node()]}, {type, Type},
                                    {attributes, Fields}]) of
        {atomic, ok} -> ok;
        {aborted, {already_exists, Name}} -> ok;
        {aborted, Why} -> throw({storage, {create_table, Name, Why}})
    end.

tx(F) ->
    case mnesia:sync_transaction(F) of
        {atomic, Result} ->
            ok = throng_mnesia_sync:sync(),
            Result;
        {aborted, Why} ->
            error({storage_aborted, Why})
    end.

%%% Accounts

-spec create_account(binary(), binary(), #scram_creds{}) -> ok | {error, exists}.
create_account(U, S, Creds) ->
    tx(fun() ->
               case mnesia:read(throng_account, {U, S}, write) of
                   [] -> mnesia:write(#throng_account{us = {U, S}, creds = Creds});
                   [_] -> {error, exists}
               end
       end).

-spec set_credentials(binary(), binary(), #scram_creds{}) -> ok | {error, not_found}.
set_credentials(U, S, Creds) ->
    tx(fun() ->
               case mnesia:read(throng_account, {U, S}, write) of
                   [] -> {error, not_found};
                   [_] -> mnesia:write(#throng_account{us = {U, S}, creds = Creds})
               end
       end).

-spec get_credentials(binary(), binary()) -> {ok, #scram_creds{}} | not_found.
get_credentials(U, S) ->
    case mnesia:dirty_read(throng_account, {U, S}) of
        [#throng_account{creds = C}] -> {ok, C};
        [] -> not_found
    end.

-spec remove_account(binary(), binary()) -> ok | {error, not_found}.
remove_account(U, S) ->
    tx(fun() ->
               case mnesia:read(throng_account, {U, S}, write) of
                   [] -> {error, not_found};
                   [_] ->
                       [mnesia:delete({T, {U, S}})
                        || T <- [throng_account, throng_roster, throng_roster_ver, throng_offline]],
                       ok
               end
       end).

-spec account_exists(binary(), binary()) -> boolean().
account_exists(U, S) ->
    mnesia:dirty_read(throng_account, {U, S}) =/= [].

-spec count_accounts(binary()) -> non_neg_integer().
count_accounts(S) ->
    length(list_accounts(S)).

-spec list_accounts(binary()) -> [binary()].
list_accounts(S) ->
    mnesia:dirty_select(throng_account, [{{throng_account, {'$1', S}, '_'}, [], ['$1']}]).

%% Batches keep each transaction (and its log record) a reasonable size.
-define(BULK_BATCH, 500).

-spec bulk_create(binary(), [throng_storage:bulk_user()]) -> ok.
bulk_create(_S, []) ->
    ok;
bulk_create(S, Users) ->
    {Batch, Rest} = split(?BULK_BATCH, Users),
    tx(fun() ->
               lists:foreach(
                 fun({U, Creds, Items}) ->
                         US = {U, S},
                         mnesia:write(#throng_account{us = US, creds = Creds}),
                         mnesia:delete({throng_roster, US}),
                         [mnesia:write(#throng_roster{us = US, item = I}) || I <- Items],
                         mnesia:write(#throng_roster_ver{us = US, version = 1})
                 end, Batch)
       end),
    bulk_create(S, Rest).

split(N, L) when length(L) =< N -> {L, []};
split(N, L) -> lists:split(N, L).

%%% Rosters

-spec roster_get(binary(), binary()) -> {non_neg_integer(), [#roster_item{}]}.
roster_get(U, S) ->
    Items = [I || #throng_roster{item = I} <- mnesia:dirty_read(throng_roster, {U, S})],
    {roster_version(U, S), Items}.

-spec roster_get_item(binary(), binary(), throng_storage:contact()) -> #roster_item{} | undefined.
roster_get_item(U, S, Contact) ->
    find(Contact, mnesia:dirty_read(throng_roster, {U, S})).

find(Contact, Rows) ->
    case [I || #throng_roster{item = #roster_item{jid = J} = I} <- Rows, J =:= Contact] of
        [I | _] -> I;
        [] -> undefined
    end.

-spec roster_update(binary(), binary(), throng_storage:contact(), throng_storage:roster_fun()) ->
    {ok, #roster_item{} | undefined, #roster_item{} | undefined, non_neg_integer()}.
roster_update(U, S, Contact, Fun) ->
    US = {U, S},
    tx(fun() ->
               Old = find(Contact, mnesia:read(throng_roster, US, write)),
               Ver = case mnesia:read(throng_roster_ver, US, write) of
                         [#throng_roster_ver{version = V}] -> V;
                         [] -> 0
                     end,
               case Fun(Old) of
                   keep ->
                       {ok, Old, Old, Ver};
                   {set, Old} ->
                       {ok, Old, Old, Ver};
                   {set, #roster_item{jid = Contact} = New} ->
                       delete_old(US, Old),
                       mnesia:write(#throng_roster{us = US, item = New}),
                       bump(US, Ver),
                       {ok, Old, New, Ver + 1};
                   delete when Old =:= undefined ->
                       {ok, undefined, undefined, Ver};
                   delete ->
                       delete_old(US, Old),
                       bump(US, Ver),
                       {ok, Old, undefined, Ver + 1}
               end
       end).

delete_old(_US, undefined) -> ok;
delete_old(US, Old) -> mnesia:delete_object(#throng_roster{us = US, item = Old}).

bump(US, Ver) ->
    mnesia:write(#throng_roster_ver{us = US, version = Ver + 1}).

-spec roster_version(binary(), binary()) -> non_neg_integer().
roster_version(U, S) ->
    case mnesia:dirty_read(throng_roster_ver, {U, S}) of
        [#throng_roster_ver{version = V}] -> V;
        [] -> 0
    end.

%%% Offline messages

-spec offline_store(binary(), binary(), #offline_msg{}, non_neg_integer()) -> ok | {error, full}.
offline_store(U, S, Msg, Max) ->
    US = {U, S},
    tx(fun() ->
               case length(mnesia:read(throng_offline, US, write)) of
                   N when N >= Max -> {error, full};
                   _ -> mnesia:write(#throng_offline{us = US, msg = Msg})
               end
       end).

-spec offline_pop(binary(), binary()) -> [#offline_msg{}].
offline_pop(U, S) ->
    US = {U, S},
    case mnesia:dirty_read(throng_offline, US) of
        [] -> [];
        _ ->
            Rows = tx(fun() ->
                              R = mnesia:read(throng_offline, US, write),
                              mnesia:delete({throng_offline, US}),
                              R
                      end),
            lists:keysort(#offline_msg.timestamp, [M || #throng_offline{msg = M} <- Rows])
    end.

-spec offline_count(binary(), binary()) -> non_neg_integer().
offline_count(U, S) ->
    length(mnesia:dirty_read(throng_offline, {U, S})).

%% @doc The size of the offline table: one row per message (a bag), read in
%% constant time.
-spec offline_total() -> non_neg_integer().
offline_total() ->
    mnesia:table_info(throng_offline, size).
