%% @doc The nodes of the cluster as this node sees them, and where the
%% session directory keeps the entries of a bare JID.
%%
%% The member list (sorted, this node included) is a `persistent_term'
%% written by the membership process (`throng_cluster') when a node joins or
%% goes, and read by every session: a lookup costs a term read and, in a
%% cluster, one hash per member.
%%
%% The directory is sharded by bare JID with rendezvous (highest random
%% weight) hashing: every member scores each bare JID, and the two best are
%% its **home** and its **backup**. When a member goes, only the bare JIDs it
%% scored best for move, to their former backup. See {@link holder/2}.
-module(throng_members).

-export([members/0, others/0, set/1, epoch/0, clustered/0, place/1, home/1, holder/2, holder/3]).

-define(KEY, {?MODULE, members}).
-define(EPOCH, {?MODULE, epoch}).

%% @doc The serving members, sorted; [node()] when alone.
-spec members() -> [node(), ...].
members() ->
    persistent_term:get(?KEY, [node()]).

%% @doc The other serving members; [] when alone.
-spec others() -> [node()].
others() ->
    members() -- [node()].

%% @doc Records the member list (this node is always in it). A no-op when
%% it did not change (a persistent_term update has a cost for every process).
-spec set([node()]) -> ok.
set(Nodes) ->
    New = lists:usort([node() | Nodes]),
    case members() of
        New -> ok;
        _ ->
            persistent_term:put(?KEY, New),
            %% After the list: whoever reads the epoch and then the list
            %% never pairs an epoch with an older list.
            atomics:add(epoch_ref(), 1, 1)
    end.

%% @doc How many times the member list changed since this node started. A
%% node that keeps something in step with the other members (by their
%% broadcasts, which a dropped link loses) records the epoch it did so at,
%% reads the epoch before the list, and trusts what it keeps only while
%% the epoch is the same.
-spec epoch() -> non_neg_integer().
epoch() ->
    case persistent_term:get(?EPOCH, undefined) of
        undefined -> 0;
        Ref -> atomics:get(Ref, 1)
    end.

%% Made once: a new persistent_term key costs the other processes nothing
%% (only replacing one does).
epoch_ref() ->
    case persistent_term:get(?EPOCH, undefined) of
        undefined ->
            Ref = atomics:new(1, [{signed, false}]),
            persistent_term:put(?EPOCH, Ref),
            Ref;
        Ref -> Ref
    end.

%% @doc Whether other members exist (the directory is used only then).
-spec clustered() -> boolean().
clustered() ->
    case members() of
        [_] -> false;
        _ -> true
    end.

%% @doc The home and the backup of a bare JID among the members (the backup
%% is none when there is one member).
-spec place({binary(), binary()}) -> {node(), node() | none}.
place(US) ->
    place(US, members()).

place(_US, [Only]) ->
    {Only, none};
place(US, Members) ->
    {_, First, _, Second} =
        lists:foldl(fun(N, {S1, N1, S2, N2}) ->
                            case erlang:phash2({US, N}) of
                                S when S > S1 -> {S, N, S1, N1};
                                S when S > S2 -> {S1, N1, S, N};
                                _ -> {S1, N1, S2, N2}
                            end
                    end, {-1, none, -1, none}, Members),
    {First, Second}.

%% @doc The home of a bare JID: the member that answers lookups for it.
-spec home({binary(), binary()}) -> node().
home(US) ->
    element(1, place(US)).

%% @doc Where the directory entry of a session of US on node Node is kept:
%% at the home of US, or at its backup when the session is on the home
%% itself (the home's own session table answers for it there, and the
%% backup is who learns of its end if the home dies). none: no member
%% besides Node holds it (alone).
-spec holder({binary(), binary()}, node()) -> node() | none.
holder(US, Node) ->
    holder(US, Node, members()).

%% @doc holder/2 under a given member list (sorted, as members/0 returns).
-spec holder({binary(), binary()}, node(), [node(), ...]) -> node() | none.
holder(US, Node, Members) ->
    case place(US, Members) of
        {Node, Backup} -> Backup;
        {Home, _} -> Home
    end.
