%% bench/probe.py and bench/plateau.py against real BEAM nodes: what the
%% probe counts from outside (a node's CPU, context switches, distribution
%% segments; a process tree's CPU) grows with what the nodes did, and the
%% plateau line reads two snapshots into per-message counts; and
%% bench/wake_floor.sh runs each half in Erlang or in C (bench/wake_floor.c).
-module(bench_probe_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, init_per_suite/1, end_per_suite/1]).
-export([counts_what_the_nodes_did/1, plateau_reads_the_snapshots/1,
         wake_floor_runs_either_half_in_c/1]).

-define(CALLS, 300).

all() -> [counts_what_the_nodes_did, plateau_reads_the_snapshots,
          wake_floor_runs_either_half_in_c].

init_per_suite(Config) ->
    Root = throng_ct:repo_root(),
    case {os:find_executable("python3"), os:find_executable("ss"),
          filelib:is_file(filename:join(Root, "bench/probe.py"))} of
        {false, _, _} -> {skip, "python3 not found"};
        {_, false, _} -> {skip, "ss (iproute2) not found"};
        {_, _, false} -> {skip, "bench/probe.py not found from " ++ Root};
        _ ->
            Started = case node() of
                          nonode@nohost ->
                              Name = list_to_atom("probe_ct_" ++ os:getpid() ++ "@127.0.0.1"),
                              {ok, _} = throng_ct:start_distribution(Name, longnames),
                              true;
                          _ -> false
                      end,
            [{root, Root}, {started_dist, Started} | Config]
    end.

end_per_suite(Config) ->
    case ?config(started_dist, Config) of
        true -> net_kernel:stop();
        _ -> ok
    end,
    Config.

%% A node that answered ?CALLS calls sent at least ?CALLS segments on its
%% distribution connection and received as many; the caller likewise; the
%% counts only grow. A tree entry counts its processes for CPU only, and
%% leaves out the processes named as nodes.
counts_what_the_nodes_did(Config) ->
    {ok, Peer, Node} = peer:start_link(#{name => peer:random_name(probe_peer),
                                         host => "127.0.0.1", longnames => true}),
    PeerPid = erpc:call(Node, os, getpid, []),
    Sleep = open_port({spawn, "sleep 60"}, []),
    {os_pid, SleepPid} = erlang:port_info(Sleep, os_pid),
    Args = ["peer=" ++ PeerPid, "me=" ++ os:getpid(), "self=tree:" ++ os:getpid(),
            "gen=tree:" ++ integer_to_list(SleepPid)],
    A = probe(Config, Args),
    [true = erpc:call(Node, erlang, garbage_collect, [], 5000) || _ <- lists:seq(1, ?CALLS)],
    B = probe(Config, Args),
    port_close(Sleep),
    peer:stop(Peer),
    #{<<"nodes">> := #{<<"peer">> := P0, <<"me">> := M0, <<"gen">> := G0}} = A,
    #{<<"nodes">> := #{<<"peer">> := P1, <<"me">> := M1, <<"gen">> := G1,
                       <<"self">> := S1}} = B,
    ?assert(grew(P0, P1, <<"dist_segs_out">>) >= ?CALLS),
    ?assert(grew(P0, P1, <<"dist_segs_in">>) >= ?CALLS),
    ?assert(grew(M0, M1, <<"dist_segs_out">>) >= ?CALLS),
    ?assert(grew(M0, M1, <<"dist_segs_in">>) >= ?CALLS),
    ?assert(grew(P0, P1, <<"ctxsw">>) > 0),
    ?assert(grew(P0, P1, <<"cpu_ticks">>) >= 0),
    ?assertNot(is_map_key(<<"dist_segs_out">>, G1)),
    ?assertEqual(1, maps:get(<<"processes">>, G1)),
    ?assert(grew(G0, G1, <<"cpu_ticks">>) >= 0),
    %% This VM is named ("me"): the tree under it leaves it out, with what
    %% runs under it (the peer node, the sleep, the probe itself).
    ?assertEqual(0, maps:get(<<"processes">>, S1)),
    ?assertEqual(8, length(maps:get(<<"cpu">>, B))),
    ?assert(maps:get(<<"t">>, B) > maps:get(<<"t">>, A)).

