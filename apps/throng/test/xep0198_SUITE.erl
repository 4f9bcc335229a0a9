%% @doc XEP-0198 Stream Management against the real server: enabling,
%% acknowledgements both ways, resumption with re-delivery of what the
%% client did not acknowledge, and the guarantee that a message the server
%% accepted is never silently dropped: a session that dies without being
%% resumed puts its unacknowledged messages in offline storage.
-module(xep0198_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(SM(Name), #xmlel{name = Name, attrs = [{<<"xmlns">>, ?NS_SM}]}).

all() ->
    [feature_advertised, enable_without_resume, enable_twice_fails, client_requests_ack,
     server_requests_ack, ack_drops_queue, ack_too_high_is_error,
     resume_redelivers_unacked, stanzas_right_after_resume_are_handled,
     resume_unknown_id_fails, resume_other_user_fails,
     queued_while_detached_are_delivered, timeout_moves_unacked_to_offline,
     clean_close_moves_unacked_to_offline, overflow_while_detached_goes_offline,
     never_acking_client_is_cut_off, killed_session_returns_its_messages,
     enable_before_auth_fails_stream_goes_on, resume_before_auth_fails_stream_goes_on,
     ack_request_before_auth_is_not_authorized, tampered_id_is_item_not_found,
     {group, socket_backend}].

%% A resumption hands the new connection's socket to the old session's
%% process: again on the socket backend.
groups() ->
    [throng_ct:socket_backend_group(
       [resume_redelivers_unacked, stanzas_right_after_resume_are_handled,
        queued_while_detached_are_delivered, clean_close_moves_unacked_to_offline])].

init_per_group(socket_backend, Config) ->
    throng_ct:init_socket_backend(Config).

end_per_group(_Group, _Config) ->
    ok.

init_per_testcase(TC, Config) ->
    SM = case TC of
             timeout_moves_unacked_to_offline -> #{resume_timeout => 1};
             overflow_while_detached_goes_offline -> #{max_unacked => 3};
             never_acking_client_is_cut_off -> #{max_unacked => 3, ack_every => 100};
             server_requests_ack -> #{ack_every => 2};
             _ -> #{}
         end,
    %% recv_buffer 700: neither default, so resume_redelivers_unacked can
    %% tell which size a resumed socket reads.
    throng_ct:start(Config, #{stream_management => SM, listener => #{recv_buffer => 700}}),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

login(User, Res) -> ?C:login(User, <<"password">>, Res).

enable(C, Resume) ->
    ?C:send(C, #xmlel{name = <<"enable">>,
                      attrs = [{<<"xmlns">>, ?NS_SM}] ++ [{<<"resume">>, <<"true">>} || Resume]}),
    E = ?C:recv_stanza(C),
    ?assertEqual(<<"enabled">>, E#xmlel.name),
    E.

online(User, Res) ->
    C = login(User, Res),
    ok = ?C:available(C),
    C.

msg(To, Body) -> ?C:message(To, <<"chat">>, Body).

bodies(Els) -> [throng_xml:subel_cdata(E, <<"body">>) || #xmlel{name = <<"message">>} = E <- Els].

recv_messages(C, N) -> recv_messages(C, N, []).
recv_messages(_C, 0, Acc) -> lists:reverse(Acc);
recv_messages(C, N, Acc) ->
    case ?C:recv_stanza(C) of
        #xmlel{name = <<"message">>} = M -> recv_messages(C, N - 1, [M | Acc]);
        _ -> recv_messages(C, N, Acc)
    end.

bob() -> #jid{user = <<"bob">>, server = <<"localhost">>}.

%% Logs in a second connection as User and asks to resume PrevId with H.
resume(User, PrevId, H) ->
    resume(User, PrevId, H, []).

%% The same, with stanzas sent right after the request, each in its own write
%% (without waiting for the answer).
resume(User, PrevId, H, Then) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ok = ?C:auth_plain(C, User, <<"password">>),
    F = ?C:open_stream(C),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"sm">>, ?NS_SM)),
    ?C:send(C, #xmlel{name = <<"resume">>,
                      attrs = [{<<"xmlns">>, ?NS_SM}, {<<"previd">>, PrevId},
                               {<<"h">>, integer_to_binary(H)}]}),
    [?C:send(C, El) || El <- Then],
    {C, ?C:recv_stanza(C)}.

%%% Cases

feature_advertised(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ok = ?C:auth_plain(C, <<"alice">>, <<"password">>),
    F = ?C:open_stream(C),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"sm">>, ?NS_SM)).

enable_without_resume(_) ->
    C = login(<<"alice">>, <<"r">>),
    E = enable(C, false),
    ?assertEqual(undefined, throng_xml:attr(<<"resume">>, E)).

