%% @doc The listener's own socket work, on each of OTP's inet backends (the
%% inet driver, and the socket backend of `inet_backend: socket'): listeners
%% sharing a port with SO_REUSEPORT, a full listener that stops listening
%% and listens again, and (socket backend) the idle socket's own process
%% hibernating like its session. The connections' side (streams, TLS,
%% errors, slow readers) runs on both backends in rfc6120_SUITE,
%% limits_SUITE, xep0368_SUITE, xep0198_SUITE and rfc8446_tls_SUITE.
-module(listeners_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).

all() ->
    [{group, inet_driver}, {group, socket_backend}].

groups() ->
    Cases = [reuse_port_listeners_share_a_port, full_listener_stops_listening_and_resumes,
             listener_ignores_the_nodes_default_backend, kernel_buffers_are_set_per_connection,
             accepted_socket_is_the_one_gen_tcp_gives, reads_are_larger_until_the_session_opens],
    [{inet_driver, [], Cases},
     throng_ct:socket_backend_group(Cases ++ [idle_socket_process_hibernates])].

init_per_group(socket_backend, Config) ->
    throng_ct:init_socket_backend(Config);
init_per_group(inet_driver, Config) ->
    [{inet_backend, inet} | Config].

end_per_group(_Group, _Config) ->
    ok.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%% A port nothing listens on now.
free_port() ->
    {ok, S} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, P} = inet:port(S),
    ok = gen_tcp:close(S),
    P.

stream(Port) ->
    C = ?C:connect(Port, #{}),
    _ = ?C:open_stream(C),
    C.

%%% Cases

%% Two listeners bind one port with reuse_port (without SO_REUSEPORT the
%% second fails with eaddrinuse and the server does not start), and the
%% kernel gives connections to both.
reuse_port_listeners_share_a_port(Config) ->
    Port = free_port(),
    L = #{port => Port, ip => <<"127.0.0.1">>, reuse_port => true},
    throng_ct:start(Config, #{listen => [L, L]}),
    ?assertEqual(Port, throng_listener:port({listener, 1})),
    ?assertEqual(Port, throng_listener:port({listener, 2})),
    Clients = [stream(Port) || _ <- lists:seq(1, 24)],
    Counts = [throng_listener:connections({listener, I}) || I <- [1, 2]],
    ?assertEqual(24, lists:sum(Counts)),
    ?assert(lists:all(fun(N) -> N > 0 end, Counts)),
    [?C:close(C) || C <- Clients].

%% At max_connections a `when_full: stop_listening' listener closes its
%% socket (a new connection is refused); below 95% of it the listener opens
%% a new socket on the same port and the acceptors serve it.
full_listener_stops_listening_and_resumes(Config) ->
    Port = free_port(),
    throng_ct:start(Config, #{listener => #{port => Port, max_connections => 2,
                                            when_full => stop_listening}}),
    ok = throng_ct:register(<<"alice">>, <<"password">>),
    Ref = {listener, 1},
    Held = [stream(Port) || _ <- [1, 2]],
    throng_ct:wait_until(fun() -> not throng_listener:listening(Ref) end, 5000),
    ?assertEqual({error, econnrefused},
                 gen_tcp:connect({127, 0, 0, 1}, Port, [{inet_backend, inet}])),
    [?C:close(C) || C <- Held],
    throng_ct:wait_until(fun() -> throng_listener:listening(Ref) end, 5000),
    C = ?C:login(<<"alice">>, <<"password">>, <<"r">>, #{port => Port}),
    ?assertEqual(<<"alice@localhost/r">>, ?C:jid(C)).

%% A node started with `-kernel inet_backend socket' (or without it) does
%% not choose the listener's backend: its configuration does, and logins
%% work either way.
listener_ignores_the_nodes_default_backend(Config) ->
    Other = case proplists:get_value(inet_backend, Config) of
                inet -> socket;
                socket -> inet
            end,
    %% What -kernel inet_backend sets at boot; read by gen_tcp:listen/2.
    Key = {kernel, inet_backend},
    Default = persistent_term:get(Key, inet),
    persistent_term:put(Key, Other),
    try throng_ct:start(Config)
    after persistent_term:put(Key, Default)
    end,
    ok = throng_ct:register(<<"alice">>, <<"password">>),
    #{lsock := LSock} = throng_listener:info({listener, 1}),
    ?assertEqual(proplists:get_value(inet_backend, Config), backend(LSock)),
    C = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    ?assertEqual(<<"alice@localhost/r">>, ?C:jid(C)).

%% On the socket backend each connection's socket has a process of its
%% own (OTP's gen_tcp_socket): idle, it hibernates after the listener's
%% hibernate_after, as the session does (14 KB -> 2 KB each, measured).
idle_socket_process_hibernates(Config) ->
    throng_ct:start(Config),
    ok = throng_ct:register(<<"alice">>, <<"password">>),
    C = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    {ok, JID} = throng_jid:parse(?C:jid(C)),
    {_State, D} = sys:get_state(throng_sm:lookup(JID)),
    {_Transport, {'$inet', gen_tcp_socket, {SocketProc, _}}, _} = element(2, D),
    throng_ct:wait_until(fun() ->
                                 {current_function, {erlang, hibernate, 3}} =:=
                                     process_info(SocketProc, current_function)
                         end, 5000),
    %% Hibernated, it still delivers.
    R = ?C:iq(C, <<"get">>, #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, <<"urn:xmpp:ping">>}]}),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)).

%% send_buffer and kernel_recv_buffer reach the kernel (SO_SNDBUF and
%% SO_RCVBUF) of every connection: set on the listen socket, the accepted
%% ones have them. Linux reports twice the value asked for (its
%% bookkeeping overhead), far below its defaults of 16 KB and 128 KB.
kernel_buffers_are_set_per_connection(Config) ->
    throng_ct:start(Config, #{listener => #{send_buffer => 6000, kernel_recv_buffer => 5000}}),
    ok = throng_ct:register(<<"alice">>, <<"password">>),
    C = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    {ok, JID} = throng_jid:parse(?C:jid(C)),
    {_State, D} = sys:get_state(throng_sm:lookup(JID)),
    {_Transport, Sock, _} = element(2, D),
    ?assertEqual({ok, [{sndbuf, 12000}, {recbuf, 10000}]}, inet:getopts(Sock, [sndbuf, recbuf])),
    %% and the connection works with them
    R = ?C:iq(C, <<"get">>, #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, <<"urn:xmpp:ping">>}]}),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)).

%% A connection reads login_recv_buffer bytes at a time until its session
%% opens, then recv_buffer: with resource binding, with Bind2 inside SASL2,
%% and (xep0198_SUITE) when a session is resumed on a new connection. A
%% stanza larger than recv_buffer still arrives whole in the session.
reads_are_larger_until_the_session_opens(Config) ->
    throng_ct:start(Config, #{listener => #{recv_buffer => 300, login_recv_buffer => 5000}}),
    ok = throng_ct:register(<<"alice">>, <<"password">>),
    %% Negotiating: the login size.
    C0 = ?C:connect(#{}),
    _ = ?C:open_stream(C0),
    ?assertEqual(5000, read_size(wait_for_c2s([]))),
    ?C:close(C0),
    %% Bound: the session's size.
    C = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    {ok, JID} = throng_jid:parse(?C:jid(C)),
    ?assertEqual(300, read_size(throng_sm:lookup(JID))),
    Big = binary:copy(<<"x">>, 2000),
    ?C:send(C, ?C:message(?C:jid(C), <<"chat">>, Big)),
    ?assertEqual(Big, throng_xml:subel_cdata(?C:recv_stanza(C), <<"body">>)),
    %% Over STARTTLS, bound by Bind2 in a SASL2 <authenticate/> (XEP-0386).
    C2 = ?C:connect(#{}),
    _ = ?C:open_stream(C2),
    _ = ?C:starttls(C2),
    ?assertEqual(5000, read_size(wait_for_c2s([throng_sm:lookup(JID)]))),
    ?C:send(C2, ["<authenticate xmlns='urn:xmpp:sasl:2' mechanism='PLAIN'><initial-response>",
                 base64:encode(<<0, "alice", 0, "password">>), "</initial-response>"
                 "<bind xmlns='urn:xmpp:bind:0'><tag>T</tag></bind></authenticate>"]),
    Success = ?C:recv_stanza(C2),
    ?assertEqual(<<"success">>, Success#xmlel.name),
    {ok, JID2} = throng_jid:parse(throng_xml:subel_cdata(Success, <<"authorization-identifier">>)),
    ?assertEqual(300, read_size(throng_sm:lookup(JID2))),
    ?C:close(C2),
    ?C:close(C).

%% The one connection process not among Known (started by a listener).
wait_for_c2s(Known) ->
    wait_for_c2s(Known, 100).

wait_for_c2s(Known, Tries) ->
    case [P || P <- processes(), not lists:member(P, Known),
               proc_lib:translate_initial_call(P) =:= {throng_c2s, init, 1}] of
        [P] -> P;
        _ when Tries > 0 -> timer:sleep(50), wait_for_c2s(Known, Tries - 1);
        Ps -> ct:fail({connection_processes, Ps})
    end.

%% How many bytes a connection process's socket reads at a time.
read_size(Pid) ->
    {_State, D} = sys:get_state(Pid),
    {_Transport, Sock, _} = element(2, D),
    {ok, [{buffer, N}]} = inet:getopts(Sock, [buffer]),
    N.

%% throng_accept:accept/1 skips gen_tcp:accept/1's copying of
%% the listen socket's options on the inet driver (40 system calls): the
%% socket it gives must be the one gen_tcp gives. A listen socket with every
%% option the copy covers set away from its default, one connection
%% accepted each way, every option compared, and both carry data.
accepted_socket_is_the_one_gen_tcp_gives(Config) ->
    Backend = proplists:get_value(inet_backend, Config, inet),
    {ok, L} = gen_tcp:listen(0, [{inet_backend, Backend}, binary, {packet, raw}, {active, false},
                                 {ip, {127, 0, 0, 1}}, {nodelay, true}, {keepalive, true},
                                 {delay_send, true}, {priority, 3}, {linger, {true, 7}},
                                 {tos, 16}, {ttl, 33}, {recvtos, true}, {recvttl, true},
                                 {buffer, 3000}, {sndbuf, 6000}, {recbuf, 5000},
                                 {send_timeout, 4000}, {send_timeout_close, true},
                                 {high_watermark, 20000}, {low_watermark, 10000},
                                 {exit_on_close, true}]),
    {ok, Port} = inet:port(L),
    Asked = [active, mode, packet, header, nodelay, keepalive, delay_send, priority, linger,
             tos, ttl, recvtos, recvttl, buffer, sndbuf, recbuf, send_timeout,
             send_timeout_close, high_watermark, low_watermark, exit_on_close],
    %% (the socket backend has no header option)
    {ok, LOpts} = inet:getopts(L, Asked),
    Names = [N || {N, _} <- LOpts],
    Accept = fun(AcceptFun) ->
                     {ok, C} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
                     {ok, S} = AcceptFun(L),
                     {ok, Opts} = inet:getopts(S, Names),
                     ok = gen_tcp:send(C, <<"ping">>),
                     {ok, <<"ping">>} = gen_tcp:recv(S, 4, 5000),
                     ok = gen_tcp:send(S, <<"pong">>),
                     {ok, <<"pong">>} = gen_tcp:recv(C, 4, 5000),
                     {C, S, lists:sort(Opts)}
             end,
    {C1, S1, Ours} = Accept(fun throng_accept:accept/1),
    {C2, S2, Theirs} = Accept(fun gen_tcp:accept/1),
    ?assert(length(Names) >= 20),
    ?assertEqual(length(Names), length(Ours)),
    ?assertEqual(Theirs, Ours),
    %% and it is a registered inet socket: gen_tcp and inet know its module
    ?assertMatch({ok, {{127, 0, 0, 1}, _}}, inet:peername(S1)),
    ?assertEqual(Backend, backend(S1)),
    [gen_tcp:close(S) || S <- [C1, S1, C2, S2, L]],
    ok.

backend(Sock) when is_port(Sock) -> inet;
backend({'$inet', gen_tcp_socket, _}) -> socket.
