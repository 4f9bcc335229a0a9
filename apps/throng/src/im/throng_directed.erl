%% @doc The entities a session sent directed available presence to (RFC 6121
%% §4.6): each is sent unavailable presence when the session becomes
%% unavailable (§4.6.3). A set with O(log n) insertion, removal and lookup,
%% bounded by the caller; the empty set is `[]', so a session that never
%% sends directed presence (nearly all of them) keeps no extra word.
-module(throng_directed).

-include("throng.hrl").

-export([new/0, add/3, remove/2, to_list/1, size/1]).
%% API used by tests (throng_directed_tests).
-ignore_xref([{size, 1}]).

-type set() :: [] | #{#jid{} => []}.
-export_type([set/0]).

-spec new() -> set().
new() -> [].

%% @doc Adds JID, unless the set already holds Max others: `full'.
-spec add(#jid{}, set(), non_neg_integer()) -> {ok, set()} | full.
add(JID, [], Max) when Max > 0 -> {ok, #{JID => []}};
add(_JID, [], _Max) -> full;
add(JID, Set, Max) ->
    case is_map_key(JID, Set) orelse map_size(Set) < Max of
        true -> {ok, Set#{JID => []}};
        false -> full
    end.

-spec remove(#jid{}, set()) -> set().
remove(_JID, []) -> [];
remove(JID, Set) ->
    case maps:remove(JID, Set) of
        Empty when map_size(Empty) =:= 0 -> [];
        Rest -> Rest
    end.

-spec to_list(set()) -> [#jid{}].
to_list([]) -> [];
to_list(Set) -> maps:keys(Set).

-spec size(set()) -> non_neg_integer().
size([]) -> 0;
size(Set) -> map_size(Set).
