%% @doc Server-wide hot counters, kept in one `counters' array with
%% write_concurrency: bumping a counter is a few nanoseconds from any process
%% and never a message to a central server. The statistics collector reads them
%% once a second and derives rates.
%%
%% Every counter is monotonic except those of the metrics of kind gauge in
%% {@link metrics/0}, which go up and down (e.g. connections open).
-module(throng_metrics).

-export([init/0, reset_gauges/0, incr/1, add/2, value/1, all/0, names/0, metrics/0]).
-export([stanza_in/1, stanza_out/2, bytes_in/2, check_queue/0, hot_queues/0,
         init_hot_queues/0, clear_hot_queue/1]).
%% Called by throng_table_owner (a table creator named in throng_sup).
-ignore_xref([{init_hot_queues, 0}]).
%% API used by tests and operators: one counter's value.
-ignore_xref([{value, 1}]).

-define(KEY, {?MODULE, counters}).

-type name() :: atom().
-type kind() :: counter | gauge.
-type labels() :: [{atom(), binary()}].
%% One figure of the server: a running total (counter) or a level that goes
%% up and down (gauge), its unit, a one-line help, and the counters that hold
%% it: one, or one per value of a label (stanzas by kind).
-type metric() :: #{name := atom(), kind := kind(), unit := binary(), help := binary(),
                    counters := [{name(), labels()}]}.
-export_type([name/0, kind/0, labels/0, metric/0]).

%% @doc Every counter, declared once: the metrics they make up, in counter
%% index order (append only). The statistics application exports each
%% metric as throng_NAME with this kind, unit and help.
-spec metrics() -> [metric()].
metrics() ->
    [m(connections_accepted, counter, "connections", "TCP connections accepted."),
     m(connections_closed, counter, "connections", "Client connections that ended."),
     m(connections, gauge, "connections", "Client connections open, whatever their stage.",
       [{connections_open, []}]),
     m(accept_errors, counter, "errors", "accept() calls that failed (emfile, ...)."),
     m(tls_established, counter, "handshakes", "TLS handshakes that succeeded (STARTTLS and direct TLS)."),
     m(tls_failed, counter, "handshakes", "TLS handshakes that failed (STARTTLS and direct TLS)."),
     m(logins, counter, "logins", "SASL authentications that succeeded."),
     m(auth_failures, counter, "failures", "SASL authentications that failed."),
     m(sessions_opened, counter, "sessions", "Resources bound."),
     m(sessions_closed, counter, "sessions", "Bound sessions that ended."),
     m(stanzas_in, counter, "stanzas",
       "Stanzas received from clients, by kind (message, presence, iq, other = nonzas).",
       by_kind("stanzas_in_")),
     m(stanzas_out, counter, "stanzas", "Stanzas written to clients, by kind.",
       by_kind("stanzas_out_")),
     m(bytes_received, counter, "bytes", "Bytes read from client sockets (after TLS).",
       [{bytes_in, []}]),
     m(bytes_sent, counter, "bytes", "Bytes written to client sockets (before TLS).",
       [{bytes_out, []}]),
     m(messages_routed, counter, "messages", "Messages delivered to a local session."),
     m(offline_stored, counter, "messages", "Messages written to offline storage."),
     m(offline_delivered, counter, "messages", "Offline messages delivered at login."),
     m(offline_rejected, counter, "messages",
       "Messages refused because the user's offline store was full."),
     m(stream_errors, counter, "errors", "Stream errors sent."),
     m(stanza_errors, counter, "errors", "Stanza errors sent."),
     m(sm_resumed, counter, "sessions", "XEP-0198 resumptions that succeeded."),
     m(sm_redelivered, counter, "stanzas", "Unacknowledged stanzas re-sent on resumption."),
     m(shaper_delays, counter, "pauses", "Times a connection was paused by its shaper."),
     m(registrations, counter, "accounts", "Accounts created."),
     m(stanza_bytes_in, counter, "bytes",
       "Bytes of the stanzas received from clients, by kind (as parsed, after TLS).",
       by_kind("bytes_in_")),
     m(stanza_bytes_out, counter, "bytes",
       "Bytes of the stanzas written to clients, by kind (serialized, before TLS).",
       by_kind("bytes_out_")),
     m(auth_rate_limited, counter, "attempts",
       "SASL attempts refused without a password check: too many failures from the "
       "address or for the account (auth.address_failures, auth.account_failures)."),
     m(auth_limits_overflow, counter, "failures",
       "Authentication failures not tracked on their own because the failure table was "
       "full (auth.max_tracked): counted in the shared overflow bucket."),
     m(slow_readers_closed, counter, "connections",
       "Connections closed because more than max_queued_stanzas or max_queued_bytes "
       "waited for a client that reads too slowly."),
     m(csi_held, counter, "stanzas",
       "Stanzas held back for inactive clients (XEP-0352): presence updates and "
       "bodyless messages."),
     m(csi_dropped, counter, "stanzas",
       "Held presence updates replaced by a newer one from the same JID before the "
       "client became active: never written."),
     m(csi_flushes, counter, "flushes",
       "Writes of what was held for an inactive client (it became active, an urgent "
       "stanza came, or the queue was full)."),
     m(send_timeouts_closed, counter, "connections",
       "Connections closed because a write to the client did not finish within the "
       "listener's send_timeout."),
     m(listener_full, counter, "times",
       "Times a listener with when_full: stop_listening closed its socket at "
       "max_connections."),
     m(redirected_home, counter, "logins",
       "Clients sent to their account's home node (see-other-host, listeners with "
       "redirect_to_home) once they named the account in SASL."),
     m(directory_unreachable, counter, "lookups",
       "Session-directory requests a cluster member did not answer (only this node's "
       "own sessions were used)."),
     m(handoff_routed_again, counter, "stanzas",
       "Stanzas handed to their users' home node and routed again from this node: the "
       "home went down, or did not confirm them within 30 s."),
     m(cluster_sessions_dropped, counter, "sessions",
       "Sessions of members that went down, dropped from this node's part of the "
       "directory (their contacts were sent unavailable presence)."),
     m(presence_deferred, counter, "presences",
       "Unavailable presence kept for later: the store could not read the user's roster "
       "to find its subscribers."),
     m(presence_deferred_sent, counter, "presences",
       "Kept unavailable presence sent to the subscribers once the roster was read."),
     m(presence_deferred_skipped, counter, "presences",
       "Kept unavailable presence dropped because its resource was available again."),
     m(presence_deferred_dropped, counter, "presences",
       "Unavailable presence not kept (100,000 were waiting already), or dropped "
       "because sending it failed otherwise than on the store (logged)."),
     m(presence_deferred_handed, counter, "presences",
       "Kept unavailable presence handed to another cluster member (this node stopped "
       "or left the cluster)."),
     m(presence_deferred_adopted, counter, "presences",
       "Kept unavailable presence taken from a cluster member: handed over when it stopped "
       "or left, or the copies held here of what it kept when it was killed or its process "
       "went."),
     m(presence_deferred_waiting, gauge, "presences",
       "Unavailable presence kept on this node now, waiting for the store to read the "
       "rosters."),
     m(presence_deferred_copies, gauge, "presences",
       "Copies held on this node now of the unavailable presence other cluster members "
       "keep (sent from here if such a member dies).")].

m(Name, Kind, Unit, Help) ->
    m(Name, Kind, Unit, Help, [{Name, []}]).

m(Name, Kind, Unit, Help, Counters) ->
    #{name => Name, kind => Kind, unit => list_to_binary(Unit), help => list_to_binary(Help),
      counters => Counters}.

%% The counters PREFIX_message, _presence, _iq and _other, labelled by kind.
by_kind(Prefix) ->
    [{list_to_atom(Prefix ++ K), [{kind, list_to_binary(K)}]}
     || K <- ["message", "presence", "iq", "other"]].


%% @doc Creates the counters; called once at application start.
-spec init() -> ok.
init() ->
    case persistent_term:get(?KEY, undefined) of
        undefined ->
            Names = names(),
            Ref = counters:new(length(Names), [write_concurrency]),
            Index = maps:from_list(lists:zip(Names, lists:seq(1, length(Names)))),
            persistent_term:put(?KEY, {Ref, Index});
        _ ->
            ok
    end,
    ok.

%% @doc Sets the gauges (what goes up and down: connections open) to zero,
%% at application start.
-spec reset_gauges() -> ok.
reset_gauges() ->
    [add(C, -value(C)) || #{kind := gauge, counters := Cs} <- metrics(), {C, _} <- Cs],
    ok.

-spec incr(name()) -> ok.
incr(Name) ->
    add(Name, 1).

-spec add(name(), integer()) -> ok.
add(Name, N) ->
    {Ref, Index} = persistent_term:get(?KEY),
    counters:add(Ref, maps:get(Name, Index), N).

-spec value(name()) -> integer().
value(Name) ->
    {Ref, Index} = persistent_term:get(?KEY),
    counters:get(Ref, maps:get(Name, Index)).

%% @doc Every counter and its current value.
-spec all() -> #{name() => integer()}.
all() ->
    {Ref, Index} = persistent_term:get(?KEY),
    maps:map(fun(_Name, I) -> counters:get(Ref, I) end, Index).

%% @doc Every counter, in index order.
-spec names() -> [name()].
names() ->
    [C || #{counters := Cs} <- metrics(), {C, _} <- Cs].

-spec stanza_in(binary()) -> ok.
stanza_in(<<"message">>) -> incr(stanzas_in_message);
stanza_in(<<"presence">>) -> incr(stanzas_in_presence);
stanza_in(<<"iq">>) -> incr(stanzas_in_iq);
stanza_in(_) -> incr(stanzas_in_other).

%% @doc A stanza of a kind was written to a client (Bytes: its serialized form).
-spec stanza_out(message | presence | iq | other, iodata()) -> ok.
stanza_out(Kind, Bytes) ->
    {Count, Size} = case Kind of
                        message -> {stanzas_out_message, bytes_out_message};
                        presence -> {stanzas_out_presence, bytes_out_presence};
                        iq -> {stanzas_out_iq, bytes_out_iq};
                        other -> {stanzas_out_other, bytes_out_other}
                    end,
    incr(Count),
    add(Size, iolist_size(Bytes)).

%% @doc Bytes of a stanza received from a client, by its element name.
-spec bytes_in(binary(), non_neg_integer()) -> ok.
bytes_in(<<"message">>, N) -> add(bytes_in_message, N);
bytes_in(<<"presence">>, N) -> add(bytes_in_presence, N);
bytes_in(<<"iq">>, N) -> add(bytes_in_iq, N);
bytes_in(_, N) -> add(bytes_in_other, N).

%%% Message-queue watch. A connection process checks its own queue length
%%% after each event it handles (one cheap BIF on its own process); only a
%%% process whose queue passed stats.queue_alarm writes a row here. The
%%% statistics collector reads the table each second, re-checks those
%%% processes and clears the rows of queues that drained: no scan of every
%%% process, whatever their number.

-define(HOT, throng_hot_queues).

%% @doc Creates the table of long queues (owned by the calling process).
-spec init_hot_queues() -> ok.
init_hot_queues() ->
    ?HOT = ets:new(?HOT, [set, public, named_table, {write_concurrency, true}]),
    ok.

%% @doc Records the calling process if its message queue is long.
-spec check_queue() -> ok.
check_queue() ->
    {message_queue_len, Len} = process_info(self(), message_queue_len),
    case Len > persistent_term:get({?MODULE, queue_alarm}, 10000) of
        true -> ets:insert(?HOT, {self(), Len, erlang:system_time(millisecond)}), ok;
        false -> ok
    end.

%% @doc Processes seen with a long queue: {Pid, Length, When (ms)}.
-spec hot_queues() -> [{pid(), non_neg_integer(), integer()}].
hot_queues() ->
    ets:tab2list(?HOT).

%% @doc Removes the row of a queue seen to have drained (or of a process
%% that died): exactly that row, so a newer report of the same process stays.
-spec clear_hot_queue({pid(), non_neg_integer(), integer()}) -> ok.
clear_hot_queue(Row) ->
    true = ets:delete_object(?HOT, Row),
    ok.
