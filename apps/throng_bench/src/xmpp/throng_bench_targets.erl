%% @doc Several servers as one: the targets of an xmpp run (the nodes of a
%% cluster, each on its own address or port) and which user goes where.
%%
%% User N connects to target N mod K (K targets, counted from 0 in the
%% order given), so every user's node is known without a table: the
%% per-target counters, and the split of delivery latency into same-node and
%% cross-node pairs (the sender's target is the receiver's, or not), follow
%% from the user numbers alone.
-module(throng_bench_targets).

-export([parse/1, of_user/2, pair/2, label/1, loopback/1]).

-export_type([target/0]).

-type target() :: {Host :: binary(), inet:port_number()}.

-define(DEFAULT_PORT, 5222).

%% @doc Targets from text: "HOST:PORT" items separated by commas, where a
%% port may be a range "HOST:P1-P2" (one target per port, in order);
%% "[v6]:PORT" for IPv6 addresses; a missing port is 5222. A list of such
%% texts (a YAML list of strings) is their concatenation. The same target twice is a
%% mistake (two nodes cannot listen on one address and port).
-spec parse(binary() | string() | [binary() | string()]) -> {ok, [target(), ...]} | error.
parse([]) -> error;
parse([C | _] = S) when is_integer(C) -> parse_text(S);
parse(L) when is_list(L) ->
    try
        Ts = lists:append([case I of
                               B when is_binary(B) ->
                                   case parse_text(binary_to_list(B)) of
                                       {ok, T} -> T;
                                       error -> throw(bad)
                                   end;
                               _ -> throw(bad)
                           end || I <- L]),
        unique(Ts)
    catch throw:bad -> error
    end;
parse(B) when is_binary(B) -> parse_text(binary_to_list(B));
parse(_) -> error.

parse_text(S) ->
    try
        unique(lists:append([item(string:trim(I)) || I <- string:split(S, ",", all)]))
    catch throw:bad -> error
    end.

unique(Ts) ->
    case length(lists:usort(Ts)) =:= length(Ts) of
        true -> {ok, Ts};
        false -> error
    end.

item("") -> throw(bad);
item("[" ++ _ = I) -> [one(I)];
item(I) ->
    case string:split(I, ":", trailing) of
        [H, Ports] when H =/= "" ->
            case string:split(Ports, "-") of
                [Lo, Hi] ->
                    case {port(Lo), port(Hi)} of
                        {P1, P2} when P2 >= P1, P2 - P1 < 10000 ->
                            [{host(H), P} || P <- lists:seq(P1, P2)];
                        _ -> throw(bad)
                    end;
                [_] -> [one(I)]
            end;
        _ -> [one(I)]
    end.

one(I) ->
    case throng_bench_units:parse_host_port(I, ?DEFAULT_PORT) of
        {ok, {H, P}} when H =/= "" -> {host(H), P};
        _ -> throw(bad)
    end.

host(H) -> unicode:characters_to_binary(H).

port(S) ->
    case string:to_integer(S) of
        {N, ""} when N > 0, N < 65536 -> N;
        _ -> throw(bad)
    end.

%% @doc The target (0-based) of user number N among K targets.
-spec of_user(non_neg_integer(), pos_integer()) -> non_neg_integer().
of_user(N, K) -> N rem K.

%% @doc Whether a message from a user on target S to one on target R stays
%% on one node or crosses to another.
-spec pair(non_neg_integer(), non_neg_integer()) -> same | cross.
pair(T, T) -> same;
pair(_, _) -> cross.

%% @doc "host:port" ("[v6]:port" for an IPv6 address).
-spec label(target()) -> binary().
label({H, P}) ->
    case binary:match(H, <<":">>) of
        nomatch -> <<H/binary, ":", (integer_to_binary(P))/binary>>;
        _ -> <<"[", H/binary, "]:", (integer_to_binary(P))/binary>>
    end.

%% @doc Whether every target is an IPv4 loopback address (127.0.0.0/8, or
%% a name that resolves to one): then source addresses can be spread over
%% 127.0.0.x.
-spec loopback([target()]) -> boolean().
loopback(Targets) ->
    lists:all(fun({H, _}) ->
                      case inet:getaddr(binary_to_list(H), inet) of
                          {ok, {127, _, _, _}} -> true;
                          _ -> false
                      end
              end, Targets).
