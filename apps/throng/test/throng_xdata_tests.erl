%% @doc XEP-0004 data forms (throng_xdata): the forms built, and the values
%% read from a submission, with the malformed cases.
-module(throng_xdata_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

-define(NS, <<"jabber:x:data">>).

cmd(Children) ->
    #xmlel{name = <<"command">>, attrs = [{<<"xmlns">>, <<"http://jabber.org/protocol/commands">>}],
           children = Children}.

x(Type, Fields) ->
    #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, ?NS}, {<<"type">>, Type}],
           children = [#xmlel{name = <<"field">>, attrs = [{<<"var">>, V} || V =/= none],
                              children = [#xmlel{name = <<"value">>, children = [{xmlcdata, X}]}
                                          || X <- Xs]}
                       || {V, Xs} <- Fields]}.

%% A form carries its type, title, instructions, and each field's var, type,
%% label, required flag, values and options, in XEP-0004's shape.
form_shape_test() ->
    F = throng_xdata:form(<<"Adding a User">>, <<"Fill out this form.">>,
                          [#{var => <<"FORM_TYPE">>, type => <<"hidden">>,
                             values => [<<"http://jabber.org/protocol/admin">>]},
                           #{var => <<"accountjid">>, type => <<"jid-single">>,
                             label => <<"The Jabber ID">>, required => true},
                           #{var => <<"max_items">>, type => <<"list-single">>,
                             options => [{<<"25">>, <<"25">>}, {<<"None">>, <<"none">>}]}]),
    ?assertEqual(<<"x">>, F#xmlel.name),
    ?assertEqual(?NS, throng_xml:ns(F)),
    ?assertEqual(<<"form">>, throng_xml:attr(<<"type">>, F)),
    ?assertEqual(<<"Adding a User">>, throng_xml:subel_cdata(F, <<"title">>)),
    ?assertEqual(<<"Fill out this form.">>, throng_xml:subel_cdata(F, <<"instructions">>)),
    [Hidden, Jid, Max] = [E || #xmlel{name = <<"field">>} = E <- throng_xml:subels(F)],
    ?assertEqual(<<"http://jabber.org/protocol/admin">>, throng_xml:subel_cdata(Hidden, <<"value">>)),
    ?assertEqual([{<<"var">>, <<"accountjid">>}, {<<"type">>, <<"jid-single">>},
                  {<<"label">>, <<"The Jabber ID">>}], Jid#xmlel.attrs),
    ?assertNotEqual(undefined, throng_xml:subel(Jid, <<"required">>)),
    ?assertEqual(undefined, throng_xml:subel(Max, <<"required">>)),
    ?assertEqual([{<<"25">>, <<"25">>}, {<<"None">>, <<"none">>}],
                 [{throng_xml:attr(<<"label">>, O), throng_xml:subel_cdata(O, <<"value">>)}
                  || O <- throng_xml:subels(Max)]).

%% Empty title and instructions are left out; a result is type "result".
result_shape_test() ->
    R = throng_xdata:result(<<>>, [#{var => <<"onlineusersnum">>, values => [<<"3">>]}]),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    ?assertEqual(undefined, throng_xml:subel(R, <<"title">>)),
    ?assertEqual([<<"field">>], [E#xmlel.name || E <- throng_xml:subels(R)]),
    F = throng_xdata:form(<<>>, <<>>, []),
    ?assertEqual([], F#xmlel.children).

%% A submitted form is read into var => values; fields without a var are
%% skipped.
parse_submit_test() ->
    C = cmd([x(<<"submit">>, [{<<"accountjid">>, [<<"juliet@localhost">>]},
                              {<<"announcement">>, [<<"line 1">>, <<"line 2">>]},
                              {<<"empty">>, []}, {none, [<<"fixed text">>]}])]),
    {ok, V} = throng_xdata:parse(C),
    ?assertEqual(#{<<"accountjid">> => [<<"juliet@localhost">>],
                   <<"announcement">> => [<<"line 1">>, <<"line 2">>],
                   <<"empty">> => []}, V),
    ?assertEqual(<<"juliet@localhost">>, throng_xdata:value(<<"accountjid">>, V)),
    ?assertEqual(undefined, throng_xdata:value(<<"empty">>, V)),
    ?assertEqual(undefined, throng_xdata:value(<<"absent">>, V)),
    ?assertEqual(<<"line 1\nline 2">>, throng_xdata:text(<<"announcement">>, V)),
    ?assertEqual(<<>>, throng_xdata:text(<<"absent">>, V)).

%% XEP-0050 §3.5.1: a form of type cancel counts as a submission.
parse_cancel_as_submit_test() ->
    ?assertEqual({ok, #{<<"a">> => [<<"1">>]}},
                 throng_xdata:parse(cmd([x(<<"cancel">>, [{<<"a">>, [<<"1">>]}])]))).

%% No form, a form that is not a submission, a var given twice.
parse_errors_test() ->
    ?assertEqual(none, throng_xdata:parse(cmd([]))),
    ?assertEqual(none, throng_xdata:parse(cmd([#xmlel{name = <<"x">>,
                                                      attrs = [{<<"xmlns">>, <<"other">>}]}]))),
    ?assertEqual({error, not_submit}, throng_xdata:parse(cmd([x(<<"form">>, [])]))),
    ?assertEqual({error, not_submit}, throng_xdata:parse(cmd([x(<<"result">>, [])]))),
    ?assertEqual({error, duplicate_field},
                 throng_xdata:parse(cmd([x(<<"submit">>, [{<<"a">>, [<<"1">>]},
                                                          {<<"a">>, [<<"2">>]}])]))).

%% values/2 drops empty values (a client's blank line in a jid-multi).
multi_values_test() ->
    V = #{<<"accountjids">> => [<<"a@localhost">>, <<>>, <<"b@localhost">>]},
    ?assertEqual([<<"a@localhost">>, <<"b@localhost">>], throng_xdata:values(<<"accountjids">>, V)),
    ?assertEqual([], throng_xdata:values(<<"absent">>, V)).

%% What a form is built from survives the round trip through a submission.
round_trip_test() ->
    Fields = [{<<"v", (integer_to_binary(I))/binary>>, [integer_to_binary(I * J) || J <- lists:seq(1, I)]}
              || I <- lists:seq(1, 5)],
    {ok, V} = throng_xdata:parse(cmd([x(<<"submit">>, Fields)])),
    ?assertEqual(maps:from_list(Fields), V).

%% fields/1 reads an <x/> as it comes: any type, in order, a var given twice
%% and a field without one kept.
fields_test() ->
    X = x(<<"form">>, [{<<"a">>, [<<"1">>]}, {none, [<<"fixed">>]}, {<<"a">>, [<<"2">>, <<"3">>]},
                       {<<"b">>, []}]),
    ?assertEqual([{<<"a">>, [<<"1">>]}, {undefined, [<<"fixed">>]}, {<<"a">>, [<<"2">>, <<"3">>]},
                  {<<"b">>, []}], throng_xdata:fields(X)),
    ?assertEqual([], throng_xdata:fields(x(<<"submit">>, []))).
