#!/usr/bin/env escript
%%! -noshell +sbwt none
%%% Throughput of throng_xml_stream against fast_xml's fxml_stream (expat).
%%%
%%% Usage: bench/xml_parser.escript [Seconds]   (from the repository root)
%%%
%%% Compiles throng_xml_stream and throng_xml from apps/throng/src/xml into memory,
%%% so it runs whatever the state of the rest of the tree. For each workload it
%%% builds a stream of stanzas, cuts it into chunks and feeds the chunks to both
%%% parsers, each for about Seconds (default 2; best of five batches);
%%% fxml_stream's time includes taking its events out of the mailbox.
-mode(compile).

main(Args) ->
    Secs = case Args of
               [S] -> list_to_integer(S);
               [] -> 2
           end,
    load_modules(),
    {ok, _} = application:ensure_all_started(fast_xml),
    io:format("~s, ~p scheduler(s), ~p s per measurement~n",
              [erlang:system_info(system_version) -- "\n", erlang:system_info(schedulers), Secs]),
    io:format("~-38s ~7s ~12s ~10s ~10s ~10s ~6s~n",
              ["workload", "bytes", "throng MB/s", "stanzas/s", "fxml MB/s", "stanzas/s", "ratio"]),
    lists:foreach(fun(W) -> run(W, Secs) end, workloads()),
    state_sizes().

load_modules() ->
    Dir = filename:dirname(filename:dirname(filename:absname(escript:script_name()))),
    Src = filename:join([Dir, "apps", "throng", "src", "xml"]),   %% the xml layer
    Inc = filename:join([Dir, "apps", "throng", "include"]),
    lists:foreach(
      fun(M) ->
              File = filename:join(Src, atom_to_list(M) ++ ".erl"),
              {ok, M, Bin} = compile:file(File, [binary, {i, Inc}, report]),
              {module, M} = code:load_binary(M, File, Bin)
      end, [throng_xml, throng_xml_stream]).

header() ->
    <<"<?xml version='1.0'?><stream:stream xmlns='jabber:client' "
      "xmlns:stream='http://etherx.jabber.org/streams' to='example.com' version='1.0'>">>.

%% {Name, Stanza, Count, ChunkSize}: Count stanzas, cut into ChunkSize pieces
%% (one stanza per chunk when ChunkSize is stanza).
workloads() ->
    Msg = message(),
    Pres = presence(),
    Roster = roster(),
    Big = big_message(),
    [{"(a) chat message, 1 per chunk", Msg, 2000, stanza},
     {"(a) chat message, 1460-byte chunks", Msg, 2000, 1460},
     {"(b) presence+caps, 1 per chunk", Pres, 2000, stanza},
     {"(b) presence+caps, 1460-byte chunks", Pres, 2000, 1460},
     {"(c) roster result, 1 per chunk", Roster, 200, stanza},
     {"(c) roster result, 1460-byte chunks", Roster, 200, 1460},
     {"(d) 100 KB message, 1460-byte chunks", Big, 4, 1460},
     {"(d) 100 KB message, 16 KB chunks", Big, 4, 16384}].

message() ->
    <<"<message from='juliet@example.com/balcony' to='romeo@example.net' type='chat' "
      "id='ktx72v49' xml:lang='en'><body>Art thou not Romeo, and a Montague?</body>"
      "<active xmlns='http://jabber.org/protocol/chatstates'/></message>">>.

presence() ->
    <<"<presence from='romeo@example.net/orchard' id='pres-1'>"
      "<c xmlns='http://jabber.org/protocol/caps' hash='sha-1' node='http://psi-im.org' "
      "ver='q07IKJEyjvHSyhy//CH0CxmKi8w='/><priority>5</priority>"
      "<status>Wherefore art thou?</status></presence>">>.

roster() ->
    Items = [io_lib:format("<item jid='contact~b@example.org' name='Contact Number ~b' "
                           "subscription='both'><group>Friends</group></item>", [N, N])
             || N <- lists:seq(1, 18)],
    iolist_to_binary(["<iq type='result' id='roster-1' to='juliet@example.com/balcony'>"
                      "<query xmlns='jabber:iq:roster' ver='ver14'>", Items, "</query></iq>"]).

big_message() ->
    Line = <<"Two households, both alike in dignity &amp; in fair Verona, where we lay our scene.\n">>,
    Body = binary:copy(Line, 100 * 1024 div byte_size(Line)),
    <<"<message from='juliet@example.com/balcony' to='romeo@example.net' type='chat' id='big1'>"
      "<body>", Body/binary, "</body></message>">>.

chunks(Stanza, Count, stanza) ->
    lists:duplicate(Count, Stanza);
