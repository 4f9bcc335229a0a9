%% @doc `http': short-lived connections against an HTTP/1.1 server.
%%
%% N loops run in parallel; each request opens a new TCP connection, sends
%% `GET PATH HTTP/1.1' with `Connection: close', reads the whole response and
%% closes. Connect time and response time (connect start to last byte) go to
%% histograms, failures to the error counters by type. Run against the
%% built-in server (throng_bench_http_server) with a small backlog and an
%% accept delay, it shows what an overflowing listen queue does to clients.
%%
%% The module is both the `http' command (run/1, progress/3, summary/3) and
%% the job that runs in the worker VM (start/2, status/0, stop/0, halt/0).
-module(throng_bench_http).
-behaviour(throng_bench_worker).

-export([run/1]).
-export([progress/3, summary/3]).
%% Called by throng_bench_run as the run's kind (Kind:progress/3, Kind:summary/3).
-ignore_xref([{progress, 3}, {summary, 3}]).
-export([start/2, status/0, stop/0, halt/0]).

-compile({no_auto_import, [halt/0]}).

-define(JOB, throng_bench_http_job).

%% @doc Run the benchmark. Opts: url (or builtin server options backlog,
%% accept_delay, body_size), concurrency, requests, duration (ms), timeout
%% (ms), source_ips, out, server_pid, grace.
-spec run(map()) -> {complete | stopped | aborted, map()}.
run(Opts0) ->
    {Opts, StopServer} = target(Opts0),
    #{host := Host, port := Port} = Opts,
    Header = #{command => http, target => maps:get(url, Opts),
               settings => maps:with([concurrency, requests, duration, timeout, backlog,
                                      accept_delay, body_size, builtin], Opts)},
    try
        case gen_tcp:connect(Host, Port, [binary, {active, false}], maps:get(timeout, Opts)) of
            {ok, S} -> gen_tcp:close(S);
            {error, R} ->
                throw({unreachable, io_lib:format("cannot connect to ~s:~b: ~ts",
                                                  [Host, Port, inet:format_error(R)])})
        end,
        Duration = maps:get(duration, Opts, infinity),
        throng_bench_run:run(#{job => ?MODULE, config => Opts,
                               workers => [#{kind => local, id => 0}],
                               %% with a request count: the worst case, every
                               %% request waiting its full timeout
                               deadline => case Duration of
                                               infinity ->
                                                   ceil(maps:get(requests, Opts, 1000)
                                                        / maps:get(concurrency, Opts))
                                                       * (maps:get(timeout, Opts) + 1000) + 10000;
                                               _ -> Duration
                                           end,
                               grace => maps:get(timeout, Opts) + 1000,
                               kind => ?MODULE, header => Header,
                               out => maps:get(out, Opts, undefined),
                               server_pid => maps:get(server_pid, Opts, undefined),
                               progress => maps:get(progress, Opts, true)})
    catch throw:{unreachable, Msg} ->
            Summary = summary(throng_bench_metrics:empty_snapshot(), [],
                              Header#{status => aborted, error => iolist_to_binary(Msg)}),
            case maps:get(out, Opts, undefined) of
                undefined -> ok;
                Dir -> throng_bench_out:write_run(Dir, Summary, [],
                                                  throng_bench_metrics:empty_snapshot())
            end,
            {aborted, Summary}
    after
        StopServer()
    end.

target(Opts = #{url := Url}) ->
    case parse_url(Url) of
        {ok, {Host, Port, Path}} -> {Opts#{host => Host, port => Port, path => Path}, fun() -> ok end};
        error -> throw({usage, io_lib:format("--url: expected http://HOST[:PORT][/PATH], got ~ts",
                                             [Url])})
    end;
target(Opts) ->
    SrvOpts = maps:with([backlog, accept_delay, body_size], Opts),
    case throng_bench_http_server:start(SrvOpts#{port => maps:get(server_port, Opts, 0)}) of
        {ok, Srv = #{port := Port}} ->
            {Opts#{host => "127.0.0.1", port => Port, path => "/", builtin => true,
                   url => iolist_to_binary(["http://127.0.0.1:", integer_to_list(Port),
                                            "/ (built-in server)"])},
             fun() -> throng_bench_http_server:stop(Srv) end};
        {error, R} -> throw({fatal, io_lib:format("cannot start the built-in HTTP server: ~0tp", [R])})
    end.

%% @doc "http://host[:port][/path]" -> {Host, Port, Path}.
-spec parse_url(binary() | string()) -> {ok, {string(), inet:port_number(), string()}} | error.
parse_url(U) when is_binary(U) -> parse_url(binary_to_list(U));
parse_url("http://" ++ Rest) ->
    {HostPort, Path} = case string:split(Rest, "/") of
                           [HP] -> {HP, "/"};
                           [HP, P] -> {HP, "/" ++ P}
                       end,
    case throng_bench_units:parse_host_port(HostPort, 80) of
        {ok, {H, Port}} -> {ok, {H, Port, Path}};
        error -> error
    end;
parse_url(_) -> error.

%% @doc The progress line.
-spec progress(map(), throng_bench_metrics:snapshot(), map()) -> iodata().
progress(Row, #{counters := C}, _H) ->
    io_lib:format("[~5bs] requests ~b (~ts/s) ok ~b errors ~b (refused ~b reset ~b timeout ~b "
                  "closed ~b) response p50 ~ts p99 ~ts",
                  [round(maps:get(t, Row)), maps:get(requests, C),
                   throng_bench_units:format_rate(maps:get(requests_s, Row)),
                   maps:get(responses, C), throng_bench_summary:error_count(C),
                   maps:get(err_econnrefused, C), maps:get(err_econnreset, C),
                   maps:get(err_timeout, C), maps:get(err_closed, C),
                   fmt_ms(maps:get(response_p50_ms, Row)), fmt_ms(maps:get(response_p99_ms, Row))]).

fmt_ms(undefined) -> <<"-">>;
fmt_ms(Ms) -> throng_bench_units:format_us(Ms * 1000).

%% @doc summary.json of an http run.
-spec summary(throng_bench_metrics:snapshot(), [map()], map()) -> map().
summary(Snap = #{counters := C}, Rows, H) ->
    Failed = throng_bench_summary:error_total(Snap),
    Problems = [iolist_to_binary(io_lib:format("~b request(s) failed", [Failed])) || Failed > 0]
        ++ [iolist_to_binary(io_lib:format("~b response(s) with a non-2xx status",
                                           [maps:get(bad_status, C)]))
            || maps:get(bad_status, C) > 0],
    (maps:without([server0, loadgen_mem0, loadgen_rss0, job_status], H))#{
      verdict => #{ok => Problems =:= [], reasons => Problems},
      requests => #{total => maps:get(requests, C),
                    ok => maps:get(responses, C),
                    bad_status => maps:get(bad_status, C),
                    failed => throng_bench_summary:error_total(Snap),
                    per_s => throng_bench_summary:rate_stats(requests_s, Rows)},
      connections => #{max_open => throng_bench_summary:max_of(conns_open, Rows)},
      errors => throng_bench_summary:errors(Snap),
      latency_ms => throng_bench_summary:latency(Snap, [connect, response]),
      server => throng_bench_summary:server(Rows, maps:get(server0, H, undefined), conns_open,
                                            connection)}.

%% job (runs in the worker VM)

%% @doc Start this VM's share of the request loops.
-spec start(map(), {non_neg_integer(), pos_integer()}) -> ok.
start(Cfg, {K, W}) ->
    Conc = share(maps:get(concurrency, Cfg), K, W),
    Tickets = atomics:new(1, [{signed, true}]),
    atomics:put(Tickets, 1, case maps:get(requests, Cfg, infinity) of
                                infinity -> 1 bsl 62;
                                N -> share(N, K, W)
                            end),
    StopFlag = atomics:new(1, []),
    persistent_term:put({?MODULE, stop}, StopFlag),
    halt(),
    Req = iolist_to_binary(["GET ", maps:get(path, Cfg), " HTTP/1.1\r\nHost: ",
                            maps:get(host, Cfg), "\r\nUser-Agent: throng-bench\r\n"
                            "Connection: close\r\n\r\n"]),
    Srcs = list_to_tuple(maps:get(source_ips, Cfg, [any])),
    L = Cfg#{req => Req, tickets => Tickets, stop => StopFlag, srcs => Srcs},
    Self = self(),
    Pid = spawn(fun() ->
                        register(?JOB, self()),
                        %% linked: killing the job kills every loop
                        Loops = [spawn_opt(fun() -> req_loop(L, I) end, [link, monitor])
                                 || I <- lists:seq(1, Conc)],
                        Self ! {?JOB, started},
                        job_loop(length(Loops), StopFlag)
                end),
    receive {?JOB, started} -> ok after 10000 -> exit(Pid, kill), error(job_start_timeout) end.

share(N, K, W) -> N div W + (case K < N rem W of true -> 1; false -> 0 end).

job_loop(0, StopFlag) -> job_wait(StopFlag);
job_loop(Active, StopFlag) ->
    receive
        {'DOWN', _, process, _, _} -> job_loop(Active - 1, StopFlag);
        {status, From} -> From ! {?JOB, #{done => false, active => Active}}, job_loop(Active, StopFlag);
        halt -> ok
    end.

job_wait(StopFlag) ->
    receive
        {status, From} -> From ! {?JOB, #{done => true, active => 0}}, job_wait(StopFlag);
        halt -> ok
    end.

%% @doc Whether every loop has finished.
-spec status() -> #{done := boolean(), active := integer(), atom() => term()}.
status() ->
    throng_bench_worker:job_status(?JOB).

%% @doc Let every loop finish its current request and stop.
-spec stop() -> ok.
stop() ->
    case persistent_term:get({?MODULE, stop}, undefined) of
        undefined -> ok;
        Flag -> atomics:put(Flag, 1, 1)
    end,
    ok.

%% @doc Stop at once.
-spec halt() -> ok.
halt() ->
    case whereis(?JOB) of
        undefined -> ok;
        Pid -> exit(Pid, kill), ok
    end.

req_loop(L = #{tickets := T, stop := Stop}, I) ->
    case atomics:get(Stop, 1) =:= 0 andalso atomics:sub_get(T, 1, 1) >= 0 of
        true ->
            request(L, I),
            req_loop(L, I + 1);
        false -> ok
    end.

request(#{host := Host, port := Port, timeout := Timeout, req := Req, srcs := Srcs}, I) ->
    throng_bench_metrics:inc(requests),
    T0 = erlang:monotonic_time(microsecond),
    Src = throng_bench_src:opts(element(I rem tuple_size(Srcs) + 1, Srcs)),
    case gen_tcp:connect(Host, Port, [binary, {active, false}, {nodelay, true},
                                      {show_econnreset, true} | Src], Timeout) of
        {ok, S} ->
            T1 = erlang:monotonic_time(microsecond),
            throng_bench_metrics:observe(connect, T1 - T0),
            throng_bench_metrics:inc(connects),
            throng_bench_metrics:inc(conns_open),
            Deadline = T0 + Timeout * 1000,
            Result = case gen_tcp:send(S, Req) of
                         ok ->
                             throng_bench_metrics:add(bytes_out, byte_size(Req)),
                             read_response(S, Deadline, <<>>);
                         {error, R} -> {error, R}
                     end,
            gen_tcp:close(S),
            throng_bench_metrics:sub(conns_open, 1),
            case Result of
                {ok, Status} ->
                    throng_bench_metrics:observe(response, erlang:monotonic_time(microsecond) - T0),
                    case Status >= 200 andalso Status < 300 of
                        true -> throng_bench_metrics:inc(responses);
                        false -> throng_bench_metrics:inc(bad_status)
                    end;
                {error, R2} -> throng_bench_metrics:count_error(R2)
            end;
        {error, R} ->
            throng_bench_metrics:count_error(R)
    end.

%% Read until the head is complete and then Content-Length bytes of body
%% (or until the server closes when there is no Content-Length).
read_response(S, Deadline, Buf) ->
    case binary:match(Buf, <<"\r\n\r\n">>) of
        {Pos, 4} ->
            Head = binary:part(Buf, 0, Pos),
            Body = byte_size(Buf) - Pos - 4,
            case parse_head(Head) of
                {ok, Status, undefined} -> read_to_close(S, Deadline, Status);
                {ok, Status, Len} -> read_body(S, Deadline, Status, Len - Body);
                error -> {error, bad_response}
            end;
        nomatch when byte_size(Buf) > 65536 -> {error, bad_response};
        nomatch ->
            case recv(S, Deadline) of
                {ok, More} -> read_response(S, Deadline, <<Buf/binary, More/binary>>);
                {error, closed} when Buf =:= <<>> -> {error, closed};
                {error, closed} -> {error, bad_response};
                {error, _} = E -> E
            end
    end.

read_body(_S, _Deadline, Status, Left) when Left =< 0 -> {ok, Status};
read_body(S, Deadline, Status, Left) ->
    case recv(S, Deadline) of
        {ok, More} -> read_body(S, Deadline, Status, Left - byte_size(More));
        {error, _} = E -> E
    end.

read_to_close(S, Deadline, Status) ->
    case recv(S, Deadline) of
        {ok, _} -> read_to_close(S, Deadline, Status);
        {error, closed} -> {ok, Status};
        {error, _} = E -> E
    end.

recv(S, Deadline) ->
    case Deadline - erlang:monotonic_time(microsecond) of
        Left when Left =< 0 -> {error, timeout};
        Left ->
            case gen_tcp:recv(S, 0, max(1, Left div 1000)) of
                {ok, B} = Ok -> throng_bench_metrics:add(bytes_in, byte_size(B)), Ok;
                E -> E
            end
    end.

parse_head(Head) ->
    [StatusLine | Lines] = binary:split(Head, <<"\r\n">>, [global]),
    case binary:split(StatusLine, <<" ">>, [global]) of
        [<<"HTTP/1.", _>>, Code | _] ->
            try binary_to_integer(Code) of
                Status ->
                    Len = lists:foldl(
                            fun(L, Acc) ->
                                    case binary:split(L, <<":">>) of
                                        [N, V] ->
                                            case string:lowercase(string:trim(N)) of
                                                <<"content-length">> ->
                                                    binary_to_integer(string:trim(V));
                                                _ -> Acc
                                            end;
                                        _ -> Acc
                                    end
                            end, undefined, Lines),
                    {ok, Status, Len}
            catch error:badarg -> error
            end;
        _ -> error
    end.
