%% @doc The results of a study: OUT/summary.json (every run, every
%% setting's spread, every setting's effect against the baseline, the
%% routed/echo ratio), OUT/runs.csv (one line per run) and OUT/report.html
%% (the paper's table layout per table, the effects with their 95%
%% intervals, and a Figure 5-style chart of sessions held over time).
%% Rebuilt from the runs' result.json files after every run, so that the
%% report of an interrupted study is that of the runs it made.
-module(throng_bench_study_report).

-export([write/2, summarize/2, text/1, markdown/1, csv_columns/0]).
%% API used by tests: the summary of a set of runs.
-ignore_xref([{summarize, 2}, {csv_columns, 0}, {markdown, 1}]).

-define(METRICS, [peak_sessions, memory_per_session, cpu_user_ms_per_login,
                  cpu_sys_ms_per_login, delivery_p99_ms, login_p99_ms]).

%% @doc Read the runs made so far, write the three files, return the summary.
-spec write(file:filename(), throng_bench_study_design:design()) -> map().
write(Out, Design) ->
    Runs = [R || {S, Rep} <- throng_bench_study_design:runs(Design),
                 Id <- [throng_bench_study_design:run_id(S, Rep)],
                 {ok, Bin} <- [file:read_file(filename:join([Out, "runs", Id, "result.json"]))],
                 R <- [jiffy:decode(Bin, [return_maps])]],
    Ratio = case file:read_file(filename:join([Out, "ratio", "result.json"])) of
                {ok, B} -> jiffy:decode(B, [return_maps]);
                {error, _} -> null
            end,
    Summary = (summarize(Design, Runs))#{ratio => Ratio},
    ok = file:write_file(filename:join(Out, "summary.json"),
                         throng_bench_out:encode_json(maps:remove(series, Summary))),
    ok = file:write_file(filename:join(Out, "runs.csv"), csv(Runs)),
    ok = file:write_file(filename:join(Out, "tables.md"), unicode:characters_to_binary(markdown(Summary))),
    %% the page mixes UTF-8 binaries (names from the design) and character
    %% lists (± ×): one UTF-8 binary
    ok = file:write_file(filename:join(Out, "report.html"),
                         unicode:characters_to_binary(html(Design, Summary))),
    Summary.

