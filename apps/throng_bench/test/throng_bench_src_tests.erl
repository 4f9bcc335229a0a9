-module(throng_bench_src_tests).

-include_lib("eunit/include/eunit.hrl").

%% A connection from a source address has that address, and (on Linux) its
%% port was left to connect: IP_BIND_ADDRESS_NO_PORT is set on the socket.
source_address_port_chosen_at_connect_test() ->
    {ok, L} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}, {active, false}]),
    {ok, Port} = inet:port(L),
    {ok, S} = gen_tcp:connect({127, 0, 0, 1}, Port,
                              [{active, false} | throng_bench_src:opts({127, 0, 0, 3})], 5000),
    try
        ?assertMatch({ok, {{127, 0, 0, 3}, _}}, inet:sockname(S)),
        case os:type() of
            {unix, linux} ->
                ?assertEqual({ok, [{raw, 0, 24, <<1:32/native>>}]},
                             inet:getopts(S, [{raw, 0, 24, 4}]));
            _ -> ok
        end
    after
        gen_tcp:close(S),
        gen_tcp:close(L)
    end.

no_source_address_no_options_test() ->
    ?assertEqual([], throng_bench_src:opts(any)).
