%% @doc An extension module that offers ad-hoc commands, for xep0050_SUITE:
%% the XEP-0050 framework ({@link throng_mod_adhoc}) finds it among the
%% host's enabled modules because it exports `adhoc_commands/1'.
%%
%% <ul>
%% <li>`wizard' (admins only), three stages: a `name' (next), a `color'
%% (prev, next, or complete at once), a `confirm' stage (prev, complete);
%% it completes with a note "NAME likes COLOR". A missing name or color is
%% bad-payload; the session stays at its stage.</li>
%% <li>`echo' (every user of the host), one stage: a `text', completed
%% with a result form holding it.</li>
%% </ul>
-module(throng_test_adhoc).
-behaviour(throng_ext).
-behaviour(throng_mod_adhoc).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, adhoc_commands/1, adhoc_execute/1]).

-spec options() -> throng_config_spec:spec().
options() -> #{}.

-spec iq_handlers() -> [].
iq_handlers() -> [].

-spec hooks() -> [].
hooks() -> [].

-spec adhoc_commands(binary()) -> [throng_mod_adhoc:command()].
adhoc_commands(_Host) ->
    [#{node => <<"wizard">>, name => <<"Wizard">>, access => admin},
     #{node => <<"echo">>, name => <<"Echo">>, access => local}].

-spec adhoc_execute(throng_mod_adhoc:request()) -> throng_mod_adhoc:response().
adhoc_execute(#{node := <<"wizard">>, action := start}) ->
    {form, name, [next], form(<<"Your name">>, <<"name">>)};
adhoc_execute(#{node := <<"wizard">>, stage := name, action := next, values := V}) ->
    with(<<"name">>, V, fun(Name) ->
        {form, {color, Name}, [next, complete], form(<<"Your color">>, <<"color">>)}
    end);
adhoc_execute(#{node := <<"wizard">>, stage := {color, Name}, action := complete, values := V}) ->
    with(<<"color">>, V, fun(Color) -> likes(Name, Color) end);
adhoc_execute(#{node := <<"wizard">>, stage := {color, Name}, action := next, values := V}) ->
    with(<<"color">>, V, fun(Color) ->
        {form, {confirm, Name, Color}, [complete], form(<<"Sure?">>, <<"confirm">>)}
    end);
adhoc_execute(#{node := <<"wizard">>, stage := {confirm, Name, Color}, action := complete}) ->
    likes(Name, Color);
adhoc_execute(#{node := <<"echo">>, values := none}) ->
    {form, text, [complete], form(<<"Say something">>, <<"text">>)};
adhoc_execute(#{node := <<"echo">>, values := V}) ->
    with(<<"text">>, V, fun(Text) ->
        {completed, [{info, <<"echoed">>}],
         [throng_xdata:result(<<"Echo">>, [#{var => <<"text">>, values => [Text]}])]}
    end).

likes(Name, Color) ->
    {completed, [{info, <<Name/binary, " likes ", Color/binary>>}], []}.

form(Title, Var) ->
    throng_xdata:form(Title, <<>>, [#{var => Var, type => <<"text-single">>, required => true}]).

with(Var, V, Fun) ->
    case V of
        none -> {error, 'bad-request', 'bad-payload', <<Var/binary, " is required">>};
        _ ->
            case throng_xdata:value(Var, V) of
                undefined -> {error, 'bad-request', 'bad-payload', <<Var/binary, " is required">>};
                X -> Fun(X)
            end
    end.
