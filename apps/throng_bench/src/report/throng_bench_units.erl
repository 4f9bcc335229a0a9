%% @doc Parsing and printing of durations, sizes, rates and addresses, and
%% the reading of YAML documents.
-module(throng_bench_units).

-export([parse_duration/1, parse_size/1, parse_number/1, parse_ip/1, parse_ip_range/1,
         parse_host_port/2,
         format_ms/1, format_us/1, format_bytes/1, format_rate/1, format_num/1,
         to_bin/1, yaml_document/2]).

%% @doc A duration in milliseconds: "250ms", "30s", "2m", "1h", "1.5s", or a
%% plain number of seconds ("30", 30, 0.5).
-spec parse_duration(binary() | string() | number()) -> {ok, non_neg_integer()} | error.
parse_duration(N) when is_integer(N), N >= 0 -> {ok, N * 1000};
parse_duration(N) when is_float(N), N >= 0 -> {ok, round(N * 1000)};
parse_duration(S) when is_list(S) -> parse_duration(unicode:characters_to_binary(S));
parse_duration(B) when is_binary(B) ->
    case split_number(string:trim(B)) of
        {ok, N, Unit} when N >= 0 ->
            case unit_ms(string:lowercase(string:trim(Unit))) of
                error -> error;
                Mult -> {ok, round(N * Mult)}
            end;
        _ -> error
    end;
parse_duration(_) -> error.

unit_ms(<<>>) -> 1000;
unit_ms(<<"us">>) -> 0.001;
unit_ms(<<"ms">>) -> 1;
unit_ms(<<"s">>) -> 1000;
unit_ms(<<"sec">>) -> 1000;
unit_ms(<<"m">>) -> 60000;
unit_ms(<<"min">>) -> 60000;
unit_ms(<<"h">>) -> 3600000;
unit_ms(_) -> error.

%% @doc A size in bytes: "64", "4k", "4KB", "1M", "1MiB" (k = 1024).
-spec parse_size(binary() | string() | number()) -> {ok, non_neg_integer()} | error.
parse_size(N) when is_integer(N), N >= 0 -> {ok, N};
parse_size(S) when is_list(S) -> parse_size(unicode:characters_to_binary(S));
parse_size(B) when is_binary(B) ->
    case split_number(string:trim(B)) of
        {ok, N, Unit} when N >= 0 ->
            case unit_bytes(string:lowercase(string:trim(Unit))) of
                error -> error;
                Mult -> {ok, round(N * Mult)}
            end;
        _ -> error
    end;
parse_size(_) -> error.

unit_bytes(<<>>) -> 1;
unit_bytes(<<"b">>) -> 1;
unit_bytes(U) when U =:= <<"k">>; U =:= <<"kb">>; U =:= <<"kib">> -> 1024;
unit_bytes(U) when U =:= <<"m">>; U =:= <<"mb">>; U =:= <<"mib">> -> 1024 * 1024;
unit_bytes(U) when U =:= <<"g">>; U =:= <<"gb">>; U =:= <<"gib">> -> 1024 * 1024 * 1024;
unit_bytes(_) -> error.

%% @doc A plain number ("500", "0.25", 12).
-spec parse_number(binary() | string() | number()) -> {ok, number()} | error.
parse_number(N) when is_number(N) -> {ok, N};
parse_number(S) when is_list(S) -> parse_number(unicode:characters_to_binary(S));
parse_number(B) when is_binary(B) ->
    case split_number(string:trim(B)) of
        {ok, N, <<>>} -> {ok, N};
        _ -> error
    end;
parse_number(_) -> error.

split_number(B) ->
    {Num, Rest} = take_numeric(B, <<>>),
    case Num of
        <<>> -> error;
        _ ->
            try {ok, binary_to_integer(Num), Rest}
            catch error:badarg ->
                    try {ok, binary_to_float(Num), Rest}
                    catch error:badarg ->
                            try {ok, binary_to_float(<<Num/binary, "0">>), Rest}
                            catch error:badarg -> error
                            end
                    end
            end
    end.

take_numeric(<<C, Rest/binary>>, Acc) when C >= $0, C =< $9; C =:= $.; C =:= $- ->
    take_numeric(Rest, <<Acc/binary, C>>);
take_numeric(Rest, Acc) -> {Acc, Rest}.

%% @doc An IPv4 or IPv6 address.
-spec parse_ip(binary() | string()) -> {ok, inet:ip_address()} | error.
parse_ip(B) when is_binary(B) -> parse_ip(binary_to_list(B));
parse_ip(S) ->
    case inet:parse_address(S) of
        {ok, A} -> {ok, A};
        _ -> error
    end.

%% @doc "127.0.0.1", "127.0.0.1-127.0.0.16" (last octet range) or a
%% comma-separated list of those.
-spec parse_ip_range(binary() | string()) -> {ok, [inet:ip_address()]} | error.
parse_ip_range(B) when is_binary(B) -> parse_ip_range(binary_to_list(B));
parse_ip_range(S) ->
    try
        {ok, lists:append([range(string:trim(P)) || P <- string:split(S, ",", all)])}
    catch throw:bad -> error
    end.

