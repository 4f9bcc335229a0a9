%% @doc Loads, validates and serves Throng's configuration.
%%
%% The source is, in order: the application environment key `config' (a map;
%% used by tests), the YAML file named by the THRONG_CONFIG environment
%% variable, the file in the application environment key `config_file', or no
%% file at all (every option at its default). Every option is declared in
%% {@link throng_config_spec}; an unknown key or a wrong value is an error that
%% names the key, the value and what was expected, and stops the boot.
%%
%% Validated values live in persistent_term: reading an option costs a
%% lookup, no message.
-module(throng_config).

-include("throng.hrl").

-export([load/0, load_file/1, validate/1, get/1, source/0, modules/1, is_admin/1]).
%% API used by tests and operators (a file, a raw configuration).
-ignore_xref([{load_file, 1}, {validate, 1}]).

-define(PT, ?MODULE).

-type path() :: [atom()].
-export_type([path/0]).

%% @doc Loads the configuration from its source (see the module doc) and
%% stores it. Returns a human-readable error on a bad file.
-spec load() -> ok | {error, string()}.
load() ->
    case application:get_env(throng, config) of
        {ok, Map} when is_map(Map) ->
            load_map(Map);
        _ ->
            case os:getenv("THRONG_CONFIG") of
                Path when is_list(Path), Path =/= "" ->
                    load_file(Path);
                _ ->
                    case application:get_env(throng, config_file) of
                        {ok, Path} -> load_file(Path);
                        undefined -> store(<<"(defaults)">>, validate(#{}))
                    end
            end
    end.

-spec load_file(file:filename_all()) -> ok | {error, string()}.
load_file(Path) ->
    case read_yaml(Path) of
        {ok, Raw} -> store(iolist_to_binary(Path), validate(Raw));
        {error, _} = Error -> Error
    end.

%% A configuration given as a map with atom or binary keys (the application
%% environment key `config', set by tests and embedded use).
-spec load_map(map()) -> ok | {error, string()}.
load_map(Map) ->
    store(<<"(map)">>, validate(Map)).

%% @doc The file (or other source) the configuration was read from.
-spec source() -> binary().
source() ->
    persistent_term:get({?PT, '$source'}, <<"(not loaded)">>).

%% @doc The value at a path of option names, e.g. `[auth, scram_iterations]'.
%% Crashes on a path the spec does not declare (a programming error).
-spec get(path()) -> term().
get([Top | Rest]) ->
    descend(persistent_term:get({?PT, Top}), Rest).

descend(Value, []) -> Value;
descend(Map, [Key | Rest]) when is_map(Map) -> descend(maps:get(Key, Map), Rest).

store(Source, {ok, Config}) ->
    persistent_term:put({?PT, '$source'}, Source),
    maps:foreach(fun(K, V) -> persistent_term:put({?PT, K}, V) end, Config);
store(Source, {error, Msg}) ->
    {error, lists:flatten(io_lib:format("~ts: ~ts", [Source, Msg]))}.

read_yaml(Path) ->
    case file:read_file(Path) of
        {ok, Bin} ->
            case fast_yaml:decode(Bin) of
                {ok, []} -> {ok, #{}};
                {ok, [Doc]} -> {ok, Doc};
                {ok, [_ | _]} ->
                    {error, fmt("~ts: one YAML document expected, found several", [Path])};
                {error, {parser_error, Why, Line, Col}} ->
                    {error, fmt("~ts:~b:~b: YAML syntax error: ~ts", [Path, Line + 1, Col + 1, Why])};
                {error, Why} ->
                    {error, fmt("~ts: YAML error: ~p", [Path, Why])}
            end;
        {error, Why} ->
            {error, fmt("cannot read configuration file ~ts: ~ts", [Path, file:format_error(Why)])}
    end.

%% @doc The extension modules enabled on a host with their options:
%% `host_config' for that host if it names it, else the top-level `modules'.
-spec modules(binary()) -> #{module() => map()}.
modules(Host) ->
    Named = case [M || #{host := H, modules := M} <- ?MODULE:get([host_config]), H =:= Host] of
                [M | _] -> M;
                [] -> ?MODULE:get([modules])
            end,
    Catalog = throng_config_spec:modules(),
    maps:from_list([{proplists:get_value(Name, Catalog), Opts} || {Name, Opts} <- maps:to_list(Named)]).

%% @doc Whether a JID (any resource) is one of the server's `admins'.
-spec is_admin(#jid{}) -> boolean().
is_admin(JID) ->
    lists:member(throng_jid:to_binary(throng_jid:bare(JID)), ?MODULE:get([admins])).

%% @doc Checks a raw configuration (YAML proplists or maps, binary or atom
%% keys) against the spec and fills in defaults.
-spec validate(term()) -> {ok, #{atom() => term()}} | {error, string()}.
validate(Raw) ->
    try
        moved_keys(pairs(Raw, "")),
        Config = section(throng_config_spec:spec(), Raw, ""),
        check_host_config(Config),
        check_tls(Config),
        {ok, Config}
    catch
        throw:{config_error, Msg} -> {error, Msg}
    end.

%% An option that moved is named with where it went.
moved_keys(Pairs) ->
    Moved = throng_config_spec:moved(),
    _ = [case [To || {Old, To} <- maps:to_list(Moved), atom_to_binary(Old) =:= name(K)] of
             [To] -> fail(to_list(name(K)), "this option moved to ~ts (see docs/configuration.md)",
                          [To]);
             [] -> ok
         end || {K, _} <- Pairs],
    ok.

name(K) when is_atom(K) -> atom_to_binary(K);
name(K) when is_binary(K) -> K;
name(_) -> <<>>.

check_host_config(#{hosts := Hosts, host_config := HC}) ->
    _ = [lists:member(H, Hosts) orelse
             fail(fmt("host_config[~b].host", [I]), "~ts is not one of hosts", [H])
         || {I, #{host := H}} <- enumerate(HC)],
    ok.

%% The tls section's lists are never empty, and each version enabled has
%% a cipher suite of its own (TLS 1.3's names start TLS_AES_ or
%% TLS_CHACHA20_, TLS 1.2's TLS_ECDHE_).
check_tls(#{tls := #{versions := Versions, ciphers := Ciphers, groups := Groups}}) ->
    _ = [fail("tls." ++ atom_to_list(K), "at least one is needed", [])
         || {K, []} <- [{versions, Versions}, {ciphers, Ciphers}, {groups, Groups}]],
    _ = [fail("tls.ciphers", "no cipher suite for ~ts, which tls.versions enables", [V])
         || V <- lists:usort(Versions), not lists:any(fun(C) -> suite_version(C) =:= V end, Ciphers)],
    ok.

suite_version(Suite) ->
    case atom_to_list(Suite) of
        "TLS_ECDHE_" ++ _ -> 'tlsv1.2';
        _ -> 'tlsv1.3'
    end.

section(Spec, Raw, Where) ->
    Pairs = pairs(Raw, Where),
    Given = lists:foldl(
              fun({K, V}, Acc) ->
                      Key = known_key(Spec, K, Where),
                      maps:is_key(Key, Acc) andalso
                          fail(join(Where, Key), "option given twice", []),
                      Acc#{Key => V}
              end, #{}, Pairs),
    maps:map(
      fun(Key, Opt) ->
              Here = join(Where, Key),
              case Given of
                  #{Key := V} -> value(maps:get(type, Opt), V, Here);
                  #{} ->
                      case Opt of
                          #{default := D} -> default(maps:get(type, Opt), D, Here);
                          #{} -> fail(Here, "required option missing", [])
                      end
              end
      end, Spec).

%% Defaults are written in the spec in their final form, except sections,
%% which still need their own defaults filled in.
default({section, Spec}, D, Here) -> section(Spec, D, Here);
default({list_of, Spec}, D, Here) -> value({list_of, Spec}, D, Here);
default(modules, D, Here) -> value(modules, D, Here);
default(_, D, _) -> D.

pairs(M, _) when is_map(M) -> maps:to_list(M);
pairs(L, Where) when is_list(L) ->
    lists:all(fun(P) -> is_tuple(P) andalso tuple_size(P) =:= 2 end, L)
        orelse fail(Where, "expected a mapping of option: value", []),
    L;
pairs(Other, Where) ->
    fail(Where, "expected a mapping of option: value, got ~ts", [show(Other)]).

known_key(Spec, K, Where) ->
    Name = if is_atom(K) -> atom_to_binary(K);
              is_binary(K) -> K;
              true -> fail(Where, "option names must be strings, got ~ts", [show(K)])
           end,
    case [A || A <- maps:keys(Spec), atom_to_binary(A) =:= Name] of
        [Key] -> Key;
        [] ->
            Known = lists:join(", ", [atom_to_list(A) || A <- lists:sort(maps:keys(Spec))]),
            fail(join(Where, Name), "unknown option (known here: ~ts)", [Known])
    end.

value(boolean, V, _) when is_boolean(V) -> V;
value(boolean, <<"true">>, _) -> true;
value(boolean, <<"false">>, _) -> false;
value(boolean, V, W) -> fail(W, "expected true or false, got ~ts", [show(V)]);
value(string, V, _) when is_binary(V) -> V;
value(string, V, W) when is_list(V) -> to_bin(V, W);
value(string, V, W) -> fail(W, "expected a string, got ~ts", [show(V)]);
value(path, V, W) -> value(string, V, W);
value(domain, V, W) ->
    S = value(string, V, W),
    case throng_jid:domainprep(S) of
        D when is_binary(D), D =/= <<>> -> D;
        _ -> fail(W, "expected a domain name, got ~ts", [show(V)])
    end;
value(bare_jid, V, W) ->
    S = value(string, V, W),
    case throng_jid:parse(S) of
        {ok, #jid{user = U, resource = <<>>} = J} when U =/= <<>> -> throng_jid:to_binary(J);
        _ -> fail(W, "expected a bare JID such as admin@example.org, got ~ts", [show(V)])
    end;
value(host_port, V, W) ->
    S = value(string, V, W),
    case S =:= <<>> orelse throng_host_port:parse(S) =/= error of
        true -> S;
        false -> fail(W, "expected host:port such as 10.0.0.1:5222 or [::1]:5222, got ~ts",
                      [show(V)])
    end;
value(node, V, _) when is_atom(V) -> V;
value(node, V, W) ->
    S = value(string, V, W),
    case binary:split(S, <<"@">>) of
        [Name, Host] when Name =/= <<>>, Host =/= <<>> -> binary_to_atom(S);
        _ -> fail(W, "expected an Erlang node name such as throng@10.0.0.1, got ~ts", [show(V)])
    end;
value(ip, V, _) when is_tuple(V) -> V;
value(ip, V, W) ->
    S = value(string, V, W),
    case inet:parse_address(binary_to_list(S)) of
        {ok, Addr} -> Addr;
        {error, _} -> fail(W, "expected an IP address such as \"127.0.0.1\" or \"::\", got ~ts", [show(V)])
    end;
value({int, Min, Max}, V, W) ->
    case is_integer(V) andalso V >= Min andalso (Max =:= infinity orelse V =< Max) of
        true -> V;
        false -> fail(W, "expected an integer from ~b to ~ts, got ~ts", [Min, show(Max), show(V)])
    end;
value({int_or_infinity, Min}, V, W) ->
    case V of
        infinity -> infinity;
        <<"infinity">> -> infinity;
        _ when is_integer(V), V >= Min -> V;
        _ -> fail(W, "expected an integer of at least ~b or infinity, got ~ts", [Min, show(V)])
    end;
value({enum, Atoms}, V, W) ->
    Name = if is_atom(V) -> atom_to_binary(V); is_binary(V) -> V; true -> <<>> end,
    case [A || A <- Atoms, atom_to_binary(A) =:= Name] of
        [A] -> A;
        [] -> fail(W, "expected one of ~ts, got ~ts",
                   [lists:join(", ", [atom_to_list(A) || A <- Atoms]), show(V)])
    end;
value({list, Type}, V, W) when is_list(V) ->
    [value(Type, X, fmt("~ts[~b]", [W, I])) || {I, X} <- enumerate(V)];
value({list, _}, V, W) ->
    fail(W, "expected a list, got ~ts", [show(V)]);
value({section, Spec}, V, W) ->
    section(Spec, V, W);
value({list_of, Spec}, V, W) when is_list(V) ->
    [section(Spec, X, fmt("~ts[~b]", [W, I])) || {I, X} <- enumerate(V)];
value({list_of, _}, V, W) ->
    fail(W, "expected a list of sections, got ~ts", [show(V)]);
value(modules, V, W) ->
    %% Each named module's value is a section of its own options; an empty
    %% value (`name:` or `name: {}`) takes every default.
    Catalog = throng_config_spec:modules(),
    Pairs = case V of
                null -> [];
                <<>> -> [];
                _ -> pairs(V, W)
            end,
    Spec = maps:from_list([{Name, #{type => boolean, doc => ""}} || {Name, _} <- Catalog]),
    lists:foldl(
      fun({K, Opts}, Acc) ->
              Name = known_key(Spec, K, W),
              maps:is_key(Name, Acc) andalso fail(join(W, Name), "module given twice", []),
              Mod = proplists:get_value(Name, Catalog),
              Raw = case Opts of
                        null -> #{};
                        <<>> -> #{};
                        [] -> #{};
                        _ -> Opts
                    end,
              Acc#{Name => section(Mod:options(), Raw, join(W, Name))}
      end, #{}, Pairs).

enumerate(L) -> lists:zip(lists:seq(0, length(L) - 1), L).

to_bin(V, W) ->
    case unicode:characters_to_binary(V) of
        B when is_binary(B) -> B;
        _ -> fail(W, "expected a string, got ~ts", [show(V)])
    end.

join("", Key) -> to_list(Key);
join(Where, Key) -> Where ++ "." ++ to_list(Key).

to_list(A) when is_atom(A) -> atom_to_list(A);
to_list(B) when is_binary(B) -> binary_to_list(B).

show(V) when is_binary(V) -> [$", V, $"];
show(V) -> io_lib:format("~tp", [V]).

-spec fail(string(), string(), list()) -> no_return().
fail(Where, Fmt, Args) ->
    throw({config_error, lists:flatten(io_lib:format("~ts: " ++ Fmt, [Where | Args]))}).

fmt(Fmt, Args) -> lists:flatten(io_lib:format(Fmt, Args)).
