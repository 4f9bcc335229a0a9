%% @doc Per-VM hot counters and latency histograms.
%%
%% Every load-generating VM (the controller when it runs users itself, and
%% each worker VM) holds one array of named counters (`counter_names/0',
%% throng_lib's throng_counters) and one histogram per timed
%% transaction, created by {@link init/0} and found through persistent_term.
%% Simulated users and connection processes bump them directly; nothing sends
%% a message per event. One collector per run reads {@link snapshot/0} of
%% every VM once a second and works out rates from the differences.
%%
%% An xmpp run against several targets (the nodes of a cluster) also keeps
%% a few counters per target ({@link target_names/0}), in a second array of
%% K x names slots made by {@link init_targets/1}; the snapshot lists them in
%% target order.
-module(throng_bench_metrics).

-export([init/0, inc/1, add/2, sub/2, observe/2, count_error/1,
         snapshot/0, vm_memory/0, empty_snapshot/0, merge/2, hist_names/0,
         error_types/0, now_us/0,
         init_targets/1, target_inc/2, target_sub/2, target_names/0]).
%% API used by tests: the names of the per-target counters.
-ignore_xref([{target_names, 0}]).

-export_type([counter/0, hist_name/0, error_type/0, snapshot/0, target_counter/0]).

-type counter() :: users_launched | users_connected | users_logged_in | users_finished
                 | users_failed | conns_open | sessions | connects | redirects | logins | logins_fast
                 | tls_resumed
                 | stanzas_in | stanzas_out | bytes_in | bytes_out | reads_in
                 | msgs_sent | msgs_received | msgs_bounced | msgs_unsent | msgs_sent_cross
                 | msgs_stale | muc_joined | muc_join_errors | muc_sent | muc_received
                 | requests | responses | bad_status
                 | err_econnrefused | err_econnreset | err_closed | err_timeout
                 | err_auth_failure | err_stream_error | err_ports | err_other.
-type hist_name() :: connect | tls | register | auth | bind | roster | presence | login
                   | delivery | delivery_same | delivery_cross | delivery_muc | response.
-type target_counter() :: launched | logins | sessions | failed | msgs_sent_to | msgs_received.
-type error_type() :: econnrefused | econnreset | closed | timeout | auth_failure
                    | stream_error | ports | other.
-type snapshot() :: #{counters := #{counter() => integer()},
                      hists := #{hist_name() => throng_hist:snapshot()},
                      other_reasons := #{binary() => non_neg_integer()},
                      memory := non_neg_integer(),
                      vms := non_neg_integer(),
                      targets := [#{target_counter() => integer()}]}.

-define(KEY, {?MODULE, counters}).
-define(TARGETS, {?MODULE, targets}).
-define(REASONS, throng_bench_other_reasons).
-define(MAX_REASONS, 20).

%% @doc The counters, declared once (their order is their slot's).
-spec counter_names() -> [counter()].
counter_names() ->
    [users_launched, users_connected, users_logged_in, users_finished, users_failed,
     conns_open, sessions, connects, redirects, logins, logins_fast, tls_resumed,
     stanzas_in, stanzas_out, bytes_in, bytes_out, reads_in,
     msgs_sent, msgs_received, msgs_bounced, msgs_unsent, msgs_sent_cross, msgs_stale,
     muc_joined, muc_join_errors, muc_sent, muc_received,
     requests, responses, bad_status,
     err_econnrefused, err_econnreset, err_closed, err_timeout,
     err_auth_failure, err_stream_error, err_ports, err_other].

-spec hist_names() -> [hist_name()].
hist_names() ->
    [connect, tls, register, auth, bind, roster, presence, login, delivery, delivery_same,
     delivery_cross, delivery_muc, response].

%% @doc The counters kept per target: users launched towards it, their
%% logins, sessions now, users failed (each error ends one user), chat
%% messages sent to its users, and received by them.
-spec target_names() -> [target_counter()].
target_names() ->
    [launched, logins, sessions, failed, msgs_sent_to, msgs_received].

-spec error_types() -> [error_type()].
error_types() ->
    [econnrefused, econnreset, closed, timeout, auth_failure, stream_error, ports, other].

%% @doc Create (first call in a VM) or zero (later calls) this VM's metrics.
-spec init() -> ok.
init() ->
    case persistent_term:get(?KEY, undefined) of
        undefined ->
            C = throng_counters:new(counter_names(), [write_concurrency]),
            persistent_term:put(?KEY, C),
            [persistent_term:put({?MODULE, H}, throng_hist:new()) || H <- hist_names()],
            ok;
        C ->
            ok = throng_counters:reset(C),
            [throng_hist:reset(persistent_term:get({?MODULE, H})) || H <- hist_names()],
            ok
    end,
    init_targets(0),
    case ets:whereis(?REASONS) of
        undefined ->
            %% Owned by a process that lives as long as the VM's code does.
            Self = self(),
            Pid = spawn(fun() ->
                                _ = ets:new(?REASONS, [named_table, public, set]),
                                Self ! {self(), ready},
                                receive stop -> ok end
                        end),
            receive {Pid, ready} -> ok end;
        _ -> ets:delete_all_objects(?REASONS)
    end,
    ok.

%% @doc Per-target counters for K targets, all 0 (0: none, as for an http
%% run). Called once per job, before its first user.
-spec init_targets(non_neg_integer()) -> ok.
init_targets(K) ->
    M = length(target_names()),
    New = case K of
              0 -> none;
              _ -> {K, counters:new(K * M, [write_concurrency]),
                    maps:from_list(lists:zip(target_names(), lists:seq(1, M)))}
          end,
    case persistent_term:get(?TARGETS, undefined) of
        New -> ok;
        _ -> persistent_term:put(?TARGETS, New)
    end.

%% @doc Add one to a counter of target T (0-based).
-spec target_inc(target_counter(), non_neg_integer()) -> ok.
target_inc(Name, T) -> target_add(Name, T, 1).

-spec target_sub(target_counter(), non_neg_integer()) -> ok.
target_sub(Name, T) -> target_add(Name, T, -1).

target_add(Name, T, N) ->
    {_K, Ref, Index} = persistent_term:get(?TARGETS),
    counters:add(Ref, T * map_size(Index) + maps:get(Name, Index), N).

target_snapshot() ->
    case persistent_term:get(?TARGETS, none) of
        none -> [];
        {K, Ref, Index} ->
            M = map_size(Index),
            [maps:map(fun(_, I) -> counters:get(Ref, T * M + I) end, Index)
             || T <- lists:seq(0, K - 1)]
    end.

-spec inc(counter()) -> ok.
inc(Name) -> throng_counters:add(persistent_term:get(?KEY), Name, 1).

-spec add(counter(), integer()) -> ok.
add(Name, N) -> throng_counters:add(persistent_term:get(?KEY), Name, N).

-spec sub(counter(), integer()) -> ok.
sub(Name, N) -> throng_counters:sub(persistent_term:get(?KEY), Name, N).

%% @doc Record a duration in microseconds in a histogram.
-spec observe(hist_name(), integer()) -> ok.
observe(Name, Us) -> throng_hist:record(persistent_term:get({?MODULE, Name}), Us).

%% @doc Count one error, classifying an arbitrary reason.
-spec count_error(term()) -> error_type().
count_error(Reason) ->
    Type = classify(Reason),
    count_error(Type, Reason).

%% @doc Count one error of a known type; `Reason' is remembered (up to 20
%% distinct ones per VM) when the type is `other'.
-spec count_error(error_type(), term()) -> error_type().
count_error(Type, Reason) ->
    inc(err_ix(Type)),
    case Type of
        other -> note_reason(Reason);
        _ -> ok
    end,
    Type.

note_reason(Reason) ->
    Key = iolist_to_binary(io_lib:format("~0tP", [Reason, 8])),
    try
        case ets:info(?REASONS, size) < ?MAX_REASONS orelse ets:member(?REASONS, Key) of
            true -> _ = ets:update_counter(?REASONS, Key, 1, {Key, 0}), ok;
            false -> ok
        end
    catch error:badarg -> ok
    end.

%% @doc Map a socket or protocol failure to an error type.
-spec classify(term()) -> error_type().
classify(econnrefused) -> econnrefused;
classify(econnreset) -> econnreset;
classify(epipe) -> econnreset;
classify(closed) -> closed;
classify(timeout) -> timeout;
classify(etimedout) -> timeout;
classify({timeout, _Step}) -> timeout;
classify(auth_failure) -> auth_failure;
classify({auth_failure, _}) -> auth_failure;
classify({stream_error, _}) -> stream_error;
classify(stream_error) -> stream_error;
%% no local port left for the connect (the source address's ephemeral
%% range is used up, or its sockets wait in TIME_WAIT)
classify(eaddrnotavail) -> ports;
classify(eaddrinuse) -> ports;
classify({tls, _}) -> other;
classify({error, R}) -> classify(R);
classify(_) -> other.

%% @doc This VM's counters and histograms, now.
-spec snapshot() -> snapshot().
snapshot() ->
    Counters = throng_counters:to_map(persistent_term:get(?KEY)),
    Hists = maps:from_list([{H, throng_hist:snapshot(persistent_term:get({?MODULE, H}))}
                            || H <- hist_names()]),
    Reasons = try maps:from_list(ets:tab2list(?REASONS)) catch error:badarg -> #{} end,
    #{counters => Counters, hists => Hists, other_reasons => Reasons,
      memory => vm_memory(), vms => 1, targets => target_snapshot()}.

%% @doc The VM's memory (erlang:memory(total)) without the calling process:
%% when the collector runs in the same VM as the users, its own heap (the
%% time series it keeps) is not load-generator cost per user.
-spec vm_memory() -> non_neg_integer().
vm_memory() ->
    {memory, Own} = erlang:process_info(self(), memory),
    erlang:memory(total) - Own.

%% @doc The snapshot of no VM at all (the unit of merge/2).
-spec empty_snapshot() -> snapshot().
empty_snapshot() ->
    #{counters => maps:from_list([{N, 0} || N <- counter_names()]),
      hists => maps:from_list([{H, throng_hist:empty()} || H <- hist_names()]),
      other_reasons => #{}, memory => 0, vms => 0, targets => []}.

%% @doc Add up the snapshots of two VMs.
-spec merge(snapshot(), snapshot()) -> snapshot().
merge(S1 = #{counters := C1, hists := H1, other_reasons := R1, memory := M1, vms := V1},
      S2 = #{counters := C2, hists := H2, other_reasons := R2, memory := M2, vms := V2}) ->
    #{counters => add_maps(C1, C2),
      hists => maps:map(fun(K, V) -> throng_hist:merge(V, maps:get(K, H2)) end, H1),
      other_reasons => maps:fold(fun(K, V, Acc) -> Acc#{K => V + maps:get(K, Acc, 0)} end, R1, R2),
      memory => M1 + M2, vms => V1 + V2,
      targets => merge_targets(maps:get(targets, S1, []), maps:get(targets, S2, []))}.

%% Target by target; a VM that knows fewer targets (none: it has not
%% started its job yet) adds nothing to the others.
merge_targets([A | As], [B | Bs]) -> [add_maps(A, B) | merge_targets(As, Bs)];
merge_targets([], Bs) -> Bs;
merge_targets(As, []) -> As.

add_maps(A, B) -> maps:map(fun(K, V) -> V + maps:get(K, B, 0) end, A).

%% @doc Wall-clock microseconds (the same clock on every VM of one host).
-spec now_us() -> integer().
now_us() -> erlang:system_time(microsecond).

%% internal

err_ix(econnrefused) -> err_econnrefused;
err_ix(econnreset) -> err_econnreset;
err_ix(closed) -> err_closed;
err_ix(timeout) -> err_timeout;
err_ix(auth_failure) -> err_auth_failure;
err_ix(stream_error) -> err_stream_error;
err_ix(ports) -> err_ports;
err_ix(other) -> err_other.
