%% @doc TLS over a TCP connection: the handshake in OpenSSL
%% ({@link throng_tls_nif}), the records after it in Erlang
%% ({@link throng_tls_record}), so that an established connection holds no
%% OpenSSL state (docs/tls.md). The TCP socket (of either inet backend)
%% still delivers the encrypted bytes; the owner turns them into application data with decode/2, which
%% also drives the handshake and returns the socket's next state.
-module(throng_transport_tls).
-behaviour(throng_transport).

-export([listen/2, accept/1, messages/0, send/2, setopts/2, controlling_process/2,
         peername/1, close/1, upgrade/3, decode/2]).
-export([over_tcp/2, channel_bindings/1]).

%% The socket's state: handshaking, or the record layer and the channel
%% binding data (RFC 9266 tls-exporter: undefined for TLS 1.2 without the
%% extended master secret; RFC 5929 tls-server-end-point and tls-unique).
%% Nothing else of
%% the handshake is kept: every word here is a word of every idle session.
%% Right after a TLS 1.3 handshake the state also holds the session ticket
%% OpenSSL wrote (held()): it goes out in front of the first record the
%% connection seals, usually the stream features, so a login makes one
%% write and wakes its client once less. The next read drops it.
-type cb() :: binary() | undefined.
-type cbs() :: {Exporter :: cb(), EndPoint :: cb(), Unique :: cb()}.
-type held() :: {Ticket :: binary(), Written :: non_neg_integer()}.
-type state() :: {handshake, throng_tls_nif:conn()} |
                 {established, throng_tls_record:state(), cbs()} |
                 {established, throng_tls_record:state(), cbs(), held()}.
-export_type([state/0]).

%% @doc Server-side TLS on an accepted TCP socket, with the server's
%% certificates ({@link throng_cert:context/0}), or with `{certfile, File}'
%% (a PEM file with a chain and its key) in Opts, and then `{tls, Section}'
%% (the configuration's `tls' section; its defaults without it).
-spec over_tcp(gen_tcp:socket(), list()) -> {ok, throng_transport:socket()} | {error, term()}.
over_tcp(TCP, Opts) ->
    Context = case lists:keyfind(certfile, 1, Opts) of
                  {certfile, File} ->
                      context(File, proplists:get_value(tls, Opts,
                                                        throng_config_spec:tls_defaults()));
                  false -> {ok, throng_cert:context()}
              end,
    case Context of
        {ok, Ctx} ->
            case throng_tls_nif:conn_new(Ctx) of
                {error, _} = E -> E;
                Conn -> {ok, {?MODULE, TCP, {handshake, Conn}}}
            end;
        {error, _} = E ->
            E
    end.

%% A context for one certificate file (no SNI names) and tls section,
%% made once and kept (persistent_term) while the node runs.
-spec context(file:filename_all(), map()) -> {ok, throng_tls_nif:ctx()} | {error, term()}.
context(File, Tls) ->
    Key = {?MODULE, ctx, File, Tls},
    case persistent_term:get(Key, undefined) of
        undefined ->
            case throng_tls_nif:ctx_new(File, [], Tls) of
                {ok, Ctx} -> persistent_term:put(Key, Ctx), {ok, Ctx};
                {error, Why} -> {error, {certificate, Why}}
            end;
        Ctx ->
            {ok, Ctx}
    end.

%% @doc Listening is plain TCP; on a direct TLS listener (XEP-0368) each
%% accepted connection starts its handshake at once.
-spec listen(inet:port_number(), [gen_tcp:listen_option() | inet:inet_backend()]) ->
    {ok, gen_tcp:socket()} | {error, term()}.
listen(Port, Opts) -> throng_transport_tcp:listen(Port, Opts).

%% @doc Accepts a connection of a direct TLS listener: the socket is in its
%% handshake, which the owner drives with decode/2 as the bytes arrive.
-spec accept(gen_tcp:socket()) -> {ok, throng_transport:socket()} | {error, term()}.
accept(LSock) ->
    case throng_accept:accept(LSock) of
        {ok, TCP} ->
            case over_tcp(TCP, []) of
                {ok, _} = Ok -> Ok;
                {error, _} = E -> gen_tcp:close(TCP), E
            end;
        {error, _} = E ->
            E
    end.

