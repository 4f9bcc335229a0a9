%%% The message archive in files (throng_archive_files): queries and counts
%%% against a model (a list), across the chunks a filter reads in; a cut
%%% (retention) keeps the newest part; the writer's log applied twice
%%% changes nothing.
-module(throng_archive_files_tests).

-include("throng_proper.hrl").

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

-import(proper_types, [choose/2, elements/1, list/1, oneof/1, vector/2]).

-define(F, throng_archive_files).
-define(U, <<"alice">>).
-define(S, <<"localhost">>).

check(Name, Prop, N) ->
    {Name, {timeout, 300,
            fun() -> ?assertEqual(true, proper:quickcheck(Prop, [{numtests, N}, quiet])) end}}.

peers() ->
    [{<<"bob@localhost">>, <<>>}, {<<"bob@localhost">>, <<"phone">>},
     {<<"carol@localhost">>, <<"x">>}, {<<"dave@example.org">>, <<>>}].

%% An archive: a count, and for each message a gap to the previous id
%% (ids that only increase) and a peer.
archive_gen() ->
    ?LET(N, oneof([choose(0, 20), choose(200, 700)]),
         vector(N, {choose(1, 3), elements(peers())})).

filter_gen() ->
    ?LET({Min, Span, With, Ids},
         {oneof([0, choose(0, 2500)]), oneof([infinity, choose(0, 2500)]),
          oneof([any, {<<"bob@localhost">>, any}, {<<"bob@localhost">>, <<"phone">>},
                 {<<"carol@localhost">>, any}, {<<"nobody@localhost">>, any}]),
          oneof([any, list(choose(0, 2200))])},
         #mam_filter{min = Min,
                     max = case Span of infinity -> ?MAM_MAX_ID; _ -> Min + Span end,
                     with = With, ids = Ids}).

with_root(Fun) ->
    Root = filename:join("/tmp", "throng_archive_tests-" ++ os:getpid() ++ "-" ++
                             integer_to_list(erlang:unique_integer([positive]))),
    try Fun(Root)
    after file:del_dir_r(Root)
    end.

%% Writes the archive; returns the model (the messages in order).
write(Root, Spec) ->
    write(Root, Spec, length(Spec)).

