%% @doc The /metrics page: a snapshot in the Prometheus text exposition
%% format (version 0.0.4). Each metric family gets its HELP and TYPE lines;
%% counters carry the `_total' suffix and their running total (Prometheus
%% computes rates itself); the routing latency is a histogram; the longest
%% message queues are a gauge labelled by rank and process.
-module(throng_stats_prom).

-export([render/1, content_type/0]).

-spec content_type() -> string().
content_type() ->
    "text/plain; version=0.0.4; charset=utf-8".

-spec render(map()) -> iodata().
render(#{series := Series} = Snap) ->
    [families(Series), top(maps:get(queues, Snap, #{})),
     histogram(maps:get(latency, Snap, #{}))];
render(_) ->
    [].

families(Series) ->
    Names = lists:usort([N || {N, _, _, _, _} <- Series]),
    [family(N, [S || {SN, _, _, _, _} = S <- Series, SN =:= N]) || N <- Names].

family(Name, Series) ->
    #{type := Type, help := Help} = throng_stats_spec:lookup(Name),
    Full = case Type of
               counter -> [atom_to_binary(Name), <<"_total">>];
               _ -> atom_to_binary(Name)
           end,
    [header(Full, Help, Type),
     [line(Full, Labels, Raw) || {_, Labels, Raw, _, _} <- Series]].

header(Name, Help, Type) ->
    ["# HELP ", Name, " ", escape_help(Help), "\n",
     "# TYPE ", Name, " ", atom_to_binary(Type), "\n"].

line(Name, [], Value) ->
    [Name, " ", format_value(Value), "\n"];
line(Name, Labels, Value) ->
    [Name, "{", lists:join(",", [[atom_to_binary(K), "=\"", escape_label(V), "\""]
                                 || {K, V} <- Labels]), "} ", format_value(Value), "\n"].

top(#{top := Top}) when Top =/= [] ->
    #{help := Help} = throng_stats_spec:lookup(throng_message_queue_top_length),
    Name = <<"throng_message_queue_top_length">>,
    Ranked = lists:zip(lists:seq(1, length(Top)), Top),
    [header(Name, Help, gauge),
     [line(Name, [{rank, integer_to_binary(R)}, {pid, P}, {process, N}], L)
      || {R, #{pid := P, name := N, len := L}} <- Ranked]];
top(_) ->
    [].

histogram(#{histogram := Hist}) ->
    #{help := Help} = throng_stats_spec:lookup(throng_route_latency_seconds),
    Name = <<"throng_route_latency_seconds">>,
    Bounds = throng_stats_spec:latency_buckets(),
    Buckets = lists:zip(Bounds, throng_hist:le_counts(Hist, Bounds)),
    [header(Name, Help, histogram),
     [line(<<Name/binary, "_bucket">>, [{le, le(B)}], C) || {B, C} <- Buckets],
     line(<<Name/binary, "_sum">>, [], throng_hist:sum(Hist) / 1000000),
     line(<<Name/binary, "_count">>, [], throng_hist:count(Hist))];
histogram(_) ->
    [].

le(infinity) -> <<"+Inf">>;
le(Us) -> format_value(Us / 1000000).

%% @doc A sample value as Prometheus writes it.
-spec format_value(number()) -> binary().
format_value(I) when is_integer(I) -> integer_to_binary(I);
format_value(F) when is_float(F) -> float_to_binary(F, [short]).

%% @doc A label value: backslash, double quote and line feed escaped.
-spec escape_label(binary()) -> binary().
escape_label(V) ->
    escape(V, [{<<"\\">>, <<"\\\\">>}, {<<"\"">>, <<"\\\"">>}, {<<"\n">>, <<"\\n">>}]).

escape_help(V) ->
    escape(V, [{<<"\\">>, <<"\\\\">>}, {<<"\n">>, <<"\\n">>}]).

escape(V, Pairs) ->
    lists:foldl(fun({From, To}, Acc) -> binary:replace(Acc, From, To, [global]) end, V, Pairs).
