%% @doc XEP-0115 verification strings (throng_caps:ver/1) against the
%% XEP's own examples (§5.2 simple, §5.3 complex with an extended form),
%% and the capabilities read from a presence.
-module(throng_caps_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

el(Name, Attrs, Children) -> #xmlel{name = Name, attrs = Attrs, children = Children}.
feature(F) -> el(<<"feature">>, [{<<"var">>, F}], []).
field(Var, Values) -> field(Var, undefined, Values).
field(Var, Type, Values) ->
    el(<<"field">>, [{<<"var">>, Var}] ++ [{<<"type">>, Type} || Type =/= undefined],
       [el(<<"value">>, [], [{xmlcdata, V}]) || V <- Values]).

hash(Q) -> base64:encode(crypto:hash(sha, throng_caps:ver(Q))).

simple_example_test() ->
    Q = el(<<"query">>, [{<<"xmlns">>, ?NS_DISCO_INFO}],
           [el(<<"identity">>, [{<<"category">>, <<"client">>}, {<<"name">>, <<"Exodus 0.9.1">>},
                                {<<"type">>, <<"pc">>}], []),
            feature(<<"http://jabber.org/protocol/caps">>),
            feature(<<"http://jabber.org/protocol/disco#info">>),
            feature(<<"http://jabber.org/protocol/disco#items">>),
            feature(<<"http://jabber.org/protocol/muc">>)]),
    ?assertEqual(<<"client/pc//Exodus 0.9.1<http://jabber.org/protocol/caps<"
                   "http://jabber.org/protocol/disco#info<http://jabber.org/protocol/disco#items<"
                   "http://jabber.org/protocol/muc<">>, throng_caps:ver(Q)),
    ?assertEqual(<<"QgayPKawpkPSDYmwT/WM94uAlu0=">>, hash(Q)).

complex_example_test() ->
    Q = el(<<"query">>, [{<<"xmlns">>, ?NS_DISCO_INFO}],
           [el(<<"identity">>, [{<<"xml:lang">>, <<"en">>}, {<<"category">>, <<"client">>},
                                {<<"name">>, <<"Psi 0.11">>}, {<<"type">>, <<"pc">>}], []),
            el(<<"identity">>, [{<<"xml:lang">>, <<"el">>}, {<<"category">>, <<"client">>},
                                {<<"name">>, <<"Ψ 0.11"/utf8>>}, {<<"type">>, <<"pc">>}], []),
            feature(<<"http://jabber.org/protocol/caps">>),
            feature(<<"http://jabber.org/protocol/disco#info">>),
            feature(<<"http://jabber.org/protocol/disco#items">>),
            feature(<<"http://jabber.org/protocol/muc">>),
            el(<<"x">>, [{<<"xmlns">>, <<"jabber:x:data">>}, {<<"type">>, <<"result">>}],
               [field(<<"FORM_TYPE">>, <<"hidden">>, [<<"urn:xmpp:dataforms:softwareinfo">>]),
                field(<<"ip_version">>, [<<"ipv4">>, <<"ipv6">>]),
                field(<<"os">>, [<<"Mac">>]),
                field(<<"os_version">>, [<<"10.5.1">>]),
                field(<<"software">>, [<<"Psi">>]),
                field(<<"software_version">>, [<<"0.11">>])])]),
    ?assertEqual(<<"q07IKJEyjvHSyhy//CH0CxmKi8w=">>, hash(Q)).

from_presence_test() ->
    C = el(<<"c">>, [{<<"xmlns">>, <<"http://jabber.org/protocol/caps">>}, {<<"hash">>, <<"sha-1">>},
                     {<<"node">>, <<"n">>}, {<<"ver">>, <<"v">>}], []),
    ?assertEqual({<<"sha-1">>, <<"n">>, <<"v">>}, throng_caps:from_presence(el(<<"presence">>, [], [C]))),
    %% Legacy caps (no hash) are not trusted.
    Legacy = el(<<"c">>, [{<<"xmlns">>, <<"http://jabber.org/protocol/caps">>}, {<<"node">>, <<"n">>},
                          {<<"ver">>, <<"1.0">>}], []),
    ?assertEqual(none, throng_caps:from_presence(el(<<"presence">>, [], [Legacy]))),
    ?assertEqual(none, throng_caps:from_presence(undefined)).
