%% @doc The socket-level oracle: one input sent to a real server over TCP,
%% chunk by chunk (with the input's pauses), the server's answer read
%% meanwhile and afterwards.
%%
%% A failure is a connection the server ends without having sent a stream
%% error (`<stream:error>'), a well-formed close (`</stream:stream>') or
%% `<proceed/>' (after which TLS, not XML, is spoken): `closed_silently'
%% when it closed (FIN), `reset_silently' when it reset the connection.
%% A connection the server keeps open is fine: the input ended mid-stream,
%% the client goes away. Crashes and leaks are seen on the server's side
%% ({@link throng_bench_fuzz}).
-module(throng_bench_fuzz_socket).

-export([check/3]).

-export_type([target/0]).

-type target() :: #{host := inet:hostname() | inet:ip_address(), port := inet:port_number(),
                    quiet_ms := pos_integer()}.

-define(MARKERS, [<<"<stream:error">>, <<"</stream:stream>">>, <<"<proceed">>]).

%% @doc Sends the chunks (pausing before each as told) and judges the end.
-spec check([binary()], [non_neg_integer()], target()) ->
    ok | {ok, connect_failed} | {fail, atom(), term()}.
check(Chunks, Pauses, #{host := Host, port := Port, quiet_ms := Quiet}) ->
    case gen_tcp:connect(Host, Port, [binary, {active, false}, {nodelay, true},
                                      {send_timeout, 5000}, {send_timeout_close, true},
                                      {show_econnreset, true}, {linger, {true, 0}}], 5000) of
        {ok, S} ->
            try send(S, Chunks, Pauses ++ [0 || _ <- Chunks], <<>>) of
                {open, Seen} -> finish(S, Seen, Quiet);
                {closed, Why, Seen} -> judge(Why, Seen)
            after
                gen_tcp:close(S)
            end;
        {error, _} ->
            {ok, connect_failed}
    end.

send(_S, [], _, Seen) ->
    {open, Seen};
send(S, [C | Cs], [P | Ps], Seen0) ->
    P > 0 andalso timer:sleep(P),
    case drain(S, 0, Seen0) of
        {open, Seen} ->
            case gen_tcp:send(S, C) of
                ok -> send(S, Cs, Ps, Seen);
                {error, _} -> read_rest(S, Seen)
            end;
        Closed ->
            Closed
    end.

%% After the input: read until the server has been quiet for Quiet ms.
finish(S, Seen, Quiet) ->
    case gen_tcp:recv(S, 0, Quiet) of
        {ok, B} -> finish(S, seen(Seen, B), Quiet);
        {error, timeout} -> ok;
        {error, Why} -> judge(Why, Seen)
    end.

read_rest(S, Seen) ->
    case drain(S, 1000, Seen) of
        {open, Seen1} -> {closed, send_failed, Seen1};
        Closed -> Closed
    end.

%% What is there to read now (or within Ms); {closed, Why, Seen} if the
%% server has ended the connection.
drain(S, Ms, Seen) ->
    case gen_tcp:recv(S, 0, Ms) of
        {ok, B} -> drain(S, 0, seen(Seen, B));
        {error, timeout} -> {open, Seen};
        {error, Why} -> {closed, Why, Seen}
    end.

judge(Why, Seen) ->
    case is_binary(Seen) of
        false -> ok;
        true when Why =:= closed -> {fail, closed_silently, Seen};
        true -> {fail, reset_silently, {Why, Seen}}
    end.

%% Seen: the last bytes received (to find a marker cut between two reads),
%% or `ended' once a marker was seen.
seen(ended, _) -> ended;
seen(Tail, B) ->
    All = <<Tail/binary, B/binary>>,
    case binary:match(All, ?MARKERS) of
        nomatch -> binary:part(All, max(0, byte_size(All) - 32), min(32, byte_size(All)));
        _ -> ended
    end.
