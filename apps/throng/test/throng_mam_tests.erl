%%% The pure parts of XEP-0313 archiving: the ids clients see
%%% (throng_mam_id), the query's form and RSM and the paging over an archive
%%% (throng_mam_query, against a model of storage), which messages are
%%% archivable and the preferences' element (throng_mod_mam).
-module(throng_mam_tests).

-include("throng_proper.hrl").

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

-import(proper_types, [choose/2, elements/1, list/1, oneof/1, binary/0, integer/2]).

-define(Q, throng_mam_query).
-define(KEY, <<"0123456789abcdef">>).

check(Name, Prop, N) ->
    {Name, {timeout, 120,
            fun() -> ?assertEqual(true, proper:quickcheck(Prop, [{numtests, N}, quiet])) end}}.

%%% Ids

id_round_trip_test_() ->
    check("an id comes back from its client form; the form is 22 URL-safe characters",
          ?FORALL(Id, integer(0, 16#7fffffffffffffff),
                  begin
                      Text = throng_mam_id:encode(?KEY, Id),
                      byte_size(Text) =:= 22 andalso
                          lists:all(fun(C) -> lists:member(C, url_safe()) end,
                                    binary_to_list(Text)) andalso
                          throng_mam_id:decode(?KEY, Text) =:= {ok, Id}
                  end), 2000).

url_safe() ->
    lists:seq($a, $z) ++ lists:seq($A, $Z) ++ lists:seq($0, $9) ++ "-_".

forged_ids_are_refused_test_() ->
    check("strings this server did not make are refused",
          ?FORALL(Text, oneof([binary(), proper_types:vector(22, elements(url_safe()))]),
                  throng_mam_id:decode(?KEY, iolist_to_binary([Text])) =:= error), 2000).

other_key_refuses_test() ->
    Text = throng_mam_id:encode(?KEY, 1700000000000000),
    ?assertEqual(error, throng_mam_id:decode(<<"fedcba9876543210">>, Text)),
    %% One character changed: another block, refused.
    <<C, Rest/binary>> = Text,
    Other = case C of $A -> $B; _ -> $A end,
    ?assertEqual(error, throng_mam_id:decode(?KEY, <<Other, Rest/binary>>)).

ids_say_nothing_of_their_order_test() ->
    %% Consecutive ids look unrelated: no common prefix to speak of.
    [A, B] = [throng_mam_id:encode(?KEY, N) || N <- [1700000000000000, 1700000000000001]],
    ?assertNotEqual(binary:part(A, 0, 4), binary:part(B, 0, 4)).

next_increases_test() ->
    Ids = [throng_mam_id:next() || _ <- lists:seq(1, 10000)],
    ?assertEqual(Ids, lists:usort(Ids)),
    Now = os:system_time(microsecond),
    ?assert(lists:last(Ids) =< Now + 10000).

next_is_unique_across_processes_test() ->
    Self = self(),
    Pids = [spawn_link(fun() -> Self ! {self(), [throng_mam_id:next() || _ <- lists:seq(1, 2000)]} end)
            || _ <- lists:seq(1, 8)],
    All = lists:append([receive {P, L} -> L end || P <- Pids]),
    ?assertEqual(length(All), length(lists:usort(All))).

%%% Parsing a query

decode(<<"id", N/binary>>) -> {ok, binary_to_integer(N)};
decode(_) -> error.

limits() -> #{default => 50, cap => 250}.

query(Children) ->
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, <<"urn:xmpp:mam:2">>}], children = Children}.

form(Fields) ->
    #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, <<"jabber:x:data">>}, {<<"type">>, <<"submit">>}],
           children = [field(<<"FORM_TYPE">>, [<<"urn:xmpp:mam:2">>]) | [field(V, Vs) || {V, Vs} <- Fields]]}.

