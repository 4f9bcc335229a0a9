%% @doc The output side of a client connection and its socket discipline:
%% output gathered during an event and written once, stream errors, the
%% {active, N} re-arming, pauses, and the traffic shaper (a token bucket per
%% connection: when it is empty the socket is not re-armed until it has
%% refilled, so the client is slowed down by TCP flow control and nothing is
%% dropped). Listener options of the connection are read here.
-module(throng_c2s_io).

-include("throng.hrl").
-include("throng_c2s.hrl").

-export([opts/1, lopt/2, new_parser/1, shaper_action/1, activate/1, session_reads/1, pause/1, unpause/2, shaper_burst/1, shape/2, header_error/4, emit/2, flush/1, send_now/2, stream_error/3, jid_text/1,
         backlog/1, forget_backlog/0, backlog/3, measure_bytes/4, last_backlog/0]).
%% backlog/1's parts, exported for its tests.
-ignore_xref([{backlog, 3}, {measure_bytes, 4}, {last_backlog, 0}]).

%% A session's mailbox is counted in bytes after every event while it holds
%% at most ?BYTES_ALWAYS stanzas; past that, at the first event
%% ?BYTES_EVERY_MS ms after the last count (or sooner, see measure_bytes/4).
%% When and what was last counted is kept in the process dictionary under
%% ?BACKLOG_KEY only while more than ?BYTES_ALWAYS stanzas wait.
-define(BYTES_ALWAYS, 32).
-define(BYTES_EVERY_MS, 1000).
-define(BACKLOG_KEY, throng_c2s_backlog).

-type last_count() :: {When :: integer(), Stanzas :: pos_integer(), Bytes :: non_neg_integer()}.

-spec opts(throng_listener:ref()) -> throng_listener:info().
opts(LRef) -> throng_listener:info(LRef).

-spec lopt(throng_listener:ref(), atom()) -> term().
lopt(LRef, Key) ->
    #{opts := #{Key := V}} = opts(LRef),
    V.

