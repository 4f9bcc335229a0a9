%% @doc Server CPU and round trips per login over TLS, by the way a client
%% logs in (bench/tls/logins.sh runs this in its own BEAM against a release
%% node). Each variant logs N users in (C at a time; OTP ssl clients, TLS
%% 1.3, RSA-2048 certificate), keeps them until all are in, samples the
%% server's CPU time (/proc) around the logins only, then closes them.
%%
%% Round trips: the times the client waits for the server, from the TCP
%% connect to the bind result (TCP's own handshake counted as one).
-module(tls_logins).

-export([main/1]).

-define(HDR, "<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' "
             "xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>").

main([OsPidS, StartTlsPortS, DirectPortS, NS, CS]) ->
    OsPid = list_to_integer(OsPidS),
    Ports = #{starttls => list_to_integer(StartTlsPortS), direct => list_to_integer(DirectPortS)},
    N = list_to_integer(NS),
    C = list_to_integer(CS),
    {ok, _} = application:ensure_all_started(ssl),
    All =
        [{"plain TCP + PLAIN, first login (no TLS: the baseline)", tcp, full, plain, 2 * N + 1},
         {"plain TCP + PLAIN, again (the server's PLAIN cache)", tcp, full, plain, 2 * N + 1},
         {"STARTTLS + PLAIN, first login (PBKDF2 on the server)", starttls, full, plain, 1},
         {"STARTTLS + PLAIN, again (the server's PLAIN cache)", starttls, full, plain, 1},
         {"STARTTLS + SCRAM-SHA-256", starttls, full, scram, N + 1},
         {"STARTTLS + SCRAM-SHA-256-PLUS (tls-server-end-point)", starttls, full, scram_plus, N + 1},
         {"direct TLS + SCRAM-SHA-256", direct, full, scram, N + 1},
         {"direct TLS, resumed (ticket) + SCRAM-SHA-256", direct, resumed, scram, N + 1},
         {"direct TLS, resumed (ticket) + PLAIN (cached)", direct, resumed, plain, 1},
         {"direct TLS + SASL2 FAST (HT-SHA-256-NONE) + Bind2", direct, full, fast, 1},
         {"direct TLS, resumed (ticket) + SASL2 FAST + Bind2", direct, resumed, fast, 1},
         {"direct TLS, resumed (ticket) + FAST + SM resumed inline", direct, resumed,
          fast_resume, 1}],
    %% TLS_VARIANTS=3,11,12: only those rows (1-based, in this order).
    Variants = case os:getenv("TLS_VARIANTS", "") of
                   "" -> All;
                   Sel -> [lists:nth(list_to_integer(I), All) || I <- string:lexemes(Sel, ",")]
               end,
    io:format("~-56s ~7s ~17s ~12s ~8s~n",
              ["variant", "logins", "server CPU/login", "round trips", "resumed"]),
    [run(V, Ports, OsPid, N, C) || V <- Variants],
    halt(0).

run({Label, Kind, Tls, Auth, First}, Ports, OsPid, N, C) ->
    Port = maps:get(case Kind of tcp -> starttls; _ -> Kind end, Ports),
    %% FAST needs a token per user: a SASL2 PLAIN login asks for it (not
    %% measured).
    _ = [fetch_tokens(Kind, Port, First, N) || Auth =:= fast orelse Auth =:= fast_resume],
    %% Resumption needs a ticket per user: a full login each, keeping the
    %% ticket it brings (manual tickets, so that resumed logins can run C
    %% at a time; OTP's automatic ticket store cannot). Not measured. For
    %% fast_resume that login enables stream management and its connection
    %% is then cut, leaving a session to resume.
    _ = [fetch_tickets(Port, Auth, First, N, C) || Tls =:= resumed],
    around("start"),
    Cpu0 = cpu_ms(OsPid),
    Results = in_parallel(lists:seq(First, First + N - 1), C,
                          fun(I) -> login(Kind, Port, Tls, Auth, I) end),
    Cpu1 = cpu_ms(OsPid),
    around("stop"),
    Trips = lists:usort([T || {_, T, _} <- Results]),
    Resumed = length([R || {_, _, true} = R <- Results]),
    [close(S) || {S, _, _} <- Results],
    io:format("~-56s ~7b ~14.3f ms ~12w ~7.1f%~n",
              [Label, length(Results), (Cpu1 - Cpu0) / N, Trips, 100 * Resumed / N]),
    timer:sleep(1000).

tls_opts(full, _I) -> [{session_tickets, disabled}];
tls_opts(resumed, I) -> [{session_tickets, manual}, {use_ticket, [persistent_term:get({?MODULE, ticket, I})]}];
tls_opts(ticket, _I) -> [{session_tickets, manual}].

login(Kind, Port, Tls, Auth, I) ->
    Opts = [binary, {active, false}, {verify, verify_none}, {versions, ['tlsv1.3']},
            {server_name_indication, "localhost"} | tls_opts(Tls, I)],
    {S, Trips0} =
        case Kind of
            direct ->
                %% (ssl:connect/3 with the address: OTP 25's ticket store
                %% cannot keep tickets of a connection upgraded from TCP.)
                {ok, S0} = ssl:connect({127, 0, 0, 1}, Port, [{nodelay, true} | Opts], 30000),
                ok = ssl:send(S0, ?HDR),
                ok = wait_for(S0, <<"</stream:features>">>),
                {S0, 1 + 1 + 1};                       % TCP, TLS 1.3, stream
            tcp ->
                {ok, T} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false},
                                                                 {nodelay, true}]),
                ok = gen_tcp:send(T, ?HDR),
                ok = wait_for({tcp, T}, <<"</stream:features>">>),
                {{tcp, T}, 1 + 1};                         % TCP, stream
            starttls ->
                {ok, T} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false},
                                                                 {nodelay, true}]),
                ok = gen_tcp:send(T, [?HDR, "<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"]),
                ok = wait_for({tcp, T}, <<"<proceed">>),
                {ok, S0} = ssl:connect(T, Opts, 30000),
                ok = ssl:send(S0, ?HDR),
                ok = wait_for(S0, <<"</stream:features>">>),
                {S0, 1 + 1 + 1 + 1}                    % TCP, starttls, TLS 1.3, stream
        end,
    User = <<"user", (integer_to_binary(I))/binary>>,
    AuthTrips = auth(Auth, S, User),
    BindTrips = bind(Auth, S),
    {S, Trips0 + AuthTrips + BindTrips, resumed(S)}.