field(Var, Values) ->
    #xmlel{name = <<"field">>, attrs = [{<<"var">>, Var}],
           children = [#xmlel{name = <<"value">>, children = [{xmlcdata, V}]} || V <- Values]}.

rsm(Children) ->
    #xmlel{name = <<"set">>, attrs = [{<<"xmlns">>, <<"http://jabber.org/protocol/rsm">>}],
           children = [#xmlel{name = N, children = [{xmlcdata, V} || V =/= <<>>]} || {N, V} <- Children]}.

parse(Children) ->
    ?Q:parse(query(Children), fun decode/1, limits()).

empty_query_reads_everything_test() ->
    {ok, Q} = parse([]),
    ?assertMatch(#{filter := #mam_filter{min = 0, max = ?MAM_MAX_ID, with = any, ids = any},
                   named := [], max := 50, 'after' := undefined, before := undefined,
                   flip := false, queryid := undefined}, Q).

form_filters_test() ->
    {ok, _} = application:ensure_all_started(stringprep),
    {ok, #{filter := F, named := Named}} =
        parse([form([{<<"with">>, [<<"Juliet@Capulet.lit">>]},
                     {<<"start">>, [<<"2010-06-07T00:00:00Z">>]},
                     {<<"end">>, [<<"2010-07-07T13:23:54.5Z">>]}])]),
    ?assertEqual({<<"juliet@capulet.lit">>, any}, F#mam_filter.with),
    ?assertEqual(1275868800000000, F#mam_filter.min),
    ?assertEqual(1278509034500000, F#mam_filter.max),
    ?assertEqual([], Named).

full_jid_with_test() ->
    {ok, #{filter := F}} = parse([form([{<<"with">>, [<<"juliet@capulet.lit/balcony">>]}])]),
    ?assertEqual({<<"juliet@capulet.lit">>, <<"balcony">>}, F#mam_filter.with).

ids_fields_are_named_test() ->
    {ok, #{filter := F, named := Named}} =
        parse([form([{<<"after-id">>, [<<"id10">>]}, {<<"before-id">>, [<<"id20">>]},
                     {<<"ids">>, [<<"id12">>, <<"id15">>]}])]),
    ?assertEqual({11, 19, [12, 15]}, {F#mam_filter.min, F#mam_filter.max, F#mam_filter.ids}),
    ?assertEqual([10, 12, 15, 20], lists:sort(Named)).

rsm_test() ->
    {ok, Q1} = parse([rsm([{<<"max">>, <<"10">>}, {<<"after">>, <<"id7">>}])]),
    ?assertMatch(#{max := 10, 'after' := 7, before := undefined, named := [7]}, Q1),
    {ok, Q2} = parse([rsm([{<<"max">>, <<"5">>}, {<<"before">>, <<>>}])]),
    ?assertMatch(#{max := 5, before := last, named := []}, Q2),
    {ok, Q3} = parse([rsm([{<<"max">>, <<"100000">>}, {<<"before">>, <<"id9">>}]),
                      #xmlel{name = <<"flip-page">>}]),
    ?assertMatch(#{max := 250, before := 9, flip := true}, Q3),
    {ok, Q4} = ?Q:parse((query([]))#xmlel{attrs = [{<<"xmlns">>, <<"urn:xmpp:mam:2">>},
                                                    {<<"queryid">>, <<"f27">>}]},
                        fun decode/1, limits()),
    ?assertMatch(#{queryid := <<"f27">>, max := 50}, Q4).

bad_queries_test() ->
    Err = fun(Children) -> {error, Cond, _} = parse(Children), Cond end,
    ?assertEqual('feature-not-implemented', Err([form([{<<"include-groupchat">>, [<<"true">>]}])])),
    ?assertEqual('bad-request', Err([form([{<<"start">>, [<<"yesterday">>]}])])),
    ?assertEqual('jid-malformed', Err([form([{<<"with">>, [<<"@@">>]}])])),
    ?assertEqual('item-not-found', Err([form([{<<"after-id">>, [<<"nonsense">>]}])])),
    ?assertEqual('item-not-found', Err([rsm([{<<"after">>, <<"nonsense">>}])])),
    ?assertEqual('bad-request', Err([rsm([{<<"max">>, <<"-1">>}])])),
    ?assertEqual('bad-request', Err([rsm([{<<"max">>, <<"ten">>}])])),
    ?assertEqual('bad-request', Err([form([{<<"with">>, [<<"a@b">>, <<"c@d">>]}])])),
    ?assertEqual('feature-not-implemented', Err([rsm([{<<"index">>, <<"3">>}])])).

%% The form's fields as they come: a field without a var (or an empty one)
%% is an unknown field; a var given twice is applied twice, in order.
form_fields_as_they_come_test() ->
    #xmlel{children = Fields} = Form = form([{<<"start">>, [<<"2010-06-07T00:00:00Z">>]}]),
    NoVar = #xmlel{name = <<"field">>, children = [#xmlel{name = <<"value">>,
                                                           children = [{xmlcdata, <<"x">>}]}]},
    ?assertEqual({error, 'feature-not-implemented', <<"unknown field: ">>},
                 parse([Form#xmlel{children = Fields ++ [NoVar]}])),
    ?assertEqual({error, 'feature-not-implemented', <<"unknown field: ">>},
                 parse([Form#xmlel{children = Fields ++ [field(<<>>, [])]}])),
    {ok, #{filter := F, named := Named}} =
        parse([form([{<<"start">>, [<<"2010-06-07T00:00:00Z">>]},
                     {<<"start">>, [<<"2010-06-01T00:00:00Z">>]},
                     {<<"after-id">>, [<<"id10">>]}, {<<"after-id">>, [<<"id5">>]},
                     {<<"ids">>, [<<"id12">>]}, {<<"ids">>, [<<"id15">>]}])]),
    ?assertEqual({1275868800000000, [15]}, {F#mam_filter.min, F#mam_filter.ids}),
    ?assertEqual([15, 12, 5, 10], Named).

%%% Paging, against a model of storage: a sorted list of messages

archive_gen() ->
    ?LET(Ids, list(integer(1, 400)),
         [#mam_msg{id = Id, peer = {<<"p">>, R}, packet = <<>>}
          || {Id, R} <- lists:zip(lists:usort(Ids),
                                  [lists:nth(1 + (I rem 3), [<<"a">>, <<"b">>, <<"c">>])
                                   || I <- lists:seq(1, length(lists:usort(Ids)))])]).

filter_gen() ->
    ?LET({Min, Span, With}, {integer(0, 200), integer(0, 400),
                             elements([any, {<<"p">>, any}, {<<"p">>, <<"a">>}, {<<"q">>, any}])},
         #mam_filter{min = Min, max = Min + Span, with = With}).

selects(#mam_filter{min = Min, max = Max, with = With, ids = Ids}, #mam_msg{id = Id, peer = {B, R}}) ->
    Id >= Min andalso Id =< Max andalso (Ids =:= any orelse lists:member(Id, Ids)) andalso
        case With of
            any -> true;
            {B, any} -> true;
            {B, R} -> true;
            _ -> false
        end.

fetch(Archive) ->
    fun(F, Dir, N) ->
            Sel = [M || M <- Archive, selects(F, M)],
            case Dir of
                forward -> lists:sublist(Sel, N);
                backward -> lists:nthtail(max(0, length(Sel) - N), Sel)
            end
    end.

count(Archive) ->
    fun(F, Before) ->
            Sel = [Id || #mam_msg{id = Id} = M <- Archive, selects(F, M)],
            {length(Sel), length([Id || Id <- Sel, Id < Before])}
    end.

q(F, Max, After, Before) ->
    #{filter => F, named => [], max => Max, 'after' => After, before => Before, flip => false,
      queryid => undefined}.

%% Walks the set page by page with <after> (forward) or <before> (backward)
%% until a page says complete; the pages seen, in the order of the walk.
walk(Archive, F, Max, Dir) ->
    walk(Archive, F, Max, Dir, undefined, [], 1000).

walk(_Archive, _F, _Max, _Dir, _From, _Pages, 0) ->
    error(no_end);
walk(Archive, F, Max, Dir, From, Pages, Left) ->
    Q = case Dir of
            forward -> q(F, Max, From, undefined);
            backward -> q(F, Max, undefined, case From of undefined -> last; _ -> From end)
        end,
    #{messages := Msgs, complete := Complete} = Page = ?Q:page(Q, fetch(Archive), count(Archive)),
    Next = case {Dir, Msgs} of
               {_, []} -> undefined;
               {forward, _} -> (lists:last(Msgs))#mam_msg.id;
               {backward, [First | _]} -> First#mam_msg.id
           end,
    case Complete orelse Msgs =:= [] of
        true -> lists:reverse([Page | Pages]);
        false -> walk(Archive, F, Max, Dir, Next, [Page | Pages], Left - 1)
    end.

paging_forward_test_() ->
    check("<after> pages cover the set once, in order; count, index and complete are right",
          ?FORALL({Archive, F, Max}, {archive_gen(), filter_gen(), integer(1, 7)},
                  begin
                      Set = [M || M <- Archive, selects(F, M)],
                      Pages = walk(Archive, F, Max, forward),
                      Seen = lists:append([Ms || #{messages := Ms} <- Pages]),
                      Seen =:= Set andalso
                          lists:all(fun(#{count := C}) -> C =:= length(Set) end, Pages) andalso
                          indexes_right(Pages, Set) andalso
                          lists:all(fun(#{messages := Ms}) -> length(Ms) =< Max end, Pages) andalso
                          completes_right(Pages, Set, fun(Ms, Acc) -> Acc ++ Ms end)
                  end), 500).

paging_backward_test_() ->
    check("<before/> then <before> pages cover the set once from its end; each page in order",
          ?FORALL({Archive, F, Max}, {archive_gen(), filter_gen(), integer(1, 7)},
                  begin
                      Set = [M || M <- Archive, selects(F, M)],
                      Pages = walk(Archive, F, Max, backward),
                      Seen = lists:append(lists:reverse([Ms || #{messages := Ms} <- Pages])),
                      Seen =:= Set andalso indexes_right(Pages, Set) andalso
                          lists:all(fun(#{messages := Ms}) -> Ms =:= lists:keysort(#mam_msg.id, Ms)
                                    end, Pages) andalso
                          completes_right(Pages, Set, fun(Ms, Acc) -> Ms ++ Acc end)
                  end), 500).

%% A page is complete exactly when the pages so far hold the whole set, and
%% only an empty set gives an empty page.
completes_right(Pages, Set, Add) ->
    {Right, _} = lists:foldl(
                   fun(#{messages := Ms, complete := C}, {Ok, Acc0}) ->
                           Acc = Add(Ms, Acc0),
                           {Ok andalso C =:= (Acc =:= Set) andalso (Ms =/= [] orelse Set =:= []),
                            Acc}
                   end, {true, []}, Pages),
    Right.

indexes_right(Pages, Set) ->
    lists:all(fun(#{messages := []}) -> true;
                 (#{messages := [First | _], index := I}) ->
                      lists:nth(I + 1, Set) =:= First
              end, Pages).

max_zero_counts_only_test() ->
    Archive = [#mam_msg{id = N, peer = {<<"p">>, <<>>}, packet = <<>>} || N <- [1, 2, 3]],
    ?assertMatch(#{messages := [], count := 3, complete := false, index := undefined},
                 ?Q:page(q(#mam_filter{}, 0, undefined, undefined), fetch(Archive), count(Archive))).

%%% The answer

result_message_test() ->
    Packet = <<"<message from='romeo@montague.lit/orchard' to='juliet@capulet.lit' type='chat'>"
               "<body>Hail</body></message>">>,
    M = ?Q:result_message(<<"urn:xmpp:mam:2">>, <<"q1">>, <<"ID">>,
                          #mam_msg{id = 1278800905000000, peer = {<<"romeo@montague.lit">>, <<"orchard">>},
                                   packet = Packet}),
    Result = throng_xml:subel(M, <<"result">>),
    ?assertEqual([{<<"xmlns">>, <<"urn:xmpp:mam:2">>}, {<<"queryid">>, <<"q1">>}, {<<"id">>, <<"ID">>}],
                 Result#xmlel.attrs),
    Fwd = throng_xml:subel(Result, <<"forwarded">>, <<"urn:xmpp:forward:0">>),
    ?assertEqual(<<"2010-07-10T22:28:25.000000Z">>,
                 throng_xml:attr(<<"stamp">>, throng_xml:subel(Fwd, <<"delay">>, ?NS_DELAY))),
    Inner = throng_xml:subel(Fwd, <<"message">>),
    ?assertEqual(?NS_CLIENT, throng_xml:ns(Inner)),
    ?assertEqual(<<"Hail">>, throng_xml:subel_cdata(Inner, <<"body">>)).

fin_test() ->
    Msgs = [#mam_msg{id = N, peer = {<<"p">>, <<>>}, packet = <<>>} || N <- [4, 5]],
    Fin = ?Q:fin(<<"urn:xmpp:mam:2">>, #{messages => Msgs, complete => true, count => 9, index => 3},
                 fun integer_to_binary/1),
    ?assertEqual(<<"<fin xmlns='urn:xmpp:mam:2' complete='true'><set xmlns='http://jabber.org/"
                   "protocol/rsm'><first index='3'>4</first><last>5</last><count>9</count></set>"
                   "</fin>">>, throng_xml:to_binary(Fin)),
    Empty = ?Q:fin(<<"urn:xmpp:mam:2">>, #{messages => [], complete => false, count => 0,
                                           index => undefined}, fun integer_to_binary/1),
    ?assertEqual(<<"<fin xmlns='urn:xmpp:mam:2' complete='false'><set xmlns='http://jabber.org/"
                   "protocol/rsm'><count>0</count></set></fin>">>, throng_xml:to_binary(Empty)).

%%% What is archived

msg(Type, Children) ->
    #xmlel{name = <<"message">>, attrs = [{<<"type">>, T} || T <- [Type], T =/= none],
           children = Children}.

body() -> #xmlel{name = <<"body">>, children = [{xmlcdata, <<"hi">>}]}.
el(Name, NS) -> #xmlel{name = Name, attrs = [{<<"xmlns">>, NS}]}.

archivable_test_() ->
    Hint = fun(N) -> el(N, <<"urn:xmpp:hints">>) end,
    Cases = [{true, msg(<<"chat">>, [body()])},
             {true, msg(<<"normal">>, [body()])},
             {true, msg(none, [body()])},
             {true, msg(<<"chat">>, [Hint(<<"store">>)])},
             {false, msg(<<"chat">>, [el(<<"active">>, <<"http://jabber.org/protocol/chatstates">>)])},
             {false, msg(<<"chat">>, [body(), Hint(<<"no-store">>)])},
             {false, msg(<<"chat">>, [body(), Hint(<<"no-permanent-store">>)])},
             {false, msg(<<"groupchat">>, [body()])},
             {false, msg(<<"headline">>, [body()])},
             {false, msg(<<"error">>, [body()])},
             {false, msg(<<"chat">>, [body(), el(<<"received">>, <<"urn:xmpp:carbons:2">>)])},
             {false, msg(<<"chat">>, [el(<<"sent">>, <<"urn:xmpp:carbons:2">>)])},
             {false, msg(none, [el(<<"result">>, <<"urn:xmpp:mam:2">>)])},
             {false, #xmlel{name = <<"iq">>, children = [body()]}},
             {false, msg(<<"chat">>, [el(<<"body">>, <<"urn:example:other">>)])}],
    [?_assertEqual(Want, throng_mod_mam:archivable(El)) || {Want, El} <- Cases].

%%% Preferences

prefs_round_trip_test() ->
    El = throng_mod_mam:prefs_el(<<"urn:xmpp:mam:2">>,
                                 {roster, [<<"romeo@montague.lit">>], [<<"a@b/c">>]}),
    ?assertEqual(<<"<prefs xmlns='urn:xmpp:mam:2' default='roster'><always><jid>romeo@montague.lit"
                   "</jid></always><never><jid>a@b/c</jid></never></prefs>">>,
                 throng_xml:to_binary(El)),
    ?assertEqual({ok, {roster, [<<"romeo@montague.lit">>], [<<"a@b/c">>]}},
                 throng_mod_mam:parse_prefs(El)).

prefs_are_normalized_and_lists_optional_test() ->
    {ok, _} = application:ensure_all_started(stringprep),
    P = #xmlel{name = <<"prefs">>, attrs = [{<<"default">>, <<"never">>}],
               children = [#xmlel{name = <<"always">>,
                                  children = [#xmlel{name = <<"jid">>,
                                                     children = [{xmlcdata, <<"Romeo@Montague.LIT">>}]}]}]},
    ?assertEqual({ok, {never, [<<"romeo@montague.lit">>], []}}, throng_mod_mam:parse_prefs(P)),
    ?assertEqual(error, throng_mod_mam:parse_prefs(P#xmlel{attrs = [{<<"default">>, <<"sometimes">>}]})),
    ?assertEqual(error, throng_mod_mam:parse_prefs(P#xmlel{attrs = []})).
