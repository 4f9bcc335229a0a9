%% @doc The stop rule of a study run: after every second of a ramp, has the
%% server reached a limit? Pure: it looks at the run's rows (newest first)
%% and at what /proc says of the server's descriptors, and names the first
%% limit that holds, in this order:
%%
%%   descriptors  the server holds all but `fd_margin' of its open-file limit
%%   memory       the server's RSS is above the `memory' cap
%%   ports        over the last `window_s' seconds, at least `min_errors'
%%                connects found no local port (the load generator's
%%                source addresses ran out of ephemeral ports)
%%   errors       over the last `window_s' seconds, errors / (logins + errors)
%%                is above `error_rate', with at least `min_errors' errors
%%   login_p99    the login p99 of each of the last `window_s' seconds is
%%                above `login_p99_ms'
%%   population   every user of the population has been launched (the
%%                design offered fewer users than the server could hold)
-module(throng_bench_study_stop).

-export([check/3]).

-type facts() :: #{fds => non_neg_integer(), fd_limit => pos_integer() | infinity,
                   launched_all => boolean()}.
-export_type([facts/0]).

%% @doc continue, or {stop, Reason, Detail}.
-spec check(map(), [map()], facts()) -> continue | {stop, binary(), binary()}.
check(Rules, Rows, Facts) ->
    first([fun() -> fds(Rules, Facts) end,
           fun() -> memory(Rules, Rows) end,
           fun() -> ports(Rules, Rows) end,
           fun() -> errors(Rules, Rows) end,
           fun() -> login_p99(Rules, Rows) end,
           fun() -> population(Facts) end]).

first([]) -> continue;
first([F | Fs]) ->
    case F() of
        continue -> first(Fs);
        Stop -> Stop
    end.

fds(#{fd_margin := M}, #{fds := N, fd_limit := L}) when is_integer(L), N >= L - M ->
    {stop, <<"descriptors">>, fmt("the server holds ~b open files of its limit of ~b", [N, L])};
fds(_, _) -> continue.

memory(#{memory := Cap}, [#{server_rss_bytes := Rss} | _]) when is_integer(Cap),
                                                               is_integer(Rss), Rss > Cap ->
    {stop, <<"memory">>, fmt("server RSS ~ts is above the cap of ~ts",
                             [throng_bench_units:format_bytes(Rss),
                              throng_bench_units:format_bytes(Cap)])};
memory(_, _) -> continue.

ports(#{window_s := W, min_errors := MinE}, Rows) ->
    Win = window(Rows, W),
    N = lists:sum([case maps:get(errors_by_type_s, R, #{}) of
                       #{ports := P} when is_number(P) -> P;
                       _ -> 0
                   end || R <- Win]),
    case N >= MinE of
        true -> {stop, <<"ports">>,
                 fmt("~b connects found no local port in the last ~b s (eaddrnotavail: the source "
                     "addresses' ephemeral ports are used up)", [round(N), length(Win)])};
        false -> continue
    end.

errors(#{window_s := W, error_rate := Max, min_errors := MinE}, Rows) ->
    Win = window(Rows, W),
    Errors = lists:sum([per_row(errors_s, R) || R <- Win]),
    Logins = lists:sum([per_row(logins_s, R) || R <- Win]),
    case Errors >= MinE andalso Errors / (Errors + Logins) > Max of
        true ->
            {stop, <<"errors">>, fmt("~b errors against ~b logins in the last ~b s (above ~ts)",
                                     [round(Errors), round(Logins), length(Win),
                                      percent(Max)])};
        false -> continue
    end.

login_p99(#{window_s := W, login_p99_ms := Max}, Rows) ->
    Win = window(Rows, W),
    P99s = [P || #{login_p99_ms := P} <- Win, is_number(P)],
    case length(Win) =:= W andalso length(P99s) =:= W andalso lists:min(P99s) > Max of
        true -> {stop, <<"login_p99">>,
                 fmt("login p99 above ~b ms for ~b s (lowest ~b ms)", [Max, W, round(lists:min(P99s))])};
        false -> continue
    end.

population(#{launched_all := true}) ->
    {stop, <<"population">>, <<"every user of the population was launched">>};
population(_) -> continue.

window(Rows, W) -> lists:sublist(Rows, W).

%% A rate column of a row is per second; a row covers about one second.
per_row(K, R) ->
    case maps:get(K, R, 0) of
        V when is_number(V) -> V;
        _ -> 0
    end.

percent(F) -> iolist_to_binary(io_lib:format("~.4g%", [F * 100])).

fmt(F, A) -> iolist_to_binary(io_lib:format(F, A)).
