%% @doc One PEP node (XEP-0163 over XEP-0060), as pure data: its
%% configuration read from a form and checked against publish-options, its
%% items with publish and retract, and who may see it. Stored by
%% {@link throng_mod_pep}.
-module(throng_pep_node).

-include("throng.hrl").

-export([new/1, config/1, config_from_form/2, preconditions/2, config_form/1,
         publish/2, retract/2, items/1, items/2, last/1, may_access/2]).

-define(FORM_NODE_CONFIG, <<"http://jabber.org/protocol/pubsub#node_config">>).

-type access() :: presence | open | whitelist.
-type config() :: #{access_model := access(), max_items := pos_integer(),
                    send_last_published_item := boolean(), notify_retract := boolean()}.
%% Items newest first: {Id, Payload, Publisher (bare JID binary), Stamp (µs)}.
-type item() :: {binary(), #xmlel{}, binary(), integer()}.
-type pep_node() :: #{config := config(), items := [item()]}.
%% Who asks: the owner itself, a contact with a subscription from/both to
%% the owner's presence, or anyone else.
-type asker() :: owner | subscriber | other.
-export_type([config/0, pep_node/0, item/0, asker/0]).

%% @doc A node with this configuration and no items.
-spec new(config()) -> pep_node().
new(Config) ->
    #{config => Config, items => []}.

-spec config(pep_node()) -> config().
config(#{config := C}) -> C.

%% @doc The configuration a form sets on top of Base (XEP-0060 §16.4's
%% fields this node has; others are ignored). MaxCap bounds max_items
%% (`max' means the cap). Error: a field with a value this node cannot take.
-spec config_from_form(#{binary() => [binary()]}, {config(), pos_integer()}) ->
    {ok, config()} | {error, binary()}.
config_from_form(Values, {Base, MaxCap}) ->
    maps:fold(fun(_Var, _Vals, {error, _} = E) -> E;
                 (Var, Vals, {ok, C}) -> field(Var, Vals, C, MaxCap)
              end, {ok, Base}, Values).

field(<<"pubsub#access_model">>, [V | _], C, _) ->
    case V of
        <<"presence">> -> {ok, C#{access_model := presence}};
        <<"open">> -> {ok, C#{access_model := open}};
        <<"whitelist">> -> {ok, C#{access_model := whitelist}};
        _ -> {error, <<"pubsub#access_model">>}
    end;
field(<<"pubsub#max_items">>, [V | _], C, Cap) ->
    case V of
        <<"max">> -> {ok, C#{max_items := Cap}};
        _ ->
            try binary_to_integer(V) of
                N when N >= 1, N =< Cap -> {ok, C#{max_items := N}};
                _ -> {error, <<"pubsub#max_items">>}
            catch error:badarg -> {error, <<"pubsub#max_items">>}
            end
    end;
field(<<"pubsub#send_last_published_item">>, [V | _], C, _) ->
    case V of
        <<"never">> -> {ok, C#{send_last_published_item := false}};
        _ when V =:= <<"on_sub">>; V =:= <<"on_sub_and_presence">> ->
            {ok, C#{send_last_published_item := true}};
        _ -> {error, <<"pubsub#send_last_published_item">>}
    end;
field(<<"pubsub#notify_retract">>, [V | _], C, _) ->
    case bool(V) of
        {ok, B} -> {ok, C#{notify_retract := B}};
        error -> {error, <<"pubsub#notify_retract">>}
    end;
field(<<"pubsub#persist_items">>, [V | _], C, _) ->
    %% Items are always kept: true is what this node does, false it cannot.
    case bool(V) of
        {ok, true} -> {ok, C};
        _ -> {error, <<"pubsub#persist_items">>}
    end;
field(_Other, _Vals, C, _) ->
    {ok, C}.

bool(V) when V =:= <<"1">>; V =:= <<"true">> -> {ok, true};
bool(V) when V =:= <<"0">>; V =:= <<"false">> -> {ok, false};
bool(_) -> error.

%% @doc XEP-0060 §7.1.5: publish-options are preconditions on an existing
%% node. ok when every field the node knows has the value the node has.
-spec preconditions(#{binary() => [binary()]}, {config(), pos_integer()}) -> ok | {error, binary()}.
preconditions(Values, {Config, Cap}) ->
    case config_from_form(Values, {Config, Cap}) of
        {ok, Config} -> ok;
        {ok, _Different} -> {error, <<"precondition-not-met">>};
        {error, _} = E -> E
    end.

%% @doc The node's configuration as a form (pubsub#owner configure get).
-spec config_form(config()) -> #xmlel{}.
config_form(#{access_model := A, max_items := M, send_last_published_item := S,
              notify_retract := R}) ->
    Field = fun(Var, Type, Val) -> #{var => Var, type => Type, values => [Val]} end,
    throng_xdata:form(<<>>, <<>>,
                      [Field(<<"FORM_TYPE">>, <<"hidden">>, ?FORM_NODE_CONFIG),
                       Field(<<"pubsub#access_model">>, <<"list-single">>, atom_to_binary(A)),
                       Field(<<"pubsub#max_items">>, <<"text-single">>, integer_to_binary(M)),
                       Field(<<"pubsub#persist_items">>, <<"boolean">>, <<"1">>),
                       Field(<<"pubsub#send_last_published_item">>, <<"list-single">>,
                             case S of true -> <<"on_sub_and_presence">>; false -> <<"never">> end),
                       Field(<<"pubsub#notify_retract">>, <<"boolean">>, bool_bin(R))]).

bool_bin(true) -> <<"1">>;
bool_bin(false) -> <<"0">>.

%% @doc Publishes an item: one with the same id is replaced (and moves to
%% the front); beyond max_items the oldest go.
-spec publish(item(), pep_node()) -> pep_node().
publish({Id, _, _, _} = Item, #{config := #{max_items := Max}, items := Items} = N) ->
    Rest = lists:keydelete(Id, 1, Items),
    N#{items := lists:sublist([Item | Rest], Max)}.

%% @doc Removes an item: not_found when the node has no such item.
-spec retract(binary(), pep_node()) -> {ok, pep_node()} | not_found.
retract(Id, #{items := Items} = N) ->
    case lists:keymember(Id, 1, Items) of
        true -> {ok, N#{items := lists:keydelete(Id, 1, Items)}};
        false -> not_found
    end.

%% @doc The items, oldest first (XEP-0060 §6.5.2: in publication order).
-spec items(pep_node()) -> [item()].
items(#{items := Items}) ->
    lists:reverse(Items).

%% @doc The newest Max items, oldest first.
-spec items(pep_node(), pos_integer()) -> [item()].
items(#{items := Items}, Max) ->
    lists:reverse(lists:sublist(Items, Max)).

-spec last(pep_node()) -> item() | none.
last(#{items := [Last | _]}) -> Last;
last(_) -> none.

%% @doc Whether an asker may see the node's items and notifications.
-spec may_access(asker(), config()) -> boolean().
may_access(owner, _) -> true;
may_access(_, #{access_model := open}) -> true;
may_access(subscriber, #{access_model := presence}) -> true;
may_access(_, _) -> false.
