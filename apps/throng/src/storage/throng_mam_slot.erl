%% @doc Archive ids that no other node of a cluster gives: the arithmetic
%% and the node's counter behind them (the claims are in
%% {@link throng_storage_mnesia}).
%%
%% An archive id is the archiving time in microseconds ({@link
%% throng_mam_id}). In a cluster the archive is one Mnesia table written by
%% every node, and two nodes may archive for one user in the same
%% microsecond (two senders on two nodes). Each node therefore claims a
%% slot S in 0..62 and gives only ids equal to S modulo 64: no other node
%% can give the same one, so a copy is a plain write, with no transaction
%% (no lock, no read of the key). An id stays within 64 microseconds of the
%% time (a node that gives more than one id per 64 microseconds, about
%% 15,600 a second, runs ahead of the clock until its rate drops).
%%
%% A slot comes with a reservation: the node may give ids below a limit
%% that storage has on disk, and moves the limit on (a few seconds ahead)
%% before it gives an id beyond. After a restart the node's ids start at
%% its last limit, so a clock that went back cannot give an id twice; a
%% slot whose limit is long past may be taken by another node, whose ids
%% then start above that limit.
%%
%% Nodes without a slot (63 were claimed) all give ids equal to 63 modulo
%% 64 and take them in a transaction that checks the key, as every node
%% did before slots.
-module(throng_mam_slot).

-export([new/3, next/2, slot/1, limit/1, set_limit/2, align/2, shared/0, slots/0]).

-define(MOD, 64).
%% The residue of the nodes without a slot of their own.
-define(SHARED, 63).

-opaque state() :: {0..63, atomics:atomics_ref()}.
-export_type([state/0]).

%% @doc The slots nodes may claim: 0..62.
-spec slots() -> [0..62].
slots() ->
    lists:seq(0, ?SHARED - 1).

%% @doc The residue of the ids of nodes that have no slot.
-spec shared() -> 63.
shared() ->
    ?SHARED.

%% @doc A node's counter for Slot: ids above Floor and below Limit.
-spec new(0..63, non_neg_integer(), pos_integer()) -> state().
new(Slot, Floor, Limit) when Slot >= 0, Slot =< ?SHARED ->
    Ref = atomics:new(2, [{signed, true}]),
    atomics:put(Ref, 1, Floor),
    atomics:put(Ref, 2, Limit),
    {Slot, Ref}.

%% @doc The next id of the slot, at least Want (the time now, in
%% microseconds) and above every id the counter gave, or `{beyond, Id}'
%% when that id is not below the limit (move the limit, then ask again).
-spec next(state(), non_neg_integer()) -> {ok, pos_integer()} | {beyond, pos_integer()}.
next({Slot, Ref} = St, Want) ->
    Last = atomics:get(Ref, 1),
    Id = align(max(Want, Last + 1), Slot),
    case Id < atomics:get(Ref, 2) of
        false ->
            {beyond, Id};
        true ->
            case atomics:compare_exchange(Ref, 1, Last, Id) of
                ok -> {ok, Id};
                _Moved -> next(St, Want)
            end
    end.

-spec slot(state()) -> 0..63.
slot({Slot, _}) ->
    Slot.

-spec limit(state()) -> integer().
limit({_, Ref}) ->
    atomics:get(Ref, 2).

%% @doc Moves the limit on (never back).
-spec set_limit(state(), pos_integer()) -> ok.
set_limit({_, Ref} = St, Limit) ->
    Old = atomics:get(Ref, 2),
    case Limit > Old andalso atomics:compare_exchange(Ref, 2, Old, Limit) of
        false -> ok;
        ok -> ok;
        _Moved -> set_limit(St, Limit)
    end.

%% @doc The smallest integer from X on that equals Slot modulo 64.
-spec align(non_neg_integer(), 0..63) -> non_neg_integer().
align(X, Slot) ->
    X + (((Slot - X) rem ?MOD) + ?MOD) rem ?MOD.
