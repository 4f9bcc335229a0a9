%% @doc XEP-0280 §6 eligibility in throng_mod_carbons, message by message.
-module(throng_mod_carbons_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

msg(Type, Children) ->
    #xmlel{name = <<"message">>, attrs = [{<<"type">>, Type} || Type =/= <<>>], children = Children}.

el(Name, NS) -> #xmlel{name = Name, attrs = [{<<"xmlns">>, NS}]}.
body() -> #xmlel{name = <<"body">>, children = [{xmlcdata, <<"hi">>}]}.

e(M) -> throng_mod_carbons:eligible(M).

types_test() ->
    ?assert(e(msg(<<"chat">>, []))),
    ?assert(e(msg(<<"chat">>, [body()]))),
    ?assert(e(msg(<<"normal">>, [body()]))),
    ?assert(e(msg(<<>>, [body()]))),
    ?assertNot(e(msg(<<"normal">>, []))),
    ?assert(e(msg(<<"error">>, []))),
    ?assertNot(e(msg(<<"groupchat">>, [body()]))),
    ?assertNot(e(msg(<<"headline">>, [body()]))).

im_payloads_test() ->
    ?assert(e(msg(<<"normal">>, [el(<<"received">>, <<"urn:xmpp:receipts">>)]))),
    ?assert(e(msg(<<>>, [el(<<"displayed">>, <<"urn:xmpp:chat-markers:0">>)]))),
    ?assert(e(msg(<<>>, [el(<<"active">>, <<"http://jabber.org/protocol/chatstates">>)]))),
    ?assertNot(e(msg(<<>>, [el(<<"x">>, <<"jabber:x:oob">>)]))).

excluded_test() ->
    ?assertNot(e(msg(<<"chat">>, [body(), el(<<"private">>, <<"urn:xmpp:carbons:2">>)]))),
    ?assertNot(e(msg(<<"chat">>, [body(), el(<<"no-copy">>, <<"urn:xmpp:hints">>)]))),
    ?assertNot(e(msg(<<"chat">>, [el(<<"received">>, <<"urn:xmpp:carbons:2">>)]))),
    ?assertNot(e(msg(<<"chat">>, [el(<<"sent">>, <<"urn:xmpp:carbons:2">>)]))),
    %% A private element in another namespace is just payload.
    ?assert(e(msg(<<"chat">>, [body(), el(<<"private">>, <<"urn:example">>)]))).