-spec messages() -> throng_transport:message_tags().
messages() -> {tcp, tcp_closed, tcp_error, tcp_passive}.

-spec send(throng_transport:socket(), iodata()) -> ok | {error, term()}.
send({_, TCP, {established, Rec, _}}, Data) ->
    seal_send(TCP, Rec, [], Data);
send({_, TCP, {established, Rec, _, Held}}, Data) ->
    seal_send(TCP, Rec, unsent(Rec, Held), Data);
send({_, _, {handshake, _}}, _Data) ->
    {error, handshake_not_finished};
send({_, _, closed}, _Data) ->
    %% Our close_notify is out: nothing may follow it (RFC 8446 §6.1), and
    %% the peer, which sent its own, would read nothing more.
    ok.

seal_send(TCP, Rec, Before, Data) ->
    case throng_tls_record:seal(Data, Rec) of
        {error, key_limit} = E ->
            %% The write key has sealed all it may (TLS 1.2, or a TLS 1.3
            %% peer that sent nothing while 2^23 records went out).
            logger:notice(#{what => tls_key_limit, records => throng_tls_record:written(Rec)}),
            E;
        Records ->
            gen_tcp:send(TCP, [Before | Records])
    end.

%% The held ticket, while no record has been sealed after it (the write
%% sequence is still where the handshake left it): the peer expects the
%% ticket's record first. Once one has, nothing: it went out in front of
%% that one (this term may be an older copy of the socket).
unsent(Rec, {Ticket, Written}) ->
    case throng_tls_record:written(Rec) of
        Written -> Ticket;
        _ -> []
    end.

%% Socket options, ownership and the peer are the TCP socket's.
-spec setopts(throng_transport:socket(), [gen_tcp:option()]) -> ok | {error, term()}.
setopts(Sock, Opts) -> throng_transport_tcp:setopts(Sock, Opts).

-spec controlling_process(throng_transport:socket(), pid()) -> ok | {error, term()}.
controlling_process(Sock, Pid) -> throng_transport_tcp:controlling_process(Sock, Pid).

-spec peername(throng_transport:socket()) ->
    {ok, {inet:ip_address(), inet:port_number()}} | {error, term()}.
peername(Sock) -> throng_transport_tcp:peername(Sock).

%% @doc Sends close_notify when the handshake is over, then closes.
-spec close(throng_transport:socket()) -> ok.
close({_, TCP, {established, Rec, _}}) ->
    _ = gen_tcp:send(TCP, throng_tls_record:close_notify(Rec)),
    gen_tcp:close(TCP);
close({_, TCP, {established, Rec, _, Held}}) ->
    _ = gen_tcp:send(TCP, [unsent(Rec, Held) | throng_tls_record:close_notify(Rec)]),
    gen_tcp:close(TCP);
close({_, TCP, _}) ->
    gen_tcp:close(TCP).

-spec upgrade(throng_transport:socket(), module(), list()) -> {error, term()}.
upgrade(_Sock, Into, _Opts) -> {error, {cannot_upgrade, ?MODULE, Into}}.

%% @doc Bytes read from the socket: during the handshake its next step
%% (whatever OpenSSL answers is sent here), after it the application data
%% of the records; `{closed, Data, Closed}' with the peer's close_notify
%% (ours is sent): Data came before it, and nothing more will; Closed is a
%% socket that sends nothing more.
-spec decode(throng_transport:socket(), binary()) ->
    {ok, binary(), throng_transport:socket()} | {closed, binary(), throng_transport:socket()}
    | {error, term()}.
decode({_, _, closed} = S, _Data) ->
    %% After the peer's close_notify: what it still sends is dropped.
    {ok, <<>>, S};
decode({Mod, TCP, {handshake, Conn}}, Data) ->
    case throng_tls_nif:handshake(Conn, Data) of
        {more, Out} ->
            case out(TCP, Out) of
                ok -> {ok, <<>>, {Mod, TCP, {handshake, Conn}}};
                {error, _} = E -> E
            end;
        {done, Out, Info, Rest} ->
            throng_metrics:incr(tls_established),
            Rec = throng_tls_record:new(Info),
            CB = {maps:get(exporter, Info), maps:get(server_end_point, Info),
                  maps:get(tls_unique, Info)},
            case Info of
                #{version := tls13, write_records := Written} when Written > 0, Out =/= <<>> ->
                    %% TLS 1.3: the handshake is over for the client too,
                    %% Out is only the session ticket, which it does not
                    %% wait for. Held for the first record we seal.
                    decode({Mod, TCP, {established, Rec, CB, {Out, Written}}}, Rest);
                _ ->
                    %% (TLS 1.2: Out ends the client's handshake.)
                    case out(TCP, Out) of
                        ok -> decode({Mod, TCP, {established, Rec, CB}}, Rest);
                        {error, _} = E -> E
                    end
            end;
        {error, Why, Out} ->
            throng_metrics:incr(tls_failed),
            _ = out(TCP, Out),
            {error, {handshake, Why}}
    end;
decode({Mod, TCP, {established, Rec, CB}}, Data) ->
    opened(Mod, TCP, CB, none, Data, Rec);
decode({Mod, TCP, {established, Rec, CB, Held}}, Data) ->
    case unsent(Rec, Held) of
        [] -> opened(Mod, TCP, CB, none, Data, Rec);   %% it went out: dropped
        _ -> opened(Mod, TCP, CB, Held, Data, Rec)
    end.

%% Data's records opened. Whatever the record layer answers (a KeyUpdate,
%% close_notify, an alert) is sent, after the held ticket when there is
%% one, which then is no longer held.
opened(Mod, TCP, CB, Held, Data, Rec) ->
    case throng_tls_record:open(Data, Rec) of
        {ok, Plain, Out, Rec1} ->
            case answer(TCP, Held, Out) of
                {ok, none} -> {ok, Plain, {Mod, TCP, {established, Rec1, CB}}};
                {ok, Held} -> {ok, Plain, {Mod, TCP, {established, Rec1, CB, Held}}};
                {error, _} = E -> E
            end;
        {closed, Plain, Out} ->
            _ = answer(TCP, Held, Out),
            {closed, Plain, {Mod, TCP, closed}};
        {error, Why, Out} ->
            _ = answer(TCP, Held, Out),
            {error, Why}
    end.

answer(_TCP, Held, Out) when Out =:= <<>>; Out =:= [] -> {ok, Held};
answer(TCP, none, Out) -> sent(gen_tcp:send(TCP, Out));
answer(TCP, {Ticket, _}, Out) -> sent(gen_tcp:send(TCP, [Ticket | Out])).

sent(ok) -> {ok, none};
sent({error, _} = E) -> E.

%% @doc The channel bindings this connection offers SASL (RFC 5056), by
%% type name: tls-exporter (RFC 9266), tls-server-end-point and tls-unique
%% (RFC 5929), each when the handshake defines it.
-spec channel_bindings(throng_transport:socket()) -> #{binary() => binary()}.
channel_bindings({_, _, {established, _, {Exporter, EndPoint, Unique}}}) ->
    bindings(Exporter, EndPoint, Unique);
channel_bindings({_, _, {established, _, {Exporter, EndPoint, Unique}, _}}) ->
    bindings(Exporter, EndPoint, Unique);
channel_bindings(_) ->
    #{}.

bindings(Exporter, EndPoint, Unique) ->
    maps:from_list([{<<"tls-exporter">>, Exporter} || is_binary(Exporter)] ++
                   [{<<"tls-server-end-point">>, EndPoint} || is_binary(EndPoint)] ++
                   [{<<"tls-unique">>, Unique} || is_binary(Unique)]).

out(_TCP, <<>>) -> ok;
out(TCP, Out) -> gen_tcp:send(TCP, Out).
