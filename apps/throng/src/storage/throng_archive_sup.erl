%% @doc The on-disk message archive's processes, for a node that keeps its
%% data alone: per shard an applier ({@link throng_archive_applier}) and a
%% writer ({@link throng_archive_writer}). This supervisor owns the
%% shards' tables of pending messages, so that they outlive a restart of
%% the processes: a message a writer logged and put there is applied by
%% the next applier. One for all: a writer and an applier share their
%% table and their log files.
-module(throng_archive_sup).
-behaviour(supervisor).

-export([start_link/1, child_spec/1, shards/0, table/1]).
%% start_link/1: the storage supervisor's.
-ignore_xref([{start_link, 1}]).
-export([init/1]).

%% @doc The supervisor as a child of the storage's.
-spec child_spec(file:filename()) -> supervisor:child_spec().
child_spec(Root) ->
    #{id => ?MODULE, start => {?MODULE, start_link, [Root]}, type => supervisor,
      shutdown => infinity}.

-spec start_link(file:filename()) -> {ok, pid()} | {error, term()}.
start_link(Root) ->
    supervisor:start_link({local, ?MODULE}, ?MODULE, Root).

-spec init(file:filename()) -> {ok, {supervisor:sup_flags(), [supervisor:child_spec()]}}.
init(Root) ->
    Shards = lists:seq(0, shards() - 1),
    _ = [ets:new(table(I),
             [ordered_set, public, named_table, {read_concurrency, true}, {write_concurrency, true}])
     || I <- Shards],
    Children = lists:append(
                 [[#{id => {throng_archive_applier, I},
                     start => {throng_archive_applier, start_link, [I, Root]}, shutdown => 60000},
                   #{id => {throng_archive_writer, I},
                     start => {throng_archive_writer, start_link, [I, Root]}, shutdown => 10000}]
                  || I <- Shards]),
    {ok, {#{strategy => one_for_all, intensity => 10, period => 10}, Children}}.

%% @doc How many shards there are: an archive of U at S is in shard
%% `erlang:phash2({U, S}, shards())'.
-spec shards() -> pos_integer().
shards() ->
    8.

%% @doc The shard's table of pending messages: `{{US, Id}, Peer, Packet}'.
-spec table(non_neg_integer()) -> atom().
table(0) -> throng_archive_pending_0;
table(1) -> throng_archive_pending_1;
table(2) -> throng_archive_pending_2;
table(3) -> throng_archive_pending_3;
table(4) -> throng_archive_pending_4;
table(5) -> throng_archive_pending_5;
table(6) -> throng_archive_pending_6;
table(7) -> throng_archive_pending_7.
