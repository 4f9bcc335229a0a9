%% @doc The fuzzer's inputs: valid client sessions, mutated, cut into chunks.
%% Pure: input N of seed S is always the same bytes, the same chunks and the
%% same pauses (its random state is seeded from {S, N, kind}), so an input is
%% named by its seed and number and never needs to be stored to be replayed.
%%
%% A session is a list of elements as a client sends them: the stream
%% header, optionally STARTTLS, SASL (PLAIN, or the first SCRAM message),
%% the restarted stream, resource binding, the session request, presence,
%% messages, roster and other IQs, XEP-0198 (enable, r, a) and the stream
%% end. The mutations (one to four per input):
%% <ul>
%% <li>byte level: flip bits, insert bytes or XML tokens, delete a range,
%%   duplicate a range, truncate;</li>
%% <li>element level: drop, duplicate, swap two elements, splice an element
%%   into another (at a random byte), repeat one many times;</li>
%% <li>size: a huge attribute or text, deep nesting, many attributes.</li>
%% </ul>
%% Then the bytes are cut at random boundaries (one chunk, single bytes,
%% random sizes) with, for a few inputs, pauses between the chunks (slow
%% writes).
-module(throng_bench_fuzz_gen).

-export([input/4, session/2, mutate/2, chunk/2]).
%% API used by tests: the parts of an input.
-ignore_xref([{session, 2}, {mutate, 2}, {chunk, 2}]).

-export_type([kind/0, ctx/0, input/0]).

-type kind() :: parser | socket.
%% The accounts the sessions log in as: userN@domain, N in 1..users.
-type ctx() :: #{domain := binary(), users := pos_integer(), password := binary()}.
-type input() :: #{seed := integer(), index := non_neg_integer(), kind := kind(),
                   chunks := [binary()], pauses := [non_neg_integer()],
                   mutations := [atom()]}.

-define(MUTATIONS, [flip, insert, token, delete, duplicate, truncate, drop_el, dup_el, swap_el,
                    splice_el, repeat_el, huge_attr, huge_text, deep, many_attrs]).

%% @doc Input Index of Seed. Parser inputs have no pauses (an empty list);
%% socket inputs pause between chunks in about one case in fifty (at most
%% 200 ms in all).
-spec input(kind(), integer(), non_neg_integer(), ctx()) -> input().
input(Kind, Seed, Index, Ctx) ->
    R0 = rand:seed_s(exsss, {Seed, Index, erlang:phash2(Kind)}),
    {Els, R1} = session(R0, Ctx),
    {N, R2} = rand:uniform_s(4, R1),
    {Bytes, Muts, R3} = mutate_n(N, Els, [], R2),
    {Chunks, R4} = chunk(R3, Bytes),
    {Pauses, _} = case Kind of
                      socket -> pauses(length(Chunks), R4);
                      parser -> {[], R4}
                  end,
    #{seed => Seed, index => Index, kind => Kind, chunks => Chunks, pauses => Pauses,
      mutations => lists:reverse(Muts)}.

mutate_n(0, Els, Muts, R) ->
    {iolist_to_binary(Els), Muts, R};
mutate_n(N, Els, Muts, R0) ->
    {Els1, M, R1} = mutate(R0, Els),
    mutate_n(N - 1, Els1, [M | Muts], R1).

