%% @doc Statements and transactions on the PostgreSQL pool, in the calling
%% process: a call borrows a connection ({@link throng_pgsql_conn}), runs
%% prepared statements of {@link throng_pgsql_sql} on it, and gives it back,
%% whatever happens.
%%
%% Failures follow the contract of {@link throng_storage}: they raise
%% `error({storage_failed, Reason})'.
%% <ul>
%% <li>`{aborted, db_down}': no connection (the database is down or
%%     unreachable; the pool reconnects by itself);
%%     `{aborted, {pool_timeout, Ms}}': every connection busy for Ms.</li>
%% <li>`{aborted, {pgsql, Code, Message}}': the server refused a statement
%%     (SQLSTATE Code); the transaction was rolled back.</li>
%% <li>`{aborted, {connection, Why}}': the connection broke or a statement
%%     timed out before the commit was sent; nothing was committed.</li>
%% <li>`{sync, {commit_unknown, Why}}': the connection broke or timed out
%%     after a commit (or a write outside a transaction) was sent and before
%%     its answer: the server may or may not have committed it.</li>
%% </ul>
%% Writes are durable when they return: each connection runs with
%% `synchronous_commit' on, so the server answers a commit once it is
%% flushed to its write-ahead log.
-module(throng_pgsql).

-export([read/2, write/2, transaction/1, transaction/2, using/3]).
-export([encode/1, decode/1, groups_literal/1]).
%% API used by tests (the binary forms of values, tested by themselves).
-ignore_xref([{encode, 1}, {decode, 1}]).

-type param() :: binary() | integer() | null | boolean()
               | {array, text | bytea | int8 | bool, [binary() | integer() | boolean()]}.
-type value() :: binary() | integer() | boolean() | [binary()] | null.
-type row() :: [value()].
-type result() :: {rows, [row()]} | {count, non_neg_integer()}.
-export_type([param/0, value/0, row/0, result/0]).

%% The connection this process is using (inside a transaction, or given by
%% using/3): the connection, the statement timeout, whether a transaction
%% is open.
-define(CONN, {?MODULE, conn}).
%% The client timeout of a statement exceeds the server's statement_timeout
%% by this much, so that the server's cancel (a clean error) comes first.
-define(MARGIN_MS, 2000).

%% @doc Runs a statement that writes nothing: its rows.
-spec read(throng_pgsql_sql:name(), [param()]) -> [row()].
read(Name, Params) ->
    {rows, Rows} = run(Name, Params, read),
    Rows.

%% @doc Runs a statement that writes: the rows it returns, or how many rows
%% it changed. Outside a transaction it is one by itself, durable when this
%% returns.
-spec write(throng_pgsql_sql:name(), [param()]) -> result().
write(Name, Params) ->
    run(Name, Params, write).

%% @doc Runs Fun in one transaction: every statement Fun runs goes to the
%% same connection, committed together when Fun returns and rolled back
%% when it raises (whatever it raises comes out as storage_failed). Inside
%% a transaction, a nested one is part of it.
-spec transaction(fun(() -> Result)) -> Result.
transaction(Fun) ->
    transaction(Fun, #{}).

%% @doc As {@link transaction/1}. `#{wait => false}': the commit returns
%% without waiting for the flush of the log (for writes whose loss in a
%% crash is harmless).
-spec transaction(fun(() -> Result), #{wait => boolean()}) -> Result.
transaction(Fun, Opts) ->
    case get(?CONN) of
        {_Conn, _Timeout, true} -> Fun();
        {Conn, Timeout, false} -> in_transaction(Conn, Timeout, Fun, Opts);
        undefined -> with_conn(fun(Conn, Timeout) -> in_transaction(Conn, Timeout, Fun, Opts) end)
    end.

%% @doc Runs Fun with its statements on Conn, a connection of the caller's
%% own ({@link throng_pgsql_conn:open/1}) rather than one of the pool:
%% for the start-up, before the pool runs.
-spec using(pid(), pos_integer(), fun(() -> Result)) -> Result.
using(Conn, Timeout, Fun) ->
    Before = put(?CONN, {Conn, Timeout, false}),
    try Fun()
    after restore(Before)
    end.

restore(undefined) -> erase(?CONN);
restore(Before) -> put(?CONN, Before).

in_transaction(Conn, Timeout, Fun, Opts) ->
    Before = put(?CONN, {Conn, Timeout, true}),
    try open_transaction(Conn, Timeout, Fun, Opts)
    after restore(Before)
    end.

open_transaction(Conn, Timeout, Fun, Opts) ->
    Begin = case Opts of
                #{wait := false} -> "BEGIN; SET LOCAL synchronous_commit TO off";
                _ -> "BEGIN"
            end,
    _ = simple(Conn, Timeout, Begin, aborted),
    Result = try Fun()
             catch
                 Class:Reason:Stack ->
                     rollback(Conn, Timeout),
                     case {Class, Reason} of
                         {error, {storage_failed, _}} -> erlang:raise(Class, Reason, Stack);
                         _ -> failed({aborted, {Class, Reason}})
                     end
             end,
    case simple(Conn, Timeout, "COMMIT", sync) of
        [<<"COMMIT">>] -> Result;
        _ -> failed({aborted, rolled_back})
    end.

rollback(Conn, Timeout) ->
    case throng_pgsql_conn:squery(Conn, "ROLLBACK", Timeout) of
        {ok, _} -> ok;
        {error, _} -> throng_pgsql_conn:kill(Conn)
    end.

%% A statement in the simple protocol (transaction control): its command
%% tags. A broken connection after a COMMIT was sent leaves its outcome
%% unknown.
simple(Conn, Timeout, Sql, OnLost) ->
    case throng_pgsql_conn:squery(Conn, Sql, Timeout + ?MARGIN_MS) of
        {ok, Results} -> [Tag || {Tag, _Rows} <- Results];
        {error, {pgsql, Fields}} -> failed({aborted, pg_error(Fields)});
        {error, {connection, Why}} ->
            throng_pgsql_conn:kill(Conn),
            failed(lost(OnLost, Why))
    end.

%% A connection that was already gone received nothing: no connection.
lost(_, {noproc, _}) -> {aborted, db_down};
lost(aborted, Why) -> {aborted, {connection, Why}};
lost(sync, Why) -> {sync, {commit_unknown, Why}}.

run(Name, Params, Kind) ->
    OnLost = case Kind of read -> aborted; write -> sync end,
    case get(?CONN) of
        {Conn, Timeout, true} -> execute(Conn, Timeout, Name, Params, aborted);
        {Conn, Timeout, false} -> execute(Conn, Timeout, Name, Params, OnLost);
        undefined ->
            with_conn(fun(Conn, Timeout) -> execute(Conn, Timeout, Name, Params, OnLost) end)
    end.

%% Borrows a connection of the pool for Fun(Conn, Timeout) and gives it
%% back, whatever happens. A pool process without a connection (still
%% reconnecting after an outage) answers at once, and the next one is
%% asked; a busy one is waited for.
with_conn(Fun) ->
    case throng_pgsql_sup:pick() of
        undefined -> failed({aborted, db_down});
        {Pools, Timeout} -> with_conn(Pools, Timeout, Fun)
    end.

with_conn([], _Timeout, _Fun) ->
    failed({aborted, db_down});
with_conn([Pool | Others], Timeout, Fun) ->
    case throng_pgsql_conn:checkout(Pool, Timeout) of
        {ok, Conn, Ref} ->
            try Fun(Conn, Timeout)
            after throng_pgsql_conn:release(Pool, Ref)
            end;
        {error, db_down} ->
            with_conn(Others, Timeout, Fun);
        {error, Why} ->
            failed({aborted, Why})
    end.

%% The driver's execute of a prepared statement, with our timeout (its
%% pgsql:execute/3 waits at most the gen_server default of 5 s): the same
%% request it sends.
execute(Conn, Timeout, Name, Params, OnLost) ->
    Request = {execute, {atom_to_list(Name), [encode(P) || P <- Params]}},
    try gen_server:call(Conn, Request, Timeout + ?MARGIN_MS) of
        {ok, {Command, Count}} when is_atom(Command), is_integer(Count) ->
            {count, Count};
        {ok, {Tag, Rows}} when is_binary(Tag), is_list(Rows) ->
            {rows, [[decode(V) || V <- Row] || Row <- Rows]};
        {error, Fields} ->
            failed({aborted, pg_error(Fields)});
        Other ->
            failed({aborted, {unexpected, Name, Other}})
    catch
        exit:Why ->
            throng_pgsql_conn:kill(Conn),
            failed(lost(OnLost, Why))
    end.