%% Only the first InFiles messages go to the files.
write(Root, Spec, InFiles) ->
    A0 = ?F:open(Root, ?U, ?S),
    {A, Msgs, _} =
        lists:foldl(fun({Gap, {Bare, _} = Peer}, {A, Acc, Prev}) ->
                            Id = Prev + Gap,
                            Packet = <<"<message><body>", (integer_to_binary(Id))/binary,
                                       "</body></message>">>,
                            A1 = case length(Acc) < InFiles of
                                     true -> ?F:append(A, Id, Bare,
                                                       ?F:record(Id, Peer, Packet));
                                     false -> A
                                 end,
                            {A1, [#mam_msg{id = Id, peer = Peer, packet = Packet} | Acc], Id}
                    end, {A0, [], 0}, Spec),
    {A, lists:reverse(Msgs)}.

selects(#mam_filter{min = Min, max = Max, with = With, ids = Ids}, #mam_msg{id = Id, peer = P}) ->
    Id >= Min andalso Id =< Max andalso
        (Ids =:= any orelse lists:member(Id, Ids)) andalso
        case {With, P} of
            {any, _} -> true;
            {{B, any}, {B, _}} -> true;
            {{B, R}, {B, R}} -> true;
            _ -> false
        end.

queries_match_the_model_test_() ->
    check("a query's page and a count are the model's, from either end, with any filter, "
          "whether the newest messages are still pending, in the files, or both",
          ?FORALL({Spec, {Unwritten, Overlap}, Queries},
                  {archive_gen(), {oneof([0, choose(0, 40)]), choose(0, 5)},
                   list({filter_gen(), elements([forward, backward]),
                         choose(0, 300), choose(0, 2500)})},
                  with_root(
                    fun(Root) ->
                            InFiles = max(0, length(Spec) - Unwritten),
                            {A, Model} = write(Root, Spec, InFiles),
                            ?F:close(A),
                            Pending = lists:nthtail(max(0, InFiles - Overlap), Model),
                            lists:all(
                              fun({F, Dir, Limit, Before}) ->
                                      Sel = [M || M <- Model, selects(F, M)],
                                      Want = case Dir of
                                                 forward -> lists:sublist(Sel, Limit);
                                                 backward -> lists:nthtail(max(0, length(Sel) - Limit), Sel)
                                             end,
                                      Got = ?F:query(Root, ?U, ?S, F, {Dir, Limit}, Pending),
                                      Count = ?F:count(Root, ?U, ?S, {F, Before}, Pending),
                                      WantCount = {length(Sel),
                                                   length([I || #mam_msg{id = I} <- Sel, I < Before])},
                                      (Got =:= Want andalso Count =:= WantCount) orelse
                                          begin
                                              io:format("~p ~p ~p:~n got ~p~n want ~p~n ~p ~p~n",
                                                        [F, Dir, Limit, ids(Got), ids(Want),
                                                         Count, WantCount]),
                                              false
                                          end
                              end, Queries)
                    end)), 60).

cut_keeps_the_newest_test_() ->
    check("cuts one after another keep the ids from Before on and at most Max of the newest; "
          "each says how many went; a small cut rewrites nothing, reopening sees the same",
          ?FORALL({Spec, Cuts},
                  {archive_gen(), ?LET(K, choose(1, 3),
                                       vector(K, {choose(0, 2200), oneof([infinity, choose(0, 800)])}))},
                  with_root(
                    fun(Root) ->
                            {A0, Model0} = write(Root, Spec),
                            %% Dead: the entries cut off before and still in the files.
                            {Final, ModelN, Ok, _} =
                                lists:foldl(
                                  fun(_, {deleted, _, _, _} = Acc) ->
                                          Acc;
                                     ({Before, Max}, {A, Model, OkSoFar, Dead}) ->
                                          Kept0 = [M || #mam_msg{id = Id} = M <- Model, Id >= Before],
                                          Kept = case Max of
                                                     infinity -> Kept0;
                                                     _ -> lists:nthtail(max(0, length(Kept0) - Max), Kept0)
                                                 end,
                                          DatSize = filelib:file_size(dat_path(Root)),
                                          {Gone, A1} = ?F:keep_from(Root, A, Before, Max),
                                          Got = ?F:query(Root, ?U, ?S, #mam_filter{}, {forward, 100000}, []),
                                          %% Less cut off (now and before) than kept: the
                                          %% records stay where they are.
                                          Gone0 = length(Model) - length(Kept),
                                          Small = Dead + Gone0 < length(Kept),
                                          Rewritten = A1 =/= deleted andalso
                                              filelib:file_size(dat_path(Root)) =/= DatSize,
                                          {A1, Kept,
                                           OkSoFar andalso Gone =:= Gone0
                                           andalso Got =:= Kept
                                           andalso (Kept =/= [] orelse A1 =:= deleted orelse Model =:= [])
                                           andalso not (Small andalso Rewritten),
                                           case Rewritten of
                                               true -> 0;
                                               false -> Dead + Gone0
                                           end}
                                  end, {A0, Model0, true, 0}, Cuts),
                            Final =:= deleted orelse ?F:close(Final),
                            Reopened = case Final of
                                           deleted -> [];
                                           _ -> A = ?F:open(Root, ?U, ?S), ?F:close(A),
                                                ?F:query(Root, ?U, ?S, #mam_filter{}, {forward, 100000}, [])
                                       end,
                            Ok andalso (Final =:= deleted orelse Reopened =:= ModelN)
                    end)), 60).

dat_path(Root) ->
    case filelib:wildcard(filename:join([Root, "localhost", "*", "*.dat"])) of
        [P] -> P;
        [] -> filename:join(Root, "none")
    end.

log_applied_twice_changes_nothing_test() ->
    with_root(
      fun(Root) ->
              Recs = [?F:wal_record({?U, ?S}, store,
                                    ?F:record(Id, {<<"bob@localhost">>, <<>>}, <<"<m/>">>))
                      || Id <- lists:seq(1, 10)] ++
                  [?F:wal_record({?U, ?S}, {keep, 4, infinity}, <<>>),
                   ?F:wal_record({<<"carol">>, ?S}, store,
                                 ?F:record(1, {<<"bob@localhost">>, <<>>}, <<"<m/>">>)),
                   ?F:wal_record({<<"carol">>, ?S}, delete, <<>>)],
              Log = filename:join(?F:wal_dir(Root), "0-1.log"),
              ok = filelib:ensure_dir(Log),
              %% The last record cut short, as a crash leaves it.
              Whole = iolist_to_binary(Recs),
              Cut = ?F:wal_record({?U, ?S}, store, ?F:record(11, {<<"b@l">>, <<>>}, <<"<m/>">>)),
              ok = file:write_file(Log, [Whole, binary:part(Cut, 0, byte_size(Cut) - 3)]),
              {13, Open} = ?F:replay_wal(Log, {Root, #{}}),
              ?F:close_all(Open),
              {13, Open2} = ?F:replay_wal(Log, {Root, #{}}),
              ?F:close_all(Open2),
              ?assertEqual(lists:seq(4, 10),
                           ids(?F:query(Root, ?U, ?S, #mam_filter{}, {forward, 100}, []))),
              ?assertEqual([], ?F:query(Root, <<"carol">>, ?S, #mam_filter{}, {forward, 100}, [])),
              ?assertEqual([?U], ?F:users(Root, ?S))
      end).

ids(Msgs) ->
    [Id || #mam_msg{id = Id} <- Msgs].