%% SASL2 with Bind2 binds in its <success/> (or resumes the session);
%% otherwise a bind IQ after the restart.
bind(Fast, _S) when Fast =:= fast; Fast =:= fast_enable; Fast =:= fast_resume ->
    0;
bind(_, S) ->
    ok = send(S, [?HDR, "<iq type='set' id='b'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'>"
                  "<resource>tls</resource></bind></iq>"]),
    ok = wait_for(S, <<"id='b'">>),
    1.

ua(User) -> ["<user-agent id='bench-", User, "'/>"].

%% One SASL2 PLAIN login per user, asking for a FAST token; kept in the
%% process dictionary for the measured logins.
fetch_tokens(Kind, Port, First, N) ->
    [begin
         User = <<"user", (integer_to_binary(I))/binary>>,
         S = case Kind of
                 tcp ->
                     {ok, T} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}]),
                     {tcp, T};
                 _ ->
                     {ok, S0} = ssl:connect({127, 0, 0, 1}, Port,
                                            [binary, {active, false}, {verify, verify_none},
                                             {versions, ['tlsv1.3']}, {session_tickets, disabled}],
                                            30000),
                     S0
             end,
         ok = send(S, ?HDR),
         ok = wait_for(S, <<"</stream:features>">>),
         ok = send(S, ["<authenticate xmlns='urn:xmpp:sasl:2' mechanism='PLAIN'><initial-response>",
                       base64:encode(<<0, User/binary, 0, "password">>), "</initial-response>",
                       ua(User), "<request-token xmlns='urn:xmpp:fast:0' mechanism='HT-SHA-256-NONE'/>",
                       "</authenticate>"]),
         Success = recv_until(S, <<"</success>">>),
         {match, [Token]} = re:run(Success, "token='([^']+)'", [{capture, all_but_first, binary}]),
         persistent_term:put({?MODULE, token, User}, Token),
         close(S)
     end || I <- lists:seq(First, First + N - 1)],
    ok.

