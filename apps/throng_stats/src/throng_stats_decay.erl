%% @doc The 1 s, 10 s and 100 s averages of a series: exponentially
%% decaying averages, as in the Unix load average and WhatsApp's per-second
%% reporter.
%%
%% Why decays rather than windows: a decay is three floats per series, an
%% update is three multiplications, and nothing has to be kept or evicted;
%% a 100 s window would keep 100 samples for each of several hundred series.
%% A decay also takes a late or early tick in its stride: the weight of the
%% old average is exp(-Dt / Tau) for the time Dt that really passed, so two
%% half-second steps equal one one-second step. The price is that an old
%% spike never quite leaves the average (its weight falls by e every Tau
%% seconds) where a window would drop it at once; for a health gauge that is
%% read against its own recent past, that is the behaviour wanted.
%%
%% The first sample seeds all three averages, so a node that has just
%% started does not show averages climbing from zero.
-module(throng_stats_decay).

-export([new/1, update/3, averages/1]).

-opaque decay() :: {float(), float(), float()}.
-export_type([decay/0]).

%% @doc Averages seeded with a first value.
-spec new(number()) -> decay().
new(V) ->
    F = float(V),
    {F, F, F}.

%% @doc Folds in a value observed Dt seconds after the previous one.
-spec update(decay(), number(), number()) -> decay().
update({A1, A10, A100}, V, Dt) when Dt >= 0 ->
    {step(A1, V, Dt, 1), step(A10, V, Dt, 10), step(A100, V, Dt, 100)}.

step(Avg, V, Dt, Tau) ->
    W = math:exp(-Dt / Tau),
    V + (Avg - V) * W.

%% @doc {1 s, 10 s, 100 s} averages.
-spec averages(decay()) -> {float(), float(), float()}.
averages(D) ->
    D.
