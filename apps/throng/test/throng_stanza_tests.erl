%% @doc Stanza errors (RFC 6120 §8.3) and helpers.
-module(throng_stanza_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

msg() ->
    #xmlel{name = <<"message">>,
           attrs = [{<<"from">>, <<"a@x/r">>}, {<<"to">>, <<"b@x">>}, {<<"id">>, <<"1">>},
                    {<<"type">>, <<"chat">>}],
           children = [#xmlel{name = <<"body">>, children = [{xmlcdata, <<"hi">>}]}]}.

error_reply_test() ->
    E = throng_stanza:error_reply(msg(), 'service-unavailable', <<"gone">>),
    ?assertEqual(<<"b@x">>, throng_xml:attr(<<"from">>, E)),
    ?assertEqual(<<"a@x/r">>, throng_xml:attr(<<"to">>, E)),
    ?assertEqual(<<"error">>, throng_xml:attr(<<"type">>, E)),
    ?assertEqual(<<"1">>, throng_xml:attr(<<"id">>, E)),
    ?assertEqual(<<"hi">>, throng_xml:subel_cdata(E, <<"body">>)),   %% payload kept
    Err = throng_xml:subel(E, <<"error">>),
    ?assertEqual(<<"cancel">>, throng_xml:attr(<<"type">>, Err)),
    ?assertNotEqual(undefined, throng_xml:subel(Err, <<"service-unavailable">>, ?NS_STANZAS)),
    ?assertEqual(<<"gone">>, throng_xml:subel_cdata(Err, <<"text">>)).

error_types_test() ->
    T = fun(C) ->
                Err = throng_xml:subel(throng_stanza:error_reply(msg(), C), <<"error">>),
                throng_xml:attr(<<"type">>, Err)
        end,
    ?assertEqual([<<"modify">>, <<"auth">>, <<"wait">>, <<"cancel">>],
                 [T('bad-request'), T('not-authorized'), T('resource-constraint'), T('item-not-found')]).

iq_result_test() ->
    IQ = #xmlel{name = <<"iq">>, attrs = [{<<"from">>, <<"a@x/r">>}, {<<"to">>, <<"x">>},
                                          {<<"type">>, <<"get">>}, {<<"id">>, <<"7">>}]},
    R = throng_stanza:iq_result(IQ),
    ?assertEqual([{<<"from">>, <<"x">>}, {<<"to">>, <<"a@x/r">>}, {<<"type">>, <<"result">>},
                  {<<"id">>, <<"7">>}], R#xmlel.attrs).

copy_detaches_from_big_binaries_test() ->
    %% Parts longer than 64 bytes are sub-binaries of the buffer they come from.
    Big = list_to_binary([binary:copy(<<"n">>, 100), binary:copy(<<"x">>, 10000)]),
    <<Name:100/binary, _/binary>> = Big,
    El = #xmlel{name = Name, children = [{xmlcdata, Name}]},
    ?assert(binary:referenced_byte_size(El#xmlel.name) >= 10000),
    #xmlel{name = N, children = [{xmlcdata, T}]} = throng_stanza:copy(El),
    ?assertEqual({100, 100}, {binary:referenced_byte_size(N), binary:referenced_byte_size(T)}).

%% An application-specific condition follows the defined condition and the
%% text inside <error/> (RFC 6120 §8.3.2).
error_reply_app_condition_test() ->
    App = #xmlel{name = <<"bad-sessionid">>, attrs = [{<<"xmlns">>, <<"urn:x">>}]},
    Err = throng_xml:subel(throng_stanza:error_reply(msg(), 'bad-request', <<"why">>, App), <<"error">>),
    ?assertEqual(<<"modify">>, throng_xml:attr(<<"type">>, Err)),
    ?assertEqual([<<"bad-request">>, <<"text">>, <<"bad-sessionid">>],
                 [C#xmlel.name || C <- throng_xml:subels(Err)]),
    NoText = throng_xml:subel(throng_stanza:error_reply(msg(), 'bad-request', <<>>, App), <<"error">>),
    ?assertEqual([<<"bad-request">>, <<"bad-sessionid">>], [C#xmlel.name || C <- throng_xml:subels(NoText)]),
    ?assertEqual(throng_stanza:error_reply(msg(), 'bad-request', <<"why">>),
                 throng_stanza:error_reply(msg(), 'bad-request', <<"why">>, [])).