%% @doc A valid client session as a list of elements (binaries).
-spec session(rand:state(), ctx()) -> {[binary()], rand:state()}.
session(R0, #{domain := D, users := Users, password := Pw}) ->
    {U, R1} = rand:uniform_s(Users, R0),
    User = <<"user", (integer_to_binary(U))/binary>>,
    Header = <<"<?xml version='1.0'?><stream:stream to='", D/binary, "' xmlns='jabber:client' "
               "xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>">>,
    {TlsP, R2} = rand:uniform_s(R1),
    %% Over a socket STARTTLS ends the plain-text part (what follows is
    %% meant for TLS); the parser sees it as one more element.
    Tls = case TlsP < 0.05 of
              true -> [<<"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>">>];
              false -> []
          end,
    {Scram, R3} = rand:uniform_s(R2),
    Auth = case Scram < 0.15 of
               true ->
                   [<<"<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='SCRAM-SHA-1'>",
                      (base64:encode(<<"n,,n=", User/binary, ",r=fyko+d2lbbFgONRv9qkxdawL">>))/binary,
                      "</auth>">>];
               false ->
                   [<<"<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>",
                      (base64:encode(<<0, User/binary, 0, Pw/binary>>))/binary, "</auth>">>]
           end,
    {Peer, R4} = rand:uniform_s(Users, R3),
    To = <<"user", (integer_to_binary(Peer))/binary, "@", D/binary>>,
    Body = [<<"<iq type='set' id='b1'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'>"
              "<resource>fuzz</resource></bind></iq>">>,
            <<"<iq type='set' id='s1'><session xmlns='urn:ietf:params:xml:ns:xmpp-session'/></iq>">>,
            <<"<enable xmlns='urn:xmpp:sm:3' resume='true'/>">>,
            <<"<iq type='get' id='r1'><query xmlns='jabber:iq:roster'/></iq>">>,
            <<"<presence><show>chat</show><status>fuzz &amp; &lt;test&gt;</status>"
              "<priority>5</priority></presence>">>,
            <<"<message to='", To/binary, "' type='chat' id='m1'><body>hello &#x263A; "
              "<![CDATA[<raw>]]></body></message>">>,
            <<"<iq type='get' id='d1' to='", D/binary, "'><query "
              "xmlns='http://jabber.org/protocol/disco#info'/></iq>">>,
            <<"<iq type='get' id='p1'><ping xmlns='urn:xmpp:ping'/></iq>">>,
            <<"<r xmlns='urn:xmpp:sm:3'/>">>,
            <<"<a xmlns='urn:xmpp:sm:3' h='1'/>">>,
            <<"<presence type='subscribe' to='", To/binary, "'/>">>,
            <<"<iq type='set' id='r2'><query xmlns='jabber:iq:roster'><item jid='", To/binary,
              "' name='peer'><group>fuzz</group></item></query></iq>">>,
            <<"<message to='", To/binary, "' type='normal'><subject>s</subject>"
              "<thread>t1</thread><body>second</body></message>">>,
            <<"<presence type='unavailable'/>">>,
            <<" ">>,
            <<"</stream:stream>">>],
    {[Header | Tls] ++ Auth ++ [Header | Body], R4}.

%% @doc One mutation of a list of elements: the new list and its name.
-spec mutate(rand:state(), [binary()]) -> {[binary()], atom(), rand:state()}.
mutate(R0, Els) ->
    {I, R1} = rand:uniform_s(length(?MUTATIONS), R0),
    M = lists:nth(I, ?MUTATIONS),
    {Els1, R2} = mutate(M, R1, Els),
    {Els1, M, R2}.

mutate(flip, R0, Els) ->
    bytes(R0, Els, fun(B, R) ->
                           {P, R1} = pos(B, R),
                           {Bit, R2} = rand:uniform_s(8, R1),
                           <<Pre:P/binary, C, Post/binary>> = pad(B),
                           {<<Pre/binary, (C bxor (1 bsl (Bit - 1))), Post/binary>>, R2}
                   end);
mutate(insert, R0, Els) ->
    bytes(R0, Els, fun(B, R) ->
                           {P, R1} = pos(B, R),
                           {N, R2} = rand:uniform_s(8, R1),
                           {Ins, R3} = random_bytes(N, R2),
                           {insert_at(B, P, Ins), R3}
                   end);
mutate(token, R0, Els) ->
    Tokens = [<<"<">>, <<">">>, <<"&">>, <<"&amp;">>, <<"&#0;">>, <<"&#x110000;">>, <<"&bogus;">>,
              <<"]]>">>, <<"<![CDATA[">>, <<"<!--">>, <<"-->">>, <<"<?xml?>">>, <<"<!DOCTYPE x>">>,
              <<"<!ENTITY a 'b'>">>, <<"'">>, <<"\"">>, <<"=">>, <<"/>">>, <<"</">>, <<":">>,
              <<"xmlns='x'">>, <<"xmlns:p='urn:p'">>, <<"p:">>, <<"</stream:stream>">>,
              <<"<stream:stream>">>, <<0>>, <<16#FF>>, <<16#C0, 16#80>>, <<16#EF, 16#BB, 16#BF>>,
              <<16#ED, 16#A0, 16#80>>, <<16#F4, 16#90, 16#80, 16#80>>, <<"\r\n">>, <<"\t">>,
              <<"<x/>">>, <<"<x>">>, <<"</x>">>, <<"a='1' a='2'">>],
    bytes(R0, Els, fun(B, R) ->
                           {P, R1} = pos(B, R),
                           {T, R2} = rand:uniform_s(length(Tokens), R1),
                           {insert_at(B, P, lists:nth(T, Tokens)), R2}
                   end);
mutate(delete, R0, Els) ->
    bytes(R0, Els, fun(B, R) ->
                           {P, R1} = pos(B, R),
                           {N, R2} = rand:uniform_s(16, R1),
                           Len = min(N, byte_size(B) - P),
                           <<Pre:P/binary, _:Len/binary, Post/binary>> = B,
                           {<<Pre/binary, Post/binary>>, R2}
                   end);
mutate(duplicate, R0, Els) ->
    bytes(R0, Els, fun(B, R) ->
                           {P, R1} = pos(B, R),
                           {N, R2} = rand:uniform_s(32, R1),
                           Len = min(N, byte_size(B) - P),
                           Part = binary:part(B, P, Len),
                           {insert_at(B, P, Part), R2}
                   end);
mutate(truncate, R0, Els) ->
    All = iolist_to_binary(Els),
    {P, R1} = pos(All, R0),
    {[binary:part(All, 0, P)], R1};
mutate(drop_el, R0, Els) when length(Els) > 1 ->
    {I, R1} = rand:uniform_s(length(Els), R0),
    {delete_nth(I, Els), R1};
mutate(dup_el, R0, Els) ->
    {I, R1} = rand:uniform_s(length(Els), R0),
    {insert_nth(I, lists:nth(I, Els), Els), R1};
mutate(swap_el, R0, Els) when length(Els) > 1 ->
    {I, R1} = rand:uniform_s(length(Els), R0),
    {J, R2} = rand:uniform_s(length(Els), R1),
    A = lists:nth(I, Els), B = lists:nth(J, Els),
    {set_nth(J, A, set_nth(I, B, Els)), R2};
mutate(splice_el, R0, Els) ->
    {I, R1} = rand:uniform_s(length(Els), R0),
    {J, R2} = rand:uniform_s(length(Els), R1),
    Target = lists:nth(J, Els),
    {P, R3} = pos(Target, R2),
    {set_nth(J, insert_at(Target, P, lists:nth(I, Els)), Els), R3};
mutate(repeat_el, R0, Els) ->
    {I, R1} = rand:uniform_s(length(Els), R0),
    El = lists:nth(I, Els),
    {N, R2} = rand:uniform_s(max(1, min(200, 65536 div max(byte_size(El), 1))), R1),
    {insert_nth(I, binary:copy(El, N), Els), R2};
mutate(huge_attr, R0, Els) ->
    {Size, R1} = size_s(R0),
    {I, R2} = rand:uniform_s(length(Els), R1),
    El = <<"<message to='x@y' big='", (binary:copy(<<"A">>, Size))/binary, "'><body>b</body></message>">>,
    {insert_nth(I, El, Els), R2};
mutate(huge_text, R0, Els) ->
    {Size, R1} = size_s(R0),
    {I, R2} = rand:uniform_s(length(Els), R1),
    El = <<"<message><body>", (binary:copy(<<"t&amp;">>, Size div 5 + 1))/binary, "</body></message>">>,
    {insert_nth(I, El, Els), R2};
mutate(deep, R0, Els) ->
    {D, R1} = rand:uniform_s(2000, R0),
    {I, R2} = rand:uniform_s(length(Els), R1),
    {Close, R3} = rand:uniform_s(R2),
    El = [binary:copy(<<"<d>">>, D) | case Close < 0.5 of
                                          true -> [binary:copy(<<"</d>">>, D)];
                                          false -> []
                                      end],
    {insert_nth(I, iolist_to_binary(El), Els), R3};
mutate(many_attrs, R0, Els) ->
    {Many, R1a} = rand:uniform_s(20, R0),
    {N, R1} = rand:uniform_s(case Many of 20 -> 5000; _ -> 100 end, R1a),
    {I, R2} = rand:uniform_s(length(Els), R1),
    Attrs = [[<<" a">>, integer_to_binary(K), <<"='v'">>] || K <- lists:seq(1, N)],
    {insert_nth(I, iolist_to_binary([<<"<presence">>, Attrs, <<"/>">>]), Els), R2};
mutate(_, R, Els) ->
    {Els, R}.

%% A byte-level mutation of one random element.
bytes(R0, Els, F) ->
    {I, R1} = rand:uniform_s(length(Els), R0),
    {El, R2} = F(pad(lists:nth(I, Els)), R1),
    {set_nth(I, El, Els), R2}.

pad(<<>>) -> <<" ">>;
pad(B) -> B.

pos(B, R) ->
    {P, R1} = rand:uniform_s(max(byte_size(B), 1), R),
    {P - 1, R1}.

%% Sizes up to and around the server's limit (max_stanza_size, 256 KiB by
%% default): mostly small, one in twenty near or past the limit.
size_s(R0) ->
    {K, R1} = rand:uniform_s(40, R0),
    {N, R2} = rand:uniform_s(1000, R1),
    {if K =< 30 -> N;
        K =< 38 -> N * 64;
        K =:= 39 -> 262144 - 200 + N div 5;
        true -> 262144 + N * 10
     end, R2}.

