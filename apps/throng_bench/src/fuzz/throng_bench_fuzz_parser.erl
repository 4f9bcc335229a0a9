%% @doc The parser-level oracle: one input through Throng's stream parser
%% (throng_xml_stream, throng_xml_el), in-process.
%%
%% A failure is:
%% <ul>
%% <li>`crash': parse/2 raised an exception;</li>
%% <li>`bad_event': an event outside the documented type (a stanza that is
%%   not a tree of #xmlel{} and cdata with binary names and attributes, an
%%   error condition that is not an RFC 6120 stream error);</li>
%% <li>`events_after_error': events after an error, or after the stream end
%%   (the state must be dead);</li>
%% <li>`chunking_differs': the events of the chunked input differ from those
%%   of the same bytes in one piece (the parser promises the same result, the
%%   first error in document order, however the input is cut). Allowed: one
%%   side reports a final error that the other, still holding an incomplete
%%   stanza, has not reached yet.</li>
%% </ul>
%% A parse that does not return (a loop) is caught by the caller, which runs
%% inputs in a process it can kill ({@link throng_bench_fuzz}).
%%
%% With fast_xml at hand the same bytes are also given to fxml_stream, and a
%% disagreement is counted (not a failure: fast_xml is laxer or stricter in
%% places, e.g. it allows comments and DTDs, which XMPP forbids):
%% `fxml_rejects' (Throng accepts every stanza, fast_xml reports an error),
%% `fxml_differs' (both accept, the stanzas differ).
-module(throng_bench_fuzz_parser).

-export([check/2]).

-export_type([verdict/0]).

-type verdict() :: ok | {ok, fxml_rejects | fxml_differs} | {fail, atom(), term()}.

-define(CONDITIONS, ['bad-format', 'bad-namespace-prefix', 'conflict', 'connection-timeout',
                     'host-gone', 'host-unknown', 'improper-addressing', 'internal-server-error',
                     'invalid-from', 'invalid-namespace', 'invalid-xml', 'not-authorized',
                     'not-well-formed', 'policy-violation', 'remote-connection-failed', 'reset',
                     'resource-constraint', 'restricted-xml', 'see-other-host', 'system-shutdown',
                     'undefined-condition', 'unsupported-encoding', 'unsupported-feature',
                     'unsupported-stanza-type', 'unsupported-version']).

%% @doc The verdict on one input's chunks; Fxml: compare with fast_xml.
-spec check([binary()], boolean()) -> verdict().
check(Chunks, Fxml) ->
    try
        {Chunked, StC} = feed(Chunks),
        {Whole, StW} = feed([iolist_to_binary(Chunks)]),
        case {valid(Chunked), same(Chunked, StC, Whole, StW)} of
            {{bad, What, Ev}, _} -> {fail, What, Ev};
            {ok, false} -> {fail, chunking_differs, {Chunked, Whole}};
            {ok, true} when Fxml -> fxml(iolist_to_binary(Chunks), Whole);
            {ok, true} -> ok
        end
    catch
        Class:Reason:Stack -> {fail, crash, {Class, Reason, lists:sublist(Stack, 8)}}
    end.

feed(Chunks) ->
    St0 = throng_xml_stream:new(#{}),
    {Evs, St} = lists:foldl(fun(C, {Acc, St1}) ->
                                    {Evs, St2} = throng_xml_stream:parse(St1, C),
                                    {[Evs | Acc], St2}
                            end, {[], St0}, Chunks),
    {lists:append(lists:reverse(Evs)), St}.

%% The same events; or one side found an error the other has not reached
%% because it still waits for the end of the unit that holds it (the scanner
%% of a cut stanza only checks markup when the stanza is complete; a whole
%% chunk is parsed at once): the events before it are the same, and the
%% other side holds an incomplete unit.
same(Evs, _, Evs, _) -> true;
same(A, StA, B, StB) ->
    pending_error(A, StA, B) orelse pending_error(B, StB, A).

pending_error(Short, StShort, Long) ->
    case lists:last([none | Long]) of
        {error, _, _} ->
            lists:droplast(Long) =:= Short andalso throng_xml_stream:buffered(StShort) > 0;
        _ -> false
    end.

valid([]) -> ok;
valid([{error, Cond, Text} | Rest]) when is_binary(Text) ->
    case {lists:member(Cond, ?CONDITIONS), Rest} of
        {true, []} -> ok;
        {false, _} -> {bad, bad_event, {error, Cond, Text}};
        {true, _} -> {bad, events_after_error, Rest}
    end;
valid([stream_end]) -> ok;
valid([stream_end | Rest]) -> {bad, events_after_error, Rest};
valid([{stream_start, Name, Attrs} = Ev | Rest]) ->
    case is_binary(Name) andalso attrs(Attrs) of
        true -> valid(Rest);
        false -> {bad, bad_event, Ev}
    end;
valid([{stanza, El} = Ev | Rest]) ->
    case el(El) of
        true -> valid(Rest);
        false -> {bad, bad_event, Ev}
    end;
valid([Ev | _]) ->
    {bad, bad_event, Ev}.

el({xmlel, Name, Attrs, Children}) when is_binary(Name), Name =/= <<>>, is_list(Children) ->
    attrs(Attrs) andalso lists:all(fun({xmlcdata, B}) -> is_binary(B);
                                      (C) -> el(C)
                                   end, Children);
el(_) -> false.

attrs(Attrs) when is_list(Attrs) ->
    lists:all(fun({K, V}) -> is_binary(K) andalso K =/= <<>> andalso is_binary(V);
                 (_) -> false
              end, Attrs);
attrs(_) -> false.

%%% fast_xml

fxml(Bytes, Ours) ->
    case [E || {error, _, _} = E <- Ours] of
        [_ | _] -> ok;                       % Throng rejects: nothing to compare
        [] ->
            case fxml_events(Bytes) of
                unavailable -> ok;
                {error, _} -> {ok, fxml_rejects};
                {ok, Theirs} ->
                    case [norm(E) || {stanza, E} <- Ours] =:= [norm(E) || E <- Theirs] of
                        true -> ok;
                        false -> {ok, fxml_differs}
                    end
            end
    end.

fxml_events(Bytes) ->
    try fxml_stream:new(self(), infinity, [no_gen_server]) of
        St0 ->
            St1 = fxml_stream:parse(St0, Bytes),
            _ = fxml_stream:close(St1),
            collect([])
    catch
        error:_ -> unavailable
    end.

collect(Acc) ->
    receive
        {xmlstreamstart, _, _} -> collect(Acc);
        {xmlstreamend, _} -> collect(Acc);
        {xmlstreamelement, El} -> collect([El | Acc]);
        {xmlstreamerror, E} -> flush(), {error, E}
    after 0 ->
        {ok, lists:reverse(Acc)}
    end.

flush() ->
    receive
        {xmlstreamstart, _, _} -> flush();
        {xmlstreamend, _} -> flush();
        {xmlstreamelement, _} -> flush();
        {xmlstreamerror, _} -> flush()
    after 0 -> ok
    end.

%% Adjacent cdata merged, empty cdata dropped (the parsers split text
%% differently), attributes sorted.
norm({xmlel, Name, Attrs, Children}) ->
    {xmlel, Name, lists:sort(Attrs), merge([norm(C) || C <- Children])};
norm(C) -> C.

merge([{xmlcdata, A}, {xmlcdata, B} | Rest]) -> merge([{xmlcdata, <<A/binary, B/binary>>} | Rest]);
merge([{xmlcdata, <<>>} | Rest]) -> merge(Rest);
merge([X | Rest]) -> [X | merge(Rest)];
merge([]) -> [].
