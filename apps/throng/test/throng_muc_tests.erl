%% @doc The pure parts of the MUC service: the XEP-0045 privilege tables
%% (throng_muc_rules), history selection (throng_muc_history, with a PropEr
%% property against a model) and the configuration form (throng_muc_config).
-module(throng_muc_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

-include("throng_proper.hrl").

-define(R, throng_muc_rules).
-define(H, throng_muc_history).

%%% Roles and affiliations

default_role_test() ->
    ?assertEqual([moderator, moderator, participant, participant, none],
                 [?R:default_role(A, false) || A <- [owner, admin, member, none, outcast]]),
    ?assertEqual(visitor, ?R:default_role(none, true)),
    ?assertEqual(participant, ?R:default_role(member, true)).

%% {Actor, Target, NewRole, Expected}: §8 (moderators: kick, voice), §9.6
%% and §9.7 (admins: moderator), the not-allowed targets.
role_table_test_() ->
    Table =
        [{{none, participant}, {none, participant}, none, {error, forbidden}},
         {{none, participant}, {none, visitor}, participant, {error, forbidden}},
         {{none, moderator}, {none, participant}, none, ok},
         {{none, moderator}, {none, participant}, visitor, ok},
         {{none, moderator}, {none, visitor}, participant, ok},
         {{none, moderator}, {member, participant}, none, {error, 'not-allowed'}},
         {{member, moderator}, {member, participant}, none, ok},
         {{admin, moderator}, {admin, moderator}, none, {error, 'not-allowed'}},
         {{owner, moderator}, {admin, moderator}, none, {error, 'not-allowed'}},
         {{owner, moderator}, {owner, moderator}, visitor, {error, 'not-allowed'}},
         {{none, moderator}, {none, participant}, moderator, {error, forbidden}},
         {{admin, moderator}, {none, participant}, moderator, ok},
         {{admin, moderator}, {member, moderator}, participant, ok},
         {{member, moderator}, {none, moderator}, participant, {error, forbidden}},
         {{owner, moderator}, {admin, moderator}, participant, {error, 'not-allowed'}},
         %% §8.4, §9.7: a moderator may not take voice or moderator from an
         %% owner or admin: not-allowed (the target), before forbidden (the
         %% actor's privileges).
         {{none, moderator}, {owner, moderator}, visitor, {error, 'not-allowed'}},
         {{none, moderator}, {owner, moderator}, participant, {error, 'not-allowed'}},
         %% Granting the role an occupant has is a no-op, for those who may
         %% grant it.
         {{owner, moderator}, {admin, moderator}, moderator, ok},
         {{admin, moderator}, {owner, moderator}, moderator, ok},
         {{none, moderator}, {admin, moderator}, moderator, {error, forbidden}}],
    [?_assertEqual({A, T, N, E}, {A, T, N, ?R:role_change(A, T, N)}) || {A, T, N, E} <- Table].

%% {Actor, Old, New, Owners, Expected}: §9 (admins), §10 (owners).
affiliation_table_test_() ->
    Table =
        [{owner, none, admin, 1, ok},
         {owner, none, owner, 1, ok},
         {owner, admin, outcast, 1, ok},
         {owner, owner, member, 1, {error, conflict}},
         {owner, owner, member, 2, ok},
         {owner, owner, owner, 1, ok},
         {admin, none, member, 1, ok},
         {admin, member, outcast, 1, ok},
         {admin, outcast, none, 1, ok},
         {admin, none, admin, 1, {error, forbidden}},
         {admin, none, owner, 1, {error, forbidden}},
         {admin, admin, outcast, 1, {error, 'not-allowed'}},
         {admin, owner, none, 1, {error, 'not-allowed'}},
         {member, none, member, 1, {error, forbidden}},
         {none, none, outcast, 1, {error, forbidden}},
         {outcast, none, member, 1, {error, forbidden}}],
    [?_assertEqual({A, O, N, E}, {A, O, N, ?R:affiliation_change(A, O, N, C)})
     || {A, O, N, C, E} <- Table].

lists_test() ->
    ?assert(?R:may_read_affiliations(admin, member)),
    ?assert(?R:may_read_affiliations(admin, outcast)),
    ?assertNot(?R:may_read_affiliations(member, member)),
    ?assertNot(?R:may_read_affiliations(admin, owner)),
    ?assert(?R:may_read_affiliations(owner, admin)),
    ?assert(?R:may_read_roles(moderator)),
    ?assertNot(?R:may_read_roles(participant)).

%%% History

history_limits_test() ->
    H = lists:foldl(fun(I, Acc) -> ?H:add(I * 1000000, msg(I), Acc) end, ?H:new(3),
                    lists:seq(1, 5)),
    Now = 6 * 1000000,
    ?assertEqual([3, 4, 5], nums(?H:select(#{}, Now, H))),
    ?assertEqual([4, 5], nums(?H:select(#{maxstanzas => 2}, Now, H))),
    ?assertEqual([], nums(?H:select(#{maxchars => 0}, Now, H))),
    ?assertEqual([5], nums(?H:select(#{seconds => 1}, Now, H))),
    ?assertEqual([4, 5], nums(?H:select(#{since => 4 * 1000000}, Now, H))),
    ?assertEqual([], nums(?H:select(#{maxstanzas => 0}, Now, H))),
    ?assertEqual([5], nums(?H:select(#{maxstanzas => 3, seconds => 1}, Now, H))),
    ?assertEqual([4, 5], nums(?H:select(#{}, Now, ?H:resize(2, H)))),
    ?assertEqual([], nums(?H:select(#{}, Now, ?H:add(1, msg(1), ?H:new(0))))).

history_request_test() ->
    H = #xmlel{name = <<"history">>, attrs = [{<<"maxstanzas">>, <<"3">>}, {<<"maxchars">>, <<"x">>},
                                              {<<"since">>, <<"1970-01-01T00:00:10Z">>}]},
    ?assertEqual(#{maxstanzas => 3, since => 10000000}, ?H:request(H)),
    ?assertEqual(#{}, ?H:request(undefined)).

%% The selection equals a model: the newest that pass every limit, oldest first.
history_model_test() ->
    Prop = ?FORALL({Max, Sizes, Req},
                   {proper_types:range(0, 6), proper_types:list(proper_types:range(1, 4)),
                    request_gen()},
                   begin
                       Msgs = lists:zip(lists:seq(1, length(Sizes)), Sizes),
                       H = lists:foldl(fun({I, S}, Acc) -> ?H:add(I * 1000000, sized(I, S), Acc) end,
                                       ?H:new(Max), Msgs),
                       Now = (length(Sizes) + 1) * 1000000,
                       nums(?H:select(Req, Now, H)) =:= model(Max, Msgs, Req, Now)
                   end),
    ?assert(proper:quickcheck(Prop, [{numtests, 300}, quiet])).

request_gen() ->
    proper_types:bind(
      {proper_types:union([none, proper_types:range(0, 8)]),
       proper_types:union([none, proper_types:range(0, 400)]),
       proper_types:union([none, proper_types:range(0, 8)])},
      fun({M, C, S}) ->
              maps:from_list([{maxstanzas, M} || M =/= none] ++ [{maxchars, C} || C =/= none] ++
                                 [{seconds, S} || S =/= none])
      end, false).

model(Max, Msgs, Req, Now) ->
    Kept = lists:reverse(lists:sublist(lists:reverse(Msgs), Max)),
    Newest = lists:reverse([M || {I, _} = M <- Kept,
                                 not maps:is_key(seconds, Req)
                                     orelse I * 1000000 >= Now - maps:get(seconds, Req) * 1000000]),
    Counted = lists:sublist(Newest, maps:get(maxstanzas, Req, length(Newest))),
    Sized = take_chars(Counted, maps:get(maxchars, Req, infinity)),
    lists:reverse([I || {I, _} <- Sized]).

take_chars(Ms, infinity) -> Ms;
take_chars([{I, S} | Rest], Left) ->
    Size = iolist_size(throng_xml:to_iolist(sized(I, S))),
    case Size =< Left of
        true -> [{I, S} | take_chars(Rest, Left - Size)];
        false -> []
    end;
take_chars([], _) -> [].

msg(I) -> #xmlel{name = <<"message">>, attrs = [{<<"n">>, integer_to_binary(I)}]}.
sized(I, S) -> #xmlel{name = <<"message">>, attrs = [{<<"n">>, integer_to_binary(I)}],
                      children = [{xmlcdata, binary:copy(<<"x">>, S * 10)}]}.
nums(Sel) -> [binary_to_integer(throng_xml:attr(<<"n">>, El)) || {_, El} <- Sel].

%%% Configuration form

limits() -> #{max_users => 100, history_size => 20}.

config_parse_test() ->
    D = throng_muc_config:default(limits()),
    ?assertEqual({ok, D}, throng_muc_config:parse(#{}, D, limits())),
    {ok, C} = throng_muc_config:parse(#{<<"muc#roomconfig_persistentroom">> => [<<"true">>],
                                        <<"muc#roomconfig_roomname">> => [<<"N">>],
                                        <<"muc#roomconfig_whois">> => [<<"anyone">>],
                                        <<"muc#roomconfig_maxusers">> => [<<"50">>],
                                        <<"unknown#field">> => [<<"x">>]}, D, limits()),
    ?assertMatch(#{persistent := true, title := <<"N">>, whois := anyone, max_users := 50}, C),
    ?assertMatch({error, _}, throng_muc_config:parse(#{<<"muc#roomconfig_maxusers">> => [<<"101">>]},
                                                     D, limits())),
    ?assertMatch({error, _}, throng_muc_config:parse(#{<<"muc#roomconfig_moderatedroom">> => [<<"yes">>]},
                                                     D, limits())),
    ?assertMatch({error, _}, throng_muc_config:parse(
                               #{<<"muc#roomconfig_passwordprotectedroom">> => [<<"1">>]}, D, limits())),
    ?assertMatch({error, _}, throng_muc_config:parse(#{<<"FORM_TYPE">> => [<<"other">>]}, D, limits())).

%% The form shows the values parse/3 reads back.
config_round_trip_test() ->
    D = throng_muc_config:default(limits()),
    C = D#{title := <<"T">>, members_only := true, history_length := 7, whois := anyone},
    X = throng_muc_config:form(C, #{}),
    {ok, Values} = throng_xdata:parse(#xmlel{name = <<"query">>,
                                             children = [throng_xml:set_attr(<<"type">>, <<"submit">>, X)]}),
    ?assertEqual({ok, C}, throng_muc_config:parse(Values, D, limits())).

features_test() ->
    D = throng_muc_config:default(limits()),
    F = throng_muc_config:features(D),
    [?assert(lists:member(X, F)) || X <- [<<"muc_temporary">>, <<"muc_public">>, <<"muc_open">>,
                                         <<"muc_unmoderated">>, <<"muc_semianonymous">>,
                                         <<"muc_unsecured">>]].
