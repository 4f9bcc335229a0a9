%% @doc One connection of the PostgreSQL pool: a process that owns one
%% connection of the p1_pgsql driver, lends it to one caller at a time, and
%% reconnects by itself when it is lost.
%%
%% A caller checks the connection out ({@link checkout/2}), runs its
%% statements on it directly, and gives it back ({@link release/2}); callers
%% that ask while it is lent wait, in order, until their own timeout. While
%% there is no connection, a checkout is answered `{error, db_down}' at
%% once. The process monitors the borrower: a borrower that dies with the
%% connection (perhaps in the middle of a transaction) makes it close the
%% connection, so the server rolls back, and connect again. A caller that
%% finds the connection broken (a call to it failed or timed out) kills it
%% ({@link kill/1}), with the same effect.
%%
%% Connecting runs in a helper process, so that a server that is slow to
%% answer never blocks a checkout. An attempt has a deadline (connect_timeout
%% + 2 × query_timeout + 5 s): the driver waits without a timeout for the
%% answer to its first query after the login, so a server or network that
%% goes silent at that moment would hold the attempt, and this process's
%% reconnecting, for good. At the deadline the helper and the driver's
%% process it started are killed and the attempt counts as failed. Attempts after a failure wait 100 ms,
%% then twice as long each time, up to 5 s, or none at all once another
%% process of the pool has connected (it tells the others). The first
%% attempt, at start, is waited for, so that a pool that has just started
%% serves at once.
%%
%% Each new connection is set up the same way: TCP_NODELAY, UTF-8,
%% synchronous commit on, no notices, the statement timeout, and every
%% statement of {@link throng_pgsql_sql} prepared.
%%
%% Every `idle_gc_interval' ms, if the connection is not lent, the driver's
%% two processes (pgsql_proto and the socket reader) are garbage-collected:
%% they run with the default heap settings, which keep a heap at its
%% high-water mark (a large result, a burst of writes) until a full
%% collection that an idle process never reaches. Asynchronous: the pool
%% process does not wait for it.
-module(throng_pgsql_conn).
-behaviour(gen_server).

-export([start_link/3, checkout/2, release/2, kill/1, open/1, prepare/1, close/1, squery/3,
         log_filter/2]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
%% Called by supervisors (child specs) and proc_lib; the logger filter is
%% called by logger.
-ignore_xref([{start_link, 3}, {log_filter, 2}]).

-type opts() :: #{host := binary(), port := inet:port_number(), database := binary(),
                  user := binary(), password := binary(), connect_timeout := pos_integer(),
                  query_timeout := pos_integer(), idle_gc_interval => non_neg_integer()}.
-export_type([opts/0]).

-define(MIN_BACKOFF, 100).
-define(MAX_BACKOFF, 5000).

-record(st, {name :: atom(),
             opts :: opts(),
             siblings :: [atom()],
             conn :: pid() | undefined,
             helper :: pid() | undefined,
             %% The caller the connection is lent to: its checkout reference,
             %% pid and monitor.
             holder :: {reference(), pid(), reference()} | undefined,
             waiting = queue:new() :: queue:queue({gen_server:from(), reference()}),
             backoff = ?MIN_BACKOFF :: pos_integer(),
             failures = 0 :: non_neg_integer()}).

%%% API

%% @doc Starts the pool process Name; Siblings are the other processes of
%% the pool (told when this one finds the database back after an outage,
%% so that they try at once rather than at the end of their backoff).
-spec start_link(atom(), opts(), [atom()]) -> {ok, pid()} | {error, term()}.
start_link(Name, Opts, Siblings) ->
    gen_server:start_link({local, Name}, ?MODULE, {Name, Opts, Siblings}, []).

%% @doc Borrows the connection of the pool process Name; Ref names this
%% loan in {@link release/2}. Waits at most Timeout ms for it.
-spec checkout(atom(), timeout()) ->
    {ok, pid(), reference()} | {error, db_down | {pool_timeout, timeout()}}.
