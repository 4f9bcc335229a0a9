%% @doc What the server tells about itself: the one API through which the
%% statistics application (apps/throng_stats) reads Throng. Nothing outside
%% the `throng' application needs to know a table name, a persistent_term key
%% or a supervisor of the server.
%%
%% Every function is a cheap read (a counter, an atomic, a table's size, one
%% ets:next), never a message to a server process, so it may be called every
%% second on a node holding a million connections. While the server is not
%% running (not started yet, or restarting) each answers with an empty list
%% or `undefined' instead of failing.
-module(throng_info).

-export([metrics/0, metric_values/0, sessions/0, next_session/1, listeners/0,
         offline_total/0, hot_queues/0, clear_hot_queues/1]).

-opaque session_cursor() :: throng_sm:key().
-type listener() :: #{index := pos_integer(), port := inet:port_number(),
                      connections := integer(), max := pos_integer() | infinity}.
-type hot_queue() :: {pid(), Length :: non_neg_integer(), Since :: integer()}.
-export_type([session_cursor/0, listener/0, hot_queue/0]).

%% @doc The server's counters, each declared once in {@link throng_metrics}:
%% metric name, kind (counter or gauge), unit, help and the counters (with
%% their labels) that hold it. Available whether the server runs or not.
-spec metrics() -> [throng_metrics:metric()].
metrics() ->
    throng_metrics:metrics().

%% @doc Every counter's value now, as {Metric, Labels, Value} (the metric and
%% labels of {@link metrics/0}); [] before the server has started.
-spec metric_values() -> [{atom(), throng_metrics:labels(), integer()}].
metric_values() ->
    try throng_metrics:all() of
        Values ->
            [{Name, Labels, maps:get(C, Values)}
             || #{name := Name, counters := Cs} <- throng_metrics:metrics(), {C, Labels} <- Cs]
    catch error:badarg -> []
    end.

%% @doc Bound sessions (resources) on this node.
-spec sessions() -> non_neg_integer() | undefined.
sessions() ->
    case up(throng_table_owner) of   %% the owner of the session table
        true -> throng_sm:count();
        false -> undefined
    end.

%% @doc A session to sample: the one after Cursor (undefined: the first),
%% wrapping around at the end, with the new cursor to pass next time; none
%% without sessions. Calling it repeatedly visits every session in turn.
-spec next_session(session_cursor() | undefined) -> {session_cursor(), pid()} | none.
next_session(Cursor) ->
    try throng_sm:next(Cursor)
    catch error:badarg -> none   %% the session table is gone (server stopping)
    end.

%% @doc The listeners in configuration order: index, the TCP port really bound
%% (port 0 in the configuration picks one), connections held, max_connections.
-spec listeners() -> [listener()].
listeners() ->
    case up(throng_listeners_sup) of
        false -> [];
        true -> lists:append([listener(Ref) || Ref <- throng_listeners_sup:listeners()])
    end.

listener({listener, I} = Ref) ->
    try throng_listener:info(Ref) of
        #{opts := Opts, max := Max} ->
            Port = try throng_listener:port(Ref) catch _:_ -> maps:get(port, Opts, 0) end,
            [#{index => I, port => Port, connections => throng_listener:connections(Ref),
               max => Max}]
    catch error:badarg -> []   %% not started (yet)
    end.

%% @doc Messages held in offline storage for all users together; undefined
%% when storage is not running.
-spec offline_total() -> non_neg_integer() | undefined.
offline_total() ->
    case up(throng_sup) of
        false -> undefined;
        true ->
            try throng_storage:offline_total()
            catch
                error:badarg -> undefined;   %% no backend chosen yet
                error:{storage_failed, _} -> undefined;   %% the database does not answer
                exit:_ -> undefined          %% the backend's database is not running
            end
    end.

%% @doc Processes that reported a message queue longer than stats.queue_alarm
%% (see {@link throng_metrics:check_queue/0}), with the length and the time
%% (system time, ms) of the report.
-spec hot_queues() -> [hot_queue()].
hot_queues() ->
    try throng_metrics:hot_queues() catch error:badarg -> [] end.

%% @doc Forgets reports of queues that drained or processes that died (the
%% rows exactly as {@link hot_queues/0} returned them: a newer report of the
%% same process stays).
-spec clear_hot_queues([hot_queue()]) -> ok.
clear_hot_queues(Rows) ->
    try lists:foreach(fun throng_metrics:clear_hot_queue/1, Rows)
    catch error:badarg -> ok
    end.

%% Whether a registered process of the server runs.
up(Name) ->
    is_pid(whereis(Name)).