pg_error(Fields) when is_list(Fields) ->
    {pgsql, proplists:get_value(code, Fields), proplists:get_value(message, Fields)};
pg_error(Other) ->
    {pgsql, undefined, Other}.

-spec failed(throng_storage:failure()) -> no_return().
failed(Reason) ->
    error({storage_failed, Reason}).

%%% Values

%% @doc A parameter as the driver sends it: a binary goes in binary format
%% (text and bytea as they are), an integer as text; booleans and arrays
%% are made binary here.
-spec encode(param()) -> binary() | integer() | null.
encode(true) -> <<1>>;
encode(false) -> <<0>>;
encode({array, Type, Elements}) -> array(Type, Elements);
encode(P) when is_binary(P); is_integer(P); P =:= null -> P.

%% PostgreSQL's binary array format, one dimension.
array(Type, []) ->
    <<0:32, 0:32, (oid(Type)):32>>;
array(Type, Elements) ->
    iolist_to_binary([<<1:32, 0:32, (oid(Type)):32, (length(Elements)):32, 1:32>>
                      | [array_element(Type, E) || E <- Elements]]).

oid(bool) -> 16;
oid(bytea) -> 17;
oid(int8) -> 20;
oid(text) -> 25.

array_element(int8, I) -> <<8:32, I:64/signed>>;
array_element(bool, B) -> <<1:32, (encode(B))/binary>>;
array_element(_, Bin) -> <<(byte_size(Bin)):32, Bin/binary>>.

