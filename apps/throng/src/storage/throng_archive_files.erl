%% @doc The message archive of the embedded backend (XEP-0313), kept on disk
%% instead of in RAM: one pair of files per archive (a user's, or a room's),
%% logged by {@link throng_archive_writer}, written by {@link
%% throng_archive_applier}, read by any process.
%%
%% Under DATA_DIR/archive, an archive of U at S lives in
%% `S/HH/HASH.dat' and `S/HH/HASH.idx' (S the domain as it is when it is
%% made of `a-z 0-9 . -', else `h-' and a hash of it; HASH the first 128
%% bits of SHA-256 of U in hex, HH its first two digits):
%%
%% - `.dat' begins with a header naming U and S, then the records one after
%%   another: `<<Id:64, BareLen:16, Bare, ResLen:16, Res, Packet>>';
%% - `.idx' begins with a 16-byte header (its last 8 bytes: the first entry
%%   in use, moved by a cut), then one 20-byte entry per record,
%%   in the order of the records and of their ids (increasing):
%%   `<<Id:64, Offset:40, Length:24, Hash:32>>', Hash a hash of the peer's
%%   bare JID, so that a query `with' a peer reads the records of that peer
%%   and few others.
%%
%% A page is found by a binary search of the index (a few 20-byte reads)
%% and read with one read of the index and one of the records; nothing of
%% an archive stays in memory between two queries.
%%
%% An entry is written after its record, so a reader that sees an entry
%% finds its record. When {@link keep_from/4} rewrites an archive (the
%% retention sweep), a reader that opened the old index and the new records
%% finds a record whose id is not its entry's: it reads again (`stale').
%% A query also takes the messages still pending in the writers' table
%% (passed in), those above the files' last id.
%%
%% The files are not fsynced one by one: the writer's log (the WAL,
%% {@link wal_record/3}) is, and a start replays it ({@link recover/1}), so
%% that what the log holds reaches the archives even if the machine lost
%% the archives' pages.
-module(throng_archive_files).

-include("throng.hrl").

-export([root/0, open/3, close/1, append/4, append_many/2, delete/3, keep_from/4, last_id/1,
         query/6, count/5, users/2, record/3, selects/2]).
-export([floor/1, set_floor/3]).
%% replay_wal/2: recover/1's step, also for the tests.
%% append/4: the tests' (the applier appends with append_many/2).
-ignore_xref([{replay_wal, 2}, {append, 4}]).
-export([wal_dir/1, wal_files/1, wal_record/3, wal_sync/1, replay_wal/2,
         recover/1, syncfs/1, restore/6, close_all/1, wal_max_id/1]).

-record(arch, {dat :: file:fd(),
               idx :: file:fd(),
               base :: file:filename(),
               dat_end :: non_neg_integer(),
               n :: non_neg_integer(),
               %% The first entry in use: those before it were cut.
               start = 0 :: non_neg_integer(),
               last :: non_neg_integer()}).

%% What a reader (or a cut) sees of an archive: the entries from start to n.
-record(view, {idx :: file:fd(),
               dat :: file:fd(),
               n :: non_neg_integer(),
               base :: file:filename(),
               start = 0 :: non_neg_integer()}).

-opaque arch() :: #arch{}.
-export_type([arch/0]).

