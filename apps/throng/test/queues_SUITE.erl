%% @doc What may wait for one client is bounded (listener options
%% max_queued_stanzas and max_queued_bytes), and nothing is lost when a
%% bound closes a connection: a client that reads slowly but steadily —
%% never slow enough for send_timeout — has its connection closed once more
%% than the bound waits for it, and the messages its session held go to
%% offline storage (all of them with XEP-0198: the client acknowledged
%% none). A client that reads keeps its connection.
-module(queues_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(N, 300).

all() ->
    [slow_steady_reader_is_cut_off_without_loss, many_small_stanzas_hit_the_byte_bound,
     reader_that_keeps_up_stays].

init_per_testcase(TC, Config) ->
    Bound = case TC of
                many_small_stanzas_hit_the_byte_bound -> #{max_queued_bytes => 65536};
                _ -> #{max_queued_stanzas => 100}
            end,
    %% Small kernel buffers on both sides, so that what waits for a slow
    %% reader waits in the server, not in the kernel. A long send_timeout:
    %% the bound under test, not a write that a loaded machine stalled,
    %% must be what cuts the reader off (both are counted below).
    Modules = maps:merge(throng_config_spec:default_modules(),
                         #{ping => #{interval => 0}, offline => #{max_messages => 10000}}),
    throng_ct:start(Config, #{listener => Bound#{shaper_rate => infinity, send_buffer => 16384,
                                                    send_timeout => 120},
                              modules => Modules}),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

login(User) -> ?C:login(User, <<"password">>, <<"r">>).

bob() -> #jid{user = <<"bob">>, server = <<"localhost">>}.

flood(A, N) ->
    flood(A, N, 10000).

flood(A, N, Size) ->
    Body = binary:copy(<<"w">>, Size),
    [?C:send(A, ?C:message(<<"bob@localhost">>, <<"chat">>, Body)) || _ <- lists:seq(1, N)].

%% Bob (XEP-0198, never acknowledging) reads 4 KB every 50 ms while 3 MB
%% come for him: past 100 waiting stanzas his connection is closed, and
%% every message is stored.
slow_steady_reader_is_cut_off_without_loss(_) ->
    slow_reader(?N, 10000).

%% The same with 2,000 short messages and a byte bound of 64 KB (the
%% stanza bound, 5,000 by default, is not reached).
many_small_stanzas_hit_the_byte_bound(_) ->
    slow_reader(2000, 40).

slow_reader(N, Size) ->
    B = ?C:login(<<"bob">>, <<"password">>, <<"r">>, #{recbuf => 4096}),
    ?C:send(B, #xmlel{name = <<"enable">>, attrs = [{<<"xmlns">>, ?NS_SM}]}),
    #xmlel{name = <<"enabled">>} = ?C:recv_stanza(B),
    ok = ?C:available(B),
    ?C:trickle(B, 4096, 50),
    Before = cut_offs(),
    A = login(<<"alice">>),
    flood(A, N, Size),
    throng_ct:wait_until(fun() -> throng_sm:resources({<<"bob">>, <<"localhost">>}) =:= [] end, 60000),
    %% Cut off by the bound ({1, 0}), not by a timed-out write ({0, 1}).
    {Bound0, Timeout0} = Before,
    {Bound1, Timeout1} = cut_offs(),
    ?assertEqual({1, 0}, {Bound1 - Bound0, Timeout1 - Timeout0}),
    throng_ct:wait_until(fun() -> throng_mod_offline:count(bob()) =:= N end, 10000),
    %% The sender is unaffected.
    R = ?C:iq(A, <<"get">>, #xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]}),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)).

cut_offs() ->
    {throng_metrics:value(slow_readers_closed), throng_metrics:value(send_timeouts_closed)}.

%% A client that reads what comes keeps its connection through the same
%% flood. The flood comes in bursts of half the bound, each read whole
%% before the next is sent: a reader that keeps up, whatever the machine's
%% load (one burst of all 300 made the test's pace the reader's: a busy CI
%% machine once saw 107 waiting and the reader cut off).
reader_that_keeps_up_stays(_) ->
    B = login(<<"bob">>),
    ok = ?C:available(B),
    A = login(<<"alice">>),
    Burst = 50,
    [begin
         flood(A, Burst),
         ok = read_messages(B, Burst)
     end || _ <- lists:seq(1, ?N div Burst)],
    ?assertMatch([_], throng_sm:resources({<<"bob">>, <<"localhost">>})).

read_messages(_B, 0) -> ok;
read_messages(B, Left) ->
    case ?C:recv_stanza(B, 10000) of
        #xmlel{name = <<"message">>} -> read_messages(B, Left - 1);
        _ -> read_messages(B, Left)
    end.
