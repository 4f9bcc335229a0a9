%%% @doc Resumable streaming XML parser for XMPP streams.
%%%
%%% An XMPP stream is one XML document whose root (the stream header) stays
%%% open; every child of the root is a stanza. `parse/2' takes the bytes as
%%% they arrive and returns events: `stream_start' as soon as the header's
%%% start tag is complete, one `stanza' per complete depth-1 element,
%%% `stream_end' for the header's end tag, or an `error' with an RFC 6120
%%% stream error condition, after which the state is dead.
%%%
%%% Two parts do the work (see docs/xml-parser.md):
%%% <ul>
%%% <li>a resumable scanner that finds where the current unit (stanza, stream
%%%   header, XML declaration, stream end tag) ends. It tracks tags, quotes,
%%%   CDATA sections and depth, keeps its position between calls and so reads
%%%   every byte once, however the input is split;</li>
%%% <li>a non-resumable recursive parser over a binary that builds the
%%%   element, checking well-formedness, references and UTF-8.</li>
%%% </ul>
%%% When a stanza starts inside a chunk the parser is tried on the rest of the
%%% chunk first; the scanner only takes over when the stanza is incomplete.
%%% When the scanner stops at an error, the parser looks at the bytes before
%%% it, so that the reported error is the first in document order whichever
%%% way the input was cut. Between stanzas the state holds no binary at all,
%%% and a partial stanza holds copies rather than slices of big chunks.
-module(throng_xml_stream).

-include("throng.hrl").

-export([new/1, parse/2, reset/1, buffered/1]).

-export_type([state/0, opts/0, event/0]).

-define(DEFAULT_MAX_STANZA_SIZE, 262144).
-define(DEFAULT_MAX_DEPTH, 32).

-define(IS_WS(C), (C =:= $\s orelse C =:= $\n orelse C =:= $\t orelse C =:= $\r)).
-define(IS_NAME_START(C), ((C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                           orelse C =:= $_ orelse C =:= $:)).
-define(IS_NAME_CHAR(C), (?IS_NAME_START(C) orelse (C >= $0 andalso C =< $9)
                          orelse C =:= $- orelse C =:= $.)).
-define(IS_DIGIT(C), (C >= $0 andalso C =< $9)).

%% Positions in the tuple of compiled patterns, see patterns/0.
-define(P_TEXT, 1).
-define(P_CDATA, 2).
-define(P_DQ, 3).
-define(P_SQ, 4).
-define(P_LT, 5).
-define(P_GT, 6).
-define(P_QUOT, 7).
-define(P_APOS, 8).
-define(P_CDATA_END, 9).
-define(P_STAG, 10).
-define(P_PI_END, 11).

%% Bytes that need no attention in character data and attribute values.
-define(IS_PLAIN_TEXT(C), ((C >= $\s andalso C =< 16#7F andalso C =/= $< andalso C =/= $&
                            andalso C =/= $]) orelse C =:= $\n orelse C =:= $\t)).
-define(IS_PLAIN_ATTR(C), (C >= $\s andalso C =< 16#7F andalso C =/= $< andalso C =/= $&
                           andalso C =/= $" andalso C =/= $')).
-define(RUN, 16).

-compile({inline, [byte/2, piece/4, skip_lf/2, add_text/2, nwf/1, next_stop/4]}).

-type opts() :: #{max_stanza_size => pos_integer(), max_depth => pos_integer(),
                  sizes => boolean()}.
-type event() :: {stream_start, Name :: binary(), Attrs :: [{binary(), binary()}]}
               | {stanza, #xmlel{}}
               | {stanza, #xmlel{}, Bytes :: pos_integer()}   % with sizes => true
               | stream_end
               | {error, Condition :: atom(), Text :: binary()}.

%% Where the stream is: `bom' nothing seen yet, `decl' an XML declaration may
%% still come, `prolog' waiting for the stream header, `stream' between
%% stanzas, `closed' after the stream end tag, `dead' after an error.
-type phase() :: bom | decl | prolog | stream | closed | dead.

