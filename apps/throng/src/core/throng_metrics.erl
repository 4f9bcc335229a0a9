%% @doc Server-wide hot counters, kept in one `counters' array with
%% write_concurrency: bumping a counter is a few nanoseconds from any process
%% and never a message to a central server. The statistics collector reads them
%% once a second and derives rates.
%%
%% Every counter is monotonic except those named in {@link gauges/0}, which go
%% up and down (e.g. connections open).
-module(throng_metrics).

-export([init/0, incr/1, add/2, value/1, all/0, names/0, gauges/0]).
-export([stanza_in/1, stanza_out/2, bytes_in/2, check_queue/0, hot_queues/0,
         init_hot_queues/0]).

-define(KEY, {?MODULE, counters}).

%% The order is the counter index; append only.
-define(NAMES,
        [connections_accepted,     %% TCP connections accepted on c2s listeners
         connections_closed,       %% c2s connections that ended, for any reason
         connections_open,         %% gauge: c2s connections open now
         accept_errors,            %% accept() calls that failed (emfile, ...)
         tls_established,          %% STARTTLS handshakes that succeeded
         tls_failed,               %% STARTTLS handshakes that failed
         logins,                   %% SASL successes
         auth_failures,            %% SASL failures
         sessions_opened,          %% resources bound
         sessions_closed,          %% bound sessions that ended
         stanzas_in_message,       %% stanzas received from clients, by kind
         stanzas_in_presence,
         stanzas_in_iq,
         stanzas_in_other,         %% nonzas (sm acks, ...) received
         stanzas_out_message,      %% stanzas written to clients, by kind
         stanzas_out_presence,
         stanzas_out_iq,
         stanzas_out_other,
         bytes_in,                 %% bytes read from client sockets (after TLS)
         bytes_out,                %% bytes written to client sockets (before TLS)
         messages_routed,          %% message stanzas routed to a local session
         offline_stored,           %% messages written to offline storage
         offline_delivered,        %% offline messages delivered at login
         offline_rejected,         %% messages refused because a user's offline store was full
         stream_errors,            %% stream errors sent
         stanza_errors,            %% stanza errors sent
         sm_resumed,               %% XEP-0198 resumptions that succeeded
         sm_redelivered,           %% unacknowledged stanzas re-sent on resumption
         shaper_delays,            %% times a connection was paused by its traffic shaper
         registrations,            %% accounts created (in-band or admin)
         bytes_in_message,         %% stanza bytes from clients, by kind
         bytes_in_presence,
         bytes_in_iq,
         bytes_in_other,
         bytes_out_message,        %% stanza bytes to clients, by kind
         bytes_out_presence,
         bytes_out_iq,
         bytes_out_other]).

-type name() :: atom().
-export_type([name/0]).

%% @doc Creates the counters; called once at application start.
-spec init() -> ok.
init() ->
    case persistent_term:get(?KEY, undefined) of
        undefined ->
            Ref = counters:new(length(?NAMES), [write_concurrency]),
            Index = maps:from_list(lists:zip(?NAMES, lists:seq(1, length(?NAMES)))),
            persistent_term:put(?KEY, {Ref, Index});
        _ ->
            ok
    end,
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

-spec names() -> [name()].
names() ->
    ?NAMES.

%% @doc The counters that are levels rather than running totals.
-spec gauges() -> [name()].
gauges() ->
    [connections_open].

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
