%% @doc A bloom filter in `atomics': a fixed-size set of terms that answers
%% "certainly not in it" or "perhaps in it", shared by every process with no
%% copy and no lock. Terms can be added, never removed.
%%
%% `Bytes' of bits (rounded up to 64-bit words) and 4 bit positions per
%% term, from two 32-bit hashes (double hashing: position i is H1 + i*H2).
%% With n terms in m bits the chance that a term never added answers
%% "perhaps" is about (1 - e^(-4n/m))^4: 1 in 74,000 at 64 bits a term, 1
%% in 1,100,000 at 128, 1 in 420 at 16. The filter counts the adds
%% ({@link count/1}: a term added twice counts twice), so that its owner
%% can tell when it is fuller than it was sized for.
-module(throng_bloom).

-export([new/1, add/2, member/2, bytes/1, count/1]).

-define(K, 4).

%% The bits in words 1..Bits/64 of the atomics, the count of adds in the
%% word after them.
-opaque bloom() :: {bloom, atomics:atomics_ref(), pos_integer()}.
-export_type([bloom/0]).

%% @doc An empty filter of at least Bytes bytes (at least one word).
-spec new(pos_integer()) -> bloom().
new(Bytes) when is_integer(Bytes), Bytes > 0 ->
    Words = (Bytes + 7) div 8,
    {bloom, atomics:new(Words + 1, [{signed, false}]), Words * 64}.

%% @doc Adds Term (safe from any number of processes at once).
-spec add(bloom(), term()) -> ok.
add({bloom, Ref, Bits}, Term) ->
    lists:foreach(fun(Pos) -> set(Ref, Pos) end, positions(Term, Bits)),
    atomics:add(Ref, Bits div 64 + 1, 1).

%% @doc false: Term was never added. true: it perhaps was.
-spec member(bloom(), term()) -> boolean().
member({bloom, Ref, Bits}, Term) ->
    lists:all(fun(Pos) -> is_set(Ref, Pos) end, positions(Term, Bits)).

%% @doc The filter's size in bytes.
-spec bytes(bloom()) -> pos_integer().
bytes({bloom, _Ref, Bits}) ->
    Bits div 8.

%% @doc How many times {@link add/2} was called.
-spec count(bloom()) -> non_neg_integer().
count({bloom, Ref, Bits}) ->
    atomics:get(Ref, Bits div 64 + 1).

positions(Term, Bits) ->
    H1 = erlang:phash2(Term, 1 bsl 32),
    %% Odd, so that the positions differ whenever Bits is a power of two.
    H2 = erlang:phash2({?MODULE, Term}, 1 bsl 32) bor 1,
    [(H1 + I * H2) rem Bits || I <- lists:seq(0, ?K - 1)].

%% Word and bit of a position (atomics are numbered from 1).
set(Ref, Pos) ->
    Ix = Pos div 64 + 1,
    Bit = 1 bsl (Pos rem 64),
    set(Ref, Ix, Bit, atomics:get(Ref, Ix)).

%% No atomic OR: compare-and-exchange until the bit is in.
set(_Ref, _Ix, Bit, Old) when Old band Bit =/= 0 ->
    ok;
set(Ref, Ix, Bit, Old) ->
    case atomics:compare_exchange(Ref, Ix, Old, Old bor Bit) of
        ok -> ok;
        Now -> set(Ref, Ix, Bit, Now)
    end.

is_set(Ref, Pos) ->
    atomics:get(Ref, Pos div 64 + 1) band (1 bsl (Pos rem 64)) =/= 0.
