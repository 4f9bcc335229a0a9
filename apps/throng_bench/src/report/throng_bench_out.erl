%% @doc Result files: summary.json, timeseries.csv (written a row a second
%% while the run goes), results.csv (echo/flow) and report.html.
-module(throng_bench_out).

-export([open_timeseries/1, append_timeseries/2, close_timeseries/1, csv_columns/0,
         csv_line/1, append_nodes/3, write_run/4, write_echo/2, json/1, encode_json/1]).
%% API used by tests: the CSV row and the JSON form of a summary.
-ignore_xref([{csv_columns, 0}, {csv_line, 1}, {json, 1}]).

-type csv() :: {file:io_device(), file:filename()} | undefined.

%% @doc Columns of timeseries.csv, in order (docs/bench.md explains each).
-spec csv_columns() -> [atom()].
csv_columns() ->
    [t, users_launched, users_logged_in, users_finished, users_failed, conns_open, sessions,
     requests, errors,
     users_launched_s, connects_s, logins_s, users_finished_s,
     stanzas_in_s, stanzas_out_s, bytes_in_s, bytes_out_s, msgs_sent_s, msgs_received_s,
     requests_s, responses_s, errors_s]
        ++ [list_to_atom("err_" ++ atom_to_list(T) ++ "_s")
            || T <- throng_bench_metrics:error_types()]
        ++ [connect_p99_ms, login_p50_ms, login_p99_ms, delivery_p50_ms, delivery_p99_ms,
            response_p50_ms, response_p99_ms, loadgen_mem_bytes, loadgen_rss_bytes,
            server_rss_bytes, server_cpu_pct, server_sys_pct].

%% @doc Create DIR/timeseries.csv with its header (no-op without a DIR).
-spec open_timeseries(file:filename() | undefined) -> csv().
open_timeseries(Dir) -> open_csv(Dir, "timeseries.csv", csv_columns()).

open_csv(undefined, _Name, _Columns) -> undefined;
open_csv(Dir, Name, Columns) ->
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    File = filename:join(Dir, Name),
    case file:open(File, [write, raw, binary]) of
        {ok, Fd} ->
            ok = file:write(Fd, [lists:join(",", [atom_to_list(C) || C <- Columns]), "\n"]),
            {Fd, File};
        {error, R} ->
            throw({fatal, io_lib:format("cannot write ~ts: ~ts", [File, file:format_error(R)])})
    end.

%% @doc Append a row's per-node lines to DIR/nodes.csv, created with its
%% header on the first row that has any (a run against one server has
%% none). Returns the file to pass next time.
-spec append_nodes(file:filename() | undefined, csv() | none, map()) -> csv() | none.
append_nodes(undefined, Csv, _Row) -> Csv;
append_nodes(Dir, Csv, Row) ->
    case throng_bench_cluster:nodes_csv_lines(Row) of
        [] -> Csv;
        Lines ->
            Csv1 = case Csv of
                       none -> open_csv(Dir, "nodes.csv", throng_bench_cluster:nodes_csv_columns());
                       _ -> Csv
                   end,
            {Fd, _} = Csv1,
            _ = file:write(Fd, Lines),
            Csv1
    end.

-spec append_timeseries(csv(), map()) -> ok.
append_timeseries(undefined, _Row) -> ok;
append_timeseries({Fd, _}, Row) ->
    _ = file:write(Fd, csv_line(Row)),
    ok.

-spec close_timeseries(csv()) -> ok.
close_timeseries(undefined) -> ok;
close_timeseries({Fd, _}) -> _ = file:close(Fd), ok.

%% @doc One CSV line of a time-series row (empty cells for unknown values).
-spec csv_line(map()) -> iodata().
csv_line(Row) ->
    Errs = maps:get(errors_by_type_s, Row, #{}),
    Cells = [cell(case atom_to_list(C) of
                      "err_" ++ Rest ->
                          maps:get(list_to_atom(lists:sublist(Rest, length(Rest) - 2)), Errs,
                                   undefined);
                      _ -> maps:get(C, Row, undefined)
                  end) || C <- csv_columns()],
    [lists:join(",", Cells), "\n"].

cell(undefined) -> "";
cell(null) -> "";
cell(I) when is_integer(I) -> integer_to_list(I);
cell(F) when is_float(F) -> float_to_list(F, [{decimals, 3}, compact]).

%% @doc Write summary.json and report.html of an xmpp/http run.
-spec write_run(file:filename(), map(), [map()], throng_bench_metrics:snapshot()) -> ok.
write_run(Dir, Summary, Rows, Last) ->
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    write_file(filename:join(Dir, "summary.json"), encode_json(Summary)),
    case Summary of
        #{cluster := C} -> write_file(filename:join(Dir, "cluster.txt"), throng_bench_cluster:table(C));
        _ -> ok
    end,
    write_file(filename:join(Dir, "report.html"), throng_bench_report:run_html(Summary, Rows, Last)).

%% @doc Write summary.json, results.csv and report.html of echo/flow.
-spec write_echo(file:filename(), map()) -> ok.
write_echo(Dir, Summary = #{rows := Rows}) ->
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    write_file(filename:join(Dir, "summary.json"), encode_json(Summary)),
    Cols = [mode, sockets, size, count, bytes, seconds, msgs_per_s, mib_per_s,
            rtt_mean_us, rtt_p50_us, rtt_p90_us, rtt_p99_us, rtt_max_us, us_per_msg],
    Lines = [[lists:join(",", [cell_any(maps:get(C, flat_echo(R), undefined)) || C <- Cols]), "\n"]
             || R <- Rows],
    write_file(filename:join(Dir, "results.csv"),
               [lists:join(",", [atom_to_list(C) || C <- Cols]), "\n", Lines]),
    write_file(filename:join(Dir, "report.html"), throng_bench_report:echo_html(Summary)).

flat_echo(R = #{rtt_us := H}) ->
    R#{rtt_mean_us => maps:get(mean, H), rtt_p50_us => maps:get(p50, H),
       rtt_p90_us => maps:get(p90, H), rtt_p99_us => maps:get(p99, H),
       rtt_max_us => maps:get(max, H)};
flat_echo(R) -> R.

cell_any(A) when is_atom(A), A =/= undefined -> atom_to_list(A);
cell_any(V) -> cell(V).

write_file(File, Data) ->
    case file:write_file(File, Data) of
        ok -> ok;
        {error, R} ->
            throw({fatal, io_lib:format("cannot write ~ts: ~ts", [File, file:format_error(R)])})
    end.

%% @doc Pretty JSON text of a summary.
-spec encode_json(term()) -> binary().
encode_json(T) -> iolist_to_binary([jiffy:encode(json(T), [pretty]), "\n"]).

%% @doc A term made JSON-ready: undefined -> null, other atoms -> strings,
%% tuples -> lists, iolists left to the caller (use binaries).
-spec json(term()) -> term().
json(undefined) -> null;
json(null) -> null;
json(true) -> true;
json(false) -> false;
json(A) when is_atom(A) -> atom_to_binary(A);
json(M) when is_map(M) ->
    maps:fold(fun(K, V, Acc) -> Acc#{json_key(K) => json(V)} end, #{}, M);
json(L) when is_list(L) -> [json(X) || X <- L];
json(T) when is_tuple(T) -> [json(X) || X <- tuple_to_list(T)];
json(F) when is_float(F) -> round_float(F);
json(X) -> X.

json_key(K) when is_atom(K) -> K;
json_key(K) when is_binary(K) -> K;
json_key(K) -> throng_bench_units:to_bin(K).

round_float(F) -> round(F * 1000) / 1000.