%% @doc The summary of runs (result.json maps with binary keys).
-spec summarize(throng_bench_study_design:design(), [map()]) -> map().
summarize(Design = #{settings := Settings}, Runs) ->
    Of = fun(Name) -> [R || R = #{<<"setting">> := N, <<"ok">> := true} <- Runs, N =:= Name] end,
    Values = fun(Name, M) -> [V || R <- Of(Name), V <- [maps:get(atom_to_binary(M), R, null)],
                                   is_number(V)] end,
    Base = case Settings of
               [#{name := B} | _] -> B;
               [] -> none
           end,
    PerSetting =
        [#{name => N, table => Tb, factor => F,
           runs => length([R || R = #{<<"setting">> := X} <- Runs, X =:= N]),
           ok_runs => length(Of(N)),
           stopped_by => stop_reasons(Of(N)),
           metrics => maps:from_list([{M, throng_bench_study_stats:describe(Values(N, M))}
                                      || M <- ?METRICS]),
           effect => case N of
                         Base -> null;
                         _ -> maps:from_list([{M, throng_bench_study_stats:effect(Values(Base, M),
                                                                                  Values(N, M))}
                                              || M <- ?METRICS])
                     end}
         || #{name := N, table := Tb, factor := F} <- Settings],
    #{design => maps:get(name, Design), description => maps:get(description, Design),
      baseline => Base, repeats => maps:get(repeats, Design),
      runs_planned => length(throng_bench_study_design:runs(Design)),
      runs => [maps:remove(<<"series">>, R) || R <- Runs],
      series => [{maps:get(<<"id">>, R), maps:get(<<"setting">>, R), maps:get(<<"series">>, R, [])}
                 || R <- Runs],
      settings => PerSetting}.

stop_reasons(Runs) ->
    lists:foldl(fun(#{<<"stop_reason">> := R}, Acc) -> maps:update_with(R, fun(C) -> C + 1 end, 1, Acc);
                   (_, Acc) -> Acc
                end, #{}, Runs).

%%% runs.csv

%% @doc The columns of runs.csv.
-spec csv_columns() -> [binary()].
csv_columns() ->
    [<<"id">>, <<"setting">>, <<"repeat">>, <<"table">>, <<"nodes">>, <<"ok">>, <<"status">>,
     <<"stop_reason">>, <<"peak_sessions">>, <<"peak_at_s">>, <<"memory_per_session">>,
     <<"memory_per_session_at_peak">>,
     <<"cpu_user_ms_per_login">>, <<"cpu_sys_ms_per_login">>, <<"logins">>,
     <<"delivery_p99_ms">>, <<"login_p99_ms">>, <<"errors">>, <<"messages_lost">>,
     <<"server_rss0">>, <<"server_rss_peak">>, <<"fd_limit">>, <<"started_at">>, <<"error">>].

csv(Runs) ->
    [lists:join(",", csv_columns()), "\n",
     [[lists:join(",", [cell(maps:get(C, R, null)) || C <- csv_columns()]), "\n"] || R <- Runs]].

cell(null) -> "";
cell(true) -> "true";
cell(false) -> "false";
cell(V) when is_integer(V) -> integer_to_list(V);
cell(V) when is_float(V) -> float_to_list(V, [{decimals, 3}, compact]);
cell(V) when is_binary(V) ->
    case binary:match(V, [<<",">>, <<"\"">>, <<"\n">>]) of
        nomatch -> V;
        _ -> [$", binary:replace(V, <<"\"">>, <<"\"\"">>, [global]), $"]
    end.

%%% Text

%% @doc The settings table as text (printed at the end of a study).
-spec text(map()) -> iodata().
text(#{design := D, settings := Ss, runs := Runs, runs_planned := Planned, ratio := Ratio}) ->
    [io_lib:format("~nstudy ~ts: ~b of ~b runs made~n", [D, length(Runs), Planned]),
     io_lib:format("~-22s ~5s ~16s ~16s ~14s ~14s ~12s  ~ts~n",
                   ["setting", "runs", "peak sessions", "bytes/session", "user ms/login",
                    "sys ms/login", "deliv p99", "stopped by"]),
     [io_lib:format("~-22ts ~5b ~16ts ~16ts ~14ts ~14ts ~12ts  ~ts~n",
                    [N, Ok, mean_ci(M, peak_sessions, 0), mean_ci(M, memory_per_session, 0),
                     mean_ci(M, cpu_user_ms_per_login, 2), mean_ci(M, cpu_sys_ms_per_login, 2),
                     mean_ci(M, delivery_p99_ms, 1), reasons(By)])
      || #{name := N, ok_runs := Ok, metrics := M, stopped_by := By} <- Ss],
     ratio_line(Ratio, text)].

%% The ratio in a line (text) or a paragraph (md); "" when not measured.
ratio_line(#{<<"ratio">> := X, <<"chat">> := #{<<"msgs_per_s">> := C} = Chat,
             <<"echo">> := #{<<"round_trips_per_s">> := E}} = R, Form) when is_number(X) ->
    Held = case Chat of
               #{<<"offered">> := O, <<"delivery_p99_ms">> := P} when is_number(P) ->
                   io_lib:format(" (the highest step held of ~b: ~b/s offered, delivery p99 ~ts)",
                                 [length(maps:get(<<"steps">>, R, [])), round(O),
                                  throng_bench_units:format_ms(P)]);
               _ -> ""
           end,
    case Form of
        text ->
            io_lib:format("routed chat messages ~b/s~ts vs TCP echo round trips ~b/s: ratio ~.3f~n",
                          [round(C), Held, round(E), float(X)]);
        md ->
            io_lib:format("~n**Routed chat messages against TCP echo round trips** (~b connections, "
                          "~b-byte messages): ~b messages/s routed in time~ts, ~b round trips/s: "
                          "ratio ~.3f~n", [maps:get(<<"users">>, R), maps:get(<<"size">>, R),
                                           round(C), Held, round(E), float(X)])
    end;
ratio_line(_, _) -> "".

mean_ci(M, K, Dec) ->
    case maps:get(K, M) of
        #{mean := null} -> "-";
        #{mean := Mean, ci95 := null} -> fmt_num(Mean, Dec);
        #{mean := Mean, ci95 := Ci} -> [fmt_num(Mean, Dec), "±", fmt_num(Ci, Dec)]
    end.

fmt_num(V, 0) -> integer_to_list(round(V));
fmt_num(V, Dec) -> float_to_list(float(V), [{decimals, Dec}]).

reasons(By) ->
    lists:join(", ", [[R, " ×", integer_to_list(C)] || {R, C} <- lists:sort(maps:to_list(By))]).

%%% tables.md

%% @doc The paper's tables and the effects as Markdown (OUT/tables.md: what
%% docs/study.md shows, made by the study itself).
-spec markdown(map()) -> iodata().
markdown(#{settings := Ss, runs := Runs, runs_planned := Planned, baseline := Base, ratio := Ratio}) ->
    Tables = lists:foldl(fun(#{table := T}, Acc) ->
                                 case lists:member(T, Acc) of true -> Acc; false -> Acc ++ [T] end
                         end, [], Ss),
    Cols = [{peak_sessions, 0}, {memory_per_session, 0}, {cpu_user_ms_per_login, 2},
            {cpu_sys_ms_per_login, 2}, {delivery_p99_ms, 1}, {login_p99_ms, 1}],
    [io_lib:format("~b of ~b runs made. Mean ± half-width of the 95% interval (Student's t) over "
                   "the runs of a setting.~n~n", [length(Runs), Planned]),
     [[io_lib:format("**~ts**~n~n", [T]),
       "| setting | runs | peak sessions | bytes / session | user ms / login | system ms / login "
       "| delivery p99 ms | login p99 ms | stopped by |
",
       "|---|---|---|---|---|---|---|---|---|
",
       [["| `", N, "` | ", integer_to_list(Ok), " | ",
         lists:join(" | ", [mean_ci(M, K, D) || {K, D} <- Cols]), " | ", reasons(By), " |
"]
        || #{name := N, table := T1, ok_runs := Ok, metrics := M, stopped_by := By} <- Ss, T1 =:= T],
       "
"] || T <- Tables],
     io_lib:format("**Effects against `~ts`** (difference of the means ± Welch's 95% interval, "
                   "in % of the baseline; in bold where the interval excludes 0)~n~n", [Base]),
     "| setting | peak sessions | bytes / session | user ms / login | system ms / login "
     "| delivery p99 ms | login p99 ms |
|---|---|---|---|---|---|---|
",
     [["| `", N, "` | ",
       lists:join(" | ", [md_effect(maps:get(K, Eff), D) || {K, D} <- Cols]), " |
"]
      || #{name := N, effect := Eff} <- Ss, Eff =/= null],
     ratio_line(Ratio, md)].

md_effect(#{diff := null}, _) -> "-";
md_effect(E, Dec) ->
    Txt = effect_text(E, Dec),
    case maps:get(significant, E) of
        true -> ["**", Txt, "**"];
        _ -> Txt
    end.

effect_text(#{diff := D, pct := P, ci95 := Ci}, Dec) ->
    [case D >= 0 of true -> "+"; false -> "" end, fmt_num(D, Dec),
     case Ci of null -> ""; _ -> ["±", fmt_num(Ci, Dec)] end,
     case P of
         null -> "";
         _ -> io_lib:format(" (~ts~.1f%)", [case P >= 0 of true -> "+"; false -> "" end, float(P)])
     end].

%%% report.html

html(Design, S = #{settings := Ss, series := Series}) ->
    Tables = lists:foldl(fun(#{table := T}, Acc) ->
                                 case lists:member(T, Acc) of true -> Acc; false -> Acc ++ [T] end
                         end, [], Ss),
    E = fun throng_bench_svg:escape/1,
    ["<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>throng-bench study ",
     E(maps:get(name, Design)), "</title>\n<style>",
     "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}",
     "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;",
     "text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}.sig{font-weight:bold}",
     ".note{color:#666;font-size:90%}</style></head><body>\n",
     "<h1>Study <code>", E(maps:get(name, Design)), "</code></h1>\n<p>", E(maps:get(description, Design)),
     "</p>\n<p class=\"note\">", integer_to_list(length(maps:get(runs, S))), " of ",
     integer_to_list(maps:get(runs_planned, S)), " runs made; each setting repeated up to ",
     integer_to_list(maps:get(repeats, S)), " times. Population ",
     integer_to_list(maps:get(population, Design)), " users arriving as a Poisson process at ",
     io_lib:format("~p", [maps:get(rate, Design)]), "/s (scenario ", E(maps:get(scenario, Design)),
     "); a run ends when the stop rule names a limit. Means ± the half-width of their 95% "
     "interval (Student's t); effects against <code>", E(maps:get(baseline, S)),
     "</code> with Welch's 95% interval, in bold where it excludes 0.</p>\n",
     [table_html(T, [X || X = #{table := T1} <- Ss, T1 =:= T]) || T <- Tables],
     "<h2>Effects against the baseline</h2>\n", effects_html(Ss),
     "<h2>Figure 5: concurrent sessions over time</h2>\n<p class=\"note\">One line per setting "
     "(its first repeat): the ramp of the paper's Figure 5, and where each setting stopped.</p>\n",
     throng_bench_svg:line_chart(#{title => "sessions held", x_label => "seconds",
                                   y_label => "sessions",
                                   series => first_series(Series, 1)}),
     throng_bench_svg:line_chart(#{title => "server CPU (% of one core, user + system)",
                                   x_label => "seconds", y_label => "%",
                                   series => first_series(Series, 2)}),
     throng_bench_svg:line_chart(#{title => "server system CPU (% of one core)",
                                   x_label => "seconds", y_label => "%",
                                   series => first_series(Series, 3)}),
     ratio_html(maps:get(ratio, S)),
     "<h2>Runs</h2>\n", runs_html(maps:get(runs, S)),
     "</body></html>\n"].

table_html(T, Ss) ->
    E = fun throng_bench_svg:escape/1,
    ["<h2>", E(T), "</h2>\n<table><tr><th class=\"l\">setting</th><th class=\"l\">factor</th>",
     "<th>runs</th><th>peak sessions</th><th>bytes / session</th><th>user ms / login</th>",
     "<th>system ms / login</th><th>delivery p99 ms</th><th>login p99 ms</th>",
     "<th class=\"l\">stopped by</th></tr>\n",
     [["<tr><td class=\"l\"><code>", E(N), "</code></td><td class=\"l\">", E(F), "</td><td>",
       integer_to_list(Ok), "/", integer_to_list(R), "</td>",
       [["<td>", mean_ci(M, K, D), "</td>"]
        || {K, D} <- [{peak_sessions, 0}, {memory_per_session, 0}, {cpu_user_ms_per_login, 2},
                      {cpu_sys_ms_per_login, 2}, {delivery_p99_ms, 1}, {login_p99_ms, 1}]],
       "<td class=\"l\">", E(unicode:characters_to_binary(reasons(By))), "</td></tr>\n"]
      || #{name := N, factor := F, ok_runs := Ok, runs := R, metrics := M, stopped_by := By} <- Ss],
     "</table>\n"].

effects_html(Ss) ->
    E = fun throng_bench_svg:escape/1,
    Cols = [{peak_sessions, 0}, {memory_per_session, 0}, {cpu_user_ms_per_login, 2},
            {cpu_sys_ms_per_login, 2}, {delivery_p99_ms, 1}],
    ["<table><tr><th class=\"l\">setting</th>",
     [["<th>", E(atom_to_binary(K)), "</th>"] || {K, _} <- Cols], "</tr>\n",
     [["<tr><td class=\"l\"><code>", E(N), "</code></td>",
       [["<td>", effect_cell(maps:get(K, Eff), D), "</td>"] || {K, D} <- Cols], "</tr>\n"]
      || #{name := N, effect := Eff} <- Ss, Eff =/= null],
     "</table>\n"].

effect_cell(#{diff := null}, _) -> "-";
effect_cell(E = #{significant := Sig}, Dec) ->
    Txt = effect_text(E, Dec),
    case Sig of
        true -> ["<span class=\"sig\">", Txt, "</span>"];
        _ -> Txt
    end.

first_series(Series, Col) ->
    lists:reverse(
      lists:foldl(fun({_Id, Setting, Pts}, Acc) ->
                          case lists:keymember(Setting, 1, Acc) of
                              true -> Acc;
                              false -> [{Setting, [{lists:nth(1, P), lists:nth(Col + 1, P)} || P <- Pts]} | Acc]
                          end
                  end, [], Series)).

ratio_html(null) -> "";
ratio_html(R) ->
    Get = fun(Path) -> lists:foldl(fun(K, M) when is_map(M) -> maps:get(K, M, null);
                                      (_, _) -> null
                                   end, R, Path) end,
    Steps = case Get([<<"steps">>]) of
                L when is_list(L) -> L;
                _ -> []
            end,
    ["<h2>How close the server comes to the machine's floor</h2>\n<table>",
     "<tr><th class=\"l\">connections</th><td>", num(Get([<<"users">>])), "</td></tr>",
     "<tr><th class=\"l\">message size (chat body / echo message), bytes</th><td>", num(Get([<<"size">>])), "</td></tr>",
     "<tr><th class=\"l\">routed chat messages / s, the most delivered in time "
     "(server CPU %)</th><td>",
     num(Get([<<"chat">>, <<"msgs_per_s">>])), " (", num(Get([<<"chat">>, <<"server_cpu_pct">>])), ")</td></tr>",
     "<tr><th class=\"l\">TCP echo round trips / s</th><td>", num(Get([<<"echo">>, <<"round_trips_per_s">>])), "</td></tr>",
     "<tr><th class=\"l\">ratio</th><td>", num(Get([<<"ratio">>])), "</td></tr></table>\n",
     case Steps of
         [] -> "";
         _ ->
             ["<p>The search: every step a fresh node, every user sending one message per ",
              "interval; a step holds with no error, nothing bounced, at most one message in ",
              "10,000 lost, 90% of the offered rate sent and the delivery p99 under ",
              num(Get([<<"p99_bound_ms">>])), " ms.</p>\n<table><tr>",
              [["<th>", H, "</th>"] || H <- ["offered / s", "sent / s", "delivered / s", "delivery p99 ms",
                                            "server CPU %", "lost", "held", "why not"]], "</tr>\n",
              [["<tr>", [["<td>", num(maps:get(K, S, null)), "</td>"]
                         || K <- [<<"offered">>, <<"sent_per_s">>, <<"msgs_per_s">>,
                                  <<"delivery_p99_ms">>, <<"server_cpu_pct">>, <<"lost">>]],
                "<td>", case maps:get(<<"ok">>, S, false) of true -> "yes"; _ -> "no" end, "</td>",
                "<td class=\"l\">", throng_bench_svg:escape(maps:get(<<"why">>, S, <<>>)), "</td></tr>\n"]
               || S <- Steps],
              "</table>\n"]
     end].

num(null) -> "-";
num(V) when is_integer(V) -> integer_to_list(V);
num(V) when is_float(V), V < 10 -> float_to_list(V, [{decimals, 3}]);
num(V) when is_float(V) -> integer_to_list(round(V));
num(V) -> throng_bench_svg:escape(V).

runs_html(Runs) ->
    E = fun throng_bench_svg:escape/1,
    Cols = csv_columns() -- [<<"table">>, <<"started_at">>],
    ["<table><tr>", [["<th>", E(C), "</th>"] || C <- Cols], "</tr>\n",
     [["<tr>", [["<td>", case maps:get(C, R, null) of
                             null -> "";
                             V when is_binary(V) -> E(V);
                             V -> num(V)
                         end, "</td>"] || C <- Cols], "</tr>\n"] || R <- Runs],
     "</table>\n"].
