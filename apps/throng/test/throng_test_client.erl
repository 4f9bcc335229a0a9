%% @doc A small XMPP client for the Common Test suites: it drives the real
%% server over a real socket. One linked process per connection owns the
%% socket, parses the stream with throng_xml_stream, and forwards every
%% event to the test process as {xmpp, Client, Event}; the test process
%% receives them with recv/1,2 and sends with send/2.
-module(throng_test_client).

-include("throng.hrl").

-export([connect/1, connect/2, send/2, send_raw/2, recv/1, recv/2, recv_stanza/1,
         recv_stanza/2, expect_nothing/2, open_stream/1, open_stream/2, starttls/1,
         auth_plain/3, auth_scram/4, auth_scram/5, tls_server_end_point/1, bind/2, login/3, login/4, close/1, abort/1, closed/2,
         pause/1, trickle/3,
         iq/3, iq/4, iq_skipping/4, presence/1, message/3, jid/1, flush/1, available/1, port/0,
         disco_features/2]).

-record(c, {pid :: pid(), server :: binary(), jid :: binary() | undefined}).
-type client() :: #c{}.
-export_type([client/0]).

-define(TIMEOUT, 5000).

%% @doc The port of the first c2s listener of the server under test.
-spec port() -> inet:port_number().
port() ->
    throng_listener:port({listener, 1}).

