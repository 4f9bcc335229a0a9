%% @doc JID parsing and preparation (RFC 6120 §3, RFC 7622 with the
%% stringprep profiles of RFC 3920): examples, limits, rendering, and
%% properties that hold the ASCII fast path to the stringprep NIF's answers.
-module(throng_jid_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

-include("throng_proper.hrl").

jid(U, S, R) -> {ok, #jid{user = U, server = S, resource = R}}.

u(Chars) -> unicode:characters_to_binary(Chars).

setup() ->
    {ok, _} = application:ensure_all_started(stringprep),
    ok.

with_stringprep(Tests) ->
    {setup, fun setup/0, fun(_) -> ok end, Tests}.

%% Valid addresses, after RFC 7622 §3.5's examples (the stringprep answers,
%% e.g. nodeprep folds "ß" to "ss" where PRECIS would keep it).
valid_test_() ->
    with_stringprep(
      [?_assertEqual(jid(<<"juliet">>, <<"example.com">>, <<>>),
                     throng_jid:parse(<<"juliet@example.com">>)),
       ?_assertEqual(jid(<<"juliet">>, <<"example.com">>, <<"foo">>),
                     throng_jid:parse(<<"juliet@example.com/foo">>)),
       ?_assertEqual(jid(<<"juliet">>, <<"example.com">>, <<"foo bar">>),
                     throng_jid:parse(<<"juliet@example.com/foo bar">>)),
       ?_assertEqual(jid(<<"juliet">>, <<"example.com">>, <<"foo@bar">>),
                     throng_jid:parse(<<"juliet@example.com/foo@bar">>)),
       ?_assertEqual(jid(<<"juliet">>, <<"example.com">>, <<"a/b">>),
                     throng_jid:parse(<<"juliet@example.com/a/b">>)),
       ?_assertEqual(jid(<<"foo\\20bar">>, <<"example.com">>, <<>>),
                     throng_jid:parse(<<"foo\\20bar@example.com">>)),
       ?_assertEqual(jid(<<"fussball">>, <<"example.com">>, <<>>),
                     throng_jid:parse(u("fußball@example.com"))),
       ?_assertEqual(jid(u("π"), <<"example.com">>, <<>>),
                     throng_jid:parse(u("π@example.com"))),
       ?_assertEqual(jid(u("σ"), <<"example.com">>, <<"foo">>),
                     throng_jid:parse(u("Σ@example.com/foo"))),
       ?_assertEqual(jid(u("λ"), <<"example.com">>, u("Σ")),
                     throng_jid:parse(u("λ@example.com/Σ"))),
       ?_assertEqual(jid(<<>>, <<"example.com">>, <<>>), throng_jid:parse(<<"example.com">>)),
       ?_assertEqual(jid(<<>>, <<"example.com">>, <<"r">>),
                     throng_jid:parse(<<"example.com/r">>)),
       %% Case folding of localpart and domainpart, never of the resource.
       ?_assertEqual(jid(<<"juliet">>, <<"example.com">>, <<"Balcony">>),
                     throng_jid:parse(<<"JuLiEt@EXAMPLE.com/Balcony">>)),
       ?_assertEqual(jid(<<"caf", 16#E9/utf8>>, <<"xn--example.com">>, <<>>),
                     throng_jid:parse(<<"CAF", 16#C9/utf8, "@XN--example.com">>)),
       %% Fullwidth and ideographic full stops are label separators.
       ?_assertEqual(jid(<<"a">>, <<"b.com">>, <<>>), throng_jid:parse(u("ａ@ｂ．com"))),
       ?_assertEqual(jid(<<>>, <<"a.b">>, <<>>), throng_jid:parse(u([$a, 16#3002, $b]))),
       ?_assertEqual(jid(<<"a">>, <<"my_host">>, <<>>), throng_jid:parse(<<"a@my_host">>))]).

invalid_test_() ->
    with_stringprep(
      [{binary_to_list(In), ?_assertEqual(error, throng_jid:parse(In))}
       || In <- [<<>>, <<"@">>, <<"/">>, <<"@/">>,
                 <<"\"juliet\"@example.com">>, <<"foo bar@example.com">>,
                 <<"juliet@">>, <<"@example.com">>, <<"@example.com/r">>,
                 <<"juliet@example.com/">>, <<"example.com/">>, <<"/foobar">>,
                 <<"a@b@c">>, <<"a&b@c">>, <<"a'b@c">>, <<"a:b@c">>, <<"a<b@c">>,
                 <<"a>b@c">>, <<"a\tb@c">>, <<"a@b/c", 0>>, <<"a@b/c", 7, "d">>,
                 <<"a@exa mple.com">>, <<"a@exa\tmple.com">>, <<"a@exa:mple.com">>,
                 <<"a@.">>, <<"a@..">>, <<"a@example..com">>, <<"a@.example.com">>,
                 <<"a@example.com..">>, <<16#FF, "@a">>, <<"a@b/", 16#C3>>,
                 u([16#AD, $@, $b]),                                            % preps to nothing
                 u([$a, $@, $b, $/, 16#AD]),
                 u([16#E000, $@, $b]),                                          % private use
                 u([16#221, $@, $b]),                                           % unassigned
                 u([16#627, $1, $@, $b]),                                       % bidi
                 <<"[">>, <<"[]">>, <<"[::1">>, <<"[not-ip]">>, <<"a@[127.0.0.1]">>,
                 <<"a@[::1]x">>]]).

ip_literal_test_() ->
    with_stringprep(
      [?_assertEqual(jid(<<>>, <<"[::1]">>, <<>>), throng_jid:parse(<<"[::1]">>)),
       ?_assertEqual(jid(<<"a">>, <<"[2001:db8::1]">>, <<"r">>),
                     throng_jid:parse(<<"a@[2001:db8::1]/r">>)),
       ?_assertEqual(jid(<<"a">>, <<"127.0.0.1">>, <<>>), throng_jid:parse(<<"a@127.0.0.1">>))]).

%% One trailing dot is dropped; the result compares equal to the dotless form.
trailing_dot_test_() ->
    with_stringprep(
      [?_assertEqual(throng_jid:parse(<<"a@example.com/r">>),
                     throng_jid:parse(<<"a@example.com./r">>)),
       ?_assertEqual(jid(<<>>, <<"example.com">>, <<>>), throng_jid:parse(<<"Example.COM.">>)),
       ?_assertEqual(error, throng_jid:make(<<>>, <<"example.com..">>, <<>>))]).

%% Each part may have up to 1023 bytes once prepared.
length_test_() ->
    Max = binary:copy(<<"a">>, 1023),
    Long = binary:copy(<<"a">>, 1024),
    Label = binary:copy(<<"a">>, 63),
    MaxDomain = <<(binary:copy(<<Label/binary, ".">>, 15))/binary, (binary:copy(<<"b">>, 63))/binary>>,
    with_stringprep(
      [?_assertEqual(1023, byte_size(MaxDomain)),
       ?_assertEqual(jid(Max, MaxDomain, Max), throng_jid:make(Max, MaxDomain, Max)),
       ?_assertEqual(error, throng_jid:make(Long, <<"a">>, <<>>)),
       ?_assertEqual(error, throng_jid:make(<<>>, <<MaxDomain/binary, "b">>, <<>>)),
       ?_assertEqual(error, throng_jid:make(<<>>, <<"a">>, Long)),
       %% Counted after preparation: 1023 Greek capitals are 2046 bytes.
       ?_assertEqual(error, throng_jid:make(u(lists:duplicate(1023, 16#3A3)), <<"a">>, <<>>)),
       ?_assertMatch({ok, _}, throng_jid:make(u(lists:duplicate(511, 16#3A3)), <<"a">>, <<>>)),
       %% Long input that preps to little is still accepted...
       ?_assertEqual(jid(<<"a">>, <<"b">>, <<>>),
                     throng_jid:make(u([$a | lists:duplicate(1100, 16#AD)]), <<"b">>, <<>>)),
       %% ...up to a bound on the raw size.
       ?_assertEqual(error, throng_jid:make(u([$a | lists:duplicate(3000, 16#AD)]),
                                            <<"b">>, <<>>))]).

make_test_() ->
    with_stringprep(
      [?_assertEqual(jid(<<"a">>, <<"b.c">>, <<"R">>), throng_jid:make(<<"A">>, <<"B.C.">>, <<"R">>)),
       ?_assertEqual(jid(<<>>, <<"b">>, <<>>), throng_jid:make(<<>>, <<"b">>, <<>>)),
       ?_assertEqual(error, throng_jid:make(<<"a">>, <<>>, <<>>)),
       ?_assertEqual(error, throng_jid:make(<<"a@b">>, <<"c">>, <<>>)),
       ?_assertEqual(error, throng_jid:make(<<"a">>, <<"c/d">>, <<>>)),
       ?_assertEqual(error, throng_jid:make(u([16#AD]), <<"c">>, <<>>)),
       %% make accepts in a resource what parse would have split on.
       ?_assertEqual(jid(<<"a">>, <<"c">>, <<"x/y@z">>), throng_jid:make(<<"a">>, <<"c">>, <<"x/y@z">>))]).

render_test_() ->
    Full = #jid{user = <<"u">>, server = <<"s">>, resource = <<"r">>},
    [?_assertEqual(<<"u@s/r">>, throng_jid:to_binary(Full)),
     ?_assertEqual(<<"s/r">>, throng_jid:to_binary(Full#jid{user = <<>>})),
     ?_assertEqual(<<"u@s">>, throng_jid:to_binary(Full#jid{resource = <<>>})),
     ?_assertEqual(<<"s">>, throng_jid:to_binary(#jid{server = <<"s">>})),
     ?_assertEqual(Full#jid{resource = <<>>}, throng_jid:bare(Full))].

%%% Properties

%% ASCII, with the characters the profiles treat specially over-represented.
ascii() ->
    ?BIND(L, proper_types:list(
               proper_types:frequency(
                 [{8, proper_types:elements(lists:seq($a, $z) ++ lists:seq($0, $9))},
                  {2, proper_types:elements(lists:seq($A, $Z))},
                  {2, proper_types:elements("\"&'/:<>@ .-_=,\\")},
                  {1, proper_types:range(0, 127)}])),
          list_to_binary(L)).

%% Mostly ASCII with some non-ASCII (Latin, Greek, soft hyphen, Arabic).
text() ->
    ?BIND(L, proper_types:list(
               proper_types:frequency(
                 [{8, proper_types:range(0, 127)},
                  {1, proper_types:elements([16#E9, 16#C9, 16#DF, 16#3A3, 16#3C3, 16#AD,
                                             16#627, 16#FF21, 16#3002, 16#221])}])),
          unicode:characters_to_binary(L)).

%% The fast path returns exactly what the NIF returns.
prop_fast_path_is_stringprep(Gen) ->
    ?FORALL(Bin, Gen,
            throng_jid:nodeprep(Bin) =:= stringprep:nodeprep(Bin)
            andalso throng_jid:nameprep(Bin) =:= stringprep:nameprep(Bin)
            andalso throng_jid:resourceprep(Bin) =:= stringprep:resourceprep(Bin)).

%% Parsing the rendering of a parsed JID gives the same JID.
prop_round_trip() ->
    ?FORALL(Bin, text(),
            case throng_jid:parse(Bin) of
                {ok, Jid} ->
                    throng_jid:parse(throng_jid:to_binary(Jid)) =:= {ok, Jid}
                        andalso throng_jid:make(Jid#jid.user, Jid#jid.server,
                                                Jid#jid.resource) =:= {ok, Jid};
                error ->
                    true
            end).

%% Structured input: user@domain/resource from parts that are mostly valid.
prop_parse_parts() ->
    ?FORALL({U, S, R}, {text(), text(), text()},
            begin
                Bin = iolist_to_binary([U, [$@ || U =/= <<>>], S, [[$/, R] || R =/= <<>>]]),
                case {throng_jid:parse(Bin), binary:match(<<U/binary, S/binary>>, [<<"@">>, <<"/">>])} of
                    {{ok, J}, nomatch} ->
                        {ok, J} =:= throng_jid:make(U, S, R);
                    {error, nomatch} ->
                        error =:= throng_jid:make(U, S, R);
                    {_, _} ->
                        true
                end
            end).

properties_test_() ->
    with_stringprep(
      [{Name, {timeout, 30,
               ?_assert(proper:quickcheck(Prop, [{numtests, N}, {to_file, user}]))}}
       || {Name, Prop, N} <- [{"fast path = NIF, ASCII", prop_fast_path_is_stringprep(ascii()), 5000},
                              {"fast path = NIF, text", prop_fast_path_is_stringprep(text()), 2000},
                              {"round trip", prop_round_trip(), 2000},
                              {"parse = make", prop_parse_parts(), 2000}]]).

%% Prints (does not assert) the fast path's gain over calling the NIF.
fast_path_speed_test_() ->
    with_stringprep(
      {timeout, 30,
       fun() ->
               Cases = [{nodeprep, <<"juliet">>}, {nodeprep, <<"Juliet">>},
                        {nameprep, <<"example.com">>}, {resourceprep, <<"balcony-4f2a9c">>}],
               io:format(user, "~nstringprep fast path (ns per call, 100k calls):~n", []),
               [begin
                    Fast = ns_per_call(fun() -> throng_jid:F(In) end),
                    Nif = ns_per_call(fun() -> stringprep:F(In) end),
                    io:format(user, "  ~-12s ~-20s fast ~5b  nif ~5b  (~.1fx)~n",
                              [F, io_lib:format("~p", [In]), Fast, Nif, Nif / max(Fast, 1)])
                end || {F, In} <- Cases]
       end}).

ns_per_call(Fun) ->
    N = 100000,
    Loop = fun Loop(0) -> ok; Loop(I) -> _ = Fun(), Loop(I - 1) end,
    Loop(1000),
    {Us, ok} = timer:tc(fun() -> Loop(N) end),
    round(Us * 1000 / N).