-define(IDX_MAGIC, "THRI").
-define(DAT_MAGIC, "THRA").
-define(VERSION, 1).
-define(IDX_HDR, 16).
-define(ENTRY, 20).
-define(MAX_RECORD, 16#ffffff).
-define(MAX_OFFSET, 16#ffffffffff).
%% Entries read at once when a filter needs the records to decide.
-define(CHUNK, 256).
%% How many times a query reads again after finding a rewritten archive.
-define(RETRIES, 5).
-define(WAL_STORE, 1).
-define(WAL_DELETE, 2).
-define(WAL_KEEP, 3).
-define(INFINITE_MAX, 16#ffffffffffffffff).

%%% Paths

%% @doc DATA_DIR/archive.
-spec root() -> file:filename().
root() ->
    filename:join(throng_paths:data_dir(), "archive").

server_dir(Root, S) ->
    Name = case re:run(S, "^[a-z0-9][a-z0-9.-]*$", [{capture, none}]) of
               match -> binary_to_list(S);
               nomatch -> "h-" ++ hex(S)
           end,
    filename:join(Root, Name).

base(Root, U, S) ->
    H = hex(U),
    filename:join([server_dir(Root, S), lists:sublist(H, 2), H]).

hex(B) ->
    string:lowercase(binary_to_list(binary:encode_hex(binary:part(crypto:hash(sha256, B), 0, 16)))).

dat_header(U, S) ->
    <<?DAT_MAGIC, ?VERSION, (byte_size(U)):16, U/binary, (byte_size(S)):16, S/binary>>.

idx_header() ->
    <<?IDX_MAGIC, ?VERSION:32, 0:64>>.

%%% Writing (the writer's process, or recovery before the writers start)

%% @doc Opens (creating it if needed) the archive of U at S for appending.
%% What a crash left half written at the end is cut off: an index entry
%% not whole, records after the last entry, entries whose record is not
%% whole. Throws `{archive, Why}' on a file error.
-spec open(file:filename(), binary(), binary()) -> arch().
open(Root, U, S) ->
    Base = base(Root, U, S),
    Dat = case file:open(Base ++ ".dat", [raw, binary, read, write]) of
              {error, enoent} ->
                  %% The archive's directory does not exist yet.
                  done(filelib:ensure_dir(Base), {mkdir, Base}),
                  val(file:open(Base ++ ".dat", [raw, binary, read, write]), {open, Base});
              Opened ->
                  val(Opened, {open, Base})
          end,
    Idx = try val(file:open(Base ++ ".idx", [raw, binary, read, write]), {open, Base})
          catch throw:T -> _ = file:close(Dat), throw(T)
          end,
    try
        Header = dat_header(U, S),
        HSize = byte_size(Header),
        IdxSize = val(file:position(Idx, eof), {size, Base}),
        DatSize = val(file:position(Dat, eof), {size, Base}),
        case IdxSize < ?IDX_HDR orelse DatSize < HSize of
            true ->
                %% New, or cut short while it was being made.
                cut(Dat, 0, DatSize, Base),
                cut(Idx, 0, IdxSize, Base),
                done(file:pwrite(Dat, 0, Header), {write, Base}),
                done(file:pwrite(Idx, 0, idx_header()), {write, Base}),
                #arch{dat = Dat, idx = Idx, base = Base, dat_end = HSize, n = 0, last = 0};
            false ->
                {Found, Start} =
                    try {pread(Dat, 0, HSize, Base), pread(Idx, 0, ?IDX_HDR, Base)} of
                        {Header, <<?IDX_MAGIC, _:32, Start0:64>>} -> {true, Start0};
                        _ -> {false, 0}
                    catch throw:stale -> {false, 0}
                    end,
                Found orelse throw({archive, {not_this_archive, Base, U, S}}),
                N = last_whole(Idx, Base, (IdxSize - ?IDX_HDR) div ?ENTRY, DatSize),
                cut(Idx, ?IDX_HDR + N * ?ENTRY, IdxSize, Base),
                {Last, End} = case N of
                                  0 -> {0, HSize};
                                  _ ->
                                      {Id, Off, Len, _} = entry_at(Idx, N - 1, Base),
                                      {Id, Off + Len}
                              end,
                cut(Dat, End, DatSize, Base),
                #arch{dat = Dat, idx = Idx, base = Base, dat_end = End, n = N, last = Last,
                      start = min(Start, N)}
        end
    catch
        throw:Thrown ->
            _ = file:close(Dat),
            _ = file:close(Idx),
            throw(Thrown)
    end.

%% The entries before the first whose record is not whole.
last_whole(_Idx, _Base, 0, _DatSize) ->
    0;
last_whole(Idx, Base, N, DatSize) ->
    {_, Off, Len, _} = entry_at(Idx, N - 1, Base),
    case Off + Len =< DatSize of
        true -> N;
        false -> last_whole(Idx, Base, N - 1, DatSize)
    end.

cut(_Fd, Size, Size, _Base) ->
    ok;
cut(Fd, Keep, _Size, Base) ->
    Keep > 0 andalso logger:warning(#{what => archive_tail_cut, file => Base, kept_bytes => Keep}),
    _ = val(file:position(Fd, Keep), {write, Base}),
    done(file:truncate(Fd), {write, Base}).

%% @doc Closes an archive opened with {@link open/3}.
-spec close(arch()) -> ok.
close(#arch{dat = Dat, idx = Idx}) ->
    _ = file:close(Dat),
    _ = file:close(Idx),
    ok.

%% @doc The archive's last id (0: empty).
-spec last_id(arch()) -> non_neg_integer().
last_id(#arch{last = Last}) ->
    Last.

%% @doc The record of a message, as `.dat' and the log keep it.
-spec record(non_neg_integer(), {binary(), binary()}, binary()) -> binary().
record(Id, {Bare, Res}, Packet) ->
    <<Id:64, (byte_size(Bare)):16, Bare/binary, (byte_size(Res)):16, Res/binary, Packet/binary>>.

%% @doc Appends a record made by {@link record/3}, its id above the
%% archive's last.
-spec append(arch(), non_neg_integer(), binary(), binary()) -> arch().
append(A, Id, Bare, Rec) ->
    append_many(A, [{Id, Bare, Rec}]).

%% @doc Appends several records (each `{Id, Bare, Record}', ids increasing
%% and above the archive's last) with one write to each file.
-spec append_many(arch(), [{non_neg_integer(), binary(), binary()}]) -> arch().
append_many(A, []) ->
    A;
append_many(#arch{dat = Dat, idx = Idx, base = Base, dat_end = End0, n = N0, last = Last0} = A,
            Recs) ->
    {Entries, End, Last} =
        lists:foldl(fun({Id, _Bare, _Rec}, {_, _, Prev}) when Id =< Prev ->
                            error({archive_id_not_increasing, Id, Prev});
                       ({_Id, _Bare, Rec}, _) when byte_size(Rec) > ?MAX_RECORD ->
                            throw({archive, {record_too_large, Base, byte_size(Rec)}});
                       ({Id, Bare, Rec}, {Acc, Off, _}) ->
                            Entry = <<Id:64, Off:40, (byte_size(Rec)):24, (peer_hash(Bare)):32>>,
                            {[Entry | Acc], Off + byte_size(Rec), Id}
                    end, {[], End0, Last0}, Recs),
    End > ?MAX_OFFSET andalso throw({archive, {archive_full, Base}}),
    done(file:pwrite(Dat, End0, [Rec || {_, _, Rec} <- Recs]), {write, Base}),
    done(file:pwrite(Idx, ?IDX_HDR + N0 * ?ENTRY, lists:reverse(Entries)), {write, Base}),
    A#arch{dat_end = End, n = N0 + length(Recs), last = Last}.

peer_hash(Bare) ->
    erlang:phash2(Bare, 1 bsl 32).

%% @doc Deletes the archive of U at S (open or not: close it first).
-spec delete(file:filename(), binary(), binary()) -> ok.
delete(Root, U, S) ->
    Base = base(Root, U, S),
    lists:foreach(fun(Ext) ->
                          case file:delete(Base ++ Ext) of
                              ok -> ok;
                              {error, enoent} -> ok;
                              {error, E} -> throw({archive, {delete, Base, E}})
                          end
                  end, [".idx", ".dat"]).

%% @doc Removes the messages with an id below Before and those beyond the
%% newest Max: what is kept is always the newest part. The index's header
%% then says where the archive begins (16 bytes written); once the part cut
%% off is as large as the part kept, the kept part is copied to new files
%% that replace the old ones, so that a message is copied about once in
%% its life however often the sweep cuts. Returns how many went and the
%% archive open again (`deleted' when none is left: the files are gone).
-spec keep_from(file:filename(), arch(), non_neg_integer(), non_neg_integer() | infinity) ->
    {non_neg_integer(), arch() | deleted}.
keep_from(Root, #arch{idx = Idx, dat = Dat, base = Base, n = N, dat_end = End, start = Start} = A,
          Before, Max) ->
    V = #view{idx = Idx, dat = Dat, n = N, base = Base, start = Start},
    K = case Max of
            infinity -> lower_bound(V, Before);
            _ -> max(lower_bound(V, Before), N - Max)
        end,
    if
        K =< Start ->
            {0, A};
        K >= N ->
            {U, S} = owner(Dat, Base),
            close(A),
            delete(Root, U, S),
            {N - Start, deleted};
        K < N - K ->
            done(file:pwrite(Idx, 8, <<K:64>>), {write, Base}),
            {K - Start, A#arch{start = K}};
        true ->
            {U, S} = owner(Dat, Base),
            Header = dat_header(U, S),
            Entries = read_entries(V, K, N),
            {_, From, _, _} = hd(Entries),
            Shift = From - byte_size(Header),
            NewIdx = [idx_header() |
                      [<<Id:64, (Off - Shift):40, Len:24, H:32>> || {Id, Off, Len, H} <- Entries]],
            Records = pread(Dat, From, End - From, Base),
            write_new(Base ++ ".dat", [Header, Records]),
            write_new(Base ++ ".idx", NewIdx),
            close(A),
            {K - Start, open(Root, U, S)}
    end.

%% Written beside, fsynced, renamed over: the old file or the new one, whole.
write_new(Path, Data) ->
    Tmp = Path ++ ".new",
    Fd = val(file:open(Tmp, [raw, binary, write]), {open, Tmp}),
    try
        done(file:write(Fd, Data), {write, Tmp}),
        done(file:datasync(Fd), {sync, Tmp})
    after
        file:close(Fd)
    end,
    done(file:rename(Tmp, Path), {rename, Tmp}).

owner(Dat, Base) ->
    case pread(Dat, 0, 7, Base) of
        <<?DAT_MAGIC, ?VERSION, ULen:16>> ->
            <<U:ULen/binary, SLen:16>> = pread(Dat, 7, ULen + 2, Base),
            {U, pread(Dat, 9 + ULen, SLen, Base)};
        _ ->
            throw({archive, {not_an_archive, Base}})
    end.

%% @doc The archives of the server S: each user (or room) and nothing else.
-spec users(file:filename(), binary()) -> [binary()].
users(Root, S) ->
    Dir = server_dir(Root, S),
    Dats = filelib:wildcard(filename:join([Dir, "??", "*.dat"])),
    lists:filtermap(fun(Path) ->
                            case file:open(Path, [raw, binary, read]) of
                                {ok, Fd} ->
                                    try owner(Fd, Path) of
                                        {U, S} -> {true, U};
                                        _ -> false
                                    catch throw:{archive, _} -> false
                                    after file:close(Fd)
                                    end;
                                {error, _} ->
                                    false
                            end
                    end, Dats).

%%% Reading (any process)

%% @doc The messages of U's archive that the filter selects, in ascending
%% order: the first Limit (forward) or the last Limit (backward). Pending:
%% the messages stored but perhaps not in the files yet (the writers'
%% table, read before the files: one that reached the files in between is
%% read there, and taken once).
-spec query(file:filename(), binary(), binary(), #mam_filter{}, {forward | backward,
            non_neg_integer()}, [#mam_msg{}]) -> [#mam_msg{}].
query(Root, U, S, F, {Dir, Limit}, Pending) ->
    read_view(Root, U, S,
              fun(V) ->
                      PM = pending_matches(V, F, Pending),
                      case Dir of
                          forward ->
                              lists:sublist(query_view(V, F, forward, Limit) ++ PM, Limit);
                          backward when length(PM) >= Limit ->
                              lists:nthtail(length(PM) - Limit, PM);
                          backward ->
                              query_view(V, F, backward, Limit - length(PM)) ++ PM
                      end
              end, ?RETRIES).

%% @doc How many messages the filter selects, and how many of them have an
%% id below Before; Pending as for {@link query/6}.
-spec count(file:filename(), binary(), binary(), {#mam_filter{}, non_neg_integer()},
            [#mam_msg{}]) -> {non_neg_integer(), non_neg_integer()}.
count(Root, U, S, {F, Before}, Pending) ->
    read_view(Root, U, S,
              fun(V) ->
                      PM = [Id || #mam_msg{id = Id} <- pending_matches(V, F, Pending)],
                      {C, B} = count_view(V, F, Before),
                      {C + length(PM), B + length([Id || Id <- PM, Id < Before])}
              end, ?RETRIES).

%% The pending messages the files do not have yet (ids above the files'
%% last: an archive is appended to in the order of its ids).
pending_matches(V, #mam_filter{ids = Ids} = F, Pending) ->
    Last = file_last(V),
    [M || #mam_msg{id = Id} = M <- Pending, Id > Last, selects(F, M),
          Ids =:= any orelse lists:member(Id, Ids)].

file_last(none) -> 0;
file_last(#view{n = 0}) -> 0;
file_last(#view{n = N} = V) -> element(1, entry(V, N - 1)).

read_view(Root, U, S, Fun, Tries) ->
    Base = base(Root, U, S),
    case read_once(Base, Fun) of
        {ok, Result} -> Result;
        stale when Tries > 1 -> read_view(Root, U, S, Fun, Tries - 1);
        stale -> throw({archive, {rewritten_while_read, Base}})
    end.

%% The index is opened first: an archive deleted in between has no
%% records, and the next try finds no index (the view `none').
read_once(Base, Fun) ->
    case file:open(Base ++ ".idx", [raw, binary, read]) of
        {error, enoent} ->
            {ok, Fun(none)};
        {error, E} ->
            throw({archive, {open, Base, E}});
        {ok, Idx} ->
            try file:open(Base ++ ".dat", [raw, binary, read]) of
                {error, enoent} ->
                    stale;
                {error, E} ->
                    throw({archive, {open, Base, E}});
                {ok, Dat} ->
                    try
                        Size = val(file:position(Idx, eof), {size, Base}),
                        N = max(0, (Size - ?IDX_HDR) div ?ENTRY),
                        <<_:8/binary, Start:64>> = pread(Idx, 0, ?IDX_HDR, Base),
                        {ok, Fun(#view{idx = Idx, dat = Dat, n = N, base = Base,
                                       start = min(Start, N)})}
                    catch
                        throw:stale -> stale
                    after
                        file:close(Dat)
                    end
            after
                file:close(Idx)
            end
    end.

query_view(none, _F, _Dir, _Limit) ->
    [];
query_view(_V, _F, _Dir, 0) ->
    [];
query_view(V, #mam_filter{ids = any, with = any, min = Min, max = Max}, Dir, Limit) ->
    {Lo, Hi} = range(V, Min, Max),
    {From, To} = case Dir of
                     forward -> {Lo, min(Hi, Lo + Limit)};
                     backward -> {max(Lo, Hi - Limit), Hi}
                 end,
    read_msgs(V, read_entries(V, From, To));
query_view(V, #mam_filter{ids = any, min = Min, max = Max} = F, forward, Limit) ->
    {Lo, Hi} = range(V, Min, Max),
    scan_forward(V, F, Lo, Hi, Limit, []);
query_view(V, #mam_filter{ids = any, min = Min, max = Max} = F, backward, Limit) ->
    {Lo, Hi} = range(V, Min, Max),
    scan_backward(V, F, Lo, Hi, Limit, []);
query_view(V, #mam_filter{ids = Ids} = F, Dir, Limit) ->
    Found = [M || M <- read_msgs(V, ids_entries(V, lists:usort(Ids))), selects(F, M)],
    case Dir of
        forward -> lists:sublist(Found, Limit);
        backward -> lists:nthtail(max(0, length(Found) - Limit), Found)
    end.

count_view(none, _F, _Before) ->
    {0, 0};
count_view(V, #mam_filter{ids = any, with = any, min = Min, max = Max}, Before) ->
    {Lo, Hi} = range(V, Min, Max),
    {Hi - Lo, max(Lo, min(Hi, lower_bound(V, Before))) - Lo};
count_view(#view{n = N} = V, #mam_filter{ids = any} = F, Before) ->
    count_below([Id || #mam_msg{id = Id} <- query_view(V, F, forward, N + 1)], Before);
count_view(V, #mam_filter{ids = Ids} = F, Before) ->
    count_below([Id || #mam_msg{id = Id} <- query_view(V, F, forward, length(Ids))], Before).

count_below(Ids, Before) ->
    {length(Ids), length([Id || Id <- Ids, Id < Before])}.

%% Entry positions [Lo, Hi) of the ids from Min to Max.
range(V, Min, Max) ->
    Lo = lower_bound(V, Min),
    {Lo, max(Lo, lower_bound(V, Max + 1))}.

%% A filter with a peer: the entries are read ?CHUNK at a time from the
%% end the query reads from; those whose hash is the peer's are read.
scan_forward(_V, _F, Lo, Hi, Limit, Acc) when Lo >= Hi; Limit =< 0 ->
    lists:append(lists:reverse(Acc));
scan_forward(V, F, Lo, Hi, Limit, Acc) ->
    To = min(Hi, Lo + ?CHUNK),
    Found = lists:sublist(matching(V, F, read_entries(V, Lo, To)), Limit),
    scan_forward(V, F, To, Hi, Limit - length(Found), [Found | Acc]).

scan_backward(_V, _F, Lo, Hi, Limit, Acc) when Lo >= Hi; Limit =< 0 ->
    lists:append(Acc);
scan_backward(V, F, Lo, Hi, Limit, Acc) ->
    From = max(Lo, Hi - ?CHUNK),
    All = matching(V, F, read_entries(V, From, Hi)),
    Found = lists:nthtail(max(0, length(All) - Limit), All),
    scan_backward(V, F, Lo, From, Limit - length(Found), [Found | Acc]).

matching(V, #mam_filter{with = {Bare, _}} = F, Entries) ->
    H = peer_hash(Bare),
    [M || M <- read_msgs(V, [E || {_, _, _, EH} = E <- Entries, EH =:= H]), selects(F, M)].

%% @doc Whether a message is in the filter's id range and with its peer
%% (the filter's ids are not looked at).
-spec selects(#mam_filter{}, #mam_msg{}) -> boolean().
selects(#mam_filter{min = Min, max = Max, with = With}, #mam_msg{id = Id, peer = Peer}) ->
    Id >= Min andalso Id =< Max andalso with_matches(With, Peer).

with_matches(any, _Peer) -> true;
with_matches({Bare, any}, {Bare, _}) -> true;
with_matches({Bare, Res}, {Bare, Res}) -> true;
with_matches(_, _) -> false.

ids_entries(#view{n = N} = V, Ids) ->
    lists:filtermap(fun(Id) ->
                            P = lower_bound(V, Id),
                            case P < N andalso entry(V, P) of
                                {Id, _, _, _} = E -> {true, E};
                                _ -> false
                            end
                    end, Ids).

%% The first position from the start whose id is at least Id (N: none).
lower_bound(#view{n = N, start = Start} = V, Id) ->
    if
        N =< Start -> N;
        true ->
            case entry(V, N - 1) of
                {Last, _, _, _} when Last < Id -> N;
                _ -> lower_bound(V, Id, Start, N - 1)
            end
    end.

%% The answer is in [Lo, Hi], and the entry at Hi has an id >= Id.
lower_bound(_V, _Id, Lo, Lo) ->
    Lo;
lower_bound(V, Id, Lo, Hi) ->
    Mid = (Lo + Hi) div 2,
    case entry(V, Mid) of
        {MidId, _, _, _} when MidId < Id -> lower_bound(V, Id, Mid + 1, Hi);
        _ -> lower_bound(V, Id, Lo, Mid)
    end.

entry(#view{idx = Idx, base = Base}, P) ->
    entry_at(Idx, P, Base).

entry_at(Idx, P, Base) ->
    <<Id:64, Off:40, Len:24, H:32>> = pread(Idx, ?IDX_HDR + P * ?ENTRY, ?ENTRY, Base),
    {Id, Off, Len, H}.

read_entries(_V, From, To) when From >= To ->
    [];
read_entries(#view{idx = Idx, base = Base}, From, To) ->
    Bin = pread(Idx, ?IDX_HDR + From * ?ENTRY, (To - From) * ?ENTRY, Base),
    [{Id, Off, Len, H} || <<Id:64, Off:40, Len:24, H:32>> <= Bin].

%% The records of the entries (in their order), ?CHUNK at a time, each
%% chunk with one read from its first record to the end of its last.
read_msgs(_V, []) ->
    [];
read_msgs(#view{dat = Dat, base = Base} = V, Entries) ->
    {Chunk, Rest} = case length(Entries) > ?CHUNK of
                        true -> lists:split(?CHUNK, Entries);
                        false -> {Entries, []}
                    end,
    {_, From, _, _} = hd(Chunk),
    {_, LastOff, LastLen, _} = lists:last(Chunk),
    Span = pread(Dat, From, LastOff + LastLen - From, Base),
    [decode(Span, Off - From, Len, Id) || {Id, Off, Len, _} <- Chunk] ++ read_msgs(V, Rest).

decode(Span, At, Len, Id) ->
    case Span of
        <<_:At/binary, Id:64, BL:16, Bare:BL/binary, RL:16, Res:RL/binary, Rest/binary>>
          when byte_size(Rest) >= Len - 12 - BL - RL ->
            Packet = binary:part(Rest, 0, Len - 12 - BL - RL),
            #mam_msg{id = Id, peer = {Bare, Res}, packet = binary:copy(Packet)};
        _ ->
            throw(stale)
    end.

pread(Fd, Pos, Len, Base) ->
    case file:pread(Fd, Pos, Len) of
        {ok, Bin} when byte_size(Bin) =:= Len -> Bin;
        {ok, _Short} -> throw(stale);
        eof -> throw(stale);
        {error, E} -> throw({archive, {read, Base, E}})
    end.

done(ok, _What) -> ok;
done({error, E}, What) -> throw({archive, {What, E}}).

val({ok, V}, _What) -> V;
val({error, E}, What) -> throw({archive, {What, E}}).

%%% The writer's log

%% @doc DATA_DIR/archive/.wal: a domain cannot be named `.wal'.
-spec wal_dir(file:filename()) -> file:filename().
wal_dir(Root) ->
    filename:join(Root, ".wal").

%% @doc The log files of every shard, oldest first within a shard: each
%% `{Shard, Seq, Path}'.
-spec wal_files(file:filename()) -> [{non_neg_integer(), non_neg_integer(), file:filename()}].
wal_files(Root) ->
    Files = filelib:wildcard(filename:join(wal_dir(Root), "*.log")),
    lists:sort(lists:filtermap(
                 fun(Path) ->
                         case string:split(filename:basename(Path, ".log"), "-") of
                             [A, B] ->
                                 try {true, {list_to_integer(A), list_to_integer(B), Path}}
                                 catch error:badarg -> false
                                 end;
                             _ -> false
                         end
                 end, Files)).

%% @doc A log record: a message stored (its record), an archive deleted,
%% or an archive cut (`{keep, Before, Max}').
-spec wal_record({binary(), binary()}, store | delete | {keep, non_neg_integer(),
                                                        non_neg_integer() | infinity},
                 binary()) -> binary().
wal_record({U, S}, What, Rec) ->
    Body = case What of
               store -> [?WAL_STORE, us(U, S), Rec];
               delete -> [?WAL_DELETE, us(U, S)];
               {keep, Before, infinity} -> [?WAL_KEEP, us(U, S), <<Before:64, ?INFINITE_MAX:64>>];
               {keep, Before, Max} -> [?WAL_KEEP, us(U, S), <<Before:64, Max:64>>]
           end,
    Bin = iolist_to_binary(Body),
    <<(byte_size(Bin)):32, (erlang:crc32(Bin)):32, Bin/binary>>.

us(U, S) ->
    <<(byte_size(U)):16, U/binary, (byte_size(S)):16, S/binary>>.

%% @doc Puts the log on disk.
-spec wal_sync(file:fd()) -> ok | {error, term()}.
wal_sync(Fd) ->
    file:datasync(Fd).

%% @doc Applies one log file to the archives: a record whose id an archive
%% already has is skipped, so a log applied twice changes nothing. A
%% record cut short by a crash ends the file. Returns the records applied
%% and the archives still open (`Open', a map that the caller closes).
-spec replay_wal(file:filename(), {file:filename(), map()}) -> {non_neg_integer(), map()}.
replay_wal(Path, {Root, Open}) ->
    fold_wal(Path, fun(Body, {N, O}) -> {N + 1, apply_wal(Body, Root, bounded(O))} end, {0, Open}).

%% @doc The largest id of the stores a log file holds (whole records only).
-spec wal_max_id(file:filename()) -> non_neg_integer().
wal_max_id(Path) ->
    fold_wal(Path, fun(Body, Max) -> max(Max, store_id(Body)) end, 0).

%% Fun(Body, Acc) for each whole record of a log file, in order; a record
%% damaged or cut short by a crash ends the file.
fold_wal(Path, Fun, Acc) ->
    {ok, Bin} = file:read_file(Path),
    fold_records(Bin, Fun, Acc, Path, 0).

fold_records(<<Len:32, Crc:32, Body:Len/binary, Rest/binary>>, Fun, Acc, Path, Pos) ->
    case erlang:crc32(Body) of
        Crc ->
            fold_records(Rest, Fun, Fun(Body, Acc), Path, Pos + 8 + Len);
        _ ->
            logger:warning(#{what => archive_log_record_damaged, file => Path, offset => Pos}),
            Acc
    end;
fold_records(<<>>, _Fun, Acc, _Path, _Pos) ->
    Acc;
fold_records(_Cut, _Fun, Acc, Path, Pos) ->
    logger:warning(#{what => archive_log_cut_short, file => Path, offset => Pos}),
    Acc.

%% The id of a store's record (0 for the other kinds).
store_id(<<?WAL_STORE, UL:16, _:UL/binary, SL:16, _:SL/binary, Id:64, _/binary>>) -> Id;
store_id(_) -> 0.

%% At most 256 archives open while replaying.
bounded(Open) when map_size(Open) >= 256 ->
    close_all(Open),
    #{};
bounded(Open) ->
    Open.

apply_wal(<<Kind, UL:16, U:UL/binary, SL:16, S:SL/binary, Rest/binary>>, Root, Open) ->
    US = {U, S},
    case Kind of
        ?WAL_STORE ->
            <<Id:64, BL:16, Bare:BL/binary, _/binary>> = Rest,
            put_record(Root, US, Id, Bare, Rest, Open);
        ?WAL_DELETE ->
            Open1 = close_cached(US, Open),
            delete(Root, U, S),
            Open1;
        ?WAL_KEEP ->
            <<Before:64, Max0:64>> = Rest,
            Max = case Max0 of ?INFINITE_MAX -> infinity; _ -> Max0 end,
            {A, Open1} = open_cached(Root, US, Open),
            case keep_from(Root, A, Before, Max) of
                {_, deleted} -> maps:remove(US, Open1);
                {_, A1} -> Open1#{US => A1}
            end
    end.

%% @doc Appends a message to U's archive at recovery (a migration from the
%% table) unless the archive already has its id; Open: the archives this
%% recovery keeps open, closed with {@link close_all/1}.
-spec restore(file:filename(), {binary(), binary()}, non_neg_integer(), {binary(), binary()},
              binary(), map()) -> map().
restore(Root, US, Id, {Bare, _} = Peer, Packet, Open) ->
    put_record(Root, US, Id, Bare, record(Id, Peer, Packet), bounded(Open)).

put_record(Root, US, Id, Bare, Rec, Open) ->
    {A, Open1} = open_cached(Root, US, Open),
    case Id > last_id(A) of
        true -> Open1#{US => append(A, Id, Bare, Rec)};
        false -> Open1
    end.

%% @doc Closes the archives of a recovery.
-spec close_all(map()) -> ok.
close_all(Open) ->
    maps:foreach(fun(_, A) -> close(A) end, Open).

open_cached(Root, {U, S} = US, Open) ->
    case Open of
        #{US := A} -> {A, Open};
        _ -> {open(Root, U, S), Open}
    end.

close_cached(US, Open) ->
    case maps:take(US, Open) of
        {A, Rest} -> close(A), Rest;
        error -> Open
    end.

%% @doc At a start, before the writers run: every log is applied to the
%% archives, the file system is synced, and the logs are deleted. Returns
%% the records applied and the largest id the logs held.
-spec recover(file:filename()) -> {non_neg_integer(), non_neg_integer()}.
recover(Root) ->
    case wal_files(Root) of
        [] ->
            {0, 0};
        Files ->
            Apply = fun(Body, {N0, Open0, Max0}) ->
                            {N0 + 1, apply_wal(Body, Root, bounded(Open0)), max(Max0, store_id(Body))}
                    end,
            {N, Open, Max} = lists:foldl(fun({_, _, Path}, Acc) -> fold_wal(Path, Apply, Acc) end,
                                         {0, #{}, 0}, Files),
            close_all(Open),
            case syncfs(Root) of
                ok ->
                    lists:foreach(fun({_, _, Path}) -> ok = file:delete(Path) end, Files);
                {error, Why} ->
                    %% Kept: the next start applies them again.
                    logger:error(#{what => archive_sync_failed, dir => Root, reason => Why})
            end,
            logger:notice(#{what => archive_log_replayed, files => length(Files), records => N}),
            {N, Max}
    end.

%% @doc The largest id ever given (as the `.floor' files of the log
%% directory keep it): new ids are above it, whatever the clock says.
-spec floor(file:filename()) -> non_neg_integer().
floor(Root) ->
    lists:max([0 | [case file:read_file(P) of
                        {ok, <<Id:64>>} -> Id;
                        _ -> 0
                    end || P <- filelib:wildcard(filename:join(wal_dir(Root), "*.floor"))]]).

%% @doc Keeps Id as a floor under Name (a writer's shard, or the start's).
-spec set_floor(file:filename(), string(), non_neg_integer()) -> ok.
set_floor(Root, Name, Id) ->
    Path = filename:join(wal_dir(Root), Name ++ ".floor"),
    done(filelib:ensure_dir(Path), {mkdir, Path}),
    write_new(Path, <<Id:64>>).

%% @doc Puts every written page of the file system that holds Dir on disk
%% (syncfs(2), through coreutils' `sync -f'): one call for all the
%% archives written since the last one.
-spec syncfs(file:filename()) -> ok | {error, term()}.
syncfs(Dir) ->
    case os:find_executable("sync") of
        false ->
            {error, no_sync_command};
        Sync ->
            Port = open_port({spawn_executable, Sync},
                             [{args, ["-f", Dir]}, exit_status, stderr_to_stdout, binary]),
            wait_exit(Port, <<>>)
    end.

wait_exit(Port, Out) ->
    receive
        {Port, {data, D}} -> wait_exit(Port, <<Out/binary, D/binary>>);
        {Port, {exit_status, 0}} -> ok;
        {Port, {exit_status, St}} -> {error, {sync_exit, St, Out}}
    end.
