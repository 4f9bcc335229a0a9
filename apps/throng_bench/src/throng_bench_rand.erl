%% @doc Random durations for think times and session lengths.
%%
%% Two generators: the `rand' module with an explicit state (used where the
%% quality of the stream matters, e.g. the arrival process), and a 32-bit
%% xorshift whose whole state is one small integer (used inside simulated
%% users, whose memory is counted in bytes: the `rand' state would add a few
%% hundred bytes to every user).
-module(throng_bench_rand).

-export([sample/2, sample_tiny/2, tiny_seed/1, tiny_uniform/1]).

-export_type([dist/0, tiny/0]).

%% Durations are in milliseconds.
-type dist() :: {constant, non_neg_integer()}
              | {exponential, non_neg_integer()}
              | {uniform, non_neg_integer(), non_neg_integer()}.
-type tiny() :: 1..16#FFFFFFFF.

%% @doc Draw a value (ms) from a distribution with a `rand' state.
-spec sample(dist(), rand:state()) -> {non_neg_integer(), rand:state()}.
sample({constant, V}, S) -> {V, S};
sample({exponential, Mean}, S0) ->
    {U, S} = rand:uniform_real_s(S0),
    {round(-Mean * math:log(U)), S};
sample({uniform, Lo, Hi}, S0) ->
    {U, S} = rand:uniform_real_s(S0),
    {Lo + round(U * (Hi - Lo)), S}.

%% @doc Draw a value (ms) with the tiny generator.
-spec sample_tiny(dist(), tiny()) -> {non_neg_integer(), tiny()}.
sample_tiny({constant, V}, X) -> {V, X};
sample_tiny({exponential, Mean}, X0) ->
    {U, X} = tiny_uniform(X0),
    {round(-Mean * math:log(U)), X};
sample_tiny({uniform, Lo, Hi}, X0) ->
    {U, X} = tiny_uniform(X0),
    {Lo + round(U * (Hi - Lo)), X}.

%% @doc A tiny-generator state from any term (never zero).
-spec tiny_seed(term()) -> tiny().
tiny_seed(Term) ->
    case erlang:phash2(Term, 16#FFFFFFFF) of
        0 -> 16#9E3779B9;
        X -> X
    end.

%% @doc A float in (0, 1) and the next state (xorshift32, Marsaglia 2003).
-spec tiny_uniform(tiny()) -> {float(), tiny()}.
tiny_uniform(X0) ->
    X1 = X0 bxor ((X0 bsl 13) band 16#FFFFFFFF),
    X2 = X1 bxor (X1 bsr 17),
    X = X2 bxor ((X2 bsl 5) band 16#FFFFFFFF),
    {X / 4294967296.0, X}.
