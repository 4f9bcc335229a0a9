%% @doc Brute-force protection for SASL: failed authentications counted per
%% source address and per account in one public ETS table, read and written
%% by the connection processes themselves (no process on the login path).
%%
%% Each address (IPv4 /32, IPv6 /`auth.ipv6_prefix', default /64) and each
%% account has a bucket of failures, kept as one timestamp: the time at which
%% the bucket will be empty again (GCRA, the "virtual scheduling" form of a
%% token bucket). A failure adds Window/Max to it; an attempt is refused when
%% one more failure would overflow the bucket. So an address may fail
%% `auth.address_failures' times at once and then at that rate per
%% `auth.failure_window'; beyond, every attempt from it is answered
%% `temporary-auth-failure' (RFC 6120 §6.5) without looking at the password.
%% Refused attempts do not fill the bucket further (it empties at the same
%% rate whatever the attacker does) and cost the server one ETS read.
%%
%% Per account the bucket is the same (`auth.account_failures' per
%% `auth.account_window'), but a full account bucket refuses only the
%% addresses that have themselves failed within `auth.account_window': a
%% user whose address has no recent failure still gets their password
%% checked, so an attacker cannot lock a user out by guessing their
%% password; they only lose the guesses of addresses that have already
%% failed (see docs/operations.md, "Brute-force protection").
%%
%% Updates are compare-and-swap on one object (`ets:select_replace/2'), so
%% concurrent failures are all counted. Checks are made before the password
%% is: attempts already past their check when the bucket fills are still
%% counted, so the bucket stays full longer; the long-run rate of password
%% checks per address never exceeds the configured one.
%%
%% Bounded: entries whose bucket is empty and whose last failure is older
%% than `auth.account_window' are dropped by {@link sweep/0} (the janitor);
%% at most `auth.max_tracked' entries are kept, and when the table is full
%% the failures of untracked addresses share one bucket (so a flood of new
%% addresses cannot grow it) and untracked accounts are not counted.
-module(throng_auth_limits).

-export([create/0, sweep/0, check_address/1, account_allowed/3, failed/4,
         address_failures/1, account_failures/2]).

-define(T, throng_auth_limits).
-define(OVERFLOW, {addr, overflow}).
-define(CAS_TRIES, 16).

-type key() :: {addr, term()} | {account, binary(), binary()}.
-type ip() :: inet:ip_address() | undefined.
-export_type([key/0]).

%% @doc Creates the table, owned by the calling process.
-spec create() -> ok.
create() ->
    ?T = ets:new(?T, [set, public, named_table, {read_concurrency, true},
                      {write_concurrency, true}]),
    ok.

%% @doc Drops the entries whose bucket is empty and whose last failure is
%% older than auth.account_window.
-spec sweep() -> ok.
sweep() ->
    Now = now_ms(),
    Recent = Now - throng_config:get([auth, account_window]) * 1000,
    _ = ets:select_delete(?T, [{{'_', '$1', '$2'}, [{'=<', '$1', Now}, {'=<', '$2', Recent}],
                                [true]}]),
    ok.

%% @doc Whether an attempt from this address may go on to a password check:
%% `ok', or `{refused, Failures}' when its bucket is full.
-spec check_address(ip()) -> ok | {refused, pos_integer()}.
check_address(IP) ->
    case exempt(IP) of
        true -> ok;
        false ->
            {Max, Window} = address_limit(),
            case conforms(address_entry(address_key(IP)), Max, Window, now_ms()) of
                true -> ok;
                false -> {refused, address_failures(IP)}
            end
    end.

%% @doc Whether an attempt for User@Server from IP may go on to a password
%% check. False only when the account's bucket is full and the address
%% itself failed within auth.account_window.
-spec account_allowed(binary(), binary(), ip()) -> boolean().
account_allowed(User, Server, IP) ->
    Now = now_ms(),
    {Max, Window} = account_limit(),
    exempt(IP)
        orelse conforms(lookup({account, User, Server}), Max, Window, Now)
        orelse not failed_recently(address_entry(address_key(IP)), Now).

%% @doc Records a failed authentication from IP; Cond is the SASL condition
%% and User the user named, if any. Only 'not-authorized' (a wrong password
%% or unknown user) counts for the account. Returns the failures now in the
%% address's bucket (0 for an exempt address).
-spec failed(ip(), binary() | undefined, binary(), atom()) -> non_neg_integer().
failed(IP, User, Server, Cond) ->
    case exempt(IP) of
        true -> 0;
        false ->
            Now = now_ms(),
            _ = case Cond =:= 'not-authorized' andalso is_binary(User) of
                    true ->
                        {AMax, AWindow} = account_limit(),
                        add(track({account, User, Server}, false), AMax, AWindow, Now);
                    false ->
                        ok
                end,
            {Max, Window} = address_limit(),
            case add(track(address_key(IP), true), Max, Window, Now) of
                not_tracked -> 0;
                Tat -> level(Tat, Max, Window, Now)
            end
    end.

%% @doc The failures in an address's bucket now.
-spec address_failures(ip()) -> non_neg_integer().
address_failures(IP) ->
    {Max, Window} = address_limit(),
    entry_level(address_entry(address_key(IP)), Max, Window).

%% @doc The failures in an account's bucket now.
-spec account_failures(binary(), binary()) -> non_neg_integer().
account_failures(User, Server) ->
    {Max, Window} = account_limit(),
    entry_level(lookup({account, User, Server}), Max, Window).

%% The bucket an address counts in: IPv4 addresses (and IPv4-mapped IPv6
%% ones) by themselves, IPv6 addresses by their auth.ipv6_prefix.
-spec address_key(ip()) -> key().
address_key({_, _, _, _} = IP) ->
    {addr, IP};
address_key({0, 0, 0, 0, 0, 16#ffff, AB, CD}) ->
    {addr, {AB bsr 8, AB band 255, CD bsr 8, CD band 255}};
address_key({_, _, _, _, _, _, _, _} = IP) ->
    {addr, mask6(IP, throng_config:get([auth, ipv6_prefix]))};
address_key(undefined) ->
    {addr, undefined}.

mask6(IP, Prefix) ->
    <<N:128>> = << <<W:16>> || W <- tuple_to_list(IP) >>,
    Masked = N band (((1 bsl Prefix) - 1) bsl (128 - Prefix)),
    list_to_tuple([W || <<W:16>> <= <<Masked:128>>]).

%%% Buckets: {Key, Tat, LastFailure}, times in monotonic milliseconds. Tat
%%% (the theoretical arrival time) is when the bucket is empty again.

%% Interval per failure (ms) and the tolerance: a failure conforms when the
%% bucket would not be fuller than Max afterwards.
interval(Max, Window) -> max(1, Window * 1000 div Max).

conforms(undefined, _Max, _Window, _Now) -> true;
conforms({_, Tat, _}, Max, Window, Now) -> Tat - Now =< Window * 1000 - interval(Max, Window).

failed_recently(undefined, _Now) -> false;
failed_recently({_, _, Last}, Now) ->
    Now - Last < throng_config:get([auth, account_window]) * 1000.

level(Tat, _Max, _Window, Now) when Tat =< Now -> 0;
level(Tat, Max, Window, Now) ->
    I = interval(Max, Window),
    (Tat - Now + I - 1) div I.

entry_level(undefined, _Max, _Window) -> 0;
entry_level({_, Tat, _}, Max, Window) -> level(Tat, Max, Window, now_ms()).

%% Adds one failure to a bucket; returns its new Tat.
add(not_tracked, _Max, _Window, _Now) ->
    not_tracked;
add(Key, Max, Window, Now) ->
    cas_add(Key, interval(Max, Window), Now, ?CAS_TRIES).

cas_add(_Key, _I, _Now, 0) ->
    %% Lost the race ?CAS_TRIES times in a row: this one failure is not
    %% counted (the others were).
    not_tracked;
cas_add(Key, I, Now, Tries) ->
    case ets:lookup(?T, Key) of
        [] ->
            case ets:insert_new(?T, {Key, Now + I, Now}) of
                true -> Now + I;
                false -> cas_add(Key, I, Now, Tries - 1)
            end;
        [{_, Tat, _} = Old] ->
            New = {Key, max(Tat, Now) + I, Now},
            case ets:select_replace(?T, [{Old, [], [{const, New}]}]) of
                1 -> element(2, New);
                0 -> cas_add(Key, I, Now, Tries - 1)
            end
    end.

%% The key a new failure is recorded under: its own while the table has
%% room; when full, addresses share the overflow bucket and accounts are
%% not counted.
track(Key, IsAddress) ->
    case ets:member(?T, Key) of
        true -> Key;
        false ->
            case ets:info(?T, size) < throng_config:get([auth, max_tracked]) of
                true -> Key;
                false when IsAddress ->
                    throng_metrics:incr(auth_limits_overflow),
                    ets:member(?T, ?OVERFLOW) orelse
                        logger:warning(#{what => auth_limits_table_full,
                                         max_tracked => throng_config:get([auth, max_tracked])}),
                    ?OVERFLOW;
                false ->
                    throng_metrics:incr(auth_limits_overflow),
                    not_tracked
            end
    end.

%% An address's entry: its own, or while the table is full and it has
%% none, the shared overflow bucket.
address_entry(Key) ->
    case lookup(Key) of
        undefined ->
            case ets:info(?T, size) < throng_config:get([auth, max_tracked]) of
                true -> undefined;
                false -> lookup(?OVERFLOW)
            end;
        Entry ->
            Entry
    end.

lookup(Key) ->
    case ets:lookup(?T, Key) of
        [Entry] -> Entry;
        [] -> undefined
    end.

exempt(IP) ->
    throng_config:get([auth, exempt_loopback]) andalso is_loopback(IP).

is_loopback({127, _, _, _}) -> true;
is_loopback({0, 0, 0, 0, 0, 0, 0, 1}) -> true;
is_loopback({0, 0, 0, 0, 0, 16#ffff, AB, _}) -> AB bsr 8 =:= 127;
is_loopback(_) -> false.

address_limit() ->
    {throng_config:get([auth, address_failures]), throng_config:get([auth, failure_window])}.

account_limit() ->
    {throng_config:get([auth, account_failures]), throng_config:get([auth, account_window])}.

now_ms() ->
    erlang:monotonic_time(millisecond).
