%%% @doc The element parser of the XML stream: one complete element, XML
%%% declaration or start tag in a binary, checked for well-formedness,
%%% references, UTF-8 and XMPP's XML restrictions as it is built. Not
%%% resumable: {@link throng_xml_stream} (the resumable scanner) calls it on
%%% a complete unit, or on the rest of a chunk to try a stanza first.
%%% Positions are offsets into the binary. Running out of input throws
%%% `incomplete'; a fault throws {xml, Condition, Text}.
-module(throng_xml_el).

-include("throng.hrl").
-include("throng_xml_chars.hrl").

-export([parse_el/2, start_tag/1, decl/1, name/2, nwf/1, patterns/0, skip_ws/2, bang_text/2]).

-compile({inline, [byte/2, piece/4, skip_lf/2, add_text/2, nwf/1, next_stop/5]}).

%%% Parser: one complete element, XML declaration or start tag in a binary.
%%% Positions are offsets into that binary. Running out of input throws
%%% `incomplete'; a fault throws {xml, Condition, Text}. No check ever looks
%%% at the end of the input, so an error in a prefix is an error in the
%%% whole.

%% The element whose '<' is at offset 0: {Element, Length}.
-spec parse_el(binary(), pos_integer()) -> {#xmlel{}, pos_integer()}.
parse_el(B, MaxDepth) ->
    el(B, 1, MaxDepth - 1, patterns()).

%% Left: how many levels of children may still nest below this element.
el(B, P0, Left, Pats) ->
    {Name, P1} = name(B, P0),
    case attrs(B, P1, [], Pats) of
        {Attrs, P2, empty} ->
            {#xmlel{name = Name, attrs = Attrs}, P2};
        {Attrs, P2, open} ->
            {Children, P3} = content(B, P2, P2, Name, Left, [], [], Pats),
            {#xmlel{name = Name, attrs = Attrs, children = Children}, P3}
    end.

%% Start tag of the stream header: {{Name, Attrs, Empty}, Length}.
-spec start_tag(binary()) -> {{binary(), [{binary(), binary()}], boolean()}, pos_integer()}.
start_tag(B) ->
    {Name, P1} = name(B, 1),
    {Attrs, P2, Kind} = attrs(B, P1, [], patterns()),
    {{Name, Attrs, Kind =:= empty}, P2}.

%% After a name or an attribute value: '>', '/>' or whitespace and more.
attrs(B, P, Acc, Pats) ->
    case byte(B, P) of
        $> -> {check_attrs(Acc), P + 1, open};
        $/ -> empty_tag(B, P + 1, Acc);
        C when ?IS_WS(C) ->
            P1 = skip_ws(B, P + 1),
            case byte(B, P1) of
                $> -> {check_attrs(Acc), P1 + 1, open};
                $/ -> empty_tag(B, P1 + 1, Acc);
                _ -> attr(B, P1, Acc, Pats)
            end;
        _ ->
            throw(nwf(<<"malformed start tag">>))
    end.

empty_tag(B, P, Acc) ->
    case byte(B, P) of
        $> -> {check_attrs(Acc), P + 1, empty};
        _ -> throw(nwf(<<"malformed start tag">>))
    end.

attr(B, P0, Acc, Pats) ->
    {Name, P1} = name(B, P0),
    P2 = skip_ws(B, P1),
    case byte(B, P2) of
        $= -> ok;
        _ -> throw(nwf(<<"attribute without value">>))
    end,
    P3 = skip_ws(B, P2 + 1),
    {Value, P4} = case byte(B, P3) of
                      $" -> value(B, P3 + 1, P3 + 1, $", element(?P_DQ, Pats), -1, []);
                      $' -> value(B, P3 + 1, P3 + 1, $', element(?P_SQ, Pats), -1, []);
                      _ -> throw(nwf(<<"unquoted attribute value">>))
                  end,
    attrs(B, P4, [{Name, Value} | Acc], Pats).

check_attrs([]) ->
    [];
check_attrs([_] = Acc) ->
    Acc;
check_attrs(Acc) when length(Acc) =< 8 ->
    ok = no_duplicates(Acc),
    lists:reverse(Acc);
check_attrs(Acc) ->
    Attrs = lists:reverse(Acc),
    case length(lists:ukeysort(1, Attrs)) =:= length(Attrs) of
        true -> Attrs;
        false -> throw(duplicate())
    end.

no_duplicates([{Name, _} | Rest]) ->
    case lists:keymember(Name, 1, Rest) of
        true -> throw(duplicate());
        false -> no_duplicates(Rest)
    end;
no_duplicates([]) ->
    ok.

duplicate() -> nwf(<<"duplicate attribute">>).

%% Attribute value from Start; P is where to look next. Whitespace becomes
%% a space (CR LF one space), references are decoded.
value(B, P, Start, Quote, Pat, M0, Acc) ->
    <<_:P/binary, Rest/binary>> = B,
    {Q, M} = next_stop(B, P, attr_run(Rest, 0), Pat, M0),
    case binary:at(B, Q) of
        Quote ->
            {text(B, Start, Q, Acc), Q + 1};
        C when C =:= $"; C =:= $'; C =:= $] ->
            %% The other quote, or "]]>" (a stop of the attention set).
            value(B, Q + 1, Start, Quote, Pat, M, Acc);
        $& ->
            {Ch, Q1} = ref(B, Q),
            value(B, Q1, Q1, Quote, Pat, M, [Ch | piece(B, Start, Q, Acc)]);
        $\r ->
            Q1 = skip_lf(B, Q + 1),
            value(B, Q1, Q1, Quote, Pat, M, [<<" ">> | piece(B, Start, Q, Acc)]);
        C when C =:= $\t; C =:= $\n ->
            value(B, Q + 1, Q + 1, Quote, Pat, M, [<<" ">> | piece(B, Start, Q, Acc)]);
        $< ->
            throw(nwf(<<"'<' in attribute value">>));
        C when C >= 16#80 ->
            value(B, utf8_run(B, Q), Start, Quote, Pat, M, Acc);
        _ ->
            throw(bad_char())
    end.

%% Runs of plain bytes are skipped by a short Erlang loop first: most runs in
%% stanzas are a few bytes long, and the loop costs less than a BIF call.
%% After ?RUN plain bytes binary:match/3 goes on with the shared attention
%% set (see patterns/0): in character data it stops where the loop does
%% (and at ']' only as part of "]]>"); in a CDATA section also at '<' and
%% '&', which cdata/5 steps over. An attribute value's Pat is {Attention,
%% Own}: its quotes, TAB and LF are searched for in the bytes before the
%% attention stop, which also stops at "]]>" there (stepped over). M is
%% that stop, kept for the rest of the value (see attention_at/5).
next_stop(B, P, ?RUN, {Attention, Own}, M) when is_tuple(Own) ->
    %% (a compiled pattern is a pair too, of an atom and a reference)
    From = P + ?RUN,
    Size = byte_size(B),
    Q = attention_at(B, From, Size, Attention, M),
    case first_of(B, From, Q, Own) of
        Size -> throw(incomplete);
        Stop -> {Stop, Q}
    end;
