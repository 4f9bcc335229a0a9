%% @doc The client side of XEP-0050 ad-hoc commands for the suites
%% (xep0050_SUITE, xep0133_SUITE): sends `<command/>' IQs to the domain
%% with {@link throng_test_client} and reads the answers.
-module(throng_adhoc_client).

-include("throng.hrl").

-export([ns/0, admin_node/1, items/2, info/2, run/3, run/4, submit/3, submit/4, cancel/3, form/1,
         status/1, sessionid/1, actions/1, field_vars/1, field_values/2, notes/1, failure/1]).

-define(C, throng_test_client).
-define(NS, <<"http://jabber.org/protocol/commands">>).
-define(HOST, <<"localhost">>).

-spec ns() -> binary().
ns() -> ?NS.

%% @doc The XEP-0133 node of a command.
-spec admin_node(binary()) -> binary().
admin_node(Name) -> <<"http://jabber.org/protocol/admin#", Name/binary>>.

%% @doc disco#items of a node of the domain: [{JID, Node, Name}] or {error, Cond}.
-spec items(?C:client(), binary()) -> [{binary(), binary(), binary()}] | {error, binary()}.
items(C, Node) ->
    case disco(C, ?NS_DISCO_ITEMS, Node) of
        {ok, Q} -> [{throng_xml:attr(<<"jid">>, I), throng_xml:attr(<<"node">>, I),
                     throng_xml:attr(<<"name">>, I)} || I <- throng_xml:subels(Q)];
        E -> E
    end.

%% @doc disco#info of a node of the domain: {[{Category, Type, Name}], [Feature]}
%% or {error, Cond}.
-spec info(?C:client(), binary()) -> {list(), [binary()]} | {error, binary()}.
info(C, Node) ->
    case disco(C, ?NS_DISCO_INFO, Node) of
        {ok, Q} ->
            {[{throng_xml:attr(<<"category">>, I), throng_xml:attr(<<"type">>, I),
               throng_xml:attr(<<"name">>, I)} || #xmlel{name = <<"identity">>} = I <- throng_xml:subels(Q)],
             [throng_xml:attr(<<"var">>, F) || #xmlel{name = <<"feature">>} = F <- throng_xml:subels(Q)]};
        E -> E
    end.

disco(C, NS, Node) ->
    R = ?C:iq_skipping(C, <<"get">>, #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, NS},
                                                                         {<<"node">>, Node}]},
                       [{<<"to">>, ?HOST}]),
    case throng_xml:attr(<<"type">>, R) of
        <<"result">> ->
            Q = throng_xml:subel(R, <<"query">>),
            Node = throng_xml:attr(<<"node">>, Q),
            {ok, Q};
        <<"error">> -> failure(R)
    end.

%% @doc Executes a command: the `<command/>' answered, or the error IQ.
-spec run(?C:client(), binary(), [{binary(), binary()}]) -> #xmlel{}.
run(C, Node, Attrs) ->
    run(C, Node, Attrs, []).

