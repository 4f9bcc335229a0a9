%% @doc One of the throng_archive_sup:shards() writers of the on-disk message archive
%% ({@link throng_archive_files}): the archives whose user hashes to this
%% shard get their ids and their log records from this process only.
%%
%% A message stored costs a record in this writer's log (the WAL; the
%% records of all the stores in the writer's mailbox are written with one
%% write, and then each store is answered) and a row in the shard's table
%% of pending messages (an ETS table the supervisor owns); its shard's {@link throng_archive_applier} appends the
%% pending messages to their archives' files ?APPLY_MS later, many of an
%% archive at a time (opening an archive's two files costs ~140 us of CPU
%% here, an append a few), and then drops them from the table. Queries read
%% the table and then the files ({@link pending/2}). When the call returns,
%% every query sees the message and the log's write is in the operating
%% system's hands: a `kill -9' of the node loses nothing (the next start
%% replays the log). The log is fsynced `storage.archive_sync_delay' ms
%% after the first write that follows a sync, once for every message of
%% that time; while it syncs this writer's callers wait, so what a crash of
%% the machine can lose is what came in during one delay. With a delay of
%% 0 a batch is fsynced before its stores are answered; when that fsync
%% fails each store gets the error and leaves the pending table, but its
%% record stays in the log, so a replay at the next start may still bring
%% the message into the archive. Past ?MAX_PENDING pending
%% messages a store waits until the applier has caught up.
%%
%% Ids increase in the whole shard (the asked id, or one above the last
%% given), so they increase in each archive; the largest given is kept in
%% a `.floor' file at each checkpoint, so that a clock set back does not
%% give an id twice.
%%
%% Deleting an archive syncs its log record before the applier touches
%% the files, so that a replay after a crash repeats it after the stores it
%% follows. A cut (the retention sweep, every archive of the host in turn)
%% is logged and synced with the next group, not waited for: a replay
%% skips the stores whose id is not above the archive's last, so what a cut
%% removed comes back only if the cut removed the whole archive and the
%% log still held its messages (messages older than max_age are not in a
%% log that is checkpointed every minute). At a checkpoint — the log past ?WAL_MAX bytes or
%% ?CHECKPOINT_MS old — the writer starts a new log file, and the applier
%% applies what is pending, syncs the file system once (`syncfs(2)') and
%% deletes the older log files.
-module(throng_archive_writer).
-behaviour(gen_server).

-include("throng.hrl").

-export([start_link/2, store/3, delete/2, keep/4, pending/2, catch_up/0]).
%% start_link/2: the supervisor's.
-ignore_xref([{start_link, 2}]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

%% After a failed fsync, the next attempt.
-define(RETRY_SYNC_MS, 1000).
-define(MAX_PENDING, 50000).
%% A batch of log records is written when the mailbox is empty, or at
%% this many bytes or records.
-define(MAX_BATCH_BYTES, 262144).
-define(MAX_BATCH, 512).
-define(WAL_MAX, 64 * 1024 * 1024).
%% A checkpoint at least this often while stores come (the application
%% environment's archive_checkpoint_ms, for tests).
-define(CHECKPOINT_MS, 60000).
-define(CALL_TIMEOUT, 60000).

-record(st, {shard :: non_neg_integer(),
             root :: file:filename(),
             table :: atom(),
             wal :: file:fd(),
             seq :: non_neg_integer(),
             last :: non_neg_integer(),
             wal_bytes = 0 :: non_neg_integer(),
             wal_began :: integer(),
             checkpoint_ms :: pos_integer(),
             sync_timer = none :: none | reference(),
             checkpointing = false :: boolean(),
             %% Log records not written yet (newest first), the stores
             %% waiting for them to be written, and their bytes.
             buf = [] :: [binary()],
             waiting = [] :: [{gen_server:from(), term(), non_neg_integer()}],
             buf_bytes = 0 :: non_neg_integer(),
             %% Stores since the applier last said it applied.
             unapplied = 0 :: non_neg_integer()}).

%%% API

-spec start_link(non_neg_integer(), file:filename()) -> {ok, pid()} | {error, term()}.
start_link(Shard, Root) ->
    gen_server:start_link({local, name(Shard)}, ?MODULE, {Shard, Root}, []).

%% The shard of an archive.
shard(US) ->
    erlang:phash2(US, throng_archive_sup:shards()).

%% @doc Stores a message in U's archive; returns the id it got (the asked
%% one, or one above every id the shard gave). `{error, Why}' when the log
%% could not be written.
-spec store(binary(), binary(), #mam_msg{}) -> {ok, non_neg_integer()} | {error, term()}.
store(U, S, Msg) ->
    call({U, S}, {store, U, S, Msg}).

%% @doc Deletes U's archive.
-spec delete(binary(), binary()) -> ok | {error, term()}.
delete(U, S) ->
    call({U, S}, {delete, U, S}).

%% @doc Removes from U's archive the messages with an id below Before and
%% those beyond the newest Max; returns how many went.
-spec keep(binary(), binary(), non_neg_integer(), non_neg_integer() | infinity) ->
    {ok, non_neg_integer()} | {error, term()}.
keep(U, S, Before, Max) ->
    call({U, S}, {keep, U, S, Before, Max}).

%% @doc The messages of U's archive that may not be in its files yet, in
%% the order of their ids.
-spec pending(binary(), binary()) -> [#mam_msg{}].
pending(U, S) ->
    US = {U, S},
    [#mam_msg{id = Id, peer = Peer, packet = Packet}
     || {{_, Id}, Peer, Packet} <- ets:select(throng_archive_sup:table(shard(US)), [{{{US, '_'}, '_', '_'}, [], ['$_']}])].

%% @doc Every shard's pending messages applied to the files.
-spec catch_up() -> ok.
catch_up() ->
    lists:foreach(fun throng_archive_applier:catch_up/1, lists:seq(0, throng_archive_sup:shards() - 1)).

call(US, Req) ->
    try gen_server:call(name(shard(US)), Req, ?CALL_TIMEOUT)
    catch exit:{Why, _} -> {error, {archive_writer, Why}}
    end.

name(0) -> throng_archive_writer_0;
name(1) -> throng_archive_writer_1;
name(2) -> throng_archive_writer_2;
name(3) -> throng_archive_writer_3;
name(4) -> throng_archive_writer_4;
name(5) -> throng_archive_writer_5;
name(6) -> throng_archive_writer_6;
name(7) -> throng_archive_writer_7.

%%% gen_server

-spec init({non_neg_integer(), file:filename()}) -> {ok, #st{}} | {stop, term()}.
init({Shard, Root}) ->
    process_flag(trap_exit, true),
    %% Log files of this shard that exist now were written by an earlier
    %% incarnation of this process in this run (a start applies and
    %% deletes the others): a new file follows them, and ids go on above
    %% theirs.
    Mine = [{Q, Path} || {Sh, Q, Path} <- throng_archive_files:wal_files(Root), Sh =:= Shard],
    Seq = lists:max([0 | [Q || {Q, _} <- Mine]]) + 1,
    Last = lists:max([throng_archive_files:floor(Root) |
                      [throng_archive_files:wal_max_id(P) || {_, P} <- Mine]]),
    case open_wal(Root, Shard, Seq) of
        {ok, Wal} ->
            {ok, #st{shard = Shard, root = Root, table = throng_archive_sup:table(Shard), wal = Wal, seq = Seq,
                     last = Last, wal_began = now_ms(),
                     checkpoint_ms = application:get_env(throng, archive_checkpoint_ms,
                                                         ?CHECKPOINT_MS)}};
        {error, Why} ->
            {stop, {archive_log, Why}}
    end.

%% A store is answered once its log record is written: the records of
%% every store in the mailbox are written together (one write, once the
%% mailbox is empty or the batch is full), and then each is answered.
-spec handle_call(term(), gen_server:from(), #st{}) ->
    {reply, term(), #st{}} | {noreply, #st{}} | {noreply, #st{}, 0}.
handle_call({store, U, S, #mam_msg{id = Id0, peer = Peer, packet = Packet}}, From,
            #st{last = Last, table = Table, buf = Buf, waiting = Waiting, buf_bytes = Bytes} = St) ->
    US = {U, S},
    Id = max(Id0, Last + 1),
    Bin = throng_archive_files:wal_record(US, store, throng_archive_files:record(Id, Peer, Packet)),
    true = ets:insert(Table, {{US, Id}, Peer, Packet}),
    St1 = St#st{last = Id, buf = [Bin | Buf], waiting = [{From, {US, Id}, Id} | Waiting],
                buf_bytes = Bytes + byte_size(Bin), unapplied = St#st.unapplied + 1},
    case St1#st.buf_bytes >= ?MAX_BATCH_BYTES orelse length(Waiting) + 1 >= ?MAX_BATCH of
        true -> {noreply, flush(St1)};
        false -> {noreply, St1, 0}
    end;
handle_call({delete, U, S}, _From, #st{table = Table} = St0) ->
    US = {U, S},
    St = flush(St0),
    guarded(fun() ->
                    St1 = log_now(US, delete, St),
                    _ = ets:select_delete(Table, [{{{US, '_'}, '_', '_'}, [], [true]}]),
                    {throng_archive_applier:delete(St#st.shard, U, S), St1}
            end, St);
handle_call({keep, U, S, Before, Max}, _From, St0) ->
    US = {U, S},
    St = flush(St0),
    guarded(fun() ->
                    St1 = log(US, {keep, Before, Max}, <<>>, St),
                    {throng_archive_applier:keep(St#st.shard, U, S, Before, Max), St1}
            end, St).

guarded(Fun, St) ->
    try Fun() of
        {Reply, St1} -> {reply, Reply, St1}
    catch
        throw:{archive, Why} ->
            logger:error(#{what => archive_write_failed, shard => St#st.shard, reason => Why}),
            {reply, {error, Why}, St}
    end.

%% The batch written, then its stores answered. When the write fails, no
%% store of the batch was kept: their rows leave the pending table and
%% each gets the error.
flush(#st{buf = []} = St) ->
    St;
flush(#st{buf = Buf, waiting = Waiting, wal = Wal, table = Table} = St) ->
    Replies = lists:reverse(Waiting),
    St1 = St#st{buf = [], waiting = [], buf_bytes = 0},
    Delay = sync_delay(),
    case write_batch(Wal, Buf, Delay) of
        ok ->
            lists:foreach(fun({From, _Key, Id}) -> gen_server:reply(From, {ok, Id}) end, Replies),
            St2 = after_write(Delay, St1#st{wal_bytes = St#st.wal_bytes + St#st.buf_bytes}),
            case St2#st.unapplied > ?MAX_PENDING of
                true ->
                    %% The applier is behind: the writer waits for it.
                    throng_archive_applier:catch_up(St#st.shard),
                    St2#st{unapplied = 0};
                false ->
                    St2
            end;
        {error, Why} ->
            logger:error(#{what => archive_write_failed, shard => St#st.shard, reason => Why}),
            lists:foreach(fun({From, Key, _Id}) ->
                                  ets:delete(Table, Key),
                                  gen_server:reply(From, {error, Why})
                          end, Replies),
            St1
    end.

%% The batch's log records written; with a delay of 0 also fsynced.
write_batch(Wal, Buf, Delay) ->
    case file:write(Wal, lists:reverse(Buf)) of
        ok when Delay =:= 0 ->
            case throng_archive_files:wal_sync(Wal) of
                ok -> ok;
                {error, E} -> {error, {log_sync, E}}
            end;
        ok -> ok;
        {error, E} -> {error, {log_write, E}}
    end.

%% Synced already (a delay of 0): the time for a checkpoint may have come,
%% as after a sync of the timer's.
after_write(0, St) -> maybe_checkpoint(St);
after_write(_, St) -> arm_sync(St).

sync_delay() ->
    throng_config:get([storage, archive_sync_delay]).

-spec handle_cast(term(), #st{}) -> {noreply, #st{}} | {noreply, #st{}, 0}.
handle_cast(checkpointed, St) ->
    next(St#st{checkpointing = false});
handle_cast(applied, St) ->
    next(St#st{unapplied = 0});
handle_cast(_Msg, St) ->
    next(St).

-spec handle_info(term(), #st{}) -> {noreply, #st{}} | {noreply, #st{}, 0}.
handle_info(timeout, St) ->
    {noreply, flush(St)};
handle_info(sync, St) ->
    {noreply, maybe_checkpoint(sync_wal(flush(St#st{sync_timer = none})))};
handle_info(_Msg, St) ->
    next(St).

%% With stores waiting, the batch is written as soon as nothing else is in
%% the mailbox.
next(#st{buf = []} = St) -> {noreply, St};
next(St) -> {noreply, St, 0}.

%% The log synced, and the largest id given kept.
-spec terminate(term(), #st{}) -> ok.
terminate(_Reason, St) ->
    #st{wal = Wal, root = Root, shard = Shard, last = Last} = flush(St),
    _ = throng_archive_files:wal_sync(Wal),
    _ = file:close(Wal),
    try throng_archive_files:set_floor(Root, integer_to_list(Shard), Last)
    catch throw:{archive, Why} -> logger:error(#{what => archive_floor_not_kept, reason => Why})
    end.

%%% The log

open_wal(Root, Shard, Seq) ->
    Path = filename:join(throng_archive_files:wal_dir(Root),
                         integer_to_list(Shard) ++ "-" ++ integer_to_list(Seq) ++ ".log"),
    case filelib:ensure_dir(Path) of
        ok -> file:open(Path, [raw, binary, append]);
        {error, _} = E -> E
    end.

%% Appended at once (not batched); synced storage.archive_sync_delay ms
%% later with every record of that time.
log(US, What, Rec, #st{wal = Wal, wal_bytes = Bytes} = St) ->
    Bin = throng_archive_files:wal_record(US, What, Rec),
    case file:write(Wal, Bin) of
        ok -> ok;
        {error, E} -> throw({archive, {log_write, E}})
    end,
    arm_sync(St#st{wal_bytes = Bytes + byte_size(Bin)}).

arm_sync(#st{sync_timer = none} = St) ->
    St#st{sync_timer = erlang:send_after(sync_delay(), self(), sync)};
arm_sync(St) ->
    St.

%% Appended and synced before the caller goes on.
log_now(US, What, St) ->
    St1 = log(US, What, <<>>, St),
    case throng_archive_files:wal_sync(St1#st.wal) of
        ok -> St1;
        {error, E} -> throw({archive, {log_sync, E}})
    end.

sync_wal(#st{wal = Wal} = St) ->
    case throng_archive_files:wal_sync(Wal) of
        ok ->
            St;
        {error, E} ->
            %% The records stay in the file; the next sync tries again.
            logger:error(#{what => archive_log_sync_failed, shard => St#st.shard, reason => E}),
            St#st{sync_timer = erlang:send_after(?RETRY_SYNC_MS, self(), sync)}
    end.

%% A new log file; the applier deletes the old ones once what they hold is
%% in the archives' files and the file system is synced.
maybe_checkpoint(#st{checkpointing = false, wal_bytes = Bytes, wal_began = Began,
                     sync_timer = none, root = Root, shard = Shard, seq = Seq} = St)
  when Bytes > 0 ->
    case Bytes > ?WAL_MAX orelse now_ms() - Began > St#st.checkpoint_ms of
        false ->
            St;
        true ->
            case open_wal(Root, Shard, Seq + 1) of
                {ok, Wal} ->
                    _ = file:close(St#st.wal),
                    Old = [Path || {Sh, Q, Path} <- throng_archive_files:wal_files(Root),
                                   Sh =:= Shard, Q =< Seq],
                    throng_archive_applier:checkpoint(Shard, Old, St#st.last),
                    St#st{wal = Wal, seq = Seq + 1, wal_bytes = 0, wal_began = now_ms(),
                          checkpointing = true};
                {error, E} ->
                    logger:error(#{what => archive_log_open_failed, shard => Shard, reason => E}),
                    St
            end
    end;
maybe_checkpoint(St) ->
    St.

now_ms() ->
    erlang:monotonic_time(millisecond).
