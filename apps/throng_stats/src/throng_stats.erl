%% @doc Throng's live statistics: the latest per-second snapshot, the
%% dashboard's history, the HTTP port, and the terminal table of
%% `bin/throng stats' (the admin command this application registers with
%% throng_ctl while it runs). Everything here reads the throng_stats table;
%% no call waits on the collector.
-module(throng_stats).

-export([snapshot/0, history/0, http_port/0, text/0]).
-export([ctl_command/0, ctl_stats/1]).
%% Called through rpc by bench/bench_stats_overhead.escript (and tests).
-ignore_xref([{http_port, 0}]).
%% API used by tests and operators: the table of `bin/throng stats'.
-ignore_xref([{text, 0}]).
%% The registered `stats' command: throng_ctl calls it as M:F(Args).
-ignore_xref([{ctl_stats, 1}]).

-define(TAB, throng_stats).

%% @doc The latest snapshot, or undefined before the first sample.
-spec snapshot() -> map() | undefined.
snapshot() ->
    try ets:lookup(?TAB, snapshot) of
        [{snapshot, S}] -> S;
        [] -> undefined
    catch error:badarg -> undefined
    end.

%% @doc The dashboard's chart points, oldest first (at most 300).
-spec history() -> [map()].
history() ->
    try ets:match(?TAB, {{history, '$1'}, '$2'}) of
        Rows -> [P || [_, P] <- lists:sort(Rows)]
    catch error:badarg -> []
    end.

%% @doc The TCP port the HTTP endpoint is bound to (the real one when
%% stats.port is 0), or undefined when it is not listening.
-spec http_port() -> inet:port_number() | undefined.
http_port() ->
    try ets:lookup(?TAB, http) of
        [{http, _IP, Port}] -> Port;
        [] -> undefined
    catch error:badarg -> undefined
    end.

%% @doc The terminal table of the latest snapshot.
-spec text() -> iodata().
text() ->
    case snapshot() of
        undefined -> throng_stats_text:render(undefined);
        S -> throng_stats_text:render(S)
    end.

%% @doc Whether the collector runs on this node.
-spec running() -> boolean().
running() ->
    is_pid(whereis(throng_stats_collector)).

%% @doc The `stats' admin command, as registered with throng_ctl.
-spec ctl_command() -> throng_ctl:command().
ctl_command() ->
    #{name => "stats", usage => "[--once]",
      help => "Live statistics (OS, BEAM, server, message queues), redrawn every second; "
              "--once prints one snapshot",
      run => {?MODULE, ctl_stats}, redraw => true}.

%% @doc `bin/throng stats [--once]' in the node: one table (bin/throng
%% redraws it every second when given no argument); exit code 1 when the
%% collector does not run (stats.enabled false).
-spec ctl_stats([string()]) -> {0 | 1, iodata()} | usage.
ctl_stats(Args) when Args =:= []; Args =:= ["--once"] ->
    case running() of
        true -> {0, text()};
        false -> {1, "Statistics are not running on this node (stats.enabled)\n"}
    end;
ctl_stats(_Args) ->
    usage.
