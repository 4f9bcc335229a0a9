%% @doc Inline SVG charts for the self-contained HTML report: line charts
%% (linear or logarithmic axes) and histograms. No scripts, no external
%% files: the output is a string to paste into HTML.
-module(throng_bench_svg).

-export([line_chart/1, histogram/1, escape/1, nice_ticks/3, log_ticks/2]).
%% API used by tests: the axis ticks.
-ignore_xref([{nice_ticks, 3}, {log_ticks, 2}]).

-define(W, 760).
-define(H, 300).
-define(ML, 70).   % margins
-define(MR, 20).
-define(MT, 30).
-define(MB, 45).
-define(COLORS, ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                 "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]).

%% @doc A line chart. Options: title, x_label, y_label, series ([{Name,
%% [{X, Y}]}]), x_log and y_log (booleans), y_min (default 0 on linear axes).
-spec line_chart(#{atom() => term()}) -> iodata().
line_chart(Opts = #{series := Series0}) ->
    Series = [{N, [{X, Y} || {X, Y} <- Pts, is_number(X), is_number(Y)]} || {N, Pts} <- Series0],
    XLog = maps:get(x_log, Opts, false),
    YLog = maps:get(y_log, Opts, false),
    All = lists:append([Pts || {_, Pts} <- Series]),
    Title = maps:get(title, Opts, ""),
    case [P || P = {X, Y} <- All, (not XLog orelse X > 0), (not YLog orelse Y > 0)] of
        [] -> frame(Title, [empty_note()]);
        Usable ->
            Xs = [X || {X, _} <- Usable],
            Ys = [Y || {_, Y} <- Usable],
            XR = range(lists:min(Xs), lists:max(Xs), XLog, maps:get(x_min, Opts, undefined)),
            YR = range(lists:min(Ys), lists:max(Ys), YLog,
                       maps:get(y_min, Opts, case YLog of true -> undefined; false -> 0 end)),
            Top = ?MT + 15 * legend_rows(length(Series)),
            Sx = scale(XR, XLog, ?ML, ?W - ?MR),
            Sy = scale(YR, YLog, ?H - ?MB, Top),
            Lines = [polyline(Sx, Sy, Pts, Color, XLog, YLog)
                     || {{_, Pts}, Color} <- lists:zip(Series, colors(length(Series)))],
            frame(Title,
                  [axes(Sx, Sy, XR, YR, XLog, YLog, maps:get(x_label, Opts, ""),
                        maps:get(y_label, Opts, ""), Top),
                   Lines,
                   legend([N || {N, _} <- Series])])
    end.

%% @doc A histogram of bars [{Low, High, Count}] on a logarithmic value axis
%% (latencies). Options: title, x_label, bars, unit_div (divide values for
%% the axis labels, e.g. 1000 for us -> ms).
-spec histogram(#{atom() => term()}) -> iodata().
histogram(Opts = #{bars := Bars}) ->
    Title = maps:get(title, Opts, ""),
    case [B || B = {Lo, _, _} <- Bars, Lo > 0] of
        [] -> frame(Title, [empty_note()]);
        Bs ->
            Div = maps:get(unit_div, Opts, 1),
            Lo = lists:min([L || {L, _, _} <- Bs]) / Div,
            Hi = lists:max([H || {_, H, _} <- Bs]) / Div,
            MaxC = lists:max([C || {_, _, C} <- Bs]),
            XR = range(Lo, Hi, true, undefined),
            YR = range(0, max(MaxC, 1), false, 0),
            Sx = scale(XR, true, ?ML, ?W - ?MR),
            Sy = scale(YR, false, ?H - ?MB, ?MT),
            Top = ?MT,
            Rects = [begin
                         X1 = Sx(L / Div), X2 = Sx(H / Div),
                         Y = Sy(C), Y0 = Sy(0),
                         io_lib:format("<rect x='~.1f' y='~.1f' width='~.1f' height='~.1f' "
                                       "fill='#1f77b4' opacity='0.8'><title>~ts-~ts: ~b</title>"
                                       "</rect>~n",
                                       [X1, Y, max(0.5, X2 - X1 - 0.5), Y0 - Y,
                                        fmt(L / Div), fmt(H / Div), C])
                     end || {L, H, C} <- Bs, C > 0],
            frame(Title, [axes(Sx, Sy, XR, YR, true, false, maps:get(x_label, Opts, ""),
                               "count", Top), Rects])
    end.

%% @doc Escape text for XML/HTML.
-spec escape(iodata() | atom() | number()) -> binary().
escape(A) when is_atom(A) -> escape(atom_to_binary(A));
escape(N) when is_number(N) -> throng_bench_units:format_num(N);
escape(T) ->
    B = unicode:characters_to_binary(T),
    binary:replace(
      binary:replace(
        binary:replace(
          binary:replace(binary:replace(B, <<"&">>, <<"&amp;">>, [global]),
                         <<"<">>, <<"&lt;">>, [global]),
          <<">">>, <<"&gt;">>, [global]),
        <<"'">>, <<"&#39;">>, [global]),
      <<"\"">>, <<"&quot;">>, [global]).

%% @doc About N "nice" ticks (1, 2 or 5 times a power of ten) covering Lo..Hi.
-spec nice_ticks(number(), number(), pos_integer()) -> [number()].
nice_ticks(Lo, Hi, _N) when Hi =< Lo -> [Lo];
nice_ticks(Lo, Hi, N) ->
    Raw = (Hi - Lo) / N,
    Mag = math:pow(10, floor(math:log10(Raw))),
    Step = hd([S * Mag || S <- [1, 2, 5, 10], S * Mag >= Raw]),
    First = ceil(Lo / Step - 1.0e-9),
    Last = floor(Hi / Step + 1.0e-9),
    [clean(K * Step) || K <- lists:seq(First, Last)].

%% @doc Ticks of a logarithmic axis: powers of ten, with 2 and 5 in between
%% when the range spans few decades.
-spec log_ticks(number(), number()) -> [number()].
log_ticks(Lo, Hi) ->
    E0 = floor(math:log10(Lo)),
    E1 = ceil(math:log10(Hi)),
    Mults = case E1 - E0 of
                D when D =< 3 -> [1, 2, 5];
                _ -> [1]
            end,
    [clean(M * math:pow(10, E)) || E <- lists:seq(E0, E1), M <- Mults,
                                   M * math:pow(10, E) >= Lo * 0.999,
                                   M * math:pow(10, E) =< Hi * 1.001].

%% internal

clean(X) ->
    R = round(X),
    case abs(X - R) < 1.0e-9 * max(1, abs(X)) of
        true -> R;
        false -> X
    end.

range(Lo, Hi, true, _Min) ->
    L = math:pow(10, floor(math:log10(Lo))),
    H = math:pow(10, ceil(math:log10(Hi))),
    {L, case H =< L of true -> L * 10; false -> H end};
range(Lo0, Hi0, false, Min) ->
    Lo = case Min of undefined -> Lo0; _ -> min(Min, Lo0) end,
    Hi = case Hi0 =< Lo of true -> Lo + 1; false -> Lo + (Hi0 - Lo) * 1.05 end,
    {Lo, Hi}.

scale({Lo, Hi}, true, P0, P1) ->
    L0 = math:log10(Lo), L1 = math:log10(Hi),
    fun(V) -> P0 + (math:log10(max(V, Lo)) - L0) / (L1 - L0) * (P1 - P0) end;
scale({Lo, Hi}, false, P0, P1) ->
    fun(V) -> P0 + (V - Lo) / (Hi - Lo) * (P1 - P0) end.

polyline(_Sx, _Sy, [], _Color, _, _) -> [];
polyline(Sx, Sy, Pts, Color, XLog, YLog) ->
    Coords = [io_lib:format("~.1f,~.1f ", [Sx(X), Sy(Y)])
              || {X, Y} <- Pts, (not XLog orelse X > 0), (not YLog orelse Y > 0)],
    Dots = case length(Pts) =< 40 of
               true -> [io_lib:format("<circle cx='~.1f' cy='~.1f' r='2.5' fill='~s'/>",
                                      [Sx(X), Sy(Y), Color])
                        || {X, Y} <- Pts, (not XLog orelse X > 0), (not YLog orelse Y > 0)];
               false -> []
           end,
    [io_lib:format("<polyline fill='none' stroke='~s' stroke-width='1.6' points='~s'/>~n",
                   [Color, Coords]), Dots].

axes(Sx, Sy, {XLo, XHi}, {YLo, YHi}, XLog, YLog, XLabel, YLabel, Top) ->
    XTicks = case XLog of true -> log_ticks(XLo, XHi); false -> nice_ticks(XLo, XHi, 8) end,
    YTicks = case YLog of true -> log_ticks(YLo, YHi); false -> nice_ticks(YLo, YHi, 5) end,
    X0 = ?ML, X1 = ?W - ?MR, Y0 = ?H - ?MB, Y1 = Top,
    [io_lib:format("<rect x='~b' y='~b' width='~b' height='~b' fill='none' stroke='#999'/>~n",
                   [X0, Y1, X1 - X0, Y0 - Y1]),
     [io_lib:format("<line x1='~.1f' y1='~b' x2='~.1f' y2='~b' stroke='#eee'/>"
                    "<text x='~.1f' y='~b' font-size='11' text-anchor='middle'>~ts</text>~n",
                    [Sx(T), Y1, Sx(T), Y0, Sx(T), Y0 + 15, fmt(T)])
      || T <- XTicks],
     [io_lib:format("<line x1='~b' y1='~.1f' x2='~b' y2='~.1f' stroke='#eee'/>"
                    "<text x='~b' y='~.1f' font-size='11' text-anchor='end'>~ts</text>~n",
                    [X0, Sy(T), X1, Sy(T), X0 - 5, Sy(T) + 4, fmt(T)])
      || T <- YTicks],
     io_lib:format("<text x='~b' y='~b' font-size='12' text-anchor='middle'>~ts</text>~n",
                   [(X0 + X1) div 2, ?H - 8, escape(XLabel)]),
     io_lib:format("<text x='14' y='~b' font-size='12' text-anchor='middle' "
                   "transform='rotate(-90 14 ~b)'>~ts</text>~n",
                   [(Y0 + Y1) div 2, (Y0 + Y1) div 2, escape(YLabel)])].

%% The legend sits between the title and the plot, four entries a row.
legend_rows(N) -> (N + 3) div 4.

legend(Names) ->
    [io_lib:format("<rect x='~b' y='~b' width='10' height='10' fill='~s'/>"
                   "<text x='~b' y='~b' font-size='11'>~ts</text>~n",
                   [?ML + 10 + (I rem 4) * 170, ?MT - 4 + (I div 4) * 15, Color,
                    ?ML + 24 + (I rem 4) * 170, ?MT + 5 + (I div 4) * 15, escape(N)])
     || {I, N, Color} <- lists:zip3(lists:seq(0, length(Names) - 1), Names,
                                    colors(length(Names)))].

frame(Title, Body) ->
    [io_lib:format("<svg xmlns='http://www.w3.org/2000/svg' width='~b' height='~b' "
                   "viewBox='0 0 ~b ~b' font-family='sans-serif'>~n", [?W, ?H, ?W, ?H]),
     io_lib:format("<text x='~b' y='18' font-size='14' font-weight='bold' "
                   "text-anchor='middle'>~ts</text>~n", [?W div 2, escape(Title)]),
     Body, "</svg>\n"].

empty_note() ->
    io_lib:format("<text x='~b' y='~b' font-size='13' fill='#888' text-anchor='middle'>"
                  "no data</text>~n", [?W div 2, ?H div 2]).

colors(N) -> lists:sublist(lists:append(lists:duplicate(N div 10 + 1, ?COLORS)), N).

fmt(V) when is_integer(V), abs(V) >= 1000000000 -> io_lib:format("~bG", [V div 1000000000]);
fmt(V) when is_integer(V), abs(V) >= 1000000, V rem 1000000 =:= 0 ->
    io_lib:format("~bM", [V div 1000000]);
fmt(V) when is_integer(V), abs(V) >= 1000, V rem 1000 =:= 0 -> io_lib:format("~bk", [V div 1000]);
fmt(V) when is_integer(V) -> integer_to_list(V);
fmt(V) when is_float(V), abs(V) >= 100 -> integer_to_list(round(V));
fmt(V) when is_float(V), abs(V) >= 1 -> io_lib:format("~.1f", [V]);
fmt(V) when is_float(V), V == 0 -> "0";
fmt(V) when is_float(V), abs(V) >= 0.01 -> io_lib:format("~.2f", [V]);
%% ~e counts significant digits, two at least: "1.0e-3".
fmt(V) -> io_lib:format("~.2e", [V]).
