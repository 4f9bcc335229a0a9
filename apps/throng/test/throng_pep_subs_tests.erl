%% @doc throng_pep_subs: a change of a node's subscribers locks the reverse
%% entries of the accounts it adds and removes in one order (sorted), so
%% that two changes at once cannot each hold one account's entry while
%% waiting for the other's (PostgreSQL would abort one: a deadlock). The
%% storage is a stand-in (meck) that records the keys it is asked to lock.
-module(throng_pep_subs_tests).

-include_lib("eunit/include/eunit.hrl").

reverse_entries_locked_in_one_order_test() ->
    Self = self(),
    ok = meck:new(throng_storage, [no_link]),
    ok = meck:new(throng_router, [non_strict, no_link]),
    try
        ok = meck:expect(throng_router, is_local, fun(_) -> true end),
        ok = meck:expect(throng_storage, kv_update,
                         fun(Bucket, Key, Fun) ->
                                 Self ! {locked, Bucket, Key},
                                 Found = case Bucket of
                                             pep_subs -> {ok, [{<<"a">>, <<"h">>, <<>>}]};
                                             pep_subscribed -> not_found
                                         end,
                                 {Reply, _} = Fun(Found),
                                 Reply
                         end),
        %% b joins, a leaves: b's entry is added to, a's taken from.
        ok = throng_pep_subs:set(<<"o">>, <<"h">>, <<"n">>,
                                 [{{<<"b">>, <<"h">>, <<>>}, subscribed},
                                  {{<<"a">>, <<"h">>, <<>>}, none}]),
        ?assertEqual([{pep_subs, {<<"o">>, <<"h">>, <<"n">>}},
                      {pep_subscribed, {<<"a">>, <<"h">>}},
                      {pep_subscribed, {<<"b">>, <<"h">>}}],
                     locked())
    after
        meck:unload([throng_storage, throng_router])
    end.

locked() ->
    receive {locked, B, K} -> [{B, K} | locked()]
    after 0 -> []
    end.
