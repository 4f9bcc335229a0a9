%% @doc The xmpp job in one load-generating VM: a launcher that starts
%% simulated users at the arrival times of this VM's share of the arrival
%% phases. Users still running are counted from the metrics (launched -
%% finished - failed) and found, to be told to leave at the deadline or to be
%% killed, by their initial call: no table entry per user.
-module(throng_bench_xmpp_job).
-behaviour(throng_bench_worker).

-compile({no_auto_import, [halt/0]}).

-export([start/2, status/0, stop/0, halt/0]).

-define(JOB, throng_bench_xmpp_job).
-define(SAMPLE, 100).

%% @doc Start this VM's share {K, W} of the arrivals of a scenario.
-spec start(map(), {non_neg_integer(), pos_integer()}) -> ok.
start(Scenario, {K, W}) ->
    halt(),
    Cfg = compile(Scenario),
    persistent_term:put(throng_bench_xmpp_user:config_key(), Cfg),
    ok = throng_bench_metrics:init_targets(tuple_size(maps:get(targets, Cfg))),
    case {maps:get(tls, Cfg), maps:get(tls_resume, Cfg)} of
        {none, _} -> ok;
        {_StartTLSOrDirect, false} ->
            case application:ensure_all_started(fast_tls) of
                {ok, _} -> ok;
                {error, R} -> error({fast_tls_not_available, R})
            end;
        {_StartTLSOrDirect, true} ->
            {ok, _} = application:ensure_all_started(ssl),
            ok
    end,
    %% The VM's memory once everything but the users is in place (code
    %% loaded, metrics created): what users add is measured from here.
    _ = [{module, _} = code:ensure_loaded(M)
     || M <- [throng_bench_xmpp_user, throng_bench_xmpp_conn, throng_bench_xmpp_users,
              throng_bench_sasl, throng_bench_rand, throng_xml_stream, throng_xml]],
    Phases = throng_bench_arrival:split(maps:get(arrival, Scenario), {K, W}),
    Seed = {maps:get(seed, Scenario, 0), K},
    Self = self(),
    Pid = spawn(fun() ->
                        register(?JOB, self()),
                        Job = self(),
                        %% auth fast: each user's XEP-0484 token, for its next login.
                        _ = ets:new(throng_bench_fast_tokens,
                                    [named_table, public, {read_concurrency, true},
                                     {write_concurrency, true}]),
                        %% tls_resume: each user's TLS session ticket.
                        _ = ets:new(throng_bench_tls_tickets,
                                    [named_table, public, {read_concurrency, true},
                                     {write_concurrency, true}]),
                        _ = throng_bench_wheel:start_link(),
                        erlang:garbage_collect(),
                        put(memory0, throng_bench_metrics:vm_memory()),
                        T0 = erlang:monotonic_time(microsecond),
                        Launcher = spawn_link(fun() ->
                                                      launch(throng_bench_arrival:init(Phases, Seed),
                                                             T0, 0, {K, W},
                                                             rand:seed_s(exsss, erlang:phash2(Seed)),
                                                             Cfg),
                                                      Job ! launcher_done
                                              end),
                        Self ! {?JOB, started},
                        job_loop(Launcher, false, [])
                end),
    receive {?JOB, started} -> ok after 10000 -> exit(Pid, kill), error(job_start_timeout) end.