%% A full direct-TLS login per user, C at a time, keeping the first ticket
%% the server sends ({ssl, session_ticket, Ticket} with manual
%% tickets).
fetch_tickets(Port, Auth, First, N, C) ->
    _ = in_parallel(lists:seq(First, First + N - 1), C,
                    fun(I) ->
                            {S, _, _} = login(direct, Port, ticket, first_login(Auth), I),
                            T = receive {ssl, session_ticket, Tk} -> Tk
                                after 10000 -> error(no_ticket) end,
                            persistent_term:put({?MODULE, ticket, I}, T),
                            case Auth of
                                fast_resume -> cut(S);
                                _ -> close(S)
                            end
                    end),
    ok.

first_login(fast_resume) -> fast_enable;
first_login(Auth) -> Auth.

%% The connection lost, as a phone's: the TCP socket under the TLS one
%% closed, with no TLS close_notify and no </stream:stream>; the server
%% keeps the session for resumption. (OTP 25's #sslsocket{} holds the
%% transport and its socket in its second field.)
cut(S) ->
    {gen_tcp, Tcp, _, _} = element(2, S),
    ok = gen_tcp:close(Tcp).

%% TLS_LOGINS_AROUND="CMD": runs "CMD start" before the measured logins of
%% each variant and "CMD stop" after them (e.g. to profile only those).
around(What) ->
    case os:getenv("TLS_LOGINS_AROUND", "") of
        "" -> ok;
        Cmd -> _ = os:cmd(Cmd ++ " " ++ What), ok
    end.

%% Fun(Item) for every item, each in a process of its own, C at a time;
%% the results, in no particular order.
in_parallel([], _C, _Fun) ->
    [];
in_parallel(Items, C, Fun) ->
    {Now, Later} = lists:split(min(C, length(Items)), Items),
    Self = self(),
    Pids = [spawn(fun() -> Self ! {done, self(), Fun(I)} end) || I <- Now],
    Got = [receive {done, P, R} -> R after 60000 -> error(timeout) end || P <- Pids],
    Got ++ in_parallel(Later, C, Fun).

resumed({tcp, _}) -> false;
resumed(S) ->
    {ok, [{session_resumption, R}]} = ssl:connection_information(S, [session_resumption]),
    R.

send({tcp, T}, Data) -> gen_tcp:send(T, Data);
send(S, Data) -> ssl:send(S, Data).

auth(Fast, S, User) when Fast =:= fast; Fast =:= fast_enable; Fast =:= fast_resume ->
    Token = persistent_term:get({?MODULE, token, User}),
    Hmac = crypto:mac(hmac, sha256, Token, <<"Initiator">>),
    Inline = case Fast of
                 fast -> "<bind xmlns='urn:xmpp:bind:0'><tag>bench</tag></bind>";
                 fast_enable -> "<bind xmlns='urn:xmpp:bind:0'><tag>bench</tag>"
                                "<enable xmlns='urn:xmpp:sm:3' resume='true'/></bind>";
                 fast_resume -> ["<resume xmlns='urn:xmpp:sm:3' h='0' previd='",
                                 persistent_term:get({?MODULE, sm, User}), "'/>"
                                 "<bind xmlns='urn:xmpp:bind:0'><tag>bench</tag></bind>"]
             end,
    ok = send(S, ["<authenticate xmlns='urn:xmpp:sasl:2' mechanism='HT-SHA-256-NONE'><initial-response>",
                  base64:encode(<<User/binary, 0, Hmac/binary>>), "</initial-response>", ua(User),
                  Inline, "</authenticate>"]),
    Success = recv_until(S, <<"</success>">>),
    case Fast of
        fast -> ok;
        fast_enable ->
            {match, [Id]} = re:run(Success, "<enabled[^>]* id='([^']+)'",
                                   [{capture, all_but_first, binary}]),
            persistent_term:put({?MODULE, sm, User}, Id);
        fast_resume ->
            binary:match(Success, <<"<resumed">>) =/= nomatch orelse error({not_resumed, Success})
    end,
    1;