next_stop(B, P, ?RUN, Attention, M) ->
    Size = byte_size(B),
    case first_of(B, P + ?RUN, Size, Attention) of
        Size -> throw(incomplete);
        Stop -> {Stop, M}
    end;
next_stop(B, P, N, _Pat, M) when P + N < byte_size(B) ->
    {P + N, M};
next_stop(_B, _P, _N, _Pat, _M) ->
    throw(incomplete).

%% Where the attention set first stops in B[From, Size), or Size. M is where
%% an earlier search of the same attribute value found it, or -1: from a
%% From at or before M, M is still the answer. Without it, a value with a
%% quote, TAB or LF every 20 bytes would be searched to its end at each of
%% them (quadratic: 60 KB of such a value took 200 ms instead of 0.4).
attention_at(_B, From, _Size, _Attention, M) when From =< M ->
    M;
attention_at(B, From, Size, Attention, _M) ->
    first_of(B, From, Size, Attention).

%% Where the first match of Pattern starts in B[From, To), or To.
first_of(_B, To, To, _Pattern) ->
    To;
first_of(B, From, To, Pattern) ->
    case binary:match(B, Pattern, [{scope, {From, To - From}}]) of
        {S, _} -> S;
        nomatch -> To
    end.

attr_run(<<C, Rest/binary>>, N) when N < ?RUN, ?IS_PLAIN_ATTR(C) -> attr_run(Rest, N + 1);
attr_run(_, N) -> N.

