%% @doc Scenario files: parsing, validation and the built-in scenarios.
%%
%% A scenario is a YAML document (docs/bench.md describes every key). Every
%% key is declared once below with its type and default; an unknown key, a
%% value of the wrong type or an inconsistent combination is rejected with a
%% message naming the key path, the value and what was expected. The result
%% is a plain map that can be sent to worker VMs.
-module(throng_bench_scenario).

-export([load/1, parse/2, apply_overrides/2, session_index/2, describe/1, targets/1]).
%% API used by tests: a scenario from YAML text.
-ignore_xref([{parse, 2}]).

-export_type([scenario/0]).

-type scenario() :: #{atom() => term()}.
-type path() :: [binary() | non_neg_integer()].

%% Field declarations: {Key, Type, Default}. `required' as default means the
%% key must be present.
-define(SERVER_FIELDS,
        [{host, string, <<"127.0.0.1">>},
         {port, {int, 1, 65535}, 5222},
         {targets, targets, none},
         {domain, string, <<"localhost">>},
         {tls, {enum, [none, starttls, direct]}, none},
         {tls_resume, bool, false},
         {auth, {enum, [plain, 'scram-sha-1', 'scram-sha-256', 'scram-sha-1-plus', 'scram-sha-256-plus', fast]}, plain},
         {resource, string, <<"bench">>}]).

-define(USER_FIELDS,
        [{first, {int, 0, 1 bsl 40}, 1},
         {count, {int, 1, 1 bsl 40}, auto},
         {name, string, <<"user%N">>},
         {password, string, <<"password">>},
         {csv, string, none},
         {register, bool, false},
         {contacts, {enum, [neighbours, none]}, neighbours},
         {contact_count, {int, 0, 1000}, 18}]).

-define(PHASE_FIELDS,
        [{rate, pos_number, required},
         {duration, duration_or_infinity, infinity},
         {max_users, int_or_infinity, infinity},
         {distribution, {enum, [poisson, constant]}, poisson}]).

-define(SESSION_FIELDS,
        [{name, string, required},
         {probability, probability, required},
         {presence, bool, true},
         {roster, bool, false},
         {csi_inactive, bool, false},
         {chat, {section, ?CHAT_FIELDS}, none},
         {muc, {section, ?MUC_SESSION_FIELDS}, none},
         {length, dist, inherit},
         {keepalive, duration_or_none, inherit}]).

%% quiet_end: no message in the last so many ms of the user's session (a
%% message to a contact in the moment it leaves goes to offline storage,
%% which the bench cannot tell from a loss).
-define(CHAT_FIELDS,
        [{think, dist, required},
         {size, size, 64},
         {first_after, dist, none},
         {quiet_end, duration, 0}]).

%% XEP-0045 group chat: how many of the scenario's rooms a user joins, and
%% how often it says something in one of them (none: it only listens).
-define(MUC_SESSION_FIELDS,
        [{rooms, {int, 1, 1000}, 1},
         {think, dist_or_none, none},
         {first_after, dist, none},
         {size, size, 64}]).

%% The rooms of a scenario: the service and how many rooms (room R is
%% benchroomR; user N joins rooms N, N+1, ... modulo the count).
-define(MUC_FIELDS,
        [{service, string, <<"conference.localhost">>},
         {rooms, {int, 1, 1000000}, 1}]).

-define(TIMEOUT_FIELDS,
        [{connect, duration, 10000},
         {step, duration, 30000}]).

-define(TOP_FIELDS,
        [{name, string, <<"unnamed">>},
         {server, {section, ?SERVER_FIELDS}, #{}},
         {users, {section, ?USER_FIELDS}, #{}},
         {arrival, {list, ?PHASE_FIELDS}, required},
         {sessions, {list, ?SESSION_FIELDS}, required},
         {length, dist, {constant, 300000}},
         {keepalive, duration_or_none, 60000},
         {timeouts, {section, ?TIMEOUT_FIELDS}, #{}},
         {muc, {section, ?MUC_FIELDS}, #{}},
         {duration, duration_or_auto, auto},
         {grace, duration, 10000},
         {drain, duration, 2000},
         {socket_buffer, {int, 64, 1048576}, 128}]).

%% @doc Load a scenario: the name of a built-in (`paper', `smoke') or a file.
-spec load(string() | binary()) -> {ok, scenario()} | {error, binary()}.
load(NameOrFile) ->
    Name = throng_bench_units:to_bin(NameOrFile),
    case lists:member(Name, builtin_names()) of
        true ->
            File = filename:join([code:priv_dir(throng_bench), "scenarios",
                                  <<Name/binary, ".yml">>]),
            read(File, <<"built-in scenario ", Name/binary>>);
        false ->
            read(Name, <<"scenario ", Name/binary>>)
    end.