-spec new_parser(throng_listener:ref()) -> throng_xml_stream:state().
new_parser(LRef) ->
    #{opts := #{max_stanza_size := Max, max_depth := Depth}} = opts(LRef),
    throng_xml_stream:new(#{max_stanza_size => Max, max_depth => Depth, sizes => true}).

-spec shaper_action(data()) -> [gen_statem:action()].
shaper_action(#d{paused = true, tokens = T, lref = LRef}) when T < 0 ->
    Rate = lopt(LRef, shaper_rate),
    [{{timeout, shaper}, max(1, (-T * 1000) div Rate), resume}];
shaper_action(_) ->
    [].

%% The socket runs in {active, N} mode: the driver delivers up to N reads as
%% messages, then {tcp_passive, Port}, and the socket is re-armed. A pause
%% (traffic shaper, authentication-failure delay) turns reading off until it
%% ends; the client is then slowed down by TCP flow control.
-spec activate(data()) -> ok | {error, term()}.
activate(D) ->
    throng_transport:activate(D#d.sock, lopt(D#d.lref, active_n)).

%% Until its session opens a connection reads login_recv_buffer bytes at a
%% time (the listen socket's size, which accepted sockets take): a TLS
%% ClientHello or a SASL2 <authenticate/> in one read. Then recv_buffer:
%% what at most waits, active_n reads of it, in a busy session's mailbox.
-spec session_reads(data()) -> ok.
session_reads(#d{sock = undefined}) ->
    ok;
session_reads(#d{sock = Sock, lref = LRef}) ->
    case opts(LRef) of
        #{opts := #{recv_buffer := Same, login_recv_buffer := Same}} ->
            ok;
        #{opts := #{recv_buffer := Size}} ->
            _ = throng_transport:read_size(Sock, Size),
            ok
    end.

-spec pause(data()) -> data().
pause(#d{paused = true} = D) -> D;
pause(#d{sock = undefined} = D) -> D#d{paused = true};
pause(D) ->
    _ = throng_transport:pause(D#d.sock),
    D#d{paused = true}.

-spec unpause(atom(), data()) -> data().
unpause(_State, #d{paused = false} = D) -> D;
unpause(State, #d{sock = Sock} = D) when Sock =:= undefined; State =:= resumable ->
    D#d{paused = false};
unpause(_State, D) ->
    _ = activate(D),
    D#d{paused = false}.

%%% The traffic shaper: a token bucket per connection. When the bucket is
%%% empty the socket is not re-armed until it has refilled: the client is
%%% slowed down by TCP flow control and nothing is dropped.

-spec shaper_burst(throng_listener:ref()) -> pos_integer().
shaper_burst(LRef) -> lopt(LRef, shaper_burst).

-spec shape(non_neg_integer(), data()) -> data().
shape(Size, #d{lref = LRef, tokens = T0, tstamp = Last} = D) ->
    case lopt(LRef, shaper_rate) of
        infinity -> D;
        Rate ->
            Now = erlang:monotonic_time(millisecond),
            T = min(shaper_burst(LRef), T0 + (Now - Last) * Rate div 1000) - Size,
            case T < 0 of
                true ->
                    throng_metrics:incr(shaper_delays),
                    pause(D#d{tokens = T, tstamp = Now});
                false ->
                    D#d{tokens = T, tstamp = Now}
            end
    end.

-spec header_error(atom(), binary(), binary(), data()) -> {stop, {shutdown, stream_error}, data()}.
header_error(Cond, Text, Id, D) ->
    Server = case D#d.server of
                 <<>> -> hd(throng_config:get([hosts]));
                 S -> S
             end,
    stream_error(Cond, Text, emit(throng_stream:header(Id, Server), D)).

%%% Output

-spec emit(iodata(), data()) -> data().
emit(Bytes, #d{out = Out} = D) ->
    D#d{out = [Out | Bytes]}.

-spec flush(data()) -> {ok, data()} | {error, term()}.
flush(#d{out = []} = D) ->
    {ok, D};
flush(#d{out = Out, sock = Sock} = D) ->
    throng_metrics:add(bytes_out, iolist_size(Out)),
    case throng_transport:send(Sock, Out) of
        ok -> {ok, D#d{out = []}};
        {error, _} = E -> E
    end.

%% @doc What waits for this client in the session's mailbox: the stanzas
%% routed to it and not yet taken, and their bytes (the process's memory
%% beyond its heap: the mailbox is kept off the heap). Binaries larger than
%% 64 bytes (message bodies) are shared with their sender, not copied, and
%% not in that count: the stanza count bounds them. The socket's own queue
%% needs no bound here: a write blocks while it holds more than the inet
%% driver's high watermark, so it never holds more than that and one write.
%% {0, 0} without looking further when the mailbox is empty (the cheap,
%% usual case).
%%
%% The stanzas are counted at every call. Counting the bytes walks the
%% whole mailbox, so it costs its length: a session that fell behind and
%% counted them at every event spent time growing with the square of its
%% backlog, and fell further behind (6.5-8.7% of the server's CPU samples
%% at 2,000 chatting users, where sessions hold ~100 messages and have a
%% few events a second). So past ?BYTES_ALWAYS stanzas the bytes are
%% counted (`unmeasured' at the other calls) at the first call
%% ?BYTES_EVERY_MS ms after the last count, or sooner: when the mailbox
%% has twice the stanzas of the last count, or when its stanzas at the
%% bytes per stanza of the last count would pass MaxBytes: about one walk
%% a second while the backlog is steady and clear of MaxBytes, and one per
%% doubling while it grows. (Every 100 ms was tried first: those sessions'
%% events are farther apart than that, and it left 5.1-5.6% of the
%% samples there; once a second, 2.9-3.4%.) A session whose events come
%% more than ?BYTES_EVERY_MS ms apart (one stuck writing to a slow reader)
%% is counted at every event, as before. So between two counts the mailbox
%% holds fewer than twice the stanzas of the first and, at its bytes per
%% stanza, less than MaxBytes: it passes MaxBytes unseen only with stanzas
%% larger than those counted, and then until the first event
%% ?BYTES_EVERY_MS ms after the last count. Like the stanzas, the bytes are
%% counted between events only, with or without this rule: what comes
%% while a write blocks is seen after it (queues_SUITE's slow reader is cut
%% off with 0.5 to 1.6 MB queued against a bound of 64 KB, with a count at
%% every event as with this rule).
-spec backlog(pos_integer()) -> {Stanzas :: non_neg_integer(), Bytes :: non_neg_integer() | unmeasured}.
backlog(MaxBytes) ->
    case process_info(self(), message_queue_len) of
        {message_queue_len, 0} ->
            forget_backlog(),
            {0, 0};
        {message_queue_len, Len} when Len =< ?BYTES_ALWAYS ->
            forget_backlog(),
            {Len, mailbox_bytes()};
        {message_queue_len, Len} ->
            backlog(Len, MaxBytes, erlang:monotonic_time(millisecond))
    end.

%% @doc backlog/1 past ?BYTES_ALWAYS stanzas: Len of them at Now
%% (monotonic milliseconds).
-spec backlog(pos_integer(), pos_integer(), integer()) ->
          {pos_integer(), non_neg_integer() | unmeasured}.
backlog(Len, MaxBytes, Now) ->
    case measure_bytes(Len, Now, get(?BACKLOG_KEY), MaxBytes) of
        true ->
            Bytes = mailbox_bytes(),
            put(?BACKLOG_KEY, {Now, Len, Bytes}),
            {Len, Bytes};
        false ->
            {Len, unmeasured}
    end.

%% @doc Whether the bytes of a mailbox of Len stanzas are counted at Now,
%% Last being the last count while this backlog lasts: always up to
%% ?BYTES_ALWAYS stanzas, and when there is no last count; then when
%% ?BYTES_EVERY_MS ms have passed since it, when Len is twice its stanzas
%% or more, or when Len stanzas of its bytes per stanza would be more than
%% MaxBytes (an estimate that is high while they are no larger: the count
%% includes the process's own overhead).
-spec measure_bytes(pos_integer(), integer(), last_count() | undefined, pos_integer()) -> boolean().
measure_bytes(Len, _Now, _Last, _MaxBytes) when Len =< ?BYTES_ALWAYS -> true;
measure_bytes(_Len, _Now, undefined, _MaxBytes) -> true;
measure_bytes(Len, Now, {When, LastLen, LastBytes}, MaxBytes) ->
    Now - When >= ?BYTES_EVERY_MS orelse Len >= 2 * LastLen
        orelse LastBytes * Len > MaxBytes * LastLen.

%% @doc The last count of this session's backlog (see backlog/1), if it
%% has one.
-spec last_backlog() -> last_count() | undefined.
last_backlog() -> get(?BACKLOG_KEY).

%% @doc Drops what backlog/1 keeps while a backlog lasts (at its end, or
%% when the session stops being bounded: the connection dropped).
-spec forget_backlog() -> ok.
forget_backlog() ->
    _ = erase(?BACKLOG_KEY),
    ok.

mailbox_bytes() ->
    [{memory, Mem}, {total_heap_size, Heap}] = process_info(self(), [memory, total_heap_size]),
    max(0, Mem - Heap * erlang:system_info(wordsize)).

-spec send_now(data(), iodata()) -> ok.
send_now(#d{sock = undefined}, _Bytes) -> ok;
send_now(D, Bytes) ->
    case flush(emit(Bytes, D)) of
        {ok, _} -> ok;
        {error, _} -> ok
    end.

%% Sends a stream error and ends the connection (RFC 6120 §4.9).
%% The connection then ends with {shutdown, stream_error}: its socket is
%% closed without losing the error to a reset
%% ({@link throng_transport:close_after_error/1}).
-spec stream_error(atom() | {'see-other-host', binary()}, binary(), data()) ->
          {stop, {shutdown, stream_error}, data()}.
stream_error(Cond, Text, D) ->
    throng_metrics:incr(stream_errors),
    logger:info(#{what => stream_error, condition => Cond, text => Text, ip => D#d.ip,
                  jid => jid_text(D)}),
    _ = send_now(D, [throng_stream:error(Cond, Text), throng_stream:close()]),
    {stop, {shutdown, stream_error}, D#d{out = []}}.

-spec jid_text(data()) -> binary() | undefined.
jid_text(#d{jid = undefined, user = undefined}) -> undefined;
jid_text(#d{jid = undefined, user = U, server = S}) -> <<U/binary, "@", S/binary>>;
jid_text(#d{jid = J}) -> throng_jid:to_binary(J).
