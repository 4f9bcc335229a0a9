%% @doc A home's hand-off worker while a keep at another node is not over
%% (throng_handoff_worker, "A node that does not answer"): other users'
%% jobs are done at once; the held user's later jobs, and its part of a
%% presence broadcast, wait and are done in the order they came once the
%% keep is over, however it ended; each job is confirmed once, when all of
%% it is over. The routing and the keeps are stand-ins (meck): a message
%% "keep..." starts a keep, a process that ends when the test says so.
-module(throng_handoff_worker_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

-define(W, throng_handoff_worker).

-export([others_go_on_and_the_held_come_after/1, a_broadcast_waits_only_for_the_held/1,
         a_failed_keep_still_releases/1, two_keeps_of_one_job/1,
         an_unknown_job_while_one_is_held/1]).

worker_test_() ->
    [{atom_to_list(T), fun() -> with_worker(fun ?MODULE:T/1) end}
     || T <- [others_go_on_and_the_held_come_after, a_broadcast_waits_only_for_the_held,
              a_failed_keep_still_releases, two_keeps_of_one_job,
              an_unknown_job_while_one_is_held]].

%% Test(Worker), with the stand-ins reporting to this process.
with_worker(Test) ->
    Self = self(),
    ok = meck:new(throng_router, [non_strict, no_link]),
    ok = meck:new(throng_sm, [non_strict, no_link]),
    ok = meck:new(throng_handoff, [passthrough, no_link]),
    try
        ok = meck:expect(throng_sm, memo, fun(F) -> F() end),
        ok = meck:expect(throng_sm, resume, fun(_) -> ok end),
        ok = meck:expect(throng_router, defer_keeps,
                         fun(F) ->
                                 put(keeps, []),
                                 Ended = try {ok, F()}
                                         catch C:W:St -> {C, W, St}
                                         end,
                                 {Ended, erase(keeps)}
                         end),
        %% A message "keep..." starts a keep; "keep2..." two (two sessions).
        ok = meck:expect(throng_router, route_at_home,
                         fun(_From, #jid{user = U, server = S}, El) ->
                                 Self ! {routed, U, El},
                                 case El of
                                     <<"keep2", _/binary>> ->
                                         keep(Self, U, S, El),
                                         keep(Self, U, S, <<El/binary, "b">>);
                                     <<"keep", _/binary>> ->
                                         keep(Self, U, S, El);
                                     _ -> ok
                                 end,
                                 ok
                         end),
        ok = meck:expect(throng_handoff, deliver_here,
                         fun(_From, El, Contacts) ->
                                 [Self ! {routed, U, El} || {U, _} <- Contacts],
                                 ok
                         end),
        ok = meck:expect(throng_handoff, done, fun(_Origin, Seq) -> Self ! {done, Seq}, ok end),
        {ok, W} = ?W:start_link(1),
        try Test(W)
        after
            unlink(W),
            exit(W, kill)
        end
    after
        meck:unload([throng_router, throng_sm, throng_handoff])
    end.

%% In the worker: a keep for U@S, started as throng_router would.
keep(Test, U, S, El) ->
    {Pid, MRef} = spawn_monitor(fun() -> receive go -> ok; fail -> exit(boom) end end),
    Test ! {keep, El, Pid, MRef},
    put(keeps, [{MRef, {U, S}} | get(keeps)]).

job(Pid, Seq, Job) ->
    Pid ! {handoff, node(), Seq, Job}.

route(User, El) ->
    {route, jid(<<"alice">>), jid(User), El, []}.

jid(U) ->
    #jid{user = U, server = <<"h">>, resource = <<"r">>}.

%% What the stand-ins did so far (keeps apart), once the worker has
%% handled what came before a call to it.
seen(W) ->
    {error, unknown_call} = gen_server:call(W, sync),
    seen_([]).

seen_(Acc) ->
    receive
        {keep, El, Pid, MRef} -> put({keep, El}, {Pid, MRef}), seen_(Acc);
        {routed, _, _} = M -> seen_([M | Acc]);
        {done, _} = M -> seen_([M | Acc])
    after 0 -> lists:reverse(Acc)
    end.

%% Ends the keep of message El, as it ends (go: kept; fail: crashed), and
%% waits for the worker to have handled its end.
ends(W, El, How) ->
    {Pid, MRef} = get({keep, El}),
    Pid ! How,
    throng_ct_wait(fun() -> not is_map_key(MRef, element(3, sys:get_state(W))) end, 500).

throng_ct_wait(F, Tries) ->
    case F() of
        true -> ok;
        false when Tries > 0 -> timer:sleep(10), throng_ct_wait(F, Tries - 1);
        false -> error(timeout)
    end.

others_go_on_and_the_held_come_after(W) ->
    job(W, 1, route(<<"d">>, <<"keep1">>)),
    job(W, 2, route(<<"e">>, <<"2">>)),
    job(W, 3, route(<<"d">>, <<"3">>)),
    job(W, 4, route(<<"d">>, <<"keep4">>)),
    job(W, 5, route(<<"d">>, <<"5">>)),
    ?assertEqual([{routed, <<"d">>, <<"keep1">>}, {routed, <<"e">>, <<"2">>}, {done, 2}],
                 seen(W)),
    ends(W, <<"keep1">>, go),
    %% 3 is done at once; keep4 starts a keep, so 5 waits again.
    ?assertEqual([{done, 1}, {routed, <<"d">>, <<"3">>}, {done, 3},
                  {routed, <<"d">>, <<"keep4">>}],
                 seen(W)),
    ends(W, <<"keep4">>, go),
    ?assertEqual([{done, 4}, {routed, <<"d">>, <<"5">>}, {done, 5}], seen(W)),
    %% Nothing held any longer: a message to d is routed at once.
    job(W, 6, route(<<"d">>, <<"6">>)),
    ?assertEqual([{routed, <<"d">>, <<"6">>}, {done, 6}], seen(W)),
    ?assertEqual(#{}, element(2, sys:get_state(W))).

a_broadcast_waits_only_for_the_held(W) ->
    job(W, 1, route(<<"d">>, <<"keep1">>)),
    job(W, 2, {available, jid(<<"alice">>), <<"p">>, [{<<"d">>, <<"h">>}, {<<"e">>, <<"h">>}]}),
    ?assertEqual([{routed, <<"d">>, <<"keep1">>}, {routed, <<"e">>, <<"p">>}], seen(W)),
    ends(W, <<"keep1">>, go),
    ?assertEqual([{done, 1}, {routed, <<"d">>, <<"p">>}, {done, 2}], seen(W)).

a_failed_keep_still_releases(W) ->
    job(W, 1, route(<<"d">>, <<"keep1">>)),
    job(W, 2, route(<<"d">>, <<"2">>)),
    ?assertEqual([{routed, <<"d">>, <<"keep1">>}], seen(W)),
    ends(W, <<"keep1">>, fail),
    ?assertEqual([{done, 1}, {routed, <<"d">>, <<"2">>}, {done, 2}], seen(W)).

%% One message to two detached sessions: the job is done when both are.
two_keeps_of_one_job(W) ->
    job(W, 1, route(<<"d">>, <<"keep2">>)),
    job(W, 2, route(<<"d">>, <<"2">>)),
    ?assertEqual([{routed, <<"d">>, <<"keep2">>}], seen(W)),
    ends(W, <<"keep2">>, go),
    ?assertEqual([], seen(W)),
    ends(W, <<"keep2b">>, go),
    ?assertEqual([{done, 1}, {routed, <<"d">>, <<"2">>}, {done, 2}], seen(W)).

%% A job of a shape this worker does not know (a node of another version)
%% while a bare JID is held fails alone, is confirmed, and the worker goes
%% on. (Before, sorting it into held and free crashed the worker, and the
%% held jobs with it.)
an_unknown_job_while_one_is_held(W) ->
    job(W, 1, route(<<"d">>, <<"keep1">>)),
    job(W, 2, {newer_kind, <<"x">>}),
    job(W, 3, route(<<"d">>, <<"3">>)),
    ?assertEqual([{routed, <<"d">>, <<"keep1">>}, {done, 2}], seen(W)),
    ends(W, <<"keep1">>, go),
    ?assertEqual([{done, 1}, {routed, <<"d">>, <<"3">>}, {done, 3}], seen(W)).