range(P) ->
    case string:split(P, "-") of
        [A] -> [ip_or_throw(A)];
        [A, B] ->
            {A1, A2, A3, Lo} = ip_or_throw(A),
            case ip_or_throw(B) of
                {A1, A2, A3, Hi} when Hi >= Lo -> [{A1, A2, A3, X} || X <- lists:seq(Lo, Hi)];
                _ -> throw(bad)
            end
    end.

ip_or_throw(S) ->
    case parse_ip(S) of
        {ok, A} -> A;
        error -> throw(bad)
    end.

%% @doc "host:port", "host" (with the default port) or "[v6]:port".
-spec parse_host_port(binary() | string(), inet:port_number()) ->
          {ok, {string(), inet:port_number()}} | error.
parse_host_port(B, D) when is_binary(B) -> parse_host_port(binary_to_list(B), D);
parse_host_port("[" ++ Rest, D) ->
    case string:split(Rest, "]") of
        [H, ""] -> {ok, {H, D}};
        [H, ":" ++ P] -> with_port(H, P);
        _ -> error
    end;
parse_host_port(S, D) ->
    case string:split(S, ":", trailing) of
        [""] -> error;
        [H] -> {ok, {H, D}};
        [H, P] when H =/= "" -> with_port(H, P);
        _ -> error
    end.

with_port(H, P) ->
    case string:to_integer(P) of
        {N, ""} when N > 0, N < 65536 -> {ok, {H, N}};
        _ -> error
    end.

%% @doc "850us", "12.3ms", "4.5s", "2m30s", "1h05m".
-spec format_ms(number()) -> binary().
format_ms(Ms) -> format_us(Ms * 1000).

-spec format_us(number() | undefined) -> binary().
format_us(undefined) -> <<"-">>;
format_us(Us) when Us < 1000 -> iolist_to_binary(io_lib:format("~bus", [round(Us)]));
format_us(Us) when Us < 10000 -> iolist_to_binary(io_lib:format("~.2fms", [Us / 1000]));
format_us(Us) when Us < 1000000 -> iolist_to_binary(io_lib:format("~.1fms", [Us / 1000]));
format_us(Us) when Us < 60000000 -> iolist_to_binary(io_lib:format("~.2fs", [Us / 1000000]));
format_us(Us) when Us < 3600000000 ->
    S = round(Us / 1000000),
    iolist_to_binary(io_lib:format("~bm~2..0bs", [S div 60, S rem 60]));
format_us(Us) ->
    M = round(Us / 60000000),
    iolist_to_binary(io_lib:format("~bh~2..0bm", [M div 60, M rem 60])).

%% @doc "512B", "4.0KiB", "1.5MiB", "2.0GiB".
-spec format_bytes(number()) -> binary().
format_bytes(B) when B < 1024 -> iolist_to_binary(io_lib:format("~bB", [round(B)]));
format_bytes(B) when B < 1024 * 1024 -> iolist_to_binary(io_lib:format("~.1fKiB", [B / 1024]));
format_bytes(B) when B < 1024 * 1024 * 1024 ->
    iolist_to_binary(io_lib:format("~.1fMiB", [B / 1048576]));
format_bytes(B) -> iolist_to_binary(io_lib:format("~.2fGiB", [B / 1073741824])).

%% @doc A rate with a k/M suffix: "950", "12.5k", "1.20M".
-spec format_rate(number()) -> binary().
format_rate(R) when R < 1000 -> iolist_to_binary(io_lib:format("~b", [round(R)]));
format_rate(R) when R < 1000000 -> iolist_to_binary(io_lib:format("~.1fk", [R / 1000]));
format_rate(R) -> iolist_to_binary(io_lib:format("~.2fM", [R / 1000000])).

%% @doc A number for tables: integers as is, floats with up to 3 decimals.
-spec format_num(number() | undefined) -> binary().
format_num(undefined) -> <<"-">>;
format_num(N) when is_integer(N) -> integer_to_binary(N);
format_num(F) when abs(F) >= 100 -> iolist_to_binary(io_lib:format("~.1f", [F]));
format_num(F) -> iolist_to_binary(io_lib:format("~.3f", [F])).

%% @doc Any printable term as a binary.
-spec to_bin(term()) -> binary().
to_bin(B) when is_binary(B) -> B;
to_bin(A) when is_atom(A) -> atom_to_binary(A);
to_bin(I) when is_integer(I) -> integer_to_binary(I);
to_bin(L) when is_list(L) -> unicode:characters_to_binary(L);
to_bin(T) -> iolist_to_binary(io_lib:format("~0tp", [T])).

%% @doc The one YAML document of a text (a scenario, a study design), or a
%% message that starts with Label and says what is wrong with the text.
-spec yaml_document(binary(), binary()) -> {ok, term()} | {error, binary()}.
yaml_document(Bin, Label) ->
    case catch fast_yaml:decode(Bin) of
        {ok, [Doc]} -> {ok, Doc};
        {ok, []} -> {error, <<Label/binary, ": the file is empty">>};
        {ok, _} -> {error, <<Label/binary, ": expected one YAML document, found several">>};
        {error, {_, Text, Line, Col}} ->
            {error, iolist_to_binary(io_lib:format("~ts: YAML syntax error at line ~b, column ~b: ~ts",
                                                   [Label, Line + 1, Col + 1, Text]))};
        Other ->
            {error, iolist_to_binary(io_lib:format("~ts: cannot parse YAML: ~0tp", [Label, Other]))}
    end.