random_bytes(N, R0) ->
    lists:foldl(fun(_, {Acc, R}) ->
                        {B, R1} = rand:uniform_s(256, R),
                        {<<Acc/binary, (B - 1)>>, R1}
                end, {<<>>, R0}, lists:seq(1, N)).

insert_at(B, P, Ins) ->
    <<Pre:P/binary, Post/binary>> = B,
    <<Pre/binary, Ins/binary, Post/binary>>.

delete_nth(I, L) -> {A, [_ | B]} = lists:split(I - 1, L), A ++ B.
insert_nth(I, X, L) -> {A, B} = lists:split(I - 1, L), A ++ [X | B].
set_nth(I, X, L) -> {A, [_ | B]} = lists:split(I - 1, L), A ++ [X | B].

%% @doc Cuts bytes into chunks: whole, every byte alone (short inputs), or
%% random sizes (1 to 64 or 1 to 4096 bytes; for big inputs up to 1/128 or
%% 1/16 of the input).
-spec chunk(rand:state(), binary()) -> {[binary()], rand:state()}.
chunk(R0, Bytes) ->
    {How, R1} = rand:uniform_s(10, R0),
    if
        How =< 2 -> {[Bytes], R1};
        How =:= 3, byte_size(Bytes) =< 4096 -> {[<<B>> || <<B>> <= Bytes], R1};
        How =< 7 -> cut(Bytes, max(64, byte_size(Bytes) div 128), R1, []);
        true -> cut(Bytes, max(4096, byte_size(Bytes) div 16), R1, [])
    end.

cut(<<>>, _Max, R, Acc) ->
    {lists:reverse(Acc), R};
cut(Bytes, Max, R0, Acc) ->
    {N, R1} = rand:uniform_s(Max, R0),
    Len = min(N, byte_size(Bytes)),
    <<C:Len/binary, Rest/binary>> = Bytes,
    cut(Rest, Max, R1, [C | Acc]).

pauses(N, R0) ->
    {Slow, R1} = rand:uniform_s(R0),
    case Slow < 0.02 of
        false -> {[0 || _ <- lists:seq(1, N)], R1};
        true ->
            Each = max(1, 200 div max(N, 1)),
            lists:foldr(fun(_, {Acc, R}) ->
                                {P, R2} = rand:uniform_s(min(Each, 20) + 1, R),
                                {[P - 1 | Acc], R2}
                        end, {[], R1}, lists:seq(1, N))
    end.
