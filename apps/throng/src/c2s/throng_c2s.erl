%% @doc One client connection: a gen_statem that owns the socket, parses the
%% stream, negotiates TLS, SASL and resource binding, and then is the
%% session: it handles the client's stanzas and delivers stanzas routed to
%% it. It is the only process of the connection and hibernates when idle.
%%
%% States (where the stream is):
%% <dl>
%% <dt>wait_header</dt><dd>expecting a stream header (at connect and after
%%   every stream restart)</dd>
%% <dt>negotiating</dt><dd>features sent before authentication: STARTTLS,
%%   SASL, in-band registration</dd>
%% <dt>sasl</dt><dd>in a multi-step SASL exchange</dd>
%% <dt>wait_bind</dt><dd>authenticated; expecting resource binding or a
%%   XEP-0198 resumption</dd>
%% <dt>session</dt><dd>bound: the client's stanzas are routed</dd>
%% <dt>resumable</dt><dd>the connection dropped, the session waits for a
%%   XEP-0198 resumption (stanzas for it are queued)</dd>
%% </dl>
%%
%% Everything the connection writes during one event is gathered and sent
%% with one write; routed stanzas already waiting in the mailbox are taken
%% in the same write.
%%
%% This module is the state machine; the work is in throng_c2s_io (output,
%% stream errors, re-arming, the shaper), throng_c2s_auth (STARTTLS, SASL),
%% throng_c2s_stanza (the session's stanzas both ways) and throng_c2s_sm
%% (XEP-0198). Features are extension modules reached through hooks
%% ({@link throng_hooks}); other processes talk to a session only through
%% {@link throng_session}.
-module(throng_c2s).
-behaviour(gen_statem).

-include("throng.hrl").
-include("throng_c2s.hrl").

-export([start_link/1, init/1]).
-export([callback_mode/0, handle_event/4, terminate/3, code_change/4]).
%% Called by throng_conns_sup: the listener's protocol module starts a connection.
-ignore_xref([{start_link, 1}]).

%% What an element handler returns: {next, State, D}, with gen_statem
%% actions, {restart, State, D} (a stream restart: the elements already
%% parsed from the old stream are dropped), {handover, Target, D} (a
%% resumed session takes the connection, with the elements that follow:
%% {@link throng_c2s_sm:target()}), or a stop.
-type element_result() :: {next, atom(), data()} | {next, atom(), data(), [gen_statem:action()]}
                        | {restart, atom(), data()} | {handover, throng_c2s_sm:target(), data()}
                        | {stop, term(), data()}.
-export_type([element_result/0]).

%% A state is where the stream is (see the module doc); {handover, Target,
%% Elements} only between a successful <resume/> and the end of the data it
%% came in, while the elements that follow it are gathered for the session
%% that takes the connection over.
-type state() :: atom() | {handover, throng_c2s_sm:target(), list()}.

%%% Start

%% @doc Started by a connection supervisor; waits for the socket.
-spec start_link(throng_listener:ref()) -> pid().
start_link(LRef) ->
    proc_lib:spawn_link(?MODULE, init, [LRef]).

-spec init(throng_listener:ref()) -> no_return().
init(LRef) ->
    process_flag(trap_exit, true),
    process_flag(message_queue_data, off_heap),
    receive
        {throng_transport, Sock} ->
            #{opts := #{negotiation_timeout := NegT, hibernate_after := Hib}} = throng_c2s_io:opts(LRef),
            Now = erlang:monotonic_time(millisecond),
            D = #d{sock = Sock, lref = LRef, parser = throng_c2s_io:new_parser(LRef), ip = throng_transport:peer_ip(Sock),
                   tstamp = Now, tokens = throng_c2s_io:shaper_burst(LRef), last_in = Now div 1000},
            ok = throng_c2s_io:activate(D),
            gen_statem:enter_loop(?MODULE, [{hibernate_after, Hib}], wait_header, D,
                                  [{{timeout, negotiation}, NegT * 1000, negotiation}])
    after 10000 ->
            exit(no_socket)
    end.

-spec callback_mode() -> handle_event_function.
callback_mode() -> handle_event_function.

