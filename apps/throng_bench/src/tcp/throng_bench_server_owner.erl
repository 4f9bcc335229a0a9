%% @doc The owner process of a built-in test server (echo/sink, HTTP): it
%% holds the listen sockets, its acceptors and connection handlers are
%% linked to it, and stopping it (stop/1) closes them all.
-module(throng_bench_server_owner).

-export([start/1, stop/1, listen_opts/1]).

%% @doc Start an owner that runs Init() (open the listeners, start linked
%% acceptors) and then waits to be stopped. Returns Init's description of
%% the server with the owner's pid added, or its error.
-spec start(fun(() -> {ok, map()} | {error, term()})) -> {ok, map()} | {error, term()}.
start(Init) ->
    Self = self(),
    Pid = spawn(fun() -> owner(Self, Init) end),
    MRef = monitor(process, Pid),
    receive
        {Pid, {ok, Server}} -> demonitor(MRef, [flush]), {ok, Server#{pid => Pid}};
        {Pid, {error, _} = E} -> demonitor(MRef, [flush]), E;
        {'DOWN', MRef, process, Pid, R} -> {error, R}
    end.

%% @doc Stop the listeners and every connection they accepted.
-spec stop(#{pid := pid(), atom() => term()}) -> ok.
stop(#{pid := Pid}) ->
    MRef = monitor(process, Pid),
    exit(Pid, shutdown),
    receive {'DOWN', MRef, process, Pid, _} -> ok after 5000 -> ok end.

%% @doc gen_tcp:listen/2 options of a test server: ip (127.0.0.1) and
%% backlog (1024) from Opts.
-spec listen_opts(map()) -> [gen_tcp:listen_option()].
listen_opts(Opts) ->
    [binary, {active, false}, {ip, maps:get(ip, Opts, {127, 0, 0, 1})}, {reuseaddr, true},
     {backlog, maps:get(backlog, Opts, 1024)}, {nodelay, true}].

owner(Parent, Init) ->
    process_flag(trap_exit, true),
    case Init() of
        {ok, _} = Ok -> Parent ! {self(), Ok}, loop();
        {error, _} = E -> Parent ! {self(), E}
    end.

%% Handlers are linked to the owner so that stop/1 closes their sockets too.
loop() ->
    receive
        {'EXIT', _, shutdown} -> exit(shutdown);
        _ -> loop()
    end.
