%% @doc One of the ?SHARDS writers of the on-disk message archive
%% ({@link throng_archive_files}): the archives whose user hashes to this
%% shard are written by this process only, so that their ids increase and
%% their files are appended to in order.
%%
%% A message stored is written three times, none of them waited on the
%% disk for: to this writer's log (the WAL), to the archive's records and
%% to its index. When the call returns, every query sees the message and
%% the operating system holds it: a `kill -9' of the node loses nothing.
%% The log is fsynced ?SYNC_MS ms after the first write that follows a
%% sync (one fdatasync for every message of that moment, of every
%% archive); while it syncs, this writer's callers wait, so what a crash
%% of the machine can lose is bounded by what came in during one sync.
%% Deleting or cutting an archive syncs its log record before it touches
%% the files, so that a replay after a crash repeats it after the stores
%% it follows.
%%
%% The archives' own files are not fsynced one by one (an fdatasync is
%% ~0.15 ms on this machine's disk, per file): at a checkpoint — the log
%% past ?WAL_MAX bytes or ?CHECKPOINT_MS old — the writer starts a new log
%% file, and a helper process syncs the whole file system once
%% (`syncfs(2)'), then deletes the older log files. A start first replays
%% whatever logs are left ({@link throng_archive_files:recover/1}).
%%
%% At most ?MAX_OPEN archives are kept open per writer (two file
%% descriptors each), the least recently written closed first.
-module(throng_archive_writer).
-behaviour(gen_server).

-include("throng.hrl").

