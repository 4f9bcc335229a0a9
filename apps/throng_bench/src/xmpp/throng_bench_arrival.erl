%% @doc The arrival process: when simulated users start.
%%
%% A run has phases, one after another. Each phase has a rate (users per
%% second), a duration and a cap on the users it launches; it ends when its
%% duration has passed or its cap is reached, whichever comes first. Arrivals
%% within a phase are either a Poisson process (independent, exponentially
%% distributed inter-arrival times with mean 1/rate) or evenly spaced
%% (constant 1/rate).
%%
%% This module is pure: {@link init/2} and {@link next/1} iterate over the
%% arrival times (microseconds from the start of the run); the worker's
%% launcher sleeps until each one. {@link split/2} shares phases between
%% worker VMs: a Poisson process of rate R split into W independent Poisson
%% processes of rate R/W is again a Poisson process of rate R when merged.
-module(throng_bench_arrival).

-export([init/2, next/1, schedule/2, split/2, total_users/1, arrival_time_ms/1]).
%% API used by tests: every arrival time of finite phases.
-ignore_xref([{schedule, 2}]).

-export_type([phase/0, iter/0]).

-type phase() :: #{rate := number(),                      % users per second, > 0
                   duration := pos_integer() | infinity,  % ms
                   max_users := pos_integer() | infinity,
                   dist := poisson | constant}.

-record(it, {phases :: [phase()],
             phase_start :: non_neg_integer(),   % us since run start
             phase_end :: non_neg_integer() | infinity,
             launched :: non_neg_integer(),     % in this phase
             last :: non_neg_integer(),         % us, previous arrival or phase start
             rand :: rand:state()}).
-opaque iter() :: #it{} | done.

%% @doc An iterator over the arrivals of Phases, with a seed for the
%% exponential draws.
-spec init([phase()], term()) -> iter().
init(Phases, Seed) ->
    S = rand:seed_s(exsss, erlang:phash2(Seed)),
    start_phase(Phases, 0, S).

start_phase([], _T, _S) -> done;
start_phase([#{duration := D} | _] = Ps, T, S) ->
    #it{phases = Ps, phase_start = T,
        phase_end = case D of infinity -> infinity; _ -> T + D * 1000 end,
        launched = 0, last = T, rand = S}.

%% @doc The next arrival time (us since the start of the run), or `done'.
-spec next(iter()) -> {non_neg_integer(), iter()} | done.
next(done) -> done;
next(#it{phases = [P | Rest], launched = L, phase_end = End, rand = S} = It) ->
    #{max_users := Max, rate := Rate, dist := Dist} = P,
    case L >= Max of
        true ->
            %% Cap reached: the phase is over now (the next one starts at
            %% the last arrival, without waiting for the phase's duration).
            next(start_phase(Rest, It#it.last, S));
        false ->
            {Gap, S1} = gap(Dist, Rate, S),
            T = It#it.last + Gap,
            case End =/= infinity andalso T >= End of
                true -> next(start_phase(Rest, End, S1));
                false -> {T, It#it{launched = L + 1, last = T, rand = S1}}
            end
    end.

gap(constant, Rate, S) -> {round(1.0e6 / Rate), S};
gap(poisson, Rate, S0) ->
    {U, S} = rand:uniform_real_s(S0),     % U in (0, 1)
    {round(-math:log(U) * 1.0e6 / Rate), S}.

%% @doc All arrival times of finite phases (for tests and planning).
-spec schedule([phase()], term()) -> [non_neg_integer()].
schedule(Phases, Seed) ->
    collect(init(Phases, Seed), []).

collect(It, Acc) ->
    case next(It) of
        done -> lists:reverse(Acc);
        {T, It1} -> collect(It1, [T | Acc])
    end.

%% @doc The share of worker K (0-based) of W: rate and cap divided by W (the
%% first `Cap rem W' workers launch one more user).
-spec split([phase()], {non_neg_integer(), pos_integer()}) -> [phase()].
split(Phases, {_K, 1}) -> Phases;
split(Phases, {K, W}) ->
    [P#{rate => Rate / W,
        max_users => case Max of
                         infinity -> infinity;
                         _ -> Max div W + (case K < Max rem W of true -> 1; false -> 0 end)
                     end}
     || P = #{rate := Rate, max_users := Max} <- Phases].

%% @doc Users launched by all phases, or `infinity'.
-spec total_users([phase()]) -> non_neg_integer() | infinity.
total_users(Phases) ->
    lists:foldl(fun(_, infinity) -> infinity;
                   (#{max_users := infinity, duration := infinity}, _) -> infinity;
                   (#{max_users := infinity, duration := D, rate := R}, Acc) ->
                        Acc + round(R * D / 1000);
                   (#{max_users := M, duration := infinity}, Acc) -> Acc + M;
                   (#{max_users := M, duration := D, rate := R}, Acc) ->
                        Acc + min(M, round(R * D / 1000))
                end, 0, Phases).

%% @doc Expected time (ms) until the last arrival, or `infinity'.
-spec arrival_time_ms([phase()]) -> non_neg_integer() | infinity.
arrival_time_ms(Phases) ->
    lists:foldl(fun(_, infinity) -> infinity;
                   (#{max_users := infinity, duration := infinity}, _) -> infinity;
                   (#{duration := D, max_users := infinity}, Acc) -> Acc + D;
                   (#{duration := infinity, max_users := M, rate := R}, Acc) ->
                        Acc + round(M * 1000 / R);
                   (#{duration := D, max_users := M, rate := R}, Acc) ->
                        Acc + min(D, round(M * 1000 / R))
                end, 0, Phases).