%% What the scanner was in the middle of when the chunk ended.
-type mode() :: lt                         % just after '<'
              | text                       % character data inside a stanza
              | etag                       % inside an end tag
              | {bang, 0..6}               % '<!' and N bytes of "[CDATA["
              | {cdata, 0..2}              % in a CDATA section, N trailing ']'
              | {stag, none | $" | $', boolean()}  % start tag; quote; last byte '/'
              | {pi, boolean()}.           % XML declaration; last byte '?'

%% An incomplete unit: the bytes received so far (newest first) and where the
%% scanner stands. In phase `bom' it holds the start of a byte order mark.
-record(unit, {mode = lt :: mode(),
               depth = 0 :: non_neg_integer(),
               size = 0 :: non_neg_integer(),
               pieces = [] :: [binary()]}).

-record(st, {phase = bom :: phase(),
             max_size :: pos_integer(),
             max_depth :: pos_integer(),
             name = <<>> :: binary(),        % stream header name, for its end tag
             unit = none :: none | #unit{},
             sizes = false :: boolean()}).   % {stanza, El, Bytes} events

-opaque state() :: #st{}.

-type condition() :: atom().
-type scan() :: {done, non_neg_integer()}
              | {more, mode(), non_neg_integer()}
              | {error, non_neg_integer(), condition(), binary()}.

%%% API

%% @doc A parser waiting for a stream header.
-spec new(opts()) -> state().
new(Opts) ->
    case {maps:get(max_stanza_size, Opts, ?DEFAULT_MAX_STANZA_SIZE),
          maps:get(max_depth, Opts, ?DEFAULT_MAX_DEPTH),
          maps:get(sizes, Opts, false)} of
        {Size, Depth, Sizes} when is_integer(Size), Size > 0, is_integer(Depth), Depth > 0,
                                  is_boolean(Sizes) ->
            #st{max_size = Size, max_depth = Depth, sizes = Sizes};
        _ ->
            erlang:error(badarg, [Opts])
    end.

%% @doc Feeds the next bytes of the stream; returns the events they complete.
-spec parse(state(), binary()) -> {[event()], state()}.
parse(#st{phase = Ph} = St, _Data) when Ph =:= dead; Ph =:= closed ->
    {[], St};
parse(#st{phase = bom, unit = U} = St, Data) ->
    Bytes = case U of
                none -> Data;
                #unit{pieces = [Pending]} -> <<Pending/binary, Data/binary>>
            end,
    Bom = <<16#EF, 16#BB, 16#BF>>,
    case Bytes of
        <<16#EF, 16#BB, 16#BF, Rest/binary>> ->
            step(St#st{phase = decl, unit = none}, Rest, 0, []);
        <<>> ->
            {[], St};
        _ when byte_size(Bytes) < 3 ->
            case binary:longest_common_prefix([Bytes, Bom]) =:= byte_size(Bytes) of
                true ->
                    Pre = binary:copy(Bytes),
                    {[], St#st{unit = #unit{size = byte_size(Pre), pieces = [Pre]}}};
                false ->
                    step(St#st{phase = decl, unit = none}, Bytes, 0, [])
            end;
        _ ->
            step(St#st{phase = decl, unit = none}, Bytes, 0, [])
    end;
parse(St, Data) ->
    step(St, Data, 0, []).

%% @doc Restarts the stream (after STARTTLS, SASL success, compression):
%% buffered bytes are dropped and a new stream header is expected.
-spec reset(state()) -> state().
reset(St) ->
    St#st{phase = bom, name = <<>>, unit = none}.

%% @doc Bytes held for an incomplete stanza or token.
-spec buffered(state()) -> non_neg_integer().
buffered(#st{unit = none}) -> 0;
buffered(#st{unit = #unit{size = Size}}) -> Size.

%%% Stream level

%% Between units: whitespace, then '<' starts the next unit.
-spec step(#st{}, binary(), non_neg_integer(), [event()]) -> {[event()], #st{}}.
step(#st{unit = #unit{} = U} = St, D, P, Evs) ->
    scan_unit(St#st{unit = none}, U, D, P, P, Evs);
step(#st{phase = closed} = St, _D, _P, Evs) ->
    {lists:reverse(Evs), St};
step(#st{phase = Ph0} = St0, D, P, Evs) ->
    Q = skip_ws(D, P),
    Ph = case Ph0 =:= decl andalso Q > P of
             true -> prolog;
             false -> Ph0
         end,
    St = St0#st{phase = Ph},
    case D of
        <<_:Q/binary>> ->
            {lists:reverse(Evs), St};
        <<_:Q/binary, $<, C, _/binary>> when Ph =:= stream, C =/= $/, C =/= $!, C =/= $? ->
            stanza(St, D, Q, Evs);
        <<_:Q/binary, $<, _/binary>> ->
            scan_unit(St, #unit{}, D, Q, Q + 1, Evs);
        <<_:Q/binary, C, _/binary>> when C >= 16#80, (C < 16#C2 orelse C > 16#F4) ->
            fail(St, Evs, 'unsupported-encoding', <<"invalid UTF-8">>);
        <<_:Q/binary, C, _/binary>> when C < 16#20 ->
            fail(St, Evs, 'not-well-formed', <<"character not allowed in XML">>);
        _ when Ph =:= stream ->
            fail(St, Evs, 'bad-format', <<"character data between stanzas">>);
        _ ->
            fail(St, Evs, 'not-well-formed', <<"character data before the stream header">>)
    end.

skip_ws(D, P) ->
    case D of
        <<_:P/binary, C, _/binary>> when ?IS_WS(C) -> skip_ws(D, P + 1);
        _ -> P
    end.

%% Fast path: a stanza starts at Q; try to parse it from this chunk alone.
%% Only the last stanza of a chunk can be incomplete, so the work lost to a
%% failed try is at most one chunk's tail per call. (Testing first whether
%% the stanza can end in the chunk, by searching for its end tag, cost more
%% on chunks of many small stanzas than it saved on split big ones.)
stanza(#st{max_size = Max, max_depth = MaxDepth} = St, D, Q, Evs) ->
    Avail = byte_size(D) - Q,
    Region = binary_part(D, Q, min(Avail, Max)),
    try parse_el(Region, MaxDepth) of
        {El, Len} ->
            step(St, D, Q + Len, [stanza_event(St, detach(El, D, Len), Len) | Evs])
    catch
        throw:incomplete when Avail >= Max ->
            fail(St, Evs, 'policy-violation', <<"stanza too big">>);
        throw:incomplete ->
            scan_unit(St, #unit{}, D, Q, Q + 1, Evs);
        throw:{xml, Cond, Text} ->
            fail(St, Evs, Cond, Text)
    end.

%% Scans unit U, which continues at Start in D, from P on. The scan stops
%% one byte past the size limit, so nothing beyond it is ever kept.
scan_unit(#st{phase = Ph, max_size = Max, max_depth = MaxDepth} = St,
          #unit{mode = M, depth = Dep, size = Size0, pieces = Ps} = U, D, Start, P, Evs) ->
    Lim = min(byte_size(D), Start + (Max - Size0) + 1),
    case scan(D, P, Lim, M, Dep, {Ph, MaxDepth, patterns()}) of
        {done, End} when Size0 + End - Start =< Max ->
            unit(St, join(Ps, binary_part(D, Start, End - Start)), D, End, Evs);
        {more, M1, Dep1} when Size0 + Lim - Start =< Max ->
            Piece = keep(binary_part(D, Start, Lim - Start)),
            {lists:reverse(Evs),
             St#st{unit = U#unit{mode = M1, depth = Dep1, size = Size0 + Lim - Start,
                                 pieces = [Piece | Ps]}}};
        {error, At, Cond, Text} when Size0 + At - Start =< Max ->
            arbitrate(St, join(Ps, binary_part(D, Start, At - Start)), Cond, Text, Evs);
        _TooBig ->
            At = Start + Max - Size0,
            arbitrate(St, join(Ps, binary_part(D, Start, At - Start)),
                      'policy-violation', <<"stanza too big">>, Evs)
    end.

join([], Last) -> Last;
join(Ps, Last) -> iolist_to_binary(lists:reverse(Ps, [Last])).

%% A piece of a chunk kept in the state must not hold the whole chunk alive.
keep(Piece) ->
    case binary:referenced_byte_size(Piece) > 2 * byte_size(Piece) of
        true -> binary:copy(Piece);
        false -> Piece
    end.

%% The scanner found an error at the end of Partial. Report the first error
%% in document order, as the fast path would have, so that the result never
%% depends on how the input was split.
arbitrate(#st{phase = Ph, max_depth = MaxDepth} = St, Partial, Cond, Text, Evs) ->
    Earlier = try
                  case {Ph, Partial} of
                      {_, <<"<", C, _/binary>>} when C =:= $/; C =:= $!; C =:= $? -> none;
                      {stream, _} -> parse_el(Partial, MaxDepth);
                      {_, _} -> start_tag(Partial)
                  end
              catch
                  throw:{xml, _, _} = Error -> Error;
                  throw:incomplete -> none
              end,
    case Earlier of
        {xml, Cond1, Text1} -> fail(St, Evs, Cond1, Text1);
        _ -> fail(St, Evs, Cond, Text)
    end.

%% A complete unit Bin, which ended at End in D.
unit(St, Bin, D, End, Evs) ->
    try unit_events(St, Bin) of
        {St1, New} -> step(St1, D, End, New ++ Evs)
    catch
        throw:{xml, Cond, Text} -> fail(St, Evs, Cond, Text);
        throw:incomplete -> fail(St, Evs, 'not-well-formed', <<"malformed markup">>)
    end.

%% With the `sizes' option, a stanza event carries its size in bytes (the
%% statistics count bytes by stanza kind).
stanza_event(#st{sizes = true}, El, Bytes) -> {stanza, El, Bytes};
stanza_event(#st{sizes = false}, El, _Bytes) -> {stanza, El}.

%% The state after unit Bin and its events, newest first.
unit_events(#st{phase = decl} = St, <<"<?", _/binary>> = Bin) ->
    ok = decl(Bin),
    {St#st{phase = prolog}, []};
unit_events(#st{phase = stream, name = Name} = St, <<"</", _/binary>> = Bin) ->
    {Name1, P} = name(Bin, 2),
    case Name1 =:= Name andalso binary:at(Bin, skip_ws(Bin, P)) =:= $> of
        true -> {St#st{phase = closed}, [stream_end]};
        false -> throw(nwf(<<"mismatched stream end tag">>))
    end;
unit_events(#st{phase = stream, max_depth = MaxDepth} = St, Bin) ->
    {El, _} = complete(parse_el(Bin, MaxDepth), Bin),
    {St, [stanza_event(St, El, byte_size(Bin))]};
unit_events(St, Bin) ->
    {{Name, Attrs0, Empty}, _} = complete(start_tag(Bin), Bin),
    Attrs = [{binary:copy(K), binary:copy(V)} || {K, V} <- Attrs0],
    Start = {stream_start, binary:copy(Name), Attrs},
    case Empty of
        true -> {St#st{phase = closed}, [stream_end, Start]};
        false -> {St#st{phase = stream, name = binary:copy(Name)}, [Start]}
    end.

complete({_, Len} = Result, Bin) when Len =:= byte_size(Bin) -> Result;
complete(_, _) -> throw(nwf(<<"malformed markup">>)).

fail(St, Evs, Cond, Text) ->
    {lists:reverse([{error, Cond, Text} | Evs]), St#st{phase = dead, unit = none}}.

%% A stanza parsed straight out of a receive chunk refers to that chunk with
%% sub-binaries. When the chunk is much bigger than the stanza, copy the
%% stanza's binaries so that a stanza kept for long (offline storage, a queue)
%% does not hold the whole chunk alive.
detach(El, D, Len) ->
    case binary:referenced_byte_size(D) > 2 * Len of
        true -> copy_el(El);
        false -> El
    end.

copy_el(#xmlel{name = N, attrs = As, children = Cs}) ->
    #xmlel{name = binary:copy(N),
           attrs = [{binary:copy(K), binary:copy(V)} || {K, V} <- As],
           children = [copy_el(C) || C <- Cs]};
copy_el({xmlcdata, B}) ->
    {xmlcdata, binary:copy(B)}.

%%% Scanner: finds where a unit ends. Reads each byte at most once.

-spec scan(binary(), non_neg_integer(), non_neg_integer(), mode(), non_neg_integer(),
           {phase(), pos_integer(), tuple()}) -> scan().
scan(_D, P, E, M, Dep, _Cx) when P >= E ->
    {more, M, Dep};
scan(D, P, E, text, Dep, {_, _, Pats} = Cx) ->
    case find(D, P, E, element(?P_LT, Pats)) of
        {Q, _} -> scan(D, Q + 1, E, lt, Dep, Cx);
        nomatch -> {more, text, Dep}
    end;
scan(D, P, E, lt, Dep, {Ph, _, _} = Cx) ->
    case binary:at(D, P) of
        $/ when Dep =:= 0, Ph =/= stream ->
            {error, P + 1, 'not-well-formed', <<"end tag before the stream header">>};
        $/ -> scan(D, P + 1, E, etag, Dep, Cx);
        $! -> scan(D, P + 1, E, {bang, 0}, Dep, Cx);
        $? when Dep =:= 0, Ph =:= decl -> scan(D, P + 1, E, {pi, false}, Dep, Cx);
        $? -> {error, P + 1, 'restricted-xml', <<"processing instruction in stream">>};
        _ -> scan(D, P, E, {stag, none, false}, Dep, Cx)
    end;
scan(D, P, E, {bang, N}, Dep, {Ph, _, _} = Cx) ->
    C = binary:at(D, P),
    case C =:= binary:at(<<"[CDATA[">>, N) of
        true when N < 6 -> scan(D, P + 1, E, {bang, N + 1}, Dep, Cx);
        true when Dep > 0 -> scan(D, P + 1, E, {cdata, 0}, Dep, Cx);
        true when Ph =:= stream ->
            {error, P + 1, 'bad-format', <<"character data between stanzas">>};
        true ->
            {error, P + 1, 'not-well-formed', <<"character data before the stream header">>};
        false ->
            {error, P + 1, 'restricted-xml', bang_text(N, C)}
    end;
scan(D, P, E, {cdata, 0}, Dep, {_, _, Pats} = Cx) ->
    case find(D, P, E, element(?P_CDATA_END, Pats)) of
        {Q, _} -> scan(D, Q + 3, E, text, Dep, Cx);
        nomatch -> {more, {cdata, trailing_brackets(D, P, E)}, Dep}
    end;
scan(D, P, E, {cdata, K}, Dep, Cx) ->
    case binary:at(D, P) of
        $> when K =:= 2 -> scan(D, P + 1, E, text, Dep, Cx);
        $] -> scan(D, P + 1, E, {cdata, 2}, Dep, Cx);
        _ -> scan(D, P + 1, E, {cdata, 0}, Dep, Cx)
    end;
scan(D, P, E, {stag, none, Slash}, Dep, {_, _, Pats} = Cx) ->
    case binary:match(D, element(?P_STAG, Pats), [{scope, {P, E - P}}]) of
        {Q, _} ->
            case binary:at(D, Q) of
                $> when Q > P -> end_of_start_tag(D, Q + 1, E, binary:at(D, Q - 1) =:= $/, Dep, Cx);
                $> -> end_of_start_tag(D, Q + 1, E, Slash, Dep, Cx);
                Quote -> scan(D, Q + 1, E, {stag, Quote, false}, Dep, Cx)
            end;
        nomatch ->
            {more, {stag, none, binary:at(D, E - 1) =:= $/}, Dep}
    end;
scan(D, P, E, {stag, Quote, _}, Dep, {_, _, Pats} = Cx) ->
    case find(D, P, E, element(quote_pattern(Quote), Pats)) of
        {Q, _} -> scan(D, Q + 1, E, {stag, none, false}, Dep, Cx);
        nomatch -> {more, {stag, Quote, false}, Dep}
    end;
scan(D, P, E, etag, Dep, {_, _, Pats} = Cx) ->
    case find(D, P, E, element(?P_GT, Pats)) of
        {Q, _} when Dep =< 1 -> {done, Q + 1};
        {Q, _} -> scan(D, Q + 1, E, text, Dep - 1, Cx);
        nomatch -> {more, etag, Dep}
    end;
scan(D, P, E, {pi, QMark}, Dep, {_, _, Pats}) ->
    case QMark andalso binary:at(D, P) =:= $> of
        true ->
            {done, P + 1};
        false ->
            case find(D, P, E, element(?P_PI_END, Pats)) of
                {Q, _} -> {done, Q + 2};
                nomatch -> {more, {pi, binary:at(D, E - 1) =:= $?}, Dep}
            end
    end.

end_of_start_tag(_D, P, _E, _Empty, 0, {Ph, _, _}) when Ph =/= stream ->
    {done, P};                                  % the stream header
end_of_start_tag(_D, P, _E, _Empty, Dep, {_, MaxDepth, _}) when Dep >= MaxDepth ->
    {error, P, 'policy-violation', <<"elements nested too deeply">>};
end_of_start_tag(_D, P, _E, true, 0, _Cx) ->
    {done, P};
end_of_start_tag(D, P, E, true, Dep, Cx) ->
    scan(D, P, E, text, Dep, Cx);
end_of_start_tag(D, P, E, false, Dep, Cx) ->
    scan(D, P, E, text, Dep + 1, Cx).

%% Searches D[P, E) for one string: with Boyer-Moore, which runs at memory
%% speed (tens of GB/s against about 0.5 GB/s for Aho-Corasick), except in
%% scopes under 16 bytes, where the Aho-Corasick twin avoids the reduction
%% charge described at patterns/0.
find(D, P, E, {BoyerMoore, _}) when E - P >= 16 ->
    binary:match(D, BoyerMoore, [{scope, {P, E - P}}]);
find(D, P, E, {_, AhoCorasick}) ->
    binary:match(D, AhoCorasick, [{scope, {P, E - P}}]).

quote_pattern($") -> ?P_QUOT;
quote_pattern($') -> ?P_APOS.

trailing_brackets(D, P, E) when E - P >= 2 ->
    case binary:part(D, E - 2, 2) of
        <<"]]">> -> 2;
        <<_, "]">> -> 1;
        _ -> 0
    end;
trailing_brackets(D, P, _E) ->
    case binary:at(D, P) of
        $] -> 1;
        _ -> 0
    end.

bang_text(0, $-) -> <<"comment in stream">>;
bang_text(0, $D) -> <<"DOCTYPE in stream">>;
bang_text(_, _) -> <<"markup declaration in stream">>.

%%% Parser: one complete element, XML declaration or start tag in a binary.
%%% Positions are offsets into that binary. Running out of input throws
%%% `incomplete'; a fault throws {xml, Condition, Text}. No check ever looks
%%% at the end of the input, so an error in a prefix is an error in the
%%% whole.

%% The element whose '<' is at offset 0: {Element, Length}.
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
                      $" -> value(B, P3 + 1, P3 + 1, $", element(?P_DQ, Pats), []);
                      $' -> value(B, P3 + 1, P3 + 1, $', element(?P_SQ, Pats), []);
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
value(B, P, Start, Quote, Pat, Acc) ->
    <<_:P/binary, Rest/binary>> = B,
    Q = next_stop(B, P, attr_run(Rest, 0), Pat),
    case binary:at(B, Q) of
        Quote ->
            {text(B, Start, Q, Acc), Q + 1};
        C when C =:= $"; C =:= $' ->
            value(B, Q + 1, Start, Quote, Pat, Acc);
        $& ->
            {Ch, Q1} = ref(B, Q),
            value(B, Q1, Q1, Quote, Pat, [Ch | piece(B, Start, Q, Acc)]);
        $\r ->
            Q1 = skip_lf(B, Q + 1),
            value(B, Q1, Q1, Quote, Pat, [<<" ">> | piece(B, Start, Q, Acc)]);
        C when C =:= $\t; C =:= $\n ->
            value(B, Q + 1, Q + 1, Quote, Pat, [<<" ">> | piece(B, Start, Q, Acc)]);
        $< ->
            throw(nwf(<<"'<' in attribute value">>));
        C when C >= 16#80 ->
            value(B, utf8_run(B, Q), Start, Quote, Pat, Acc);
        _ ->
            throw(bad_char())
    end.

%% Runs of plain bytes are skipped by a short Erlang loop first: most runs in
%% stanzas are a few bytes long, and the loop costs less than a BIF call.
%% After ?RUN plain bytes the search goes on with binary:match/3 and Pat,
%% which stops at the same bytes (and at ']' only as part of "]]>").
next_stop(B, P, ?RUN, Pat) ->
    case binary:match(B, Pat, [{scope, {P + ?RUN, byte_size(B) - P - ?RUN}}]) of
        {Q, _} -> Q;
        nomatch -> throw(incomplete)
    end;
next_stop(B, P, N, _Pat) when P + N < byte_size(B) ->
    P + N;
next_stop(_B, _P, _N, _Pat) ->
    throw(incomplete).

attr_run(<<C, Rest/binary>>, N) when N < ?RUN, ?IS_PLAIN_ATTR(C) -> attr_run(Rest, N + 1);
attr_run(_, N) -> N.

text_run(<<C, Rest/binary>>, N) when N < ?RUN, ?IS_PLAIN_TEXT(C) -> text_run(Rest, N + 1);
text_run(_, N) -> N.

%% Content of element Name from Start (text not yet taken) and P (where to
%% look next). Text is the pending text pieces, newest first.
content(B, P, Start, Name, Left, Text, Acc, Pats) ->
    <<_:P/binary, Rest/binary>> = B,
    Q = next_stop(B, P, text_run(Rest, 0), element(?P_TEXT, Pats)),
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

cdata(B, P, Start, Text, Pat) ->
    case binary:match(B, Pat, [{scope, {P, byte_size(B) - P}}]) of
        nomatch ->
            throw(incomplete);
        {Q, 3} ->
            {piece(B, Start, Q, Text), Q + 3};
        {Q, _} ->
            case binary:at(B, Q) of
                $\r ->
                    Q1 = skip_lf(B, Q + 1),
                    cdata(B, Q1, Q1, [<<"\n">> | piece(B, Start, Q, Text)], Pat);
                C when C >= 16#80 ->
                    cdata(B, utf8_run(B, Q), Start, Text, Pat);
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

nwf(Text) -> {xml, 'not-well-formed', Text}.

bad_char() -> nwf(<<"character not allowed in XML">>).

%%% XML declaration

%% <?xml version='1.x' encoding='UTF-8' standalone='yes'?>, complete.
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

patterns() ->
    case persistent_term:get(?MODULE, undefined) of
        undefined ->
            Keys = [text, cdata, dq, sq, lt, gt, $", $', cdata_end, stag, pi_end],
            Pats = list_to_tuple([compile(pattern_bytes(K)) || K <- Keys]),
            persistent_term:put(?MODULE, Pats),
            Pats;
        Pats ->
            Pats
    end.

%% Bytes that stop a run of plain character data: markup, references, CR
%% (line ends are normalized), control characters and non-ASCII (checked as
%% UTF-8).
compile({pair, String}) ->
    {binary:compile_pattern(String),
     binary:compile_pattern([String, <<String/binary, String/binary>>])};
compile(Strings) ->
    binary:compile_pattern(Strings).

pattern_bytes(lt) -> {pair, <<"<">>};
pattern_bytes(gt) -> {pair, <<">">>};
pattern_bytes($") -> {pair, <<"\"">>};
pattern_bytes($') -> {pair, <<"'">>};
pattern_bytes(cdata_end) -> {pair, <<"]]>">>};
pattern_bytes(pi_end) -> {pair, <<"?>">>};
pattern_bytes(stag) -> [<<">">>, <<"\"">>, <<"'">>];
pattern_bytes(text) -> [<<"<">>, <<"&">>, <<"]]>">> | special_bytes()];
pattern_bytes(cdata) -> [<<"]]>">> | special_bytes()];
pattern_bytes(dq) -> [<<"\"">>, <<"<">>, <<"&">>, <<"\t">>, <<"\n">> | special_bytes()];
pattern_bytes(sq) -> [<<"'">>, <<"<">>, <<"&">>, <<"\t">>, <<"\n">> | special_bytes()].

special_bytes() ->
    [<<C>> || C <- lists:seq(0, 31), C =/= $\t, C =/= $\n] ++ [<<C>> || C <- lists:seq(128, 255)].
