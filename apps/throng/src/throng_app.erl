%% @doc The Throng OTP application. Start-up order: configuration (a bad
%% one stops the boot with a message naming the key), logging, counters and
%% the per-boot secret, storage (Mnesia), the TLS certificate, then the
%% supervision tree.
-module(throng_app).
-behaviour(application).

-export([start/2, prep_stop/1, stop/1]).

-spec start(application:start_type(), term()) -> {ok, pid()} | {error, term()}.
start(_Type, _Args) ->
    try
        step(config, throng_config:load()),
        step(logging, throng_log:setup()),
        counters(),
        step(storage, throng_storage:init()),
        step(certificate, throng_cert:ensure()),
        {ok, Sup} = throng_sup:start_link(),
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

step(_Step, ok) -> ok;
step(Step, {error, Why}) -> throw({boot_failed, Step, Why}).

%% The counters, the queue-alarm threshold the connections read, and the
%% secret that signs XEP-0198 resumption ids: made here, before any process
%% that uses them, and owned by no process (a restart keeps them).
counters() ->
    throng_metrics:init(),
    persistent_term:put({throng_metrics, queue_alarm}, throng_config:get([stats, queue_alarm])),
    throng_tables:init_boot_secret().

format(Why) when is_list(Why) -> Why;
format(Why) -> io_lib:format("~tp", [Why]).

%% @doc Before the tree stops: stop accepting, then the connections end with
%% system-shutdown (their undelivered messages go to offline storage while
%% storage still runs).
-spec prep_stop(term()) -> term().
prep_stop(State) ->
    logger:notice(#{what => throng_stopping}),
    State.

-spec stop(term()) -> ok.
stop(_State) ->
    ok.
