%% @doc The socket options of a client connection made from a given source
%% address.
%%
%% gen_tcp binds such a socket (`{ip, Src}') before it connects, and a
%% bind to port 0 takes a port no socket of that address holds, TIME_WAIT
%% ones included: a run right after another on the same addresses finds
%% fewer ports than the range has (a login run after a 15,000-session
%% memory run lost ~1,800 of its 15,000 users to `eaddrinuse'). With
%% IP_BIND_ADDRESS_NO_PORT (Linux 4.2+) the port is chosen at connect,
%% for the destination, where the kernel may reuse a TIME_WAIT port
%% (net.ipv4.tcp_tw_reuse, on for loopback by default).
-module(throng_bench_src).

-export([opts/1]).

%% Linux's SOL_IP and IP_BIND_ADDRESS_NO_PORT.
-define(SOL_IP, 0).
-define(IP_BIND_ADDRESS_NO_PORT, 24).

%% @doc Options for a connection from Src (`any': the kernel picks).
-spec opts(inet:ip_address() | any) -> [gen_tcp:connect_option()].
opts(any) ->
    [];
opts(Src) ->
    case os:type() of
        {unix, linux} -> [{ip, Src}, {raw, ?SOL_IP, ?IP_BIND_ADDRESS_NO_PORT, <<1:32/native>>}];
        _ -> [{ip, Src}]
    end.
