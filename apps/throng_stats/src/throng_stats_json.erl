%% @doc A small JSON encoder (RFC 8259) for the /stats and /history
%% documents: maps (atom or binary keys), lists, binaries (UTF-8 strings),
%% numbers, true, false, null (and undefined, written null); other atoms
%% become strings. Floats are written in their shortest exact form.
-module(throng_stats_json).

-export([encode/1]).

-type json() :: #{atom() | binary() => json()} | [json()] | binary() | number() | atom().
-export_type([json/0]).

-spec encode(json()) -> iodata().
encode(true) -> <<"true">>;
encode(false) -> <<"false">>;
encode(null) -> <<"null">>;
encode(undefined) -> <<"null">>;
encode(A) when is_atom(A) -> string(atom_to_binary(A));
encode(B) when is_binary(B) -> string(B);
encode(I) when is_integer(I) -> integer_to_binary(I);
encode(F) when is_float(F) -> float_to_binary(F, [short]);
encode(L) when is_list(L) -> [$[, join([encode(X) || X <- L]), $]];
encode(M) when is_map(M) ->
    Pairs = [[string(key(K)), $:, encode(V)] || {K, V} <- lists:sort(maps:to_list(M))],
    [${, join(Pairs), $}].

key(K) when is_atom(K) -> atom_to_binary(K);
key(K) when is_binary(K) -> K.

join([]) -> [];
join([H | T]) -> [H | [[$, | X] || X <- T]].

string(B) ->
    [$", escape(B, 0, B, []), $"].

%% Copies runs of plain bytes as sub-binaries; escapes ", \ and controls.
escape(<<>>, Len, Orig, Acc) ->
    lists:reverse([binary:part(Orig, byte_size(Orig) - Len, Len) | Acc]);
escape(<<C, Rest/binary>>, Len, Orig, Acc) when C =:= $"; C =:= $\\; C < 16#20 ->
    Start = byte_size(Orig) - byte_size(Rest) - 1 - Len,
    escape(Rest, 0, Orig, [esc(C), binary:part(Orig, Start, Len) | Acc]);
escape(<<_, Rest/binary>>, Len, Orig, Acc) ->
    escape(Rest, Len + 1, Orig, Acc).

esc($") -> <<"\\\"">>;
esc($\\) -> <<"\\\\">>;
esc($\n) -> <<"\\n">>;
esc($\r) -> <<"\\r">>;
esc($\t) -> <<"\\t">>;
esc(C) -> io_lib:format("\\u~4.16.0b", [C]).