read(File, Label) ->
    case file:read_file(File) of
        {ok, Bin} -> parse(Bin, Label);
        {error, enoent} ->
            {error, <<Label/binary, ": no such file (built-in scenarios: ",
                      (iolist_to_binary(lists:join(<<", ">>, builtin_names())))/binary, ")">>};
        {error, R} ->
            {error, <<Label/binary, ": cannot read: ", (atom_to_binary(R))/binary>>}
    end.

%% @doc The names accepted by `--scenario' without a file.
-spec builtin_names() -> [binary()].
builtin_names() -> [<<"paper">>, <<"smoke">>].

%% @doc Parse and validate YAML text. Label names the source in messages.
-spec parse(binary(), binary()) -> {ok, scenario()} | {error, binary()}.
parse(Bin, Label) ->
    case throng_bench_units:yaml_document(Bin, Label) of
        {ok, Doc} ->
            try
                {ok, validate(field_map(Doc, ?TOP_FIELDS, []))}
            catch
                throw:{scenario_error, Path, Msg} ->
                    {error, iolist_to_binary([Label, ": ", format_error({Path, Msg})])}
            end;
        {error, _} = E -> E
    end.

%% @doc "key a.b[2].c: message".
-spec format_error({path(), iodata()}) -> binary().
format_error({[], Msg}) -> iolist_to_binary(Msg);
format_error({Path, Msg}) -> iolist_to_binary(["key ", path_str(Path), ": ", Msg]).

path_str(Path) ->
    lists:foldl(fun(I, Acc) when is_integer(I) -> [Acc, "[", integer_to_list(I), "]"];
                   (K, []) -> [K];
                   (K, Acc) -> [Acc, ".", K]
                end, [], Path).

%% @doc Apply command-line overrides (already typed) and re-validate.
%% Keys: host, port (both drop the scenario's targets), targets, domain, tls,
%% auth, users, rate, length, duration,
%% keepalive, password, register, first.
-spec apply_overrides(scenario(), #{atom() => term()}) -> {ok, scenario()} | {error, binary()}.
apply_overrides(S0, Ov) ->
    try
        S = maps:fold(fun override/3, S0, Ov),
        {ok, validate(S)}
    catch throw:{scenario_error, Path, Msg} ->
            {error, format_error({Path, Msg})}
    end.

override(K, V, S = #{server := Srv}) when K =:= host; K =:= port ->
    %% one server given on the command line: the scenario's targets go
    S#{server => Srv#{K => V, targets => none}};
override(targets, V, S = #{server := Srv}) ->
    S#{server => Srv#{targets => V}};
override(K, V, S = #{server := Srv}) when K =:= domain; K =:= tls; K =:= auth; K =:= tls_resume ->
    S#{server => Srv#{K => V}};
override(K, V, S = #{users := U}) when K =:= password; K =:= register; K =:= first; K =:= csv;
                                       K =:= contact_count ->
    S#{users => U#{K => V}};
override(users, N, S = #{arrival := [P], users := U}) ->
    S#{arrival => [P#{max_users => N}], users => U#{count => N}};
override(users, _N, _S) ->
    throw({scenario_error, [], <<"--users needs a scenario with exactly one arrival phase">>});
override(rate, R, S = #{arrival := [P]}) ->
    S#{arrival => [P#{rate => R}]};
override(rate, _R, _S) ->
    throw({scenario_error, [], <<"--rate needs a scenario with exactly one arrival phase">>});
override(length, D, S = #{sessions := Ss}) ->
    S#{length => D, sessions => [X#{length => D} || X <- Ss]};
override(keepalive, D, S = #{sessions := Ss}) ->
    S#{keepalive => D, sessions => [X#{keepalive => D} || X <- Ss]};
override(K, V, S) when K =:= duration; K =:= grace; K =:= name; K =:= socket_buffer ->
    S#{K => V}.

%% @doc Cross-field checks and derived values (idempotent).
-spec validate(scenario()) -> scenario().
validate(S0 = #{arrival := Phases, sessions := Sessions0, users := U0, length := Len,
                keepalive := KA}) ->
    Total = throng_bench_arrival:total_users(Phases),
    Total =:= infinity andalso
        throw({scenario_error, [<<"arrival">>],
               <<"every phase runs forever with no max_users: give the last phase a "
                 "duration or a max_users">>}),
    Sum = lists:sum([P || #{probability := P} <- Sessions0]),
    abs(Sum - 1.0) > 0.001 andalso
        throw({scenario_error, [<<"sessions">>],
               io_lib:format("the probabilities add up to ~.4f, expected 1", [float(Sum)])}),
    Names = [N || #{name := N} <- Sessions0],
    length(lists:usort(Names)) =:= length(Names) orelse
        throw({scenario_error, [<<"sessions">>], <<"two sessions have the same name">>}),
    Sessions = [X#{length => inherit_val(maps:get(length, X), Len),
                   keepalive => inherit_val(maps:get(keepalive, X), KA)} || X <- Sessions0],
    Count = case maps:get(count, U0) of
                auto -> Total;
                C -> C
            end,
    case maps:get(server, S0, #{}) of
        #{auth := fast, tls := none} ->
            throw({scenario_error, [<<"server">>, <<"auth">>],
                   <<"fast (SASL2, XEP-0388) is offered over TLS only: set server.tls to "
                     "starttls or direct">>});
        #{tls_resume := true, tls := none} ->
            throw({scenario_error, [<<"server">>, <<"tls_resume">>],
                   <<"resumes TLS sessions: set server.tls to starttls or direct">>});
        #{auth := Plus, tls := none} when Plus =:= 'scram-sha-1-plus';
                                          Plus =:= 'scram-sha-256-plus' ->
            throw({scenario_error, [<<"server">>, <<"auth">>],
                   [atom_to_binary(Plus), <<" binds the TLS connection: set server.tls to "
                                             "starttls or direct">>]});
        _ -> ok
    end,
    #{contact_count := CC} = U0,
    CC rem 2 =:= 0 orelse
        throw({scenario_error, [<<"users">>, <<"contact_count">>],
               io_lib:format("expected an even number (contacts on both sides), got ~b", [CC])}),
    U = U0#{count => Count},
    S0#{sessions => Sessions, users => U}.

inherit_val(inherit, Default) -> Default;
inherit_val(V, _) -> V.

%% @doc The servers of a scenario, in order: `server.targets', or the one
%% `server.host':`server.port'.
-spec targets(scenario()) -> [throng_bench_targets:target(), ...].
targets(#{server := #{targets := [_ | _] = Ts}}) -> Ts;
targets(#{server := #{host := H, port := P}}) -> [{H, P}].

%% @doc Which session a new user runs, as its position (1-based) among the
%% sessions: U is uniform in [0, 1).
-spec session_index([map()], float()) -> pos_integer().
session_index(Sessions, U) ->
    session_index(Sessions, U, 1).

session_index([_], _U, I) -> I;
session_index([#{probability := P} | Rest], U, I) ->
    case U < P of
        true -> I;
        false -> session_index(Rest, U - P, I + 1)
    end.

%% @doc A short summary for the report header.
-spec describe(scenario()) -> binary().
describe(#{name := Name, sessions := Ss, arrival := Ps}) ->
    iolist_to_binary(
      [Name, ": ",
       lists:join(", ", [io_lib:format("~s ~b%", [N, round(P * 100)])
                         || #{name := N, probability := P} <- Ss]),
       "; arrivals: ",
       lists:join(", ", [io_lib:format("~s ~ts/s for ~ts up to ~ts users",
                                       [D, throng_bench_units:format_num(R),
                                        case Du of infinity -> "ever";
                                            _ -> throng_bench_units:format_ms(Du) end,
                                        case M of infinity -> "any"; _ -> integer_to_list(M) end])
                         || #{rate := R, duration := Du, max_users := M, dist := D} <- Ps])]).

%% internal: declarative field checking

field_map(Doc, Fields, Path) when is_list(Doc) ->
    case is_map_node(Doc) of
        true -> ok;
        false -> throw({scenario_error, Path, [<<"expected a mapping of keys to values, got ">>,
                                               show(Doc)]})
    end,
    Known = [atom_to_binary(K) || {K, _, _} <- Fields],
    lists:foreach(
      fun({K, _}) ->
              lists:member(K, Known) orelse
                  throw({scenario_error, Path ++ [K],
                         [<<"unknown key (known keys here: ">>, lists:join(<<", ">>, Known),
                          <<")">>]})
      end, Doc),
    Dups = [K || {K, _} <- Doc, length([x || {K2, _} <- Doc, K2 =:= K]) > 1],
    Dups =:= [] orelse throw({scenario_error, Path ++ [hd(Dups)], <<"given more than once">>}),
    maps:from_list(
      [begin
           BK = atom_to_binary(K),
           case lists:keyfind(BK, 1, Doc) of
               {_, V} -> {key_name(K), value(Type, V, Path ++ [BK])};
               false when Default =:= required ->
                   throw({scenario_error, Path ++ [BK], <<"missing (this key is required)">>});
               false -> {key_name(K), default(Type, Default, Path ++ [BK])}
           end
       end || {K, Type, Default} <- Fields]);
field_map(Other, _Fields, Path) ->
    throw({scenario_error, Path, [<<"expected a mapping of keys to values, got ">>, show(Other)]}).

key_name(distribution) -> dist;
key_name(K) -> K.

default({section, Fields}, #{}, Path) -> field_map([], Fields, Path);
default(_, D, _) -> D.

is_map_node([]) -> true;
is_map_node(L) -> lists:all(fun({K, _}) when is_binary(K) -> true; (_) -> false end, L).

value(string, V, _) when is_binary(V), V =/= <<>> -> V;
value(string, V, _) when is_integer(V) -> integer_to_binary(V);
value(string, V, P) -> bad(P, <<"a non-empty string">>, V);
value({int, Min, Max}, V, _) when is_integer(V), V >= Min, V =< Max -> V;
value({int, Min, Max}, V, P) ->
    bad(P, io_lib:format("an integer from ~b to ~b", [Min, Max]), V);
value(int_or_infinity, V, _) when is_integer(V), V > 0 -> V;
value(int_or_infinity, <<"infinity">>, _) -> infinity;
value(int_or_infinity, V, P) -> bad(P, <<"a positive integer or 'infinity'">>, V);
value(pos_number, V, _) when is_number(V), V > 0 -> V;
value(pos_number, V, P) -> bad(P, <<"a positive number">>, V);
value(probability, V, _) when is_number(V), V >= 0, V =< 1 -> V;
value(probability, V, P) -> bad(P, <<"a probability from 0 to 1">>, V);
value(bool, true, _) -> true;
value(bool, false, _) -> false;
value(bool, V, P) when is_binary(V) ->
    case string:lowercase(V) of
        B when B =:= <<"true">>; B =:= <<"yes">>; B =:= <<"on">> -> true;
        B when B =:= <<"false">>; B =:= <<"no">>; B =:= <<"off">> -> false;
        _ -> bad(P, <<"true or false">>, V)
    end;
value(bool, V, P) -> bad(P, <<"true or false">>, V);
value({enum, Allowed}, V, P) when is_binary(V) ->
    case [A || A <- Allowed, atom_to_binary(A) =:= string:lowercase(V)] of
        [A] -> A;
        [] -> bad(P, ["one of ", lists:join(", ", [atom_to_binary(A) || A <- Allowed])], V)
    end;
value({enum, Allowed}, V, P) ->
    bad(P, ["one of ", lists:join(", ", [atom_to_binary(A) || A <- Allowed])], V);
value(duration, V, P) ->
    case throng_bench_units:parse_duration(V) of
        {ok, Ms} -> Ms;
        error -> bad(P, <<"a duration such as 500ms, 30s, 5m, 1h or a number of seconds">>, V)
    end;
value(duration_or_infinity, <<"infinity">>, _) -> infinity;
value(duration_or_infinity, V, P) ->
    case throng_bench_units:parse_duration(V) of
        {ok, Ms} when Ms > 0 -> Ms;
        _ -> bad(P, <<"a positive duration (500ms, 30s, 5m, 1h) or 'infinity'">>, V)
    end;
value(duration_or_none, V, _) when V =:= <<"none">>; V =:= false -> none;
value(duration_or_none, V, P) ->
    case throng_bench_units:parse_duration(V) of
        {ok, Ms} when Ms > 0 -> Ms;
        _ -> bad(P, <<"a positive duration (500ms, 30s, 5m, 1h) or 'none'">>, V)
    end;
value(duration_or_auto, <<"auto">>, _) -> auto;
value(duration_or_auto, V, P) ->
    case throng_bench_units:parse_duration(V) of
        {ok, Ms} when Ms > 0 -> Ms;
        _ -> bad(P, <<"a positive duration (30s, 5m, 1h) or 'auto'">>, V)
    end;
value(size, V, P) ->
    case throng_bench_units:parse_size(V) of
        {ok, N} -> N;
        error -> bad(P, <<"a size in bytes such as 64, 4k or 1M">>, V)
    end;
value(targets, V, P) ->
    case throng_bench_targets:parse(V) of
        {ok, Ts} -> Ts;
        error -> bad(P, <<"a list of \"HOST:PORT\" (a port range HOST:P1-P2 counts one target "
                          "per port; each target once)">>, V)
    end;
value(dist, V, P) -> dist(V, P);
value(dist_or_none, V, _) when V =:= <<"none">>; V =:= false -> none;
value(dist_or_none, V, P) -> dist(V, P);
value({section, Fields}, V, P) -> field_map(V, Fields, P);
value({list, Fields}, V, P) when is_list(V), V =/= [] ->
    case is_map_node(V) of
        true -> bad(P, <<"a list (one '- ' item per entry)">>, V);
        false ->
            [field_map(Item, Fields, P ++ [I]) || {I, Item} <- lists:enumerate(0, V)]
    end;
value({list, _}, V, P) -> bad(P, <<"a non-empty list (one '- ' item per entry)">>, V).

-define(DIST_EXPECT, <<"a duration (constant) or one of {constant: D}, {exponential: MEAN}, "
                       "{uniform: [MIN, MAX]} with durations such as 30s">>).

dist([{<<"constant">>, D}], P) -> {constant, value(duration, D, P ++ [<<"constant">>])};
dist([{<<"exponential">>, D}], P) ->
    case value(duration, D, P ++ [<<"exponential">>]) of
        0 -> bad(P ++ [<<"exponential">>], <<"a positive mean">>, D);
        M -> {exponential, M}
    end;
dist([{<<"uniform">>, [A, B]}], P) ->
    Lo = value(duration, A, P ++ [<<"uniform">>, 0]),
    Hi = value(duration, B, P ++ [<<"uniform">>, 1]),
    Hi >= Lo orelse bad(P ++ [<<"uniform">>], <<"[MIN, MAX] with MIN =< MAX">>, [A, B]),
    {uniform, Lo, Hi};
dist(V, P) when is_list(V) -> bad(P, ?DIST_EXPECT, V);
dist(V, P) ->
    case throng_bench_units:parse_duration(V) of
        {ok, Ms} -> {constant, Ms};
        error -> bad(P, ?DIST_EXPECT, V)
    end.

-spec bad(path(), iodata(), term()) -> no_return().
bad(Path, Expected, Got) ->
    throw({scenario_error, Path, [<<"expected ">>, Expected, <<", got ">>, show(Got)]}).

show(V) when is_binary(V) -> [$", V, $"];
show(V) when is_number(V) -> io_lib:format("~p", [V]);
show([]) -> <<"an empty value">>;
show(V) when is_list(V) ->
    case is_map_node(V) of
        true -> [<<"a mapping {">>, lists:join(", ", [K || {K, _} <- V]), <<"}">>];
        false -> <<"a list">>
    end;
show(V) -> io_lib:format("~0tp", [V]).
