%% @doc One connection of the statistics HTTP endpoint: HTTP/1.1 with
%% keep-alive, GET and HEAD only, parsed by the VM's HTTP packet decoder
%% (`{packet, http_bin}', active once).
%%
%% Deadlines, as cowboy's `request_timeout' and `idle_timeout':
%% <ul>
%% <li>the request line and every header must have arrived
%%   `stats.http_request_timeout' ms after the connect (or, on a kept-alive
%%   connection, after the request line); else 408 and close. Dribbling
%%   header bytes does not extend it (slowloris);</li>
%% <li>a kept-alive connection waits `stats.http_idle_timeout' ms for its next
%%   request line, then it is closed.</li>
%% </ul>
%% The owner ({@link throng_stats_httpd}) is told when a complete request is
%% being answered and when the connection waits again: only waiting
%% connections are evicted when the connection cap is reached.
%% Limits: a line up to 8 KiB (a longer one makes the packet decoder close
%% the socket: no answer), 64 headers (431), a request body (which no path
%% takes) up to 4 KiB is read and dropped, a larger one is refused (413).
-module(throng_stats_http_conn).

-export([start_link/2, init/2, refuse/1]).
%% Started by throng_stats_httpd through proc_lib.
-ignore_xref([{init, 2}]).

-export_type([opts/0]).

-type opts() :: #{request_timeout := pos_integer(), idle_timeout := pos_integer()}.

-define(MAX_HEADERS, 64).
-define(MAX_BODY, 4096).
-define(LINGER_MS, 2000).
-define(LINGER_BYTES, 65536).

-record(req, {method :: binary(),
              target :: binary(),
              version :: {non_neg_integer(), non_neg_integer()},
              headers = 0 :: non_neg_integer(),
              auth :: binary() | undefined,
              close = false :: boolean(),
              length = 0 :: non_neg_integer() | chunked}).

%% @doc A connection process linked to its owner. It waits for `{go, Socket}'
%% (sent once the socket is handed over) and then serves it.
-spec start_link(pid(), opts()) -> pid().
start_link(Owner, Opts) ->
    proc_lib:spawn_link(?MODULE, init, [Owner, Opts]).

-spec init(pid(), opts()) -> ok.
init(Owner, #{request_timeout := ReqMs} = Opts) ->
    receive
        {go, Sock} ->
            Timer = erlang:start_timer(ReqMs, self(), request_timeout),
            request_line(Sock, Owner, Opts, Timer)
    after ReqMs ->
        ok
    end.

%% Waiting for a request line; Timer is the request or the idle deadline.
request_line(Sock, Owner, Opts, Timer) ->
    ok = arm(Sock),
    receive
        {http, Sock, {http_request, Method, Target, Version}} ->
            Timer1 = case Timer of
                         {idle, T} ->
                             cancel(T),
                             erlang:start_timer(maps:get(request_timeout, Opts), self(),
                                                request_timeout);
                         T -> T
                     end,
            case target(Target) of
                {ok, Path} ->
                    headers(Sock, Owner, Opts, Timer1,
                            #req{method = method(Method), target = Path, version = Version,
                                 close = Version < {1, 1}});
                error ->
                    error_close(Sock, 400)
            end;
        {http, Sock, {http_error, _}} ->
            error_close(Sock, 400);
        {http, Sock, {http_response, _, _, _}} ->
            error_close(Sock, 400);
        {timeout, T, request_timeout} when T =:= Timer ->
            error_close(Sock, 408);
        {timeout, T, idle_timeout} when {idle, T} =:= Timer ->
            gen_tcp:close(Sock);
        {tcp_closed, Sock} -> ok;
        {tcp_error, Sock, _} -> ok
    end.

headers(Sock, Owner, Opts, Timer, Req) ->
    ok = arm(Sock),
    receive
        {http, Sock, {http_header, _, Name, _, Value}} ->
            case Req#req.headers >= ?MAX_HEADERS of
                true -> error_close(Sock, 431);
                false -> headers(Sock, Owner, Opts, Timer,
                                 header(Name, Value, Req#req{headers = Req#req.headers + 1}))
            end;
        {http, Sock, http_eoh} ->
            cancel(Timer),
            respond(Sock, Owner, Opts, Req);
        {http, Sock, {http_error, _}} ->
            error_close(Sock, 400);
        {timeout, Timer, request_timeout} ->
            error_close(Sock, 408);
        {tcp_closed, Sock} -> ok;
        {tcp_error, Sock, _} -> ok
    end.

header('Authorization', V, Req) -> Req#req{auth = V};
header('Connection', V, Req) ->
    Tokens = [string:trim(T) || T <- binary:split(string:lowercase(V), <<",">>, [global])],
    case lists:member(<<"close">>, Tokens) of
        true -> Req#req{close = true};
        false -> Req
    end;
header('Content-Length', V, Req) ->
    case string:to_integer(V) of
        {N, <<>>} when N >= 0 -> Req#req{length = N};
        _ -> Req#req{length = chunked, close = true}    % unreadable: refused below
    end;
header('Transfer-Encoding', _V, Req) -> Req#req{length = chunked, close = true};
header(_, _, Req) -> Req.

respond(Sock, _Owner, _Opts, #req{length = chunked}) ->
    error_close(Sock, 411);
respond(Sock, _Owner, _Opts, #req{length = N}) when N > ?MAX_BODY ->
    error_close(Sock, 413);
respond(Sock, Owner, #{idle_timeout := IdleMs} = Opts, #req{length = N} = Req) ->
    throng_stats_httpd:busy(Owner),
    case drop_body(Sock, N, maps:get(request_timeout, Opts)) of
        ok ->
            {Code, Headers, Body} = throng_stats_http:handle(Req#req.method, Req#req.target,
                                                             Req#req.auth),
            case send(Sock, Code, Headers, Body, Req#req.close) of
                ok when not Req#req.close ->
                    throng_stats_httpd:waiting(Owner),
                    Idle = erlang:start_timer(IdleMs, self(), idle_timeout),
                    request_line(Sock, Owner, Opts, {idle, Idle});
                ok ->
                    linger_close(Sock);
                {error, _} ->
                    gen_tcp:close(Sock)
            end;
        error ->
            gen_tcp:close(Sock)
    end.

drop_body(_Sock, 0, _Ms) ->
    ok;
drop_body(Sock, N, Ms) ->
    ok = inet:setopts(Sock, [{packet, raw}]),
    case gen_tcp:recv(Sock, N, Ms) of
        {ok, _} -> inet:setopts(Sock, [{packet, http_bin}]);
        {error, _} -> error
    end.

send(Sock, Code, Headers, Body, Close) ->
    Length = case lists:keymember(<<"content-length">>, 1, Headers) of
                 true -> [];
                 false -> [{<<"content-length">>, integer_to_binary(byte_size(Body))}]
             end,
    Conn = case Close of
               true -> [{<<"connection">>, <<"close">>}];
               false -> []
           end,
    gen_tcp:send(Sock, [<<"HTTP/1.1 ">>, integer_to_binary(Code), $\s, reason(Code), <<"\r\n">>,
                        [[N, <<": ">>, V, <<"\r\n">>] || {N, V} <- Headers ++ Length ++ Conn],
                        <<"server: throng_stats\r\n\r\n">>, Body]).

%% @doc Answers 503 and closes: a connection beyond the cap while every held
%% one is being answered.
-spec refuse(gen_tcp:socket()) -> ok.
refuse(Sock) ->
    _ = inet:setopts(Sock, [{packet, raw}]),
    error_close(Sock, 503).

cancel(Timer) ->
    _ = erlang:cancel_timer(Timer),
    receive {timeout, Timer, _} -> ok after 0 -> ok end.

%% An answer that ends the connection (bad or late request).
error_close(Sock, Code) ->
    Body = [reason(Code), $\n],
    _ = send(Sock, Code, [{<<"content-type">>, <<"text/plain">>}], iolist_to_binary(Body), true),
    linger_close(Sock).

%% Closing a socket with unread input makes the kernel send a reset, which
%% can destroy the answer before the client reads it. So: end our side,
%% read and drop what the client still sends (at most ?LINGER_BYTES, for at
%% most ?LINGER_MS), then close.
linger_close(Sock) ->
    _ = gen_tcp:shutdown(Sock, write),
    _ = inet:setopts(Sock, [{packet, raw}, {active, false}]),
    drain(Sock, erlang:monotonic_time(millisecond) + ?LINGER_MS, ?LINGER_BYTES).

drain(Sock, Deadline, Left) ->
    Ms = Deadline - erlang:monotonic_time(millisecond),
    case Ms > 0 andalso Left > 0 andalso gen_tcp:recv(Sock, 0, Ms) of
        {ok, B} -> drain(Sock, Deadline, Left - byte_size(B));
        _ -> gen_tcp:close(Sock)
    end.

arm(Sock) ->
    case inet:setopts(Sock, [{active, once}]) of
        ok -> ok;
        {error, _} -> self() ! {tcp_closed, Sock}, ok
    end.

target({abs_path, Path}) -> {ok, Path};
target({absoluteURI, _Scheme, _Host, _Port, Path}) -> {ok, Path};
target(_) -> error.

method(M) when is_atom(M) -> atom_to_binary(M);
method(M) when is_binary(M) -> M.

reason(200) -> <<"OK">>;
reason(400) -> <<"Bad Request">>;
reason(401) -> <<"Unauthorized">>;
reason(404) -> <<"Not Found">>;
reason(405) -> <<"Method Not Allowed">>;
reason(408) -> <<"Request Timeout">>;
reason(411) -> <<"Length Required">>;
reason(413) -> <<"Content Too Large">>;
reason(431) -> <<"Request Header Fields Too Large">>;
reason(500) -> <<"Internal Server Error">>;
reason(503) -> <<"Service Unavailable">>.
