%% @doc The process that writes one shard's archive files: every ?APPLY_MS
%% ms it appends the messages pending in the shard's table (written there
%% and to the log by {@link throng_archive_writer}) to their archives, an
%% archive's messages in one go, then drops them from the table; it deletes
%% and cuts archives for the writer, and makes the checkpoints (apply what
%% is pending, sync the file system, keep the largest id given, delete the
%% log files that are no longer needed).
%%
%% At most ?MAX_OPEN archives are kept open (two file descriptors each),
%% the least recently written closed first.
-module(throng_archive_applier).
-behaviour(gen_server).

-export([start_link/2, catch_up/1, delete/3, keep/5, checkpoint/3]).
%% start_link/2: the supervisor's.
-ignore_xref([{start_link, 2}]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-define(APPLY_MS, 1000).
-define(MAX_OPEN, 32).
-define(CALL_TIMEOUT, 60000).

-record(st, {shard :: non_neg_integer(),
             root :: file:filename(),
             table :: atom(),
             writer :: atom(),
             open = #{} :: #{{binary(), binary()} => {throng_archive_files:arch(), integer()}},
             tick = 0 :: integer()}).

%%% API

-spec start_link(non_neg_integer(), file:filename()) -> {ok, pid()} | {error, term()}.
start_link(Shard, Root) ->
    gen_server:start_link({local, name(Shard)}, ?MODULE, {Shard, Root}, []).

%% @doc Applies everything pending now, and returns when it is done.
-spec catch_up(non_neg_integer()) -> ok.
catch_up(Shard) ->
    gen_server:call(name(Shard), catch_up, ?CALL_TIMEOUT).

%% @doc Deletes U's archive files (the writer dropped its pending messages).
-spec delete(non_neg_integer(), binary(), binary()) -> ok | {error, term()}.
delete(Shard, U, S) ->
    gen_server:call(name(Shard), {delete, U, S}, ?CALL_TIMEOUT).

%% @doc Cuts U's archive (what is pending included); how many went.
-spec keep(non_neg_integer(), binary(), binary(), non_neg_integer(), non_neg_integer() | infinity) ->
    {ok, non_neg_integer()} | {error, term()}.
keep(Shard, U, S, Before, Max) ->
    gen_server:call(name(Shard), {keep, U, S, Before, Max}, ?CALL_TIMEOUT).

%% @doc The writer started a new log: the Old ones go once what is pending
%% is in the files and on disk; Floor is the largest id given so far.
-spec checkpoint(non_neg_integer(), [file:filename()], non_neg_integer()) -> ok.
checkpoint(Shard, Old, Floor) ->
    gen_server:cast(name(Shard), {checkpoint, Old, Floor}).

name(0) -> throng_archive_applier_0;
name(1) -> throng_archive_applier_1;
name(2) -> throng_archive_applier_2;
name(3) -> throng_archive_applier_3;
name(4) -> throng_archive_applier_4;
name(5) -> throng_archive_applier_5;
name(6) -> throng_archive_applier_6;
name(7) -> throng_archive_applier_7.

%%% gen_server

-spec init({non_neg_integer(), file:filename()}) -> {ok, #st{}}.
init({Shard, Root}) ->
    process_flag(trap_exit, true),
    _ = erlang:send_after(?APPLY_MS, self(), apply),
    {ok, #st{shard = Shard, root = Root, table = throng_archive_sup:table(Shard),
             writer = list_to_atom("throng_archive_writer_" ++ integer_to_list(Shard))}}.

-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}}.
handle_call(catch_up, _From, St) ->
    {reply, ok, apply_pending(St)};
