%% @doc The XEP-0313 query, as pure functions: the `<query/>' of a client
%% (its XEP-0004 form of filters, its XEP-0059 result set management, the
%% extended `<flip-page/>') read into a query ({@link parse/3}); a page of
%% the archive found through two storage functions it is given ({@link
%% page/3}); the messages and the `<fin/>' that carry the answer; the form a
%% client asks for.
%%
%% Paging. The form's filters select a set of the archive (`with', `start',
%% `end', `after-id', `before-id', `ids'); RSM walks it: `<after>X' reads
%% the first messages after X, `<before>X' the last ones before X, an empty
%% `<before/>' the last page, `<max>' says how many. One more than a page
%% is read from the end the walk goes to: whether it came says whether the
%% page is the last one in that direction (`complete'). `<count>' is the
%% size of the set; the `index' of `<first>' is the number of messages of
%% the set before it. Pages are in the archive's order; `<flip-page/>' only
%% sends them the other way round, and `<first>'/`<last>' still name the
%% oldest and newest message of the page.
-module(throng_mam_query).

-include("throng.hrl").

-export([parse/3, page/3, result_message/4, fin/3, form/1]).

-export_type([query/0, page/0]).

-define(NS_DATA, <<"jabber:x:data">>).
-define(NS_RSM, <<"http://jabber.org/protocol/rsm">>).

-type query() :: #{filter := #mam_filter{},   %% the set the form's filters select
                   named := [non_neg_integer()],  %% every id the client named
                   max := non_neg_integer(),      %% the page's size
                   'after' := non_neg_integer() | undefined,
                   before := non_neg_integer() | last | undefined,
                   flip := boolean(),
                   queryid := binary() | undefined}.
-type page() :: #{messages := [#mam_msg{}], complete := boolean(),
                  count := non_neg_integer(), index := non_neg_integer() | undefined}.
