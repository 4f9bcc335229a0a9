%%% Properties of throng_xml_stream and throng_xml, run from EUnit:
%%% random element trees survive serialization, any chunking and various
%%% spellings; the result never depends on how the input is cut; and the
%%% parser agrees with fast_xml (expat) on the same documents and on random
%%% byte mutations of them, except where XMPP's restrictions and the
%%% parser's limits say otherwise (see differential/2 and docs/xml-parser.md).
-module(throng_xml_prop_tests).

-include("throng_proper.hrl").

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

-import(proper_types, [choose/2, elements/1, frequency/1, list/1, vector/2, oneof/1,
                       resize/2, non_neg_integer/0, integer/0]).

-define(M, throng_xml_stream).

%%% EUnit entry points (numtests keep the whole file near 20 s)

round_trip_test_() ->
    check("serialize, cut anywhere, parse: same trees", prop_round_trip(), 400).

spellings_test_() ->
    check("CDATA, references, quotes, whitespace: same trees", prop_spellings(), 400).

chunking_does_not_matter_test_() ->
    check("whole or cut, valid or mutated: same events", prop_chunking_does_not_matter(), 1000).

same_as_fast_xml_test_() ->
    check("valid documents: same trees as fast_xml", prop_same_as_fast_xml(), 600).

mutated_same_as_fast_xml_test_() ->
    check("mutated documents: fast_xml agrees or the difference is allowed",
          prop_mutated_same_as_fast_xml(), 3000).

check(Name, Prop, N) ->
    {Name, {timeout, 120,
            fun() ->
                    ?assertEqual(true, proper:quickcheck(Prop, [{numtests, N}, {on_output, fun output/2}]))
            end}}.

%% PropEr's output without the progress dots.
output(".", []) -> ok;
output(Format, Args) -> io:format(user, Format, Args).

%%% Properties