text_run(<<C, Rest/binary>>, N) when N < ?RUN, ?IS_PLAIN_TEXT(C) -> text_run(Rest, N + 1);
text_run(_, N) -> N.

%% Content of element Name from Start (text not yet taken) and P (where to
%% look next). Text is the pending text pieces, newest first.
content(B, P, Start, Name, Left, Text, Acc, Pats) ->
    <<_:P/binary, Rest/binary>> = B,
    %% (no stop to keep: the search stops where character data does)
    {Q, _} = next_stop(B, P, text_run(Rest, 0), element(?P_TEXT, Pats), -1),
    case binary:at(B, Q) of
        $< ->
            markup(B, Q, Name, Left, piece(B, Start, Q, Text), Acc, Pats);
        $& ->
            {Ch, Q1} = ref(B, Q),
            content(B, Q1, Q1, Name, Left, [Ch | piece(B, Start, Q, Text)], Acc, Pats);
        $\r ->
            Q1 = skip_lf(B, Q + 1),
            content(B, Q1, Q1, Name, Left, [<<"\n">> | piece(B, Start, Q, Text)], Acc, Pats);
        $] ->
            case B of
                <<_:Q/binary, "]]>", _/binary>> -> throw(nwf(<<"']]>' in character data">>));
                <<_:Q/binary, "]]">> -> throw(incomplete);
                <<_:Q/binary, "]">> -> throw(incomplete);
                _ -> content(B, Q + 1, Start, Name, Left, Text, Acc, Pats)
            end;
        C when C >= 16#80 ->
            content(B, utf8_run(B, Q), Start, Name, Left, Text, Acc, Pats);
        _ ->
            throw(bad_char())
    end.

%% '<' at Q inside element Name.
markup(B, Q, Name, Left, Text, Acc, Pats) ->
    case byte(B, Q + 1) of
        $/ ->
            {EndName, P1} = name(B, Q + 2),
            P2 = skip_ws(B, P1),
            case byte(B, P2) of
                $> when EndName =:= Name ->
                    {lists:reverse(add_text(Text, Acc)), P2 + 1};
                $> ->
                    throw(nwf(<<"mismatched end tag">>));
                _ ->
                    throw(nwf(<<"malformed end tag">>))
            end;
        $! ->
            P1 = cdata_open(B, Q + 2),
            {Text1, P2} = cdata(B, P1, P1, Text, element(?P_CDATA, Pats)),
            content(B, P2, P2, Name, Left, Text1, Acc, Pats);
        $? ->
            throw({xml, 'restricted-xml', <<"processing instruction in stream">>});
        _ when Left =:= 0 ->
            throw({xml, 'policy-violation', <<"elements nested too deeply">>});
        _ ->
            {El, P1} = el(B, Q + 1, Left - 1, Pats),
            content(B, P1, P1, Name, Left, [], [El | add_text(Text, Acc)], Pats)
    end.

%% After '<!': "[CDATA[" or a forbidden declaration.
cdata_open(B, P) ->
    cdata_open(B, P, 0).

cdata_open(_B, P, 7) ->
    P;
cdata_open(B, P, N) ->
    C = byte(B, P),
    case C =:= binary:at(<<"[CDATA[">>, N) of
        true -> cdata_open(B, P + 1, N + 1);
        false -> throw({xml, 'restricted-xml', bang_text(N, C)})
    end.

