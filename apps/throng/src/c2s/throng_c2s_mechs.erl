%% @doc The SASL mechanisms a client connection offers: the configured
%% ones (the -PLUS ones only where the connection has channel binding
%% data), the channel bindings behind them (XEP-0440), and the FAST
%% mechanisms (XEP-0484).
-module(throng_c2s_mechs).

-export([mechanisms/1, channel_bindings/1, fast_mechanisms/1]).

%% @doc The SASL mechanisms offered on a connection, in the configured
%% order: the -PLUS ones only where the connection has channel binding
%% data (TLS).
-spec mechanisms(throng_transport:socket()) -> [binary()].
mechanisms(Sock) ->
    Plus = map_size(throng_transport:channel_bindings(Sock)) > 0,
    [B || M <- throng_config:get([auth, mechanisms]),
          B <- [atom_to_binary(M)],
          Plus orelse binary:longest_common_suffix([B, <<"-PLUS">>]) =/= 5].

%% @doc The channel bindings offered on a connection (XEP-0440), by type
%% name: none unless a -PLUS mechanism is offered.
-spec channel_bindings(throng_transport:socket()) -> #{binary() => binary()}.
channel_bindings(Sock) ->
    Offered = [M || M <- throng_config:get([auth, mechanisms]),
                    lists:member(M, ['SCRAM-SHA-1-PLUS', 'SCRAM-SHA-256-PLUS'])],
    case Offered of
        [] -> #{};
        _ -> throng_transport:channel_bindings(Sock)
    end.

%% @doc The HT mechanisms of FAST on a connection, strongest binding
%% first: tls-exporter, tls-unique (both this connection's), the
%% certificate, none.
-spec fast_mechanisms(throng_transport:socket()) -> [binary()].
fast_mechanisms(Sock) ->
    case throng_config:get([auth, fast]) of
        false -> [];
        true ->
            CB = throng_transport:channel_bindings(Sock),
            [<<"HT-SHA-256-EXPR">> || is_map_key(<<"tls-exporter">>, CB)] ++
                [<<"HT-SHA-256-UNIQ">> || is_map_key(<<"tls-unique">>, CB)] ++
                [<<"HT-SHA-256-ENDP">> || is_map_key(<<"tls-server-end-point">>, CB)] ++
                [<<"HT-SHA-256-NONE">>]
    end.
