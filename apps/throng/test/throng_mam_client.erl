%% @doc Test helpers for the archive suites (xep0313, xep0313_muc): the
%% query form, RSM sets, and what a result or a live message carries.
-module(throng_mam_client).

-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(MAM, <<"urn:xmpp:mam:2">>).
-define(SID, <<"urn:xmpp:sid:0">>).
-define(RSM, <<"http://jabber.org/protocol/rsm">>).

%% A submitted MAM query form with Fields ({Var, [Value]}).
form(Fields) ->
    #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, <<"jabber:x:data">>}, {<<"type">>, <<"submit">>}],
           children = [field(<<"FORM_TYPE">>, [?MAM]) | [field(V, Vs) || {V, Vs} <- Fields]]}.

field(Var, Values) ->
    #xmlel{name = <<"field">>, attrs = [{<<"var">>, Var}],
           children = [#xmlel{name = <<"value">>, children = [{xmlcdata, V}]} || V <- Values]}.

%% An RSM <set/> of {Name, Text} (an empty text: an empty element).
rsm(Children) ->
    #xmlel{name = <<"set">>, attrs = [{<<"xmlns">>, ?RSM}],
           children = [#xmlel{name = N, children = [{xmlcdata, V} || V =/= <<>>]}
                       || {N, V} <- Children]}.

%% A result message's archive id, and the forwarded stanza.
result_id(M) -> throng_xml:attr(<<"id">>, throng_xml:subel(M, <<"result">>)).
forwarded(M) -> throng_xml:subel(throng_xml:subel(M, <<"result">>), <<"forwarded">>).
inner(M) -> throng_xml:subel(forwarded(M), <<"message">>).

%% The stanza ids of a message: [{By, Id}].
stanza_ids(M) ->
    [{throng_xml:attr(<<"by">>, S), throng_xml:attr(<<"id">>, S)}
     || #xmlel{name = <<"stanza-id">>} = S <- throng_xml:subels(M), throng_xml:ns(S) =:= ?SID].
