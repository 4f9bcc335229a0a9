%%% Tests of throng_xml_stream: the XMPP stream framing (RFC 6120 section 4),
%%% XML 1.0 parsing, the RFC 6120 section 11 restrictions, limits, chunking,
%%% linear work and the size of the state.
-module(throng_xml_stream_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

-define(M, throng_xml_stream).
-define(HEADER, "<stream:stream xmlns='jabber:client' "
                "xmlns:stream='http://etherx.jabber.org/streams' to='example.com' version='1.0'>").
-define(START, {stream_start, <<"stream:stream">>,
                [{<<"xmlns">>, <<"jabber:client">>},
                 {<<"xmlns:stream">>, <<"http://etherx.jabber.org/streams">>},
                 {<<"to">>, <<"example.com">>}, {<<"version">>, <<"1.0">>}]}).

%%% Helpers

events(Bin) -> events(Bin, #{}).

events(Bin, Opts) ->
    feed([Bin], Opts).

feed(Chunks, Opts) ->
    {Evs, _} = feed_state(Chunks, ?M:new(Opts)),
    Evs.

feed_state(Chunks, S0) ->
    lists:foldl(fun(C, {Acc, S}) ->
                        {Evs, S1} = ?M:parse(S, C),
                        {Acc ++ Evs, S1}
                end, {[], S0}, Chunks).

bytes(Bin) -> [<<B>> || <<B>> <= Bin].

%% Events of Bin in the stream, after the header.
stanza_events(Stanzas) ->
    [?START | Evs] = events(iolist_to_binary([?HEADER, Stanzas])),
    Evs.

stanza(Xml) ->
    [{stanza, El}] = stanza_events(Xml),
    El.

error_of(Bin) -> error_of(Bin, #{}).

error_of(Bin, Opts) ->
    case lists:last(events(Bin, Opts)) of
        {error, Cond, Text} when is_binary(Text), Text =/= <<>> -> Cond;
        Other -> {no_error, Other}
    end.

stream_error(Xml) ->
    error_of(iolist_to_binary([?HEADER, Xml])).

%% The same events whichever way Bin is cut in two, and fed byte by byte.
same_when_split(Bin, Opts) ->
    Whole = events(Bin, Opts),
    [?assertEqual({N, Whole}, {N, feed([binary:part(Bin, 0, N), binary:part(Bin, N, byte_size(Bin) - N)], Opts)})
     || N <- lists:seq(0, byte_size(Bin))],
    ?assertEqual(Whole, feed(bytes(Bin), Opts)),
    Whole.

el(Name, Attrs, Children) ->
    #xmlel{name = Name, attrs = Attrs, children = Children}.

%%% Stream header (RFC 6120 4.2, 4.7; XML 1.0 2.8 prolog)

header_double_quotes_test() ->
    ?assertEqual([{stream_start, <<"stream:stream">>,
                   [{<<"xmlns">>, <<"jabber:client">>}, {<<"to">>, <<"a.b">>}]}],
                 events(<<"<stream:stream xmlns=\"jabber:client\" to=\"a.b\">">>)).

header_single_quotes_test() ->
    ?assertEqual([?START], events(<<?HEADER>>)).

header_without_prefix_test() ->
    ?assertEqual([{stream_start, <<"stream">>, [{<<"xmlns">>, <<"x">>}]}],
                 events(<<"<stream xmlns='x'>">>)).

header_other_prefix_test() ->
    ?assertEqual([{stream_start, <<"s:stream">>, [{<<"xmlns:s">>, <<"x">>}]}],
                 events(<<"<s:stream xmlns:s='x'>">>)).

header_whitespace_in_tag_test() ->
    ?assertEqual([{stream_start, <<"s">>, [{<<"a">>, <<"1">>}, {<<"b">>, <<"2">>}]}],
                 events(<<"<s\n a = '1'\tb=\"2\"\r\n>">>)).

header_after_xml_declaration_test_() ->
    [?_assertEqual([?START], events(<<Decl/binary, ?HEADER>>))
     || Decl <- [<<"<?xml version='1.0'?>">>,
                 <<"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n">>,
                 <<"<?xml version='1.0' encoding='utf-8' standalone='yes'?>">>,
                 <<"<?xml  version = '1.0'  encoding = 'UTF-8' ?>\r\n\t ">>]].

header_after_bom_test() ->
    ?assertEqual([?START], events(<<16#EF, 16#BB, 16#BF, ?HEADER>>)),
    ?assertEqual([?START], events(<<16#EF, 16#BB, 16#BF, "<?xml version='1.0'?>", ?HEADER>>)).

header_after_whitespace_test() ->
    ?assertEqual([?START], events(<<"\r\n  \t", ?HEADER>>)).

header_split_everywhere_test() ->
    Bin = <<16#EF, 16#BB, 16#BF, "<?xml version='1.0' encoding='UTF-8'?>\n", ?HEADER>>,
    ?assertEqual([?START], same_when_split(Bin, #{})).

self_closing_header_test() ->
    ?assertEqual([{stream_start, <<"stream:stream">>, [{<<"xmlns">>, <<"x">>}]}, stream_end],
                 events(<<"<stream:stream xmlns='x'/>">>)).

header_attributes_are_decoded_test() ->
    ?assertEqual([{stream_start, <<"s">>, [{<<"a">>, <<"<&\"'> x">>}]}],
                 events(<<"<s a='&lt;&amp;&quot;&apos;&gt;&#x20;x'>">>)).

header_errors_test_() ->
    Cases = [{'unsupported-encoding', <<"<?xml version='1.0' encoding='ISO-8859-1'?><s>">>},
             {'unsupported-encoding', <<"<?xml version='1.0' encoding='UTF-16'?><s>">>},
             {'restricted-xml', <<" <?xml version='1.0'?><s>">>},       % not at the very start
             {'restricted-xml', <<"<?xml version='1.0'?><?xml version='1.0'?><s>">>},
             {'restricted-xml', <<"<?php echo 1 ?><s>">>},
             {'restricted-xml', <<"<?xml-stylesheet href='a'?><s>">>},
             {'restricted-xml', <<"<!-- hello --><s>">>},
             {'restricted-xml', <<"<!DOCTYPE s><s>">>},
             {'restricted-xml', <<"<!ENTITY e 'x'><s>">>},
             {'not-well-formed', <<"<?xml encoding='UTF-8'?><s>">>},
             {'not-well-formed', <<"<?xml version='2.0'?><s>">>},
             {'not-well-formed', <<"<?xml version='1.0' standalone='maybe'?><s>">>},
             {'not-well-formed', <<"<?xml version='1.0'encoding='UTF-8'?><s>">>},
             {'not-well-formed', <<"hello<s>">>},
             {'not-well-formed', <<"</s>">>},
             {'not-well-formed', <<"<![CDATA[x]]><s>">>},
             {'not-well-formed', <<"<1s>">>},
             {'not-well-formed', <<"<s a='1' a='2'>">>},
             {'not-well-formed', <<"<s a=1>">>},
             {'not-well-formed', <<"<s a>">>},
             {'not-well-formed', <<"<s a='<'>">>},
             {'not-well-formed', <<"<s/ >">>},
             {'not-well-formed', <<"\x01<s>">>},
             {'unsupported-encoding', <<"\xff<s>">>},
             {'unsupported-encoding', <<"<s a='\xc3\x28'>">>},
             {'unsupported-encoding', <<"<?xml version='1.0' encoding='\xc3\x28'?><s>">>}],
    [{iolist_to_binary(io_lib:format("~p ~w", [C, B])),
      fun() ->
              ?assertEqual(C, error_of(B)),
              _ = same_when_split(B, #{})
      end} || {C, B} <- Cases].

bad_options_test_() ->
    [?_assertError(badarg, ?M:new(#{max_depth => 0})),
     ?_assertError(badarg, ?M:new(#{max_stanza_size => infinity}))].

%%% Stream body (RFC 6120 4.3, 4.4)

whitespace_keepalives_are_ignored_test() ->
    ?assertEqual([], stanza_events(" ")),
    ?assertEqual([], stanza_events("\n\r\n\t  ")),
    ?assertEqual([{stanza, el(<<"a">>, [], [])}, {stanza, el(<<"b">>, [], [])}],
                 stanza_events(" <a/>\n\n <b/> \n")).

text_between_stanzas_test_() ->
    [?_assertEqual('bad-format', stream_error("x")),
     ?_assertEqual('bad-format', stream_error("<a/> hello <b/>")),
     ?_assertEqual('bad-format', stream_error("&amp;")),
     ?_assertEqual('bad-format', stream_error("&#32;")),
     ?_assertEqual('bad-format', stream_error("<![CDATA[ ]]>")),
     ?_assertEqual('bad-format', stream_error(<<"\xc3\xa9"/utf8>>)),
     ?_assertEqual('not-well-formed', stream_error("\x00")),
     ?_assertEqual('unsupported-encoding', stream_error("\x80"))].

stream_end_test() ->
    ?assertEqual([?START, {stanza, el(<<"a">>, [], [])}, stream_end],
                 events(<<?HEADER, "<a/></stream:stream>">>)),
    ?assertEqual([?START, stream_end], events(<<?HEADER, " </stream:stream >">>)).

nothing_after_stream_end_test() ->
    {[?START, stream_end], S} = ?M:parse(?M:new(#{}), <<?HEADER, "</stream:stream>">>),
    ?assertEqual({[], S}, ?M:parse(S, <<"<a/>">>)),
    ?assertEqual(0, ?M:buffered(S)).

mismatched_stream_end_test_() ->
    [?_assertEqual('not-well-formed', stream_error("</stream>")),
     ?_assertEqual('not-well-formed', stream_error("</stream:streams>")),
     ?_assertEqual('not-well-formed', stream_error("</stream:stream x='1'>"))].

%%% Elements (XML 1.0 sections 2.3, 2.4, 2.7, 2.11, 3.1, 3.3.3, 4.1)

stanza_shape_test() ->
    ?assertEqual(el(<<"message">>,
                    [{<<"to">>, <<"romeo@example.net">>}, {<<"type">>, <<"chat">>},
                     {<<"xml:lang">>, <<"en">>}],
                    [el(<<"body">>, [], [{xmlcdata, <<"Art thou not Romeo?">>}]),
                     el(<<"active">>, [{<<"xmlns">>, <<"http://jabber.org/protocol/chatstates">>}], [])]),
                 stanza("<message to='romeo@example.net' type=\"chat\" xml:lang='en'>"
                        "<body>Art thou not Romeo?</body>"
                        "<active xmlns='http://jabber.org/protocol/chatstates'/></message>")).

prefixes_and_xmlns_are_kept_as_written_test() ->
    ?assertEqual(el(<<"db:result">>,
                    [{<<"xmlns:db">>, <<"jabber:server:dialback">>}, {<<"db:x">>, <<"1">>}],
                    [el(<<"p:q">>, [], [])]),
                 stanza("<db:result xmlns:db='jabber:server:dialback' db:x='1'><p:q/></db:result>")).

attribute_order_is_kept_test() ->
    ?assertEqual([{<<"z">>, <<"1">>}, {<<"a">>, <<"2">>}, {<<"m">>, <<"3">>}],
                 (stanza("<a z='1' a='2' m='3'/>"))#xmlel.attrs).

many_attributes_test() ->
    Attrs = [{<<"a", (integer_to_binary(N, 36))/binary>>, integer_to_binary(N)} || N <- lists:seq(100, 140)],
    Xml = ["<a", [[" ", K, "='", V, "'"] || {K, V} <- Attrs], "/>"],
    ?assertEqual(Attrs, (stanza(Xml))#xmlel.attrs),
    Dup = ["<a", [[" ", K, "='", V, "'"] || {K, V} <- Attrs], " a2S='x'/>"],
    ?assertEqual('not-well-formed', stream_error(Dup)).

entities_and_char_refs_test() ->
    ?assertEqual([{xmlcdata, <<"<>&\"' A", 16#E9/utf8, 16#1F600/utf8, "\r\t">>}],
                 (stanza("<a>&lt;&gt;&amp;&quot;&apos;&#32;&#x41;&#233;&#x1F600;&#13;&#9;</a>"))#xmlel.children).

adjacent_text_is_merged_test() ->
    ?assertEqual([{xmlcdata, <<"one & <two> three">>}, el(<<"b">>, [], []), {xmlcdata, <<"four">>}],
                 (stanza("<a>one &amp; <![CDATA[<two>]]> three<b/>fo<![CDATA[]]>ur</a>"))#xmlel.children).

cdata_section_test() ->
    ?assertEqual([{xmlcdata, <<"<a href='x'>&amp;]] ]>">>}],
                 (stanza("<a><![CDATA[<a href='x'>&amp;]] ]>]]></a>"))#xmlel.children).

whitespace_inside_stanzas_is_kept_test() ->
    ?assertEqual(el(<<"a">>, [], [{xmlcdata, <<"\n  ">>}, el(<<"b">>, [], [{xmlcdata, <<" ">>}]),
                                  {xmlcdata, <<"\n">>}]),
                 stanza("<a>\n  <b> </b>\n</a>")).

line_ends_are_normalized_test() ->
    ?assertEqual([{xmlcdata, <<"a\nb\nc\n\nd\n">>}],
                 (stanza("<a>a\r\nb\rc\n\rd<![CDATA[\r\n]]></a>"))#xmlel.children).

attribute_values_are_normalized_test() ->
    %% XML 1.0 3.3.3: each whitespace character becomes a space (CR LF is one
    %% line end), character references are not normalized.
    ?assertEqual([{<<"a">>, <<" x  y z ">>}, {<<"b">>, <<"\t\n\r">>}, {<<"c">>, <<"'\"">>}],
                 (stanza("<e a='\tx\n\ty\r\nz\r' b='&#9;&#10;&#13;' c=\"'&quot;\"/>"))#xmlel.attrs).

non_ascii_test() ->
    Text = <<"Grüße, 日本語, "/utf8, 16#1F600/utf8>>,
    ?assertEqual(el(<<"bödy"/utf8>>, [{<<"xml:lang">>, <<"日本"/utf8>>}], [{xmlcdata, Text}]),
                 stanza(<<"<bödy xml:lang='日本'>"/utf8, Text/binary, "</bödy>"/utf8>>)).

long_text_and_deep_enough_nesting_test() ->
    Text = binary:copy(<<"abc &amp; def\n">>, 5000),
    Xml = [lists:duplicate(31, "<x>"), Text, lists:duplicate(31, "</x>")],
    El = stanza(Xml),
    Leaf = lists:foldl(fun(_, #xmlel{children = [C]}) -> C end, El, lists:seq(1, 30)),
    ?assertEqual([{xmlcdata, binary:copy(<<"abc & def\n">>, 5000)}], Leaf#xmlel.children).

representative_stanzas_split_everywhere_test_() ->
    Stanzas = [<<"<message from='juliet@example.com/balcony' to='romeo@example.net' type='chat' "
                 "id='ktx72v49' xml:lang='en'><body>Art thou not Romeo &amp; a Montague?</body>"
                 "</message>">>,
               <<"<presence><c xmlns=\"http://jabber.org/protocol/caps\" hash='sha-1' "
                 "node='http://psi-im.org' ver='q07IKJEyjvHSyhy//CH0CxmKi8w='/></presence>">>,
               <<"<iq type='result' id='r1'><query xmlns='jabber:iq:roster'><item jid='a@b' "
                 "name='Ä \"b\"' subscription='both'><group>Frï&lt;ends</group></item></query></iq>"/utf8>>,
               <<"<m a = \"1\" b='&#x1F600;'\r\n><![CDATA[x]]]]><![CDATA[>]]>\r\n&#233;é</m \n>"/utf8>>],
    [{binary_to_list(S),
      fun() ->
              Bin = <<?HEADER, " ", S/binary, " </stream:stream>">>,
              [?START, {stanza, El}, stream_end] = same_when_split(Bin, #{}),
              ?assertEqual(El, fast_xml_element(S))
      end} || S <- Stanzas].

%% The element as fast_xml (expat) parses it.
fast_xml_element(S) ->
    {ok, _} = application:ensure_all_started(fast_xml),
    fxml_stream:parse_element(S).

%%% Errors (RFC 6120 4.9.3 and 11)

restricted_xml_test_() ->
    [?_assertEqual('restricted-xml', stream_error(X))
     || X <- ["<!-- c -->", "<a><!-- c --></a>", "<a>x<!--", "<?pi x?>", "<a><?pi x?></a>",
              "<a><!DOCTYPE a></a>", "<!DOCTYPE a>", "<a><!ENTITY e 'x'></a>", "<a><![INCLUDE[x]]></a>",
              "<a><!x></a>", "<a>&nbsp;</a>", "<a b='&foo;'/>", "<a>&x.y;</a>"]].

not_well_formed_test_() ->
    [?_assertEqual({'not-well-formed', X}, {stream_error(X), X})
     || X <- ["<a b='1' b='2'/>", "<a b=1/>", "<a b/>", "<a b='1'c='2'/>", "<a b='<'/>",
"<1a/>", "<-a/>", "<a\x01/>", "<a></b>", "<a><b></a></b>",
              "<a>&</a>", "<a>& b;</a>", "<a>&amp</a>", "<a>&#;</a>", "<a>&#x;</a>", "<a>&#xZ;</a>",
              "<a>&#12a;</a>", "<a>&#X41;</a>", "<a>&#0;</a>", "<a>&#1;</a>", "<a>&#xD800;</a>",
              "<a>&#xFFFE;</a>", "<a>&#x110000;</a>", "<a>&#99999999999999999999;</a>",
              "<a>]]></a>", "<a b=']]>'>]]]></a>", "<a>\x00</a>", "<a>\x0b</a>", "<a>\x1f</a>",
              "<a b='\x01'/>", "<a><![CDATA[\x02]]></a>", <<"<a>", 16#FFFE/utf8, "</a>">>,
              <<"<a>", 16#FFFF/utf8, "</a>">>, "<a/ >", "<a / >", "<a b='1' / >", "< a/>",
              "<a></ a>", "<a></a b>", "<>", "<a><></a>", "<a></>"]].

bad_utf8_test_() ->
    [?_assertEqual({'unsupported-encoding', X}, {stream_error(X), X})
     || X <- [<<"<a>\x80</a>">>, <<"<a>\xc3</a>">>, <<"<a>\xc3\x28</a>">>, <<"<a>\xc0\x80</a>">>,
              <<"<a>\xe0\x80\x80</a>">>, <<"<a>\xed\xa0\x80</a>">>, <<"<a>\xf4\x90\x80\x80</a>">>,
              <<"<a>\xf8\x88\x80\x80\x80</a>">>, <<"<a>\xff</a>">>, <<"<a b='\xfe'/>">>,
              <<"<\xc3\x28/>">>, <<"<a\xff/>">>, <<"<a><![CDATA[\xe2\x82]]></a>">>,
              <<"<a>\xf0\x9f\x98</a>">>]].

%% After 16 plain bytes the scanner searches with binary:match/3 for markup
%% and a regular expression for control characters and non-ASCII bytes
%% (throng_xml_el:patterns/0): each of those is found after a long run of
%% plain bytes too, in text, both kinds of attribute value and CDATA.
specials_after_a_long_run_test_() ->
    Run = binary:copy(<<"x">>, 40),
    Ctx = [{text, fun(T) -> <<"<a>", T/binary, "</a>">> end},
           {dq, fun(T) -> <<"<a b=\"", T/binary, "\"/>">> end},
           {sq, fun(T) -> <<"<a b='", T/binary, "'/>">> end},
           {cdata, fun(T) -> <<"<a><![CDATA[", T/binary, "]]></a>">> end}],
    Value = fun(#xmlel{attrs = [{_, V}]}) -> V;
               (#xmlel{children = [{xmlcdata, V}]}) -> V
            end,
    lists:append(
      [[{atom_to_list(K) ++ " control", ?_assertEqual('not-well-formed', stream_error(F(<<Run/binary, 1, Run/binary>>)))},
        {atom_to_list(K) ++ " invalid UTF-8", ?_assertEqual('unsupported-encoding', stream_error(F(<<Run/binary, 16#FF, Run/binary>>)))},
        {atom_to_list(K) ++ " U+FFFE", ?_assertEqual('not-well-formed', stream_error(F(<<Run/binary, 16#FFFE/utf8, Run/binary>>)))},
        {atom_to_list(K) ++ " non-ASCII kept", ?_assertEqual(<<Run/binary, "é€"/utf8, Run/binary>>,
                                                               Value(stanza(F(<<Run/binary, "é€"/utf8, Run/binary>>))))},
        {atom_to_list(K) ++ " CR", ?_assertEqual(case K of text -> <<Run/binary, "\n", Run/binary>>;
                                                          cdata -> <<Run/binary, "\n", Run/binary>>;
                                                          _ -> <<Run/binary, " ", Run/binary>>
                                                      end,
                                                      Value(stanza(F(<<Run/binary, "\r\n", Run/binary>>))))}]
       || {K, F} <- Ctx]).

%% Markup of another context after a long plain run (where the parser has
%% gone over to binary:match/3 and its shared attention set): stepped over
%% and kept as it is. Quotes in character data, '<' and '&' in CDATA, "]]>",
%% the other quote, TAB and LF in attribute values (TAB and LF become
%% spaces).
markup_after_a_long_run_test_() ->
    Run = binary:copy(<<"x">>, 40),
    Text = fun(T) -> <<"<a>", T/binary, "</a>">> end,
    Cdata = fun(T) -> <<"<a><![CDATA[", T/binary, "]]></a>">> end,
    Dq = fun(T) -> <<"<a b=\"", T/binary, "\"/>">> end,
    Sq = fun(T) -> <<"<a b='", T/binary, "'/>">> end,
    Value = fun(#xmlel{attrs = [{_, V}]}) -> V;
               (#xmlel{children = [{xmlcdata, V}]}) -> V
            end,
    Kept = fun(F, Mid, Want) -> Value(stanza(F(<<Run/binary, Mid/binary, Run/binary>>))) =:= <<Run/binary, Want/binary, Run/binary>> end,
    [?_assert(Kept(Text, <<"\"it's\"">>, <<"\"it's\"">>)),
     ?_assert(Kept(Cdata, <<"<b>&amp;</b> \"'">>, <<"<b>&amp;</b> \"'">>)),
     ?_assert(Kept(Cdata, <<"]]]">>, <<"]]]">>)),
     ?_assert(Kept(Dq, <<"]]> it's">>, <<"]]> it's">>)),
     ?_assert(Kept(Sq, <<"]]> \"a\"">>, <<"]]> \"a\"">>)),
     ?_assert(Kept(Dq, <<"a\tb\nc">>, <<"a b c">>)),
     ?_assert(Kept(Sq, <<Run/binary, "\t", Run/binary, "\n">>, <<Run/binary, " ", Run/binary, " ">>)),
     ?_assertEqual('not-well-formed', stream_error(Text(<<Run/binary, "]]>", Run/binary>>))),
     ?_assertEqual('not-well-formed', stream_error(Dq(<<Run/binary, "<", Run/binary>>))),
     ?_assertEqual('not-well-formed', stream_error(Sq(<<Run/binary, "'", Run/binary>>)))].

%% A long run of character data or of a CDATA section is searched once:
%% the parse of 60 KB costs about the reductions of one binary:match/3 over
%% it (1.0 times here), whatever the text holds that character data does
%% not stop at (quotes, TAB, LF: prose, base64 lines). With the markup and
%% the special bytes in two sets, every such text was read twice (2.0
%% times); with quotes in the shared set, prose cost 11 times.
long_texts_are_read_once_test_() ->
    Texts = [{plain, binary:copy(<<"abcdefghijklmnopqrst!">>, 3000)},
             {prose, binary:copy(<<"He said \"it's fine\" and left; we didn't. ">>, 1500)},
             {base64_lines, iolist_to_binary(lists:duplicate(800, [binary:copy(<<"QUJD">>, 19), "\n"]))}],
    Ctx = [{text, fun(T) -> <<"<m><body>", T/binary, "</body></m>">> end},
           {cdata, fun(T) -> <<"<m><![CDATA[", T/binary, "]]></m>">> end}],
    Reds = fun(F) ->
                   {reductions, R0} = process_info(self(), reductions),
                   _ = F(),
                   {reductions, R1} = process_info(self(), reductions),
                   R1 - R0
           end,
    Once = binary:compile_pattern([<<"<">>, <<"&">>]),
    [{atom_to_list(K) ++ " " ++ atom_to_list(TK),
      fun() ->
              Bin = F(T),
              Search = Reds(fun() -> binary:match(T, Once) end),
              Parse = Reds(fun() -> throng_xml_el:parse_el(Bin, 10) end),
              ?assert(Parse < 1.5 * Search, {Parse, Search})
      end}
     || {K, F} <- Ctx, {TK, T} <- Texts].

%% A special byte every 20 bytes of a 60 KB text: the work stays linear.
%% Each special byte stops the search; in an attribute value the attention
%% stop found after it is kept for the rest of the value, not searched for
%% again from every quote, TAB or LF to the end (with the markup and the
%% special bytes in two sets that took 700 times the reductions of a plain
%% text of the same size: 200 ms). Counted in reductions, not time.
special_bytes_keep_the_parse_linear_test_() ->
    Plain = binary:copy(<<"abcdefghijklmnopqrst!">>, 3000),
    Specials = [binary:copy(<<"abcdefghijklmnopqrs", "é"/utf8>>, 3000),
                binary:copy(<<"abcdefghijklmnopqrs\r">>, 3000),
                binary:copy(<<"abcdefghijklmnopqrs\t">>, 3000)],
    Ctx = [{text, fun(T) -> <<"<m><body>", T/binary, "</body></m>">> end},
           {dq, fun(T) -> <<"<m a=\"", T/binary, "\"/>">> end},
           {sq, fun(T) -> <<"<m a='", T/binary, "'/>">> end},
           {cdata, fun(T) -> <<"<m><![CDATA[", T/binary, "]]></m>">> end}],
    Reds = fun(Bin) ->
                   {reductions, R0} = process_info(self(), reductions),
                   {#xmlel{}, _} = throng_xml_el:parse_el(Bin, 10),
                   {reductions, R1} = process_info(self(), reductions),
                   R1 - R0
           end,
    [{atom_to_list(K), fun() ->
                               Base = Reds(F(Plain)),
                               [?assert(Reds(F(S)) < 40 * Base, {K, Base, Reds(F(S))}) || S <- Specials]
                       end}
     || {K, F} <- Ctx].

%% The compiled search patterns are made once per node and kept: they must
%% stay small: 466 KB of binary memory, where every special byte in four
%% Aho-Corasick sets took 1.43 MB.
patterns_are_small_test() ->
    persistent_term:erase(throng_xml_el),
    Before = erlang:memory(binary),
    Pats = throng_xml_el:patterns(),
    Grown = erlang:memory(binary) - Before,
    ?assert(is_tuple(Pats)),
    ?assert(Grown < 640 * 1024, {grown, Grown}).

errors_do_not_depend_on_chunking_test_() ->
    Bad = ["<a b='1' b='2'><!-- c --></a>", "<a><!-- c --><b b='1' b='2'/></a>",
           "<a>&#1;<!--</a>", "<a><b><c><d/></c></b></a>", "<a b='1' b='2'><b><c><d/></c></b></a>",
           "<a><b>\xff<c><d/></c></b></a>", "<a>xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx<?",
           "<a>xxxxxxxxxxxxxxxxxxxxxxxxxxxx&#1;xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
           "<a>&amp;</a> </stream:streams>", "<a/> x", "<a><![CDATA[ ]]><![CDAT[ ]]></a>"],
    [{X, fun() ->
                 Bin = iolist_to_binary([?HEADER, X]),
                 Evs = same_when_split(Bin, #{max_depth => 3, max_stanza_size => 50}),
                 ?assertMatch({error, _, _}, lists:last(Evs))
         end} || X <- Bad].

dead_after_error_test() ->
    {Evs, S} = ?M:parse(?M:new(#{}), <<?HEADER, "<a><!-- x --></a><b/>">>),
    ?assertMatch([?START, {error, 'restricted-xml', <<"comment in stream">>}], Evs),
    ?assertEqual({[], S}, ?M:parse(S, <<"<c/>">>)),
    ?assertEqual(0, ?M:buffered(S)).

stanzas_before_an_error_are_delivered_test() ->
    ?assertMatch([{stanza, #xmlel{name = <<"a">>}}, {stanza, #xmlel{name = <<"b">>}},
                  {error, 'not-well-formed', _}],
                 stanza_events("<a/><b/><c></d><e/>")).

%%% Limits

depth_limit_test_() ->
    Nest = fun(N) -> [lists:duplicate(N, "<x>"), lists:duplicate(N, "</x>")] end,
    Opts = #{max_depth => 4},
    Ok = fun(N) -> [?START, {stanza, _}] = events(iolist_to_binary([?HEADER, Nest(N)]), Opts) end,
    Bad = fun(N) -> error_of(iolist_to_binary([?HEADER, Nest(N)]), Opts) end,
    [?_test(Ok(4)),
     ?_assertEqual('policy-violation', Bad(5)),
     ?_assertEqual('policy-violation', error_of(<<?HEADER, "<a><b><c><d><e/></d></c></b></a>">>, Opts)),
     ?_assertEqual('policy-violation', error_of(<<?HEADER, "<a><b><c><d><e>">>, Opts)),
     ?_assertMatch([?START, {stanza, _}], events(iolist_to_binary([?HEADER, Nest(32)]))),
     ?_assertEqual('policy-violation', error_of(iolist_to_binary([?HEADER, Nest(33)]))),
     ?_test(same_when_split(iolist_to_binary([?HEADER, Nest(5)]), Opts))].

size_limit_test() ->
    Opts = #{max_stanza_size => 100},
    Exactly = iolist_to_binary(["<a>", lists:duplicate(93, $x), "</a>"]),
    100 = byte_size(Exactly),
    ?assertMatch([{stream_start, _, _}, {stanza, _}, {stanza, _}],
                 events(<<"<s>", Exactly/binary, Exactly/binary>>, Opts)),
    ?assertMatch([{stream_start, _, _}, {error, 'policy-violation', _}],
                 events(<<"<s>", "<a>", (binary:copy(<<"x">>, 94))/binary, "</a>">>, Opts)),
    _ = same_when_split(<<"<s>", "<a>", (binary:copy(<<"x">>, 94))/binary, "</a>">>, Opts).

size_limit_is_detected_before_the_stanza_completes_test() ->
    Opts = #{max_stanza_size => 1000},
    {[?START], S0} = ?M:parse(?M:new(Opts), <<?HEADER, "<message><body>">>),
    Chunk = binary:copy(<<"y">>, 100),
    {Evs, Buffered} = feed_until_event(S0, Chunk, 0),
    ?assertMatch([{error, 'policy-violation', _}], Evs),
    ?assert(lists:max(Buffered) =< 1000),
    ?assertEqual(10, length(Buffered)).         % 15 + 9 * 100 bytes; the 10th chunk fails

feed_until_event(S, Chunk, N) when N < 100 ->
    case ?M:parse(S, Chunk) of
        {[], S1} ->
            {Evs, Bs} = feed_until_event(S1, Chunk, N + 1),
            {Evs, [?M:buffered(S1) | Bs]};
        {Evs, _} ->
            {Evs, [0]}
    end.

size_limit_in_one_big_chunk_test() ->
    Opts = #{max_stanza_size => 1000},
    Big = <<?HEADER, "<a>", (binary:copy(<<"z">>, 1000000))/binary, "</a>">>,
    ?assertMatch([?START, {error, 'policy-violation', _}], events(Big, Opts)).

header_size_limit_test() ->
    Opts = #{max_stanza_size => 100},
    Big = iolist_to_binary(["<stream:stream a='", lists:duplicate(100, $x), "'>"]),
    ?assertMatch([{error, 'policy-violation', _}], events(Big, Opts)),
    ?assertMatch([{error, 'policy-violation', _}], feed(bytes(Big), Opts)).

default_limits_test() ->
    Ok = iolist_to_binary(["<a>", lists:duplicate(262144 - 7, $x), "</a>"]),
    ?assertMatch([?START, {stanza, _}], events(<<?HEADER, Ok/binary>>)),
    TooBig = iolist_to_binary(["<a>", lists:duplicate(262144 - 6, $x), "</a>"]),
    ?assertMatch([?START, {error, 'policy-violation', _}], events(<<?HEADER, TooBig/binary>>)).

%%% reset/1 and buffered/1

buffered_test() ->
    S0 = ?M:new(#{}),
    ?assertEqual(0, ?M:buffered(S0)),
    {[], S1} = ?M:parse(S0, <<"<stream:str">>),
    ?assertEqual(11, ?M:buffered(S1)),
    {[_], S2} = ?M:parse(S1, <<"eam>  <message to='x'><bo">>),
    ?assertEqual(byte_size(<<"<message to='x'><bo">>), ?M:buffered(S2)),
    {[_], S3} = ?M:parse(S2, <<"dy/></message> ">>),
    ?assertEqual(0, ?M:buffered(S3)).

reset_test() ->
    {[?START], S1} = ?M:parse(?M:new(#{max_depth => 2}), <<?HEADER, "<message><bo">>),
    S2 = ?M:reset(S1),
    ?assertEqual(0, ?M:buffered(S2)),
    {Evs, S3} = ?M:parse(S2, <<"<?xml version='1.0'?>", ?HEADER, "<a><b/></a>">>),
    ?assertEqual([?START, {stanza, el(<<"a">>, [], [el(<<"b">>, [], [])])}], Evs),
    %% same options after the reset
    ?assertMatch({[{error, 'policy-violation', _}], _}, ?M:parse(S3, <<"<a><b><c/></b></a>">>)).

reset_after_error_and_end_test() ->
    {_, Dead} = ?M:parse(?M:new(#{}), <<"<!-- x -->">>),
    ?assertEqual([?START], element(1, ?M:parse(?M:reset(Dead), <<?HEADER>>))),
    {_, Closed} = ?M:parse(?M:new(#{}), <<"<s/>">>),
    ?assertEqual([?START], element(1, ?M:parse(?M:reset(Closed), <<?HEADER>>))).

%%% Linear work

%% Reductions spent feeding Bin in chunks of Size bytes.
reductions(Bin, Size) ->
    Chunks = chunks(Bin, Size),
    {[?START], S0} = ?M:parse(?M:new(#{max_stanza_size => 1 bsl 24}), <<?HEADER>>),
    {reductions, R0} = erlang:process_info(self(), reductions),
    {Evs, _} = lists:foldl(fun(C, {Acc, S}) ->
                                   {E, S1} = ?M:parse(S, C),
                                   {E ++ Acc, S1}
                           end, {[], S0}, Chunks),
    {reductions, R1} = erlang:process_info(self(), reductions),
    [{stanza, _}] = Evs,
    R1 - R0.

chunks(Bin, Size) when byte_size(Bin) =< Size -> [Bin];
chunks(Bin, Size) ->
    <<C:Size/binary, Rest/binary>> = Bin,
    [C | chunks(Rest, Size)].

linear_work_test_() ->
    Text = fun(N) -> iolist_to_binary(["<message><body>", binary:copy(<<"x ]] &amp; y\n">>, N),
                                       "</body></message>"]) end,
    Markup = fun(N) -> iolist_to_binary(["<iq><query>",
                                         lists:duplicate(N, "<item jid='a@b' name=\"c > d\"/>"),
                                         "<![CDATA[", binary:copy(<<"]]x">>, N), "]]></query></iq>"])
             end,
    [{timeout, 60, {Name, fun() -> linear(Make) end}} || {Name, Make} <- [{"text", Text}, {"markup", Markup}]].

%% Feeding byte by byte costs a bounded multiple of feeding whole, and
%% doubling the input doubles the cost (quadratic work would quadruple it).
linear(Make) ->
    Small = Make(5000),
    Big = Make(10000),
    ?assert(byte_size(Big) > 100000),
    Whole = reductions(Big, byte_size(Big)),
    ByteSmall = reductions(Small, 1),
    ByteBig = reductions(Big, 1),
    Ratio = ByteBig / ByteSmall,
    ?debugFmt("~b bytes: whole ~b reductions, byte by byte ~b (~.1f per byte); "
              "doubling the size: x~.2f", [byte_size(Big), Whole, ByteBig, ByteBig / byte_size(Big), Ratio]),
    ?assert(Ratio < 2.5),
    ?assert(ByteBig / byte_size(Big) < 200),
    ?assert(reductions(Big, 1460) < 3 * Whole + 10000).

%%% State size and binary retention

idle_state_is_small_test() ->
    Stanzas = binary:copy(<<"<message to='a@b'><body>hello</body></message>">>, 1000),
    {Evs, S} = ?M:parse(?M:new(#{}), <<?HEADER, Stanzas/binary, " ">>),
    ?assertEqual(1001, length(Evs)),
    ?assert(erts_debug:size(S) < 40),
    {_, S2} = ?M:parse(?M:reset(S), <<?HEADER>>),
    ?assert(erts_debug:size(S2) < 40).

%% Runs Fun in a fresh process and returns the sizes of the off-heap
%% binaries that process still references after Fun returns and GC (twice:
%% right after a big heap was built, the first major collection does not
%% always release every dead off-heap binary).
referenced_after(Fun) ->
    Self = self(),
    Pid = spawn_link(fun() ->
                             Keep = Fun(),
                             garbage_collect(),
                             garbage_collect(),
                             {binary, Bins} = erlang:process_info(self(), binary),
                             Self ! {self(), [Size || {_, Size, _} <- Bins]},
                             receive stop -> Keep end
                     end),
    receive {Pid, Sizes} -> Pid ! stop, Sizes end.

partial_stanza_does_not_hold_the_chunk_test() ->
    Sizes = referenced_after(
              fun() ->
                      %% (the GC turns sub-binaries of up to 64 bytes into
                      %% copies: the partial stanza must be longer)
                      Chunk = <<?HEADER, (binary:copy(<<"<a>hello</a>">>, 100000))/binary,
                                "<b>", (binary:copy(<<"p">>, 200))/binary>>,
                      {_, S} = ?M:parse(?M:new(#{}), Chunk),
                      203 = ?M:buffered(S),
                      S
              end),
    ?assertEqual([], [S || S <- Sizes, S > 10000]).

stanza_does_not_hold_the_chunk_test() ->
    Sizes = referenced_after(
              fun() ->
                      Body = binary:copy(<<"x">>, 200),
                      Chunk = <<?HEADER, (binary:copy(<<"<a b='c'><d>", Body/binary, "</d></a>">>, 5000))/binary>>,
                      {Evs, _} = ?M:parse(?M:new(#{}), Chunk),
                      lists:nth(1000, Evs)
              end),
    ?assertEqual([], [S || S <- Sizes, S > 10000]).

header_does_not_hold_the_chunk_test() ->
    Sizes = referenced_after(
              fun() ->
                      Chunk = <<?HEADER, (binary:copy(<<" ">>, 100000))/binary>>,
                      {[Start], S} = ?M:parse(?M:new(#{}), Chunk),
                      {Start, S}
              end),
    ?assertEqual([], [S || S <- Sizes, S > 10000]).