%%% Events

-spec handle_event(gen_statem:event_type(), term(), state(), #d{}) ->
    gen_statem:event_handler_result(state()).
handle_event(info, {'EXIT', Port, _}, _State, _D) when is_port(Port) ->
    %% An inet driver socket is a port linked to its owner; its end comes as
    %% a message. (A socket backend socket's process monitors its owner
    %% instead: nothing comes.)
    keep_state_and_data;
handle_event(info, Msg, State, D) when tuple_size(Msg) >= 2, ?OURS(element(2, Msg), D) ->
    socket_message(Msg, State, D);
handle_event(info, {route, From, To, El}, State, D) ->
    done(State, throng_c2s_stanza:routed_batch(State, throng_c2s_stanza:deliver(State, none, From, To, El, D), ?ROUTE_BATCH));
handle_event(info, {route_kept, Key, From, To, El}, State, D) ->
    done(State, throng_c2s_stanza:routed_batch(State, throng_c2s_stanza:deliver(State, Key, From, To, El, D), ?ROUTE_BATCH));
handle_event(info, {roster_push, Item, Ver}, State, D) ->
    done(State, case D#d.roster of
                    true -> throng_c2s_stanza:send_stanza(State, throng_roster:push_el(D#d.server, Item, Ver), D);
                    false -> D
                end);
handle_event(info, {replaced, _By}, _State, D) ->
    throng_c2s_io:stream_error(conflict, <<"replaced by a new connection">>, D);
handle_event(info, {kick, Reason}, _State, D) ->
    throng_c2s_io:stream_error('policy-violation', Reason, D);
handle_event(info, {throng_sm, not_alone}, _State, _D) ->
    throng_sm:not_alone(),
    keep_state_and_data;
handle_event(info, {throng_session, place_again}, _State, #d{jid = JID} = D) when JID =/= undefined ->
    case throng_sm:place_again(JID, self()) of
        ok -> keep_state_and_data;
        {exists, Older} ->
            %% Entered once the older one is gone: told to go, then asked again.
            throng_session:replace(Older, self()),
            _ = erlang:send_after(500, self(), {throng_session, place_again}),
            keep_state_and_data;
        conflict -> throng_c2s_io:stream_error(conflict, <<"replaced by a new connection">>, D);
        unreachable ->
            %% The new home did not answer in time: try again in a second.
            _ = erlang:send_after(1000, self(), {throng_session, place_again}),
            keep_state_and_data
    end;
handle_event(info, {throng_session, place_again}, _State, _D) ->
    keep_state_and_data;
handle_event(info, {throng_session, ext, Mod, Msg}, session, D) ->
    session_info(Mod, Msg, D);
handle_event(info, Mod, session, D) when is_atom(Mod), Mod =/= resume_overflow ->
    %% A module's compact timer (throng_session:ext_timer/2).
    case throng_ext:is_enabled(D#d.server, Mod) of
        true -> session_info(Mod, timer, D);
        false ->
            logger:debug(#{what => unexpected_event, state => session, msg => Mod}),
            keep_state_and_data
    end;
handle_event(info, {throng_session, ext, _Mod, _Msg}, resumable, _D) ->
    %% Handled once the session is resumed (or dropped with it).
    {keep_state_and_data, [postpone]};
handle_event(info, Mod, resumable, _D) when is_atom(Mod), Mod =/= resume_overflow ->
    {keep_state_and_data, [postpone]};
handle_event(info, {'EXIT', _Pid, Reason}, _State, D) ->
    {stop, Reason, D};
handle_event(info, resume_overflow, resumable, D) ->
    {stop, normal, D};
handle_event({timeout, negotiation}, negotiation, wait_header, D) ->
    %% No header of ours on this stream yet: it must precede the error.
    throng_c2s_io:header_error('connection-timeout', <<"negotiation took too long">>, throng_stream:new_id(), D);
handle_event({timeout, negotiation}, negotiation, _State, D) ->
    throng_c2s_io:stream_error('connection-timeout', <<"negotiation took too long">>, D);
handle_event({timeout, shaper}, resume, State, D) ->
    done(State, throng_c2s_io:unpause(State, D));
handle_event({timeout, auth_delay}, Failure, State, D) ->
    done(State, throng_c2s_io:emit(Failure, throng_c2s_io:unpause(State, D)));
handle_event(state_timeout, resume_expired, resumable, D) ->
    {stop, normal, D};
handle_event({call, From}, {resume, Bare, H}, State, D) ->
    throng_c2s_sm:resume_request(From, Bare, H, State, D);
handle_event({call, From}, {resume_elsewhere, Bare, H, Reply}, State, D) ->
    throng_c2s_sm:resume_elsewhere(From, Bare, H, Reply, State, D);
handle_event({call, From}, {resume_elsewhere, Bare, H}, State, D) ->
    %% From a node of an older release: it understands a plain ok.
    throng_c2s_sm:resume_elsewhere(From, Bare, H, ok, State, D);
handle_event(info, {resume_socket, Sock, Parser, Rest, Pending, How}, resumable, D) ->
    {resumed, Rest, D1} = throng_c2s_sm:resumed(Sock, Parser, Rest, Pending, How, D),
    elements(Rest, session, D1);
handle_event(info, {resume_socket, Sock, Parser, Rest, Pending, How}, session, D0) ->
    %% Resumed while the old connection still looked alive: drop it.
    throng_transport:close(D0#d.sock),
    D = throng_c2s_stanza:csi_release(D0#d{sock = undefined}),
    {resumed, Rest, D1} = throng_c2s_sm:resumed(Sock, Parser, Rest, Pending, How, D),
    elements(Rest, session, D1);
handle_event(internal, {Tag, Epoch, Ev}, State, #d{epoch = Epoch} = D) when is_atom(State) ->
    case Tag of
        xml -> element_event(Ev, State, D);
        xml_last -> finish(element_event(Ev, State, D))
    end;
handle_event(internal, {Tag, _OldEpoch, _Ev}, State, D) when is_atom(State) ->
    %% Parsed before a stream restart (STARTTLS, SASL success): a client
    %% must wait for the server before it goes on, so this is dropped.
    case Tag of
        xml -> keep_state_and_data;
        xml_last -> done(State, D)
    end;
handle_event(internal, {xml, _Epoch, Ev}, {handover, Target, Rest}, D) ->
    {next_state, {handover, Target, [Ev | Rest]}, D};
handle_event(internal, {xml_last, _Epoch, Ev}, {handover, Target, Rest}, D) ->
    throng_c2s_sm:handover(Target, lists:reverse([Ev | Rest]), D);
handle_event(_Type, Msg, State, _D) ->
    logger:debug(#{what => unexpected_event, state => State, msg => Msg}),
    keep_state_and_data.

%% A message from this session's socket: data, end, error, or "re-arm me"
%% (the tags are the transport's, throng_transport:messages/1). Messages of
%% a socket this session no longer uses (replaced on resumption, closed when
%% the session became resumable) are not these: they end in the last
%% clause of handle_event/4, dropped.
socket_message(Msg, State, #d{sock = Sock} = D) ->
    {DataTag, Closed, Error, Passive} = throng_transport:messages(Sock),
    case Msg of
        {DataTag, _, Bin} ->
            case throng_transport:decode(Sock, Bin) of
                {ok, Data, Sock} ->
                    %% Plain TCP: the same socket (no copy of the record
                    %% per read).
                    data(Data, State, D);
                {ok, Data, Sock1} ->
                    data(Data, State, D#d{sock = Sock1});
                {closed, Data, Sock1} ->
                    %% TLS close_notify (answered): what came before it is
                    %% handled (its answers are not sent: nothing may follow
                    %% our close_notify), then the connection ends as if TCP
                    %% closed.
                    self() ! {Closed, throng_transport:tcp_socket(Sock)},
                    data(Data, State, D#d{sock = Sock1});
                {error, Why} ->
                    %% A failed TLS handshake after <proceed/>: what the
                    %% client still sends is drained, so that no reset
                    %% destroys the <proceed/> it may not have read.
                    logger:info(#{what => tls_error, reason => Why, ip => D#d.ip}),
                    {stop, {shutdown, tls_error}, D}
            end;
        {Passive, _} when not D#d.paused, State =/= resumable ->
            %% The driver delivered its N reads: re-arm (a paused socket is
            %% re-armed when the pause ends).
            _ = throng_c2s_io:activate(D),
            keep_state_and_data;
        {Passive, _} ->
            keep_state_and_data;
        {Closed, _} ->
            closed(State, D);
        {Error, _, Why} ->
            logger:debug(#{what => socket_error, reason => Why}),
            closed(State, D)
    end.

%% Data from the client: shape, parse, handle every element, write, re-arm.
data(Data, State, D0) ->
    Size = byte_size(Data),
    throng_metrics:add(bytes_in, Size),
    D1 = throng_c2s_io:shape(Size, D0#d{last_in = erlang:monotonic_time(second)}),
    {Events, Parser} = throng_xml_stream:parse(D1#d.parser, Data),
    elements(Events, State, D1#d{parser = Parser}).

%% Parsed elements become state machine events, handled in order, each by
%% the handler of the state the previous one left; the last one also writes
%% what they all gathered, in one write (no extra event per read).
elements([], State, D) ->
    done(State, D);
elements(Events, State, #d{epoch = Epoch} = D) ->
    {Init, [Last]} = lists:split(length(Events) - 1, Events),
    {next_state, State, D,
     [{next_event, internal, {xml, Epoch, Ev}} || Ev <- Init] ++
         [{next_event, internal, {xml_last, Epoch, Last}}]}.

%% After the last element of a read: write.
finish({next_state, {handover, Target, []}, D}) ->
    throng_c2s_sm:handover(Target, [], D);
finish({next_state, State, D}) ->
    done(State, D);
finish({next_state, State, D, Actions}) ->
    case done(State, D) of
        {next_state, State1, D1, More} -> {next_state, State1, D1, Actions ++ More};
        Stop -> Stop
    end;
finish(Stop) ->
    Stop.

element_event(Ev, State, D) ->
    case xml(Ev, State, D) of
        {next, NewState, D1} -> {next_state, NewState, D1};
        {next, NewState, D1, Actions} -> {next_state, NewState, D1, Actions};
        {restart, NewState, D1} -> {next_state, NewState, D1#d{epoch = D1#d.epoch + 1}};
        {handover, Target, D1} -> {next_state, {handover, Target, []}, D1};
        {stop, _, _} = Stop -> Stop
    end.

%% The end of every event: write what was gathered.
done(session, #d{sm = SM} = D) when SM =/= undefined ->
    %% A client that never acknowledges would make the queue grow forever.
    case throng_stream_mgmt:pending(SM) > throng_config:get([stream_management, max_unacked]) of
        true -> throng_c2s_io:stream_error('policy-violation', <<"too many unacknowledged stanzas">>, D);
        false -> send_out(session, D)
    end;
done(State, D) ->
    send_out(State, D).

send_out(State, D0) ->
    throng_metrics:check_queue(),
    case throng_c2s_io:flush(D0) of
        {ok, D} when State =:= session ->
            check_backlog(D);
        {ok, D} ->
            {next_state, State, D, throng_c2s_io:shaper_action(D)};
        {error, Why} ->
            count_close(Why),
            closed(State, D0#d{out = []})
    end.

count_close(timeout) -> throng_metrics:incr(send_timeouts_closed);
count_close(_) -> ok.

%% A client that reads slower than stanzas come for it (but not so slow
%% that a write times out) would make its session hold more and more: past
%% max_queued_stanzas or max_queued_bytes the connection is closed, and what
%% the session held goes where it would have gone without it (offline
%% storage, with the unacknowledged stanzas of XEP-0198). No stream error:
%% the client is not reading, and a write would only wait. The stanzas are
%% counted after every event, the bytes as throng_c2s_io:backlog/1 says
%% (past 32 stanzas, at least once a second of events).
check_backlog(#d{lref = LRef} = D) ->
    #{opts := #{max_queued_stanzas := MaxStanzas, max_queued_bytes := MaxBytes}} =
        throng_c2s_io:opts(LRef),
    {Stanzas, Bytes} = throng_c2s_io:backlog(MaxBytes),
    case Stanzas > MaxStanzas orelse (is_integer(Bytes) andalso Bytes > MaxBytes) of
        false ->
            {next_state, session, D, throng_c2s_io:shaper_action(D)};
        true ->
            throng_metrics:incr(slow_readers_closed),
            logger:warning(#{what => slow_reader_closed, jid => throng_c2s_io:jid_text(D),
                             queued_stanzas => Stanzas, queued_bytes => Bytes}),
            {stop, {shutdown, slow_reader}, D}
    end.

%%% XML events by state

xml({error, Cond, Text}, wait_header, D) ->
    throng_c2s_io:header_error(Cond, Text, throng_stream:new_id(), D);
xml({error, Cond, Text}, _State, D) ->
    throng_c2s_io:stream_error(Cond, Text, D);
xml(stream_end, _State, D) ->
    %% What the client sent after its stream end is drained, not answered
    %% with a reset that would destroy our closing tag.
    _ = throng_c2s_io:send_now(D, throng_stream:close()),
    {stop, {shutdown, stream_end}, D#d{out = []}};
xml({stream_start, Name, Attrs}, wait_header, D) ->
    Id = throng_stream:new_id(),
    case throng_stream:check_header(Name, Attrs, throng_config:get([hosts])) of
        {ok, Server} when D#d.server =:= <<>>; Server =:= D#d.server ->
            D1 = throng_c2s_io:emit(throng_stream:header(Id, Server), D#d{server = Server, stream_id = Id}),
            {Stage, Next} = case D1#d.user of
                                undefined -> {pre_auth, negotiating};
                                _ -> {authenticated, wait_bind}
                            end,
            {next, Next, throng_c2s_io:emit(throng_stream:features(features_opts(Stage, D1)), D1)};
        {ok, _OtherServer} ->
            throng_c2s_io:header_error('host-unknown', <<"the domain changed on stream restart">>, Id, D);
        {error, Cond, Text} ->
            throng_c2s_io:header_error(Cond, Text, Id, D)
    end;
xml({stream_start, _, _}, _State, D) ->
    throng_c2s_io:stream_error('bad-format', <<"unexpected stream header">>, D);
xml({stanza, #xmlel{name = Name} = El, Bytes}, State, D) ->
    throng_metrics:bytes_in(Name, Bytes),
    element(State, El, D).

features_opts(Stage, #d{lref = LRef, sock = Sock, server = Server} = D) ->
    #{stage => Stage, tls => throng_transport:is_tls(Sock),
      starttls => throng_c2s_io:lopt(LRef, starttls),
      mechanisms => throng_c2s_mechs:mechanisms(Sock),
      channel_bindings => maps:keys(throng_c2s_mechs:channel_bindings(Sock)),
      sasl2 => throng_c2s_sasl2:feature(D),
      extra => throng_ext:stream_features(Stage, Server),
      sm => throng_config:get([stream_management, enabled])}.

tls_required(#d{lref = LRef, sock = Sock}) ->
    throng_c2s_io:lopt(LRef, starttls) =:= required andalso not throng_transport:is_tls(Sock).

%% Elements before authentication.
element(negotiating, #xmlel{name = <<"starttls">>} = El, D) ->
    case throng_xml:ns(El) =:= ?NS_TLS andalso not throng_transport:is_tls(D#d.sock)
        andalso throng_c2s_io:lopt(D#d.lref, starttls) =/= disabled of
        true -> throng_c2s_auth:starttls(D);
        false -> throng_c2s_io:stream_error('policy-violation', <<"STARTTLS not available">>,
                              throng_c2s_io:emit(["<failure xmlns='", ?NS_TLS, "'/>"], D))
    end;
element(State, #xmlel{name = <<"auth">>} = El, D)
  when State =:= negotiating ->
    case tls_required(D) of
        true -> throng_c2s_io:stream_error('policy-violation', <<"STARTTLS is required">>, D);
        false -> throng_c2s_auth:sasl_start(El, D)
    end;
element(negotiating, #xmlel{name = <<"authenticate">>} = El, D) ->
    %% XEP-0388 SASL2: offered over TLS only.
    case throng_xml:ns(El) =:= ?NS_SASL2 andalso throng_c2s_sasl2:offered(D) of
        true -> throng_c2s_auth:sasl2_start(El, D);
        false -> throng_c2s_io:stream_error('not-authorized', <<"authenticate first">>, D)
    end;
element(sasl, #xmlel{name = <<"response">>} = El, D) ->
    throng_c2s_auth:sasl_step(El, D);
element(sasl, #xmlel{name = <<"abort">>}, D) ->
    {next, negotiating, throng_c2s_io:emit(throng_c2s_auth:failure(aborted, D), D#d{sasl = undefined})};
element(negotiating, #xmlel{name = <<"iq">>} = El, D) ->
    %% Only modules that answer unauthenticated streams (in-band
    %% registration) take an IQ here.
    case not tls_required(D) andalso throng_iq:process_preauth(D#d.server, D#d.ip, El) of
        #xmlel{} = Reply ->
            {next, negotiating, throng_c2s_io:emit(throng_xml:to_iolist(Reply), D)};
        _ ->
            throng_c2s_io:stream_error('not-authorized', <<"authenticate first">>, D)
    end;
element(negotiating, #xmlel{name = Name} = El, D)
  when Name =:= <<"enable">>; Name =:= <<"resume">> ->
    %% XEP-0198 §3, §5: stream management needs an authenticated stream; the
    %% request fails and the stream goes on.
    case throng_xml:ns(El) of
        ?NS_SM -> {next, negotiating, throng_c2s_io:emit(throng_stream_mgmt:failed_el('unexpected-request'), D)};
        _ -> throng_c2s_io:stream_error('not-authorized', <<"authenticate first">>, D)
    end;
element(State, #xmlel{}, D) when State =:= negotiating; State =:= sasl ->
    throng_c2s_io:stream_error('not-authorized', <<"authenticate first">>, D);
%% Elements after authentication, before binding.
element(wait_bind, #xmlel{name = <<"iq">>} = El, D) ->
    case throng_xml:subel(El, <<"bind">>, ?NS_BIND) of
        undefined ->
            {next, wait_bind, throng_c2s_io:emit(throng_xml:to_iolist(
                                     throng_stanza:error_reply(El, 'not-authorized',
                                                               <<"bind a resource first">>)), D)};
        Bind ->
            throng_c2s_bind:bind(El, Bind, D)
    end;
element(wait_bind, #xmlel{name = <<"resume">>} = El, D) ->
    throng_c2s_sm:resume(El, D);
element(wait_bind, #xmlel{name = <<"enable">>}, D) ->
    {next, wait_bind, throng_c2s_io:emit(throng_stream_mgmt:failed_el('unexpected-request'), D)};
element(wait_bind, #xmlel{}, D) ->
    throng_c2s_io:stream_error('not-authorized', <<"bind a resource first">>, D);
%% The session.
element(session, #xmlel{name = Name} = El, D) ->
    case throng_xml:ns(El) of
        ?NS_SM -> throng_c2s_sm:element(Name, El, D);
        ?NS_CSI -> throng_c2s_stanza:csi(Name, El, D);
        _ -> throng_c2s_stanza:stanza(El, D)
    end.

%%% What extension modules ask of the session (throng_session:action())

session_info(Mod, Msg, D) ->
    try Mod:session_info(Msg, #{jid => D#d.jid, last_in => D#d.last_in}) of
        Actions -> ext_actions(Mod, Actions, D)
    catch
        %% One module's bug does not end the session.
        Class:Reason:Stack ->
            logger:error(#{what => session_info_crashed, module => Mod, class => Class,
                           reason => Reason, stacktrace => Stack}),
            keep_state_and_data
    end.

ext_actions(Mod, Actions, D0) ->
    Step = fun({send, El}, {ok, D}) -> {ok, throng_c2s_stanza:send_stanza(session, El, D)};
              ({timer, Ms}, {ok, D}) -> throng_session:ext_timer(Ms, Mod), {ok, D};
              ({timer, Ms, Msg}, {ok, D}) -> throng_session:ext_timer(Ms, Mod, Msg), {ok, D};
              ({stop, Cond, Text}, {ok, D}) -> {stop, Cond, Text, D};
              (_, Stop) -> Stop
           end,
    case lists:foldl(Step, {ok, D0}, Actions) of
        {ok, D} -> done(session, D);
        {stop, Cond, Text, D} -> throng_c2s_io:stream_error(Cond, Text, D)
    end.

%%% The end of a connection

%% The socket closed. A session with resumption enabled waits, detached:
%% from now on messages for it are kept durably (the router keeps new ones,
%% the session those it has queued); any other session ends.
closed(session, #d{sm = SM, jid = JID} = D) when SM =/= undefined ->
    case throng_stream_mgmt:resumable(SM) of
        true ->
            throng_transport:close(D#d.sock),
            throng_c2s_io:forget_backlog(),
            throng_sm:set_detached(JID, true),
            Kept = throng_c2s_items:keep(JID, throng_stream_mgmt:unacked(SM), self()),
            %% What an inactive client had not been sent joins the queue a
            %% resumption re-sends; the next stream starts active.
            D1 = throng_c2s_stanza:csi_release(
                   D#d{sock = undefined, out = [], sm = throng_stream_mgmt:set_unacked(Kept, SM)}),
            {next_state, resumable, D1,
             [{state_timeout, throng_config:get([stream_management, resume_timeout]) * 1000,
               resume_expired}]};
        false ->
            {stop, normal, D}
    end;
closed(_State, D) ->
    {stop, normal, D}.

-spec terminate(term(), atom(), #d{}) -> ok.
terminate(Reason, State, D) ->
    case Reason of
        shutdown -> _ = throng_c2s_io:send_now(D, [throng_stream:error('system-shutdown', <<>>),
                                     throng_stream:close()]);
        {shutdown, _} -> ok;
        normal -> ok;
        _ -> logger:error(#{what => c2s_crashed, state => State, reason => Reason,
                            jid => throng_c2s_io:jid_text(D)})
    end,
    try end_session(D)
    after
        case {D#d.sock, Reason} of
            {undefined, _} -> ok;
            {Sock, {shutdown, Why}} when Why =:= stream_error; Why =:= stream_end;
                                         Why =:= tls_error ->
                throng_transport:close_after_error(Sock);
            {Sock, _} -> throng_transport:close(Sock)
        end
    end,
    ok.

end_session(#d{jid = undefined}) ->
    ok;
end_session(#d{jid = JID, prio = Prio, directed = Directed} = D) ->
    %% A resumed-elsewhere session keeps nothing: the session lives on in the
    %% process that took over.
    throng_sm:unregister(JID, self()),
    try
        throng_sm:set_detached(JID, false),
        throng_hooks:notify(session_closed, JID#jid.server,
                            #{jid => JID, available => Prio =/= undefined}),
        case Prio of
            undefined -> ok;
            _ -> throng_presence:unavailable(JID, #xmlel{name = <<"presence">>,
                                                         attrs = [{<<"type">>, <<"unavailable">>}]},
                                             Directed)
        end,
        throng_metrics:incr(sessions_closed),
        logger:info(#{what => session_closed, jid => throng_jid:to_binary(JID)})
    after
        %% Nothing the server accepted is lost: unacknowledged stanzas and
        %% stanzas still in the mailbox are routed again (to another
        %% resource, or to offline storage), also when the broadcast above
        %% failed (the store could not read the roster).
        Unacked = case D#d.sm of
                      undefined -> [];
                      SM -> throng_stream_mgmt:unacked(SM)
                  end,
        throng_c2s_items:reroute(Unacked ++ throng_c2s_stanza:csi_held(D), JID),
        throng_c2s_items:drain_mailbox(JID)
    end.

-spec code_change(term(), atom(), #d{}, term()) -> {ok, atom(), #d{}}.
code_change(_Old, State, D, _Extra) ->
    {ok, State, D}.
