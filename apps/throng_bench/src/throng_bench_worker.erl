%% @doc Load-generating VMs: this one, extra VMs on this host started with
%% OTP `peer' (connection over standard_io: no epmd, no distribution), or
%% distributed Erlang nodes on other hosts (`throng-bench worker').
%%
%% A job (throng_bench_xmpp_job, throng_bench_http) runs in every worker VM
%% with its share of the load. The controller calls into each worker once a
%% second for a metrics snapshot; nothing is pushed per event.
-module(throng_bench_worker).

%% controller side
-export([start/1, call/4, call/5, stop/1, describe/1, os_pid/1]).
%% worker side, called through call/4
-export([start_job/3, sample/1, stop_job/1, halt_job/1, serve/1, job_status/1]).
%% Worker side, called in the worker VM through call/4 (apply, peer:call, erpc).
-ignore_xref([{start_job, 3}, {sample, 1}, {stop_job, 1}, {halt_job, 1}]).

-type worker() :: #{kind := local | peer | node, id := non_neg_integer(),
                    pid => pid(), node => node()}.
-export_type([worker/0]).

-callback start(Config :: map(), Share :: {non_neg_integer(), pos_integer()}) -> ok.
-callback status() -> #{done := boolean(), active := integer(), atom() => term()}.
-callback stop() -> ok.
-callback halt() -> ok.

-define(CALL_TIMEOUT, 5000).