-export([child_specs/1, start_link/2, store/3, delete/2, keep/4, shards/0]).
%% start_link/2: the supervisor's; shards/0: for the tests.
-ignore_xref([{start_link, 2}, {shards, 0}]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-define(SHARDS, 8).
-define(SYNC_MS, 20).
-define(MAX_OPEN, 24).
-define(WAL_MAX, 64 * 1024 * 1024).
-define(CHECKPOINT_MS, 60000).
-define(CALL_TIMEOUT, 60000).

-record(st, {shard :: non_neg_integer(),
             root :: file:filename(),
             wal :: file:fd(),
             seq :: non_neg_integer(),
             wal_bytes = 0 :: non_neg_integer(),
             wal_began :: integer(),
             sync_timer = none :: none | reference(),
             checkpoint = none :: none | {pid(), reference()},
             open = #{} :: #{{binary(), binary()} => {throng_archive_files:arch(), integer()}},
             tick = 0 :: integer()}).

%%% API

%% @doc The writers, as children of the storage's supervisor.
-spec child_specs(file:filename()) -> [supervisor:child_spec()].
child_specs(Root) ->
    [#{id => {?MODULE, I}, start => {?MODULE, start_link, [I, Root]}, shutdown => 10000}
     || I <- lists:seq(0, ?SHARDS - 1)].

%% @doc How many writers there are: a user's archive is written by the one
%% `erlang:phash2({U, S}, shards())' names.
-spec shards() -> pos_integer().
shards() ->
    ?SHARDS.

-spec start_link(non_neg_integer(), file:filename()) -> {ok, pid()} | {error, term()}.
start_link(Shard, Root) ->
    gen_server:start_link({local, name(Shard)}, ?MODULE, {Shard, Root}, []).

%% @doc Stores a message in U's archive; returns the id it got (its own,
%% or the next after the archive's last). `{error, Why}' when a file
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

call(US, Req) ->
    Name = name(erlang:phash2(US, ?SHARDS)),
    try gen_server:call(Name, Req, ?CALL_TIMEOUT)
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
    %% Logs of this shard that a checkpoint had not deleted when the
    %% node stopped were applied by the start (recover/1), or are being
    %% written by an earlier incarnation of this process that crashed:
    %% either way a new file follows them.
    Seq = lists:max([0 | [Q || {Sh, Q, _} <- throng_archive_files:wal_files(Root), Sh =:= Shard]]) + 1,
    case open_wal(Root, Shard, Seq) of
        {ok, Wal} ->
            {ok, #st{shard = Shard, root = Root, wal = Wal, seq = Seq, wal_began = now_ms()}};
        {error, Why} ->
            {stop, {archive_log, Why}}
    end.

-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, term(), #st{}}.
handle_call({store, U, S, #mam_msg{id = Id0, peer = {Bare, _} = Peer, packet = Packet}}, _From, St0) ->
    US = {U, S},
    guarded(US, St0, fun(St) ->
                             {A, St1} = archive(US, St),
                             Id = throng_archive_files:next_id(A, Id0),
                             Rec = throng_archive_files:record(Id, Peer, Packet),
                             St2 = log(US, store, Rec, St1),
                             A1 = throng_archive_files:append(A, Id, Bare, Rec),
                             {{ok, Id}, put_archive(US, A1, St2)}
                     end);
handle_call({delete, U, S}, _From, St0) ->
    US = {U, S},
    guarded(US, St0, fun(St) ->
                             St1 = log_now(US, delete, St),
                             St2 = forget(US, St1),
                             ok = throng_archive_files:delete(St2#st.root, U, S),
                             {ok, St2}
                     end);
handle_call({keep, U, S, Before, Max}, _From, St0) ->
    US = {U, S},
    guarded(US, St0, fun(St) ->
                             {A, St1} = archive(US, St),
                             case throng_archive_files:last_id(A) of
                                 0 ->
                                     {{ok, 0}, St1};
                                 _ ->
                                     St2 = log_now(US, {keep, Before, Max}, St1),
                                     case throng_archive_files:keep_from(St2#st.root, A, Before, Max) of
                                         {Gone, deleted} ->
                                             {{ok, Gone}, St2#st{open = maps:remove(US, St2#st.open)}};
                                         {Gone, A1} ->
                                             {{ok, Gone}, put_archive(US, A1, St2)}
                                     end
                             end
                     end).

%% A file error answers {error, Why}; the archive is closed, so that the
%% next request opens it again and cuts what the failure left half written.
guarded(US, St, Fun) ->
    try Fun(St) of
        {Reply, St1} -> {reply, Reply, St1}
    catch
        throw:{archive, Why} ->
            logger:error(#{what => archive_write_failed, reason => Why}),
            {reply, {error, Why}, forget(US, St)}
    end.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(sync, St) ->
    {noreply, maybe_checkpoint(sync_wal(St#st{sync_timer = none}))};
handle_info({'DOWN', Ref, process, _, Result}, #st{checkpoint = {_, Ref}} = St) ->
    Result =:= normal orelse
        logger:error(#{what => archive_checkpoint_failed, shard => St#st.shard, reason => Result}),
    {noreply, St#st{checkpoint = none}};
handle_info(_Msg, St) ->
    {noreply, St}.

-spec terminate(term(), #st{}) -> ok.
terminate(_Reason, #st{wal = Wal, open = Open}) ->
    _ = throng_archive_files:wal_sync(Wal),
    _ = file:close(Wal),
    maps:foreach(fun(_, {A, _}) -> throng_archive_files:close(A) end, Open).

%%% The log

open_wal(Root, Shard, Seq) ->
    Path = filename:join(throng_archive_files:wal_dir(Root),
                         integer_to_list(Shard) ++ "-" ++ integer_to_list(Seq) ++ ".log"),
    case filelib:ensure_dir(Path) of
        ok -> file:open(Path, [raw, binary, append]);
        {error, _} = E -> E
    end.

%% Appended; synced ?SYNC_MS ms later with every record of that moment.
log(US, What, Rec, #st{wal = Wal, wal_bytes = Bytes} = St) ->
    Bin = throng_archive_files:wal_record(US, What, Rec),
    case throng_archive_files:wal_append(Wal, Bin) of
        ok -> ok;
        {error, E} -> throw({archive, {log_write, E}})
    end,
    Timer = case St#st.sync_timer of
                none -> erlang:send_after(?SYNC_MS, self(), sync);
                T -> T
            end,
    St#st{wal_bytes = Bytes + byte_size(Bin), sync_timer = Timer}.

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
            St#st{sync_timer = erlang:send_after(?SYNC_MS, self(), sync)}
    end.

%% A new log file; the old ones are deleted once the file system is
%% synced, which puts every archive write they cover on disk.
maybe_checkpoint(#st{checkpoint = none, wal_bytes = Bytes, wal_began = Began, sync_timer = none,
                     root = Root, shard = Shard, seq = Seq} = St)
  when Bytes > ?WAL_MAX; Bytes > 0 ->
    case Bytes > ?WAL_MAX orelse now_ms() - Began > ?CHECKPOINT_MS of
        false ->
            St;
        true ->
            case open_wal(Root, Shard, Seq + 1) of
                {ok, Wal} ->
                    _ = file:close(St#st.wal),
                    Old = [Path || {Sh, Q, Path} <- throng_archive_files:wal_files(Root),
                                   Sh =:= Shard, Q =< Seq],
                    Helper = spawn_monitor(fun() -> checkpoint(Root, Old) end),
                    St#st{wal = Wal, seq = Seq + 1, wal_bytes = 0, wal_began = now_ms(),
                          checkpoint = Helper};
                {error, E} ->
                    logger:error(#{what => archive_log_open_failed, shard => Shard, reason => E}),
                    St
            end
    end;
maybe_checkpoint(St) ->
    St.

checkpoint(Root, Old) ->
    case throng_archive_files:syncfs(Root) of
        ok -> lists:foreach(fun(Path) -> ok = file:delete(Path) end, Old);
        {error, Why} -> exit({syncfs, Why})
    end.

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

now_ms() ->
    erlang:monotonic_time(millisecond).
