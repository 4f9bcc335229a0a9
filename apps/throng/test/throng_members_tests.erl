%% Placement of bare JIDs on cluster members (throng_members): home and
%% backup differ, every member gets a fair share, a member that goes moves
%% only the bare JIDs it was home to (to their former backup), and a
%% session's entry is never kept on the session's own node.
-module(throng_members_tests).

-include_lib("eunit/include/eunit.hrl").

members(N) ->
    lists:sort([list_to_atom("n" ++ integer_to_list(I) ++ "@h") || I <- lists:seq(1, N)]).

users(N) ->
    [{<<"u", (integer_to_binary(I))/binary>>, <<"localhost">>} || I <- lists:seq(1, N)].

with_members(Members, F) ->
    Old = persistent_term:get({throng_members, members}, undefined),
    persistent_term:put({throng_members, members}, Members),
    try F()
    after
        case Old of
            undefined -> persistent_term:erase({throng_members, members});
            _ -> persistent_term:put({throng_members, members}, Old)
        end
    end.

alone_test() ->
    ?assertEqual([node()], throng_members:members()),
    ?assertNot(throng_members:clustered()),
    ?assertEqual({node(), none}, throng_members:place({<<"u">>, <<"h">>})),
    ?assertEqual(none, throng_members:holder({<<"u">>, <<"h">>}, node())).

home_and_backup_differ_test() ->
    Ms = members(5),
    with_members(Ms, fun() ->
        [begin
             {H, B} = throng_members:place(US),
             ?assert(lists:member(H, Ms)),
             ?assert(lists:member(B, Ms)),
             ?assertNotEqual(H, B)
         end || US <- users(500)]
    end).

fair_share_test() ->
    Ms = members(8),
    Counts = with_members(Ms, fun() ->
        lists:foldl(fun(US, Acc) -> maps:update_with(throng_members:home(US), fun(C) -> C + 1 end, 1, Acc) end,
                    #{}, users(8000))
    end),
    ?assertEqual(8, map_size(Counts)),
    %% 1,000 expected each; far outside +-25% would mean a broken hash.
    [?assert(C > 750 andalso C < 1250) || C <- maps:values(Counts)].

only_the_gone_members_jids_move_test() ->
    Ms = members(6),
    Gone = lists:nth(3, Ms),
    Before = with_members(Ms, fun() -> [{US, throng_members:place(US)} || US <- users(2000)] end),
    After = with_members(Ms -- [Gone], fun() -> [{US, throng_members:place(US)} || US <- users(2000)] end),
    [case Home of
         Gone -> ?assertEqual(Backup, NewHome);
         _ -> ?assertEqual(Home, NewHome)
     end || {{US, {Home, Backup}}, {US, {NewHome, _}}} <- lists:zip(Before, After)].

entry_never_on_the_sessions_node_test() ->
    Ms = members(4),
    with_members(Ms, fun() ->
        [begin
             Holder = throng_members:holder(US, N),
             ?assertNotEqual(N, Holder),
             ?assert(lists:member(Holder, Ms))
         end || US <- users(300), N <- Ms]
    end).

holder_under_other_members_test() ->
    Ms = members(3),
    US = {<<"x">>, <<"h">>},
    ?assertEqual(with_members(Ms, fun() -> throng_members:holder(US, hd(Ms)) end),
                 throng_members:holder(US, hd(Ms), Ms)).

%% The epoch counts the changes of the member list, not the calls.
epoch_counts_changes_test() ->
    with_members([node()], fun() ->
        E0 = throng_members:epoch(),
        ok = throng_members:set([]),
        ?assertEqual(E0, throng_members:epoch()),
        ok = throng_members:set(['other@h']),
        ?assertEqual(E0 + 1, throng_members:epoch()),
        ok = throng_members:set(['other@h']),
        ?assertEqual(E0 + 1, throng_members:epoch()),
        ok = throng_members:set([]),
        ?assertEqual(E0 + 2, throng_members:epoch())
    end).
