%% @doc One simulated XMPP user: one process, one connection.
%%
%% The user logs in (stream header, optional STARTTLS, optional in-band
%% registration, SASL, resource binding, session), then follows its session
%% profile: roster get, initial presence, chat messages to online contacts
%% after think times, a whitespace keepalive, and leaves when its session
%% length is over (unavailable presence, a short linger so that messages
%% already on their way arrive, stream end).
%%
%% Cost per idle user is what the tool is judged on, so this is a plain
%% process rather than a gen_statem: the state is one small record (the
%% session profile and the population live in persistent_term, shared by all
%% users of the VM); the XML parser is Throng's throng_xml_stream, whose
%% state holds no binary between stanzas; one timer at a time drives
%% keepalive, chat and the end of the session; and the process hibernates
%% after every event once logged in, so an idle user is a hibernated process
%% with a socket.
%%
%% Timing: each negotiation step is timed into its histogram (connect, tls,
%% register, auth, bind, login = connect start to session ready, roster,
%% presence = initial presence to its echo). Chat messages carry their send
%% time (erlang:system_time(microsecond)) in
%% <x xmlns='urn:throng:bench' r='RUN' t='...'/>; the receiving user
%% records the delivery latency. RUN names the run: a message of an earlier
%% run (the server kept it offline for a user who had left) is counted apart
%% (`msgs_stale', the summary's messages.from_earlier_runs), never as
%% received. All VMs of one host share the clock. With several
%% targets (throng_bench_targets) the element also names the sender's
%% target (s='T'), and the latency goes to the same-node or the cross-node
%% histogram as well.
-module(throng_bench_xmpp_user).

-include_lib("throng/include/throng.hrl").

-export([start/4, init/4, wake/1, wake_packed/1, config_key/0, is_user/1]).
%% Called by erlang:hibernate/3 when a hibernated user wakes.
-ignore_xref([{wake, 1}, {wake_packed, 1}]).

-define(CFG, {throng_bench_xmpp, cfg}).
-define(NS_BENCH, <<"urn:throng:bench">>).
-define(NS_MUC, <<"http://jabber.org/protocol/muc">>).
-define(NS_MUC_USER, <<"http://jabber.org/protocol/muc#user">>).
%% A room still locked by its creator (XEP-0045 §10.1.1) is tried again.
-define(MUC_RETRY_MS, 300).
%% see-other-host followed at most this many times in one login.
-define(MAX_REDIRECTS, 3).
%% auth fast: the XEP-0484 token of each user, per load VM (the job's table).
-define(FAST, throng_bench_fast_tokens).
%% tls_resume: the TLS session ticket of each user, per load VM (the job's table).
-define(TICKETS, throng_bench_tls_tickets).

-record(u, {conn :: throng_bench_xmpp_conn:conn() | undefined,
            xs :: throng_xml_stream:state() | undefined,
            n :: non_neg_integer(),           % user number
            tgt :: non_neg_integer(),         % the target it is on (0-based)
            redirects = 0 :: non_neg_integer(),   % see-other-host followed
            prof :: pos_integer(),            % index of the session profile
            step = connect :: atom(),
            tref :: reference() | undefined,   % deadline of the current step
            t_step = 0 :: integer(),           % us, start of the current step
            t_login = 0 :: integer(),          % us, start of the login
            sasl :: term(),                    % SCRAM state during authentication
            ka_at = infinity :: integer() | infinity,     % ms, monotonic
            chat_at = infinity :: integer() | infinity,
            muc_at = infinity :: integer() | infinity,   % next groupchat message
            rooms = [] :: [non_neg_integer()],           % rooms joined
            end_at = infinity :: integer() | infinity,
            timer_at = infinity :: integer() | infinity,
            pend = [] :: [{roster | presence, integer()}],  % side transactions
            online = [] :: [non_neg_integer()],             % contacts seen available
            rnd :: throng_bench_rand:tiny(),
            logged_in = false :: boolean(),
            presence_sent = false :: boolean()}).

%% @doc The persistent_term key holding this VM's compiled configuration.
-spec config_key() -> term().
config_key() -> ?CFG.

%% @doc Start user number N with session profile Prof for LengthMs.
%% Users are found again by their initial call (is_user/1), not through a
%% table: one entry less per user.
-spec start(non_neg_integer(), pos_integer(), non_neg_integer(), term()) -> pid().
start(N, Prof, LengthMs, Seed) ->
    spawn(?MODULE, init, [N, Prof, LengthMs, Seed]).

%% @doc Whether a process is a simulated user.
-spec is_user(pid()) -> boolean().
is_user(Pid) ->
    erlang:process_info(Pid, initial_call) =:= {initial_call, {?MODULE, init, 4}}.

%% @doc The user process (spawned by start/4).
-spec init(non_neg_integer(), pos_integer(), non_neg_integer(), term()) -> ok.
init(N, Prof, LengthMs, Seed) ->
    Cfg = cfg(),
    {Ip, Port} = element(target(N) + 1, maps:get(targets, Cfg)),
    Now = now_us(),
    U0 = #u{n = N, tgt = target(N), prof = Prof, rnd = throng_bench_rand:tiny_seed(Seed),
            t_step = Now, t_login = Now, end_at = now_ms() + LengthMs},
    case open(Ip, Port, Cfg, U0) of
        stop -> ok;
        U ->
            throng_bench_metrics:inc(users_connected),
            loop(U)
    end.

%% Connects user U to Ip:Port and opens its stream (after direct TLS if so
%% configured): the user waiting for the stream features, or stop (failed).
open(Ip, Port, Cfg, U0) ->
    #{srcs := Srcs, timeouts := #{connect := CT}} = Cfg,
    Src = element(U0#u.n rem tuple_size(Srcs) + 1, Srcs),
    T0 = now_us(),
    case throng_bench_xmpp_conn:connect(Ip, Port, Src, {CT, maps:get(socket_buffer, Cfg)}) of
        {ok, Conn} ->
            throng_bench_metrics:observe(connect, now_us() - T0),
            throng_bench_metrics:inc(connects),
            throng_bench_metrics:inc(conns_open),
            case connected(maps:get(tls, Cfg), Conn, U0#u{t_step = T0}) of
                {ok, U} ->
                    case send(U, header(Cfg)) of
                        ok ->
                            ok = throng_bench_xmpp_conn:activate(U#u.conn),
                            U;
                        {error, R} -> fail(U, R)
                    end;
                {error, R} ->
                    fail(U0#u{conn = Conn}, R)
            end;
        {error, R} ->
            fail(U0, R)
    end.

%% RFC 6120 §4.9.3.19: the server sends the user elsewhere (a cluster's
%% node sends it to its account's home node). The user closes this
%% connection and logs in at Where (the login's time runs on), at most
%% ?MAX_REDIRECTS times; it then counts as on the target at that address,
%% if Where is one of the targets.
redirect(_Where, #u{redirects = R}) when R >= ?MAX_REDIRECTS ->
    throw({fail, {stream_error, <<"see-other-host">>}});
redirect(Where, U = #u{conn = Old, redirects = R}) ->
    {Ip, Port} = case throng_host_port:parse(Where) of
                     error -> throw({fail, {bad_redirect, Where}});
                     {Host, P} ->
                         case inet:getaddr(Host, inet) of
                             {ok, A} -> {A, P};
                             {error, Why} -> throw({fail, {bad_redirect, Why}})
                         end
                 end,
    throng_bench_metrics:inc(redirects),
    throng_bench_metrics:sub(conns_open, 1),
    throng_bench_xmpp_conn:close(Old),
    Cfg = cfg(),
    Tgt = case index_of({Ip, Port}, tuple_to_list(maps:get(targets, Cfg)), 0) of
              none -> U#u.tgt;
              I -> I
          end,
    case open(Ip, Port, Cfg, (cancel_step(U))#u{conn = undefined, redirects = R + 1, tgt = Tgt,
                                                sasl = undefined}) of
        stop -> stop;
        U1 -> {redirected, U1}
    end.

index_of(_X, [], _I) -> none;
index_of(X, [X | _], I) -> I;
index_of(X, [_ | T], I) -> index_of(X, T, I + 1).

new_parser() -> throng_xml_stream:new(#{max_stanza_size => 4194304}).

%% Direct TLS (XEP-0368): the handshake starts at once (the stream header
%% goes out behind it), and the `tls' histogram runs from the connect to
%% the stream features; otherwise the stream starts in the clear.
connected(direct, Conn, U0) ->
    case tls(Conn, U0) of
        {ok, Tls} ->
            {ok, (enter(features_tls, U0#u{conn = Tls, xs = new_parser()}))#u{t_step = U0#u.t_step}};
        {error, _} = E -> E
    end;
connected(_, Conn, U0) ->
    {ok, enter(features, U0#u{conn = Conn, xs = new_parser()})}.

%% TLS as the client: fast_tls (its handshake runs as data arrives), or
%% with tls_resume OTP ssl, resuming with this user's ticket when it has
%% one (the handshake runs here).
tls(Conn, #u{n = N}) ->
    Cfg = cfg(),
    case maps:get(tls_resume, Cfg) of
        false -> throng_bench_xmpp_conn:starttls(Conn);
        true ->
            Ticket = case ets:lookup(?TICKETS, N) of
                         [{_, T}] -> T;
                         [] -> undefined
                     end,
            Timeout = maps:get(step, maps:get(timeouts, Cfg)),
            case throng_bench_xmpp_conn:starttls(Conn, Ticket, Timeout) of
                {ok, Tls, Resumed} ->
                    _ = Resumed andalso throng_bench_metrics:inc(tls_resumed),
                    {ok, Tls};
                {error, _} = E -> E
            end
    end.

%% @doc Where a hibernated user resumes.
-spec wake(#u{}) -> ok.
wake(U) -> loop(U).

%% @doc Where an idle hibernated user resumes (see pack/1).
-spec wake_packed(tuple()) -> ok.
wake_packed(P) -> loop(unpack(P)).

%% An idle user sleeps as a small tuple rather than the full record (about
%% 200 bytes less per user). Fields that are constant while online are not
%% kept, and a parser state equal to the VM-wide idle one (all users of a
%% server end up with the same state between stanzas) is replaced by the
%% atom `idle' and read back from persistent_term, which costs nothing.
pack(#u{conn = Conn, xs = Xs, n = N, tgt = G, prof = P, ka_at = KA, chat_at = C, end_at = E,
        timer_at = T, online = O, rnd = R, presence_sent = PS, muc_at = M, rooms = Rs}) ->
    {Conn, idle_xs(Xs), N, G, P, KA, C, E, T, O, R, PS, M, Rs}.

unpack({Conn, Xs, N, G, P, KA, C, E, T, O, R, PS, M, Rs}) ->
    #u{conn = Conn, xs = case Xs of idle -> persistent_term:get({?MODULE, idle_xs}); _ -> Xs end,
       n = N, tgt = G, prof = P, step = online, ka_at = KA, chat_at = C, end_at = E, timer_at = T,
       online = O, rnd = R, logged_in = true, presence_sent = PS, muc_at = M, rooms = Rs}.

idle_xs(Xs) ->
    case persistent_term:get({?MODULE, idle_xs}, undefined) of
        Xs -> idle;
        undefined ->
            case throng_xml_stream:buffered(Xs) of
                0 -> persistent_term:put({?MODULE, idle_xs}, Xs), idle;
                _ -> Xs
            end;
        _ -> Xs
    end.

loop(U) ->
    receive
        Msg ->
            case safe_handle(Msg, U) of
                stop -> ok;
                U1 -> continue(U1)
            end
    end.

continue(U = #u{step = online, pend = []}) ->
    erlang:hibernate(?MODULE, wake_packed, [pack(arm(U))]);
continue(U = #u{step = online}) ->
    %% waiting for a roster result or the presence echo
    erlang:hibernate(?MODULE, wake, [arm(U)]);
continue(U) -> loop(U).

safe_handle(Msg, U) ->
    try handle(throng_bench_xmpp_conn:tcp_message(Msg), U)
    catch
        throw:{fail, Reason} -> fail(U, Reason);
        C:R:St -> fail(U, {crash, C, R, hd(St ++ [none])})
    end.

%% Messages

%% A message of a connection this user closed (it was sent elsewhere):
%% what that stream still had is dropped.
handle(Msg, U = #u{conn = Conn})
  when (element(1, Msg) =:= tcp orelse element(1, Msg) =:= tcp_passive
        orelse element(1, Msg) =:= tcp_closed orelse element(1, Msg) =:= tcp_error),
       Conn =/= undefined, element(2, Msg) =/= element(2, Conn) ->
    U;
handle({ssl, session_ticket, Ticket}, U = #u{n = N}) ->
    %% tls_resume: the ticket this user's next login resumes with
    ets:insert(?TICKETS, {N, Ticket}),
    U;
handle({tcp, _S, Data}, U = #u{conn = Conn}) ->
    case throng_bench_xmpp_conn:decode(Conn, Data) of
        {ok, Plain} ->
            {Events, Xs} = throng_xml_stream:parse(U#u.xs, Plain),
            events(Events, U#u{xs = Xs});
        {error, R} -> throw({fail, R})
    end;
handle({tcp_passive, _S}, U = #u{conn = Conn}) ->
    case throng_bench_xmpp_conn:activate(Conn) of
        ok -> U;
        {error, closed} -> U;   % tcp_closed follows
        {error, R} -> throw({fail, R})
    end;
handle({tcp_closed, _S}, U = #u{step = Step}) when Step =:= closing; Step =:= linger ->
    finish(U);
handle({tcp_closed, _S}, _U) -> throw({fail, closed});
handle({tcp_error, _S, R}, _U) -> throw({fail, R});
handle({timeout, Ref, step}, U = #u{tref = Ref, step = closing}) -> finish(U);
handle({timeout, Ref, step}, #u{tref = Ref, step = Step}) ->
    throw({fail, {timeout, Step}});
handle({muc_retry, Room}, U = #u{step = online}) ->
    join_room(U, Room),
    U;
handle({wake, At}, U = #u{timer_at = T}) ->
    due(U#u{timer_at = case At of T -> infinity; _ -> T end});
handle(finish, U = #u{step = online}) ->
    leave(U, drain_ms());
handle(finish, U = #u{step = Step}) when Step =:= linger; Step =:= closing -> U;
handle(finish, U) ->
    %% stopped before the login completed: not an error
    finish(U);
handle(linger_done, U = #u{step = linger}) -> close_stream(U);
handle(_, U) -> U.

events([], U) -> U;
events([E | Es], U) ->
    case event(E, U) of
        stop -> stop;
        {redirected, U1} -> U1;    % the rest was the closed stream's
        U1 -> events(Es, U1)
    end.

event({stream_start, _Name, _Attrs}, U) -> U;
event(stream_end, U = #u{step = Step}) when Step =:= closing; Step =:= linger -> finish(U);
event(stream_end, _U) -> throw({fail, {stream_error, stream_end}});
event({error, Cond, _Text}, _U) -> throw({fail, {xml_error, Cond}});
event({stanza, El}, U) ->
    throng_bench_metrics:inc(stanzas_in),
    stanza(local(El#xmlel.name), El, U).

local(Name) ->
    case binary:match(Name, <<":">>) of
        nomatch -> Name;
        {P, 1} -> binary:part(Name, P + 1, byte_size(Name) - P - 1)
    end.

%% Negotiation

-spec stream_error(#xmlel{}) -> no_return().
stream_error(El) ->
    Cond = case throng_xml:subels(El) of
               [#xmlel{name = C} | _] -> C;
               [] -> <<"undefined">>
           end,
    throw({fail, {stream_error, Cond}}).

stanza(<<"error">>, El, U = #u{logged_in = false}) ->
    case throng_xml:subel(El, <<"see-other-host">>) of
        undefined -> stream_error(El);
        Other -> redirect(throng_xml:cdata(Other), U)
    end;
stanza(<<"error">>, El, _U) ->
    stream_error(El);
stanza(<<"features">>, El, U = #u{step = features}) ->
    Cfg = cfg(),
    case maps:get(tls, Cfg) of
        starttls ->
            case throng_xml:subel(El, <<"starttls">>) of
                undefined -> throw({fail, starttls_not_offered});
                _ ->
                    U1 = enter(proceed, U),
                    ok_send(U1, <<"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>">>),
                    U1
            end;
        none -> after_tls(El, U)
    end;
stanza(<<"proceed">>, _El, U = #u{step = proceed, conn = Conn, t_step = T0}) ->
    case tls(Conn, U) of
        {ok, Tls} ->
            _ = [ok = throng_bench_xmpp_conn:activate(Tls) || element(1, Tls) =:= ssl],
            U1 = (enter(features_tls, U#u{conn = Tls, xs = throng_xml_stream:reset(U#u.xs)}))#u{t_step = T0},
            ok_send(U1, header(cfg())),
            U1;
        {error, R} -> throw({fail, R})
    end;
stanza(<<"features">>, El, U = #u{step = features_tls, t_step = T0}) ->
    throng_bench_metrics:observe(tls, now_us() - T0),
    after_tls(El, U);
stanza(<<"iq">>, El, U = #u{step = register}) ->
    case throng_xml:attr(<<"type">>, El) of
        <<"result">> -> ok;
        <<"error">> ->
            %% an existing account is fine: the user is there
            case error_condition(El) of
                <<"conflict">> -> ok;
                C -> throw({fail, {register_error, C}})
            end;
        _ -> throw({fail, unexpected_register_reply})
    end,
    throng_bench_metrics:observe(register, now_us() - U#u.t_step),
    auth(U#u.sasl, U);
%% SASL2 (XEP-0388): a token login's success proves the server knew the
%% token; a new token (the first, or a successor) is kept for next time.
%% No stream restart: the authenticated stream's features follow, the
%% resource is already bound (Bind2).
stanza(<<"success">>, El, U = #u{step = auth_fast, sasl = {fast, Used}, n = N}) ->
    case Used of
        undefined -> ok;
        _ ->
            Proof = try base64:decode(throng_xml:subel_cdata(El, <<"additional-data">>))
                    catch error:_ -> <<>>
                    end,
            case throng_bench_sasl:ht_verify(Used, Proof) of
                ok -> throng_bench_metrics:inc(logins_fast);
                {error, Why} -> throw({fail, {auth_failure, Why}})
            end
    end,
    case throng_xml:subel(El, <<"token">>, ?NS_FAST) of
        undefined -> ok;
        T -> ets:insert(?FAST, {N, throng_xml:attr(<<"token">>, T)})
    end,
    throng_bench_metrics:observe(auth, now_us() - U#u.t_step),
    enter(features_sasl2, U#u{sasl = undefined});
stanza(<<"features">>, _El, U = #u{step = features_sasl2}) ->
    logged_in(U);
stanza(<<"failure">>, El, U = #u{step = auth_fast, n = N}) ->
    %% A refused token is not tried again: the next login asks for a new one.
    ets:delete(?FAST, N),
    stanza(<<"failure">>, El, U#u{step = auth});
stanza(<<"success">>, El, U = #u{step = Step}) when Step =:= auth; Step =:= auth_scram ->
    case Step of
        auth_scram ->
            case throng_bench_sasl:scram_verify(U#u.sasl, base64:decode(throng_xml:cdata(El))) of
                ok -> ok;
                {error, Why} -> throw({fail, {auth_failure, Why}})
            end;
        auth -> ok
    end,
    throng_bench_metrics:observe(auth, now_us() - U#u.t_step),
    U1 = enter(features_auth, U#u{xs = throng_xml_stream:reset(U#u.xs), sasl = undefined}),
    ok_send(U1, header(cfg())),
    U1;
stanza(<<"challenge">>, El, U = #u{step = auth_scram, sasl = {first, S}, n = N}) ->
    Challenge = base64:decode(throng_xml:cdata(El)),
    Users = maps:get(users, cfg()),
    case throng_bench_sasl:scram_final(S, Challenge, throng_bench_xmpp_users:password(Users, N)) of
        {ok, Final, S1} ->
            ok_send(U, [<<"<response xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>">>,
                        base64:encode(Final), <<"</response>">>]),
            U#u{sasl = S1};
        {error, Why} -> throw({fail, {auth_failure, Why}})
    end;
stanza(<<"challenge">>, El, U = #u{step = auth_scram, sasl = S}) ->
    %% server-final sent as a challenge: verify, answer with an empty response
    case throng_bench_sasl:scram_verify(S, base64:decode(throng_xml:cdata(El))) of
        ok ->
            ok_send(U, <<"<response xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>">>),
            U#u{step = auth};
        {error, Why} -> throw({fail, {auth_failure, Why}})
    end;
stanza(<<"failure">>, El, #u{step = Step}) when Step =:= auth; Step =:= auth_scram ->
    Cond = case throng_xml:subels(El) of
               [#xmlel{name = C} | _] -> C;
               [] -> <<"failure">>
           end,
    throw({fail, {auth_failure, Cond}});
stanza(<<"features">>, El, U = #u{step = features_auth}) ->
    Session = case throng_xml:subel(El, <<"session">>) of
                  undefined -> false;
                  S -> throng_xml:subel(S, <<"optional">>) =:= undefined
              end,
    Resource = maps:get(resource, cfg()),
    U1 = (enter(bind, U))#u{sasl = Session},
    ok_send(U1, [<<"<iq type='set' id='bind'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'>"
                   "<resource>">>, throng_xml:escape_text(Resource), <<"</resource></bind></iq>">>]),
    U1;
stanza(<<"iq">>, El, U = #u{step = bind, sasl = Session}) ->
    case throng_xml:attr(<<"type">>, El) of
        <<"result">> ->
            throng_bench_metrics:observe(bind, now_us() - U#u.t_step),
            case Session of
                true ->
                    U1 = (enter(session, U))#u{sasl = undefined},
                    ok_send(U1, <<"<iq type='set' id='sess'><session "
                                  "xmlns='urn:ietf:params:xml:ns:xmpp-session'/></iq>">>),
                    U1;
                false -> logged_in(U#u{sasl = undefined})
            end;
        _ -> throw({fail, {bind_error, error_condition(El)}})
    end;
stanza(<<"iq">>, El, U = #u{step = session}) ->
    case throng_xml:attr(<<"type">>, El) of
        <<"result">> -> logged_in(U);
        _ -> throw({fail, {session_error, error_condition(El)}})
    end;
%% Online
stanza(<<"message">>, El, U) ->
    Type = throng_xml:attr(<<"type">>, El),
    case Type of
        <<"error">> -> throng_bench_metrics:inc(msgs_bounced);
        _ ->
            case throng_xml:subel(El, <<"x">>, ?NS_BENCH) of
                undefined -> ok;
                X ->
                    case throng_xml:attr(<<"r">>, X) =:= maps:get(run, cfg()) of
                        true when Type =:= <<"groupchat">> -> received_muc(X);
                        true -> received(X, U);
                        %% sent by an earlier run (kept offline until now)
                        false -> throng_bench_metrics:inc(msgs_stale)
                    end
            end
    end,
    U;
stanza(<<"presence">>, El, U) -> presence(El, U);
stanza(<<"iq">>, El, U) ->
    iq(throng_xml:attr(<<"type">>, El), throng_xml:attr(<<"id">>, El, <<>>), El, U);
stanza(Name, _El, #u{step = Step}) when Step =/= online, Step =/= linger, Step =/= closing ->
    throw({fail, {unexpected, Step, Name}});
stanza(_Name, _El, U) -> U.

%% A groupchat message of this run, one of the room's copies: the fan-out
%% latency from its send time.
received_muc(X) ->
    case catch binary_to_integer(throng_xml:attr(<<"t">>, X, <<>>)) of
        T when is_integer(T) ->
            throng_bench_metrics:inc(muc_received),
            throng_bench_metrics:observe(delivery_muc, throng_bench_metrics:now_us() - T);
        _ -> ok
    end.

%% A chat message of this run: its delivery latency from its send time.
received(X, U) ->
    case catch binary_to_integer(throng_xml:attr(<<"t">>, X, <<>>)) of
        T when is_integer(T) ->
            Latency = throng_bench_metrics:now_us() - T,
            throng_bench_metrics:inc(msgs_received),
            %% Counted where the sender counted it as sent to: the user's
            %% first target (its sender cannot know where it was sent).
            throng_bench_metrics:target_inc(msgs_received, target(U#u.n)),
            throng_bench_metrics:observe(delivery, Latency),
            split_delivery(throng_xml:attr(<<"s">>, X), U#u.tgt, Latency);
        _ -> ok
    end.

after_tls(El, U) ->
    Cfg = cfg(),
    #{users := Users, auth := Method} = Cfg,
    Mechs = [throng_xml:cdata(M) || Ms <- [throng_xml:subel(El, <<"mechanisms">>)],
                                   Ms =/= undefined, M <- throng_xml:subels(Ms)],
    Mech = throng_bench_sasl:mechanism(Method),
    lists:member(Mech, Mechs) orelse throw({fail, {auth_failure, {mechanism_not_offered, Mech}}}),
    Method =/= fast orelse fast_offered(El)
        orelse throw({fail, {auth_failure, {mechanism_not_offered, <<"HT-SHA-256-NONE">>}}}),
    case maps:get(register, Cfg) of
        true ->
            N = U#u.n,
            U1 = (enter(register, U))#u{sasl = Mech},
            ok_send(U1, [<<"<iq type='set' id='reg'><query xmlns='jabber:iq:register'><username>">>,
                        throng_xml:escape_text(throng_bench_xmpp_users:name(Users, N)),
                        <<"</username><password>">>,
                        throng_xml:escape_text(throng_bench_xmpp_users:password(Users, N)),
                        <<"</password></query></iq>">>]),
            U1;
        false -> auth(Mech, U)
    end.

auth(Mech, U = #u{n = N}) ->
    #{users := Users, auth := Method} = Cfg = cfg(),
    Name = throng_bench_xmpp_users:name(Users, N),
    case Method of
        fast ->
            %% SASL2 with Bind2: with this user's token when it has one
            %% (HT-SHA-256-NONE, one message each way, no PBKDF2), else with
            %% its password, asking for a token.
            {MechName, Initial, Token, Ask} =
                case ets:lookup(?FAST, N) of
                    [{_, T}] ->
                        {<<"HT-SHA-256-NONE">>, throng_bench_sasl:ht(Name, T), T, []};
                    [] ->
                        {Mech, throng_bench_sasl:plain(Name, throng_bench_xmpp_users:password(Users, N)),
                         undefined,
                         <<"<request-token xmlns='urn:xmpp:fast:0' mechanism='HT-SHA-256-NONE'/>">>}
                end,
            U1 = (enter(auth_fast, U))#u{sasl = {fast, Token}},
            ok_send(U1, [<<"<authenticate xmlns='urn:xmpp:sasl:2' mechanism='">>, MechName,
                         <<"'><initial-response>">>, base64:encode(Initial),
                         <<"</initial-response><user-agent id='throng-bench-">>,
                         throng_xml:escape_text(Name), <<"'/>">>, Ask,
                         <<"<bind xmlns='urn:xmpp:bind:0'><tag>">>,
                         throng_xml:escape_text(maps:get(resource, Cfg)),
                         <<"</tag></bind></authenticate>">>]),
            U1;
        plain ->
            Initial = throng_bench_sasl:plain(Name, throng_bench_xmpp_users:password(Users, N)),
            U1 = enter(auth, U),
            ok_send(U1, auth_el(Mech, Initial)),
            U1;
        _ ->
            CbData = case Method of
                         Plus when Plus =:= 'scram-sha-1-plus'; Plus =:= 'scram-sha-256-plus' ->
                             case throng_bench_xmpp_conn:server_certificate(U#u.conn) of
                                 {ok, Cert} -> throng_bench_sasl:end_point_hash(Cert);
                                 {error, Why} -> throw({fail, {auth_failure, {channel_binding, Why}}})
                             end;
                         _ -> none
                     end,
            {First, S} = throng_bench_sasl:scram_first(
                           Method, Name, base64:encode(crypto:strong_rand_bytes(18)), CbData),
            U1 = (enter(auth_scram, U))#u{sasl = {first, S}},
            ok_send(U1, auth_el(Mech, First)),
            U1
    end.

%% SASL2 (XEP-0388) offers FAST's HT-SHA-256-NONE inline.
fast_offered(El) ->
    case throng_xml:subel(El, <<"authentication">>, ?NS_SASL2) of
        undefined -> false;
        A ->
            Fast = case throng_xml:subel(A, <<"inline">>) of
                       undefined -> undefined;
                       Inline -> throng_xml:subel(Inline, <<"fast">>, ?NS_FAST)
                   end,
            Fast =/= undefined andalso
                lists:member(<<"HT-SHA-256-NONE">>, [throng_xml:cdata(M) || M <- throng_xml:subels(Fast)])
    end.

auth_el(Mech, Data) ->
    [<<"<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='">>, Mech, <<"'>">>,
     base64:encode(Data), <<"</auth>">>].

logged_in(U = #u{t_login = T0, prof = P}) ->
    Now = now_us(),
    throng_bench_metrics:observe(login, Now - T0),
    throng_bench_metrics:inc(logins),
    throng_bench_metrics:inc(users_logged_in),
    throng_bench_metrics:inc(sessions),
    throng_bench_metrics:target_inc(logins, U#u.tgt),
    throng_bench_metrics:target_inc(sessions, U#u.tgt),
    Prof = profile(P),
    %% no step deadline while online: one timer per idle user, not two
    U1 = (cancel_step(U))#u{step = online, logged_in = true},
    U2 = case maps:get(roster, Prof) of
             true ->
                 ok_send(U1, <<"<iq type='get' id='roster'><query xmlns='jabber:iq:roster'/></iq>">>),
                 U1#u{pend = [{roster, Now} | U1#u.pend]};
             false -> U1
         end,
    U3 = case maps:get(presence, Prof) of
             true ->
                 TP = now_us(),
                 ok_send(U2, <<"<presence/>">>),
                 U2#u{pend = [{presence, TP} | U2#u.pend], presence_sent = true};
             false -> U2
         end,
    %% XEP-0352: a phone in a pocket says so once and stays inactive.
    maps:get(csi_inactive, Prof)
        andalso ok_send(U3, <<"<inactive xmlns='urn:xmpp:csi:0'/>">>),
    NowMs = now_ms(),
    KA = case maps:get(keepalive, Prof) of none -> infinity; K -> NowMs + K end,
    {ChatAt, Rnd} = case maps:get(chat, Prof) of
                        none -> {infinity, U3#u.rnd};
                        #{first_after := none, think := Think} ->
                            {D, R1} = throng_bench_rand:sample_tiny(Think, U3#u.rnd),
                            {NowMs + D, R1};
                        #{first_after := First} ->
                            {D, R1} = throng_bench_rand:sample_tiny(First, U3#u.rnd),
                            {NowMs + D, R1}
                    end,
    U4 = U3#u{ka_at = KA, chat_at = ChatAt, rnd = Rnd},
    join_rooms(maps:get(muc, Prof, none), NowMs, U4).

join_rooms(none, _NowMs, U) ->
    U;
join_rooms(#{rooms := Count, think := MucThink} = Muc, NowMs, U) ->
    #{rooms := Rooms} = maps:get(muc, cfg()),
    [join_room(U, (U#u.n + I) rem Rooms) || I <- lists:seq(0, min(Count, Rooms) - 1)],
    case {MucThink, maps:get(first_after, Muc)} of
        {none, _} -> U;
        {_, none} ->
            {Delay, R} = throng_bench_rand:sample_tiny(MucThink, U#u.rnd),
            U#u{muc_at = NowMs + max(Delay, 1), rnd = R};
        {_, First} ->
            {Delay, R} = throng_bench_rand:sample_tiny(First, U#u.rnd),
            U#u{muc_at = NowMs + max(Delay, 1), rnd = R}
    end.

%% XEP-0045 rooms: benchroomR@SERVICE, joined as the user's name, without
%% history.

room_jid(Room) ->
    #{service := Service} = maps:get(muc, cfg()),
    [<<"benchroom">>, integer_to_binary(Room), $@, Service].

join_room(U = #u{n = N}, Room) ->
    #{users := Users} = cfg(),
    ok_send(U, [<<"<presence to='">>, room_jid(Room), $/, throng_bench_xmpp_users:name(Users, N),
                <<"'><x xmlns='http://jabber.org/protocol/muc'><history maxstanzas='0'/></x></presence>">>]).

%% Presence from a room: our own (110) means joined, and 201 that we created
%% it (it is unlocked as an instant room); a locked room is tried again.
room_presence(El, Room, U) ->
    case throng_xml:attr(<<"type">>, El) of
        <<"error">> ->
            case error_condition(El) of
                <<"item-not-found">> ->
                    erlang:send_after(?MUC_RETRY_MS, self(), {muc_retry, Room}),
                    U;
                _ ->
                    throng_bench_metrics:inc(muc_join_errors),
                    U
            end;
        undefined ->
            Codes = case throng_xml:subel(El, <<"x">>, ?NS_MUC_USER) of
                        undefined -> [];
                        X -> [throng_xml:attr(<<"code">>, S) || #xmlel{name = <<"status">>} = S <- throng_xml:subels(X)]
                    end,
            case lists:member(<<"110">>, Codes) andalso not lists:member(Room, U#u.rooms) of
                false -> U;
                true ->
                    lists:member(<<"201">>, Codes) andalso
                        ok_send(U, [<<"<iq type='set' id='mucinst' to='">>, room_jid(Room),
                                    <<"'><query xmlns='http://jabber.org/protocol/muc#owner'>"
                                      "<x xmlns='jabber:x:data' type='submit'/></query></iq>">>]),
                    throng_bench_metrics:inc(muc_joined),
                    U#u{rooms = [Room | U#u.rooms]}
            end;
        _ -> U
    end.

%% The room of a JID of the scenario's MUC service, or none.
room_of(From) ->
    #{service := Service} = maps:get(muc, cfg()),
    case binary:split(From, <<"@">>) of
        [<<"benchroom", R/binary>>, Rest] ->
            case binary:split(Rest, <<"/">>) of
                [Service | _] -> try binary_to_integer(R) catch error:badarg -> none end;
                _ -> none
            end;
        _ -> none
    end.

presence(El, U) ->
    case room_of(throng_xml:attr(<<"from">>, El, <<>>)) of
        none -> contact_presence(El, U);
        Room -> room_presence(El, Room, U)
    end.

contact_presence(El, U = #u{n = N, prof = P}) ->
    From = throng_xml:attr(<<"from">>, El, <<>>),
    Type = throng_xml:attr(<<"type">>, El),
    #{users := Users} = cfg(),
    case throng_bench_xmpp_users:number_of(Users, localpart(From)) of
        N when Type =:= undefined ->
            %% our own initial presence, reflected by the server
            case lists:keytake(presence, 1, U#u.pend) of
                {value, {presence, T0}, Rest} ->
                    throng_bench_metrics:observe(presence, now_us() - T0),
                    U#u{pend = Rest};
                false -> U
            end;
        N -> U;
        undefined -> U;
        M ->
            case maps:get(chat, profile(P)) of
                none -> U;
                _ when Type =:= undefined ->
                    case lists:member(M, U#u.online) of
                        true -> U;
                        false -> U#u{online = [M | U#u.online]}
                    end;
                _ when Type =:= <<"unavailable">> -> U#u{online = lists:delete(M, U#u.online)};
                _ -> U
            end
    end.

localpart(Jid) ->
    case binary:split(Jid, <<"@">>) of
        [L, _] -> L;
        _ -> <<>>
    end.

iq(<<"result">>, <<"roster">>, _El, U) ->
    case lists:keytake(roster, 1, U#u.pend) of
        {value, {roster, T0}, Rest} ->
            throng_bench_metrics:observe(roster, now_us() - T0),
            U#u{pend = Rest};
        false -> U
    end;
iq(<<"error">>, <<"roster">>, El, _U) -> throw({fail, {roster_error, error_condition(El)}});
iq(Type, Id, El, U) when Type =:= <<"get">>; Type =:= <<"set">> ->
    %% answer the server (XEP-0199 ping gets a result, anything else an error)
    To = throng_xml:attr(<<"from">>, El, <<>>),
    ToAttr = case To of <<>> -> []; _ -> [<<" to='">>, throng_xml:escape_attr(To), <<"'">>] end,
    Reply = case throng_xml:subel(El, <<"ping">>, ?NS_PING) of
                undefined ->
                    [<<"<iq type='error' id='">>, throng_xml:escape_attr(Id), <<"'">>, ToAttr,
                     <<"><error type='cancel'><service-unavailable "
                       "xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>">>];
                _ ->
                    [<<"<iq type='result' id='">>, throng_xml:escape_attr(Id), <<"'">>, ToAttr, <<"/>">>]
            end,
    ok_send(U, Reply),
    U;
iq(_, _, _, U) -> U.

error_condition(El) ->
    case throng_xml:subel(El, <<"error">>) of
        undefined -> <<"undefined">>;
        E ->
            case [C || #xmlel{name = C, attrs = A} <- throng_xml:subels(E),
                       lists:member({<<"xmlns">>, ?NS_STANZAS}, A)] of
                [C | _] -> C;
                [] -> <<"undefined">>
            end
    end.

%% Timed actions while online: one timer at a time, for the earliest of
%% keepalive, next chat message and end of session.

arm(U = #u{ka_at = KA, chat_at = Chat, muc_at = Muc, end_at = End, timer_at = T}) ->
    Next = lists:min([KA, Chat, Muc, End]),
    case Next < T of
        true ->
            ok = throng_bench_wheel:wake_at(Next),
            U#u{timer_at = Next};
        false -> U
    end.

due(U = #u{step = online}) ->
    Now = now_ms(),
    U1 = case U#u.end_at =< Now of
             true -> leave(U, drain_ms());
             false -> U
         end,
    case U1 of
        #u{step = online} ->
            U2a = case U1#u.chat_at =< Now of
                      true -> chat(U1, Now);
                      false -> U1
                  end,
            U2 = case U2a#u.muc_at =< Now of
                     true -> groupchat(U2a, Now);
                     false -> U2a
                 end,
            case U2#u.ka_at =< Now of
                true ->
                    ok_send_raw(U2, <<" ">>),
                    U2#u{ka_at = Now + maps:get(keepalive, profile(U2#u.prof))};
                false -> U2
            end;
        _ -> U1
    end;
due(U) -> U.

chat(U = #u{end_at = End, prof = P}, Now) ->
    case Now >= End - maps:get(quiet_end, maps:get(chat, profile(P))) of
        true -> U#u{chat_at = infinity};          %% the session's quiet end
        false -> chat_now(U, Now)
    end.

chat_now(U = #u{online = [], prof = P, rnd = R}, Now) ->
    %% nobody to talk to yet: count it and try again after the next think time
    throng_bench_metrics:inc(msgs_unsent),
    {D, R1} = throng_bench_rand:sample_tiny(maps:get(think, maps:get(chat, profile(P))), R),
    U#u{chat_at = Now + max(D, 1), rnd = R1};
chat_now(U = #u{online = Online, prof = P, rnd = R0}, Now) ->
    #{think := Think, size := Size} = maps:get(chat, profile(P)),
    {X, R1} = throng_bench_rand:tiny_uniform(R0),
    To = lists:nth(floor(X * length(Online)) + 1, Online),
    #{users := Users, domain := Domain, targets := Targets} = cfg(),
    Stamp = integer_to_binary(throng_bench_metrics:now_us()),
    %% Dest: the recipient's first target (it may have been sent elsewhere).
    {From, Dest} = {U#u.tgt, target(To)},
    ok_send(U, [<<"<message type='chat' to='">>, throng_bench_xmpp_users:name(Users, To), $@, Domain,
                <<"'><body>">>, body(Size), <<"</body><x xmlns='urn:throng:bench' r='">>, maps:get(run, cfg()), <<"' t='">>, Stamp,
                case tuple_size(Targets) of
                    1 -> <<>>;
                    _ -> [<<"' s='">>, integer_to_binary(From)]
                end,
                <<"'/></message>">>]),
    throng_bench_metrics:inc(msgs_sent),
    throng_bench_metrics:target_inc(msgs_sent_to, Dest),
    throng_bench_targets:pair(From, Dest) =:= cross andalso
        throng_bench_metrics:inc(msgs_sent_cross),
    {D, R2} = throng_bench_rand:sample_tiny(Think, R1),
    U#u{chat_at = Now + max(D, 1), rnd = R2}.

%% A groupchat message to one of the rooms joined (none yet: try later).
groupchat(U = #u{rooms = Rooms, prof = P, rnd = R0}, Now) ->
    #{think := Think, size := Size} = maps:get(muc, profile(P)),
    R2 = case Rooms of
             [] -> R0;
             _ ->
                 {X, R1} = throng_bench_rand:tiny_uniform(R0),
                 Room = lists:nth(floor(X * length(Rooms)) + 1, Rooms),
                 Stamp = integer_to_binary(throng_bench_metrics:now_us()),
                 ok_send(U, [<<"<message type='groupchat' to='">>, room_jid(Room), <<"'><body>">>,
                             body(Size), <<"</body><x xmlns='urn:throng:bench' r='">>,
                             maps:get(run, cfg()), <<"' t='">>, Stamp, <<"'/></message>">>]),
                 throng_bench_metrics:inc(muc_sent),
                 R1
         end,
    {D, R3} = throng_bench_rand:sample_tiny(Think, R2),
    U#u{muc_at = Now + max(D, 1), rnd = R3}.

body(Size) ->
    case persistent_term:get({?MODULE, body, Size}, undefined) of
        undefined ->
            B = binary:copy(<<"x">>, Size),
            persistent_term:put({?MODULE, body, Size}, B),
            B;
        B -> B
    end.

%% Leaving

leave(U = #u{presence_sent = P}, Linger) ->
    P andalso ok_send(U, <<"<presence type='unavailable'/>">>),
    erlang:send_after(Linger, self(), linger_done),
    (cancel_step(U))#u{step = linger, ka_at = infinity, chat_at = infinity, muc_at = infinity,
                       end_at = infinity, pend = []}.

close_stream(U) ->
    _ = send(U, <<"</stream:stream>">>),
    enter(closing, U, 5000).

drain_ms() -> maps:get(drain, cfg()).

finish(U) -> done(U, users_finished).

fail(U, Reason) ->
    throng_bench_metrics:count_error(Reason),
    throng_bench_metrics:target_inc(failed, U#u.tgt),
    done(U, users_failed).

done(U = #u{conn = Conn, logged_in = L, tgt = G}, Counter) ->
    throng_bench_metrics:inc(Counter),
    L andalso throng_bench_metrics:sub(sessions, 1),
    L andalso throng_bench_metrics:target_sub(sessions, G),
    case Conn of
        undefined -> ok;
        _ ->
            throng_bench_metrics:sub(conns_open, 1),
            throng_bench_xmpp_conn:close(Conn)
    end,
    _ = U,
    stop.

%% Helpers

enter(Step, U) -> enter(Step, U, maps:get(step, maps:get(timeouts, cfg()))).

enter(Step, U, Timeout) ->
    U1 = cancel_step(U),
    U1#u{step = Step, tref = erlang:start_timer(Timeout, self(), step), t_step = now_us()}.

cancel_step(U = #u{tref = undefined}) -> U;
cancel_step(U = #u{tref = Ref}) ->
    _ = erlang:cancel_timer(Ref, [{async, true}, {info, false}]),
    U#u{tref = undefined}.

ok_send(U, Stanza) ->
    throng_bench_metrics:inc(stanzas_out),
    ok_send_raw(U, Stanza).

ok_send_raw(#u{conn = Conn}, Data) ->
    case throng_bench_xmpp_conn:send(Conn, Data) of
        ok -> true;
        {error, R} -> throw({fail, R})
    end.

send(#u{conn = Conn}, Data) -> throng_bench_xmpp_conn:send(Conn, Data).

header(#{domain := D}) ->
    [<<"<?xml version='1.0'?><stream:stream to='">>, D,
     <<"' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>">>].

cfg() -> persistent_term:get(?CFG).

%% The target (0-based) user N connects to.
target(N) -> throng_bench_targets:of_user(N, tuple_size(maps:get(targets, cfg()))).

%% With several targets a message says which one its sender is on (s='T'):
%% its latency also goes to the same-node or the cross-node histogram.
split_delivery(undefined, _Own, _Latency) -> ok;
split_delivery(S, Own, Latency) ->
    case catch binary_to_integer(S) of
        From when is_integer(From) ->
            throng_bench_metrics:observe(case throng_bench_targets:pair(From, Own) of
                                             same -> delivery_same;
                                             cross -> delivery_cross
                                         end, Latency);
        _ -> ok
    end.

profile(I) -> element(I, maps:get(profiles, cfg())).

now_us() -> erlang:monotonic_time(microsecond).

now_ms() -> erlang:monotonic_time(millisecond).
