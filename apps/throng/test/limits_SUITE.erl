%% @doc Limits and bad input, each with its defined behaviour: the offending
%% connection ends with the right stream error (or is slowed down), nothing
%% accepted is lost, and every other session goes on. The cases that touch
%% the socket run again on the socket backend (group socket_backend).
-module(limits_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).

all() ->
    [oversized_stanza, oversized_before_complete, comment_is_restricted, pi_is_restricted,
     dtd_is_restricted, entity_is_restricted, invalid_utf8, control_character,
     too_deep, mismatched_tags, text_at_stream_level,
     slowloris_header, slowloris_auth, repeated_failures_are_slowed,
     shaper_slows_flood_without_loss, max_connections_queues, slow_reader_is_cut_off,
     {group, socket_backend}].

%% What touches the socket (reads cut short, a blocked write, the drain
%% after a stream error, a listener at its limit) again on the socket
%% backend. Not the shaper's lower bound on time: there a pause stops the
%% reads only after those the socket's process has made already (up to
%% active_n of recv_buffer bytes), so the last burst of a flood is larger
%% (docs/benchmarks.md, inet_backend).
groups() ->
    [throng_ct:socket_backend_group(
       [oversized_before_complete, mismatched_tags, text_at_stream_level, slowloris_header,
        max_connections_queues, slow_reader_is_cut_off])].

init_per_group(socket_backend, Config) ->
    throng_ct:init_socket_backend(Config).

end_per_group(_Group, _Config) ->
    ok.

