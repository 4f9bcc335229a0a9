%% @doc Messages in flight to a XEP-0198 session are durable until the
%% client acknowledges them (docs/architecture.md, "What survives kill -9"):
%% a message routed to a detached session is kept before the sender's stanza
%% counts as handled, a session that becomes detached keeps what it had
%% queued, offline messages taken by a session stay stored (in flight) until
%% acknowledged. The end of a session process without its clean-up (here
%% `exit(Pid, kill)', as `kill -9' ends every session of the node) is
%% followed by the recovery the node runs at start-up; the release-level
%% `kill -9' of the whole node is tested end to end (scripts/e2e.sh,
%% test/e2e/durability_e2e.py). Every case runs on both storage backends
%% (groups mnesia and pgsql).
-module(xep0198_durability_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).

all() ->
    [{group, mnesia}, {group, pgsql}].

groups() ->
    throng_ct:backend_groups([routed_to_detached_is_kept_before_the_sender_ack,
                              queue_is_kept_when_the_session_detaches,
                              offline_messages_stay_stored_until_acked,
                              resumed_and_acked_are_forgotten,
                              without_stream_management_delivery_forgets,
                              resume_timeout_returns_kept_to_offline,
                              restart_returns_every_kept_message,
                              kept_messages_of_a_removed_account_go]).

init_per_group(Group, Config) ->
    throng_ct:init_backend(Group, Config).

end_per_group(_Group, Config) ->
    throng_ct:end_backend(Config).

init_per_testcase(TC, Config) ->
    SM = case TC of
             resume_timeout_returns_kept_to_offline -> #{resume_timeout => 1};
             _ -> #{}
         end,
    throng_ct:start_backend(Config, #{stream_management => SM}),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

login(User, Res) -> ?C:login(User, <<"password">>, Res).

enable(C) ->
    ?C:send(C, #xmlel{name = <<"enable">>,
                      attrs = [{<<"xmlns">>, ?NS_SM}, {<<"resume">>, <<"true">>}]}),
    E = ?C:recv_stanza(C),
    ?assertEqual(<<"enabled">>, E#xmlel.name),
    throng_xml:attr(<<"id">>, E).

online(User, Res) ->
    C = login(User, Res),
    ok = ?C:available(C),
    C.

%% Alice, with stream management, sends bob's resource N messages and
%% waits for the server's acknowledgement of all of them.
send_acked(To, Bodies) ->
    A = login(<<"alice">>, <<"a">>),
    _ = enable(A),
    [?C:send(A, ?C:message(To, <<"chat">>, B)) || B <- Bodies],
    ?C:send(A, #xmlel{name = <<"r">>, attrs = [{<<"xmlns">>, ?NS_SM}]}),
    wait_ack(A, length(Bodies)),
    A.

wait_ack(C, N) ->
    case ?C:recv_stanza(C) of
        #xmlel{name = <<"a">>} = A -> ?assertEqual(integer_to_binary(N), throng_xml:attr(<<"h">>, A));
        _ -> wait_ack(C, N)
    end.

ack(C, H) ->
    ?C:send(C, #xmlel{name = <<"a">>, attrs = [{<<"xmlns">>, ?NS_SM},
                                                {<<"h">>, integer_to_binary(H)}]}).

bodies(Els) -> [throng_xml:subel_cdata(E, <<"body">>) || #xmlel{name = <<"message">>} = E <- Els].

recv_messages(C, N) -> recv_messages(C, N, []).
recv_messages(_C, 0, Acc) -> lists:reverse(Acc);
recv_messages(C, N, Acc) ->
    case ?C:recv_stanza(C) of
        #xmlel{name = <<"message">>} = M -> recv_messages(C, N - 1, [M | Acc]);
        _ -> recv_messages(C, N, Acc)
    end.

recv_until_messages(C, N) -> recv_until_messages(C, N, []).
recv_until_messages(_C, 0, Acc) -> lists:reverse(Acc);
recv_until_messages(C, N, Acc) ->
    case ?C:recv_stanza(C) of
        #xmlel{name = <<"message">>} = M -> recv_until_messages(C, N - 1, [M | Acc]);
        Other -> recv_until_messages(C, N, [Other | Acc])
    end.

bob() -> #jid{user = <<"bob">>, server = <<"localhost">>}.

offline() -> throng_mod_offline:count(bob()).

inflight() -> throng_storage:inflight_count().

session_pid(Res) ->
    throng_sm:lookup(#jid{user = <<"bob">>, server = <<"localhost">>, resource = Res}).

%% A session that dropped its connection and is waiting for a resumption.
detached(Res) ->
    Pid = session_pid(Res),
    throng_ct:wait_until(fun() -> throng_sm:is_detached(Pid) end, 5000),
    Pid.

%% The session process ends without its clean-up, as at kill -9; then the
%% recovery the node runs at start-up (for this one session: its orphans).
crash(Pid) ->
    MRef = erlang:monitor(process, Pid),
    exit(Pid, kill),
    receive {'DOWN', MRef, process, Pid, _} -> ok end,
    throng_storage:inflight_recover(orphans).

%% Bob logs in again and gets his stored messages.
stored_bodies(N) ->
    B = login(<<"bob">>, <<"again">>),
    ?C:send(B, ?C:presence([])),
    bodies(recv_messages(B, N)).

bodies_n(N) -> [integer_to_binary(I) || I <- lists:seq(1, N)].

%%% Cases

%% A message routed to a detached session is durable when the sender's
%% acknowledgement covers it: nothing waits in the session's memory only.
routed_to_detached_is_kept_before_the_sender_ack(_) ->
    B = login(<<"bob">>, <<"b">>),
    _ = enable(B),
    ok = ?C:available(B),
    ?C:abort(B),
    Pid = detached(<<"b">>),
    _ = send_acked(<<"bob@localhost/b">>, bodies_n(20)),
    ?assertEqual(20, inflight()),
    ?assertEqual(20, crash(Pid)),
    ?assertEqual(0, inflight()),
    ?assertEqual(20, offline()),
    ?assertEqual(bodies_n(20), stored_bodies(20)).

%% Messages delivered to a live session but not acknowledged become durable
%% when its connection drops.
queue_is_kept_when_the_session_detaches(_) ->
    B = online(<<"bob">>, <<"b">>),
    _ = enable(B),
    _ = send_acked(<<"bob@localhost/b">>, bodies_n(3)),
    [_, _, _] = recv_messages(B, 3),
    ?assertEqual(0, inflight()),   %% attached: held in the session's queue
    ?C:abort(B),
    Pid = detached(<<"b">>),
    ?assertEqual(3, inflight()),
    ?assertEqual(3, crash(Pid)),
    ?assertEqual(bodies_n(3), stored_bodies(3)).

%% Offline messages a session took stay stored, in flight, until its client
%% acknowledges them; what was not acknowledged is stored again after a
%% crash.
offline_messages_stay_stored_until_acked(_) ->
    _ = send_acked(<<"bob@localhost">>, bodies_n(4)),
    ?assertEqual(4, offline()),
    B = login(<<"bob">>, <<"b">>),
    _ = enable(B),
    ?C:send(B, ?C:presence([])),
    %% Everything the session sent (its own presence first, then the
    %% messages); the client acknowledges all but the last two messages.
    Got = recv_until_messages(B, 4),
    ?assertEqual(bodies_n(4), bodies(Got)),
    ?assertEqual(0, offline()),
    ?assertEqual(4, inflight()),
    ack(B, length(Got) - 2),
    throng_ct:wait_until(fun() -> inflight() =:= 2 end, 5000),
    ?assertEqual(2, crash(session_pid(<<"b">>))),
    ?assertEqual(2, offline()),
    ?assertEqual([<<"3">>, <<"4">>], stored_bodies(2)).

%% After a resumption the kept messages are sent again and forgotten once
%% acknowledged: nothing is left behind to be delivered twice.
resumed_and_acked_are_forgotten(_) ->
    B = online(<<"bob">>, <<"b">>),
    Id = enable(B),
    ?C:abort(B),
    _ = detached(<<"b">>),
    _ = send_acked(<<"bob@localhost/b">>, bodies_n(5)),
    ?assertEqual(5, inflight()),
    B2 = ?C:connect(#{}),
    _ = ?C:open_stream(B2),
    ok = ?C:auth_plain(B2, <<"bob">>, <<"password">>),
    _ = ?C:open_stream(B2),
    ?C:send(B2, #xmlel{name = <<"resume">>, attrs = [{<<"xmlns">>, ?NS_SM}, {<<"previd">>, Id},
                                                     {<<"h">>, <<"0">>}]}),
    #xmlel{name = <<"resumed">>} = ?C:recv_stanza(B2),
    ?assertEqual(bodies_n(5), bodies(recv_messages(B2, 5))),
    ?assertNot(throng_sm:is_detached(session_pid(<<"b">>))),
    ack(B2, 5),
    throng_ct:wait_until(fun() -> inflight() =:= 0 end, 5000),
    ?assertEqual(0, offline()).

%% Without XEP-0198 there is no acknowledgement: offline messages are
%% forgotten once written to the client.
without_stream_management_delivery_forgets(_) ->
    _ = send_acked(<<"bob@localhost">>, bodies_n(3)),
    ?assertEqual(bodies_n(3), stored_bodies(3)),
    throng_ct:wait_until(fun() -> inflight() =:= 0 end, 5000),
    ?assertEqual(0, offline()).

%% A detached session that is not resumed in time returns what it kept to
%% offline storage, and keeps nothing in flight.
resume_timeout_returns_kept_to_offline(_) ->
    B = online(<<"bob">>, <<"b">>),
    _ = enable(B),
    ?C:abort(B),
    _ = detached(<<"b">>),
    _ = send_acked(<<"bob@localhost/b">>, bodies_n(4)),
    throng_ct:wait_until(fun() -> session_pid(<<"b">>) =:= undefined end, 10000),
    throng_ct:wait_until(fun() -> offline() =:= 4 end, 5000),
    ?assertEqual(0, inflight()),
    ?assertEqual(bodies_n(4), stored_bodies(4)).

%% At start-up every message in flight on the node goes back to offline
%% storage: no session outlives its node.
restart_returns_every_kept_message(_) ->
    B = online(<<"bob">>, <<"b">>),
    _ = enable(B),
    ?C:abort(B),
    Pid = detached(<<"b">>),
    _ = send_acked(<<"bob@localhost/b">>, bodies_n(2)),
    ?assertEqual(2, inflight()),
    %% The session goes first, without its clean-up; then the node's
    %% storage starts again over the same files (or database).
    unlink(Pid),
    exit(Pid, kill),
    throng_ct:restart(),
    ?assertEqual(0, inflight()),
    ?assertEqual(2, offline()),
    ?assertEqual(bodies_n(2), stored_bodies(2)).

%% Removing an account removes its messages in flight too.
kept_messages_of_a_removed_account_go(_) ->
    B = online(<<"bob">>, <<"b">>),
    _ = enable(B),
    ?C:abort(B),
    _ = detached(<<"b">>),
    _ = send_acked(<<"bob@localhost/b">>, bodies_n(2)),
    ?assertEqual(2, inflight()),
    ok = throng_storage:remove_account(<<"bob">>, <<"localhost">>),
    ?assertEqual(0, inflight()).