%% @doc Start the workers: `#{local => true}' (this VM only),
%% `#{peers => N}' (N new VMs on this host) or `#{nodes => [Node]}'.
-spec start(map()) -> {ok, [worker()]} | {error, iodata()}.
start(#{nodes := Nodes, cookie := Cookie}) when Nodes =/= [] ->
    ok = ensure_distributed(Cookie, hd(Nodes)),
    try
        {ok, [begin
                  pong =:= net_adm:ping(N) orelse throw({no_node, N}),
                  load_code(N),
                  #{kind => node, id => I, node => N}
              end || {I, N} <- lists:enumerate(0, Nodes)]}
    catch throw:{no_node, N} ->
            {error, io_lib:format("worker node ~s does not answer (is `throng-bench worker "
                                  "--name ~s' running there, with the same --cookie?)", [N, N])}
    end;
start(#{peers := N}) when N > 0 ->
    Args = ["-pa" | code_dirs()] ++ ["+P", "2000000", "+Q", "65536", "+sbwt", "none",
                                     "+sbwtdcpu", "none", "+sbwtdio", "none"],
    try
        {ok, [begin
                  case peer:start_link(#{connection => standard_io, args => Args}) of
                      {ok, Pid, _} -> #{kind => peer, id => I, pid => Pid};
                      {ok, Pid} -> #{kind => peer, id => I, pid => Pid};
                      {error, R} -> throw({peer, R})
                  end
              end || I <- lists:seq(0, N - 1)]}
    catch throw:{peer, R} ->
            {error, io_lib:format("cannot start a worker VM: ~0tp", [R])}
    end;
start(_) ->
    {ok, [#{kind => local, id => 0}]}.

%% @doc Call M:F(A) in a worker VM.
-spec call(worker(), module(), atom(), [term()]) -> term().
call(W, M, F, A) -> call(W, M, F, A, ?CALL_TIMEOUT).

-spec call(worker(), module(), atom(), [term()], timeout()) -> term().
call(#{kind := local}, M, F, A, _T) -> apply(M, F, A);
call(#{kind := peer, pid := P}, M, F, A, T) -> peer:call(P, M, F, A, T);
call(#{kind := node, node := N}, M, F, A, T) -> erpc:call(N, M, F, A, T).

%% @doc Stop worker VMs started by start/1 (distributed nodes keep running).
-spec stop([worker()]) -> ok.
stop(Workers) ->
    lists:foreach(fun(#{kind := peer, pid := P}) -> catch peer:stop(P);
                     (_) -> ok
                  end, Workers).

-spec describe(worker()) -> binary().
describe(#{kind := local}) -> <<"this VM">>;
describe(#{kind := peer, id := I}) -> iolist_to_binary(["peer VM ", integer_to_list(I)]);
describe(#{kind := node, node := N}) -> atom_to_binary(N).

%% @doc The worker's OS pid when it runs on this host, else undefined.
-spec os_pid(worker()) -> non_neg_integer() | undefined.
os_pid(#{kind := node}) -> undefined;
os_pid(W) ->
    try list_to_integer(call(W, os, getpid, []))
    catch _:_ -> undefined
    end.

%% worker side

%% @doc Zero this VM's metrics and start a job with its share of the load.
-spec start_job(module(), map(), {non_neg_integer(), pos_integer()}) -> ok.
start_job(Job, Config, Share) ->
    ok = throng_bench_metrics:init(),
    Job:start(Config, Share).

%% @doc Metrics and job status of this VM.
-spec sample(module()) -> {throng_bench_metrics:snapshot(), map()}.
sample(Job) ->
    {throng_bench_metrics:snapshot(), Job:status()}.

%% @doc The status/0 of a job whose loop process is registered as Name and
%% answers {status, From} with {Name, Status}: done when no such process
%% runs, unknown (active -1) when it does not answer within 5 s.
-spec job_status(atom()) -> #{done := boolean(), active := integer(), atom() => term()}.
job_status(Name) ->
    case whereis(Name) of
        undefined -> #{done => true, active => 0};
        Pid ->
            Pid ! {status, self()},
            receive {Name, S} -> S after 5000 -> #{done => false, active => -1} end
    end.

-spec stop_job(module()) -> ok.
stop_job(Job) -> Job:stop().

-spec halt_job(module()) -> ok.
halt_job(Job) -> Job:halt().

%% @doc The `worker' subcommand: a distributed node that waits for a
%% controller (which loads the code it needs).
-spec serve(map()) -> no_return().
serve(#{name := Name, cookie := Cookie}) ->
    Mode = case string:find(atom_to_list(Name), ".") of nomatch -> shortnames; _ -> longnames end,
    case net_kernel:start(Name, #{name_domain => Mode}) of
        {ok, _} -> ok;
        {error, R} ->
            throw({fatal, io_lib:format("worker: cannot start distribution as ~s: ~0tp "
                                        "(is epmd running?)", [Name, R])})
    end,
    erlang:set_cookie(Cookie),
    io:format("throng-bench worker ~s waiting for a controller~n", [node()]),
    receive after infinity -> ok end.

%% internal

code_dirs() ->
    lists:usort([filename:dirname(code:which(M))
                 || M <- [throng_bench_worker, throng_xml_stream, throng_xml, throng_proc_sample],
                    is_list(code:which(M))]).

%% The controller becomes a distributed node named after the workers' kind of
%% host: 127.0.0.1 for workers on loopback addresses, else this host's fully
%% qualified name (which the workers must be able to resolve).
ensure_distributed(Cookie, Worker) ->
    case node() of
        nonode@nohost ->
            [_, WHost] = string:split(atom_to_list(Worker), "@"),
            Base = "throng_bench_ctl_" ++ os:getpid(),
            {Name, Mode} =
                case {inet:parse_address(WHost), string:find(WHost, ".")} of
                    {{ok, {127, _, _, _}}, _} -> {Base ++ "@127.0.0.1", longnames};
                    {_, nomatch} -> {Base, shortnames};
                    _ -> {Base ++ "@" ++ net_adm:localhost(), longnames}
                end,
            case net_kernel:start(list_to_atom(Name), #{name_domain => Mode}) of
                {ok, _} -> ok;
                {error, R} ->
                    throw({fatal, io_lib:format("cannot start distribution as ~s: ~0tP "
                                                "(is epmd running?)", [Name, R, 6])})
            end;
        _ -> ok
    end,
    Cookie =:= undefined orelse erlang:set_cookie(Cookie),
    ok.

load_code(Node) ->
    Mods = [M || {M, F} <- code:all_loaded(), is_list(F),
                 lists:prefix("throng_", atom_to_list(M))]
        ++ [throng_bench_xmpp_user, throng_bench_xmpp_job, throng_bench_sasl, throng_bench_http,
            throng_xml_stream, throng_xml],
    lists:foreach(fun(M) ->
                          case code:get_object_code(M) of
                              {M, Bin, File} ->
                                  {module, M} = erpc:call(Node, code, load_binary, [M, File, Bin]);
                              error -> ok
                          end
                  end, lists:usort(Mods)).