init_per_testcase(TC, Config) ->
    Overrides =
        case TC of
            slowloris_header -> #{listener => #{negotiation_timeout => 1}};
            slowloris_auth -> #{listener => #{negotiation_timeout => 1}};
            shaper_slows_flood_without_loss ->
                %% active_n 4: the reads a pause cannot take back, those
                %% the driver delivered before the session paused it, are
                %% at most 4 of recv_buffer (256) bytes (the bound below).
                #{listener => #{shaper_rate => 20000, shaper_burst => 4000, active_n => 4,
                                recv_buffer => 256}};
            max_connections_queues -> #{listener => #{max_connections => 2}};
            slow_reader_is_cut_off ->
                %% Room offline for the whole flood (24 MB): bounces of what
                %% did not fit would go back to the sender, who reads them
                %% under the same one-second send_timeout.
                #{listener => #{send_timeout => 1, shaper_rate => infinity},
                  modules => maps:merge(throng_config_spec:default_modules(),
                                        #{ping => #{interval => 0},
                                          offline => #{max_bytes => 64000000}})};
            _ -> #{listener => #{max_stanza_size => 10000, max_depth => 8}}
        end,
    throng_ct:start(Config, Overrides),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

login(U) -> ?C:login(U, <<"password">>, <<"r">>).

%% Sends Bytes on a fresh authenticated session and returns the stream
%% error; checks another session still works.
bad(Bytes) ->
    Witness = login(<<"bob">>),
    A = login(<<"alice">>),
    ?C:send(A, Bytes),
    Cond = ?C:closed(A, 5000),
    R = ?C:iq(Witness, <<"get">>, #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]}),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    Cond.

big_message(Size) ->
    ["<message to='bob@localhost'><body>", binary:copy(<<"x">>, Size), "</body></message>"].

oversized_stanza(_) ->
    ?assertEqual(<<"policy-violation">>, bad(big_message(20000))).

%% The limit applies while the stanza is still arriving.
oversized_before_complete(_) ->
    ?assertEqual(<<"policy-violation">>,
                 bad(["<message to='bob@localhost'><body>", binary:copy(<<"y">>, 12000)])).

comment_is_restricted(_) ->
    ?assertEqual(<<"restricted-xml">>, bad(<<"<!-- hello -->">>)).

pi_is_restricted(_) ->
    ?assertEqual(<<"restricted-xml">>, bad(<<"<?php echo 1; ?>">>)).

dtd_is_restricted(_) ->
    ?assertEqual(<<"restricted-xml">>, bad(<<"<!DOCTYPE foo [<!ENTITY x 'y'>]>">>)).

entity_is_restricted(_) ->
    ?assertEqual(<<"restricted-xml">>,
                 bad(<<"<message to='bob@localhost'><body>&lol;</body></message>">>)).

invalid_utf8(_) ->
    ?assertEqual(<<"unsupported-encoding">>,
                 bad(<<"<message to='bob@localhost'><body>", 16#C3, 16#28, "</body></message>">>)).

control_character(_) ->
    ?assertEqual(<<"not-well-formed">>,
                 bad(<<"<message to='bob@localhost'><body>", 1, "</body></message>">>)).

too_deep(_) ->
    Open = lists:duplicate(10, <<"<a>">>),
    Close = lists:duplicate(10, <<"</a>">>),
    ?assertEqual(<<"policy-violation">>, bad([<<"<message>">>, Open, Close, <<"</message>">>])).

mismatched_tags(_) ->
    ?assertEqual(<<"not-well-formed">>, bad(<<"<message><body></message></body>">>)).

text_at_stream_level(_) ->
    ?assertEqual(<<"bad-format">>, bad(<<"hello">>)).

%% A client that opens a connection and never finishes negotiating is cut off.
slowloris_header(_) ->
    C = ?C:connect(#{}),
    ?C:send(C, <<"<stream:stream to='localhost' xmlns='jabber:client' ">>),
    ?assertEqual(<<"connection-timeout">>, ?C:closed(C, 5000)).

slowloris_auth(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    ?assertEqual(<<"connection-timeout">>, ?C:closed(C, 5000)).

%% From the second failure on, an address waits 100 ms x 2^(n-2) for each
%% answer. Lower bounds only: a busy machine can only make it slower.
repeated_failures_are_slowed(_) ->
    C = ?C:connect(#{}),
    _ = ?C:open_stream(C),
    Times = [begin
                 T0 = erlang:monotonic_time(millisecond),
                 {failure, <<"not-authorized">>} = ?C:auth_plain(C, <<"alice">>, <<"bad">>),
                 erlang:monotonic_time(millisecond) - T0
             end || _ <- lists:seq(1, 4)],
    [_, T2, T3, T4] = Times,
    ?assert(T2 >= 100),
    ?assert(T3 >= 200),
    ?assert(T4 >= 400),
    %% A correct password still works (after its delay).
    ok = ?C:auth_plain(C, <<"alice">>, <<"password">>).

%% A client sending faster than shaper_rate is paused, not cut off: every
%% stanza is handled, it just takes longer.
shaper_slows_flood_without_loss(_) ->
    A = login(<<"alice">>),
    ok = ?C:available(A),
    Before = throng_metrics:value(shaper_delays),
    Body = binary:copy(<<"z">>, 900),
    N = 60,
    Stanzas = [?C:message(<<"alice@localhost/r">>, <<"chat">>, <<(integer_to_binary(I))/binary, Body/binary>>)
               || I <- lists:seq(1, N)],
    T0 = erlang:monotonic_time(millisecond),
    [?C:send(A, S) || S <- Stanzas],
    Got = [throng_xml:subel_cdata(?C:recv_stanza(A, 20000), <<"body">>) || _ <- lists:seq(1, N)],
    Elapsed = erlang:monotonic_time(millisecond) - T0,
    ?assertEqual([<<(integer_to_binary(I))/binary, Body/binary>> || I <- lists:seq(1, N)], Got),
    ?assert(throng_metrics:value(shaper_delays) > Before),
    %% A pause stops the reads that follow; the reads already delivered
    %% (at most active_n of recv_buffer bytes) are handled and paid for by a
    %% longer pause after them. So the last byte is handled no sooner than
    %% the bytes before that last batch, less the burst, allow at 20 KB/s:
    %% (~60 KB - 4 KB - 1 KB) / 20 KB/s, about 2.8 s. A lower bound only.
    Total = iolist_size([throng_xml:to_iolist(S) || S <- Stanzas]),
    ?assert(Elapsed >= (Total - 4000 - 4 * 256) * 1000 div 20000).

%% At max_connections a new connection waits in the listen backlog (it is
%% not refused) and is served when another closes.
max_connections_queues(_) ->
    C1 = ?C:connect(#{}),
    _ = ?C:open_stream(C1),
    C2 = ?C:connect(#{}),
    _ = ?C:open_stream(C2),
    C3 = ?C:connect(#{}),
    ?C:send(C3, "<stream:stream to='localhost' xmlns='jabber:client' "
                "xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"),
    ?assertEqual(timeout, ?C:recv(C3, 500)),
    ?C:close(C1),
    ?assertMatch({stream_start, _, _}, ?C:recv(C3, 5000)).

%% A client that stops reading blocks the server's writes; after
%% send_timeout it is disconnected and what could not be written goes to
%% offline storage.
slow_reader_is_cut_off(_) ->
    B = login(<<"bob">>),
    ok = ?C:available(B),
    ?C:pause(B),
    Before = throng_metrics:value(send_timeouts_closed),
    A = login(<<"alice">>),
    Body = binary:copy(<<"w">>, 60000),
    [?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, Body)) || _ <- lists:seq(1, 400)],
    throng_ct:wait_until(fun() -> throng_sm:resources({<<"bob">>, <<"localhost">>}) =:= [] end, 20000),
    throng_ct:wait_until(fun() -> throng_mod_offline:count(#jid{user = <<"bob">>, server = <<"localhost">>}) > 0 end, 5000),
    ?assertEqual(Before + 1, throng_metrics:value(send_timeouts_closed)),
    %% Alice's session still serves her. Her ping waits behind what is left
    %% of her 24 MB (stored offline now): on a busy machine that can take
    %% longer than the client's usual 5 s (it did, with three CPU hogs).
    ?C:send(A, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"get">>}, {<<"id">>, <<"p1">>}],
                      children = [#xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]}]}),
    R = ?C:recv_stanza(A, 60000),
    ?assertEqual({<<"iq">>, <<"result">>, <<"p1">>},
                 {R#xmlel.name, throng_xml:attr(<<"type">>, R), throng_xml:attr(<<"id">>, R)}).
