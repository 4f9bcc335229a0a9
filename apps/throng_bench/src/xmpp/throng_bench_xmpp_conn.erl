%% @doc The transport under a simulated XMPP user: a gen_tcp socket (inet
%% driver, {active, N}), optionally upgraded to TLS, with fast_tls (the
%% handshake driven by the data as it arrives), or with OTP's ssl when
%% sessions are to be resumed (fast_tls keeps no session tickets). The
%% protocol code (throng_bench_xmpp_user) sees only
%% connect/send/decode/activate/close and never the difference; OTP ssl's
%% socket messages are turned into gen_tcp's by {@link tcp_message/1}.
-module(throng_bench_xmpp_conn).

-export([connect/4, send/2, activate/1, decode/2, starttls/1, starttls/3, close/1,
         server_certificate/1, tcp_message/1]).

-export_type([conn/0]).

-type conn() :: {tcp, gen_tcp:socket()} | {tls, gen_tcp:socket(), term()}
              | {ssl, ssl:sslsocket()}.

%% @doc Connect from Src (an address or `any'). Buffer is the size of the
%% inet driver's receive buffer: the driver keeps one of that size for every
%% socket for as long as the socket lives, so for many idle users a small one
%% (a few hundred bytes) saves memory; bigger stanzas then arrive in several
%% reads.
-spec connect(inet:ip_address(), inet:port_number(), inet:ip_address() | any,
              {timeout(), pos_integer()}) -> {ok, conn()} | {error, term()}.
connect(Ip, Port, Src, {Timeout, Buffer}) ->
    Opts = [binary, {active, false}, {nodelay, true}, {show_econnreset, true}, {buffer, Buffer},
            {send_timeout, 30000}, {send_timeout_close, true}
            | throng_bench_src:opts(Src)],
    case gen_tcp:connect(Ip, Port, Opts, Timeout) of
        {ok, S} ->
            %% The link between the user and its port costs ~130 bytes per
            %% user (measured); every way a user ends closes its socket
            %% (throng_bench_xmpp_user:done/2, or the job's halt).
            true = unlink(S),
            {ok, {tcp, S}};
        {error, _} = E -> E
    end.

%% @doc Send bytes (an iolist); counts them.
-spec send(conn(), iodata()) -> ok | {error, term()}.
send({tcp, S}, Data) ->
    throng_bench_metrics:add(bytes_out, iolist_size(Data)),
    gen_tcp:send(S, Data);
send({tls, _S, T}, Data) ->
    throng_bench_metrics:add(bytes_out, iolist_size(Data)),
    fast_tls:send(T, iolist_to_binary(Data));
send({ssl, S}, Data) ->
    throng_bench_metrics:add(bytes_out, iolist_size(Data)),
    ssl:send(S, Data).

%% @doc Let the next 100 reads arrive as messages ({tcp, S, Data}); then
%% {tcp_passive, S} says it is time to call this again. (Re-arming after
%% every read, active-once, costs a system call per packet.)
-spec activate(conn()) -> ok | {error, term()}.
activate({ssl, S}) -> ssl:setopts(S, [{active, 100}]);
activate(Conn) -> inet:setopts(socket(Conn), [{active, 100}]).

%% @doc Bytes that arrived on the socket -> application bytes.
-spec decode(conn(), binary()) -> {ok, binary()} | {error, term()}.
decode({Kind, _}, Data) when Kind =:= tcp; Kind =:= ssl ->
    %% (OTP ssl has decrypted it already: the bytes counted are the plain ones.)
    throng_bench_metrics:add(bytes_in, byte_size(Data)),
    throng_bench_metrics:inc(reads_in),
    {ok, Data};
decode({tls, _, T}, Data) ->
    throng_bench_metrics:add(bytes_in, byte_size(Data)),
    throng_bench_metrics:inc(reads_in),
    case fast_tls:recv_data(T, Data) of
        {ok, Plain} -> {ok, Plain};
        {error, R} -> {error, {tls, R}}
    end.

%% @doc Start TLS as the client on a plain connection (after <proceed/>).
%% The handshake runs as data arrives through decode/2.
-spec starttls(conn()) -> {ok, conn()} | {error, term()}.
starttls({tcp, S}) ->
    case fast_tls:tcp_to_tls(S, [connect]) of
        {ok, T} ->
            %% produce the ClientHello
            case fast_tls:recv_data(T, <<>>) of
                {ok, _} -> {ok, {tls, S, T}};
                {error, R} -> {error, {tls, R}}
            end;
        {error, R} -> {error, {tls, R}}
    end.

%% @doc The server's certificate on a TLS connection, as public_key decodes
%% it (`plain'), for tls-server-end-point channel binding.
-spec server_certificate(conn()) -> {ok, tuple()} | {error, term()}.
server_certificate({tls, _S, T}) ->
    case fast_tls:get_peer_certificate(T, plain) of
        {ok, Cert} -> {ok, Cert};
        error -> {error, no_certificate}
    end;
server_certificate({ssl, S}) ->
    case ssl:peercert(S) of
        {ok, Der} -> {ok, public_key:pkix_decode_cert(Der, plain)};
        {error, _} = E -> E
    end;
server_certificate({tcp, _}) ->
    {error, not_tls}.

%% @doc TLS with OTP's ssl, keeping session tickets (`{session_tickets,
%% manual}': each arrives as `{ssl, session_ticket, Ticket}' to the calling
%% process) and resuming with Ticket when there is one. The handshake runs
%% here, before this returns: {ok, Conn, Resumed}.
-spec starttls(conn(), binary() | undefined, timeout()) ->
          {ok, conn(), boolean()} | {error, term()}.
starttls({tcp, S}, Ticket, Timeout) ->
    Opts = [{verify, verify_none}, {active, false}, {versions, ['tlsv1.3', 'tlsv1.2']},
            {session_tickets, manual} | [{use_ticket, [Ticket]} || Ticket =/= undefined]],
    case inet:setopts(S, [{active, false}]) of
        ok ->
            case ssl:connect(S, Opts, Timeout) of
                {ok, Ssl} ->
                    Resumed = case ssl:connection_information(Ssl, [session_resumption]) of
                                  {ok, [{session_resumption, R}]} -> R;
                                  _ -> false
                              end,
                    {ok, {ssl, Ssl}, Resumed};
                {error, R} -> {error, {tls, R}}
            end;
        {error, _} = E -> E
    end.

%% @doc OTP ssl's socket messages as gen_tcp's: what the user handles.
-spec tcp_message(term()) -> term().
tcp_message({ssl, S, Data}) when S =/= session_ticket -> {tcp, S, Data};
tcp_message({ssl_closed, S}) -> {tcp_closed, S};
tcp_message({ssl_error, S, R}) -> {tcp_error, S, R};
tcp_message({ssl_passive, S}) -> {tcp_passive, S};
tcp_message(Msg) -> Msg.

-spec close(conn() | undefined) -> ok.
close(undefined) -> ok;
close({ssl, S}) -> _ = ssl:close(S), ok;
close({tcp, S}) -> _ = gen_tcp:close(S), ok;
close({tls, S, T}) -> _ = (catch fast_tls:close(T)), _ = gen_tcp:close(S), ok.

%% @doc The gen_tcp socket (messages arrive tagged with it).
-spec socket(conn()) -> gen_tcp:socket().
socket({tcp, S}) -> S;
socket({tls, S, _}) -> S.
