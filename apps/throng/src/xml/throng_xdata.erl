%% @doc XEP-0004 Data Forms: building the forms and results a service sends,
%% and reading the values of a form a client submits. Pure; ad-hoc commands
%% (XEP-0050) use it, as will any module that shows a form (room
%% configuration, registration fields).
%%
%% A form is built from field maps:
%% ```
%% #{var => <<"accountjid">>, type => <<"jid-single">>, label => <<"...">>,
%%   required => true, values => [<<"...">>], options => [{Label, Value}]}
%% '''
%% (every key but `var' optional; a field with no `var' is `fixed' text). A
%% submitted form is read into `#{Var => [Value]}'.
-module(throng_xdata).

-include("throng.hrl").

-export([form/3, result/2, parse/1, fields/1, value/2, values/2, text/2]).

-define(NS_XDATA, <<"jabber:x:data">>).

-type field() :: #{var => binary(), type => binary(), label => binary(),
                   required => boolean(), values => [binary()],
                   options => [{Label :: binary(), Value :: binary()}]}.
%% A submitted form's values, by field var.
-type values() :: #{binary() => [binary()]}.
-export_type([field/0, values/0]).

%% @doc A form to fill in (`type="form"'), with a title and instructions
%% (either may be empty: left out).
-spec form(binary(), binary(), [field()]) -> #xmlel{}.
form(Title, Instructions, Fields) ->
    x(<<"form">>, [text_el(<<"title">>, Title), text_el(<<"instructions">>, Instructions)],
      Fields).

%% @doc The result of a command or search (`type="result"').
-spec result(binary(), [field()]) -> #xmlel{}.
result(Title, Fields) ->
    x(<<"result">>, [text_el(<<"title">>, Title)], Fields).

x(Type, Head, Fields) ->
    #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, ?NS_XDATA}, {<<"type">>, Type}],
           children = lists:append(Head) ++ [field_el(F) || F <- Fields]}.

text_el(_Name, <<>>) -> [];
text_el(Name, Text) -> [#xmlel{name = Name, children = [{xmlcdata, Text}]}].

field_el(F) ->
    Attrs = [{<<"var">>, V} || V <- [maps:get(var, F, undefined)], V =/= undefined] ++
        [{<<"type">>, T} || T <- [maps:get(type, F, undefined)], T =/= undefined] ++
        [{<<"label">>, L} || L <- [maps:get(label, F, undefined)], L =/= undefined],
    #xmlel{name = <<"field">>, attrs = Attrs,
           children = [#xmlel{name = <<"required">>} || maps:get(required, F, false)] ++
               [value_el(V) || V <- maps:get(values, F, [])] ++
               [#xmlel{name = <<"option">>, attrs = [{<<"label">>, L}], children = [value_el(V)]}
                || {L, V} <- maps:get(options, F, [])]}.

value_el(V) ->
    #xmlel{name = <<"value">>, children = [{xmlcdata, V}]}.

%% @doc The values of the form submitted in Parent (a `<command/>', a
%% `<query/>'): `none' when it holds no `jabber:x:data' form, an error when
%% the form is not a submission (XEP-0050 §3.5.1: a `cancel' form counts as
%% `submit') or names a field twice (XEP-0004 §3.2: a var is unique).
%% Fields without a var (fixed text) are not values and are skipped.
-spec parse(#xmlel{}) -> {ok, values()} | none | {error, not_submit | duplicate_field}.
parse(Parent) ->
    case throng_xml:subel(Parent, <<"x">>, ?NS_XDATA) of
        undefined -> none;
        X ->
            case throng_xml:attr(<<"type">>, X) of
                T when T =:= <<"submit">>; T =:= <<"cancel">> -> by_var(fields(X), #{});
                _ -> {error, not_submit}
            end
    end.

by_var([], Acc) ->
    {ok, Acc};
by_var([{undefined, _} | Rest], Acc) ->
    by_var(Rest, Acc);
by_var([{Var, _} | _], Acc) when is_map_key(Var, Acc) ->
    {error, duplicate_field};
by_var([{Var, Vs} | Rest], Acc) ->
    by_var(Rest, Acc#{Var => Vs}).

%% @doc The fields of a form's `<x/>' element as they come, in order: each
%% one's var (`undefined' when it has none) and values. Lenient: neither
%% the form's type nor a var given twice is checked, and a field without a
%% var is kept (parse/1 does all three).
-spec fields(#xmlel{}) -> [{binary() | undefined, [binary()]}].
fields(X) ->
    [{throng_xml:attr(<<"var">>, F),
      [throng_xml:cdata(V) || #xmlel{name = <<"value">>} = V <- throng_xml:subels(F)]}
     || #xmlel{name = <<"field">>} = F <- throng_xml:subels(X)].

%% @doc A single-valued field's value: its first value, `undefined' when the
%% field is absent or has no value or only an empty one.
-spec value(binary(), values()) -> binary() | undefined.
value(Var, Values) ->
    case maps:get(Var, Values, []) of
        [<<>> | _] -> undefined;
        [V | _] -> V;
        [] -> undefined
    end.

%% @doc A multi-valued field's values (jid-multi, list-multi), empty ones
%% left out; `[]' when the field is absent.
-spec values(binary(), values()) -> [binary()].
values(Var, Values) ->
    [V || V <- maps:get(Var, Values, []), V =/= <<>>].

%% @doc A text-multi field's text: its values as lines (XEP-0004 §3.3).
-spec text(binary(), values()) -> binary().
text(Var, Values) ->
    iolist_to_binary(lists:join(<<"\n">>, maps:get(Var, Values, []))).
