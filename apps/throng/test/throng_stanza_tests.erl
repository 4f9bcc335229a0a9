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

%% XEP-0082 stamps in UTC with microseconds; XEP-0203 delays with and
%% without a from, in that attribute order.
stamp_and_delay_test() ->
    T = 1278800905000042,
    ?assertEqual(<<"2010-07-10T22:28:25.000042Z">>, throng_stanza:stamp(T)),
    ?assertEqual(<<"1970-01-01T00:00:00.000000Z">>, throng_stanza:stamp(0)),
    ?assertEqual(<<"<delay xmlns='urn:xmpp:delay' stamp='2010-07-10T22:28:25.000042Z'/>">>,
                 throng_xml:to_binary(throng_stanza:delay(T, undefined))),
    ?assertEqual(<<"<delay xmlns='urn:xmpp:delay' from='localhost'"
                   " stamp='2010-07-10T22:28:25.000042Z'/>">>,
                 throng_xml:to_binary(throng_stanza:delay(T, <<"localhost">>))).

%% XEP-0297: what comes before the stanza, then the stanza with jabber:client
%% spelled out first or last; a namespace it has is kept where it is.
forwarded_test() ->
    M = #xmlel{name = <<"message">>, attrs = [{<<"to">>, <<"b@x">>}],
               children = [#xmlel{name = <<"body">>, children = [{xmlcdata, <<"hi">>}]}]},
    D = throng_stanza:delay(1278800905000000, undefined),
    ?assertEqual(<<"<forwarded xmlns='urn:xmpp:forward:0'><delay xmlns='urn:xmpp:delay'"
                   " stamp='2010-07-10T22:28:25.000000Z'/><message xmlns='jabber:client'"
                   " to='b@x'><body>hi</body></message></forwarded>">>,
                 throng_xml:to_binary(throng_stanza:forwarded([D], M, first))),
    ?assertEqual(<<"<forwarded xmlns='urn:xmpp:forward:0'><message to='b@x'"
                   " xmlns='jabber:client'><body>hi</body></message></forwarded>">>,
                 throng_xml:to_binary(throng_stanza:forwarded([], M, last))),
    Own = M#xmlel{attrs = [{<<"to">>, <<"b@x">>}, {<<"xmlns">>, <<"jabber:server">>}]},
    [First] = (throng_stanza:forwarded([], Own, first))#xmlel.children,
    ?assertEqual(Own, First).