checkout(Name, Timeout) ->
    Ref = make_ref(),
    try gen_server:call(Name, {checkout, Ref}, Timeout) of
        {ok, Conn} -> {ok, Conn, Ref};
        {error, db_down} -> {error, db_down}
    catch
        exit:{timeout, _} ->
            %% It may have been granted as the wait ended: give it back.
            release(Name, Ref),
            {error, {pool_timeout, Timeout}};
        exit:_ ->
            %% The pool is not running.
            {error, db_down}
    end.

%% @doc Gives back a loan (or stops waiting for one).
-spec release(atom(), reference()) -> ok.
release(Name, Ref) ->
    gen_server:cast(Name, {release, Ref}).

%% @doc Ends a connection that can no longer be trusted (a call to it failed
%% or timed out): the server rolls back what it had open, and the pool
%% process that owned it connects again. The caller unlinks it first, so
%% that its end does not take the caller with it.
-spec kill(pid()) -> ok.
kill(Conn) ->
    unlink(Conn),
    exit(Conn, kill),
    ok.

%% Opens a connection, linked to the caller, set up and with every
%% statement prepared. Every failure is returned, never raised.
-spec connect(opts()) -> {ok, pid()} | {error, term()}.
connect(Opts) ->
    case open(Opts) of
        {ok, Conn} ->
            case prepare(Conn) of
                ok -> {ok, Conn};
                {error, _} = Error -> kill(Conn), Error
            end;
        {error, _} = Error ->
            Error
    end.

%% @doc Opens a connection, linked to the caller, set up but without the
%% statements prepared (at start-up, before the schema is known to be
%% there; then {@link prepare/1}). Every failure is returned, never raised.
-spec open(opts()) -> {ok, pid()} | {error, term()}.
open(#{host := Host, port := Port, database := Db, user := User, password := Password,
       connect_timeout := ConnectTimeout} = Opts) ->
    Args = [{host, binary_to_list(Host)}, {port, Port}, {database, binary_to_list(Db)},
            {user, User}, {password, Password}, {connect_timeout, ConnectTimeout},
            {as_binary, true}],
    case catch pgsql:connect(Args) of
        {ok, Conn} ->
            link(Conn),
            nodelay(Conn),
            case setup(Conn, Opts) of
                ok -> {ok, Conn};
                {error, _} = Error -> kill(Conn), Error
            end;
        {error, Why} -> {error, Why};
        Other -> {error, Other}
    end.

%% @doc Prepares every statement of {@link throng_pgsql_sql} on Conn.
-spec prepare(pid()) -> ok | {error, term()}.
prepare(Conn) ->
    prepare(Conn, throng_pgsql_sql:statements()).

%% @doc Closes a connection politely (the server logs no lost client).
-spec close(pid()) -> ok.
close(Conn) ->
    _ = (catch gen_server:call(Conn, terminate, 1000)),
    kill(Conn).

%% @doc A statement (or several, separated by semicolons) in the simple
%% query protocol: for each, its command tag and its rows (as text), or the
%% first error's fields. A statement that fails rolls back the transaction.
-spec squery(pid(), iodata(), timeout()) ->
    {ok, [{binary(), [[binary() | null]]}]} | {error, {pgsql, list()} | {connection, term()}}.
squery(Conn, Sql, Timeout) ->
    try pgsql:squery(Conn, Sql, Timeout) of
        {ok, Results} ->
            case [E || {error, E} <- Results] of
                [] -> {ok, [result(R) || R <- Results]};
                [E | _] -> {error, {pgsql, E}}
            end
    catch
        exit:Why -> {error, {connection, Why}}
    end.

result({Tag, _Cols, Rows}) -> {Tag, Rows};
result(Tag) -> {Tag, []}.

