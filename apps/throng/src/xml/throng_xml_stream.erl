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

-include("throng_xml_chars.hrl").

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
    Q = throng_xml_el:skip_ws(D, P),
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

%% Fast path: a stanza starts at Q; try to parse it from this chunk alone.
%% Only the last stanza of a chunk can be incomplete, so the work lost to a
%% failed try is at most one chunk's tail per call. (Testing first whether
%% the stanza can end in the chunk, by searching for its end tag, cost more
%% on chunks of many small stanzas than it saved on split big ones.)
stanza(#st{max_size = Max, max_depth = MaxDepth} = St, D, Q, Evs) ->
    Avail = byte_size(D) - Q,
    Region = binary_part(D, Q, min(Avail, Max)),
    try throng_xml_el:parse_el(Region, MaxDepth) of
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
    case scan(D, P, Lim, M, Dep, {Ph, MaxDepth, throng_xml_el:patterns()}) of
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
                      {stream, _} -> throng_xml_el:parse_el(Partial, MaxDepth);
                      {_, _} -> throng_xml_el:start_tag(Partial)
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
    ok = throng_xml_el:decl(Bin),
    {St#st{phase = prolog}, []};
unit_events(#st{phase = stream, name = Name} = St, <<"</", _/binary>> = Bin) ->
    {Name1, P} = throng_xml_el:name(Bin, 2),
    case Name1 =:= Name andalso binary:at(Bin, throng_xml_el:skip_ws(Bin, P)) =:= $> of
        true -> {St#st{phase = closed}, [stream_end]};
        false -> throw(throng_xml_el:nwf(<<"mismatched stream end tag">>))
    end;
unit_events(#st{phase = stream, max_depth = MaxDepth} = St, Bin) ->
    {El, _} = complete(throng_xml_el:parse_el(Bin, MaxDepth), Bin),
    {St, [stanza_event(St, El, byte_size(Bin))]};
unit_events(St, Bin) ->
    {{Name, Attrs0, Empty}, _} = complete(throng_xml_el:start_tag(Bin), Bin),
    Attrs = [{binary:copy(K), binary:copy(V)} || {K, V} <- Attrs0],
    Start = {stream_start, binary:copy(Name), Attrs},
    case Empty of
        true -> {St#st{phase = closed}, [stream_end, Start]};
        false -> {St#st{phase = stream, name = binary:copy(Name)}, [Start]}
    end.

complete({_, Len} = Result, Bin) when Len =:= byte_size(Bin) -> Result;
complete(_, _) -> throw(throng_xml_el:nwf(<<"malformed markup">>)).

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
            {error, P + 1, 'restricted-xml', throng_xml_el:bang_text(N, C)}
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