auth(plain, S, User) ->
    ok = send(S, ["<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>",
                      base64:encode(<<0, User/binary, 0, "password">>), "</auth>"]),
    ok = wait_for(S, <<"<success">>),
    1;
auth(Scram, S, User) ->
    {Mech, Gs2, CbData} =
        case Scram of
            scram -> {<<"SCRAM-SHA-256">>, <<"n,,">>, <<>>};
            scram_plus ->
                {ok, Der} = ssl:peercert(S),
                {<<"SCRAM-SHA-256-PLUS">>, <<"p=tls-server-end-point,,">>, crypto:hash(sha256, Der)}
        end,
    Bare = <<"n=", User/binary, ",r=", (base64:encode(crypto:strong_rand_bytes(12)))/binary>>,
    ok = send(S, ["<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='", Mech, "'>",
                      base64:encode(<<Gs2/binary, Bare/binary>>), "</auth>"]),
    Challenge = element_text(recv_until(S, <<"</challenge>">>), <<"challenge">>),
    First = base64:decode(Challenge),
    F = maps:from_list([{K, V} || <<K:1/binary, "=", V/binary>> <- binary:split(First, <<",">>, [global])]),
    #{<<"r">> := Nonce, <<"s">> := Salt, <<"i">> := It} = F,
    Salted = crypto:pbkdf2_hmac(sha256, <<"password">>, base64:decode(Salt), binary_to_integer(It), 32),
    ClientKey = crypto:mac(hmac, sha256, Salted, <<"Client Key">>),
    NoProof = <<"c=", (base64:encode(<<Gs2/binary, CbData/binary>>))/binary, ",r=", Nonce/binary>>,
    AuthMsg = [Bare, ",", First, ",", NoProof],
    Sig = crypto:mac(hmac, sha256, crypto:hash(sha256, ClientKey), AuthMsg),
    Proof = crypto:exor(ClientKey, Sig),
    ok = send(S, ["<response xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>",
                      base64:encode(<<NoProof/binary, ",p=", (base64:encode(Proof))/binary>>),
                      "</response>"]),
    ok = wait_for(S, <<"<success">>),
    2.

element_text(Bin, Name) ->
    {Start, Len} = binary:match(Bin, <<"<", Name/binary>>),
    Rest = binary:part(Bin, Start + Len, byte_size(Bin) - Start - Len),
    {Gt, 1} = binary:match(Rest, <<">">>),
    Body = binary:part(Rest, Gt + 1, byte_size(Rest) - Gt - 1),
    {End, _} = binary:match(Body, <<"</">>),
    binary:part(Body, 0, End).

wait_for(S, Pattern) ->
    _ = recv_until(S, Pattern),
    ok.

recv_until(S, Pattern) -> recv_until(S, Pattern, <<>>).
recv_until(S, Pattern, Acc) ->
    case binary:match(Acc, Pattern) of
        nomatch ->
            {ok, B} = case S of
                          {tcp, T} -> gen_tcp:recv(T, 0, 30000);
                          _ -> ssl:recv(S, 0, 30000)
                      end,
            recv_until(S, Pattern, <<Acc/binary, B/binary>>);
        _ ->
            Acc
    end.

close({tcp, T}) -> _ = gen_tcp:close(T), ok;
close(S) -> _ = ssl:close(S), ok.

%% /proc through throng_lib's sampler (logins.sh puts it on the path).
cpu_ms(OsPid) ->
    throng_proc_sample:cpu_seconds(throng_proc_sample:sample(OsPid)) * 1000.