%% @doc As run/3 with children of `<command/>' (a form).
-spec run(?C:client(), binary(), [{binary(), binary()}], [#xmlel{}]) -> #xmlel{}.
run(C, Node, Attrs, Children) ->
    R = ?C:iq_skipping(C, <<"set">>,
                       #xmlel{name = <<"command">>,
                              attrs = [{<<"xmlns">>, ?NS}, {<<"node">>, Node} | Attrs],
                              children = Children},
                       [{<<"to">>, ?HOST}]),
    case throng_xml:attr(<<"type">>, R) of
        <<"result">> -> throng_xml:subel(R, <<"command">>, ?NS);
        <<"error">> -> R
    end.

%% @doc Submits a form ([{Var, [Value]}]) in session Sid with action complete.
-spec submit(?C:client(), binary(), binary(), [{binary(), [binary()]}]) -> #xmlel{}.
submit(C, Node, Sid, Fields) ->
    run(C, Node, [{<<"sessionid">>, Sid}, {<<"action">>, <<"complete">>}], [form(Fields)]).

%% @doc Executes a command and submits the form it shows: the final answer.
-spec submit(?C:client(), binary(), [{binary(), [binary()]}]) -> #xmlel{}.
submit(C, Node, Fields) ->
    Form = run(C, Node, [{<<"action">>, <<"execute">>}]),
    <<"executing">> = status(Form),
    submit(C, Node, sessionid(Form), Fields).

-spec cancel(?C:client(), binary(), binary()) -> #xmlel{}.
cancel(C, Node, Sid) ->
    run(C, Node, [{<<"sessionid">>, Sid}, {<<"action">>, <<"cancel">>}]).

%% @doc A submitted form: [{Var, [Value]}].
-spec form([{binary(), [binary()]}]) -> #xmlel{}.
form(Fields) ->
    #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, <<"jabber:x:data">>}, {<<"type">>, <<"submit">>}],
           children = [#xmlel{name = <<"field">>, attrs = [{<<"var">>, V}],
                              children = [#xmlel{name = <<"value">>, children = [{xmlcdata, X}]}
                                          || X <- Xs]}
                       || {V, Xs} <- Fields]}.

%% @doc executing | completed | canceled, of an answered `<command/>'.
-spec status(#xmlel{}) -> binary() | undefined.
status(#xmlel{name = <<"command">>} = Cmd) -> throng_xml:attr(<<"status">>, Cmd);
status(_) -> undefined.

-spec sessionid(#xmlel{}) -> binary().
sessionid(Cmd) -> throng_xml:attr(<<"sessionid">>, Cmd).

%% @doc The `<actions/>': {Default, [Allowed]}, or none.
-spec actions(#xmlel{}) -> {binary(), [binary()]} | none.
actions(Cmd) ->
    case throng_xml:subel(Cmd, <<"actions">>) of
        undefined -> none;
        A -> {throng_xml:attr(<<"execute">>, A), [E#xmlel.name || E <- throng_xml:subels(A)]}
    end.

%% @doc The vars of the form (or result) in a `<command/>', in order.
-spec field_vars(#xmlel{}) -> [binary()].
field_vars(Cmd) ->
    [throng_xml:attr(<<"var">>, F) || F <- fields(Cmd)].

%% @doc The values of a field of the form (or result) in a `<command/>'.
-spec field_values(#xmlel{}, binary()) -> [binary()].
field_values(Cmd, Var) ->
    case [F || F <- fields(Cmd), throng_xml:attr(<<"var">>, F) =:= Var] of
        [F] -> [throng_xml:cdata(V) || #xmlel{name = <<"value">>} = V <- throng_xml:subels(F)];
        [] -> erlang:error({no_field, Var, Cmd})
    end.

fields(Cmd) ->
    case throng_xml:subel(Cmd, <<"x">>, <<"jabber:x:data">>) of
        undefined -> [];
        X -> [F || #xmlel{name = <<"field">>} = F <- throng_xml:subels(X)]
    end.

%% @doc The notes of a `<command/>': [{Type, Text}].
-spec notes(#xmlel{}) -> [{binary(), binary()}].
notes(Cmd) ->
    [{throng_xml:attr(<<"type">>, N), throng_xml:cdata(N)}
     || #xmlel{name = <<"note">>} = N <- throng_xml:subels(Cmd)].

%% @doc The error of an error IQ: {error, Condition} or, with a XEP-0050
%% application condition, {error, Condition, AppCondition}.
-spec failure(#xmlel{}) -> {error, binary()} | {error, binary(), binary()}.
failure(IQ) ->
    <<"error">> = throng_xml:attr(<<"type">>, IQ),
    Err = throng_xml:subel(IQ, <<"error">>),
    Conds = [{E#xmlel.name, throng_xml:ns(E)} || E <- throng_xml:subels(Err), E#xmlel.name =/= <<"text">>],
    case Conds of
        [{Cond, ?NS_STANZAS}] -> {error, Cond};
        [{Cond, ?NS_STANZAS}, {App, ?NS}] -> {error, Cond, App}
    end.
