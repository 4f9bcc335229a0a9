%% @doc `host:port' addresses as XMPP writes them (RFC 6120 §4.9.3.19,
%% see-other-host: an IPv6 address in brackets), parsed.
%% Shared by the server's configuration (cluster.node_address) and the
%% load generator, which follows a see-other-host redirect.
-module(throng_host_port).

-export([parse/1]).

%% @doc The host (an address string or a name, no brackets) and the port,
%% or error.
-spec parse(binary()) -> {string(), inet:port_number()} | error.
parse(<<"[", Rest/binary>>) ->
    case binary:split(Rest, <<"]:">>) of
        [Host, Port] when Host =/= <<>> -> with_port(Host, Port);
        _ -> error
    end;
parse(S) when is_binary(S) ->
    case string:split(S, <<":">>, trailing) of
        [Host, Port] when Host =/= <<>> ->
            case binary:match(Host, <<":">>) of
                nomatch -> with_port(Host, Port);
                _ -> error          % an IPv6 address needs its brackets
            end;
        _ -> error
    end.

with_port(Host, Port) ->
    try binary_to_integer(Port) of
        P when P >= 1, P =< 65535 -> {binary_to_list(Host), P};
        _ -> error
    catch error:badarg -> error
    end.