%% @doc Opens a TCP connection (no stream yet).
-spec connect(map()) -> client().
connect(#{port := Port} = Opts) ->
    connect(Port, Opts);
connect(Opts) ->
    connect(port(), Opts).

-spec connect(inet:port_number(), map()) -> client().
connect(Port, Opts) ->
    Owner = self(),
    Pid = proc_lib:spawn_link(fun() -> conn_init(Owner, Port, Opts) end),
    receive
        {xmpp, Pid, connected} -> #c{pid = Pid, server = maps:get(server, Opts, <<"localhost">>)};
        {xmpp, Pid, {connect_failed, Why}} -> error({connect_failed, Why})
    after ?TIMEOUT -> error(connect_timeout)
    end.

%% @doc Sends an element or raw bytes.
-spec send(client(), #xmlel{} | iodata()) -> ok.
send(#c{pid = Pid}, #xmlel{} = El) ->
    Pid ! {send, throng_xml:to_binary(El)}, ok;
send(#c{pid = Pid}, Bytes) ->
    Pid ! {send, iolist_to_binary(Bytes)}, ok.

-spec send_raw(client(), iodata()) -> ok.
send_raw(C, Bytes) -> send(C, Bytes).

%% @doc The next stream event: {stream_start, Name, Attrs}, #xmlel{},
%% stream_end, {stream_error, Cond}, {error, Cond, Text}, closed.
-spec recv(client()) -> term().
recv(C) -> recv(C, ?TIMEOUT).

-spec recv(client(), timeout()) -> term().
recv(#c{pid = Pid}, Timeout) ->
    receive
        {xmpp, Pid, Ev} -> Ev
    after Timeout -> timeout
    end.

%% @doc The next stanza, skipping nothing: fails the test on anything else.
-spec recv_stanza(client()) -> #xmlel{}.
recv_stanza(C) -> recv_stanza(C, ?TIMEOUT).

-spec recv_stanza(client(), timeout()) -> #xmlel{}.
recv_stanza(C, Timeout) ->
    case recv(C, Timeout) of
        #xmlel{} = El -> El;
        Other -> error({expected_stanza, Other})
    end.

%% @doc Asserts that nothing arrives within Ms milliseconds.
-spec expect_nothing(client(), non_neg_integer()) -> ok.
expect_nothing(C, Ms) ->
    case recv(C, Ms) of
        timeout -> ok;
        Other -> error({unexpected, Other})
    end.

%% @doc Drops whatever has arrived so far.
-spec flush(client()) -> ok.
flush(C) ->
    case recv(C, 100) of
        timeout -> ok;
        _ -> flush(C)
    end.

%% @doc Sends initial presence and reads up to its echo from the server
%% (however late it comes; skipping what comes before it), then what else
%% has arrived (flush/1). After it, the next stanza is not that echo.
-spec available(client()) -> ok.
available(C) ->
    send(C, presence([])),
    own_echo(C, jid(C)),
    flush(C).

own_echo(C, Self) ->
    case recv(C, 10000) of
        #xmlel{name = <<"presence">>} = P ->
            case throng_xml:attr(<<"from">>, P) of
                Self -> ok;
                _ -> own_echo(C, Self)
            end;
        timeout -> error({no_presence_echo, Self});
        _ -> own_echo(C, Self)
    end.

%% @doc Sends a stream header and returns the features element.
-spec open_stream(client()) -> #xmlel{}.
open_stream(C) -> open_stream(C, #{}).

-spec open_stream(client(), map()) -> #xmlel{}.
open_stream(#c{server = S} = C, Opts) ->
    To = maps:get(to, Opts, S),
    send(C, ["<?xml version='1.0'?><stream:stream to='", To,
             "' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"]),
    {stream_start, _, _} = recv(C),
    #xmlel{name = <<"stream:features">>} = recv_stanza(C).

%% @doc Negotiates STARTTLS and opens the new stream; returns its features.
-spec starttls(client()) -> #xmlel{}.
starttls(#c{pid = Pid} = C) ->
    send(C, <<"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>">>),
    #xmlel{name = <<"proceed">>} = recv_stanza(C),
    Pid ! starttls,
    receive {xmpp, Pid, tls_ready} -> ok after ?TIMEOUT -> error(tls_timeout) end,
    open_stream(C).

%% @doc SASL PLAIN. Returns ok or {failure, Condition}.
-spec auth_plain(client(), binary(), binary()) ->
          ok | {failure, binary()} | {stream_error, #xmlel{}}.
auth_plain(C, User, Password) ->
    send(C, ["<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>",
             base64:encode(<<0, User/binary, 0, Password/binary>>), "</auth>"]),
    sasl_result(C).

%% @doc SCRAM-SHA-1 (sha) or SCRAM-SHA-256 (sha256), verifying the server's
%% signature.
-spec auth_scram(client(), binary(), binary(), sha | sha256) -> ok | {failure, binary()}.
auth_scram(C, User, Password, Hash) ->
    auth_scram(C, User, Password, Hash, #{}).

%% @doc SCRAM with options: `plus => {CbName, CbData}' uses the -PLUS
%% mechanism and proves CbData; `flag => y' sends the gs2 flag "y".
-spec auth_scram(client(), binary(), binary(), sha | sha256, map()) -> ok | {failure, binary()}.
auth_scram(C, User, Password, Hash, Opts) ->
    Mech0 = case Hash of sha -> <<"SCRAM-SHA-1">>; sha256 -> <<"SCRAM-SHA-256">> end,
    {Mech, Gs2, CbData} = case Opts of
                              #{plus := {Name, Data}} ->
                                  {<<Mech0/binary, "-PLUS">>, <<"p=", Name/binary, ",,">>, Data};
                              #{flag := y} -> {Mech0, <<"y,,">>, <<>>};
                              _ -> {Mech0, <<"n,,">>, <<>>}
                          end,
    CNonce = base64:encode(crypto:strong_rand_bytes(12)),
    Bare = <<"n=", User/binary, ",r=", CNonce/binary>>,
    send(C, ["<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='", Mech, "'>",
             base64:encode(<<Gs2/binary, Bare/binary>>), "</auth>"]),
    case recv_stanza(C) of
        #xmlel{name = <<"challenge">>} = Ch ->
            First = base64:decode(throng_xml:cdata(Ch)),
            Fields = maps:from_list([{K, V} || <<K:1/binary, "=", V/binary>>
                                                   <- binary:split(First, <<",">>, [global])]),
            #{<<"r">> := Nonce, <<"s">> := Salt64, <<"i">> := Iter} = Fields,
            Salted = throng_scram:salted_password(Hash, Password, base64:decode(Salt64),
                                                  binary_to_integer(Iter)),
            NoProof = <<"c=", (base64:encode(<<Gs2/binary, CbData/binary>>))/binary,
                        ",r=", Nonce/binary>>,
            AuthMsg = [Bare, ",", First, ",", NoProof],
            ClientKey = throng_scram:client_key(Hash, Salted),
            Sig = throng_scram:client_signature(Hash, throng_scram:stored_key(Hash, ClientKey), AuthMsg),
            Proof = crypto:exor(ClientKey, Sig),
            send(C, ["<response xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>",
                     base64:encode(<<NoProof/binary, ",p=", (base64:encode(Proof))/binary>>),
                     "</response>"]),
            case recv_stanza(C) of
                #xmlel{name = <<"success">>} = S ->
                    <<"v=", V/binary>> = base64:decode(throng_xml:cdata(S)),
                    Expected = throng_scram:server_signature(
                                 Hash, throng_scram:server_key(Hash, Salted), AuthMsg),
                    Expected = base64:decode(V),
                    restart(C);
                #xmlel{name = <<"failure">>} = F ->
                    {failure, failure_cond(F)}
            end;
        #xmlel{name = <<"failure">>} = F ->
            {failure, failure_cond(F)}
    end.

%% @doc RFC 5929 tls-server-end-point of the TLS connection, from the
%% certificate the server presented (SHA-256: the test certificates are
%% signed with it).
-spec tls_server_end_point(client()) -> binary().
tls_server_end_point(#c{pid = Pid}) ->
    Pid ! {peer_cert, self()},
    receive {xmpp, Pid, {peer_cert, Der}} -> crypto:hash(sha256, Der)
    after ?TIMEOUT -> error(no_peer_cert)
    end.

sasl_result(C) ->
    case recv_stanza(C) of
        #xmlel{name = <<"success">>} -> restart(C);
        #xmlel{name = <<"failure">>} = F -> {failure, failure_cond(F)};
        %% e.g. see-other-host (a cluster's node sends the client home)
        #xmlel{name = <<"stream:error">>} = E -> {stream_error, E}
    end.

failure_cond(#xmlel{children = Ch}) ->
    case [N || #xmlel{name = N} <- Ch, N =/= <<"text">>] of
        [N | _] -> N;
        [] -> <<>>
    end.

restart(#c{pid = Pid}) ->
    Pid ! reset_parser,
    ok.

%% @doc Binds a resource (<<>>: server-generated); returns the client with
%% its full JID.
-spec bind(client(), binary()) -> client().
bind(C, Resource) ->
    bind(C, Resource, ?TIMEOUT).

%% @doc Binds, waiting at most Timeout ms for the result.
-spec bind(client(), binary(), timeout()) -> client().
bind(C, Resource, Timeout) ->
    Res = case Resource of
              <<>> -> [];
              _ -> [#xmlel{name = <<"resource">>, children = [{xmlcdata, Resource}]}]
          end,
    send(C, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, <<"bind1">>}],
                   children = [#xmlel{name = <<"bind">>, attrs = [{<<"xmlns">>, ?NS_BIND}],
                                      children = Res}]}),
    R = recv_stanza(C, Timeout),
    <<"result">> = throng_xml:attr(<<"type">>, R),
    JID = throng_xml:cdata(throng_xml:subel(throng_xml:subel(R, <<"bind">>), <<"jid">>)),
    C#c{jid = JID}.

%% @doc Connects, authenticates with PLAIN (or Opts mechanism) and binds.
-spec login(binary(), binary(), binary()) -> client().
login(User, Password, Resource) ->
    login(User, Password, Resource, #{}).

-spec login(binary(), binary(), binary(), map()) -> client().
login(User, Password, Resource, Opts) ->
    C = connect(Opts),
    _ = open_stream(C),
    case maps:get(tls, Opts, false) of
        true -> _ = starttls(C);
        false -> ok
    end,
    ok = case maps:get(mechanism, Opts, plain) of
             plain -> auth_plain(C, User, Password);
             Hash -> auth_scram(C, User, Password, Hash)
         end,
    _ = open_stream(C),
    bind(C, Resource, maps:get(bind_timeout, Opts, ?TIMEOUT)).

-spec jid(client()) -> binary().
jid(#c{jid = J}) -> J.

%% @doc Sends an IQ and returns the response with that id.
-spec iq(client(), binary(), #xmlel{}) -> #xmlel{}.
iq(C, Type, Payload) ->
    iq(C, Type, Payload, []).

-spec iq(client(), binary(), #xmlel{}, [{binary(), binary()}]) -> #xmlel{}.
iq(C, Type, Payload, Attrs) ->
    Id = integer_to_binary(erlang:unique_integer([positive])),
    send(C, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, Type}, {<<"id">>, Id} | Attrs],
                   children = [Payload]}),
    wait_id(C, Id).

%% @doc As iq/4, but what arrives before the answer (presence, pushes,
%% messages) is read and dropped.
-spec iq_skipping(client(), binary(), #xmlel{}, [{binary(), binary()}]) -> #xmlel{}.
iq_skipping(C, Type, Payload, Attrs) ->
    Id = integer_to_binary(erlang:unique_integer([positive])),
    send(C, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, Type}, {<<"id">>, Id} | Attrs],
                   children = [Payload]}),
    skip_to_id(C, Id).

skip_to_id(C, Id) ->
    R = recv_stanza(C),
    case {R#xmlel.name, throng_xml:attr(<<"id">>, R)} of
        {<<"iq">>, Id} -> R;
        _ -> skip_to_id(C, Id)
    end.

wait_id(C, Id) ->
    case recv_stanza(C) of
        #xmlel{name = <<"iq">>} = R ->
            case throng_xml:attr(<<"id">>, R) of
                Id -> R;
                _ -> error({unexpected_iq, R})
            end;
        Other ->
            error({expected_iq_response, Id, Other})
    end.

%% @doc The features a disco#info of To lists.
-spec disco_features(client(), binary()) -> [binary()].
disco_features(C, To) ->
    R = iq(C, <<"get">>, #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_DISCO_INFO}]},
           [{<<"to">>, To}]),
    [throng_xml:attr(<<"var">>, F)
     || #xmlel{name = <<"feature">>} = F <- throng_xml:subels(throng_xml:subel(R, <<"query">>))].

-spec presence(list()) -> #xmlel{}.
presence(Attrs) ->
    #xmlel{name = <<"presence">>, attrs = Attrs}.

-spec message(binary(), binary(), binary()) -> #xmlel{}.
message(To, Type, Body) ->
    #xmlel{name = <<"message">>, attrs = [{<<"to">>, To}, {<<"type">>, Type}],
           children = [#xmlel{name = <<"body">>, children = [{xmlcdata, Body}]}]}.

%% @doc Closes the stream: sends the closing tag, half-closes, reads until
%% the server closes too (at most 5 s), then closes the socket.
-spec close(client()) -> ok.
close(#c{pid = Pid}) ->
    unlink(Pid),
    Pid ! close,
    ok.

%% @doc Stops reading from the socket (a client that does not read).
-spec pause(client()) -> ok.
pause(#c{pid = Pid}) ->
    Pid ! pause,
    ok.

%% @doc From now on the client reads slowly and steadily: at most about
%% Bytes every Ms milliseconds (its receive buffer is made that small), and
%% throws the data away.
-spec trickle(client(), pos_integer(), pos_integer()) -> ok.
trickle(#c{pid = Pid}, Bytes, Ms) ->
    Pid ! {trickle, Bytes, Ms},
    ok.

%% @doc Closes the TCP connection without closing the stream.
-spec abort(client()) -> ok.
abort(#c{pid = Pid}) ->
    unlink(Pid),
    Pid ! abort,
    ok.

%% @doc Waits until the server closes the connection; returns the stream
%% error condition it sent (or none).
-spec closed(client(), timeout()) -> binary() | none | timeout.
closed(C, Timeout) ->
    closed(C, Timeout, none).

closed(C, Timeout, Cond) ->
    case recv(C, Timeout) of
        closed -> Cond;
        timeout -> timeout;
        #xmlel{name = <<"stream:error">>, children = Ch} ->
            [N | _] = [Name || #xmlel{name = Name} <- Ch, Name =/= <<"text">>],
            closed(C, Timeout, N);
        _ -> closed(C, Timeout, Cond)
    end.

%%% The connection process

conn_init(Owner, Port, Opts) ->
    IP = maps:get(ip, Opts, {127, 0, 0, 1}),
    %% src_ip: the local address to connect from (e.g. 127.0.0.2); recbuf: a
    %% small receive window from the start (a slow reader).
    Src = [{ip, A} || A <- [maps:get(src_ip, Opts, any)], A =/= any]
        ++ [{recbuf, B} || B <- [maps:get(recbuf, Opts, undefined)], B =/= undefined],
    case gen_tcp:connect(IP, Port, [binary, {active, once}, {nodelay, true} | Src], ?TIMEOUT) of
        {ok, S} ->
            Owner ! {xmpp, self(), connected},
            conn_loop(#{owner => Owner, sock => {tcp, S}, tcp => S,
                        parser => throng_xml_stream:new(#{max_stanza_size => 16#4000000,
                                                          max_depth => 1000})});
        {error, Why} ->
            Owner ! {xmpp, self(), {connect_failed, Why}}
    end.

conn_loop(#{owner := Owner, sock := Sock, tcp := T, parser := P} = St) ->
    receive
        {send, Bin} ->
            _ = sock_send(Sock, Bin),
            conn_loop(St);
        reset_parser ->
            conn_loop(St#{parser := throng_xml_stream:reset(P)});
        {peer_cert, From} ->
            {tls, TLS} = Sock,
            {ok, Der} = fast_tls:get_peer_certificate(TLS, der),
            From ! {xmpp, self(), {peer_cert, Der}},
            conn_loop(St);
        starttls ->
            {ok, TLS} = fast_tls:tcp_to_tls(T, [connect, {certfile, throng_cert:certfile()}]),
            {ok, <<>>} = fast_tls:recv_data(TLS, <<>>),
            Owner ! {xmpp, self(), tls_ready},
            conn_loop(St#{sock := {tls, TLS}, parser := throng_xml_stream:reset(P)});
        close ->
            _ = sock_send(Sock, <<"</stream:stream>">>),
            graceful_close(T);
        abort ->
            gen_tcp:close(T);
        pause ->
            inet:setopts(T, [{active, false}]),
            receive close -> gen_tcp:close(T); abort -> gen_tcp:close(T) end;
        {trickle, Bytes, Ms} ->
            inet:setopts(T, [{active, false}, {recbuf, Bytes}, {buffer, Bytes}]),
            trickle_loop(Owner, T, Ms);
        {tcp, T, Data} ->
            case decode(Sock, Data) of
                {ok, Plain} ->
                    {Events, P1} = throng_xml_stream:parse(P, Plain),
                    [Owner ! {xmpp, self(), event(E)} || E <- Events],
                    inet:setopts(T, [{active, once}]),
                    conn_loop(St#{parser := P1});
                {error, Why} ->
                    Owner ! {xmpp, self(), {tls_error, Why}},
                    Owner ! {xmpp, self(), closed}
            end;
        {tcp_closed, T} ->
            Owner ! {xmpp, self(), closed};
        {tcp_error, T, _} ->
            Owner ! {xmpp, self(), closed}
    end.

%% Half-closes, then reads until the server closes too (at most 5 s), then
%% closes. Closing at once with unread data in the receive buffer makes the
%% kernel send a reset, and a server whose write then fails may drop input it
%% had not read yet (the inet driver does): the stanzas sent just before
%% close/1 could be lost, which no real client that waits for the closing
%% tag sees.
graceful_close(T) ->
    _ = inet:setopts(T, [{active, false}]),
    _ = gen_tcp:shutdown(T, write),
    drain(T, erlang:monotonic_time(millisecond) + 5000),
    gen_tcp:close(T).

drain(T, Deadline) ->
    Left = Deadline - erlang:monotonic_time(millisecond),
    case Left > 0 andalso gen_tcp:recv(T, 0, Left) of
        {ok, _} -> drain(T, Deadline);
        _ -> ok
    end.

trickle_loop(Owner, T, Ms) ->
    receive
        close -> gen_tcp:close(T);
        abort -> gen_tcp:close(T)
    after Ms ->
            case gen_tcp:recv(T, 0, 0) of
                {ok, _} -> trickle_loop(Owner, T, Ms);
                {error, timeout} -> trickle_loop(Owner, T, Ms);
                {error, _} -> Owner ! {xmpp, self(), closed}
            end
    end.

event({stanza, El}) -> El;
event(E) -> E.

sock_send({tcp, S}, Bin) -> gen_tcp:send(S, Bin);
sock_send({tls, TLS}, Bin) -> fast_tls:send(TLS, Bin).

decode({tcp, _}, Data) -> {ok, Data};
decode({tls, TLS}, Data) -> fast_tls:recv_data(TLS, Data).
