%% @doc The cluster section of an xmpp summary: per node and cluster-wide
%% figures of a run against several targets (`--targets') and/or several
%% server processes (`--server-pid' repeated). Node I is target I and
%% server pid I, in the order given; when there are more of one than of the
%% other, the missing half of a node's figures is null.
%%
%% Sessions, logins, failed users and messages are the load generator's view
%% per target (user N goes to target N mod K). Memory and CPU come from
%% /proc/PID of each server, sampled every second:
%%
%% - memory per session: a node's RSS growth (its RSS at the peak row - its
%%   lowest RSS from before the run up to that row) / the sessions on its
%%   target then; cluster-wide: the sum of the nodes' growths / all
%%   sessions then. The peak row is the last second with the most sessions
%%   (all targets) before the deadline, the same row for every node.
%% - CPU per login: a node's CPU time over the login window (from the first
%%   second with a TCP connect to the last second with a login, idle seconds
%%   inside it included, as bench/per_unit.awk does) / the logins on its
%%   target; cluster-wide: the sum of the CPU times / all logins.
%% - CPU per logout: a node's CPU time over the logout window (the rows
%%   after the peak row up to the first with no session left, or the last
%%   row; the messages of the users still online included) / the sessions
%%   its target lost over it; cluster-wide: the sum / all sessions lost.
%% - CPU per online session and second: a node's CPU time over the hold
%%   window (the rows after the login window up to the peak row: every user
%%   online, chatting as the scenario says, nobody logging in or out; 5 s
%%   cut at each end when more than 20 remain) / the
%%   session-seconds of the cluster over it (each row's mean of its own and
%%   the row before's sessions, times its seconds); cluster-wide: the sum.
%% - Net CPU per login (and logout): the CPU time over the window less what
%%   the sessions online during it would have spent anyway (the cost per
%%   session and second above times the window's session-seconds), per
%%   login (logout). The gross figure charges each login with the chatting
%%   of every user already online; the net one estimates what a login
%%   itself costs. The node's fixed cost is spread over the hold's
%%   sessions, so fewer online during a window leave a part of it in: the
%%   net figure is if anything high. Undefined without a hold window.
%%
%% Pure functions of the summary's inputs, so tested without a server.
-module(throng_bench_cluster).

-export([section/4, login_window/1, logout_window/2, hold_window/3, login_window_cpu_s/2,
         table/1, nodes_csv_columns/0, nodes_csv_lines/1]).
%% logout_window/2, hold_window/3: section/4 uses them; exported for their
%% EUnit tests.
-ignore_xref([{logout_window, 2}, {hold_window, 3}]).

%% @doc The section, or undefined for a run against one server.
%% Targets: the target labels; Servers0: [{Pid, SampleBeforeRun}];
%% Last: the final merged snapshot; Rows: the time series.
-spec section([binary()], [{pos_integer(), throng_proc_sample:sample() | undefined}],
              throng_bench_metrics:snapshot(), [map()]) -> map() | undefined.
section(Targets, Servers0, Last, Rows) ->
    N = max(length(Targets), length(Servers0)),
    case N > 1 of
        false -> undefined;
        true -> section(N, Targets, Servers0, Last, Rows)
    end.

section(N, Targets, Servers0, #{counters := C} = Last, Rows) ->
    PerTarget = maps:get(targets, Last, []),
    Peak = case Rows of
               [] -> #{};
               _ -> throng_bench_summary:peak_row(sessions, Rows)
           end,
    Window = login_window(Rows),
    Out = logout_window(Rows, Peak),
    Hold = hold_window(Rows, Window, Peak),
    Means = session_means(Rows),
    SessionS = fun(W) -> lists:sum([maps:get(maps:get(t, R), Means) * Dt || {R, Dt} <- W]) end,
    Ws = #{login => Window, logout => Out, hold => Hold,
           session_s => maps:from_list([{K, SessionS(W)} || {K, W} <- [{login, Window},
                                                                       {logout, Out},
                                                                       {hold, Hold}]])},
    Nodes = [node(I, nth(I, Targets), nth(I, Servers0), nth(I, PerTarget), Peak, Rows, Ws)
             || I <- lists:seq(1, N)],
    Growths = [G || #{rss_growth_bytes := G} <- Nodes, is_integer(G)],
    Sampled = length(Growths) =:= length(Servers0) andalso Growths =/= [],
    SessionsPeak = maps:get(sessions, Peak, 0),
    Cpu = [X || #{cpu_s_login_window := X} <- Nodes, is_number(X)],
    CpuOut = [X || #{cpu_s_logout_window := X} <- Nodes, is_number(X)],
    Net = fun(K) -> case [X || #{K := X} <- Nodes, is_number(X)] of
                        L when length(L) =:= length(Servers0) -> sum_or_undefined(L);
                        _ -> undefined
                    end
          end,
    Logouts = logouts(fun(R) -> maps:get(sessions, R, undefined) end, Peak, Out),
    Logins = maps:get(logins, C, 0),
    #{nodes => Nodes,
      total => #{nodes => N,
                 targets => length(Targets),
                 servers => length(Servers0),
                 sessions_at_peak => SessionsPeak,
                 sessions_max => throng_bench_summary:max_of(sessions, Rows),
                 logins => Logins,
                 failed => maps:get(users_failed, C, 0),
                 errors => throng_bench_summary:error_count(C),
                 messages_lost => maps:get(msgs_sent, C, 0) - maps:get(msgs_received, C, 0),
                 rss_growth_bytes => case Sampled of
                                         true -> lists:sum(Growths);
                                         false -> undefined
                                     end,
                 bytes_per_session_at_peak => case Sampled andalso SessionsPeak > 0 of
                                                  true -> round(lists:sum(Growths) / SessionsPeak);
                                                  false -> undefined
                                              end,
                 cpu_s_login_window => sum_or_undefined(Cpu),
                 cpu_ms_per_login => per_unit(sum_or_undefined(Cpu), Logins),
                 logouts => Logouts,
                 cpu_s_logout_window => sum_or_undefined(CpuOut),
                 cpu_ms_per_logout => per_unit(sum_or_undefined(CpuOut), Logouts),
                 hold_window_s => lists:sum([Dt || {_, Dt} <- Hold]),
                 cpu_us_per_session_s => Net(cpu_us_per_session_s),
                 cpu_ms_per_login_net => per_unit(Net(cpu_s_login_window_net), Logins),
                 cpu_ms_per_logout_net => per_unit(Net(cpu_s_logout_window_net), Logouts)}}.

%% The sessions lost over the logout window: at the peak row, less at the
%% window's last row.
logouts(_Sessions, _Peak, []) ->
    0;
logouts(Sessions, Peak, Out) ->
    {Last, _} = lists:last(Out),
    case {Sessions(Peak), Sessions(Last)} of
        {P, L} when is_integer(P), is_integer(L), P > L -> P - L;
        _ -> 0
    end.

node(I, Target, Server, Counts, Peak, Rows,
     #{login := Window, logout := Out, hold := Hold, session_s := SessionS}) ->
    Ix = I - 1,
    Sessions = fun(R) -> case nth(I, maps:get(targets, R, [])) of
                             #{sessions := S} -> S;
                             _ -> undefined
                         end
               end,
    TargetPart =
        case Counts of
            undefined -> #{};
            _ ->
                #{sessions_at_peak => Sessions(Peak),
                  sessions_max => max_or_undefined([Sessions(R) || R <- Rows]),
                  launched => maps:get(launched, Counts),
                  logins => maps:get(logins, Counts),
                  failed => maps:get(failed, Counts),
                  messages_sent_to => maps:get(msgs_sent_to, Counts),
                  messages_received => maps:get(msgs_received, Counts),
                  messages_lost => maps:get(msgs_sent_to, Counts)
                      - maps:get(msgs_received, Counts)}
        end,
    ServerPart =
        case Server of
            undefined -> #{};
            {Pid, Base} ->
                Rss = fun(R) -> node_value(Ix, rss, R) end,
                RssRows = [{R, V} || R <- Rows, V <- [Rss(R)], is_integer(V)],
                Start = case Base of #{rss := B} -> B; _ -> undefined end,
                AtPeak = Rss(Peak),
                Low = min_defined([Start | [V || {_, V} <- until(Peak, RssRows)]]),
                Growth = case is_integer(AtPeak) andalso is_integer(Low) of
                             true -> AtPeak - Low;
                             false -> undefined
                         end,
                CpuFun = fun(R) -> node_value(Ix, cpu, R) end,
                CpuS = login_window_cpu_s(Window, CpuFun),
                CpuOut = login_window_cpu_s(Out, CpuFun),
                Rate = per_session_s(login_window_cpu_s(Hold, CpuFun), maps:get(hold, SessionS)),
                NetS = fun(Gross, W) -> net(Gross, Rate, maps:get(W, SessionS)) end,
                #{server_pid => Pid,
                  rss_start_bytes => Start,
                  rss_max_bytes => max_or_undefined([V || {_, V} <- RssRows]),
                  rss_at_peak_bytes => AtPeak,
                  rss_low_before_peak_bytes => Low,
                  rss_growth_bytes => Growth,
                  cpu_mean_pct => mean([node_value(Ix, cpu, R) || R <- Rows]),
                  cpu_s_login_window => CpuS,
                  cpu_s_logout_window => CpuOut,
                  cpu_us_per_session_s => case Rate of
                                              undefined -> undefined;
                                              _ -> Rate * 1.0e6
                                          end,
                  cpu_s_login_window_net => NetS(CpuS, login),
                  cpu_s_logout_window_net => NetS(CpuOut, logout)}
        end,
    Both = case {TargetPart, ServerPart} of
               {#{sessions_at_peak := S, logins := L},
                #{rss_growth_bytes := G, cpu_s_login_window := Cs, cpu_s_logout_window := Co,
                  cpu_s_login_window_net := Ns, cpu_s_logout_window_net := No}} ->
                   Logouts = logouts(Sessions, Peak, Out),
                   #{bytes_per_session_at_peak => case is_integer(G) andalso is_integer(S)
                                                      andalso S > 0 of
                                                      true -> round(G / S);
                                                      false -> undefined
                                                  end,
                     cpu_ms_per_login => per_unit(Cs, L),
                     logouts => Logouts,
                     cpu_ms_per_logout => per_unit(Co, Logouts),
                     cpu_ms_per_login_net => per_unit(Ns, L),
                     cpu_ms_per_logout_net => per_unit(No, Logouts)};
               _ -> #{}
           end,
    maps:merge(maps:merge(#{node => I, target => Target}, TargetPart),
               maps:merge(ServerPart, Both)).

%% A node's figure in a row: one server alone has no server_nodes column
%% (its figures are the row's server_* columns).
node_value(Ix, K, R) ->
    case maps:get(server_nodes, R, undefined) of
        undefined when Ix =:= 0 ->
            maps:get(case K of rss -> server_rss_bytes; cpu -> server_cpu_pct end, R, undefined);
        undefined -> undefined;
        Nodes -> case nth(Ix + 1, Nodes) of
                     #{K := V} -> V;
                     _ -> undefined
                 end
    end.

%% @doc The rows from the first with a TCP connect to the last with a
%% login, each with the seconds it covers.
-spec login_window([map()]) -> [{map(), number()}].
login_window(Rows) ->
    From = lists:dropwhile(fun({R, _}) -> not positive(connects_s, R) end, timed(Rows)),
    lists:reverse(lists:dropwhile(fun({R, _}) -> not positive(logins_s, R) end,
                                  lists:reverse(From))).

%% @doc The rows after the peak row (the last with the most sessions) up to
%% the first with no session left, or the last row: the users leaving,
%% each row with the seconds it covers.
-spec logout_window([map()], map()) -> [{map(), number()}].
logout_window(Rows, Peak) ->
    case maps:get(t, Peak, undefined) of
        undefined -> [];
        PeakT ->
            After = [RT || {R, _} = RT <- timed(Rows), maps:get(t, R) > PeakT],
            {Leaving, Rest} = lists:splitwith(fun({R, _}) -> maps:get(sessions, R, 0) > 0 end,
                                              After),
            Leaving ++ lists:sublist(Rest, 1)
    end.

%% @doc The rows after the login window up to the peak row (every user
%% online, none logging in or out), each with the seconds it covers, 5 cut
%% at each end when more than 20 remain (the last logins' after-effects, as
%% bench/plateau.py cuts them); none without a login window or a peak.
-spec hold_window([map()], [{map(), number()}], map()) -> [{map(), number()}].
hold_window(Rows, Window, Peak) ->
    case {Window, maps:get(t, Peak, undefined)} of
        {[], _} -> [];
        {_, undefined} -> [];
        {_, PeakT} ->
            {Last, _} = lists:last(Window),
            LastT = maps:get(t, Last),
            Hold = [RT || {R, _} = RT <- timed(Rows), maps:get(t, R) > LastT,
                          maps:get(t, R) =< PeakT],
            case length(Hold) of
                N when N > 20 -> lists:sublist(Hold, 6, N - 10);
                _ -> Hold
            end
    end.

%% The sessions online over the second each row covers, by the row's t:
%% the mean of its count and the row before's (0 before the first).
session_means(Rows) ->
    Counts = [maps:get(sessions, R, 0) || R <- Rows],
    maps:from_list(lists:zipwith(fun(R, Before) ->
                                         {maps:get(t, R), (Before + maps:get(sessions, R, 0)) / 2}
                                 end, Rows, [0 | lists:droplast(Counts)])).

%% CPU seconds per session-second, undefined without both.
per_session_s(CpuS, SessionS) when is_number(CpuS), SessionS > 0 -> CpuS / SessionS;
per_session_s(_, _) -> undefined.

%% A window's CPU seconds less what its sessions cost at Rate.
net(Gross, Rate, SessionS) when is_number(Gross), is_number(Rate) -> Gross - Rate * SessionS;
net(_, _, _) -> undefined.

%% Each row with the seconds it covers (since the row before; the first
%% since 0).
timed([]) -> [];
timed(Rows) ->
    lists:zipwith(fun(R, T0) -> {R, maps:get(t, R) - T0} end,
                  Rows, [0 | [maps:get(t, R) || R <- lists:droplast(Rows)]]).

positive(K, R) ->
    case maps:get(K, R, 0) of
        V when is_number(V) -> V > 0;
        _ -> false
    end.

%% @doc CPU seconds of one server over the login window, its CPU (% of one
%% core) in a row read by Cpu; undefined when no row of the window has it.
-spec login_window_cpu_s([{map(), number()}], fun((map()) -> number() | undefined)) ->
          number() | undefined.
login_window_cpu_s(Window, Cpu) ->
    case [{V, Dt} || {R, Dt} <- Window, V <- [Cpu(R)], is_number(V)] of
        [] -> undefined;
        Vs -> lists:sum([V / 100 * Dt || {V, Dt} <- Vs])
    end.

%% CPU ms per login (or logout).
per_unit(CpuS, N) when is_number(CpuS), N > 0 -> CpuS * 1000 / N;
per_unit(_, _) -> undefined.

%% @doc The per-node and cluster-wide table, as text.
-spec table(map()) -> iodata().
table(#{nodes := Nodes, total := T}) ->
    Head = ["node", "target", "server pid", "sessions", "logins", "failed", "lost msgs",
            "RSS growth", "B/session", "CPU ms/login", "CPU ms/logout", "net ms/login",
            "net ms/logout", "us/session-s", "CPU mean %"],
    Cells = fun(R) ->
                    [fmt(maps:get(target, R, undefined)), fmt(maps:get(server_pid, R, undefined)),
                     fmt(maps:get(sessions_at_peak, R, undefined)), fmt(maps:get(logins, R, undefined)),
                     fmt(maps:get(failed, R, undefined)), fmt(maps:get(messages_lost, R, undefined)),
                     bytes(maps:get(rss_growth_bytes, R, undefined)),
                     fmt(maps:get(bytes_per_session_at_peak, R, undefined)),
                     fmt(maps:get(cpu_ms_per_login, R, undefined)),
                     fmt(maps:get(cpu_ms_per_logout, R, undefined)),
                     fmt(maps:get(cpu_ms_per_login_net, R, undefined)),
                     fmt(maps:get(cpu_ms_per_logout_net, R, undefined)),
                     fmt(maps:get(cpu_us_per_session_s, R, undefined)),
                     fmt(maps:get(cpu_mean_pct, R, undefined))]
            end,
    Lines = [Head]
        ++ [[integer_to_list(I) | Cells(R)] || R = #{node := I} <- Nodes]
        ++ [["cluster" | Cells(T#{target => integer_to_list(maps:get(nodes, T)) ++ " nodes",
                                  cpu_mean_pct => undefined})]],
    Widths = [lists:max([string:length(lists:nth(C, L)) || L <- Lines])
              || C <- lists:seq(1, length(Head))],
    ["per node (sessions at the peak; memory per session = RSS growth / those sessions):\n",
     [[lists:join("  ", [string:pad(Cell, W, case C of 2 -> trailing; _ -> leading end)
                         || {C, Cell, W} <- lists:zip3(lists:seq(1, length(L)), L, Widths)]),
       "\n"] || L <- Lines]].

fmt(undefined) -> "-";
fmt(null) -> "-";
fmt(B) when is_binary(B) -> unicode:characters_to_list(B);
fmt(I) when is_integer(I) -> integer_to_list(I);
fmt(F) when is_float(F) -> binary_to_list(throng_bench_units:format_num(F));
fmt(L) when is_list(L) -> L.

bytes(undefined) -> "-";
bytes(B) when B < 0 -> "-" ++ binary_to_list(throng_bench_units:format_bytes(-B));
bytes(B) -> binary_to_list(throng_bench_units:format_bytes(B)).

%% @doc Columns of nodes.csv: one line per node and second.
-spec nodes_csv_columns() -> [atom()].
nodes_csv_columns() -> [t, node, sessions, logins_s, server_rss_bytes, server_cpu_pct].

%% @doc The nodes.csv lines of one time-series row (none for one server).
-spec nodes_csv_lines(map()) -> iodata().
nodes_csv_lines(Row) ->
    Ts = maps:get(targets, Row, []),
    Ss = maps:get(server_nodes, Row, []),
    N = max(length(Ts), length(Ss)),
    [[lists:join(",", [cell(maps:get(t, Row)), integer_to_list(I),
                       cell(get_in(I, sessions, Ts)), cell(get_in(I, logins_s, Ts)),
                       cell(get_in(I, rss, Ss)), cell(get_in(I, cpu, Ss))]), "\n"]
     || N > 1, I <- lists:seq(1, N)].

get_in(I, K, L) ->
    case nth(I, L) of
        #{K := V} -> V;
        _ -> undefined
    end.

cell(undefined) -> "";
cell(I) when is_integer(I) -> integer_to_list(I);
cell(F) when is_float(F) -> float_to_list(F, [{decimals, 3}, compact]).

%% helpers

nth(I, L) when I =< length(L) -> lists:nth(I, L);
nth(_, _) -> undefined.

until(R, [{R, V} | _]) -> [{R, V}];
until(R, [X | Rest]) -> [X | until(R, Rest)];
until(_, []) -> [].

min_defined(L) ->
    case [V || V <- L, is_integer(V)] of
        [] -> undefined;
        Vs -> lists:min(Vs)
    end.

max_or_undefined(L) ->
    case [V || V <- L, is_number(V)] of
        [] -> undefined;
        Vs -> lists:max(Vs)
    end.

mean(L) ->
    case [V || V <- L, is_number(V)] of
        [] -> undefined;
        Vs -> lists:sum(Vs) / length(Vs)
    end.

sum_or_undefined([]) -> undefined;
sum_or_undefined(L) -> lists:sum(L).