handle_call({delete, U, S}, _From, #st{root = Root} = St) ->
    St1 = forget({U, S}, St),
    try throng_archive_files:delete(Root, U, S) of
        ok -> {reply, ok, St1}
    catch
        throw:{archive, Why} -> {reply, {error, Why}, St1}
    end;
handle_call({keep, U, S, Before, Max}, _From, #st{root = Root} = St0) ->
    US = {U, S},
    St = apply_pending(St0),
    try
        {A, St1} = archive(US, St),
        case throng_archive_files:keep_from(Root, A, Before, Max) of
            {Gone, deleted} -> {reply, {ok, Gone}, St1#st{open = maps:remove(US, St1#st.open)}};
            {Gone, A1} -> {reply, {ok, Gone}, put_archive(US, A1, St1)}
        end
    catch
        throw:{archive, Why} -> {reply, {error, Why}, forget(US, St)}
    end.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast({checkpoint, Old, Floor}, #st{root = Root, shard = Shard} = St0) ->
    St = apply_pending(St0),
    case throng_archive_files:syncfs(Root) of
        ok ->
            try
                throng_archive_files:set_floor(Root, integer_to_list(Shard), Floor),
                lists:foreach(fun(Path) -> ok = file:delete(Path) end, Old)
            catch
                throw:{archive, Why} ->
                    logger:error(#{what => archive_checkpoint_failed, shard => Shard, reason => Why})
            end;
        {error, Why} ->
            %% The old logs stay: the next start applies them again.
            logger:error(#{what => archive_checkpoint_failed, shard => Shard, reason => Why})
    end,
    gen_server:cast(St#st.writer, checkpointed),
    {noreply, St};
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(apply, St) ->
    St1 = apply_pending(St),
    gen_server:cast(St#st.writer, applied),
    _ = erlang:send_after(?APPLY_MS, self(), apply),
    {noreply, St1};
handle_info(_Msg, St) ->
    {noreply, St}.

%% A clean stop leaves nothing pending.
-spec terminate(term(), #st{}) -> ok.
terminate(_Reason, St) ->
    #st{open = Open} = apply_pending(St),
    maps:foreach(fun(_, {A, _}) -> throng_archive_files:close(A) end, Open).

%%% Applying

%% The table in key order: an archive's pending messages are one run of
%% keys, in the order of their ids. A message leaves the table once it is
%% in the files; what could not be written stays for the next round.
apply_pending(#st{table = Table} = St) ->
    apply_from(ets:first(Table), St).

apply_from('$end_of_table', St) ->
    St;
apply_from({US, _} = Key, #st{table = Table} = St) ->
    {Rows, Next} = run(Table, US, Key, []),
    St1 = try
              {A, St0} = archive(US, St),
              A1 = throng_archive_files:append_many(A, records(Rows, throng_archive_files:last_id(A))),
              lists:foreach(fun({K, _, _}) -> ets:delete(Table, K) end, Rows),
              put_archive(US, A1, St0)
          catch
              throw:{archive, Why} ->
                  logger:error(#{what => archive_apply_failed, shard => St#st.shard,
                                 reason => Why}),
                  forget(US, St)
          end,
    apply_from(Next, St1).

run(_Table, _US, '$end_of_table', Acc) ->
    {lists:reverse(Acc), '$end_of_table'};
run(Table, US, {US, _} = Key, Acc) ->
    run(Table, US, ets:next(Table, Key), ets:lookup(Table, Key) ++ Acc);
run(_Table, _US, Next, Acc) ->
    {lists:reverse(Acc), Next}.

%% The rows' records, those with an id above the archive's last.
records([], _Last) ->
    [];
records([{{_US, Id}, {Bare, _} = Peer, Packet} | Rows], Last) when Id > Last ->
    [{Id, Bare, throng_archive_files:record(Id, Peer, Packet)} | records(Rows, Id)];
records([{{US, Id}, _, _} | Rows], Last) ->
    %% Only if ids were given twice (a clock set back and the floor lost):
    %% the archive keeps its first message of that id.
    logger:error(#{what => archive_id_not_above_last, archive => US, id => Id, last => Last}),
    records(Rows, Last).

%%% Open archives

archive(US, #st{open = Open, root = Root, tick = Tick} = St) ->
    case Open of
        #{US := {A, _}} ->
            {A, St#st{tick = Tick + 1}};
        _ ->
            St1 = make_room(St),
            {U, S} = US,
            {throng_archive_files:open(Root, U, S), St1#st{tick = Tick + 1}}
    end.

put_archive(US, A, #st{open = Open, tick = Tick} = St) ->
    St#st{open = Open#{US => {A, Tick}}}.

forget(US, #st{open = Open} = St) ->
    case maps:take(US, Open) of
        {{A, _}, Rest} ->
            throng_archive_files:close(A),
            St#st{open = Rest};
        error ->
            St
    end.

make_room(#st{open = Open} = St) when map_size(Open) < ?MAX_OPEN ->
    St;
make_room(#st{open = Open} = St) ->
    {Oldest, _} = maps:fold(fun(US, {_, T}, {_, Min} = Acc) ->
                                    case T < Min of
                                        true -> {US, T};
                                        false -> Acc
                                    end
                            end, {none, infinity}, Open),
    forget(Oldest, St).
