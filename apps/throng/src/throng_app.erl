%% @doc The Throng OTP application. Start-up order: configuration (a bad
%% one stops the boot with a message naming the key), logging, counters and
%% the per-boot secret, storage (Mnesia), the TLS certificate, the extension
%% modules of every host, then the processes (the supervision tree,
%% listeners included).
%%
%% A step that fails, by returning `{error, Why}' or by raising, stops the
%% boot with one line on standard error and a critical log event, both
%% naming the step and the cause: `throng: cannot start: storage: ...'.
-module(throng_app).
-behaviour(application).

-export([start/2, prep_stop/1, stop/1]).
%% Optional application callback (rebar3 only knows the required ones).
-ignore_xref([{prep_stop, 1}]).

-spec start(application:start_type(), term()) -> {ok, pid()} | {error, term()}.
start(_Type, _Args) ->
    try
        step(config, fun throng_config:load/0),
        step(logging, fun throng_log:setup/0),
        step(counters, fun counters/0),
        step(storage, fun throng_storage:init/0),
        step(certificate, fun throng_cert:ensure/0),
        step(modules, fun throng_ext:start/0),
        Sup = start_tree(),
        logger:notice(#{what => throng_started, config => throng_config:source(),
                        hosts => throng_config:get([hosts]),
                        data_dir => throng_paths:data_dir()}),
        {ok, Sup}
    catch
        throw:{boot_failed, Step, Why} ->
            Msg = io_lib:format("throng: cannot start: ~s: ~ts~n", [Step, format(Why)]),
            io:put_chars(standard_error, Msg),
            logger:critical(#{what => boot_failed, step => Step, reason => format(Why)}),
            {error, {Step, lists:flatten(format(Why))}}
    end.

step(Step, Fun) ->
    try Fun() of
        ok -> ok;
        {error, Why} -> throw({boot_failed, Step, Why})
    catch
        throw:{boot_failed, _, _} = Failed -> throw(Failed);
        Class:Reason:Stack ->
            throw({boot_failed, Step, io_lib:format("~p:~0tp in ~ts", [Class, Reason, where(Stack)])})
    end.

%% The processes (listeners included: a port in use fails here).
start_tree() ->
    case throng_sup:start_link() of
        {ok, Sup} -> Sup;
        {error, Why} -> throw({boot_failed, processes, tree_failure(Why, [])})
    end.

%% A child that did not start, as the path of children down the tree and
%% the innermost reason: "throng_listeners_sup > {listener,1} > ...: Why".
tree_failure({shutdown, {failed_to_start_child, Id, Why}}, Path) ->
    tree_failure(Why, [Id | Path]);
tree_failure({failed_to_start_child, Id, Why}, Path) ->
    tree_failure(Why, [Id | Path]);
tree_failure(Why, Path) ->
    Ids = lists:join(" > ", [io_lib:format("~0tp", [Id]) || Id <- lists:reverse(Path)]),
    io_lib:format("~ts did not start: ~0tp", [Ids, Why]).

%% The counters, the queue-alarm threshold the connections read, and the
%% secret that signs XEP-0198 resumption ids: made here, before any process
%% that uses them, and owned by no process (a restart keeps them).
counters() ->
    throng_metrics:init(),
    %% No connection is open when the application starts: the gauges and
    %% the listeners' slot counts start from zero. (They outlive a stop in
    %% this runtime, so that a listener restarted by its supervisor keeps
    %% counting the connections it holds; a count left behind by a stop
    %% would otherwise stay forever.)
    ok = throng_metrics:reset_gauges(),
    ok = throng_listener:forget_counts(),
    persistent_term:put({throng_metrics, queue_alarm}, throng_config:get([stats, queue_alarm])),
    throng_tables:init_boot_secret().

where([{M, F, A, Loc} | _]) ->
    Arity = if is_list(A) -> length(A); true -> A end,
    io_lib:format("~p:~p/~b (line ~p)", [M, F, Arity, proplists:get_value(line, Loc, unknown)]);
where(_) ->
    "unknown".

format(Why) when is_list(Why) -> Why;
format(Why) -> io_lib:format("~0tp", [Why]).

%% @doc Before the tree stops: stop accepting, then the connections end with
%% system-shutdown (their undelivered messages go to offline storage while
%% storage still runs).
-spec prep_stop(term()) -> term().
prep_stop(State) ->
    logger:notice(#{what => throng_stopping}),
    State.

%% @doc After the tree stopped (connections ran their session_closed hooks):
%% stop the extension modules.
-spec stop(term()) -> ok.
stop(_State) ->
    throng_ext:stop().
