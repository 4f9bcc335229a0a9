%% @doc Brute-force protection (throng_auth_limits): failed authentications
%% are limited per source address and per account, whatever the number of
%% connections; a refused attempt runs no password check; a user whose
%% address has no recent failure is not locked out by guesses at their
%% password from elsewhere; buckets drain and the table stays bounded.
%% Counts and outcomes are asserted, never durations.
-module(auth_limits_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(L, throng_auth_limits).
-define(CHECK, {throng_scram, verify_password, 3}).
-define(HOST, <<"localhost">>).
-define(A1, {127, 0, 0, 1}).
-define(A2, {127, 0, 0, 2}).
-define(A3, {127, 0, 0, 3}).

all() ->
    [address_limit_refuses_without_password_check, parallel_connections_share_the_limit,
     success_resets_no_count, account_limit_spares_clean_addresses,
     scram_is_limited_too, buckets_drain_and_entries_expire, table_is_capped,
     ipv6_counted_by_prefix, loopback_exempt_only_when_configured].

%% No failure delays (they are limits_SUITE's concern), a long window unless
%% the case is about draining.
init_per_testcase(TC, Config) ->
    Auth = maps:merge(#{max_failure_delay => 0, failure_window => 3600, account_window => 3600},
                      auth(TC)),
    throng_ct:start(Config, #{auth => Auth}),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>]],
    erlang:trace_pattern(?CHECK, true, [call_count]),
    Config.

end_per_testcase(_TC, _Config) ->
    erlang:trace_pattern(?CHECK, false, [call_count]),
    throng_ct:stop().

auth(address_limit_refuses_without_password_check) -> #{address_failures => 5};
auth(parallel_connections_share_the_limit) -> #{address_failures => 5};
auth(success_resets_no_count) -> #{address_failures => 3};
auth(account_limit_spares_clean_addresses) -> #{address_failures => 100, account_failures => 3};
auth(scram_is_limited_too) -> #{address_failures => 2};
auth(buckets_drain_and_entries_expire) ->
    %% A failure drains every 2 s: the third attempt comes well inside that
    %% even on a slow machine (at 1 s it had 0.5 s for three logins).
    #{address_failures => 2, failure_window => 4, account_window => 4};
auth(table_is_capped) -> #{address_failures => 2, max_tracked => 5};
auth(ipv6_counted_by_prefix) -> #{address_failures => 2};
auth(loopback_exempt_only_when_configured) -> #{address_failures => 1, exempt_loopback => true}.

%% One PLAIN attempt on a fresh connection from Src; the SASL outcome.
attempt(Src, User, Password) ->
    C = ?C:connect(#{src_ip => Src}),
    _ = ?C:open_stream(C),
    R = ?C:auth_plain(C, User, Password),
    ?C:abort(C),
    R.

checks() ->
    {call_count, N} = erlang:trace_info(?CHECK, call_count),
    N.

-define(NA, {failure, <<"not-authorized">>}).
-define(TEMP, {failure, <<"temporary-auth-failure">>}).

%%% Cases

%% With 5 failures allowed per window, the 6th attempt from the address is
%% refused (temporary-auth-failure) without a password check, even with the
%% right password and for another account; another address is unaffected.
address_limit_refuses_without_password_check(_) ->
    [?assertEqual(?NA, attempt(?A1, <<"alice">>, <<"wrong">>)) || _ <- lists:seq(1, 5)],
    ?assertEqual(5, ?L:address_failures(?A1)),
    Checks = checks(),
    Refused = throng_metrics:value(auth_rate_limited),
    ?assertEqual(?TEMP, attempt(?A1, <<"alice">>, <<"password">>)),
    ?assertEqual(?TEMP, attempt(?A1, <<"bob">>, <<"password">>)),
    ?assertEqual(?TEMP, attempt(?A1, <<"nobody">>, <<"wrong">>)),
    ?assertEqual(Checks, checks()),
    ?assertEqual(Refused + 3, throng_metrics:value(auth_rate_limited)),
    %% Refusals do not fill the bucket further.
    ?assertEqual(5, ?L:address_failures(?A1)),
    ?assertEqual(ok, attempt(?A2, <<"alice">>, <<"password">>)),
    ?assertEqual(?NA, attempt(?A2, <<"bob">>, <<"wrong">>)),
    ?assertEqual(Checks + 2, checks()).

%% Many connections from one address guessing at once get the address's
%% budget between them, not one each: of 100 guesses on 25 connections
%% (4 each, in parallel) at most 5 + 24 are checked (5 allowed, plus at most
%% one in flight on each other connection when the bucket filled); the rest
%% are refused unchecked, and the address stays refused.
parallel_connections_share_the_limit(_) ->
    P = 25,
    Tries = 4,
    Self = self(),
    Checks0 = checks(),
    Pids = [spawn_link(fun() ->
                               C = ?C:connect(#{src_ip => ?A1}),
                               _ = ?C:open_stream(C),
                               Rs = [?C:auth_plain(C, <<"alice">>, <<"wrong">>)
                                     || _ <- lists:seq(1, Tries)],
                               ?C:abort(C),
                               Self ! {results, self(), Rs}
                       end) || _ <- lists:seq(1, P)],
    Results = lists:append([receive {results, Pid, Rs} -> Rs after 60000 -> error(timeout) end
                            || Pid <- Pids]),
    Checked = length([R || R <- Results, R =:= ?NA]),
    Refused = length([R || R <- Results, R =:= ?TEMP]),
    ct:pal("~b guesses on ~b connections: ~b checked, ~b refused",
           [P * Tries, P, Checked, Refused]),
    ?assertEqual(P * Tries, Checked + Refused),
    ?assert(Checked >= 5),
    ?assert(Checked =< 5 + P - 1),
    ?assertEqual(Checked, checks() - Checks0),
    ?assertEqual(?TEMP, attempt(?A1, <<"alice">>, <<"password">>)).

%% A successful login resets no count: not another address's, not its own.
success_resets_no_count(_) ->
    ?assertEqual(?NA, attempt(?A2, <<"alice">>, <<"wrong">>)),
    ?assertEqual(?NA, attempt(?A2, <<"alice">>, <<"wrong">>)),
    ?assertEqual(ok, attempt(?A1, <<"alice">>, <<"password">>)),
    ?assertEqual(2, ?L:address_failures(?A2)),
    ?assertEqual(ok, attempt(?A2, <<"alice">>, <<"password">>)),
    ?assertEqual(2, ?L:address_failures(?A2)),
    ?assertEqual(?NA, attempt(?A2, <<"alice">>, <<"wrong">>)),
    ?assertEqual(?TEMP, attempt(?A2, <<"alice">>, <<"password">>)),
    ?assertEqual(0, ?L:address_failures(?A1)).

%% 3 wrong passwords for alice fill her bucket: from then on, addresses that
%% failed recently are refused for alice (not for bob); an address without
%% recent failures still gets her password checked, once wrongly, then it
%% too is refused.
account_limit_spares_clean_addresses(_) ->
    [?assertEqual(?NA, attempt(?A1, <<"alice">>, <<"wrong">>)) || _ <- lists:seq(1, 3)],
    ?assertEqual(3, ?L:account_failures(<<"alice">>, ?HOST)),
    Checks = checks(),
    ?assertEqual(?TEMP, attempt(?A1, <<"alice">>, <<"password">>)),
    ?assertEqual(Checks, checks()),
    ?assertEqual(ok, attempt(?A1, <<"bob">>, <<"password">>)),
    %% The legitimate user on another address is not locked out.
    ?assertEqual(ok, attempt(?A2, <<"alice">>, <<"password">>)),
    ?assertEqual(?NA, attempt(?A3, <<"alice">>, <<"wrong">>)),
    ?assertEqual(?TEMP, attempt(?A3, <<"alice">>, <<"password">>)),
    %% Unknown users have buckets too (no telling them apart).
    [?assertEqual(?NA, attempt(?A1, <<"nobody">>, <<"wrong">>)) || _ <- lists:seq(1, 3)],
    ?assertEqual(?TEMP, attempt(?A1, <<"nobody">>, <<"wrong">>)).

%% SCRAM is refused at its first message, before the salt is looked up.
scram_is_limited_too(_) ->
    [?assertEqual(?NA, attempt(?A1, <<"alice">>, <<"wrong">>)) || _ <- lists:seq(1, 2)],
    C = ?C:connect(#{src_ip => ?A1}),
    _ = ?C:open_stream(C),
    ?assertEqual(?TEMP, ?C:auth_scram(C, <<"alice">>, <<"password">>, sha256)),
    C2 = ?C:connect(#{src_ip => ?A2}),
    _ = ?C:open_stream(C2),
    ?assertEqual(ok, ?C:auth_scram(C2, <<"alice">>, <<"password">>, sha256)).

%% With 2 failures per 1-second window, a full bucket drains: attempts are
%% checked again once it has (waited for, not timed), and the janitor's
%% sweep then drops the entries.
buckets_drain_and_entries_expire(_) ->
    [?assertEqual(?NA, attempt(?A1, <<"alice">>, <<"wrong">>)) || _ <- lists:seq(1, 2)],
    ?assertEqual(?TEMP, attempt(?A1, <<"alice">>, <<"password">>)),
    ?assert(ets:info(throng_auth_limits, size) >= 2),   % the address, the account
    throng_ct:wait_until(fun() -> ?L:address_failures(?A1) =:= 0 end, 20000),
    ?assertEqual(ok, attempt(?A1, <<"alice">>, <<"password">>)),
    %% Entries go once empty and the last failure is account_window old.
    throng_ct:wait_until(fun() -> ok = throng_tables:sweep(),
                        ets:info(throng_auth_limits, size) =:= 0 end, 20000).

%% At most max_tracked entries: failures from further addresses share one
%% overflow bucket (so a flood of new addresses cannot grow the table, and
%% is itself limited), while tracked addresses keep their own buckets.
table_is_capped(_) ->
    Overflow0 = throng_metrics:value(auth_limits_overflow),
    Tracked = [{192, 0, 2, N} || N <- lists:seq(1, 5)],
    [1 = ?L:failed(IP, undefined, ?HOST, 'malformed-request') || IP <- Tracked],
    Flood = [{198, 51, 100, N} || N <- lists:seq(1, 200)],
    [?L:failed(IP, <<"u", (integer_to_binary(N))/binary>>, ?HOST, 'not-authorized')
     || {_, _, _, N} = IP <- Flood],
    ?assertEqual(6, ets:info(throng_auth_limits, size)),   % 5 + the overflow bucket
    ?assertEqual(400, throng_metrics:value(auth_limits_overflow) - Overflow0),
    %% Untracked addresses share the overflow bucket, which is full...
    ?assertMatch({refused, _}, ?L:check_address({203, 0, 113, 7})),
    %% ...tracked ones keep their own.
    ?assertEqual(ok, ?L:check_address({192, 0, 2, 1})),
    ?assertEqual(2, ?L:failed({192, 0, 2, 1}, undefined, ?HOST, 'malformed-request')),
    ?assertMatch({refused, 2}, ?L:check_address({192, 0, 2, 1})),
    ?assertEqual(ok, ?L:check_address({192, 0, 2, 2})),
    ?assertEqual(6, ets:info(throng_auth_limits, size)).

%% IPv6 addresses count by their /64; IPv4-mapped ones as IPv4.
ipv6_counted_by_prefix(_) ->
    A = {16#2001, 16#db8, 1, 2, 16#aaaa, 0, 0, 1},
    SameNet = {16#2001, 16#db8, 1, 2, 16#bbbb, 1, 2, 3},
    OtherNet = {16#2001, 16#db8, 1, 3, 16#aaaa, 0, 0, 1},
    1 = ?L:failed(A, undefined, ?HOST, 'not-authorized'),
    2 = ?L:failed(SameNet, undefined, ?HOST, 'not-authorized'),
    ?assertMatch({refused, 2}, ?L:check_address(A)),
    ?assertMatch({refused, 2}, ?L:check_address(SameNet)),
    ?assertEqual(ok, ?L:check_address(OtherNet)),
    1 = ?L:failed({192, 0, 2, 9}, undefined, ?HOST, 'not-authorized'),
    ?assertEqual(2, ?L:failed({0, 0, 0, 0, 0, 16#ffff, 16#c000, 16#0209}, undefined, ?HOST,
                              'not-authorized')),
    ?assertMatch({refused, 2}, ?L:check_address({192, 0, 2, 9})).

%% exempt_loopback: loopback addresses are neither counted nor refused (the
%% default, tested by every other case here, counts them).
loopback_exempt_only_when_configured(_) ->
    [?assertEqual(?NA, attempt(?A1, <<"alice">>, <<"wrong">>)) || _ <- lists:seq(1, 3)],
    ?assertEqual(0, ?L:address_failures(?A1)),
    ?assertEqual(ok, attempt(?A1, <<"alice">>, <<"password">>)),
    1 = ?L:failed({192, 0, 2, 1}, undefined, ?HOST, 'not-authorized'),
    ?assertMatch({refused, 1}, ?L:check_address({192, 0, 2, 1})).
