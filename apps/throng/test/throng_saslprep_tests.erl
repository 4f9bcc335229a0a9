%% @doc RFC 4013 SASLprep: the RFC's §3 examples, every mapping and
%% prohibition table of RFC 3454 it uses, the bidi rule, and properties.
-module(throng_saslprep_tests).

-include_lib("eunit/include/eunit.hrl").

-include("throng_proper.hrl").

prep(Chars) -> throng_saslprep:prepare(unicode:characters_to_binary(Chars)).

%% RFC 4013 §3, examples 1 to 7.
rfc4013_examples_test_() ->
    [?_assertEqual({ok, <<"IX">>}, prep([$I, 16#AD, $X])),         % soft hyphen -> nothing
     ?_assertEqual({ok, <<"user">>}, prep("user")),                % no transformation
     ?_assertEqual({ok, <<"USER">>}, prep("USER")),                % case preserved
     ?_assertEqual({ok, <<"a">>}, prep([16#AA])),                  % NFKC
     ?_assertEqual({ok, <<"IX">>}, prep([16#2168])),               % NFKC
     ?_assertEqual(error, prep([7])),                              % prohibited
     ?_assertEqual(error, prep([16#627, $1]))].                    % bidi

ascii_test_() ->
    Printable = list_to_binary(lists:seq(16#20, 16#7E)),
    [?_assertEqual({ok, Printable}, throng_saslprep:prepare(Printable)),
     ?_assertEqual({ok, <<>>}, throng_saslprep:prepare(<<>>)),
     ?_assertEqual({ok, <<" pass word ">>}, throng_saslprep:prepare(<<" pass word ">>))]
        ++ [?_assertEqual(error, throng_saslprep:prepare(<<"ab", C, "cd">>))
            || C <- lists:seq(0, 16#1F) ++ [16#7F]]
        %% A control character fails even when non-ASCII follows.
        ++ [?_assertEqual(error, prep([$a, 0, 16#E9]))].

not_utf8_test_() ->
    [?_assertEqual(error, throng_saslprep:prepare(B))
     || B <- [<<16#FF>>, <<"caf", 16#E9>>, <<16#C3>>, <<16#ED, 16#A0, 16#80>>]].

%% Table C.1.2 maps to SPACE; table B.1 maps to nothing (including U+200B,
%% which is in both).
mapping_test_() ->
    [?_assertEqual({ok, <<"a b">>}, prep([$a, Space, $b]))
     || Space <- [16#A0, 16#1680, 16#2000, 16#2005, 16#200A, 16#202F, 16#205F, 16#3000]]
        ++ [?_assertEqual({ok, <<"ab">>}, prep([$a, Nothing, $b]))
            || Nothing <- [16#AD, 16#34F, 16#1806, 16#180B, 16#180D, 16#200B, 16#200C,
                           16#200D, 16#2060, 16#FE00, 16#FE0F, 16#FEFF]]
        ++ [?_assertEqual({ok, <<>>}, prep([16#AD, 16#FEFF]))].

nfkc_test_() ->
    [?_assertEqual({ok, <<"full">>}, prep([16#FF46, 16#FF55, 16#FF4C, 16#FF4C])),
     ?_assertEqual({ok, <<"fi">>}, prep([16#FB01])),
     ?_assertEqual({ok, <<16#E9/utf8>>}, prep([$e, 16#301])),
     ?_assertEqual({ok, <<"Å"/utf8>>}, prep([16#212B]))].

%% One or more characters from each prohibition table SASLprep uses.
prohibited_test_() ->
    Samples = [16#80, 16#9F,                                        % C.2.2
               16#6DD, 16#70F, 16#180E, 16#2028, 16#2029, 16#2061, 16#206A, 16#FFF9,
               16#1D173, 16#1D17A,
               16#E000, 16#F8FF, 16#F0000, 16#FFFFD, 16#100000, 16#10FFFD, % C.3
               16#FDD0, 16#FDEF, 16#FFFE, 16#FFFF, 16#1FFFE, 16#10FFFF,   % C.4
               16#FFFA, 16#FFFD,                                    % C.6
               16#2FF0, 16#2FFB,                                    % C.7
               16#200E, 16#200F, 16#202A, 16#202E, 16#206F,         % C.8
               16#E0001, 16#E0020, 16#E007F],                       % C.9
    [{io_lib:format("U+~.16B", [C]), ?_assertEqual(error, prep([$a, C, $b]))}
     || C <- Samples].

%% U+0340 and U+0341 are in C.8 but NFKC turns them into U+0300 and U+0301
%% before the prohibition step (RFC 3454 §3 order), so they pass.
normalized_before_prohibition_test_() ->
    [?_assertEqual({ok, <<16#E0/utf8>>}, prep([$a, 16#340])),
     ?_assertEqual({ok, <<16#E1/utf8>>}, prep([$a, 16#341]))].

%% Neighbours of prohibited ranges are allowed.
allowed_neighbours_test_() ->
    [?_assertMatch({ok, _}, prep([$a, C, $b]))
     || C <- [16#A1, 16#DFF, 16#F900, 16#FDCF, 16#2FFC, 16#E0000, 16#E0080]]
        ++ [?_assertMatch({ok, _}, prep([16#FDF0]))].   % RandAL: alone

%% Unassigned code points (in Unicode 3.2) are allowed: "query" rules.
unassigned_test_() ->
    [?_assertEqual({ok, <<16#221/utf8>>}, prep([16#221])),
     ?_assertEqual({ok, <<"x", 16#50000/utf8>>}, prep([$x, 16#50000]))].

%% RFC 3454 §6.
bidi_test_() ->
    Alef = 16#627, Beh = 16#628, Shin = 16#5E9,
    [?_assertMatch({ok, _}, prep([Alef, Beh])),
     ?_assertMatch({ok, _}, prep([Shin])),
     ?_assertMatch({ok, _}, prep([Alef, $1, $2, Beh])),              % digits are neither
     ?_assertMatch({ok, _}, prep([Alef, $\s, Beh])),
     ?_assertMatch({ok, _}, prep("abc 123")),
     ?_assertEqual(error, prep([$1, Alef])),                         % must start RandAL
     ?_assertEqual(error, prep([Alef, $1])),                         % must end RandAL
     ?_assertEqual(error, prep([Alef, $a, Beh])),                    % no LCat with RandAL
     ?_assertEqual(error, prep([Alef, 16#E9, Beh])),                 % é is LCat
     ?_assertEqual(error, prep([Alef, 16#10400, Beh])),              % Deseret, LCat
     ?_assertEqual(error, prep([Alef, 16#200F, Beh]))].              % RLM: C.8

%%% Properties

%% Random strings mixing ASCII, Latin, Arabic, Hebrew, spaces, table B.1 and
%% prohibited characters.
text() ->
    proper_types:list(
      proper_types:frequency(
        [{6, proper_types:range(16#20, 16#7E)},
         {2, proper_types:range(16#A0, 16#2FF)},
         {1, proper_types:elements([16#AD, 16#200B, 16#FEFF, 16#A0, 16#3000, 16#2168,
                                    16#FB01, 16#301, 16#212B, 7, 16#E000, 16#FFFD])},
         {1, proper_types:range(16#5D0, 16#5EA)},
         {1, proper_types:range(16#621, 16#63A)},
         {1, proper_types:range(16#4E00, 16#4E40)}])).

prop_idempotent() ->
    ?FORALL(Chars, text(),
            case prep(Chars) of
                {ok, Out} -> throng_saslprep:prepare(Out) =:= {ok, Out};
                error -> true
            end).

%% Output is valid UTF-8 in NFKC, with no prohibited or mapped characters.
prop_output_is_clean() ->
    ?FORALL(Chars, text(),
            case prep(Chars) of
                {ok, Out} ->
                    OutChars = unicode:characters_to_list(Out),
                    OutChars =:= unicode:characters_to_nfkc_list(OutChars)
                        andalso not lists:any(fun(C) ->
                                                      C < 16#20 orelse C =:= 16#7F
                                                          orelse lists:member(
                                                                   C, [16#AD, 16#200B, 16#FEFF,
                                                                       16#A0, 16#3000, 16#E000,
                                                                       16#FFFD])
                                              end, OutChars);
                error ->
                    true
            end).

%% Printable ASCII is always returned unchanged.
prop_printable_ascii_unchanged() ->
    ?FORALL(Bin, ?BIND(L, proper_types:list(proper_types:range(16#20, 16#7E)),
                       list_to_binary(L)),
            throng_saslprep:prepare(Bin) =:= {ok, Bin}).

properties_test_() ->
    [{Name, {timeout, 30,
             ?_assert(proper:quickcheck(Prop(), [{numtests, 1000}, {to_file, user}]))}}
     || {Name, Prop} <- [{"idempotent", fun prop_idempotent/0},
                         {"output is clean", fun prop_output_is_clean/0},
                         {"printable ASCII unchanged", fun prop_printable_ascii_unchanged/0}]].