enable_twice_fails(_) ->
    C = login(<<"alice">>, <<"r">>),
    _ = enable(C, true),
    ?C:send(C, ?SM(<<"enable">>)),
    ?assertEqual(<<"failed">>, (?C:recv_stanza(C))#xmlel.name).

%% The server counts the stanzas it handled and answers <r/> with <a h/>.
client_requests_ack(_) ->
    C = login(<<"alice">>, <<"r">>),
    _ = enable(C, false),
    ?C:send(C, msg(<<"bob@localhost">>, <<"1">>)),
    ?C:send(C, msg(<<"bob@localhost">>, <<"2">>)),
    ?C:send(C, ?SM(<<"r">>)),
    A = ?C:recv_stanza(C),
    ?assertEqual({<<"a">>, <<"2">>}, {A#xmlel.name, throng_xml:attr(<<"h">>, A)}).

%% After ack_every unacknowledged stanzas the server asks with <r/>.
server_requests_ack(_) ->
    B = online(<<"bob">>, <<"b">>),
    _ = enable(B, false),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, msg(<<"bob@localhost/b">>, <<"1">>)),
    ?C:send(A, msg(<<"bob@localhost/b">>, <<"2">>)),
    [_, _] = recv_messages(B, 2),
    R = ?C:recv_stanza(B),
    ?assertEqual(<<"r">>, R#xmlel.name).

ack_drops_queue(_) ->
    B = online(<<"bob">>, <<"b">>),
    _ = enable(B, true),
    A = online(<<"alice">>, <<"a">>),
    [?C:send(A, msg(<<"bob@localhost/b">>, integer_to_binary(N))) || N <- lists:seq(1, 3)],
    [_, _, _] = recv_messages(B, 3),
    ?C:send(B, #xmlel{name = <<"a">>, attrs = [{<<"xmlns">>, ?NS_SM}, {<<"h">>, <<"3">>}]}),
    timer:sleep(200),
    %% Nothing unacknowledged: a clean close stores nothing offline.
    ?C:close(B),
    timer:sleep(300),
    ?assertEqual(0, throng_mod_offline:count(bob())).

ack_too_high_is_error(_) ->
    B = login(<<"bob">>, <<"b">>),
    _ = enable(B, false),
    ?C:send(B, #xmlel{name = <<"a">>, attrs = [{<<"xmlns">>, ?NS_SM}, {<<"h">>, <<"5">>}]}),
    ?assertEqual(<<"undefined-condition">>, ?C:closed(B, 5000)).

%% The connection drops with three messages unacknowledged (one acked);
%% a new connection resumes and receives exactly the unacknowledged ones.
resume_redelivers_unacked(_) ->
    B = online(<<"bob">>, <<"b">>),
    E = enable(B, true),
    Id = throng_xml:attr(<<"id">>, E),
    A = online(<<"alice">>, <<"a">>),
    [?C:send(A, msg(<<"bob@localhost/b">>, integer_to_binary(N))) || N <- lists:seq(1, 4)],
    [_, _, _, _] = recv_messages(B, 4),
    ?C:abort(B),
    timer:sleep(200),
    {B2, Resumed} = resume(<<"bob">>, Id, 1),
    ?assertEqual(<<"resumed">>, Resumed#xmlel.name),
    ?assertEqual(Id, throng_xml:attr(<<"previd">>, Resumed)),
    ?assertEqual([<<"2">>, <<"3">>, <<"4">>], bodies(recv_messages(B2, 3))),
    %% The socket came from a connection still logging in (reading
    %% login_recv_buffer bytes at a time): it now reads recv_buffer's.
    {_, D} = sys:get_state(throng_sm:lookup((bob())#jid{resource = <<"b">>})),
    {ok, [{buffer, 700}]} = inet:getopts(element(2, element(2, D)), [buffer]),
    %% The session goes on: presence and routing still point at it.
    ?C:send(A, msg(<<"bob@localhost/b">>, <<"after">>)),
    ?assertEqual([<<"after">>], bodies(recv_messages(B2, 1))).

%% What the client sends while its resumption is being arranged (the old
%% session takes the socket over) is handled by the resumed session, in order.
stanzas_right_after_resume_are_handled(_) ->
    B = online(<<"bob">>, <<"b">>),
    Id = throng_xml:attr(<<"id">>, enable(B, true)),
    A = online(<<"alice">>, <<"a">>),
    ?C:abort(B),
    timer:sleep(200),
    Bodies = [integer_to_binary(N) || N <- lists:seq(1, 30)],
    {B2, Resumed} = resume(<<"bob">>, Id, 0, [msg(<<"alice@localhost/a">>, Body) || Body <- Bodies]),
    ?assertEqual(<<"resumed">>, Resumed#xmlel.name),
    ?assertEqual(Bodies, bodies(recv_messages(A, 30))),
    %% The stream goes on: an ack request is answered with all 30 counted.
    ?C:send(B2, #xmlel{name = <<"r">>, attrs = [{<<"xmlns">>, ?NS_SM}]}),
    Ack = ?C:recv_stanza(B2),
    ?assertEqual({<<"a">>, <<"30">>}, {Ack#xmlel.name, throng_xml:attr(<<"h">>, Ack)}).

resume_unknown_id_fails(_) ->
    {_C, F} = resume(<<"bob">>, <<"bm90IGFuIGlk">>, 0),
    ?assertEqual(<<"failed">>, F#xmlel.name).

resume_other_user_fails(_) ->
    B = online(<<"bob">>, <<"b">>),
    Id = throng_xml:attr(<<"id">>, enable(B, true)),
    ?C:abort(B),
    timer:sleep(200),
    {_C, F} = resume(<<"alice">>, Id, 0),
    ?assertEqual(<<"failed">>, F#xmlel.name).

%% Stanzas for a detached session wait for it and come on resumption.
queued_while_detached_are_delivered(_) ->
    B = online(<<"bob">>, <<"b">>),
    Id = throng_xml:attr(<<"id">>, enable(B, true)),
    ?C:abort(B),
    timer:sleep(300),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, msg(<<"bob@localhost/b">>, <<"while away">>)),
    timer:sleep(200),
    {B2, #xmlel{name = <<"resumed">>}} = resume(<<"bob">>, Id, 0),
    ?assertEqual([<<"while away">>], bodies(recv_messages(B2, 1))).

%% A session replaced while it is stuck is killed after five seconds,
%% without its own clean-up: the stored messages it was delivering and the
%% client had not acknowledged go back to offline storage, and the new
%% session of that resource gets them.
killed_session_returns_its_messages(_) ->
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, msg(<<"bob@localhost">>, <<"kept until acked">>)),
    ok = throng_ct:wait_until(fun() -> throng_mod_offline:count(bob()) =:= 1 end, 5000),
    Old = login(<<"bob">>, <<"b">>),
    _ = enable(Old, false),
    ?C:send(Old, ?C:presence([])),   % initial presence: the stored message comes
    ?assertEqual(<<"kept until acked">>, next_body(Old)),
    ?assertEqual(0, throng_mod_offline:count(bob())),
    OldPid = throng_sm:lookup((bob())#jid{resource = <<"b">>}),
    ok = sys:suspend(OldPid),
    New = ?C:login(<<"bob">>, <<"password">>, <<"b">>, #{bind_timeout => 15000}),
    ?assertNot(is_process_alive(OldPid)),
    ?C:send(New, ?C:presence([])),
    ?assertEqual(<<"kept until acked">>, next_body(New)),
    [?C:close(C) || C <- [A, New]].

%% The body of the next message that arrives (presences before it skipped).
next_body(C) ->
    case ?C:recv_stanza(C) of
        #xmlel{name = <<"message">>} = M -> throng_xml:subel_cdata(M, <<"body">>);
        _ -> next_body(C)
    end.

%% No resumption within resume_timeout: the unacknowledged messages are
%% stored offline and come at the next login.
timeout_moves_unacked_to_offline(_) ->
    B = online(<<"bob">>, <<"b">>),
    _ = enable(B, true),
    A = online(<<"alice">>, <<"a">>),
    [?C:send(A, msg(<<"bob@localhost/b">>, integer_to_binary(N))) || N <- lists:seq(1, 2)],
    [_, _] = recv_messages(B, 2),
    ?C:abort(B),
    throng_ct:wait_until(fun() -> throng_mod_offline:count(bob()) =:= 2 end, 5000),
    B2 = login(<<"bob">>, <<"again">>),
    ?C:send(B2, ?C:presence([])),
    ?assertEqual([<<"1">>, <<"2">>], bodies(recv_messages(B2, 2))).

clean_close_moves_unacked_to_offline(_) ->
    B = online(<<"bob">>, <<"b">>),
    _ = enable(B, false),
    A = online(<<"alice">>, <<"a">>),
    ?C:send(A, msg(<<"bob@localhost/b">>, <<"unacked">>)),
    [_] = recv_messages(B, 1),
    ?C:close(B),
    throng_ct:wait_until(fun() -> throng_mod_offline:count(bob()) =:= 1 end, 5000).

%% A detached session that would queue more than max_unacked gives up
%% waiting; what it held goes offline.
overflow_while_detached_goes_offline(_) ->
    B = online(<<"bob">>, <<"b">>),
    _ = enable(B, true),
    ?C:abort(B),
    timer:sleep(300),
    A = online(<<"alice">>, <<"a">>),
    [?C:send(A, msg(<<"bob@localhost/b">>, integer_to_binary(N))) || N <- lists:seq(1, 5)],
    throng_ct:wait_until(fun() -> throng_mod_offline:count(bob()) =:= 5 end, 5000),
    ?assertEqual([], throng_sm:resources({<<"bob">>, <<"localhost">>})).

%% A client that keeps more than max_unacked stanzas unacknowledged is
%% disconnected; the unacknowledged messages are stored offline.
never_acking_client_is_cut_off(_) ->
    B = online(<<"bob">>, <<"b">>),
    _ = enable(B, false),
    A = online(<<"alice">>, <<"a">>),
    [?C:send(A, msg(<<"bob@localhost/b">>, integer_to_binary(N))) || N <- lists:seq(1, 4)],
    ?assertEqual(<<"policy-violation">>, ?C:closed(B, 5000)),
    throng_ct:wait_until(fun() -> throng_mod_offline:count(bob()) =:= 4 end, 5000).


%%% Before authentication (XEP-0198 §3, §5)

failed_cond(#xmlel{name = <<"failed">>} = F) ->
    ?assertEqual(?NS_SM, throng_xml:ns(F)),
    [C] = [N || #xmlel{name = N} = E <- F#xmlel.children, throng_xml:ns(E) =:= ?NS_STANZAS],
    C.

%% §3: the client "MUST NOT attempt to enable stream management until after
%% it has completed Resource Binding"; an <enable/> before authentication
%% is answered <failed/> with <unexpected-request/>, and the stream goes on:
%% the client authenticates, binds and enables.
enable_before_auth_fails_stream_goes_on(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?C:send(C, #xmlel{name = <<"enable">>, attrs = [{<<"xmlns">>, ?NS_SM}, {<<"resume">>, <<"true">>}]}),
    ?assertEqual(<<"unexpected-request">>, failed_cond(?C:recv_stanza(C))),
    ok = ?C:auth_plain(C, <<"alice">>, <<"password">>),
    _ = ?C:open_stream(C),
    C1 = ?C:bind(C, <<"r">>),
    E = enable(C1, true),
    ?assertEqual(<<"true">>, throng_xml:attr(<<"resume">>, E)).

%% §5: resumption needs an authenticated stream (the session is the
%% account's); a <resume/> before authentication is refused with <failed/>
%% and the stream goes on.
resume_before_auth_fails_stream_goes_on(_) ->
    B = online(<<"bob">>, <<"b">>),
    Id = throng_xml:attr(<<"id">>, enable(B, true)),
    ?C:abort(B),
    timer:sleep(200),
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?C:send(C, #xmlel{name = <<"resume">>, attrs = [{<<"xmlns">>, ?NS_SM}, {<<"previd">>, Id},
                                                    {<<"h">>, <<"0">>}]}),
    ?assertEqual(<<"unexpected-request">>, failed_cond(?C:recv_stanza(C))),
    ok = ?C:auth_plain(C, <<"bob">>, <<"password">>),
    _ = ?C:open_stream(C),
    ?C:send(C, #xmlel{name = <<"resume">>, attrs = [{<<"xmlns">>, ?NS_SM}, {<<"previd">>, Id},
                                                    {<<"h">>, <<"0">>}]}),
    ?assertEqual(<<"resumed">>, (?C:recv_stanza(C))#xmlel.name).

%% XEP-0198 defines no answer to <r/> or <a/> outside an enabled stream
%% management session; before authentication they are data sent before the
%% stream was authenticated: the not-authorized stream error (RFC 6120
%% §4.9.3.12), as for any other element.
ack_request_before_auth_is_not_authorized(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?C:send(C, ?SM(<<"r">>)),
    ?assertEqual(<<"not-authorized">>, ?C:closed(C, 5000)).

%% A resumption id with any byte changed names nothing: <failed> with
%% item-not-found, and the real id still resumes the session afterwards.
tampered_id_is_item_not_found(_) ->
    B = online(<<"bob">>, <<"b">>),
    Id = throng_xml:attr(<<"id">>, enable(B, true)),
    ?C:abort(B),
    timer:sleep(200),
    Raw = base64:decode(Id),
    Tampered = [base64:encode(<<A:I/binary, (X bxor 16#20), Z/binary>>)
                || I <- [0, byte_size(Raw) div 2, byte_size(Raw) - 1],
                   <<A:I/binary, X, Z/binary>> <- [Raw]]
        ++ [base64:encode(binary:part(Raw, 0, byte_size(Raw) - 1))],
    [begin
         {_C, F} = resume(<<"bob">>, Bad, 0),
         ?assertEqual({Bad, <<"failed">>}, {Bad, F#xmlel.name}),
         ?assertNotEqual(undefined, throng_xml:subel(F, <<"item-not-found">>, ?NS_STANZAS))
     end || Bad <- Tampered],
    {_B2, Resumed} = resume(<<"bob">>, Id, 0),
    ?assertEqual(<<"resumed">>, Resumed#xmlel.name).
