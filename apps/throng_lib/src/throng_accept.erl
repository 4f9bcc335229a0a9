%% @doc Accepting a TCP connection without gen_tcp's copying of the listen
%% socket's options. On the inet driver, gen_tcp:accept/1 reads six options
%% and four IP ones from the listen socket after the accept and sets them on
%% the new one, one at a time, and the driver saves and restores
%% SO_PRIORITY and IP_TOS around each: 22 getsockopt and 18 setsockopt on
%% Linux, ~26 µs of CPU here (bench/accept_cost.escript). Linux already
%% gives the accepted socket its listen socket's socket options, and the
%% driver copies its own (active, mode, packet, buffer, send_timeout...)
%% into the new port, so the socket is the same: listeners_SUITE compares
%% the two option by option. The accept is the one gen_tcp makes (prim_inet,
%% as OTP 25's inet_tcp:accept/1, without the copying); the two options
%% neither carries over are set when the listen socket has them. The
%% socket backend, and an OTP without prim_inet:async_accept/2, take
%% gen_tcp:accept/1. Used by Throng's listeners, the stats HTTP endpoint
%% and throng-bench's TCP servers.
-module(throng_accept).

-export([accept/1]).

-spec accept(gen_tcp:socket()) -> {ok, gen_tcp:socket()} | {error, term()}.
accept(LSock) when is_port(LSock) ->
    case erlang:function_exported(prim_inet, async_accept, 2) of
        true -> driver_accept(LSock);
        false -> gen_tcp:accept(LSock)
    end;
accept(LSock) ->
    gen_tcp:accept(LSock).

driver_accept(LSock) ->
    case inet_db:lookup_socket(LSock) of
        {ok, Mod} ->
            case prim_inet:async_accept(LSock, -1) of
                {ok, Ref} ->
                    receive
                        {inet_async, LSock, Ref, {ok, S}} ->
                            _ = inet_db:register_socket(S, Mod),
                            uncopied_options(LSock, S);
                        {inet_async, LSock, Ref, {error, _} = E} ->
                            E
                    end;
                {error, _} = E ->
                    E
            end;
        {error, _} = E ->
            E
    end.

%% The two options neither Linux nor the driver carries over: delay_send
%% (the driver's) and SO_PRIORITY (which Linux's IP_TOS resets). Set only
%% when the listen socket has them: one getsockopt per accept.
uncopied_options(LSock, S) ->
    case inet:getopts(LSock, [delay_send, priority]) of
        {ok, Opts} ->
            case [O || O <- Opts, O =/= {delay_send, false}, O =/= {priority, 0}] of
                [] -> {ok, S};
                Set -> setopts_or_close(S, Set)
            end;
        {error, _} = E ->
            gen_tcp:close(S),
            E
    end.

setopts_or_close(S, Opts) ->
    case inet:setopts(S, Opts) of
        ok -> {ok, S};
        {error, _} = E -> gen_tcp:close(S), E
    end.
