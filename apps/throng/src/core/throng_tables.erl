%% @doc Owner of the server's shared ETS tables (sessions, authentication
%% failures per address, in-band registrations per address, the PLAIN login
%% cache) and their janitor: every few seconds it drops entries that have
%% aged out. Nothing on a login or routing path calls this process; they read
%% and write the public tables directly.
-module(throng_tables).
-behaviour(gen_server).

-export([start_link/0, boot_secret/0,
         auth_failure/1, auth_failures/1, auth_success/1,
         registration_allowed/2,
         plain_cache_get/1, plain_cache_put/2, plain_cache_delete/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-define(FAILURES, throng_auth_failures).
-define(REGS, throng_registrations).
-define(PLAIN, throng_plain_cache).
-define(SWEEP_MS, 10000).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc A random secret made at boot (keys the PLAIN cache, signs XEP-0198
%% resumption ids).
-spec boot_secret() -> binary().
boot_secret() ->
    persistent_term:get({?MODULE, secret}).

%%% Authentication failures per IP address

%% @doc Records a failure from an address; returns how many there were in
%% the current window (auth.failure_window).
-spec auth_failure(inet:ip_address() | undefined) -> pos_integer().
auth_failure(IP) ->
    Now = erlang:monotonic_time(second),
    Window = throng_config:get([auth, failure_window]),
    case ets:lookup(?FAILURES, IP) of
        [{IP, _N, Since}] when Now - Since > Window ->
            ets:insert(?FAILURES, {IP, 1, Now}),
            1;
        [_] ->
            ets:update_counter(?FAILURES, IP, {2, 1});
        [] ->
            ets:insert(?FAILURES, {IP, 1, Now}),
            1
    end.

-spec auth_failures(inet:ip_address() | undefined) -> non_neg_integer().
auth_failures(IP) ->
    case ets:lookup(?FAILURES, IP) of
        [{IP, N, _}] -> N;
        [] -> 0
    end.

%% @doc A success does not clear the address's record (an attacker with one
%% valid account must not reset the count); failures age out with the window.
-spec auth_success(inet:ip_address() | undefined) -> ok.
auth_success(_IP) ->
    ok.

%%% In-band registrations per IP address

%% @doc True (and the registration is recorded) if the address has not
%% registered an account within the last Interval seconds. Rows hold when
%% the address may register again, so the janitor needs no configuration.
-spec registration_allowed(inet:ip_address() | undefined, non_neg_integer()) -> boolean().
registration_allowed(IP, Interval) ->
    Now = erlang:monotonic_time(second),
    case ets:lookup(?REGS, IP) of
        [{IP, Until}] when Now < Until -> false;
        _ -> ets:insert(?REGS, {IP, Now + Interval}), true
    end.

%%% The PLAIN login cache

-spec plain_cache_get(term()) -> term() | undefined.
plain_cache_get(Key) ->
    case ets:lookup(?PLAIN, Key) of
        [{Key, V}] -> V;
        [] -> undefined
    end.

-spec plain_cache_put(term(), term()) -> ok.
plain_cache_put(Key, Value) ->
    Max = throng_config:get([auth, plain_cache_size]),
    case Max > 0 of
        true ->
            %% Crude but bounded: when full, start over.
            ets:info(?PLAIN, size) >= Max andalso ets:delete_all_objects(?PLAIN),
            ets:insert(?PLAIN, {Key, Value}),
            ok;
        false ->
            ok
    end.

-spec plain_cache_delete(term()) -> ok.
plain_cache_delete(Key) ->
    ets:delete(?PLAIN, Key),
    ok.

%%% gen_server

-spec init([]) -> {ok, undefined}.
init([]) ->
    persistent_term:put({?MODULE, secret}, crypto:strong_rand_bytes(32)),
    ok = throng_sm:init(),
    ok = throng_metrics:init_hot_queues(),
    persistent_term:put({throng_metrics, queue_alarm}, throng_config:get([stats, queue_alarm])),
    Opts = [set, public, named_table, {read_concurrency, true}, {write_concurrency, true}],
    ?FAILURES = ets:new(?FAILURES, Opts),
    ?REGS = ets:new(?REGS, Opts),
    ?PLAIN = ets:new(?PLAIN, Opts),
    erlang:send_after(?SWEEP_MS, self(), sweep),
    {ok, undefined}.

-spec handle_call(term(), gen_server:from(), undefined) -> {reply, ok, undefined}.
handle_call(_Req, _From, St) -> {reply, ok, St}.

-spec handle_cast(term(), undefined) -> {noreply, undefined}.
handle_cast(_Msg, St) -> {noreply, St}.

-spec handle_info(term(), undefined) -> {noreply, undefined}.
handle_info(sweep, St) ->
    Now = erlang:monotonic_time(second),
    Window = throng_config:get([auth, failure_window]),
    ets:select_delete(?FAILURES, [{{'_', '_', '$1'}, [{'<', '$1', Now - Window}], [true]}]),
    ets:select_delete(?REGS, [{{'_', '$1'}, [{'=<', '$1', Now}], [true]}]),
    erlang:send_after(?SWEEP_MS, self(), sweep),
    {noreply, St};
handle_info(_Msg, St) ->
    {noreply, St}.
