%% @doc Sections shared by the summaries of xmpp and http runs.
-module(throng_bench_summary).

-export([print/1, errors/1, latency/2, server/4, loadgen/4, rate_stats/2, max_of/2, peak_row/2,
         error_total/1, error_count/1]).

%% @doc Print a summary as `key: value' lines on stdout, then the per-node
%% table of a cluster run.
-spec print(map()) -> ok.
print(Summary) ->
    lists:foreach(fun({K, V}) -> io:format("~-48ts ~ts~n", [K, V]) end,
                  throng_bench_report:flatten(maps:without([settings, options, rows], Summary))),
    case Summary of
        #{cluster := C} -> io:put_chars(["\n", throng_bench_cluster:table(C)]);
        _ -> ok
    end.

%% @doc Error counts: total, by type, and the first distinct `other' reasons.
-spec errors(throng_bench_metrics:snapshot()) -> map().
errors(#{counters := C, other_reasons := Other}) ->
    ByType = maps:from_list([{T, maps:get(list_to_atom("err_" ++ atom_to_list(T)), C)}
                             || T <- throng_bench_metrics:error_types()]),
    #{total => lists:sum(maps:values(ByType)), by_type => ByType, other_reasons => Other}.

-spec error_total(throng_bench_metrics:snapshot()) -> non_neg_integer().
error_total(#{counters := C}) -> error_count(C).

%% @doc All errors in a counters map.
-spec error_count(#{throng_bench_metrics:counter() => integer()}) -> integer().
error_count(C) ->
    lists:sum([maps:get(list_to_atom("err_" ++ atom_to_list(T)), C)
               || T <- throng_bench_metrics:error_types()]).

%% @doc Percentiles (ms) of the named histograms that recorded anything.
-spec latency(throng_bench_metrics:snapshot(), [throng_bench_metrics:hist_name()]) -> map().
latency(#{hists := H}, Names) ->
    maps:from_list([{N, maps:map(fun(count, V) -> V;
                                    (_, V) -> ms(V)
                                 end, throng_hist:summary(S))}
                    || N <- Names, S <- [maps:get(N, H)], throng_hist:count(S) > 0]).

%% @doc us -> ms (undefined stays).
-spec ms(number() | undefined) -> number() | undefined.
ms(undefined) -> undefined;
ms(Us) -> Us / 1000.

%% @doc The server's memory and CPU from the /proc samples in the rows.
%% `PerKey' names the row column (e.g. sessions) memory is divided by, Unit
%% its name in the key: bytes_per_UNIT_at_peak = (RSS when that column
%% peaked - the lowest RSS from before the run to that row) / peak. (A
%% server still giving memory back to the OS after its set-up shrinks
%% while the first users arrive; measured from the RSS before the run, its
%% cost per session would then look far too small.)
-spec server([map()], throng_proc_sample:sample() | undefined, atom(), atom()) -> map().
server(Rows, Base, PerKey, Unit) ->
    Rss = [{R, V} || R = #{server_rss_bytes := V} <- Rows, is_integer(V)],
    PeakRows = [R || {R, _} <- Rss],
    Cpu = [V || #{server_cpu_pct := V} <- Rows, is_number(V)],
    case Rss of
        [] -> #{sampled => false};
        _ ->
            Rss0 = case Base of #{rss := B} -> B; _ -> element(2, hd(Rss)) end,
            PeakRow = peak_row(PerKey, PeakRows),
            Peak = maps:get(PerKey, PeakRow, 0),
            PeakRss = maps:get(server_rss_bytes, PeakRow),
            Low = lists:min([Rss0 | until(PeakRow, Rss)]),
            #{sampled => true,
              rss_start_bytes => Rss0,
              rss_max_bytes => lists:max([V || {_, V} <- Rss]),
              rss_end_bytes => element(2, lists:last(Rss)),
              rss_at_peak_bytes => PeakRss,
              rss_low_before_peak_bytes => Low,
              list_to_atom("bytes_per_" ++ atom_to_list(Unit) ++ "_at_peak") =>
                  case Peak > 0 of
                      true -> round((PeakRss - Low) / Peak);
                      false -> undefined
                  end,
              cpu_mean_pct => case Cpu of [] -> undefined; _ -> lists:sum(Cpu) / length(Cpu) end,
              cpu_max_pct => case Cpu of [] -> undefined; _ -> lists:max(Cpu) end}
    end.

%% The RSS samples up to row R.
until(R, [{R, V} | _]) -> [V];
until(R, [{_, V} | Rest]) -> [V | until(R, Rest)];
until(_, []) -> [].

%% @doc The row where column K is at its maximum, the last such row before
%% the run was told to stop (users then leave and wake up): when K is the
%% number of sessions, the end of the plateau, where the sessions have
%% settled.
-spec peak_row(atom(), [map(), ...]) -> map().
peak_row(K, Rows) ->
    Running = case [R || R <- Rows, maps:get(phase, R, running) =:= running] of
                  [] -> Rows;
                  Rs -> Rs
              end,
    Max = max_of(K, Running),
    lists:last([R || R <- Running, maps:get(K, R, 0) =:= Max]).

%% @doc The load generator's own memory: peak BEAM total and OS RSS over all
%% its VMs, and the growth over the values before the run per unit of PerKey
%% (named Unit) when that column peaked.
-spec loadgen([map()], map(), atom(), atom()) -> map().
loadgen(Rows, Base, PerKey, Unit) ->
    Peak = case Rows of [] -> 0; _ -> maps:get(PerKey, peak_row(PerKey, Rows), 0) end,
    Mem0 = maps:get(loadgen_mem0, Base, 0),
    Rss0 = maps:get(loadgen_rss0, Base, 0),
    PerUnit = fun(Col, Zero) ->
                      case Peak of
                          P when is_integer(P), P > 0 ->
                              case maps:get(Col, peak_row(PerKey, Rows), undefined) of
                                  V when is_integer(V) -> round((V - Zero) / P);
                                  _ -> undefined
                              end;
                          _ -> undefined
                      end
              end,
    Statuses = maps:get(job_status, Base, []),
    Avg = fun(K) ->
                  case [V || #{K := V} <- Statuses, is_number(V)] of
                      [] -> undefined;
                      Vs -> round(lists:sum(Vs) / length(Vs))
                  end
          end,
    #{vms => maps:get(workers, Base, 1),
      user_process_bytes_mean => Avg(user_process_bytes),
      beam_memory_start_bytes => Mem0,
      beam_memory_max_bytes => max_of(loadgen_mem_bytes, Rows),
      rss_start_bytes => Rss0,
      rss_max_bytes => max_of(loadgen_rss_bytes, Rows),
      list_to_atom("beam_bytes_per_" ++ atom_to_list(Unit) ++ "_at_peak") =>
          PerUnit(loadgen_mem_bytes, Mem0),
      list_to_atom("rss_bytes_per_" ++ atom_to_list(Unit) ++ "_at_peak") =>
          PerUnit(loadgen_rss_bytes, Rss0)}.

%% @doc Mean (over the rows where the rate was non-zero) and max of a rate.
-spec rate_stats(atom(), [map()]) -> map().
rate_stats(K, Rows) ->
    Vs = [V || R <- Rows, V <- [maps:get(K, R, undefined)], is_number(V)],
    Active = [V || V <- Vs, V > 0],
    #{mean_while_active => case Active of [] -> 0; _ -> lists:sum(Active) / length(Active) end,
      max => case Vs of [] -> 0; _ -> lists:max(Vs) end}.

%% @doc The largest value of a column (0 without rows).
-spec max_of(atom(), [map()]) -> number().
max_of(K, Rows) ->
    lists:max([0 | [V || R <- Rows, V <- [maps:get(K, R, undefined)], is_number(V)]]).