%% to_binary then parse, cut anywhere, gives back the (normalized) trees.
prop_round_trip() ->
    ?FORALL({Els, Cuts}, {list(stanza()), cuts()},
            begin
                Doc = iolist_to_binary(["<stream:stream xmlns:stream='s'>",
                                        [[throng_xml:to_iolist(El), "\n"] || El <- Els],
                                        "</stream:stream>"]),
                Expected = [{stream_start, <<"stream:stream">>, [{<<"xmlns:stream">>, <<"s">>}]}]
                    ++ [{stanza, norm(El)} || El <- Els] ++ [stream_end],
                Expected =:= feed(Doc, Cuts, #{max_depth => 64, max_stanza_size => 1 bsl 24})
            end).

%% Other spellings of the same trees (CDATA sections, character references,
%% either quote, whitespace in tags, split text) parse to the same trees.
prop_spellings() ->
    ?FORALL({Els, Seed, Cuts}, {list(stanza()), integer(), cuts()},
            begin
                {Xml, _} = render_all(Els, {false, rand:seed_s(exsss, Seed)}),
                Doc = iolist_to_binary(["<s>", Xml, "</s>"]),
                Expected = [{stream_start, <<"s">>, []}] ++ [{stanza, norm(El)} || El <- Els]
                    ++ [stream_end],
                Expected =:= feed(Doc, Cuts, #{max_depth => 64, max_stanza_size => 1 bsl 24})
            end).

%% Whatever the bytes (valid or mutated streams), feeding them whole or cut
%% into pieces gives the same events. A stanza parsed from one chunk reports
%% an error at once; one assembled from several chunks reports it when it
%% completes or passes the size limit. So that both have happened, the input
%% ends with more than a stanza's worth of filler.
prop_chunking_does_not_matter() ->
    ?FORALL({Doc, Cuts, Opts}, {mutated_stream(), cuts(), opts()},
            begin
                Filler = binary:copy(<<"x">>, maps:get(max_stanza_size, Opts) + 1),
                Input = <<Doc/binary, Filler/binary>>,
                feed(Input, [], Opts) =:= feed(Input, Cuts, Opts)
            end).

%% Valid documents: both parsers accept and agree.
%% With raw whitespace in attribute values and raw CRs in text (which both
%% must normalize), only the two parsers' trees are compared.
prop_same_as_fast_xml() ->
    ?FORALL({El, Seed, Raw}, {stanza(), integer(), boolean()},
            begin
                {Xml, _} = render(declare_prefixes(El), {Raw, rand:seed_s(exsss, Seed)}),
                Doc = iolist_to_binary(Xml),
                Ours = ours(Doc),
                (Raw orelse {ok, norm(declare_prefixes(El))} =:= Ours)
                    andalso element(1, Ours) =:= ok
                    andalso Ours =:= theirs(Doc)
            end).

%% Mutated documents: equal trees when both accept, and only the
%% differences listed in differential/2 otherwise.
prop_mutated_same_as_fast_xml() ->
    ?FORALL({El, Seed, Raw, Muts}, {stanza(), integer(), boolean(), mutations()},
            begin
                {Xml, _} = render(declare_prefixes(El), {Raw, rand:seed_s(exsss, Seed)}),
                Doc = mutate(iolist_to_binary(Xml), Muts),
                Diff = differential(ours(Doc), theirs(Doc)),
                proper:collect(Diff, allowed(Diff))
            end).

%% How the two parsers' answers relate.
differential({ok, El}, {ok, El}) -> same_tree;
differential({error, _}, {error, _}) -> both_reject;
differential({ok, Ours}, {ok, Theirs}) ->
    %% fast_xml lists namespace declarations before the other attributes;
    %% throng_xml_stream keeps document order.
    case ns_first(Ours) =:= Theirs of
        true -> same_tree;
        false -> different_trees
    end;
%% XMPP forbids what expat allows (RFC 6120 11.1): comments, processing
%% instructions, DTD declarations.
differential({error, 'restricted-xml'}, {ok, _}) -> restricted_by_xmpp;
%% The parser does not check namespaces (the caller does), expat does.
differential({ok, _}, {error, {_, <<"unbound prefix">>}}) -> namespaces_not_checked;
differential({ok, _}, {error, {_, <<"must not undeclare prefix">>}}) -> namespaces_not_checked;
differential({ok, _}, {error, {_, <<"reserved prefix (xml) must not be undeclared or bound to "
                                    "another namespace name">>}}) -> namespaces_not_checked;
differential({ok, _}, {error, {_, <<"reserved prefix (xmlns) must not be declared or undeclared">>}}) ->
    namespaces_not_checked;
differential({ok, El}, {error, {_, <<"duplicate attribute">>}}) ->
    case has_prefixed_attrs(El) of
        true -> namespaces_not_checked;         % same expanded name
        false -> {we_accept, <<"duplicate attribute">>}
    end;
differential({ok, El}, {error, {_, <<"not well-formed (invalid token)">>}} = Theirs) ->
    case has_odd_qname(El) of
        true -> namespaces_not_checked;         % "a:b:c", ":a", "a:"
        false -> {we_accept, Theirs}
    end;
differential({ok, El}, {error, {_, <<"syntax error">>}} = Theirs) ->
    %% expat (2.4.5 on) refuses a namespace name holding its separator,
    %% which fast_xml sets to LF
    case lists:any(fun(V) -> binary:match(V, <<"\n">>) =/= nomatch end, ns_values(El)) of
        true -> namespaces_not_checked;
        false -> {we_accept, Theirs}
    end;
differential({ok, _}, Theirs) -> {we_accept, Theirs};
differential(Ours, {ok, _}) -> {they_accept, Ours}.

allowed(same_tree) -> true;
allowed(both_reject) -> true;
allowed(restricted_by_xmpp) -> true;
allowed(namespaces_not_checked) -> true;
allowed(_) -> false.

ns_first(#xmlel{attrs = Attrs, children = Cs} = El) ->
    {Decls, Others} = lists:partition(fun({K, _}) -> K =:= <<"xmlns">> orelse
                                                         binary:part(K, 0, min(6, byte_size(K))) =:= <<"xmlns:">>
                                      end, Attrs),
    El#xmlel{attrs = Decls ++ Others, children = [ns_first(C) || C <- Cs]};
ns_first(Text) ->
    Text.

ns_values(#xmlel{attrs = Attrs, children = Cs}) ->
    [V || {K, V} <- Attrs, K =:= <<"xmlns">> orelse binary:longest_common_prefix([K, <<"xmlns:">>]) =:= 6]
        ++ lists:append([ns_values(C) || #xmlel{} = C <- Cs]).

has_prefixed_attrs(#xmlel{attrs = Attrs, children = Cs}) ->
    lists:any(fun({K, _}) -> binary:match(K, <<":">>) =/= nomatch end, Attrs)
        orelse lists:any(fun has_prefixed_attrs/1, [C || #xmlel{} = C <- Cs]).

has_odd_qname(#xmlel{name = N, attrs = Attrs, children = Cs}) ->
    lists:any(fun odd_qname/1, [N | [K || {K, _} <- Attrs]])
        orelse lists:any(fun has_odd_qname/1, [C || #xmlel{} = C <- Cs]).

odd_qname(Name) ->
    case binary:split(Name, <<":">>, [global]) of
        [_] -> false;
        [P, L] -> P =:= <<>> orelse L =:= <<>> orelse not name_start(L);
        _ -> true
    end.

%% Whether a name's first character may start a name (the characters that
%% are NameChar but not NameStartChar cannot).
name_start(<<C/utf8, _/binary>>) ->
    not ((C >= $0 andalso C =< $9) orelse C =:= $- orelse C =:= $. orelse C =:= 16#B7
         orelse (C >= 16#300 andalso C =< 16#36F) orelse C =:= 16#203F orelse C =:= 16#2040);
name_start(_) -> false.

%%% Running the parsers

%% Events of Doc fed in the pieces that Cuts (positions, modulo the size)
%% make, or byte by byte.
feed(Doc, Cuts, Opts) ->
    Size = byte_size(Doc),
    Points = case Cuts of
                 bytes -> lists:seq(0, Size);
                 _ -> lists:usort([0, Size | [C rem (Size + 1) || C <- Cuts]])
             end,
    Pieces = [binary:part(Doc, A, B - A) || {A, B} <- lists:zip(lists:droplast(Points), tl(Points))],
    {Evs, _} = lists:foldl(fun(P, {Acc, S}) ->
                                   {E, S1} = ?M:parse(S, P),
                                   {Acc ++ E, S1}
                           end, {[], ?M:new(Opts)}, Pieces),
    Evs.

%% One element through throng_xml_stream: {ok, El} or {error, Condition}.
ours(Doc) ->
    Opts = #{max_depth => 1000, max_stanza_size => 1 bsl 24},
    case feed(<<"<s>", Doc/binary, "</s>">>, [], Opts) of
        [{stream_start, _, _}, {stanza, El}, stream_end] -> {ok, El};
        Evs -> case lists:last(Evs) of
                   {error, Cond, _} -> {error, Cond};
                   _ -> {error, not_one_element}
               end
    end.

%% One element through fast_xml: {ok, El} or {error, Reason}.
theirs(Doc) ->
    {ok, _} = application:ensure_all_started(fast_xml),
    case fxml_stream:parse_element(Doc) of
        #xmlel{} = El -> {ok, El};
        {error, Reason} -> {error, Reason}
    end.

%%% Generators

cuts() ->
    frequency([{3, list(non_neg_integer())}, {1, bytes}]).

opts() ->
    ?LET({D, S}, {frequency([{1, choose(1, 6)}, {2, return(32)}]), choose(20, 3000)},
         #{max_depth => D, max_stanza_size => S}).

return(X) -> proper_types:return(X).

stanza() ->
    frequency([{5, tree()}, {1, deep()}]).

tree() ->
    ?SIZED(S, tree(min(S, 24))).

tree(S) ->
    ?LET({Name, Attrs, Children}, {qname(), attrs(), children(S)},
         #xmlel{name = Name, attrs = Attrs, children = Children}).

children(S) when S < 3 ->
    resize(2, list({xmlcdata, text()}));
children(S) ->
    ?LET(N, choose(0, 4), vector(N, frequency([{3, ?LAZY(tree(S div 3))}, {2, {xmlcdata, text()}}]))).

%% A tree under a chain of up to 40 elements.
deep() ->
    ?LET({Depth, Leaf}, {choose(1, 40), resize(4, tree())},
         lists:foldl(fun(_, El) -> #xmlel{name = <<"d">>, children = [El]} end, Leaf,
                     lists:seq(1, Depth))).

qname() ->
    ?LET({Prefix, Local}, {frequency([{5, <<>>}, {1, elements([<<"p:">>, <<"q:">>])}]), local_name()},
         <<Prefix/binary, Local/binary>>).

local_name() ->
    ?LET({First, Rest},
         {elements("abcmxyzABZ_" ++ [16#E9, 16#65E5]),
          resize(6, list(elements("abcmxyzAZ_-.09" ++ [16#B7, 16#E9, 16#65E5])))},
         unicode:characters_to_binary([First | Rest])).

attrs() ->
    ?LET(Attrs, resize(4, list({qname(), text()})), unique_keys(Attrs)).

unique_keys(Attrs) ->
    lists:foldl(fun({K, _} = A, Acc) ->
                        case lists:keymember(K, 1, Acc) of
                            true -> Acc;
                            false -> Acc ++ [A]
                        end
                end, [], Attrs).

text() ->
    ?LET(Cs, resize(12, list(frequency([{6, text_char()}, {1, tricky()}]))),
         unicode:characters_to_binary(Cs)).

%% Strings that look like markup once a CDATA section or a chunk boundary
%% cuts them.
tricky() ->
    elements(["]>", "]]", "<x>", "</x>", "/>", "<!--", "-->", "?>", "&amp;", "']", "\"/>"]).

text_char() ->
    frequency([{10, choose($a, $z)},
               {3, elements(" \t\n\r")},
               {4, elements("&<>\"';]#=/!?-")},
               {2, elements([16#E9, 16#DF, 16#65E5, 16#1F600, 16#FFFD, 16#7F, 16#85, 16#2028,
                             16#10FFFF])}]).

mutated_stream() ->
    ?LET({Els, Seed, Raw, End, Muts}, {list(stanza()), integer(), boolean(), boolean(), mutations()},
         begin
             {Xml, _} = render_all(Els, {Raw, rand:seed_s(exsss, Seed)}),
             Doc = iolist_to_binary(["<?xml version='1.0'?><stream:stream xmlns='jabber:client'>",
                                     Xml, [ "</stream:stream>" || End]]),
             mutate(Doc, Muts)
         end).

boolean() -> proper_types:boolean().

mutations() ->
    resize(3, list(frequency([{4, {oneof([replace, insert, delete]), non_neg_integer(), mutation_byte()}},
                              {1, {insert, non_neg_integer(), fragment()}}]))).

fragment() ->
    elements([<<"<!--c-->">>, <<"<?p x?>">>, <<"<![CDATA[x]]>">>, <<"<!DOCTYPE a>">>, <<"&amp;">>,
              <<"&#65;">>, <<"&#x10FFFF;">>, <<"&foo;">>, <<"]]>">>, <<"<b/>">>, <<"</a>">>,
              <<" b='1'">>, <<"\r\n">>, <<"\xEF\xBF\xBF">>, <<"\xED\xA0\x80">>]).

mutation_byte() ->
    elements([$<, $>, $&, $;, $#, $x, $', $", $/, $!, $?, $], $[, $-, $=, $:, $\s, $\r, $\n, $\t, 0, 1,
              16#80, 16#C3, 16#E6, 16#F0, 16#FF, $a, $1]).

mutate(Doc, []) ->
    Doc;
mutate(<<>>, _) ->
    <<>>;
mutate(Doc, [{Op, N, Bytes} | Rest]) ->
    Pos = N rem byte_size(Doc),
    <<Before:Pos/binary, At, After/binary>> = Doc,
    New = case is_binary(Bytes) of
              true -> Bytes;
              false -> <<Bytes>>
          end,
    mutate(case Op of
               replace -> <<Before/binary, New/binary, After/binary>>;
               insert -> <<Before/binary, New/binary, At, After/binary>>;
               delete -> <<Before/binary, After/binary>>
           end, Rest).

%%% Expected trees and other spellings

%% What the parser returns for El: no empty text, adjacent text merged.
norm(#xmlel{children = Cs} = El) ->
    El#xmlel{children = merge([norm(C) || C <- Cs, C =/= {xmlcdata, <<>>}])};
norm({xmlcdata, _} = C) ->
    C.

merge([{xmlcdata, A}, {xmlcdata, B} | Rest]) -> merge([{xmlcdata, <<A/binary, B/binary>>} | Rest]);
merge([C | Rest]) -> [C | merge(Rest)];
merge([]) -> [].

%% The prefixes p and q bound on the root, for a namespace-aware parser.
declare_prefixes(#xmlel{attrs = Attrs} = El) ->
    El#xmlel{attrs = [{<<"xmlns:p">>, <<"urn:p">>}, {<<"xmlns:q">>, <<"urn:q">>} | Attrs]}.

render_all(Els, R0) ->
    lists:mapfoldl(fun(El, R) ->
                           {Xml, R1} = render(El, R),
                           {Ws, R2} = pick([<<>>, <<" ">>, <<"\n">>, <<"\r\n\t">>], R1),
                           {[Xml, Ws], R2}
                   end, R0, Els).

%% R is {Raw, RandState}: Raw writes whitespace in attribute values and CRs
%% in text as they are, which the parser normalizes.
render(#xmlel{name = Name, attrs = Attrs, children = Children}, R0) ->
    {AttrsXml, R1} = lists:mapfoldl(fun render_attr/2, R0, Attrs),
    {Space, R2} = space(R1),
    {Form, R3} = pick([short, long], R2),
    case {Children, Form} of
        {[], short} ->
            {[$<, Name, AttrsXml, Space, "/>"], R3};
        _ ->
            {Kids, R4} = lists:mapfoldl(fun render/2, R3, Children),
            {Space2, R5} = space(R4),
            {[$<, Name, AttrsXml, Space, $>, Kids, "</", Name, Space2, $>], R5}
    end;
render({xmlcdata, Text}, R0) ->
    {Cut, R1} = uniform(string:length(Text) + 1, R0),
    {A, B} = lists:split(Cut - 1, unicode:characters_to_list(Text)),
    {XA, R2} = render_text(unicode:characters_to_binary(A), R1),
    {XB, R3} = render_text(unicode:characters_to_binary(B), R2),
    {[XA, XB], R3}.

render_text(<<>>, R) ->
    {[], R};
render_text(Text, {Raw, _} = R0) ->
    Cdata = binary:match(Text, [<<"]]>">>, <<"\r">>]) =:= nomatch,
    case pick([escaped, refs] ++ [cdata || Cdata], R0) of
        {escaped, R1} when Raw ->
            {binary:replace(iolist_to_binary(throng_xml:escape_text(Text)), <<"&#13;">>, <<"\r">>,
                            [global]), R1};
        {escaped, R1} -> {throng_xml:escape_text(Text), R1};
        {refs, R1} -> {char_refs(Text), R1};
        {cdata, R1} -> {["<![CDATA[", Text, "]]>"], R1}
    end.

char_refs(Text) ->
    [io_lib:format(F, [C]) || C <- unicode:characters_to_list(Text),
                              F <- [case C rem 2 of 0 -> "&#~b;"; 1 -> "&#x~.16b;" end]].

render_attr({Name, Value}, R0) ->
    {S1, R1} = space(R0),
    {S2, R2} = pick([<<>>, <<" ">>], R1),
    {Quote, R3} = pick([$', $"], R2),
    {Raw, _} = R3,
    {[$\s, S1, Name, S2, $=, S2, Quote, attr_value(Value, Quote, Raw), Quote], R3}.

attr_value(Value, Quote, Raw) ->
    [case C of
         $& -> "&amp;";
         $< -> "&lt;";
         Quote -> "&#" ++ integer_to_list(Quote) ++ ";";
         $\t when not Raw -> "&#9;";
         $\n when not Raw -> "&#xA;";
         $\r when not Raw -> "&#13;";
         _ -> <<C/utf8>>
     end || C <- unicode:characters_to_list(Value)].

space(R) ->
    pick([<<>>, <<>>, <<" ">>, <<"\n  ">>, <<"\t">>, <<"\r\n">>], R).

pick(List, R0) ->
    {N, R1} = uniform(length(List), R0),
    {lists:nth(N, List), R1}.

uniform(N, {Raw, Rand0}) ->
    {X, Rand} = rand:uniform_s(N, Rand0),
    {X, {Raw, Rand}}.