%% @doc The configuration every user of this VM reads (persistent_term):
%% resolved addresses of the targets (a tuple: user N goes to element
%% N mod K + 1), compiled population, session profiles as a tuple.
-spec compile(map()) -> map().
compile(S = #{server := Srv, users := Users, sessions := Sessions, timeouts := Timeouts}) ->
    #{domain := Domain, tls := Tls, auth := Auth, resource := Resource} = Srv,
    Targets = [{resolve(Host), Port} || {Host, Port} <- throng_bench_scenario:targets(S)],
    #{targets => list_to_tuple(Targets), domain => Domain, tls => Tls, auth => Auth,
      tls_resume => maps:get(tls_resume, Srv, false),
      resource => Resource, register => maps:get(register, Users),
      users => case Users of
                   #{compiled := C} -> C;
                   _ -> throng_bench_xmpp_users:compile(Users)
               end,
      srcs => list_to_tuple(maps:get(source_ips, S, [any])),
      profiles => list_to_tuple([maps:with([name, probability, roster, presence, csi_inactive, chat, muc, keepalive, length], P)
                                 || P <- Sessions]),
      timeouts => Timeouts, drain => maps:get(drain, S),
      run => integer_to_binary(maps:get(run, S, 0)),
      muc => maps:get(muc, S, #{service => <<"conference.localhost">>, rooms => 1}),
      socket_buffer => maps:get(socket_buffer, S)}.

resolve(Host) ->
    case inet:getaddr(binary_to_list(Host), inet) of
        {ok, A} -> A;
        {error, _} ->
            case inet:getaddr(binary_to_list(Host), inet6) of
                {ok, A6} -> A6;
                {error, R} -> error({cannot_resolve, Host, R})
            end
    end.

job_loop(Launcher, Done, Sample) ->
    receive
        launcher_done -> job_loop(Launcher, true, Sample);
        {sample, Pid} -> job_loop(Launcher, Done, [Pid | Sample]);
        {status, From} ->
            #{counters := C} = throng_bench_metrics:snapshot(),
            Active = maps:get(users_launched, C) - maps:get(users_finished, C)
                - maps:get(users_failed, C),
            From ! {?JOB, (user_memory(Sample))#{done => Done andalso Active =< 0,
                                                 active => Active, launching => not Done,
                                                 memory0 => get(memory0)}},
            job_loop(Launcher, Done, Sample);
        stop ->
            %% The launcher may be starting a user at this moment: a user it
            %% starts after the list of processes is taken would never hear
            %% of the stop and keep the run waiting for its whole session
            %% (seen: one user of 20,027 held a study run 2 minutes past its
            %% limit). Once the launcher has ended, every user is there.
            MRef = monitor(process, Launcher),
            Launcher ! stop,
            receive {'DOWN', MRef, process, _, _} -> ok
            after 5000 -> demonitor(MRef, [flush])
            end,
            each_user(fun(P) -> P ! finish end),
            job_loop(Launcher, Done, Sample);
        {halt, From} ->
            unlink(Launcher),
            exit(Launcher, kill),
            %% Users' sockets are not linked to them (throng_bench_xmpp_conn):
            %% close them here.
            Socks = [Port || Port <- erlang:ports(),
                             {connected, Owner} <- [erlang:port_info(Port, connected)],
                             throng_bench_xmpp_user:is_user(Owner)],
            each_user(fun(P) -> exit(P, kill) end),
            _ = [catch erlang:port_close(Port) || Port <- Socks],
            From ! {?JOB, halted}
    end.

each_user(F) ->
    lists:foreach(fun(P) ->
                          case throng_bench_xmpp_user:is_user(P) of
                              true -> F(P);
                              false -> ok
                          end
                  end, erlang:processes()).

%% Memory of the first users this VM launched that are still running
%% (heap, stack, process structure, as process_info reports it), averaged.
user_memory(Sample) ->
    Procs = [M || P <- Sample, {memory, M} <- [erlang:process_info(P, memory)]],
    #{user_process_bytes => mean(Procs), sampled_users => length(Procs)}.

mean([]) -> undefined;
mean(L) -> lists:sum(L) / length(L).

launch(It, T0, J, {K, W}, R0, Cfg) ->
    case throng_bench_arrival:next(It) of
        done -> ok;
        {T, It1} ->
            Wait = (T0 + T - erlang:monotonic_time(microsecond)) div 1000,
            receive
                stop -> ok
            after max(0, Wait) ->
                    #{users := Users, profiles := Profiles} = Cfg,
                    #{first := First, count := Count} = Users,
                    G = K + J * W,
                    {X, R1} = rand:uniform_real_s(R0),
                    Ix = throng_bench_scenario:session_index(tuple_to_list(Profiles), X),
                    {Len, R2} = throng_bench_rand:sample(maps:get(length, element(Ix, Profiles)), R1),
                    N = First + G rem Count,
                    throng_bench_metrics:inc(users_launched),
                    throng_bench_metrics:target_inc(
                      launched, throng_bench_targets:of_user(N, tuple_size(maps:get(targets, Cfg)))),
                    Pid = throng_bench_xmpp_user:start(N, Ix, Len, G),
                    J < ?SAMPLE andalso (whereis(?JOB) ! {sample, Pid}),
                    launch(It1, T0, J + 1, {K, W}, R2, Cfg)
            end
    end.

%% @doc Whether the launcher is done and every user has left.
-spec status() -> #{done := boolean(), active := integer(), atom() => term()}.
status() ->
    throng_bench_worker:job_status(?JOB).

%% @doc No more arrivals; every user ends its session (with the drain linger).
-spec stop() -> ok.
stop() ->
    case whereis(?JOB) of
        undefined -> ok;
        Pid -> Pid ! stop, ok
    end.

%% @doc Kill the launcher and every user at once.
-spec halt() -> ok.
halt() ->
    case whereis(?JOB) of
        undefined -> ok;
        Pid ->
            MRef = monitor(process, Pid),
            Pid ! {halt, self()},
            receive {?JOB, halted} -> ok after 10000 -> ok end,
            receive {'DOWN', MRef, process, Pid, _} -> ok after 5000 -> exit(Pid, kill) end,
            ok
    end.