%% A CDATA section's content from P to "]]>". The attention set also stops
%% at '<' and '&', which are plain here.
cdata(B, P, Start, Text, Attention) ->
    Size = byte_size(B),
    case first_of(B, P, Size, Attention) of
        Size ->
            throw(incomplete);
        S ->
            case binary:at(B, S) of
                $] ->
                    %% "]]>" at S
                    {piece(B, Start, S, Text), S + 3};
                $\r ->
                    S1 = skip_lf(B, S + 1),
                    cdata(B, S1, S1, [<<"\n">> | piece(B, Start, S, Text)], Attention);
                C when C >= 16#80 ->
                    cdata(B, utf8_run(B, S), Start, Text, Attention);
                C when C =:= $<; C =:= $& ->
                    cdata(B, S + 1, Start, Text, Attention);
                _ ->
                    throw(bad_char())
            end
    end.

piece(_B, Start, Start, Acc) -> Acc;
piece(B, Start, End, Acc) -> [binary_part(B, Start, End - Start) | Acc].

%% The text made of pieces Acc (newest first) and B[Start, End).
text(B, Start, End, []) -> binary_part(B, Start, End - Start);
text(B, Start, End, Acc) -> iolist_to_binary(lists:reverse(piece(B, Start, End, Acc))).

add_text([], Acc) -> Acc;
add_text([Bin], Acc) -> [{xmlcdata, Bin} | Acc];
add_text(Text, Acc) -> [{xmlcdata, iolist_to_binary(lists:reverse(Text))} | Acc].

skip_lf(B, P) ->
    case byte(B, P) of
        $\n -> P + 1;
        _ -> P
    end.

%% Entity or character reference at P ('&').
ref(B, P) ->
    case B of
        <<_:P/binary, "&lt;", _/binary>> -> {<<"<">>, P + 4};
        <<_:P/binary, "&gt;", _/binary>> -> {<<">">>, P + 4};
        <<_:P/binary, "&amp;", _/binary>> -> {<<"&">>, P + 5};
        <<_:P/binary, "&quot;", _/binary>> -> {<<"\"">>, P + 6};
        <<_:P/binary, "&apos;", _/binary>> -> {<<"'">>, P + 6};
        <<_:P/binary, "&#x", _/binary>> -> char_ref(B, P + 3, 16, P + 3, 0);
        <<_:P/binary, "&#", _/binary>> -> char_ref(B, P + 2, 10, P + 2, 0);
        _ ->
            {_, P1} = try name(B, P + 1)
                      catch throw:{xml, 'not-well-formed', _} -> throw(nwf(<<"bare '&'">>))
                      end,
            case byte(B, P1) of
                $; -> throw({xml, 'restricted-xml', <<"entity reference in stream">>});
                _ -> throw(nwf(<<"bare '&'">>))
            end
    end.

char_ref(B, P, Base, Start, N) ->
    C = byte(B, P),
    case digit(C, Base) of
        D when D >= 0, N =< 16#10FFFF -> char_ref(B, P + 1, Base, Start, N * Base + D);
        _ when C =:= $;, P > Start ->
            case is_xml_char(N) of
                true -> {<<N/utf8>>, P + 1};
                false -> throw(nwf(<<"character reference to an invalid character">>))
            end;
        _ ->
            throw(nwf(<<"malformed character reference">>))
    end.

digit(C, _) when ?IS_DIGIT(C) -> C - $0;
digit(C, 16) when C >= $a, C =< $f -> C - $a + 10;
digit(C, 16) when C >= $A, C =< $F -> C - $A + 10;
digit(_, _) -> -1.

