%% @doc The JSON encoder, against jiffy's decoder.
-module(throng_stats_json_tests).

-include_lib("eunit/include/eunit.hrl").

%% PropEr through its functions (its header is in erlang-proper-dev).
-import(proper_types, [oneof/1, frequency/1, integer/0, float/0, list/1, range/2]).

json_escapes_test() ->
    Bin = <<"a\"b\\c\nd\te", 1, 31, "é☃"/utf8>>,
    ?assertEqual(Bin, jiffy:decode(iolist_to_binary(throng_stats_json:encode(Bin)))).

json_values_test() ->
    ?assertEqual(<<"[true,false,null,null,\"x\",1,-2,0.5]">>,
                 iolist_to_binary(throng_stats_json:encode([true, false, null, undefined, x,
                                                            1, -2, 0.5]))),
    ?assertEqual(<<"{}">>, iolist_to_binary(throng_stats_json:encode(#{}))),
    ?assertEqual(<<"[]">>, iolist_to_binary(throng_stats_json:encode([]))).

json() ->
    proper_types:sized(fun json/1).

json(0) ->
    oneof([true, false, null, integer(), float(), text()]);
json(Size) ->
    frequency([{3, json(0)},
               {1, proper_types:lazy(fun() -> list(json(Size div 3)) end)},
               {1, proper_types:lazy(
                     fun() ->
                             proper_types:bind(list({text(), json(Size div 3)}),
                                               fun maps:from_list/1, false)
                     end)}]).

text() ->
    proper_types:bind(list(oneof([range(0, 16#7F), range(16#80, 16#D7FF),
                                  range(16#E000, 16#10FFFF)])),
                      fun unicode:characters_to_binary/1, false).

prop_json_roundtrip() ->
    proper:forall(json(), fun(T) ->
                                  jiffy:decode(iolist_to_binary(throng_stats_json:encode(T)),
                                               [return_maps]) =:= T
                          end).

json_roundtrip_test_() ->
    {timeout, 60,
     ?_assert(proper:quickcheck(prop_json_roundtrip(), [{numtests, 300}, {to_file, user}]))}.
