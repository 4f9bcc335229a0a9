%% @doc A study design (`throng-bench study --design NAME|FILE'): which
%% settings to compare, how often to repeat each, how to ramp the load and
%% when to stop. Loaded from YAML (a built-in under priv/studies or a file),
%% validated with one-line messages that name the key, and expanded into
%% the ordered list of runs.
%%
%% Runs are interleaved: repeat 1 of every setting, then repeat 2 of every
%% setting, and so on. A study cut short then still has every setting
%% measured, and slow drift of the machine (other load, a warming page
%% cache) falls on every setting alike instead of on the last ones.
-module(throng_bench_study_design).

-export([load/1, parse/2, runs/1, run_id/2, builtin_names/0, fingerprint/2,
         base_fingerprint/1, v1_base_fingerprint/2, setting_fingerprint/1,
         listen_yaml/1]).
%% API used by tests: a design from text.
-ignore_xref([{parse, 2}, {builtin_names, 0}]).

-type setting() :: #{name := binary(), table := binary(), factor := binary(),
                     erl_flags := binary(), listen := [{binary(), binary()}],
                     config := binary(), sysctl := [{binary(), binary()}],
                     tls := none | starttls | direct, nodes := pos_integer()}.
-type design() :: #{name := binary(), description := binary(), repeats := pos_integer(),
                    scenario := binary(), population := pos_integer(), rate := number(),
                    contacts := non_neg_integer(), iterations := pos_integer(),
                    port := 1..65535, seed := integer(), start := binary() | default,
                    stop_cmd := binary() | default, stop := map(),
                    ratio := map() | false, settings := [setting()]}.
-export_type([design/0, setting/0]).

-define(NAME_RE, "^[a-z0-9][a-z0-9_-]*$").

%% @doc The built-in designs.
-spec builtin_names() -> [binary()].
builtin_names() -> [<<"paper">>, <<"smoke">>].

%% @doc Load a design: a built-in name or a YAML file.
-spec load(string() | binary()) -> {ok, design()} | {error, binary()}.
load(NameOrFile) ->
    Name = throng_bench_units:to_bin(NameOrFile),
    {File, Label} = case lists:member(Name, builtin_names()) of
                        true -> {filename:join([code:priv_dir(throng_bench), "studies",
                                                <<Name/binary, ".yml">>]),
                                 <<"built-in design ", Name/binary>>};
                        false -> {Name, <<"design ", Name/binary>>}
                    end,
    case file:read_file(File) of
        {ok, Bin} -> parse(Bin, Label);
        {error, enoent} ->
            {error, <<Label/binary, ": no such file (built-in designs: ",
                      (iolist_to_binary(lists:join(<<", ">>, builtin_names())))/binary, ")">>};
        {error, R} -> {error, <<Label/binary, ": cannot read: ", (atom_to_binary(R))/binary>>}
    end.

%% @doc Parse and validate YAML text; Label names the source in messages.
-spec parse(binary(), binary()) -> {ok, design()} | {error, binary()}.
parse(Bin, Label) ->
    case throng_bench_units:yaml_document(Bin, Label) of
        {ok, Doc} when is_list(Doc) ->
            try {ok, design(Doc)}
            catch throw:{design_error, Key, Msg} ->
                    {error, iolist_to_binary([Label, ": key ", Key, ": ", Msg])}
            end;
        {ok, _} -> {error, <<Label/binary, ": expected a YAML mapping">>};
        {error, _} = E -> E
    end.

design(Doc) ->
    known(<<>>, Doc, [<<"name">>, <<"description">>, <<"repeats">>, <<"scenario">>,
                      <<"population">>, <<"rate">>, <<"contacts">>, <<"iterations">>,
                      <<"port">>, <<"seed">>, <<"server">>, <<"stop">>, <<"ratio">>,
                      <<"settings">>]),
    Server = get(<<"server">>, Doc, []),
    known(<<"server.">>, Server, [<<"start">>, <<"stop">>]),
    Stop = get(<<"stop">>, Doc, []),
    known(<<"stop.">>, Stop, [<<"error_rate">>, <<"min_errors">>, <<"login_p99">>,
                              <<"window">>, <<"memory">>, <<"fd_margin">>]),
    Settings = case get(<<"settings">>, Doc, undefined) of
                   L when is_list(L), L =/= [] ->
                       [setting(I, S) || {I, S} <- lists:enumerate(0, L)];
                   _ -> throw({design_error, <<"settings">>,
                               <<"expected a list of at least one setting">>})
               end,
    Names = [N || #{name := N} <- Settings],
    case Names -- lists:usort(Names) of
        [] -> ok;
        [Dup | _] -> throw({design_error, <<"settings">>, <<"two settings named ", Dup/binary>>})
    end,
    Contacts = int(<<"contacts">>, get(<<"contacts">>, Doc, 18), 0, 1000),
    Contacts rem 2 =:= 0 orelse throw({design_error, <<"contacts">>, <<"expected an even number">>}),
    #{name => name(<<"name">>, get(<<"name">>, Doc, undefined)),
      description => str(<<"description">>, get(<<"description">>, Doc, <<>>)),
      repeats => int(<<"repeats">>, get(<<"repeats">>, Doc, 3), 1, 1000),
      scenario => str(<<"scenario">>, get(<<"scenario">>, Doc, <<"paper">>)),
      population => int(<<"population">>, get(<<"population">>, Doc, 21000), 1, 10000000),
      rate => num(<<"rate">>, get(<<"rate">>, Doc, 200)),
      contacts => Contacts,
      iterations => int(<<"iterations">>, get(<<"iterations">>, Doc, 4096), 1, 1000000),
      port => int(<<"port">>, get(<<"port">>, Doc, 15240), 1, 65535),
      seed => int(<<"seed">>, get(<<"seed">>, Doc, 1), -(1 bsl 62), 1 bsl 62),
      start => case get(<<"start">>, Server, default) of
                   default -> default;
                   C -> str(<<"server.start">>, C)
               end,
      stop_cmd => case get(<<"stop">>, Server, default) of
                      default -> default;
                      C -> str(<<"server.stop">>, C)
                  end,
      stop => #{error_rate => frac(<<"stop.error_rate">>, get(<<"error_rate">>, Stop, 0.01)),
                min_errors => int(<<"stop.min_errors">>, get(<<"min_errors">>, Stop, 10), 1, 1 bsl 30),
                login_p99_ms => dur(<<"stop.login_p99">>, get(<<"login_p99">>, Stop, <<"2s">>)),
                window_s => max(1, dur(<<"stop.window">>, get(<<"window">>, Stop, <<"5s">>)) div 1000),
                memory => case get(<<"memory">>, Stop, none) of
                              none -> none;
                              M -> size(<<"stop.memory">>, M)
                          end,
                fd_margin => int(<<"stop.fd_margin">>, get(<<"fd_margin">>, Stop, 100), 0, 1000000)},
      ratio => ratio(get(<<"ratio">>, Doc, [])),
      settings => Settings}.

ratio(F) when F =:= false; F =:= <<"false">> -> false;
ratio(R) when is_list(R) ->
    known(<<"ratio.">>, R, [<<"users">>, <<"size">>, <<"duration">>, <<"from">>, <<"p99">>,
                            <<"refine">>, <<"steps">>]),
    Users = int(<<"ratio.users">>, get(<<"users">>, R, 1000), 2, 18000),
    Users rem 2 =:= 0 orelse throw({design_error, <<"ratio.users">>, <<"expected an even number">>}),
    #{users => Users,
      size => int(<<"ratio.size">>, get(<<"size">>, R, 64), 1, 65536),
      duration_ms => max(5000, dur(<<"ratio.duration">>, get(<<"duration">>, R, <<"20s">>))),
      from => int(<<"ratio.from">>, get(<<"from">>, R, 500), 10, Users * 1000),
      p99_ms => max(1, dur(<<"ratio.p99">>, get(<<"p99">>, R, <<"1s">>))),
      refine => int(<<"ratio.refine">>, get(<<"refine">>, R, 2), 0, 10),
      max_steps => int(<<"ratio.steps">>, get(<<"steps">>, R, 10), 1, 30)};
ratio(_) -> throw({design_error, <<"ratio">>, <<"expected a mapping or false">>}).

setting(I, S) when is_list(S) ->
    P = <<"settings[", (integer_to_binary(I))/binary, "].">>,
    known(P, S, [<<"name">>, <<"table">>, <<"factor">>, <<"erl_flags">>, <<"listen">>,
                 <<"config">>, <<"sysctl">>, <<"tls">>, <<"nodes">>]),
    K = fun(Key) -> <<P/binary, Key/binary>> end,
    #{name => name(K(<<"name">>), get(<<"name">>, S, undefined)),
      table => str(K(<<"table">>), get(<<"table">>, S, <<"other">>)),
      factor => str(K(<<"factor">>), get(<<"factor">>, S, <<>>)),
      erl_flags => str(K(<<"erl_flags">>), get(<<"erl_flags">>, S, <<>>)),
      listen => scalars(K(<<"listen">>), get(<<"listen">>, S, [])),
      config => str(K(<<"config">>), get(<<"config">>, S, <<>>)),
      nodes => int(K(<<"nodes">>), get(<<"nodes">>, S, 1), 1, 16),
      sysctl => [case re:run(N, "^net\\.[a-z0-9_.]+$", [{capture, none}]) of
                     match -> {N, V};
                     nomatch -> throw({design_error, K(<<"sysctl">>),
                                       <<"only net.* keys can be set, got ", N/binary>>})
                 end || {N, V} <- scalars(K(<<"sysctl">>), get(<<"sysctl">>, S, []))],
      tls => case get(<<"tls">>, S, <<"none">>) of
                 T when T =:= <<"none">>; T =:= <<"starttls">>; T =:= <<"direct">> ->
                     binary_to_atom(T);
                 T -> throw({design_error, K(<<"tls">>),
                             <<"expected none, starttls or direct, got ", (show(T))/binary>>})
             end};
setting(I, _) ->
    throw({design_error, <<"settings[", (integer_to_binary(I))/binary, "]">>,
           <<"expected a mapping">>}).

%% @doc The runs of a design in the order they are made: [{Setting, Repeat}].
-spec runs(design()) -> [{setting(), pos_integer()}].
runs(#{repeats := R, settings := Ss}) ->
    [{S, Rep} || Rep <- lists:seq(1, R), S <- Ss].

%% @doc The directory name of a run under OUT/runs.
-spec run_id(setting(), pos_integer()) -> binary().
run_id(#{name := N}, Rep) -> <<N/binary, "-", (integer_to_binary(Rep))/binary>>.

%% @doc The fingerprint of a whole design as study.json held it before
%% per-setting fingerprints (texts and repeats left out). RATIO stands for
%% the design's `ratio' then: the one in that study.json, since the ratio
%% measures nothing of the runs and may have changed since.
-spec fingerprint(design(), map() | false) -> binary().
fingerprint(D, Ratio) ->
    Ss = [maps:without([table, factor, nodes], S) || S <- maps:get(settings, D)],
    integer_to_binary(erlang:phash2({v1_base(D, Ratio), Ss}, 1 bsl 32), 16).

%% @doc What must be equal for a study directory to be resumed with a
%% design, but for the settings: a study may be resumed with some of its
%% settings (--only) or with new ones, never with another population,
%% rate, scenario or stop rule. (Not the ratio: it is measured apart.)
-spec base_fingerprint(design()) -> binary().
base_fingerprint(D) ->
    integer_to_binary(erlang:phash2(maps:without([ratio], v1_base(D, false)), 1 bsl 32), 16).

%% @doc base_fingerprint/1 as study.json held it before version 2 (the
%% design's `ratio' in it; RATIO: the one that study.json held).
-spec v1_base_fingerprint(design(), map() | false) -> binary().
v1_base_fingerprint(D, Ratio) ->
    integer_to_binary(erlang:phash2(v1_base(D, Ratio), 1 bsl 32), 16).

%% @doc What must be equal for a setting's runs to be comparable with the
%% runs made of a setting of the same name.
-spec setting_fingerprint(setting()) -> binary().
setting_fingerprint(S) ->
    %% one node is what every setting was before `nodes' existed
    Drop = [table, factor] ++ [nodes || maps:get(nodes, S, 1) =:= 1],
    integer_to_binary(erlang:phash2(maps:without(Drop, S), 1 bsl 32), 16).

v1_base(D, Ratio) -> maps:without([name, description, repeats, settings], D#{ratio => Ratio}).

%% @doc A setting's listener options as lines of bench/bench_throng.sh's
%% THRONG_LISTEN_EXTRA (four spaces, key: value).
-spec listen_yaml(setting()) -> binary().
listen_yaml(#{listen := L}) ->
    iolist_to_binary([["    ", K, ": ", V, "\n"] || {K, V} <- L]).

%%% Values

get(K, L, Default) ->
    case lists:keyfind(K, 1, L) of
        {_, V} -> V;
        false -> Default
    end.

known(Prefix, L, Keys) when is_list(L) ->
    case [K || {K, _} <- L, not lists:member(K, Keys)] of
        [] -> ok;
        [K | _] -> throw({design_error, <<Prefix/binary, K/binary>>,
                          iolist_to_binary(["unknown key (known: ", lists:join(", ", Keys), ")"])})
    end;
known(Prefix, _, _) ->
    throw({design_error, binary:part(Prefix, 0, max(0, byte_size(Prefix) - 1)),
           <<"expected a mapping">>}).

name(K, V) when is_binary(V) ->
    case re:run(V, ?NAME_RE, [{capture, none}]) of
        match -> V;
        nomatch -> throw({design_error, K, <<"expected a name of a-z, 0-9, _ and -, got \"",
                                            V/binary, "\"">>})
    end;
name(K, undefined) -> throw({design_error, K, <<"missing">>});
name(K, V) -> name(K, show(V)).

str(_K, V) when is_binary(V) -> V;
str(_K, V) when is_integer(V); is_float(V) -> show(V);
str(K, V) -> throw({design_error, K, <<"expected a string, got ", (show(V))/binary>>}).

scalars(_K, []) -> [];
scalars(K, L) when is_list(L) ->
    [case V of
         _ when is_binary(V); is_integer(V); is_float(V) -> {N, show(V)};
         _ -> throw({design_error, <<K/binary, ".", N/binary>>, <<"expected a scalar value">>})
     end || {N, V} <- L];
scalars(K, _) -> throw({design_error, K, <<"expected a mapping of names to values">>}).

int(_K, V, Lo, Hi) when is_integer(V), V >= Lo, V =< Hi -> V;
int(K, V, Lo, Hi) ->
    throw({design_error, K, iolist_to_binary(io_lib:format("expected an integer from ~b to ~b, got ~ts",
                                                           [Lo, Hi, show(V)]))}).

num(_K, V) when is_number(V), V > 0 -> V;
num(K, V) -> throw({design_error, K, <<"expected a positive number, got ", (show(V))/binary>>}).

frac(_K, V) when is_number(V), V > 0, V =< 1 -> V;
frac(K, V) -> throw({design_error, K, <<"expected a fraction above 0 and at most 1, got ",
                                       (show(V))/binary>>}).

dur(K, V) ->
    case throng_bench_units:parse_duration(V) of
        {ok, Ms} -> Ms;
        error -> throw({design_error, K, <<"expected a duration (e.g. 500ms, 5s), got ",
                                           (show(V))/binary>>})
    end.

size(K, V) ->
    case throng_bench_units:parse_size(V) of
        {ok, B} when B > 0 -> B;
        _ -> throw({design_error, K, <<"expected a size (e.g. 4GB), got ", (show(V))/binary>>})
    end.

show(V) when is_binary(V) -> V;
show(V) when is_integer(V) -> integer_to_binary(V);
show(V) when is_float(V) -> float_to_binary(V, [short]);
show(V) -> iolist_to_binary(io_lib:format("~0tp", [V])).
