%% @doc A room's discussion history (XEP-0045 §7.2.14): the last messages
%% kept in the room's state, and the selection an entering occupant asks
%% for with `<history maxchars maxstanzas seconds since/>'. Pure.
%%
%% The history is `{Max, Count, Entries}', newest first; an entry is
%% `{Stamp, Chars, El}' (microseconds since the epoch, the size of the
%% stanza as sent, the stanza without `to').
-module(throng_muc_history).

-include("throng.hrl").

-export([new/1, add/3, resize/2, select/3, to_list/1, from_list/2, request/1]).

-type entry() :: {Stamp :: integer(), Chars :: non_neg_integer(), El :: term()}.
-type history() :: {non_neg_integer(), non_neg_integer(), [entry()]}.
%% What an occupant asked for; absent keys put no limit.
-type request() :: #{maxstanzas => non_neg_integer(), maxchars => non_neg_integer(),
                     seconds => non_neg_integer(), since => integer()}.
-export_type([history/0, request/0, entry/0]).

%% @doc An empty history keeping at most Max messages.
-spec new(non_neg_integer()) -> history().
new(Max) -> {Max, 0, []}.

%% @doc Adds a message sent at Stamp (microseconds); the oldest goes when
%% Max are kept.
-spec add(integer(), term(), history()) -> history().
add(_Stamp, _El, {0, _, _} = H) ->
    H;
add(Stamp, El, {Max, N, Es}) ->
    Entry = {Stamp, chars(El), El},
    case N < Max of
        true -> {Max, N + 1, [Entry | Es]};
        false -> {Max, Max, [Entry | lists:droplast(Es)]}
    end.

%% @doc The history with a new maximum (room configuration changed).
-spec resize(non_neg_integer(), history()) -> history().
resize(Max, {_, N, Es}) when N =< Max -> {Max, N, Es};
resize(Max, {_, _, Es}) -> {Max, Max, lists:sublist(Es, Max)}.

%% @doc The messages to send an entering occupant, oldest first, with
%% their stamps: those within `seconds' of Now and at or after `since',
%% then at most the `maxstanzas' newest, then the newest whose sizes add up
%% to at most `maxchars' (§7.2.14: the limits combine).
-spec select(request(), integer(), history()) -> [{integer(), term()}].
select(Req, Now, {_, _, Es}) ->
    Since = max(maps:get(since, Req, 0),
                case Req of
                    #{seconds := S} -> Now - S * 1000000;
                    _ -> 0
                end),
    Recent = lists:takewhile(fun({T, _, _}) -> T >= Since end, Es),
    Counted = case Req of
                  #{maxstanzas := M} -> lists:sublist(Recent, M);
                  _ -> Recent
              end,
    Sized = case Req of
                #{maxchars := C} -> within(Counted, C);
                _ -> Counted
            end,
    lists:reverse([{T, El} || {T, _, El} <- Sized]).

within([{_, Chars, _} = E | Rest], Left) when Chars =< Left -> [E | within(Rest, Left - Chars)];
within(_, _) -> [].

%% @doc The entries, newest first (for storage).
-spec to_list(history()) -> [entry()].
to_list({_, _, Es}) -> Es.

%% @doc A history of at most Max from stored entries (newest first).
-spec from_list(non_neg_integer(), [entry()]) -> history().
from_list(Max, Es) ->
    Kept = lists:sublist(Es, Max),
    {Max, length(Kept), Kept}.

%% @doc The request of a `<history/>' element (attributes that are not
%% valid numbers or dates are ignored); `#{}' for none.
-spec request(#xmlel{} | undefined) -> request().
request(undefined) ->
    #{};
request(H) ->
    Ints = [{K, binary_to_integer(V)}
            || {K, A} <- [{maxstanzas, <<"maxstanzas">>}, {maxchars, <<"maxchars">>},
                          {seconds, <<"seconds">>}],
               V <- [throng_xml:attr(A, H)], V =/= undefined, is_int(V)],
    Since = case throng_xml:attr(<<"since">>, H) of
                undefined -> [];
                D ->
                    try [{since, calendar:rfc3339_to_system_time(binary_to_list(D),
                                                                 [{unit, microsecond}])}]
                    catch _:_ -> []
                    end
            end,
    maps:from_list(Ints ++ Since).

is_int(V) ->
    try binary_to_integer(V) >= 0 catch error:badarg -> false end.

chars(El) ->
    iolist_size(throng_xml:to_iolist(El)).
