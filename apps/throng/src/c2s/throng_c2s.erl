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
-module(throng_c2s).
-behaviour(gen_statem).

-include("throng.hrl").

-export([start_link/1, init/1]).
-export([callback_mode/0, handle_event/4, terminate/3, code_change/4]).

-record(d, {sock :: throng_socket:socket() | undefined,
            lref :: throng_listener:ref(),
            parser :: throng_xml_stream:state() | undefined,
            server = <<>> :: binary(),
            stream_id = <<>> :: binary(),
            user :: binary() | undefined,          %% after SASL
            jid :: #jid{} | undefined,             %% after bind
            ip :: inet:ip_address() | undefined,
            sasl :: term(),
            auth_failures = 0 :: non_neg_integer(),
            prio :: undefined | integer(),         %% undefined: not available
            roster = false :: boolean(),           %% the client requested the roster
            directed = [] :: [#jid{}],             %% directed presence sent to
            tokens = 0 :: integer(),               %% shaper bucket
            tstamp = 0 :: integer(),               %% shaper: last refill (ms)
            last_in = 0 :: integer(),              %% seconds: last data from the client
            sm :: undefined | throng_stream_mgmt:state(),
            out = [] :: iolist(),                  %% pending output, reversed
            paused = false :: boolean()}).         %% socket not re-armed on purpose

-define(MAX_AUTH_FAILURES, 5).
-define(ROUTE_BATCH, 64).
%% Port is the TCP port of this session's current socket (the last element
%% of {tcp, Port} and {tls, TLS, Port}).
-define(OURS(Port, D), (is_tuple(D#d.sock) andalso
                        element(tuple_size(D#d.sock), D#d.sock) =:= Port)).

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
        {throng_socket, Port} ->
            #{opts := #{negotiation_timeout := NegT, hibernate_after := Hib}} = opts(LRef),
            Sock = {tcp, Port},
            throng_metrics:incr(connections_open),
            Now = erlang:monotonic_time(millisecond),
            D = #d{sock = Sock, lref = LRef, parser = new_parser(LRef), ip = throng_socket:peer_ip(Sock),
                   tstamp = Now, tokens = shaper_burst(LRef), last_in = Now div 1000},
            ok = activate(D),
            gen_statem:enter_loop(?MODULE, [{hibernate_after, Hib}], wait_header, D,
                                  [{{timeout, negotiation}, NegT * 1000, negotiation}])
    after 10000 ->
            exit(no_socket)
    end.

opts(LRef) -> throng_listener:info(LRef).

lopt(LRef, Key) ->
    #{opts := #{Key := V}} = opts(LRef),
    V.

new_parser(LRef) ->
    #{opts := #{max_stanza_size := Max, max_depth := Depth}} = opts(LRef),
    throng_xml_stream:new(#{max_stanza_size => Max, max_depth => Depth, sizes => true}).

-spec callback_mode() -> handle_event_function.
callback_mode() -> handle_event_function.

%%% Events

-spec handle_event(gen_statem:event_type(), term(), atom(), #d{}) ->
    gen_statem:event_handler_result(atom()).
handle_event(info, {Tag, Port, _}, _State, D) when Tag =:= tcp, not ?OURS(Port, D);
                                                  Tag =:= tcp_error, not ?OURS(Port, D) ->
    %% Left over from a socket this session no longer uses (replaced on
    %% resumption).
    keep_state_and_data;
handle_event(info, {tcp_closed, Port}, _State, D) when not ?OURS(Port, D) ->
    keep_state_and_data;
handle_event(info, {tcp, _Port, Bin}, State, D) ->
    case throng_socket:decode(D#d.sock, Bin) of
        {ok, Data} ->
            data(Data, State, D);
        {error, Why} ->
            logger:info(#{what => tls_error, reason => Why, ip => D#d.ip}),
            {stop, normal, D}
    end;
handle_event(info, {tcp_passive, _Port}, State, #d{paused = false, sock = Sock} = D)
  when Sock =/= undefined, State =/= resumable ->
    %% The driver delivered its N reads: re-arm (a paused socket is re-armed
    %% when the pause ends).
    _ = activate(D),
    keep_state_and_data;
handle_event(info, {tcp_passive, _Port}, _State, _D) ->
    keep_state_and_data;
handle_event(info, {tcp_closed, _Port}, State, D) ->
    closed(State, D);
handle_event(info, {tcp_error, _Port, Why}, State, D) ->
    logger:debug(#{what => socket_error, reason => Why}),
    closed(State, D);
handle_event(info, {route, From, To, El}, State, D) ->
    done(State, routed_batch(State, deliver(State, From, To, El, D), ?ROUTE_BATCH));
handle_event(info, {roster_push, Item, Ver}, State, D) ->
    done(State, case D#d.roster of
                    true -> send_stanza(State, throng_roster:push_el(D#d.server, Item, Ver), D);
                    false -> D
                end);
handle_event(info, {replaced, _By}, _State, D) ->
    stream_error(conflict, <<"replaced by a new connection">>, D);
handle_event(info, {kick, Reason}, _State, D) ->
    stream_error('policy-violation', Reason, D);
handle_event(info, {throng_session, ext, Mod, Msg}, session, D) ->
    ext_actions(Mod, Mod:session_info(Msg, #{jid => D#d.jid, last_in => D#d.last_in}), D);
handle_event(info, {throng_session, ext, _Mod, _Msg}, resumable, _D) ->
    %% Handled once the session is resumed (or dropped with it).
    {keep_state_and_data, [postpone]};
handle_event(info, {'EXIT', Port, _}, _State, _D) when is_port(Port) ->
    %% The socket's port is linked to its owner; its end is seen as tcp_closed.
    keep_state_and_data;
handle_event(info, {'EXIT', _Pid, Reason}, _State, D) ->
    {stop, Reason, D};
handle_event(info, resume_overflow, resumable, D) ->
    {stop, normal, D};
handle_event({timeout, negotiation}, negotiation, wait_header, D) ->
    %% No header of ours on this stream yet: it must precede the error.
    header_error('connection-timeout', <<"negotiation took too long">>, throng_stream:new_id(), D);
handle_event({timeout, negotiation}, negotiation, _State, D) ->
    stream_error('connection-timeout', <<"negotiation took too long">>, D);
handle_event({timeout, shaper}, resume, State, D) ->
    done(State, unpause(State, D));
handle_event({timeout, auth_delay}, Failure, State, D) ->
    done(State, emit(Failure, unpause(State, D)));
handle_event(state_timeout, resume_expired, resumable, D) ->
    {stop, normal, D};
handle_event({call, From}, {resume, Bare, H}, State, D) ->
    resume_request(From, Bare, H, State, D);
handle_event(info, {resume_socket, Sock, Parser, Rest, Pending}, resumable, D) ->
    resumed(Sock, Parser, Rest, Pending, D);
handle_event(info, {resume_socket, Sock, Parser, Rest, Pending}, session, D) ->
    %% Resumed while the old connection still looked alive: drop it.
    throng_socket:close(D#d.sock),
    resumed(Sock, Parser, Rest, Pending, D);
handle_event(_Type, Msg, State, _D) ->
    logger:debug(#{what => unexpected_event, state => State, msg => Msg}),
    keep_state_and_data.

%% Data from the client: shape, parse, handle every element, write, re-arm.
data(Data, State, D0) ->
    Size = byte_size(Data),
    throng_metrics:add(bytes_in, Size),
    D1 = shape(Size, D0#d{last_in = erlang:monotonic_time(second)}),
    {Events, Parser} = throng_xml_stream:parse(D1#d.parser, Data),
    events(Events, State, D1#d{parser = Parser}, []).

%% Handles parsed elements in order. An element handler returns
%% {next, State, D} or {next, State, D, Actions}; {restart, State, D} drops
%% the rest (a stream restart); {handover, Pid, D} passes the connection to
%% a resumed session; {stop, ...} ends the connection.
events([], State, D, Actions) ->
    done(State, D, Actions);
events([Ev | Rest], State, D, Actions) ->
    case xml(Ev, State, D) of
        {next, NewState, D1} -> events(Rest, NewState, D1, Actions);
        {next, NewState, D1, More} -> events(Rest, NewState, D1, Actions ++ More);
        {restart, NewState, D1} -> done(NewState, D1, Actions);
        {handover, Pid, D1} -> handover(Pid, Rest, D1);
        {stop, _, _} = Stop -> Stop
    end.

done(State, D) ->
    done(State, D, []).

%% The end of every event: write what was gathered.
done(session, #d{sm = SM} = D, Actions) when SM =/= undefined ->
    %% A client that never acknowledges would make the queue grow forever.
    case throng_stream_mgmt:pending(SM) > throng_config:get([stream_management, max_unacked]) of
        true -> stream_error('policy-violation', <<"too many unacknowledged stanzas">>, D);
        false -> send_out(session, D, Actions)
    end;
done(State, D, Actions) ->
    send_out(State, D, Actions).

send_out(State, D0, Actions) ->
    throng_metrics:check_queue(),
    case flush(D0) of
        {ok, D} ->
            {next_state, State, D, Actions ++ shaper_action(D)};
        {error, _} ->
            closed(State, D0#d{out = []})
    end.

shaper_action(#d{paused = true, tokens = T, lref = LRef}) when T < 0 ->
    Rate = lopt(LRef, shaper_rate),
    [{{timeout, shaper}, max(1, (-T * 1000) div Rate), resume}];
shaper_action(_) ->
    [].

%% The socket runs in {active, N} mode: the driver delivers up to N reads as
%% messages, then {tcp_passive, Port}, and the socket is re-armed. A pause
%% (traffic shaper, authentication-failure delay) turns reading off until it
%% ends; the client is then slowed down by TCP flow control.
activate(D) ->
    throng_socket:activate(D#d.sock, lopt(D#d.lref, active_n)).

pause(#d{paused = true} = D) -> D;
pause(#d{sock = undefined} = D) -> D#d{paused = true};
pause(D) ->
    _ = throng_socket:pause(D#d.sock),
    D#d{paused = true}.

unpause(_State, #d{paused = false} = D) -> D;
unpause(State, #d{sock = Sock} = D) when Sock =:= undefined; State =:= resumable ->
    D#d{paused = false};
unpause(_State, D) ->
    _ = activate(D),
    D#d{paused = false}.

%%% The traffic shaper: a token bucket per connection. When the bucket is
%%% empty the socket is not re-armed until it has refilled: the client is
%%% slowed down by TCP flow control and nothing is dropped.

shaper_burst(LRef) -> lopt(LRef, shaper_burst).

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

%%% XML events by state

xml({error, Cond, Text}, wait_header, D) ->
    header_error(Cond, Text, throng_stream:new_id(), D);
xml({error, Cond, Text}, _State, D) ->
    stream_error(Cond, Text, D);
xml(stream_end, _State, D) ->
    _ = send_now(D, throng_stream:close()),
    {stop, normal, D#d{out = []}};
xml({stream_start, Name, Attrs}, wait_header, D) ->
    Id = throng_stream:new_id(),
    case throng_stream:check_header(Name, Attrs, throng_config:get([hosts])) of
        {ok, Server} when D#d.server =:= <<>>; Server =:= D#d.server ->
            D1 = emit(throng_stream:header(Id, Server), D#d{server = Server, stream_id = Id}),
            {Stage, Next} = case D1#d.user of
                                undefined -> {pre_auth, negotiating};
                                _ -> {authenticated, wait_bind}
                            end,
            {next, Next, emit(throng_stream:features(features_opts(Stage, D1)), D1)};
        {ok, _OtherServer} ->
            header_error('host-unknown', <<"the domain changed on stream restart">>, Id, D);
        {error, Cond, Text} ->
            header_error(Cond, Text, Id, D)
    end;
xml({stream_start, _, _}, _State, D) ->
    stream_error('bad-format', <<"unexpected stream header">>, D);
xml({stanza, #xmlel{name = Name} = El, Bytes}, State, D) ->
    throng_metrics:bytes_in(Name, Bytes),
    element(State, El, D).

header_error(Cond, Text, Id, D) ->
    Server = case D#d.server of
                 <<>> -> hd(throng_config:get([hosts]));
                 S -> S
             end,
    stream_error(Cond, Text, emit(throng_stream:header(Id, Server), D)).

features_opts(Stage, #d{lref = LRef, sock = Sock, server = Server}) ->
    #{stage => Stage, tls => throng_socket:is_tls(Sock),
      starttls => lopt(LRef, starttls),
      mechanisms => mechanisms(),
      extra => throng_ext:stream_features(Stage, Server),
      sm => throng_config:get([stream_management, enabled])}.

%% The SASL mechanisms offered, in the configured order.
mechanisms() ->
    [atom_to_binary(M) || M <- throng_config:get([auth, mechanisms])].

tls_required(#d{lref = LRef, sock = Sock}) ->
    lopt(LRef, starttls) =:= required andalso not throng_socket:is_tls(Sock).

%% Elements before authentication.
element(negotiating, #xmlel{name = <<"starttls">>} = El, D) ->
    case throng_xml:ns(El) =:= ?NS_TLS andalso not throng_socket:is_tls(D#d.sock)
        andalso lopt(D#d.lref, starttls) =/= disabled of
        true -> starttls(D);
        false -> stream_error('policy-violation', <<"STARTTLS not available">>,
                              emit(["<failure xmlns='", ?NS_TLS, "'/>"], D))
    end;
element(State, #xmlel{name = <<"auth">>} = El, D)
  when State =:= negotiating ->
    case tls_required(D) of
        true -> stream_error('policy-violation', <<"STARTTLS is required">>, D);
        false -> sasl_start(El, D)
    end;
element(sasl, #xmlel{name = <<"response">>} = El, D) ->
    sasl_step(El, D);
element(sasl, #xmlel{name = <<"abort">>}, D) ->
    {next, negotiating, emit(sasl_failure(aborted), D#d{sasl = undefined})};
element(negotiating, #xmlel{name = <<"iq">>} = El, D) ->
    %% Only modules that answer unauthenticated streams (in-band
    %% registration) take an IQ here.
    case not tls_required(D) andalso throng_iq:process_preauth(D#d.server, D#d.ip, El) of
        #xmlel{} = Reply ->
            {next, negotiating, emit(throng_xml:to_iolist(Reply), D)};
        _ ->
            stream_error('not-authorized', <<"authenticate first">>, D)
    end;
element(State, #xmlel{}, D) when State =:= negotiating; State =:= sasl ->
    stream_error('not-authorized', <<"authenticate first">>, D);
%% Elements after authentication, before binding.
element(wait_bind, #xmlel{name = <<"iq">>} = El, D) ->
    case throng_xml:subel(El, <<"bind">>, ?NS_BIND) of
        undefined ->
            {next, wait_bind, emit(throng_xml:to_iolist(
                                     throng_stanza:error_reply(El, 'not-authorized',
                                                               <<"bind a resource first">>)), D)};
        Bind ->
            bind(El, Bind, D)
    end;
element(wait_bind, #xmlel{name = <<"resume">>} = El, D) ->
    resume(El, D);
element(wait_bind, #xmlel{name = <<"enable">>}, D) ->
    {next, wait_bind, emit(throng_stream_mgmt:failed_el('unexpected-request'), D)};
element(wait_bind, #xmlel{}, D) ->
    stream_error('not-authorized', <<"bind a resource first">>, D);
%% The session.
element(session, #xmlel{name = Name} = El, D) ->
    case throng_xml:ns(El) of
        ?NS_SM -> sm_element(Name, El, D);
        _ -> stanza(El, D)
    end.

%%% STARTTLS (RFC 6120 §5)

starttls(D0) ->
    D = emit(["<proceed xmlns='", ?NS_TLS, "'/>"], D0),
    case flush(D) of
        {ok, D1} ->
            case throng_socket:starttls(D1#d.sock, throng_cert:certfile()) of
                {ok, TLS} ->
                    throng_metrics:incr(tls_established),
                    {restart, wait_header,
                     D1#d{sock = TLS, parser = throng_xml_stream:reset(D1#d.parser)}};
                {error, Why} ->
                    throng_metrics:incr(tls_failed),
                    logger:warning(#{what => starttls_failed, reason => Why}),
                    {stop, normal, D1}
            end;
        {error, _} ->
            {stop, normal, D}
    end.

%%% SASL (RFC 6120 §6)

sasl_start(El, D) ->
    Mech = throng_xml:attr(<<"mechanism">>, El, <<>>),
    case lists:member(Mech, mechanisms()) of
        false ->
            {next, negotiating, emit(sasl_failure('invalid-mechanism'), D)};
        true ->
            case sasl_data(El) of
                {ok, Initial} ->
                    sasl_result(throng_sasl:start(Mech, Initial, throng_auth:sasl_ctx(D#d.server)), D);
                error ->
                    {next, negotiating, emit(sasl_failure('incorrect-encoding'), D)}
            end
    end.

sasl_step(El, D) ->
    case sasl_data(El) of
        {ok, Resp} -> sasl_result(throng_sasl:step(D#d.sasl, Resp), D);
        error -> {next, negotiating, emit(sasl_failure('incorrect-encoding'), D#d{sasl = undefined})}
    end.

sasl_data(El) ->
    case throng_xml:cdata(El) of
        <<>> -> {ok, <<>>};
        <<"=">> -> {ok, <<>>};
        B64 ->
            try {ok, base64:decode(B64)}
            catch _:_ -> error
            end
    end.

sasl_result({continue, Challenge, St}, D) ->
    {next, sasl, emit(["<challenge xmlns='", ?NS_SASL, "'>", base64:encode(Challenge),
                       "</challenge>"], D#d{sasl = St})};
sasl_result({success, Extra, User}, D) ->
    throng_metrics:incr(logins),
    logger:info(#{what => authenticated, user => User, server => D#d.server, ip => D#d.ip}),
    Success = case Extra of
                  <<>> -> ["<success xmlns='", ?NS_SASL, "'/>"];
                  _ -> ["<success xmlns='", ?NS_SASL, "'>", base64:encode(Extra), "</success>"]
              end,
    {restart, wait_header, emit(Success, D#d{user = User, sasl = undefined,
                                              parser = throng_xml_stream:reset(D#d.parser)})};
sasl_result({error, Cond, User}, D) ->
    throng_metrics:incr(auth_failures),
    N = throng_tables:auth_failure(D#d.ip),
    Failures = D#d.auth_failures + 1,
    logger:notice(#{what => auth_failed, user => User, server => D#d.server,
                    ip => D#d.ip, condition => Cond, failures_from_ip => N}),
    D1 = D#d{sasl = undefined, auth_failures = Failures},
    case Failures >= ?MAX_AUTH_FAILURES of
        true ->
            stream_error('policy-violation', <<"too many authentication failures">>,
                         emit(sasl_failure(Cond), D1));
        false ->
            %% Repeated failures from one address are answered ever later
            %% (the socket is not read meanwhile).
            case failure_delay(N) of
                0 -> {next, negotiating, emit(sasl_failure(Cond), D1)};
                Ms -> {next, negotiating, pause(D1),
                       [{{timeout, auth_delay}, Ms, sasl_failure(Cond)}]}
            end
    end.

failure_delay(N) when N =< 1 -> 0;
failure_delay(N) ->
    min(throng_config:get([auth, max_failure_delay]), 100 bsl min(N - 2, 16)).

sasl_failure(Cond) ->
    ["<failure xmlns='", ?NS_SASL, "'><", atom_to_binary(Cond), "/></failure>"].

%%% Resource binding (RFC 6120 §7)

bind(IQ, Bind, D) ->
    Requested = throng_xml:subel_cdata(Bind, <<"resource">>),
    Resource = case Requested of
                   <<>> -> base64:encode(crypto:strong_rand_bytes(9));
                   R -> throng_jid:resourceprep(R)
               end,
    case Resource of
        error ->
            {next, wait_bind, emit(throng_xml:to_iolist(
                                     throng_stanza:error_reply(IQ, 'bad-request',
                                                               <<"invalid resource">>)), D)};
        _ ->
            %% Copied: these live as long as the session, and must not keep
            %% the receive buffers they were parsed from.
            JID = #jid{user = binary:copy(D#d.user), server = binary:copy(D#d.server),
                       resource = binary:copy(Resource)},
            ok = register_session(JID),
            throng_metrics:incr(sessions_opened),
            logger:info(#{what => session_opened, jid => throng_jid:to_binary(JID)}),
            Reply = throng_stanza:iq_result(
                      IQ, [#xmlel{name = <<"bind">>, attrs = [{<<"xmlns">>, ?NS_BIND}],
                                  children = [#xmlel{name = <<"jid">>,
                                                     children = [{xmlcdata, throng_jid:to_binary(JID)}]}]}]),
            throng_hooks:notify(session_opened, JID#jid.server, #{jid => JID}),
            %% What only negotiation needed is dropped: an idle session's
            %% state is what it keeps for hours.
            {next, session, emit(throng_xml:to_iolist(Reply),
                                 D#d{jid = JID, user = JID#jid.user, server = JID#jid.server,
                                     stream_id = <<>>, ip = undefined, auth_failures = 0}),
             [{{timeout, negotiation}, cancel}]}
    end.

%% The newer session wins (RFC 6120 §7.7.2.2): the older one is told to go
%% and this one waits until it is gone, so its unavailable presence goes out
%% before this session can send any.
register_session(JID) ->
    case throng_sm:register(JID, self()) of
        ok -> ok;
        {exists, Old} ->
            MRef = erlang:monitor(process, Old),
            throng_session:replace(Old, self()),
            receive {'DOWN', MRef, process, Old, _} -> ok
            after 5000 -> exit(Old, kill),
                          receive {'DOWN', MRef, process, Old, _} -> ok end
            end,
            register_session(JID)
    end.

%%% Stanzas from the client (RFC 6120 §8, RFC 6121)

stanza(#xmlel{name = Name} = El, D) when Name =:= <<"message">>; Name =:= <<"presence">>;
                                         Name =:= <<"iq">> ->
    throng_metrics:stanza_in(Name),
    D1 = sm_handled(D),
    #d{jid = JID} = D1,
    case check_from(El, JID) of
        false ->
            stream_error('invalid-from', <<"from does not match the session">>, D1);
        true ->
            case throng_xml:attr(<<"to">>, El) of
                undefined -> no_to(El, JID, D1);
                ToBin ->
                    case throng_jid:parse(ToBin) of
                        {ok, To} -> to(El, JID, To, D1);
                        error -> reply(throng_stanza:error_reply(El, 'jid-malformed'), D1)
                    end
            end
    end;
stanza(_El, D) ->
    stream_error('unsupported-stanza-type', <<"not a stanza">>, D).

check_from(El, #jid{} = JID) ->
    case throng_xml:attr(<<"from">>, El) of
        undefined -> true;
        From ->
            case throng_jid:parse(From) of
                {ok, JID} -> true;
                {ok, #jid{resource = <<>>} = J} -> J =:= throng_jid:bare(JID);
                _ -> false
            end
    end.

no_to(#xmlel{name = <<"presence">>} = El, JID, D) ->
    presence_broadcast(El, JID, D);
no_to(#xmlel{name = <<"iq">>} = El, JID, D) ->
    local_iq(El, JID, throng_jid:bare(JID), D);
no_to(El, JID, D) ->
    to(El, JID, throng_jid:bare(JID), D).

to(#xmlel{name = <<"iq">>} = El, #jid{user = U, server = S} = JID,
   #jid{server = S, resource = <<>>} = To, D)
  when To#jid.user =:= <<>>; To#jid.user =:= U ->
    local_iq(El, JID, To, D);
to(#xmlel{name = <<"presence">>} = El, JID, To, D) ->
    presence_to(El, JID, To, D);
to(El, JID, To, D) ->
    throng_router:route(JID, To, strip(El)),
    {next, session, D}.

strip(El) -> throng_stanza:strip_from_to(El).

%% IQs to the server or to the user's own account.
local_iq(El, JID, To, D) ->
    case throng_xml:subel(El, <<"query">>, ?NS_ROSTER) of
        #xmlel{} ->
            {Reply, Requested} = throng_roster:process_iq(JID, set_from_to(El, JID, To)),
            D1 = D#d{roster = D#d.roster orelse Requested =:= requested},
            %% A roster set pushes to every interested resource; this one gets
            %% its push before the result, as in RFC 6121 §2.3.2.
            reply(Reply, own_pushes(D1));
        undefined ->
            case throng_iq:process(JID, To, set_from_to(El, JID, To)) of
                noreply -> {next, session, D};
                Reply -> reply(Reply, D)
            end
    end.

own_pushes(D) ->
    receive
        {roster_push, Item, Ver} when D#d.roster ->
            own_pushes(send_stanza(session, throng_roster:push_el(D#d.server, Item, Ver), D))
    after 0 ->
            D
    end.

set_from_to(El, From, To) ->
    throng_stanza:set_from_to(El, throng_jid:to_binary(From), throng_jid:to_binary(To)).

reply(El, D) ->
    {next, session, send_stanza(session, El, D)}.

%%% Presence from the client

presence_broadcast(El, JID, D) ->
    P = strip(El),
    case throng_stanza:type(El) of
        <<>> ->
            Prio = throng_presence:priority(El),
            throng_sm:set_presence(JID, Prio, throng_stanza:copy(P)),
            case D#d.prio of
                undefined -> initial_presence(P, JID, D#d{prio = Prio});
                _ -> throng_presence:update(JID, P), {next, session, D#d{prio = Prio}}
            end;
        <<"unavailable">> ->
            throng_sm:set_presence(JID, undefined, undefined),
            case D#d.prio of
                undefined -> ok;
                _ -> throng_presence:unavailable(JID, P, D#d.directed)
            end,
            {next, session, D#d{prio = undefined, directed = []}};
        <<"error">> ->
            {next, session, D};
        _ ->
            reply(throng_stanza:error_reply(El, 'bad-request'), D)
    end.

%% Initial presence: broadcast it, receive the contacts' presence, pending
%% subscription requests, then offline messages if the priority allows.
initial_presence(P, JID, D) ->
    Incoming = throng_presence:initial(JID, P),
    D1 = lists:foldl(fun({From, El}, Acc) -> send_routed(session, From, JID, El, Acc) end,
                     D, Incoming),
    %% Modules add what the new resource gets after the presence of its
    %% contacts (stored offline messages).
    {_, Items} = throng_hooks:run(initial_presence, JID#jid.server, [],
                                  #{jid => JID, priority => D1#d.prio}),
    D2 = lists:foldl(fun({ext, Mod, Data} = Item, Acc) ->
                             {Kind, Bytes} = Mod:item_bytes(Data, Acc#d.server),
                             output(Kind, Item, Bytes, Acc)
                     end, D1, Items),
    {next, session, D2}.

presence_to(El, JID, To, D) ->
    case throng_stanza:type(El) of
        T when T =:= <<"subscribe">>; T =:= <<"subscribed">>;
               T =:= <<"unsubscribe">>; T =:= <<"unsubscribed">> ->
            throng_roster:outbound(JID, To, El),
            {next, session, D};
        T when T =:= <<>>; T =:= <<"unavailable">> ->
            throng_router:route(JID, To, strip(El)),
            Directed = lists:delete(To, D#d.directed),
            {next, session, D#d{directed = case T of
                                               <<>> -> [To | Directed];
                                               _ -> Directed
                                           end}};
        <<"probe">> ->
            {next, session, D};
        <<"error">> ->
            throng_router:route(JID, To, strip(El)),
            {next, session, D};
        _ ->
            reply(throng_stanza:error_reply(El, 'bad-request'), D)
    end.

%%% Stanzas routed to this session

deliver(State, From, To, El, D) ->
    send_routed(State, From, To, El, D).

send_routed(State, From, To, El0, #d{jid = JID} = D) ->
    %% Modules see every stanza before it is written, and may change it or
    %% keep it from the client.
    case throng_hooks:run(stanza_to_session, D#d.server, El0,
                          #{from => From, to => To, jid => JID}) of
        {stop, _} ->
            D;
        {ok, El} ->
            case State of
                resumable -> queue_only({From, To, El}, D);
                _ ->
                    Out = throng_stanza:set_from_to(El, throng_jid:to_binary(From),
                                                    throng_jid:to_binary(To)),
                    output(throng_stanza:kind(El), {From, To, El}, throng_xml:to_iolist(Out), D)
            end
    end.

%% Routed stanzas already in the mailbox go out in the same write.
routed_batch(_State, D, 0) ->
    D;
routed_batch(State, D, N) ->
    receive
        {route, From, To, El} -> routed_batch(State, deliver(State, From, To, El, D), N - 1)
    after 0 ->
            D
    end.

send_stanza(State, El, D) ->
    case State of
        resumable -> D;
        _ -> output(throng_stanza:kind(El), none, throng_xml:to_iolist(El), D)
    end.

%% A stanza to the client: counted, queued for XEP-0198 if enabled.
output(Kind, _Item, Bytes, #d{sm = undefined} = D) ->
    throng_metrics:stanza_out(Kind, Bytes),
    emit(Bytes, D);
output(Kind, Item, Bytes, #d{sm = SM} = D) ->
    throng_metrics:stanza_out(Kind, Bytes),
    D1 = emit(Bytes, D#d{sm = throng_stream_mgmt:sent(Item, SM)}),
    sm_maybe_request(D1).

queue_only(Item, #d{sm = SM} = D) ->
    D1 = D#d{sm = throng_stream_mgmt:sent(Item, SM)},
    case throng_stream_mgmt:pending(D1#d.sm) > throng_config:get([stream_management, max_unacked]) of
        true -> self() ! resume_overflow, D1;
        false -> D1
    end.

%%% XEP-0198 stream management

sm_element(<<"enable">>, El, #d{sm = undefined} = D) ->
    case throng_config:get([stream_management, enabled]) of
        false ->
            {next, session, emit(throng_stream_mgmt:failed_el('feature-not-implemented'), D)};
        true ->
            Timeout = throng_config:get([stream_management, resume_timeout]),
            Resume = Timeout > 0 andalso
                lists:member(throng_xml:attr(<<"resume">>, El), [<<"true">>, <<"1">>]),
            SM = throng_stream_mgmt:new(Resume),
            {next, session, emit(throng_stream_mgmt:enabled_el(throng_stream_mgmt:id(SM), Resume,
                                                               Timeout), D#d{sm = SM})}
    end;
sm_element(<<"enable">>, _El, D) ->
    {next, session, emit(throng_stream_mgmt:failed_el('unexpected-request'), D)};
sm_element(<<"r">>, _El, #d{sm = SM} = D) when SM =/= undefined ->
    {next, session, emit(throng_stream_mgmt:a_el(throng_stream_mgmt:in_count(SM)), D)};
sm_element(<<"a">>, El, #d{sm = SM} = D) when SM =/= undefined ->
    case string:to_integer(throng_xml:attr(<<"h">>, El, <<>>)) of
        {H, <<>>} when is_integer(H), H >= 0 ->
            case throng_stream_mgmt:ack(H, SM) of
                {ok, SM1} -> {next, session, D#d{sm = SM1}};
                {error, too_high} ->
                    stream_error('undefined-condition', <<"acknowledged more than was sent">>, D)
            end;
        _ ->
            stream_error('bad-format', <<"invalid h">>, D)
    end;
sm_element(_Name, _El, #d{sm = undefined} = D) ->
    stream_error('unsupported-stanza-type', <<"stream management is not enabled">>, D);
sm_element(_Name, _El, D) ->
    stream_error('unsupported-stanza-type', <<"unexpected stream management element">>, D).

sm_handled(#d{sm = undefined} = D) -> D;
sm_handled(#d{sm = SM} = D) -> D#d{sm = throng_stream_mgmt:handled(SM)}.

sm_maybe_request(#d{sm = SM} = D) ->
    case throng_stream_mgmt:should_request(SM, throng_config:get([stream_management, ack_every])) of
        true -> emit(throng_stream_mgmt:r_el(), D#d{sm = throng_stream_mgmt:requested(SM)});
        false -> D
    end.

%% A new connection asks to resume the session of previd.
resume(El, D) ->
    Fail = fun(Cond) -> {next, wait_bind, emit(throng_stream_mgmt:failed_el(Cond), D)} end,
    case {throng_stream_mgmt:parse_id(throng_xml:attr(<<"previd">>, El, <<>>)),
          string:to_integer(throng_xml:attr(<<"h">>, El, <<>>))} of
        {{ok, Pid}, {H, <<>>}} when is_integer(H), H >= 0, Pid =/= self() ->
            Bare = #jid{user = D#d.user, server = D#d.server},
            try gen_statem:call(Pid, {resume, Bare, H}, 5000) of
                ok -> {handover, Pid, D};
                {error, Cond} -> Fail(Cond)
            catch exit:_ -> Fail('item-not-found')
            end;
        _ ->
            Fail('item-not-found')
    end.

%% The old session agrees: give it the socket and the stream, and go.
%% The socket stops reading first; what the driver had already delivered to
%% this process goes along, in order.
handover(Pid, RestEvents, D) ->
    {ok, D1} = flush(D),
    Port = throng_socket:port(D1#d.sock),
    _ = throng_socket:pause(D1#d.sock),
    Pending = socket_messages(Port),
    case gen_tcp:controlling_process(Port, Pid) of
        ok ->
            Pid ! {resume_socket, D1#d.sock, D1#d.parser, RestEvents, Pending},
            {stop, {shutdown, resumed_elsewhere}, D1#d{sock = undefined}};
        {error, _} ->
            {stop, normal, D1}
    end.

%% In the old session: check the request, acknowledge what the client says it
%% received, then wait for the socket.
resume_request(From, Bare, H, State, #d{sm = SM, jid = JID} = D) ->
    Ok = State =:= resumable orelse State =:= session,
    case Ok andalso SM =/= undefined andalso throng_stream_mgmt:resumable(SM)
        andalso JID =/= undefined andalso throng_jid:bare(JID) =:= Bare of
        false ->
            {keep_state_and_data, [{reply, From, {error, 'item-not-found'}}]};
        true ->
            case throng_stream_mgmt:ack(H, SM) of
                {ok, SM1} -> {keep_state, D#d{sm = SM1}, [{reply, From, ok}]};
                {error, too_high} ->
                    {keep_state_and_data, [{reply, From, {error, 'unexpected-request'}}]}
            end
    end.

socket_messages(Port) ->
    receive
        {tcp, Port, _} = M -> [M | socket_messages(Port)];
        {tcp_closed, Port} = M -> [M | socket_messages(Port)];
        {tcp_error, Port, _} = M -> [M | socket_messages(Port)];
        {tcp_passive, Port} -> socket_messages(Port)
    after 0 -> []
    end.

resumed(Sock, Parser, Rest, Pending, #d{sm = SM} = D0) ->
    throng_metrics:incr(sm_resumed),
    Unacked = throng_stream_mgmt:unacked(SM),
    throng_metrics:add(sm_redelivered, length(Unacked)),
    %% What the old connection process had received is handled next, then
    %% the socket reads again.
    _ = [self() ! M || M <- Pending],
    D1 = D0#d{sock = Sock, parser = Parser, paused = false},
    _ = activate(D1),
    D2 = emit(throng_stream_mgmt:resumed_el(throng_stream_mgmt:id(SM),
                                            throng_stream_mgmt:in_count(SM)), D1),
    %% Re-send what was not acknowledged, in order (they stay queued until acked).
    D3 = lists:foldl(fun(Item, Acc) -> emit(item_bytes(Item, Acc), Acc) end, D2, Unacked),
    logger:info(#{what => session_resumed, jid => throng_jid:to_binary(D0#d.jid),
                  redelivered => length(Unacked)}),
    events(Rest, session, D3, []).

item_bytes({ext, Mod, Data}, D) -> element(2, Mod:item_bytes(Data, D#d.server));
item_bytes({From, To, El}, _D) ->
    throng_xml:to_iolist(throng_stanza:set_from_to(El, throng_jid:to_binary(From),
                                                   throng_jid:to_binary(To)));
item_bytes(none, _D) -> [].

%%% What extension modules ask of the session (throng_session:action())

ext_actions(Mod, Actions, D0) ->
    Step = fun({send, El}, {ok, D}) -> {ok, send_stanza(session, El, D)};
              ({timer, Ms, Msg}, {ok, D}) -> throng_session:ext_timer(Ms, Mod, Msg), {ok, D};
              ({stop, Cond, Text}, {ok, D}) -> {stop, Cond, Text, D};
              (_, Stop) -> Stop
           end,
    case lists:foldl(Step, {ok, D0}, Actions) of
        {ok, D} -> done(session, D);
        {stop, Cond, Text, D} -> stream_error(Cond, Text, D)
    end.

%%% Output

emit(Bytes, #d{out = Out} = D) ->
    D#d{out = [Out | Bytes]}.

flush(#d{out = []} = D) ->
    {ok, D};
flush(#d{out = Out, sock = Sock} = D) ->
    throng_metrics:add(bytes_out, iolist_size(Out)),
    case throng_socket:send(Sock, Out) of
        ok -> {ok, D#d{out = []}};
        {error, _} = E -> E
    end.

send_now(#d{sock = undefined}, _Bytes) -> ok;
send_now(D, Bytes) ->
    case flush(emit(Bytes, D)) of
        {ok, _} -> ok;
        {error, _} -> ok
    end.

%% Sends a stream error and ends the connection (RFC 6120 §4.9).
stream_error(Cond, Text, D) ->
    throng_metrics:incr(stream_errors),
    logger:info(#{what => stream_error, condition => Cond, text => Text, ip => D#d.ip,
                  jid => jid_text(D)}),
    _ = send_now(D, [throng_stream:error(Cond, Text), throng_stream:close()]),
    {stop, normal, D#d{out = []}}.

jid_text(#d{jid = undefined, user = undefined}) -> undefined;
jid_text(#d{jid = undefined, user = U, server = S}) -> <<U/binary, "@", S/binary>>;
jid_text(#d{jid = J}) -> throng_jid:to_binary(J).

%%% The end of a connection

%% The socket closed. A session with resumption enabled waits; any other ends.
closed(session, #d{sm = SM} = D) when SM =/= undefined ->
    case throng_stream_mgmt:resumable(SM) of
        true ->
            throng_socket:close(D#d.sock),
            {next_state, resumable, D#d{sock = undefined, out = []},
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
        shutdown -> _ = send_now(D, [throng_stream:error('system-shutdown', <<>>),
                                     throng_stream:close()]);
        {shutdown, _} -> ok;
        normal -> ok;
        _ -> logger:error(#{what => c2s_crashed, state => State, reason => Reason,
                            jid => jid_text(D)})
    end,
    end_session(D),
    case D#d.sock of
        undefined -> ok;
        Sock -> throng_socket:close(Sock)
    end,
    throng_metrics:add(connections_open, -1),
    throng_metrics:incr(connections_closed),
    ok.

end_session(#d{jid = undefined}) ->
    ok;
end_session(#d{jid = JID, prio = Prio, directed = Directed} = D) ->
    %% A resumed-elsewhere session keeps nothing: the session lives on in the
    %% process that took over.
    throng_sm:unregister(JID, self()),
    throng_hooks:notify(session_closed, JID#jid.server,
                        #{jid => JID, available => Prio =/= undefined}),
    case Prio of
        undefined -> ok;
        _ -> throng_presence:unavailable(JID, #xmlel{name = <<"presence">>,
                                                     attrs = [{<<"type">>, <<"unavailable">>}]},
                                         Directed)
    end,
    throng_metrics:incr(sessions_closed),
    logger:info(#{what => session_closed, jid => throng_jid:to_binary(JID)}),
    %% Nothing the server accepted is lost: unacknowledged stanzas and
    %% stanzas still in the mailbox are routed again (to another resource,
    %% or to offline storage).
    Unacked = case D#d.sm of
                  undefined -> [];
                  SM -> throng_stream_mgmt:unacked(SM)
              end,
    lists:foreach(fun(Item) -> reroute(Item, JID) end, Unacked),
    drain_mailbox(JID).

drain_mailbox(JID) ->
    receive
        {route, From, To, El} -> reroute({From, To, El}, JID), drain_mailbox(JID)
    after 0 -> ok
    end.

reroute(none, _JID) -> ok;
reroute({ext, Mod, Data}, JID) -> Mod:item_reroute(Data, JID);
reroute({From, To, #xmlel{name = <<"message">>} = El}, _JID) -> throng_router:route(From, To, El);
reroute({From, To, #xmlel{name = <<"iq">>} = El}, _JID) ->
    case throng_stanza:type(El) of
        T when T =:= <<"get">>; T =:= <<"set">> ->
            throng_router:bounce(From, To, El, 'service-unavailable');
        _ -> ok
    end;
reroute({_From, _To, _Presence}, _JID) -> ok.

-spec code_change(term(), atom(), #d{}, term()) -> {ok, atom(), #d{}}.
code_change(_Old, State, D, _Extra) ->
    {ok, State, D}.
