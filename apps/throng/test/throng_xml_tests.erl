%%% Tests of throng_xml: serialization, escaping and element accessors.
-module(throng_xml_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

-define(X, throng_xml).

el(Name, Attrs, Children) ->
    #xmlel{name = Name, attrs = Attrs, children = Children}.

message() ->
    el(<<"message">>, [{<<"to">>, <<"romeo@example.net">>}, {<<"type">>, <<"chat">>}],
       [{xmlcdata, <<"\n">>},
        el(<<"body">>, [], [{xmlcdata, <<"Art thou ">>}, {xmlcdata, <<"Romeo?">>}]),
        el(<<"x">>, [{<<"xmlns">>, <<"jabber:x:oob">>}], [el(<<"url">>, [], [])]),
        el(<<"x">>, [{<<"xmlns">>, <<"urn:xmpp:x">>}], []),
        el(<<"subject">>, [], [])]).

%%% Serialization

empty_element_test() ->
    ?assertEqual(<<"<a/>">>, ?X:to_binary(el(<<"a">>, [], []))).

element_with_attributes_and_children_test() ->
    ?assertEqual(<<"<p:a xmlns:p='urn:p' b='1'><c/>text<d e=''>x</d></p:a>">>,
                 ?X:to_binary(el(<<"p:a">>, [{<<"xmlns:p">>, <<"urn:p">>}, {<<"b">>, <<"1">>}],
                                 [el(<<"c">>, [], []), {xmlcdata, <<"text">>},
                                  el(<<"d">>, [{<<"e">>, <<>>}], [{xmlcdata, <<"x">>}])]))).

cdata_test() ->
    ?assertEqual(<<"a &amp; b">>, ?X:to_binary({xmlcdata, <<"a & b">>})).

text_escaping_test() ->
    ?assertEqual(<<"&lt;a&gt; &amp;amp; \"'\t\n&#13;é"/utf8>>,
                 iolist_to_binary(?X:escape_text(<<"<a> &amp; \"'\t\n\ré"/utf8>>))),
    Plain = <<"nothing to escape">>,
    ?assertEqual(Plain, ?X:escape_text(Plain)).

attribute_escaping_test() ->
    ?assertEqual(<<"&lt;&gt;&amp;&quot;&apos;&#9;&#10;&#13; x"/utf8>>,
                 iolist_to_binary(?X:escape_attr(<<"<>&\"'\t\n\r x">>))),
    ?assertEqual(<<"<a b='&apos;&quot;'/>">>,
                 ?X:to_binary(el(<<"a">>, [{<<"b">>, <<"'\"">>}], []))).

to_iolist_is_iodata_test() ->
    ?assertEqual(?X:to_binary(message()), iolist_to_binary(?X:to_iolist(message()))).

%% Whatever the serializer writes, the parser reads back unchanged.
round_trip_test() ->
    El = el(<<"m">>, [{<<"a">>, <<" \t\n\r\r\n<>&'\"é"/utf8>>}],
            [{xmlcdata, <<" \t\n\r\r\n<>&'\"]]>é"/utf8>>}, el(<<"n">>, [], [])]),
    {Evs, _} = throng_xml_stream:parse(throng_xml_stream:new(#{}),
                                       iolist_to_binary(["<s>", ?X:to_iolist(El), "</s>"])),
    ?assertEqual([{stream_start, <<"s">>, []}, {stanza, El}, stream_end], Evs).

%% A stored element reads back as it was; only a whole element is accepted.
from_binary_test() ->
    El = el(<<"storage">>, [{<<"xmlns">>, <<"storage:bookmarks">>}, {<<"q">>, <<"'&\n">>}],
            [el(<<"conference">>, [{<<"jid">>, <<"room@muc">>}],
                [el(<<"nick">>, [], [{xmlcdata, <<"a < b & é"/utf8>>}])])]),
    ?assertEqual(El, ?X:from_binary(?X:to_binary(El))),
    %% Adjacent character data comes back as one piece: the same bytes.
    Bin = ?X:to_binary(message()),
    ?assertEqual(Bin, ?X:to_binary(?X:from_binary(Bin))),
    ?assertError({bad_xml, _}, ?X:from_binary(<<"<a><b/>">>)),
    ?assertError({bad_xml, _}, ?X:from_binary(<<"<a/><b/>">>)),
    ?assertError({bad_xml, _}, ?X:from_binary(<<"xa/>">>)),
    ?assertError({bad_xml, _}, ?X:from_binary(<<"text">>)).

%%% Accessors

attr_test() ->
    M = message(),
    ?assertEqual(<<"chat">>, ?X:attr(<<"type">>, M)),
    ?assertEqual(undefined, ?X:attr(<<"id">>, M)),
    ?assertEqual(<<"none">>, ?X:attr(<<"id">>, M, <<"none">>)),
    ?assertEqual(<<"chat">>, ?X:attr(<<"type">>, M, <<"none">>)).

set_attr_test() ->
    M = ?X:set_attr(<<"type">>, <<"normal">>, message()),
    ?assertEqual([{<<"to">>, <<"romeo@example.net">>}, {<<"type">>, <<"normal">>}], M#xmlel.attrs),
    M2 = ?X:set_attr(<<"id">>, <<"1">>, M),
    ?assertEqual([{<<"to">>, <<"romeo@example.net">>}, {<<"type">>, <<"normal">>}, {<<"id">>, <<"1">>}],
                 M2#xmlel.attrs).

subel_test() ->
    ?assertMatch(#xmlel{name = <<"body">>}, ?X:subel(message(), <<"body">>)),
    ?assertMatch(#xmlel{attrs = [{_, <<"jabber:x:oob">>}]}, ?X:subel(message(), <<"x">>)),
    ?assertEqual(undefined, ?X:subel(message(), <<"html">>)),
    ?assertEqual(undefined, ?X:subel(el(<<"a">>, [], [{xmlcdata, <<"body">>}]), <<"body">>)).

subel_ns_test() ->
    ?assertEqual(el(<<"x">>, [{<<"xmlns">>, <<"urn:xmpp:x">>}], []),
                 ?X:subel(message(), <<"x">>, <<"urn:xmpp:x">>)),
    ?assertEqual(undefined, ?X:subel(message(), <<"x">>, <<"urn:other">>)),
    ?assertEqual(undefined, ?X:subel(message(), <<"body">>, <<"urn:xmpp:x">>)),
    ?assertMatch(#xmlel{name = <<"body">>}, ?X:subel(message(), <<"body">>, <<>>)).

subels_test() ->
    ?assertEqual([<<"body">>, <<"x">>, <<"x">>, <<"subject">>],
                 [N || #xmlel{name = N} <- ?X:subels(message())]),
    ?assertEqual([], ?X:subels(el(<<"a">>, [], [{xmlcdata, <<"t">>}]))).

cdata_accessor_test() ->
    ?assertEqual(<<"\n">>, ?X:cdata(message())),
    ?assertEqual(<<"Art thou Romeo?">>, ?X:cdata(?X:subel(message(), <<"body">>))),
    ?assertEqual(<<>>, ?X:cdata(el(<<"a">>, [], [el(<<"b">>, [], [{xmlcdata, <<"x">>}])]))),
    ?assertEqual(<<"ab">>, ?X:cdata(el(<<"a">>, [], [{xmlcdata, <<"a">>}, el(<<"b">>, [], []),
                                                      {xmlcdata, <<"b">>}]))).

subel_cdata_test() ->
    ?assertEqual(<<"Art thou Romeo?">>, ?X:subel_cdata(message(), <<"body">>)),
    ?assertEqual(<<>>, ?X:subel_cdata(message(), <<"subject">>)),
    ?assertEqual(<<>>, ?X:subel_cdata(message(), <<"thread">>)).

ns_test() ->
    ?assertEqual(<<>>, ?X:ns(message())),
    ?assertEqual(<<"jabber:x:oob">>, ?X:ns(?X:subel(message(), <<"x">>))).
