%% throng_mam_slot: a slot's ids are its residue modulo 64, at least the
%% wanted time, above every id it gave (with many processes asking at
%% once), never at or beyond the limit; two slots never give one id.
-module(throng_mam_slot_tests).

-include("throng_proper.hrl").
-include_lib("eunit/include/eunit.hrl").

align_prop_test() ->
    Prop = ?FORALL({X, Slot}, {proper_types:non_neg_integer(), proper_types:integer(0, 63)},
                   begin
                       A = throng_mam_slot:align(X, Slot),
                       A >= X andalso A < X + 64 andalso A rem 64 =:= Slot
                   end),
    ?assert(proper:quickcheck(Prop, [{numtests, 1000}, {to_file, user}])).

%% Whatever the wanted times (the clock may stand still or go back), the
%% ids go up, keep the residue and are at least what was wanted.
ids_of_a_slot_prop_test() ->
    Prop = ?FORALL({Slot, Wants}, {proper_types:integer(0, 62),
                                   proper_types:list(proper_types:integer(1000, 5000))},
                   begin
                       St = throng_mam_slot:new(Slot, 0, 1 bsl 62),
                       Ids = [Id || W <- Wants, {ok, Id} <- [throng_mam_slot:next(St, W)]],
                       length(Ids) =:= length(Wants)
                           andalso Ids =:= lists:usort(Ids)
                           andalso lists:all(fun(Id) -> Id rem 64 =:= Slot end, Ids)
                           andalso lists:all(fun({Id, W}) -> Id >= W end, lists:zip(Ids, Wants))
                   end),
    ?assert(proper:quickcheck(Prop, [{numtests, 300}, {to_file, user}])).

%% Ids start above the floor (the last limit before a restart), even when
%% the time wanted is earlier.
floor_test() ->
    St = throng_mam_slot:new(5, 10000, 20000),
    {ok, Id} = throng_mam_slot:next(St, 100),
    ?assertEqual(10053, Id).

beyond_the_limit_test() ->
    St = throng_mam_slot:new(1, 0, 200),
    ?assertEqual({ok, 129}, throng_mam_slot:next(St, 100)),
    ?assertEqual({beyond, 257}, throng_mam_slot:next(St, 200)),
    %% Nothing was taken: the same answer until the limit moves.
    ?assertEqual({beyond, 257}, throng_mam_slot:next(St, 200)),
    ok = throng_mam_slot:set_limit(St, 1000),
    ?assertEqual({ok, 257}, throng_mam_slot:next(St, 200)),
    %% A limit never moves back.
    ok = throng_mam_slot:set_limit(St, 500),
    ?assertEqual(1000, throng_mam_slot:limit(St)).

two_slots_never_share_an_id_test() ->
    A = throng_mam_slot:new(0, 0, 1 bsl 62),
    B = throng_mam_slot:new(62, 0, 1 bsl 62),
    Now = 1700000000000000,
    IdsA = [ok_id(throng_mam_slot:next(A, Now)) || _ <- lists:seq(1, 1000)],
    IdsB = [ok_id(throng_mam_slot:next(B, Now)) || _ <- lists:seq(1, 1000)],
    ?assertEqual([], ordsets:intersection(lists:usort(IdsA), lists:usort(IdsB))).

the_shared_residue_is_no_slot_test() ->
    ?assertEqual(63, throng_mam_slot:shared()),
    ?assertEqual(lists:seq(0, 62), throng_mam_slot:slots()).

concurrent_ids_are_unique_test() ->
    St = throng_mam_slot:new(7, 0, 1 bsl 62),
    Parent = self(),
    Now = 1700000000000000,
    Pids = [spawn_link(fun() ->
                               Parent ! {self(), [ok_id(throng_mam_slot:next(St, Now))
                                                  || _ <- lists:seq(1, 2000)]}
                       end) || _ <- lists:seq(1, 8)],
    Ids = lists:append([receive {P, L} -> L end || P <- Pids]),
    ?assertEqual(16000, length(lists:usort(Ids))).

ok_id({ok, Id}) -> Id.
