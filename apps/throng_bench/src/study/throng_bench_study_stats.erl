%% @doc The statistics of a study: the spread of a setting's repeats (mean,
%% standard deviation, a 95% confidence interval of the mean from Student's
%% t) and the effect of a setting against the baseline (difference of the
%% means with Welch's 95% interval, which does not assume equal variances).
-module(throng_bench_study_stats).

-export([describe/1, effect/2, t95/1]).
%% API used by tests: the t quantiles.
-ignore_xref([{t95, 1}]).

-type summary() :: #{n := non_neg_integer(), mean := number() | null, sd := number() | null,
                     min := number() | null, max := number() | null,
                     ci95 := number() | null}.
-export_type([summary/0]).

%% @doc n, mean, sd, min, max and the half-width of the 95% interval of the
%% mean (null where the values do not allow it: none, or one for sd/ci95).
-spec describe([number()]) -> summary().
describe([]) ->
    #{n => 0, mean => null, sd => null, min => null, max => null, ci95 => null};
describe(Xs) ->
    N = length(Xs),
    Mean = lists:sum(Xs) / N,
    {Sd, Ci} = case N of
                   1 -> {null, null};
                   _ ->
                       S = math:sqrt(lists:sum([(X - Mean) * (X - Mean) || X <- Xs]) / (N - 1)),
                       {S, t95(N - 1) * S / math:sqrt(N)}
               end,
    #{n => N, mean => Mean, sd => Sd, min => lists:min(Xs), max => lists:max(Xs), ci95 => Ci}.

%% @doc The effect of B against A: B's mean less A's, in units and in
%% percent of A's, with Welch's 95% interval of the difference (null with
%% fewer than two values on either side). `significant': the interval
%% excludes 0.
-spec effect([number()], [number()]) -> map().
effect(A, B) ->
    #{mean := MA} = DA = describe(A),
    #{mean := MB} = DB = describe(B),
    case {MA, MB} of
        {null, _} -> none();
        {_, null} -> none();
        _ ->
            Diff = MB - MA,
            Pct = case MA == 0 of
                      true -> null;
                      false -> 100 * Diff / MA
                  end,
            case {DA, DB} of
                {#{n := NA, sd := SA}, #{n := NB, sd := SB}} when NA >= 2, NB >= 2 ->
                    VA = SA * SA / NA,
                    VB = SB * SB / NB,
                    Se = math:sqrt(VA + VB),
                    Half = case Se == 0 of
                               true -> 0.0;
                               false ->
                                   Df = (VA + VB) * (VA + VB)
                                       / (VA * VA / (NA - 1) + VB * VB / (NB - 1)),
                                   t95(Df) * Se
                           end,
                    #{diff => Diff, pct => Pct, ci95 => Half,
                      significant => abs(Diff) > Half};
                _ ->
                    #{diff => Diff, pct => Pct, ci95 => null, significant => null}
            end
    end.

none() -> #{diff => null, pct => null, ci95 => null, significant => null}.

%% @doc The two-sided 95% quantile of Student's t with Df degrees of
%% freedom (Df may be fractional, as Welch's is: it is rounded down, which
%% makes the interval slightly wider, never narrower).
-spec t95(number()) -> float().
t95(Df) when Df < 1 -> 12.706;
t95(Df) ->
    Table = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
             2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
             2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042},
    D = floor(Df),
    if
        D =< 30 -> element(D, Table);
        D =< 40 -> 2.021;
        D =< 60 -> 2.000;
        D =< 120 -> 1.980;
        true -> 1.960
    end.
