%% @doc The values of the PostgreSQL backend as they travel: parameters in
%% PostgreSQL's binary format (arrays of each element type), result columns
%% back to Erlang values, and the text[] literal of roster groups. (The
%% round trip through a real server is storage_SUITE's.)
-module(throng_pgsql_tests).

-include_lib("eunit/include/eunit.hrl").

-import(throng_pgsql, [encode/1, decode/1, groups_literal/1]).

scalars_test() ->
    ?assertEqual(<<"abc">>, encode(<<"abc">>)),
    ?assertEqual(42, encode(42)),
    ?assertEqual(null, encode(null)),
    ?assertEqual(<<1>>, encode(true)),
    ?assertEqual(<<0>>, encode(false)).

%% One dimension, lower bound 1, no NULL flag, the element type's OID.
arrays_test() ->
    ?assertEqual(<<0:32, 0:32, 25:32>>, encode({array, text, []})),
    ?assertEqual(<<1:32, 0:32, 25:32, 2:32, 1:32, 1:32, "a", 0:32>>,
                 encode({array, text, [<<"a">>, <<>>]})),
    ?assertEqual(<<1:32, 0:32, 20:32, 2:32, 1:32, 8:32, -1:64/signed, 8:32, (1 bsl 40):64>>,
                 encode({array, int8, [-1, 1 bsl 40]})),
    ?assertEqual(<<1:32, 0:32, 16:32, 2:32, 1:32, 1:32, 1, 1:32, 0>>,
                 encode({array, bool, [true, false]})),
    ?assertEqual(<<1:32, 0:32, 17:32, 1:32, 1:32, 3:32, 0, 255, 7>>,
                 encode({array, bytea, [<<0, 255, 7>>]})).

columns_test() ->
    ?assertEqual(null, decode(null)),
    ?assertEqual(null, decode({text, null})),
    ?assertEqual(-5, decode({int8, <<"-5">>})),
    ?assertEqual(7, decode({int4, <<"7">>})),
    ?assertEqual(12345678901234567890, decode({numeric, <<"12345678901234567890">>})),
    ?assertEqual(true, decode({bool, <<"1">>})),
    ?assertEqual(false, decode({bool, <<"0">>})),
    ?assertEqual(<<"x">>, decode({text, <<"x">>})),
    ?assertEqual(<<0, 1>>, decode({bytea, <<0, 1>>})),
    ?assertEqual(<<>>, decode({void, <<>>})).

%% A text[] result is read back as the list that was encoded.
text_array_test() ->
    Groups = [<<"a">>, <<>>, <<"Zürich"/utf8>>],
    ?assertEqual(Groups, decode({'_text', encode({array, text, Groups})})),
    ?assertEqual([], decode({'_text', encode({array, text, []})})).

%% Every element quoted; backslash and double quote escaped.
groups_literal_test() ->
    ?assertEqual(<<"{}">>, groups_literal([])),
    ?assertEqual(<<"{\"a\",\"\"}">>, groups_literal([<<"a">>, <<>>])),
    ?assertEqual(<<"{\"x\\\"y\\\\z, {}\"}">>, groups_literal([<<"x\"y\\z, {}">>])).