%% The storage functions a page is found with (throng_storage's mam_query
%% and mam_count/4 for one user: the set's size and how many of it have an
%% id below the one given).
-type fetch() :: fun((#mam_filter{}, throng_storage:mam_direction(), non_neg_integer()) ->
                        [#mam_msg{}]).
-type count() :: fun((#mam_filter{}, non_neg_integer()) ->
                        {non_neg_integer(), non_neg_integer()}).
-type error() :: {error, throng_stanza:condition(), binary()}.

%%% Reading a query

%% @doc The query of a `<query/>' element. Decode turns an id a client sent
%% into an archive id (`error' for one this server did not make: an
%% item-not-found, as for an id the archive does not hold). Limits:
%% `default' messages a page when the client gives no `<max>', `cap' at
%% most whatever it gives.
-spec parse(#xmlel{}, fun((binary()) -> {ok, non_neg_integer()} | error),
            #{default := non_neg_integer(), cap := non_neg_integer()}) ->
    {ok, query()} | error().
parse(#xmlel{} = Query, Decode, Limits) ->
    try
        {Filter, Named} = filters(Query, Decode),
        {Max, After, Before} = rsm(Query, Decode, Limits),
        {ok, #{filter => Filter,
               named => Named ++ [Id || Id <- [After, Before], is_integer(Id)],
               max => Max, 'after' => After, before => Before,
               flip => throng_xml:subel(Query, <<"flip-page">>) =/= undefined,
               queryid => throng_xml:attr(<<"queryid">>, Query)}}
    catch
        throw:{bad, Cond, Text} -> {error, Cond, Text}
    end.

-spec bad(throng_stanza:condition(), binary()) -> no_return().
bad(Cond, Text) ->
    throw({bad, Cond, Text}).

%% The data form: filters, and the ids it named. Its fields are taken in
%% order, a var given twice applied twice; a field without a var is an
%% unknown field (named `').
filters(Query, Decode) ->
    case throng_xml:subel(Query, <<"x">>, ?NS_DATA) of
        undefined -> {#mam_filter{}, []};
        X ->
            Fields = [{case Var of undefined -> <<>>; _ -> Var end, Values}
                      || {Var, Values} <- throng_xdata:fields(X)],
            lists:foldl(fun(Field, Acc) -> field(Field, Decode, Acc) end,
                        {#mam_filter{}, []}, Fields)
    end.

field({<<"FORM_TYPE">>, [NS]}, _Decode, Acc) ->
    lists:member(NS, [<<"urn:xmpp:mam:2">>, <<"urn:xmpp:mam:1">>]) orelse
        bad('bad-request', <<"FORM_TYPE is not a MAM form">>),
    Acc;
field({<<"with">>, [Value]}, _Decode, {F, Named}) ->
    case throng_jid:parse(Value) of
        {ok, #jid{resource = Res} = J} ->
            Bare = throng_jid:to_binary(throng_jid:bare(J)),
            {F#mam_filter{with = {Bare, case Res of <<>> -> any; _ -> Res end}}, Named};
        error ->
            bad('jid-malformed', <<"with: not a JID">>)
    end;
field({<<"start">>, [Value]}, _Decode, {F, Named}) ->
    {F#mam_filter{min = max(F#mam_filter.min, time(Value))}, Named};
field({<<"end">>, [Value]}, _Decode, {F, Named}) ->
    {F#mam_filter{max = min(F#mam_filter.max, max(0, time(Value)))}, Named};
field({<<"after-id">>, [Value]}, Decode, {F, Named}) ->
    Id = id(Value, Decode),
    {F#mam_filter{min = max(F#mam_filter.min, Id + 1)}, [Id | Named]};
field({<<"before-id">>, [Value]}, Decode, {F, Named}) ->
    Id = id(Value, Decode),
    {F#mam_filter{max = min(F#mam_filter.max, max(0, Id - 1))}, [Id | Named]};
field({<<"ids">>, Values}, Decode, {F, Named}) ->
    Ids = [id(V, Decode) || V <- Values],
    {F#mam_filter{ids = Ids}, Ids ++ Named};
field({Var, _}, _Decode, _Acc)
  when Var =:= <<"FORM_TYPE">>; Var =:= <<"with">>; Var =:= <<"start">>; Var =:= <<"end">>;
       Var =:= <<"after-id">>; Var =:= <<"before-id">> ->
    bad('bad-request', <<Var/binary, ": one value expected">>);
field({Var, _}, _Decode, _Acc) ->
    %% XEP-0313 §4.1.5: a field the server does not know.
    bad('feature-not-implemented', <<"unknown field: ", Var/binary>>).

%% XEP-0082 DateTime, in microseconds since the epoch.
time(Value) ->
    try calendar:rfc3339_to_system_time(binary_to_list(Value), [{unit, microsecond}])
    catch _:_ -> bad('bad-request', <<"not a XEP-0082 date and time: ", Value/binary>>)
    end.

id(Value, Decode) ->
    case Decode(Value) of
        {ok, Id} -> Id;
        error -> bad('item-not-found', <<"no such message in the archive: ", Value/binary>>)
    end.

%% XEP-0059: the page's size and where it starts.
rsm(Query, Decode, #{default := Default, cap := Cap}) ->
    case throng_xml:subel(Query, <<"set">>, ?NS_RSM) of
        undefined -> {min(Default, Cap), undefined, undefined};
        Set ->
            Max = case throng_xml:subel(Set, <<"max">>) of
                      undefined -> Default;
                      El -> non_neg(throng_xml:cdata(El))
                  end,
            throng_xml:subel(Set, <<"index">>) =:= undefined orelse
                bad('feature-not-implemented', <<"RSM index is not supported">>),
            After = case throng_xml:subel(Set, <<"after">>) of
                        undefined -> undefined;
                        A -> id(throng_xml:cdata(A), Decode)
                    end,
            Before = case throng_xml:subel(Set, <<"before">>) of
                         undefined -> undefined;
                         B -> case throng_xml:cdata(B) of
                                  <<>> -> last;
                                  Text -> id(Text, Decode)
                              end
                     end,
            {min(Max, Cap), After, Before}
    end.

non_neg(Text) ->
    try binary_to_integer(Text) of
        N when N >= 0 -> N;
        _ -> bad('bad-request', <<"RSM max must not be negative">>)
    catch
        error:badarg -> bad('bad-request', <<"RSM max is not a number">>)
    end.

%%% Finding a page

%% @doc The page of a query, with Fetch and Count reading one user's
%% archive (throng_storage:mam_query/5 and mam_count/4). The set is counted
%% once: the same read gives the index of the page's first message (the
%% messages of the set below it; archive ids are positive).
-spec page(query(), fetch(), count()) -> page().
page(#{filter := F, max := Max, 'after' := After, before := Before}, Fetch, Count) ->
    Walked = narrow(narrow(F, 'after', After), before, Before),
    Direction = case Before of
                    undefined -> forward;
                    _ -> backward
                end,
    Read = Fetch(Walked, Direction, Max + 1),
    Complete = length(Read) =< Max,
    Messages = case Direction of
                   forward -> lists:sublist(Read, Max);
                   backward -> lists:nthtail(length(Read) - min(Max, length(Read)), Read)
               end,
    {Size, Index} = case Messages of
                        [] -> {N, 0} = Count(F, 0),
                              {N, undefined};
                        [#mam_msg{id = First} | _] -> Count(F, First)
                    end,
    #{messages => Messages, complete => Complete, count => Size, index => Index}.

narrow(F, _, undefined) -> F;
narrow(F, _, last) -> F;
narrow(#mam_filter{min = Min} = F, 'after', Id) -> F#mam_filter{min = max(Min, Id + 1)};
narrow(#mam_filter{max = Max} = F, before, Id) -> F#mam_filter{max = min(Max, max(0, Id - 1))}.

%%% The answer

%% @doc One message of the page as a result: `<result/>' with the id the
%% client sees, the stored stanza forwarded with the time it was archived.
%% From and to are the session's to set.
-spec result_message(binary(), binary() | undefined, binary(), #mam_msg{}) -> #xmlel{}.
result_message(NS, QueryId, ClientId, #mam_msg{id = Id, packet = Packet}) ->
    {Stanza, _} = throng_xml_el:parse_el(Packet, 1000),
    Forwarded = throng_stanza:forwarded([throng_stanza:delay(Id, undefined)], Stanza, first),
    Result = #xmlel{name = <<"result">>,
                    attrs = [{<<"xmlns">>, NS}] ++ [{<<"queryid">>, QueryId} || QueryId =/= undefined]
                        ++ [{<<"id">>, ClientId}],
                    children = [Forwarded]},
    #xmlel{name = <<"message">>,
           attrs = [{<<"id">>, integer_to_binary(erlang:unique_integer([positive]))}],
           children = [Result]}.

%% @doc The `<fin/>' of a page, with Encode giving the ids clients see.
-spec fin(binary(), page(), fun((non_neg_integer()) -> binary())) -> #xmlel{}.
fin(NS, #{messages := Messages, complete := Complete, count := Count, index := Index}, Encode) ->
    Ends = case Messages of
               [] -> [];
               [#mam_msg{id = First} | _] ->
                   #mam_msg{id = Last} = lists:last(Messages),
                   [#xmlel{name = <<"first">>, attrs = [{<<"index">>, integer_to_binary(Index)}],
                           children = [{xmlcdata, Encode(First)}]},
                    #xmlel{name = <<"last">>, children = [{xmlcdata, Encode(Last)}]}]
           end,
    Set = #xmlel{name = <<"set">>, attrs = [{<<"xmlns">>, ?NS_RSM}],
                 children = Ends ++ [#xmlel{name = <<"count">>,
                                            children = [{xmlcdata, integer_to_binary(Count)}]}]},
    #xmlel{name = <<"fin">>,
           attrs = [{<<"xmlns">>, NS}, {<<"complete">>, atom_to_binary(Complete)}],
           children = [Set]}.

%% @doc The form of the fields a query may use (XEP-0313 §4.1.5).
-spec form(binary()) -> #xmlel{}.
form(NS) ->
    Field = fun(Var, Type, Children) ->
                    #xmlel{name = <<"field">>, attrs = [{<<"type">>, Type}, {<<"var">>, Var}],
                           children = Children}
            end,
    Open = #xmlel{name = <<"validate">>,
                  attrs = [{<<"xmlns">>, <<"http://jabber.org/protocol/xdata-validate">>},
                           {<<"datatype">>, <<"xs:string">>}],
                  children = [#xmlel{name = <<"open">>}]},
    X = #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, ?NS_DATA}, {<<"type">>, <<"form">>}],
               children = [Field(<<"FORM_TYPE">>, <<"hidden">>,
                                 [#xmlel{name = <<"value">>, children = [{xmlcdata, NS}]}]),
                           Field(<<"with">>, <<"jid-single">>, []),
                           Field(<<"start">>, <<"text-single">>, []),
                           Field(<<"end">>, <<"text-single">>, []),
                           Field(<<"before-id">>, <<"text-single">>, []),
                           Field(<<"after-id">>, <<"text-single">>, []),
                           Field(<<"ids">>, <<"list-multi">>, [Open])]},
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, NS}], children = [X]}.