%% Two snapshots and a 30-second plateau of 100 sessions at 10 messages a
%% second: the second line gives the servers' share and the segments per
%% message the snapshots say.
plateau_reads_the_snapshots(Config) ->
    Dir = filename:join(?config(priv_dir, Config), "run"),
    ok = filelib:ensure_path(Dir),
    Rows = [io_lib:format("~b,100,10~n", [T]) || T <- lists:seq(1, 40)],
    ok = file:write_file(filename:join(Dir, "timeseries.csv"),
                         ["t,sessions,msgs_sent_s\n" | Rows]),
    ok = file:write_file(filename:join(Dir, "nodes.csv"),
                         ["t,node,server_cpu_pct\n"
                          | [io_lib:format("~b,1,5.0~n", [T]) || T <- lists:seq(1, 40)]]),
    %% 20 s apart: the node used 100 ticks (5 %), sent 400 segments (20/s:
    %% 2 per message at 10/s) and switched 2,000 times (10 per message); the
    %% generator used 40 ticks (2 %).
    ok = file:write_file(filename:join(Dir, "probe.jsonl"),
                         [snapshot(100.0, 1000, 5000, 7000, 300), snapshot(120.0, 1100, 5400, 9000, 340)]),
    Out = os:cmd("python3 " ++ filename:join(?config(root, Config), "bench/plateau.py") ++ " " ++ Dir),
    ct:log("~s", [Out]),
    ?assertMatch({match, _}, re:run(Out, "probe 20 s: servers 5.0%, load generator 2.0%, rest")),
    ?assertMatch({match, _}, re:run(Out, "2.0 dist segments, 10.0 context switches")),
    %% With a database server (a tree named database: 60 ticks, 3 %) it
    %% has its own share, taken from neither the load generator's nor the
    %% rest (the machine: 400 busy ticks in 20 s, 20 %).
    ok = file:write_file(filename:join(Dir, "probe.jsonl"),
                         [snapshot(100.0, 1000, 5000, 7000, 300, {0, 200}),
                          snapshot(120.0, 1100, 5400, 9000, 340, {400, 260})]),
    Db = os:cmd("python3 " ++ filename:join(?config(root, Config), "bench/plateau.py") ++ " " ++ Dir),
    ct:log("~s", [Db]),
    ?assertMatch({match, _}, re:run(Db, "servers 5.0%, load generator 2.0%, database 3.0%, "
                                    "rest 10.0%")).

%% The floor script with a C server and an Erlang client, then the other
%% way round with the C client's coalescing tick: both print each side's
%% CPU per packet, and the sends add up to about RATE x SECONDS (Poisson
%% counts: 100 a second for 12 s less each connection's first gap). A half
%% named neither erlang nor c is refused.
wake_floor_runs_either_half_in_c(Config) ->
    case os:find_executable("cc") of
        false -> {skip, "no C compiler (cc)"};
        _ ->
            Script = filename:join(?config(root, Config), "bench/wake_floor.sh"),
            Port = integer_to_list(20000 + erlang:phash2(os:getpid(), 10000)),
            Run = fun(Env) ->
                          Out = os:cmd(lists:flatten(["PORT=", Port, " ", Env, " ", Script,
                                                      " 200 100 12 2>&1; echo rc=$?"])),
                          ct:log("~s:~n~s", [Env, Out]),
                          Out
                  end,
            [begin
                 Out = Run(Env),
                 ?assertMatch({match, _}, re:run(Out, Label)),
                 ?assertMatch({match, _}, re:run(Out, "server VM: [0-9.]+ % of a core, "
                                                 "[0-9.]+ us per packet")),
                 ?assertMatch({match, _}, re:run(Out, "client VM: [0-9.]+ % of a core")),
                 {match, [Sent]} = re:run(Out, "sent ([0-9]+)", [{capture, all_but_first, list}]),
                 ?assert(list_to_integer(Sent) >= 600),
                 ?assert(list_to_integer(Sent) =< 1600),
                 ?assertMatch({match, _}, re:run(Out, "rc=0"))
             end || {Env, Label} <- [{"SERVER=c", "server c, client erlang"},
                                     {"CLIENT=c TICK_MS=5", "server erlang, client c, TICK_MS=5"}]],
            Bad = Run("SERVER=java"),
            ?assertMatch({match, _}, re:run(Bad, "SERVER is erlang or c, not java")),
            ?assertMatch({match, _}, re:run(Bad, "rc=2")),
            Short = os:cmd(Script ++ " 200 100 6 2>&1; echo rc=$?"),
            ?assertMatch({match, _}, re:run(Short, "SECONDS is at least 11 .*, not 6")),
            ?assertMatch({match, _}, re:run(Short, "rc=2"))
    end.

%%% Helpers

snapshot(T, Ticks, Segs, Sw, Gen) ->
    io_lib:format("{\"t\": ~.1f, \"cpu\": [0, 0, 0, 0, 0, 0, 0, 0], \"hz\": 100, \"nodes\": "
                  "{\"1\": {\"cpu_ticks\": ~b, \"ctxsw\": ~b, \"dist_segs_out\": ~b, "
                  "\"dist_segs_in\": 0}, \"loadgen\": {\"cpu_ticks\": ~b, \"ctxsw\": 0, "
                  "\"processes\": 3}}}~n", [T, Ticks, Sw, Segs, Gen]).

%% The same with the machine's busy ticks (user) and a database tree.
snapshot(T, Ticks, Segs, Sw, Gen, {Busy, Db}) ->
    io_lib:format("{\"t\": ~.1f, \"cpu\": [~b, 0, 0, 0, 0, 0, 0, 0], \"hz\": 100, \"nodes\": "
                  "{\"1\": {\"cpu_ticks\": ~b, \"ctxsw\": ~b, \"dist_segs_out\": ~b, "
                  "\"dist_segs_in\": 0}, \"loadgen\": {\"cpu_ticks\": ~b, \"ctxsw\": 0, "
                  "\"processes\": 3}, \"database\": {\"cpu_ticks\": ~b, \"ctxsw\": 0, "
                  "\"processes\": 5}}}~n", [T, Busy, Ticks, Sw, Segs, Gen, Db]).

probe(Config, Args) ->
    Cmd = lists:join(" ", ["python3", filename:join(?config(root, Config), "bench/probe.py") | Args]),
    Out = os:cmd(lists:flatten(Cmd)),
    ct:log("~s", [Out]),
    jiffy:decode(list_to_binary(Out), [return_maps]).

grew(Before, After, Key) ->
    maps:get(Key, After) - maps:get(Key, Before).
