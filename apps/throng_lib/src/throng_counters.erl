%% @doc Named counters: one `counters' array whose slots are known by name.
%% The names are given once, when the array is created, and fix the order
%% of the slots; nobody numbers a slot by hand. Adding is a map lookup and
%% one counters:add, from any process, without a message.
-module(throng_counters).

-export([new/2, add/3, sub/3, get/2, to_map/1, reset/1]).
%% API used by tests: one counter's value.
-ignore_xref([{get, 2}]).

-record(named, {ref :: counters:counters_ref(),
                index :: #{atom() => pos_integer()}}).
-opaque t() :: #named{}.
-export_type([t/0]).

%% @doc Counters for the given (distinct) names, all 0; Opts as for
%% counters:new/2 (e.g. [write_concurrency] for counters bumped by many
%% processes at once).
-spec new([atom(), ...], [atomics | write_concurrency]) -> t().
new(Names, Opts) ->
    N = length(Names),
    N = length(lists:usort(Names)),   %% a name twice is a mistake
    #named{ref = counters:new(N, Opts),
           index = maps:from_list(lists:zip(Names, lists:seq(1, N)))}.

-spec add(t(), atom(), integer()) -> ok.
add(#named{ref = Ref, index = Index}, Name, N) ->
    counters:add(Ref, maps:get(Name, Index), N).

-spec sub(t(), atom(), integer()) -> ok.
sub(#named{ref = Ref, index = Index}, Name, N) ->
    counters:sub(Ref, maps:get(Name, Index), N).

-spec get(t(), atom()) -> integer().
get(#named{ref = Ref, index = Index}, Name) ->
    counters:get(Ref, maps:get(Name, Index)).

%% @doc Every counter by name.
-spec to_map(t()) -> #{atom() => integer()}.
to_map(#named{ref = Ref, index = Index}) ->
    maps:map(fun(_Name, I) -> counters:get(Ref, I) end, Index).

%% @doc Sets every counter to 0.
-spec reset(t()) -> ok.
reset(#named{ref = Ref, index = Index}) ->
    maps:foreach(fun(_Name, I) -> counters:put(Ref, I, 0) end, Index).