%% @doc A result column as the driver gives it (in binary format, tagged
%% with its type name) as an Erlang value.
-spec decode({atom(), binary() | null} | null) -> value().
decode(null) -> null;
decode({_, null}) -> null;
decode({Int, B}) when Int =:= int2; Int =:= int4; Int =:= int8; Int =:= numeric ->
    binary_to_integer(B);
decode({bool, <<"1">>}) -> true;
decode({bool, <<"0">>}) -> false;
decode({'_text', B}) -> text_array(B);
decode({_, B}) when is_binary(B) -> B.

text_array(<<0:32, _Flags:32, _Oid:32>>) ->
    [];
text_array(<<1:32, _Flags:32, _Oid:32, N:32, _Lower:32, Elements/binary>>) ->
    text_elements(N, Elements).

text_elements(0, <<>>) -> [];
text_elements(N, <<Len:32, E:Len/binary, Rest/binary>>) -> [E | text_elements(N - 1, Rest)].

%% @doc A list of strings as the text literal of a text[] (each element
%% double-quoted, with `\' and `"' escaped), for a parameter cast to text[]
%% on the server.
-spec groups_literal([binary()]) -> binary().
groups_literal(Groups) ->
    Quoted = [[$", binary:replace(binary:replace(G, <<"\\">>, <<"\\\\">>, [global]),
                                  <<"\"">>, <<"\\\"">>, [global]), $"] || G <- Groups],
    iolist_to_binary([${, lists:join($,, Quoted), $}]).
