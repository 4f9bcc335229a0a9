%% @doc report.html: one self-contained page (inline CSS and SVG, no
%% scripts, no external files) that a browser shows offline.
-module(throng_bench_report).

-export([run_html/3, echo_html/1, flatten/1]).

-import(throng_bench_svg, [escape/1]).

%% @doc The report of an xmpp or http run.
-spec run_html(map(), [map()], throng_bench_metrics:snapshot()) -> iodata().
run_html(Summary, Rows, #{hists := Hists}) ->
    Cmd = throng_bench_units:to_bin(maps:get(command, Summary, <<"run">>)),
    Col = fun(K) -> [{maps:get(t, R), V} || R <- Rows, V <- [maps:get(K, R, undefined)],
                                            is_number(V)] end,
    NonZero = fun(Series) -> [S || S = {_, Pts} <- Series, lists:any(fun({_, V}) -> V > 0 end, Pts)] end,
    ErrSeries = [{atom_to_binary(T),
                  [{maps:get(t, R), maps:get(T, maps:get(errors_by_type_s, R))} || R <- Rows]}
                 || T <- throng_bench_metrics:error_types()],
    Mb = fun(K) -> [{T, V / 1048576} || {T, V} <- Col(K)] end,
    Charts =
        [chart(#{title => "Concurrent sessions over time", x_label => "time (s)",
                 y_label => "sessions / connections",
                 series => NonZero([{"sessions (logged in)", Col(sessions)},
                                    {"open connections", Col(conns_open)},
                                    {"users launched", Col(users_launched)}])}),
         chart(#{title => "Errors per second over time", x_label => "time (s)",
                 y_label => "errors/s",
                 series => case NonZero(ErrSeries) of
                               [] -> [{"all errors", Col(errors_s)}];
                               Es -> Es
                           end}),
         chart(#{title => "Rates", x_label => "time (s)", y_label => "per second",
                 series => NonZero([{"connects/s", Col(connects_s)}, {"logins/s", Col(logins_s)},
                                    {"messages sent/s", Col(msgs_sent_s)},
                                    {"messages received/s", Col(msgs_received_s)},
                                    {"requests/s", Col(requests_s)},
                                    {"responses/s", Col(responses_s)}])}),
         chart(#{title => "Traffic", x_label => "time (s)", y_label => "per second",
                 series => NonZero([{"stanzas in/s", Col(stanzas_in_s)},
                                    {"stanzas out/s", Col(stanzas_out_s)},
                                    {"KiB in/s", [{T, V / 1024} || {T, V} <- Col(bytes_in_s)]},
                                    {"KiB out/s", [{T, V / 1024} || {T, V} <- Col(bytes_out_s)]}])}),
         chart(#{title => "Latency over time (per-second percentiles)", x_label => "time (s)",
                 y_label => "ms", y_log => true,
                 series => NonZero([{"connect p99", Col(connect_p99_ms)},
                                    {"login p50", Col(login_p50_ms)},
                                    {"login p99", Col(login_p99_ms)},
                                    {"delivery p50", Col(delivery_p50_ms)},
                                    {"delivery p99", Col(delivery_p99_ms)},
                                    {"response p50", Col(response_p50_ms)},
                                    {"response p99", Col(response_p99_ms)}])})]
        ++ [[<<"<h3>">>, escape(atom_to_binary(H)), <<" latency histogram</h3>\n">>,
             throng_bench_svg:histogram(#{title => [atom_to_binary(H), " (",
                                                    integer_to_list(throng_hist:count(S)),
                                                    " samples)"],
                                          x_label => "ms (log scale)", unit_div => 1000,
                                          bars => throng_hist:bars(S, 20)})]
            || H <- throng_bench_metrics:hist_names(), S <- [maps:get(H, Hists)],
               throng_hist:count(S) > 0]
        ++ case Col(server_rss_bytes) of
               [] -> [];
               _ -> [chart(#{title => "Server resident memory (RSS)", x_label => "time (s)",
                             y_label => "MiB", series => [{"server RSS", Mb(server_rss_bytes)}]}),
                     chart(#{title => "Server CPU", x_label => "time (s)",
                             y_label => "% of one core",
                             series => [{"server CPU", Col(server_cpu_pct)}]})]
           end
        ++ node_charts(Rows)
        ++ [chart(#{title => "Load generator memory", x_label => "time (s)", y_label => "MiB",
                    series => NonZero([{"BEAM total (all worker VMs)", Mb(loadgen_mem_bytes)},
                                       {"RSS (all load generator processes)",
                                        Mb(loadgen_rss_bytes)}])})],
    page(["throng-bench ", Cmd, " report"], Summary,
         [cluster_table(maps:get(cluster, Summary, undefined)),
          latency_table(maps:get(latency_ms, Summary, #{})), Charts]).

%% Per node: the sessions on each target, each server's RSS and CPU.
node_charts(Rows) ->
    PerNode = fun(Col, K, F) ->
                      N = lists:max([0 | [length(maps:get(Col, R, [])) || R <- Rows]]),
                      [{["node ", integer_to_list(I)],
                        [{maps:get(t, R), F(V)} || R <- Rows,
                                                   #{K := V} <- [nth(I, maps:get(Col, R, []))],
                                                   is_number(V)]}
                       || N > 1, I <- lists:seq(1, N)]
              end,
    Id = fun(V) -> V end,
    [chart(#{title => Title, x_label => "time (s)", y_label => Y, series => Series})
     || {Title, Y, Series} <- [{"Sessions per node (target)", "sessions",
                                PerNode(targets, sessions, Id)},
                               {"Server RSS per node", "MiB",
                                PerNode(server_nodes, rss, fun(V) -> V / 1048576 end)},
                               {"Server CPU per node", "% of one core",
                                PerNode(server_nodes, cpu, Id)}],
        Series =/= []].

nth(I, L) when I =< length(L) -> lists:nth(I, L);
nth(_, _) -> undefined.

cluster_table(undefined) -> [];
cluster_table(#{nodes := Nodes, total := T}) ->
    Cols = [{sessions_at_peak, "sessions"}, {logins, "logins"}, {failed, "failed"},
            {messages_lost, "lost msgs"}, {rss_growth_bytes, "RSS growth"},
            {bytes_per_session_at_peak, "B/session"}, {cpu_ms_per_login, "CPU ms/login"},
            {cpu_ms_per_logout, "CPU ms/logout"}, {cpu_ms_per_login_net, "net ms/login"},
            {cpu_ms_per_logout_net, "net ms/logout"}, {cpu_us_per_session_s, "us/session-s"},
            {cpu_mean_pct, "CPU mean %"}],
    Cells = fun(R) -> [case {K, maps:get(K, R, undefined)} of
                           {rss_growth_bytes, V} when is_integer(V), V >= 0 ->
                               throng_bench_units:format_bytes(V);
                           {_, null} -> <<"-">>;
                           {_, V} -> throng_bench_units:format_num(V)
                       end || {K, _} <- Cols] end,
    ["<h2>Per node and cluster-wide</h2>\n",
     "<p>Sessions at the peak (the last second with the most sessions); memory per session = "
     "RSS growth / those sessions; CPU per login over the login window; net: less what the "
     "sessions online then cost a second, measured while all are online (us/session-s). "
     "summary.json's "
     "cluster section has every figure.</p>\n",
     table(["node", "target", "server pid" | [H || {_, H} <- Cols]],
           [[integer_to_binary(I), escape(throng_bench_units:to_bin(maps:get(target, R, <<"-">>))),
             throng_bench_units:format_num(maps:get(server_pid, R, undefined)) | Cells(R)]
            || R = #{node := I} <- Nodes]
           ++ [[{k, <<"cluster">>}, integer_to_binary(maps:get(nodes, T)), <<"-">>
                | Cells(T)]])].

%% @doc The report of echo or flow: a table and two log-log plots.
-spec echo_html(map()) -> iodata().
echo_html(Summary = #{command := Mode, rows := Rows}) ->
    Par = lists:usort([N || #{sockets := N} <- Rows]),
    Series = fun(F) -> [{[integer_to_list(N), " socket(s)"],
                         [{S, F(R)} || R = #{sockets := N1, size := S} <- Rows, N1 =:= N]}
                        || N <- Par] end,
    Lat = case Mode of
              echo -> chart(#{title => "Round-trip time (median) by message size",
                              x_label => "message size (bytes)", y_label => "us", x_log => true,
                              y_log => true,
                              series => Series(fun(#{rtt_us := #{p50 := P}}) -> P end)});
              flow -> chart(#{title => "Time per message by message size",
                              x_label => "message size (bytes)", y_label => "us", x_log => true,
                              y_log => true,
                              series => Series(fun(#{us_per_msg := U}) -> U end)})
          end,
    Bw = chart(#{title => "Bandwidth by message size", x_label => "message size (bytes)",
                 y_label => "MiB/s", x_log => true, y_log => true,
                 series => Series(fun(#{mib_per_s := B}) -> B end)}),
    page(["throng-bench ", atom_to_binary(Mode), " report"],
         maps:without([rows], Summary), [echo_table(Mode, Rows), Lat, Bw]).

echo_table(Mode, Rows) ->
    Head = case Mode of
               echo -> ["sockets", "size", "count", "time (s)", "msgs/s", "MiB/s", "rtt mean",
                        "p50", "p90", "p99", "max"];
               flow -> ["sockets", "size", "count", "time (s)", "msgs/s", "MiB/s", "us/msg"]
           end,
    Cells = fun(R = #{sockets := N, size := S, count := C, seconds := T, msgs_per_s := MR,
                      mib_per_s := B}) ->
                    [integer_to_binary(N), throng_bench_units:format_bytes(S), integer_to_binary(C),
                     throng_bench_units:format_num(T), throng_bench_units:format_rate(MR),
                     throng_bench_units:format_num(B)]
                        ++ case R of
                               #{rtt_us := H} ->
                                   [throng_bench_units:format_us(maps:get(K, H))
                                    || K <- [mean, p50, p90, p99, max]];
                               #{us_per_msg := U} -> [throng_bench_units:format_num(U)]
                           end
            end,
    table(Head, [Cells(R) || R <- Rows]).

latency_table(Lat) when map_size(Lat) =:= 0 -> [];
latency_table(Lat) ->
    Keys = [count, mean, p50, p90, p99, p999, max],
    ["<h2>Latency (ms)</h2>\n",
     table(["transaction" | [atom_to_list(K) || K <- Keys]],
           [[escape(Name) | [throng_bench_units:format_num(maps:get(K, S, undefined)) || K <- Keys]]
            || {Name, S} <- lists:sort(maps:to_list(Lat))])].

page(Title, Summary, Body) ->
    Status = maps:get(status, Summary, complete),
    Error = maps:get(error, Summary, null),
    ["<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>", escape(Title), "</title>\n",
     "<style>body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}"
     "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
     "text-align:right;font-size:13px}th{background:#f3f3f3}td.k{text-align:left}"
     ".bad{color:#b00;font-weight:bold}svg{display:block;margin:1em 0}</style>\n",
     "</head><body>\n<h1>", escape(Title), "</h1>\n",
     case {Status, Error} of
         {complete, null} -> [];
         {<<"complete">>, null} -> [];
         _ -> ["<p class='bad'>Status: ", escape(Status),
               case Error of null -> []; _ -> [" &mdash; ", escape(Error)] end, "</p>\n"]
     end,
     key_figures(Summary),
     Body,
     "<h2>All figures</h2>\n",
     table(["key", "value"], [[{k, escape(K)}, escape(V)] || {K, V} <- flatten(Summary)]),
     "<p style='color:#888;font-size:12px'>Generated by throng-bench. docs/bench.md explains "
     "every number.</p>\n</body></html>\n"].

%% The figures people look for first, above the charts; every figure is in
%% the table at the end.
key_figures(Summary) ->
    Flat = maps:from_list(flatten(Summary)),
    Wanted = [{"scenario", <<"scenario.description">>}, {"status", <<"status">>},
              {"sessions held (max)", <<"sessions.max">>},
              {"users logged in / failed", [<<"users.logged_in">>, <<"users.failed">>]},
              {"messages sent / received / lost", [<<"messages.sent">>, <<"messages.received">>,
                                                   <<"messages.lost">>]},
              {"errors", <<"errors.total">>},
              {"logins/s (mean while active / max)", [<<"rates.logins_per_s.mean_while_active">>,
                                                      <<"rates.logins_per_s.max">>]},
              {"login p50 / p99 (ms)", [<<"latency_ms.login.p50">>, <<"latency_ms.login.p99">>]},
              {"delivery p50 / p99 (ms)", [<<"latency_ms.delivery.p50">>,
                                           <<"latency_ms.delivery.p99">>]},
              {"same-node delivery mean / p50 / p99 (ms)",
               [<<"latency_ms.delivery_same.mean">>, <<"latency_ms.delivery_same.p50">>,
                <<"latency_ms.delivery_same.p99">>]},
              {"cross-node delivery mean / p50 / p99 (ms)",
               [<<"latency_ms.delivery_cross.mean">>, <<"latency_ms.delivery_cross.p50">>,
                <<"latency_ms.delivery_cross.p99">>]},
              {"cluster: nodes / sessions at peak", [<<"cluster.total.nodes">>,
                                                     <<"cluster.total.sessions_at_peak">>]},
              {"cluster: server memory per session (B)",
               <<"cluster.total.bytes_per_session_at_peak">>},
              {"cluster: server CPU per login (ms)", <<"cluster.total.cpu_ms_per_login">>},
              {"cluster: server CPU per logout (ms)", <<"cluster.total.cpu_ms_per_logout">>},
              {"cluster: net CPU per login / logout (ms)",
               [<<"cluster.total.cpu_ms_per_login_net">>, <<"cluster.total.cpu_ms_per_logout_net">>]},
              {"cluster: CPU per online session and second (us)",
               <<"cluster.total.cpu_us_per_session_s">>},
              {"response p50 / p99 (ms)", [<<"latency_ms.response.p50">>,
                                           <<"latency_ms.response.p99">>]},
              {"server CPU mean / max (% of a core)", [<<"server.cpu_mean_pct">>,
                                                        <<"server.cpu_max_pct">>]},
              {"duration (s)", <<"duration_s">>}],
    Rows = [[{k, escape(Label)}, escape(iolist_to_binary(lists:join(<<" / ">>, Vals)))]
            || {Label, Keys} <- Wanted,
               Vals <- [[maps:get(K, Flat) || K <- keys(Keys), maps:is_key(K, Flat)]],
               length(Vals) =:= length(keys(Keys))],
    case Rows of
        [] -> [];
        _ -> ["<h2>Key figures</h2>\n", table(["", "value"], Rows)]
    end.

keys(K) when is_binary(K) -> [K];
keys(Ks) -> Ks.

chart(Opts) -> throng_bench_svg:line_chart(Opts).

table(Head, Rows) ->
    ["<table><tr>", [["<th>", escape(H), "</th>"] || H <- Head], "</tr>\n",
     [["<tr>", [case C of
                    {k, V} -> ["<td class='k'>", V, "</td>"];
                    V -> ["<td>", V, "</td>"]
                end || C <- Row], "</tr>\n"] || Row <- Rows],
     "</table>\n"].

%% @doc A nested summary as [{"a.b.c", Value}] rows, values as text.
-spec flatten(map()) -> [{binary(), binary()}].
flatten(M) -> lists:append(flatten(<<>>, M)).

flatten(Prefix, M) when is_map(M), map_size(M) > 0 ->
    [lists:append(flatten(join(Prefix, K), V)) || {K, V} <- lists:sort(maps:to_list(M))];
flatten(Prefix, [M | _] = L) when is_map(M) ->
    %% a list of records (the nodes of a cluster): prefix.1.key, prefix.2.key, ...
    [lists:append(flatten(join(Prefix, I), V)) || {I, V} <- lists:enumerate(L)];
flatten(Prefix, V) -> [[{Prefix, value_text(V)}]].

join(<<>>, K) -> throng_bench_units:to_bin(K);
join(P, K) -> <<P/binary, ".", (throng_bench_units:to_bin(K))/binary>>.

value_text(M) when is_map(M) -> <<"-">>;
value_text(null) -> <<"-">>;
value_text(undefined) -> <<"-">>;
value_text(F) when is_float(F) -> throng_bench_units:format_num(F);
value_text(L) when is_list(L) ->
    case io_lib:printable_unicode_list(L) of
        true -> unicode:characters_to_binary(L);
        false -> iolist_to_binary(lists:join(", ", [value_text(X) || X <- L]))
    end;
value_text(V) -> throng_bench_units:to_bin(V).
