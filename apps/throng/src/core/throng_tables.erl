%% @doc The server's small shared tables and the per-boot secret: their
%% API, read and written directly by the processes that need them.
%%
%% In-band registrations per address, the PLAIN login cache and the
%% authentication-failure buckets of {@link throng_auth_limits} are public
%% ETS tables created by {@link create/0} in {@link throng_table_owner}, a
%% process that does nothing else, so they live as long as the server.
%% {@link throng_janitor} calls {@link sweep/0} to drop entries that have
%% aged out; if it crashes, nothing here is lost.
%% The secret is a `persistent_term' made once per start of the
%% application ({@link init_boot_secret/0}), owned by no process.
%%
%% Nothing on a login or routing path calls a process for these.
-module(throng_tables).

-export([create/0, init_boot_secret/0, boot_secret/0, sweep/0,
         registration_allowed/2,
         plain_cache_get/1, plain_cache_put/2, plain_cache_delete/1]).
%% Called by throng_table_owner (a table creator named in throng_sup).
-ignore_xref([{create, 0}]).

-define(REGS, throng_registrations).
-define(PLAIN, throng_plain_cache).
-define(SECRET_KEY, {?MODULE, secret}).

%% @doc Creates the tables, owned by the calling process.
-spec create() -> ok.
create() ->
    Opts = [set, public, named_table, {read_concurrency, true}, {write_concurrency, true}],
    ok = throng_auth_limits:create(),
    ?REGS = ets:new(?REGS, Opts),
    ?PLAIN = ets:new(?PLAIN, Opts),
    ok.

%% @doc Makes a new random secret; called once at boot, before any
%% connection exists.
-spec init_boot_secret() -> ok.
init_boot_secret() ->
    persistent_term:put(?SECRET_KEY, crypto:strong_rand_bytes(32)).

%% @doc The random secret made at boot (keys the PLAIN cache; the XEP-0198
%% resumption-id key is derived from it unless one is configured).
-spec boot_secret() -> binary().
boot_secret() ->
    persistent_term:get(?SECRET_KEY).

%% @doc Drops the authentication-failure buckets that have emptied
%% ({@link throng_auth_limits:sweep/0}) and the registrations older than
%% registration.ip_interval.
-spec sweep() -> ok.
sweep() ->
    ok = throng_auth_limits:sweep(),
    Now = erlang:monotonic_time(second),
    %% Registration rows hold when the address may register again.
    _ = ets:select_delete(?REGS, [{{'_', '$1'}, [{'=<', '$1', Now}], [true]}]),
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