chunks(Stanza, Count, Size) ->
    split(binary:copy(Stanza, Count), Size).

split(Bin, Size) when byte_size(Bin) =< Size -> [Bin];
split(Bin, Size) ->
    <<Chunk:Size/binary, Rest/binary>> = Bin,
    [Chunk | split(Rest, Size)].

run({Name, Stanza, Count, ChunkSize}, Secs) ->
    Chunks = chunks(Stanza, Count, ChunkSize),
    Bytes = byte_size(Stanza) * Count,
    %% Both parsers must see the same stanzas.
    Count = throng_round(Chunks),
    Count = fxml_round(Chunks),
    T = measure(fun() -> throng_round(Chunks) end, Secs),
    F = measure(fun() -> fxml_round(Chunks) end, Secs),
    io:format("~-38s ~7b ~12.1f ~10b ~10.1f ~10b ~6.2f~n",
              [Name, byte_size(Stanza), Bytes / T / 1.0e6, round(Count / T),
               Bytes / F / 1.0e6, round(Count / F), F / T]).

%% Seconds per round: the best of five batches that take about Secs in all
%% (the best, because other work on the machine only ever slows a batch).
measure(Fun, Secs) ->
    _ = Fun(),
    Batch = erlang:convert_time_unit(Secs, second, native) div 5,
    lists:min([batch(Fun, Batch) || _ <- lists:seq(1, 5)]).

batch(Fun, Length) ->
    garbage_collect(),
    T0 = erlang:monotonic_time(),
    Rounds = rounds(Fun, T0 + Length, 0),
    erlang:convert_time_unit(erlang:monotonic_time() - T0, native, microsecond) / 1.0e6 / Rounds.

rounds(Fun, Until, N) ->
    _ = Fun(),
    case erlang:monotonic_time() >= Until of
        true -> N + 1;
        false -> rounds(Fun, Until, N + 1)
    end.

throng_round(Chunks) ->
    {[{stream_start, _, _}], S0} = throng_xml_stream:parse(throng_xml_stream:new(#{}), header()),
    throng_feed(Chunks, S0, 0).

throng_feed([C | Cs], S, N) ->
    {Evs, S1} = throng_xml_stream:parse(S, C),
    throng_feed(Cs, S1, N + count(Evs, 0));
throng_feed([], _, N) ->
    N.

count([{stanza, _} | Evs], N) -> count(Evs, N + 1);
count([], N) -> N.

fxml_round(Chunks) ->
    S0 = fxml_stream:parse(fxml_stream:new(self(), infinity), header()),
    receive {'$gen_event', {xmlstreamstart, _, _}} -> ok end,
    S = lists:foldl(fun(C, S1) -> fxml_stream:parse(S1, C) end, S0, Chunks),
    N = drain(0),
    fxml_stream:close(S),
    N.

drain(N) ->
    receive
        {'$gen_event', {xmlstreamelement, _}} -> drain(N + 1)
    after 0 -> N
    end.

%% Memory of idle parsers after the stream header and one stanza.
state_sizes() ->
    N = 2000,
    {[_, _], S} = throng_xml_stream:parse(throng_xml_stream:new(#{}),
                                          <<(header())/binary, (message())/binary>>),
    io:format("~nthrong_xml_stream idle state: ~b words (erts_debug:size)~n", [erts_debug:size(S)]),
    F = fxml_stream:parse(fxml_stream:new(self(), infinity), <<(header())/binary, (message())/binary>>),
    _ = flush(),
    io:format("fxml_stream idle state: ~b words (erts_debug:size; the expat parser lives outside "
              "the heap)~n", [erts_debug:size(F)]),
    fxml_stream:close(F),
    TB = per_parser(N, fun() ->
                               {_, S1} = throng_xml_stream:parse(throng_xml_stream:new(#{}), header()),
                               {_, S2} = throng_xml_stream:parse(S1, message()),
                               S2
                       end),
    FB = per_parser(N, fun() ->
                               F1 = fxml_stream:parse(fxml_stream:new(self(), infinity), header()),
                               fxml_stream:parse(F1, message())
                       end),
    _ = flush(),
    io:format("memory per idle parser (~b parsers, erlang:memory(total) delta): "
              "throng ~b bytes, fxml_stream ~b bytes~n", [N, TB, FB]).

per_parser(N, New) ->
    garbage_collect(),
    M0 = erlang:memory(total),
    Ps = [New() || _ <- lists:seq(1, N)],
    garbage_collect(),
    M1 = erlang:memory(total),
    _ = flush(),
    Bytes = (M1 - M0) div N,
    length(Ps) =:= N andalso Bytes.

flush() ->
    receive _ -> flush() after 0 -> ok end.