%% The driver writes a statement's preparation as three small packets
%% (Parse, Describe, Sync) and opens its socket without TCP_NODELAY: the
%% second packet waited for the server's delayed acknowledgement of the
%% first, some 40 ms per statement (2.3 s to prepare 51 statements; 20 ms
%% with it). Its socket is the TCP port linked to the process that reads
%% it, which is linked to the connection. On a node started with `-kernel
%% inet_backend socket' the socket is no port and is not found: said once
%% per connection, as a warning.
nodelay(Conn) ->
    case [inet:setopts(Port, [{nodelay, true}])
          || Reader <- linked(Conn), is_pid(Reader), Port <- linked(Reader), is_port(Port),
             erlang:port_info(Port, name) =:= {name, "tcp_inet"}] of
        [] -> logger:warning(#{what => pgsql_nodelay_not_set,
                               reason => "no inet driver socket (-kernel inet_backend socket?)",
                               effect => "about 40 ms more per statement prepared"});
        _ -> ok
    end,
    ok.

linked(P) ->
    case erlang:process_info(P, links) of
        {links, L} -> L;
        undefined -> []
    end.

%% Session settings: what a write's acknowledgement means must not depend
%% on the server's or the role's defaults.
setup(Conn, #{query_timeout := QueryTimeout}) ->
    Settings = ["SET client_encoding TO 'UTF8'; SET synchronous_commit TO on; "
                "SET client_min_messages TO error; SET application_name TO 'throng'; "
                "SET statement_timeout TO ", integer_to_list(QueryTimeout)],
    case squery(Conn, Settings, QueryTimeout) of
        {ok, _} -> ok;
        {error, _} = Error -> Error
    end.

prepare(_Conn, []) ->
    ok;
prepare(Conn, [{Name, Sql} | Rest]) ->
    case catch pgsql:prepare(Conn, atom_to_list(Name), binary_to_list(iolist_to_binary(Sql))) of
        {ok, _Status, _Params, _Results} -> prepare(Conn, Rest);
        {error, Why} -> {error, {prepare, Name, Why}};
        Other -> {error, {prepare, Name, Other}}
    end.

%% @doc A logger filter (installed by {@link throng_pgsql_sup}) that drops
%% the crash reports of the driver's processes: a connection attempt that
%% fails, a socket the server closed. This module logs those events itself,
%% once per outage and with the reason, instead of a report per attempt.
-spec log_filter(logger:log_event(), term()) -> logger:filter_return().
log_filter(#{msg := {report, #{label := {proc_lib, crash}, report := [Info | _]}}} = Event, _) ->
    case proplists:get_value(initial_call, Info) of
        {pgsql_proto, init, _} -> stop;
        {pgsql_socket, init, _} -> stop;
        _ -> Event
    end;
log_filter(#{msg := {report, #{label := {gen_server, terminate}, reason := Reason}}} = Event, _) ->
    %% When the server closes the socket, pgsql_socket stops with tcp_close
    %% (or tcp_error), and pgsql_proto, if idle, with {socket, _}.
    case Reason of
        tcp_close -> stop;
        tcp_error -> stop;
        {socket, _} -> stop;
        _ -> Event
    end;
log_filter(Event, _) ->
    Event.

%%% gen_server

-spec init({atom(), opts(), [atom()]}) -> {ok, #st{}}.
init({Name, Opts, Siblings}) ->
    process_flag(trap_exit, true),
    St = start_connect(#st{name = Name, opts = Opts, siblings = Siblings}),
    idle_gc_timer(Opts),
    {ok, first_attempt(St)}.

%% The outcome of the first attempt, if it comes within connect_timeout
%% (a server that answers slowly does not hold up the boot: its connection
%% is taken when it comes).
first_attempt(#st{helper = Helper, opts = #{connect_timeout := Timeout}} = St) ->
    receive
        {connected, Helper, _} = Msg -> noreply(handle_info(Msg, St));
        {'EXIT', Helper, _} = Msg -> noreply(handle_info(Msg, St))
    after Timeout ->
            St
    end.

noreply({noreply, St}) -> St.

-spec handle_call(term(), gen_server:from(), #st{}) ->
    {reply, term(), #st{}} | {noreply, #st{}}.
handle_call({checkout, _Ref}, _From, #st{conn = undefined} = St) ->
    {reply, {error, db_down}, St};
handle_call({checkout, Ref}, {Pid, _}, #st{conn = Conn, holder = undefined} = St) ->
    {reply, {ok, Conn}, St#st{holder = {Ref, Pid, monitor(process, Pid)}}};
handle_call({checkout, Ref}, From, #st{waiting = Waiting} = St) ->
    {noreply, St#st{waiting = queue:in({From, Ref}, Waiting)}};
handle_call(_Msg, _From, St) ->
    {reply, {error, unknown_call}, St}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast({release, Ref}, #st{holder = {Ref, _, MRef}} = St) ->
    demonitor(MRef, [flush]),
    {noreply, lend_next(St#st{holder = undefined})};
handle_cast({release, Ref}, #st{waiting = Waiting} = St) ->
    {noreply, St#st{waiting = queue:filter(fun({_, R}) -> R =/= Ref end, Waiting)}};
handle_cast(database_back, #st{conn = undefined, helper = undefined} = St) ->
    %% Another process of the pool connected: no need to wait for the
    %% backoff (the timer's message finds this one connecting, or connected).
    {noreply, start_connect(St)};
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info({connected, Helper, Conn}, #st{helper = Helper} = St) ->
    link(Conn),
    Helper ! {taken, Conn},
    case St#st.failures of
        0 -> ok;
        Failures ->
            logger:notice(#{what => pgsql_connected, pool_process => St#st.name,
                            failed_attempts => Failures}),
            [gen_server:cast(S, database_back) || S <- St#st.siblings],
            %% Sessions that ended meanwhile may have left messages in flight.
            gen_server:cast(throng_pgsql_orphans, database_back)
    end,
    {noreply, lend_next(St#st{conn = Conn, helper = undefined, backoff = ?MIN_BACKOFF,
                              failures = 0})};
handle_info({'EXIT', Helper, Why}, #st{helper = Helper, failures = Failures} = St) ->
    %% Logged once per outage; every attempt at debug level.
    Failures =:= 0 andalso
        logger:warning(#{what => pgsql_connect_failed, pool_process => St#st.name,
                         reason => reason(Why),
                         text => "retrying with backoff; storage calls fail meanwhile"}),
    logger:debug(#{what => pgsql_connect_attempt_failed, pool_process => St#st.name,
                   reason => reason(Why), attempt => Failures + 1}),
    erlang:send_after(St#st.backoff, self(), reconnect),
    {noreply, St#st{helper = undefined, failures = Failures + 1,
                    backoff = min(?MAX_BACKOFF, St#st.backoff * 2)}};
handle_info({'EXIT', Conn, Why}, #st{conn = Conn} = St) ->
    logger:warning(#{what => pgsql_connection_lost, pool_process => St#st.name,
                     reason => Why}),
    {noreply, start_connect(lost(St))};
handle_info({'DOWN', MRef, process, _, noproc}, #st{holder = {_, _, MRef}} = St) ->
    %% Granted to a waiter that had died: it never used the connection.
    {noreply, lend_next(St#st{holder = undefined})};
handle_info({'DOWN', MRef, process, Pid, Why}, #st{holder = {_, _, MRef}, conn = Conn} = St) ->
    %% The borrower died with the connection, perhaps inside a transaction.
    logger:notice(#{what => pgsql_borrower_died, pool_process => St#st.name,
                    borrower => Pid, reason => Why}),
    kill(Conn),
    {noreply, start_connect(lost(St#st{holder = undefined}))};
handle_info({connect_deadline, Helper}, #st{helper = Helper} = St) ->
    %% Its 'EXIT' (killed) follows: a failed attempt, retried with backoff.
    logger:warning(#{what => pgsql_connect_stuck, pool_process => St#st.name,
                     deadline_ms => deadline(St#st.opts),
                     text => "the server stopped answering while the connection was set up"}),
    _ = [exit(P, kill) || P <- started_by(Helper)],
    exit(Helper, kill),
    {noreply, St};
handle_info(reconnect, #st{conn = undefined, helper = undefined} = St) ->
    {noreply, start_connect(St)};
handle_info(idle_gc, #st{conn = Conn, holder = Holder, opts = Opts} = St) ->
    Conn =/= undefined andalso Holder =:= undefined andalso
        %% The connection and the processes linked to it but this one: its
        %% socket reader (and, for a moment after connecting, the helper).
        [erlang:garbage_collect(P, [{async, idle_gc}])
         || P <- [Conn | linked(Conn)], is_pid(P), P =/= self()],
    idle_gc_timer(Opts),
    {noreply, St};
handle_info(_Msg, St) ->
    %% Among them: the normal exit of a helper, the exit of a connection
    %% already given up, the answers of the idle collections.
    {noreply, St}.

-spec terminate(term(), #st{}) -> ok.
terminate(_Why, #st{conn = undefined}) -> ok;
terminate(_Why, #st{conn = Conn}) -> close(Conn).

%%% Internals

idle_gc_timer(#{idle_gc_interval := Ms}) when Ms > 0 ->
    _ = erlang:send_after(Ms, self(), idle_gc),
    ok;
idle_gc_timer(_) ->
    ok.

%% The connection is gone: nobody holds it, and those waiting for it are
%% told now rather than at their timeout.
lost(#st{holder = Holder, waiting = Waiting} = St) ->
    case Holder of
        {_, _, MRef} -> demonitor(MRef, [flush]);
        undefined -> ok
    end,
    [gen_server:reply(From, {error, db_down}) || {From, _} <- queue:to_list(Waiting)],
    St#st{conn = undefined, holder = undefined, waiting = queue:new()}.

lend_next(#st{conn = undefined} = St) ->
    St;
lend_next(#st{holder = undefined, waiting = Waiting, conn = Conn} = St) ->
    %% A borrower that found the connection broken killed it; its exit
    %% may come after the borrower's release.
    case is_process_alive(Conn) andalso queue:out(Waiting) of
        false -> start_connect(lost(St));
        {empty, _} -> St;
        {{value, {{Pid, _} = From, Ref}}, Rest} ->
            gen_server:reply(From, {ok, Conn}),
            St#st{holder = {Ref, Pid, monitor(process, Pid)}, waiting = Rest}
    end;
lend_next(St) ->
    St.

%% The helper connects and hands the connection over; until the owner has
%% linked it, the connection is linked to the helper, which is linked to the
%% owner, so that no connection outlives its owner.
start_connect(#st{opts = Opts} = St) ->
    Owner = self(),
    Helper = spawn_link(fun() ->
                                case connect(Opts) of
                                    {ok, Conn} ->
                                        Owner ! {connected, self(), Conn},
                                        receive {taken, Conn} -> ok end;
                                    {error, Why} ->
                                        exit({connect_failed, Why})
                                end
                        end),
    _ = erlang:send_after(deadline(Opts), self(), {connect_deadline, Helper}),
    St#st{helper = Helper}.

deadline(#{connect_timeout := Connect, query_timeout := Query}) ->
    Connect + 2 * Query + 5000.

%% The processes Helper started: the driver's connection process, started
%% unlinked by pgsql:connect/1 (its socket reader is linked to it).
started_by(Helper) ->
    [P || P <- processes(), process_info(P, parent) =:= {parent, Helper}].

reason({connect_failed, Why}) -> reason(Why);
reason({Why, [{_, _, _, _} | _]}) -> Why;
reason({init, {error, Why}}) -> Why;
reason({Kind, Fields}) when is_list(Fields) ->
    case lists:keyfind(message, 1, Fields) of
        {message, Msg} -> {Kind, Msg};
        false -> {Kind, Fields}
    end;
reason(Why) -> Why.
