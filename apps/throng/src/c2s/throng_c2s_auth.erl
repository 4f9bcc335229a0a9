%% @doc STARTTLS (RFC 6120 §5) and SASL (RFC 6120 §6) for a client
%% connection: the glue between the stream and the pure SASL state machine
%% ({@link throng_sasl}); brute-force limits ({@link throng_auth_limits}):
%% an attempt from an address or for an account with too many failures is
%% refused before any password check, and failures from one address are
%% answered ever later.
-module(throng_c2s_auth).

-include("throng.hrl").
-include("throng_c2s.hrl").

-export([starttls/1, sasl_start/2, sasl2_start/2, sasl_step/2, failure/2]).

%%% STARTTLS (RFC 6120 §5)

-spec starttls(data()) -> throng_c2s:element_result().
starttls(D0) ->
    D = throng_c2s_io:emit(["<proceed xmlns='", ?NS_TLS, "'/>"], D0),
    case throng_c2s_io:flush(D) of
        {ok, D1} ->
            case throng_transport:upgrade(D1#d.sock, throng_transport_tls, []) of
                {ok, TLS} ->
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

-spec sasl_start(#xmlel{}, data()) -> throng_c2s:element_result().
sasl_start(El, D) ->
    Mech = throng_xml:attr(<<"mechanism">>, El, <<>>),
    case lists:member(Mech, throng_c2s_mechs:mechanisms(D#d.sock)) of
        false ->
            {next, negotiating, throng_c2s_io:emit(sasl_failure('invalid-mechanism'), D)};
        true ->
            case sasl_data(El) of
                {ok, Initial} ->
                    limited(fun() -> throng_sasl:start(Mech, Initial, sasl_ctx(D)) end, legacy, D);
                error ->
                    {next, negotiating, throng_c2s_io:emit(sasl_failure('incorrect-encoding'), D)}
            end
    end.

%% @doc XEP-0388 <authenticate/>: the same SASL exchange, with what the
%% client asks inline (Bind2, a FAST token) done at its success
%% ({@link throng_c2s_sasl2}).
-spec sasl2_start(#xmlel{}, data()) -> throng_c2s:element_result().
sasl2_start(El, D) ->
    Req = throng_c2s_sasl2:request(El),
    Mech = throng_xml:attr(<<"mechanism">>, El, <<>>),
    Initial = case throng_xml:subel(El, <<"initial-response">>) of
                  undefined -> {ok, <<>>};
                  IR -> sasl_data(IR)
              end,
    Dialect = {sasl2, Req},
    Fail = fun(Cond) -> {next, negotiating, throng_c2s_io:emit(throng_c2s_sasl2:failure_el(Cond), D)} end,
    case {throng_c2s_sasl2:mechanism_ok(Mech, Req, D), Initial} of
        {false, _} -> Fail('invalid-mechanism');
        {_, error} -> Fail('incorrect-encoding');
        {true, {ok, Data}} ->
            Ctx = throng_c2s_sasl2:sasl_ctx(Req, sasl_ctx(D), D),
            limited(fun() -> throng_sasl:start(Mech, Data, Ctx) end, Dialect, D)
    end.

-spec sasl_step(#xmlel{}, data()) -> throng_c2s:element_result().
sasl_step(El, #d{sasl = {Dialect, St}} = D) ->
    case sasl_data(El) of
        {ok, Resp} -> limited(fun() -> throng_sasl:step(St, Resp) end, Dialect, D);
        error -> {next, negotiating, throng_c2s_io:emit(failure_el('incorrect-encoding', Dialect),
                                                        D#d{sasl = undefined})}
    end.

%% @doc The failure element for the exchange under way (SASL or SASL2).
-spec failure(atom(), data()) -> iodata().
failure(Cond, #d{sasl = {Dialect, _}}) -> failure_el(Cond, Dialect);
failure(Cond, _D) -> sasl_failure(Cond).

failure_el(Cond, legacy) -> sasl_failure(Cond);
failure_el(Cond, {sasl2, _}) -> throng_c2s_sasl2:failure_el(Cond).

%% The address's failure bucket is looked at before anything the client
%% sent is: a refused attempt costs one ETS read.
limited(Run, Dialect, D) ->
    case throng_auth_limits:check_address(D#d.ip) of
        ok ->
            sasl_result(Run(), Dialect, D);
        {refused, Failures} ->
            rate_limited(address, #{failures => Failures}, D#d.server, D#d.ip),
            sasl_result({error, 'temporary-auth-failure', undefined}, Dialect, D)
    end.

%% The SASL context, with the per-account check: run after the user name is
%% known and before any credential is looked up.
%% (The fun is kept in the SCRAM state: it holds the server and address only.)
sasl_ctx(#d{server = Server, ip = IP, sock = Sock, lref = LRef}) ->
    Allow = fun(User) ->
                    throng_auth_limits:account_allowed(User, Server, IP)
                        orelse rate_limited(account,
                                            #{user => User,
                                              failures => throng_auth_limits:
                                                  account_failures(User, Server)},
                                            Server, IP)
            end,
    Ctx = (throng_auth:sasl_ctx(Server))#{allow_user => Allow,
                                          channel_bindings => throng_c2s_mechs:channel_bindings(Sock)},
    %% A listener with redirect_to_home, in a cluster: the client is sent to
    %% its account's home node if that is another.
    case throng_c2s_io:lopt(LRef, redirect_to_home) andalso throng_members:clustered() of
        true -> Ctx#{other_host => fun(User) -> throng_node_addr:redirect({User, Server}) end};
        false -> Ctx
    end.

-spec rate_limited(address | account, map(), binary(), inet:ip_address() | undefined) -> false.
rate_limited(Scope, Info, Server, IP) ->
    throng_metrics:incr(auth_rate_limited),
    logger:notice(Info#{what => auth_rate_limited, scope => Scope, server => Server, ip => IP}),
    false.

sasl_data(El) ->
    case throng_xml:cdata(El) of
        <<>> -> {ok, <<>>};
        <<"=">> -> {ok, <<>>};
        B64 ->
            try {ok, base64:decode(B64)}
            catch _:_ -> error
            end
    end.

sasl_result({continue, Challenge, St}, legacy, D) ->
    {next, sasl, throng_c2s_io:emit(["<challenge xmlns='", ?NS_SASL, "'>", base64:encode(Challenge),
                       "</challenge>"], D#d{sasl = {legacy, St}})};
sasl_result({continue, Challenge, St}, {sasl2, _} = Dialect, D) ->
    {next, sasl, throng_c2s_io:emit(throng_c2s_sasl2:challenge_el(Challenge),
                                    D#d{sasl = {Dialect, St}})};
sasl_result({success, Extra, User}, Dialect, D) ->
    sasl_result({success, Extra, User, password}, Dialect, D);
sasl_result({success, Extra, User, How}, Dialect, D) ->
    %% Right credentials (or token) for an account an administrator
    %% disabled: refused, and not counted as a guess.
    %% A store that cannot say (a PLAIN login answered from the cache while
    %% the database is down) is temporary-auth-failure, as a credential
    %% read that fails.
    try throng_auth:disabled_at_login(User, D#d.server) of
        true -> sasl_result({error, 'account-disabled', User}, Dialect, D);
        false -> succeeded(Extra, User, How, Dialect, D)
    catch error:{storage_failed, Why} ->
            logger:warning(#{what => disabled_check_failed, user => User, server => D#d.server,
                             reason => Why}),
            sasl_result({error, 'temporary-auth-failure', User}, Dialect, D)
    end;
sasl_result({see_other_host, Where, User}, _Dialect, D) ->
    %% The account's home is another node: the client logs in there
    %% (nothing was checked here; the stream ends).
    throng_metrics:incr(redirected_home),
    logger:info(#{what => sent_to_home, user => User, server => D#d.server, ip => D#d.ip,
                  where => Where}),
    throng_c2s_io:stream_error({'see-other-host', Where}, <<>>, D#d{sasl = undefined});
sasl_result({error, Cond, User}, Dialect, D) ->
    failed(Cond, User, Dialect, D).

succeeded(Extra, User, How, Dialect, D) ->
    throng_metrics:incr(logins),
    logger:info(#{what => authenticated, user => User, server => D#d.server, ip => D#d.ip}),
    case Dialect of
        legacy ->
            Success = case Extra of
                          <<>> -> ["<success xmlns='", ?NS_SASL, "'/>"];
                          _ -> ["<success xmlns='", ?NS_SASL, "'>", base64:encode(Extra), "</success>"]
                      end,
            {restart, wait_header, throng_c2s_io:emit(Success, D#d{user = User, sasl = undefined,
                                                      parser = throng_xml_stream:reset(D#d.parser)})};
        {sasl2, Req} ->
            throng_c2s_sasl2:success(Extra, User, How, Req, D#d{sasl = undefined})
    end.

failed(Cond, User, Dialect, D) ->
    throng_metrics:incr(auth_failures),
    %% A refusal (rate limit, a disabled account) or a store that cannot
    %% answer is no guess: not counted against the address or the account.
    N = case Cond of
            _ when Cond =:= 'temporary-auth-failure'; Cond =:= 'account-disabled' ->
                throng_auth_limits:address_failures(D#d.ip);
            _ -> throng_auth_limits:failed(D#d.ip, User, D#d.server, Cond)
        end,
    Failures = D#d.auth_failures + 1,
    logger:notice(#{what => auth_failed, user => User, server => D#d.server,
                    ip => D#d.ip, condition => Cond, failures_from_ip => N}),
    D1 = D#d{sasl = undefined, auth_failures = Failures},
    Failure = failure_el(Cond, Dialect),
    case Failures >= ?MAX_AUTH_FAILURES of
        true ->
            throng_c2s_io:stream_error('policy-violation', <<"too many authentication failures">>,
                         throng_c2s_io:emit(Failure, D1));
        false ->
            %% Repeated failures from one address are answered ever later
            %% (the socket is not read meanwhile); N is the failures in the
            %% address's bucket.
            case failure_delay(N) of
                0 -> {next, negotiating, throng_c2s_io:emit(Failure, D1)};
                Ms -> {next, negotiating, throng_c2s_io:pause(D1),
                       [{{timeout, auth_delay}, Ms, Failure}]}
            end
    end.

failure_delay(N) when N =< 1 -> 0;
failure_delay(N) ->
    min(throng_config:get([auth, max_failure_delay]), 100 bsl min(N - 2, 16)).

sasl_failure(Cond) ->
    ["<failure xmlns='", ?NS_SASL, "'><", atom_to_binary(Cond), "/></failure>"].