is_xml_char(C) ->
    C =:= 16#9 orelse C =:= 16#A orelse C =:= 16#D
        orelse (C >= 16#20 andalso C =< 16#D7FF)
        orelse (C >= 16#E000 andalso C =< 16#FFFD)
        orelse (C >= 16#10000 andalso C =< 16#10FFFF).

%% An XML Name at P: {Name, End}.
-spec name(binary(), non_neg_integer()) -> {binary(), non_neg_integer()}.
name(B, P) ->
    case B of
        <<_:P/binary, C, _/binary>> when ?IS_NAME_START(C) ->
            name_rest(B, P, P + 1);
        <<_:P/binary, C, _/binary>> when C >= 16#80 ->
            {Cp, Len} = utf8_char(B, P),
            case is_name_start(Cp) of
                true -> name_rest(B, P, P + Len);
                false -> throw(nwf(<<"invalid name">>))
            end;
        <<_:P/binary, _, _/binary>> ->
            throw(nwf(<<"invalid name">>));
        _ ->
            throw(incomplete)
    end.

%% The name that starts at Start continues at P0.
name_rest(B, Start, P0) ->
    <<_:P0/binary, Rest/binary>> = B,
    P = P0 + name_len(Rest, 0),
    case B of
        <<_:P/binary, C, _/binary>> when C >= 16#80 ->
            {Cp, Len} = utf8_char(B, P),
            case is_name_char(Cp) of
                true -> name_rest(B, Start, P + Len);
                false -> throw(nwf(<<"invalid name">>))
            end;
        <<_:P/binary, _, _/binary>> ->
            {binary_part(B, Start, P - Start), P};
        _ ->
            throw(incomplete)
    end.

name_len(<<C, Rest/binary>>, N) when ?IS_NAME_CHAR(C) -> name_len(Rest, N + 1);
name_len(_, N) -> N.

%% XML 1.0 (fifth edition) NameStartChar and NameChar beyond ASCII.
is_name_start(C) ->
    (C >= 16#C0 andalso C =< 16#D6) orelse (C >= 16#D8 andalso C =< 16#F6)
        orelse (C >= 16#F8 andalso C =< 16#2FF) orelse (C >= 16#370 andalso C =< 16#37D)
        orelse (C >= 16#37F andalso C =< 16#1FFF) orelse C =:= 16#200C orelse C =:= 16#200D
        orelse (C >= 16#2070 andalso C =< 16#218F) orelse (C >= 16#2C00 andalso C =< 16#2FEF)
        orelse (C >= 16#3001 andalso C =< 16#D7FF) orelse (C >= 16#F900 andalso C =< 16#FDCF)
        orelse (C >= 16#FDF0 andalso C =< 16#FFFD) orelse (C >= 16#10000 andalso C =< 16#EFFFF).

is_name_char(C) ->
    is_name_start(C) orelse C =:= 16#B7 orelse (C >= 16#300 andalso C =< 16#36F)
        orelse C =:= 16#203F orelse C =:= 16#2040.

%% Skips the non-ASCII characters from P on, checking them: the end offset.
utf8_run(B, P) ->
    case B of
        <<_:P/binary, C, _/binary>> when C >= 16#80 ->
            {_, Len} = utf8_char(B, P),
            utf8_run(B, P + Len);
        _ ->
            P
    end.

%% The character at P, whose first byte is not ASCII: {CodePoint, Length}.
utf8_char(B, P) ->
    case B of
        <<_:P/binary, C/utf8, _/binary>> when C =:= 16#FFFE; C =:= 16#FFFF ->
            throw(bad_char());
        <<_:P/binary, C/utf8, _/binary>> when C < 16#800 -> {C, 2};
        <<_:P/binary, C/utf8, _/binary>> when C < 16#10000 -> {C, 3};
        <<_:P/binary, C/utf8, _/binary>> -> {C, 4};
        _ ->
            Rest = binary:part(B, P, byte_size(B) - P),
            case byte_size(Rest) < 4 andalso utf8_prefix(Rest) of
                true -> throw(incomplete);
                false -> throw({xml, 'unsupported-encoding', <<"invalid UTF-8">>})
            end
    end.

%% Whether Bytes can start a valid UTF-8 sequence that is longer (RFC 3629).
utf8_prefix(<<C>>) -> C >= 16#C2 andalso C =< 16#F4;
utf8_prefix(<<16#E0, C>>) -> C >= 16#A0 andalso C =< 16#BF;
utf8_prefix(<<16#ED, C>>) -> C >= 16#80 andalso C =< 16#9F;
utf8_prefix(<<L, C>>) when L >= 16#E1, L =< 16#EF -> C >= 16#80 andalso C =< 16#BF;
utf8_prefix(<<16#F0, C>>) -> C >= 16#90 andalso C =< 16#BF;
utf8_prefix(<<16#F4, C>>) -> C >= 16#80 andalso C =< 16#8F;
utf8_prefix(<<L, C>>) when L >= 16#F1, L =< 16#F3 -> C >= 16#80 andalso C =< 16#BF;
utf8_prefix(<<L, C1, C2>>) when L >= 16#F0, L =< 16#F4 ->
    utf8_prefix(<<L, C1>>) andalso C2 >= 16#80 andalso C2 =< 16#BF;
utf8_prefix(_) -> false.

byte(B, P) ->
    case B of
        <<_:P/binary, C, _/binary>> -> C;
        _ -> throw(incomplete)
    end.

-spec nwf(binary()) -> {xml, 'not-well-formed', binary()}.
nwf(Text) -> {xml, 'not-well-formed', Text}.

bad_char() -> nwf(<<"character not allowed in XML">>).

%%% XML declaration

%% <?xml version='1.x' encoding='UTF-8' standalone='yes'?>, complete.
-spec decl(binary()) -> ok.
decl(B) ->
    case unicode:characters_to_binary(B) of
        B -> ok;
        _ -> throw({xml, 'unsupported-encoding', <<"invalid UTF-8">>})
    end,
    case name(B, 2) of
        {<<"xml">>, P} -> decl_check(decl_attrs(B, P, []));
        _ -> throw({xml, 'restricted-xml', <<"processing instruction in stream">>})
    end.

decl_attrs(B, P, Acc) ->
    P1 = skip_ws(B, P),
    case B of
        <<_:P1/binary, "?>">> ->
            lists:reverse(Acc);
        _ when P1 > P ->
            {Name, P2} = name(B, P1),
            P3 = skip_ws(B, P2),
            P4 = skip_ws(B, expect(B, P3, $=)),
            Quote = byte(B, P4),
            case Quote =:= $" orelse Quote =:= $' of
                true ->
                    case binary:match(B, <<Quote>>, [{scope, {P4 + 1, byte_size(B) - P4 - 1}}]) of
                        {Q, _} -> decl_attrs(B, Q + 1, [{Name, binary_part(B, P4 + 1, Q - P4 - 1)} | Acc]);
                        nomatch -> throw(bad_decl())
                    end;
                false ->
                    throw(bad_decl())
            end;
        _ ->
            throw(bad_decl())
    end.

expect(B, P, C) ->
    case byte(B, P) of
        C -> P + 1;
        _ -> throw(bad_decl())
    end.

decl_check([{<<"version">>, <<"1.", Minor/binary>>} | Rest]) when Minor =/= <<>> ->
    case [C || <<C>> <= Minor, not ?IS_DIGIT(C)] of
        [] -> decl_encoding(Rest);
        _ -> throw(bad_decl())
    end;
decl_check(_) ->
    throw(bad_decl()).

decl_encoding([{<<"encoding">>, Enc} | Rest]) ->
    case << <<(ascii_lower(C))>> || <<C>> <= Enc >> of
        <<"utf-8">> -> decl_standalone(Rest);
        _ -> throw({xml, 'unsupported-encoding', <<"encoding other than UTF-8">>})
    end;
decl_encoding(Rest) ->
    decl_standalone(Rest).

decl_standalone([]) -> ok;
decl_standalone([{<<"standalone">>, V}]) when V =:= <<"yes">>; V =:= <<"no">> -> ok;
decl_standalone(_) -> throw(bad_decl()).

ascii_lower(C) when C >= $A, C =< $Z -> C + 32;
ascii_lower(C) -> C.

bad_decl() -> nwf(<<"malformed XML declaration">>).

%%% Compiled search patterns, made once per node and looked up once per
%%% unit, then passed along. On OTP 25 a Boyer-Moore (single string) pattern
%%% that finds nothing in a subject of under about ten bytes charges a whole
%%% time slice of reductions, which one-byte chunks would hit on every call;
%%% a set of two or more strings is compiled to Aho-Corasick, which does not.
%%% So each string the scanner looks for comes as a pair {Boyer-Moore,
%%% Aho-Corasick}, the latter padded with a longer string that never changes
%%% where the first match starts.
%%%
%%% Character data and attribute values must also stop at control
%%% characters and at every byte of a non-ASCII character (to check its
%%% UTF-8 and XML's Char rule). Those are 157 bytes, and binary:match/3's
%%% Aho-Corasick automaton costs about 2 KB per byte of its set: four sets
%%% that each held them with their context's markup took 1.43 MB of every
%%% node's binary memory. So character data, CDATA sections and both kinds
%%% of attribute value share one attention set: those bytes and the markup
%%% of character data ('<', '&', "]]>"). Not the quotes, TAB and LF, which
%%% only attribute values care about and which are common in long texts
%%% (prose, base64 lines): an attribute value searches for them in the
%%% bytes before the attention stop, with a set of four bytes. A CDATA
%%% section steps over '<' and '&'. A long run of character data or CDATA
%%% is read once; a long attribute value twice. (A regular expression of
%%% one character class would take a few hundred bytes, but re:run/3 added
%%% 2 us to a chat message's parse.)
-spec patterns() -> tuple().
patterns() ->
    case persistent_term:get(?MODULE, undefined) of
        undefined ->
            Attention = binary:compile_pattern(attention()),
            Keys = [text, cdata, dq, sq, lt, gt, $", $', cdata_end, stag, pi_end],
            Specs = [pattern_bytes(K) || K <- Keys],
            %% Contexts with the same stops (text and cdata, dq and sq)
            %% share one compiled pattern.
            Compiled = maps:from_list([{S, compile(S, Attention)} || S <- lists:usort(Specs)]),
            Pats = list_to_tuple([maps:get(S, Compiled) || S <- Specs]),
            persistent_term:put(?MODULE, Pats),
            Pats;
        Pats ->
            Pats
    end.

compile({pair, String}, _Attention) ->
    {binary:compile_pattern(String),
     binary:compile_pattern([String, <<String/binary, String/binary>>])};
compile(attention, Attention) ->
    Attention;
compile({attention, Strings}, Attention) ->
    {Attention, binary:compile_pattern(Strings)};
compile(Strings, _Attention) ->
    binary:compile_pattern(Strings).

pattern_bytes(lt) -> {pair, <<"<">>};
pattern_bytes(gt) -> {pair, <<">">>};
pattern_bytes($") -> {pair, <<"\"">>};
pattern_bytes($') -> {pair, <<"'">>};
pattern_bytes(cdata_end) -> {pair, <<"]]>">>};
pattern_bytes(pi_end) -> {pair, <<"?>">>};
pattern_bytes(stag) -> [<<">">>, <<"\"">>, <<"'">>];
pattern_bytes(text) -> attention;
pattern_bytes(cdata) -> attention;
pattern_bytes(dq) -> {attention, [<<"\"">>, <<"'">>, <<"\t">>, <<"\n">>]};
pattern_bytes(sq) -> {attention, [<<"\"">>, <<"'">>, <<"\t">>, <<"\n">>]}.

%% The bytes that stop a run of plain character data: markup, references,
%% CR (line ends are normalized), the other control characters and every
%% byte of a non-ASCII character (checked as UTF-8); ']' only as part of
%% "]]>".
attention() ->
    [<<"<">>, <<"&">>, <<"]]>">>] ++
        [<<C>> || C <- lists:seq(0, 31), C =/= $\t, C =/= $\n] ++
        [<<C>> || C <- lists:seq(128, 255)].


-spec skip_ws(binary(), non_neg_integer()) -> non_neg_integer().
skip_ws(D, P) ->
    case D of
        <<_:P/binary, C, _/binary>> when ?IS_WS(C) -> skip_ws(D, P + 1);
        _ -> P
    end.

-spec bang_text(non_neg_integer(), byte()) -> binary().
bang_text(0, $-) -> <<"comment in stream">>;
bang_text(0, $D) -> <<"DOCTYPE in stream">>;
bang_text(_, _) -> <<"markup declaration in stream">>.
