%% @doc What the message archive (XEP-0313, throng_mod_mam) costs in the
%% embedded store (bench/mam.sh runs this in a node of its own, with the
%% compiled server on the code path): the node's memory per archived
%% message (the archive is in files: throng_archive_files) and its bytes on
%% disk (records, index, and the writers' logs until a checkpoint); how
%% many archive writes a second one writer and 40 concurrent writers get,
%% with the CPU each costs (a write is not waited on: the writer's log is
%% fsynced with the writes of the next 20 ms), and the writers' queues
%% after the flood; and the time of a page query in a large archive.
-module(mambench).

-export([main/1]).

-include_lib("throng/include/throng.hrl").

main([DirS, NS, UsersS]) ->
    N = list_to_integer(NS),
    Users = list_to_integer(UsersS),
    Dir = list_to_binary(DirS),
    ok = application:set_env(throng, config,
                             #{hosts => [<<"localhost">>], data_dir => Dir, loglevel => warning,
                               listen => [#{port => 0}], modules => #{}}),
    {ok, _} = application:ensure_all_started(throng),
    Packet = packet(),
    io:format("packet: ~b bytes (a chat message with a 100-character body, an id, a chat "
              "state and an origin-id)~n", [byte_size(Packet)]),
    memory(N, Users, Packet, Dir),
    writes(Packet),
    queries(Packet),
    application:stop(throng),
    halt(0).

packet() ->
    Body = binary:copy(<<"0123456789">>, 10),
    iolist_to_binary(
      ["<message from='alice@localhost/phone-4f2a' to='bob@localhost' type='chat' "
       "id='5c1f8a2e-7d3b-4a9e-8f61-2b0c9d4e7a13'><body>", Body, "</body>"
       "<active xmlns='http://jabber.org/protocol/chatstates'/>"
       "<origin-id xmlns='urn:xmpp:sid:0' id='5c1f8a2e-7d3b-4a9e-8f61-2b0c9d4e7a13'/>"
       "</message>"]).

msg(Id, Packet) ->
    %% A fresh binary per message, as a parsed and serialized stanza is.
    #mam_msg{id = Id, peer = {<<"alice@localhost">>, <<"phone-4f2a">>},
             packet = binary:copy(Packet)}.

user(I) -> <<"user", (integer_to_binary(I))/binary>>.

%% N messages spread over Users users, one after another.
memory(N, Users, Packet, Dir) ->
    erlang:garbage_collect(),
    Mem0 = erlang:memory(total),
    Start = os:system_time(microsecond),
    {R0, _} = statistics(runtime),
    lists:foreach(fun(I) ->
                          throng_storage:mam_store(user(I rem Users), <<"localhost">>,
                                                   msg(Start + I, Packet))
                  end, lists:seq(1, N)),
    %% What is still pending goes to the files (the CPU counted).
    throng_archive_writer:catch_up(),
    {R1, _} = statistics(runtime),
    [erlang:garbage_collect(P) || P <- processes()],
    Mem = erlang:memory(total) - Mem0,
    Root = binary_to_list(Dir) ++ "/archive",
    Files = [F || F <- filelib:wildcard(Root ++ "/*/*/*"), filelib:is_regular(F)],
    Logs = [F || F <- filelib:wildcard(Root ++ "/.wal/*.log")],
    Disk = lists:sum([filelib:file_size(F) || F <- Files ++ Logs]),
    LogBytes = lists:sum([filelib:file_size(F) || F <- Logs]),
    io:format("memory: ~b messages over ~b users: ~.1f bytes per message of the node's memory "
              "(erlang:memory(total) after a collection), ~.1f bytes per message on disk "
              "(~.1f of them the writers' logs, deleted at the next checkpoint); "
              "~.1f us of CPU per write~n",
              [N, Users, Mem / N, Disk / N, LogBytes / N, (R1 - R0) * 1000 / N]).

%% C writers, each storing M messages one by one.
writes(Packet) ->
    [begin
         Self = self(),
         {R0, _} = statistics(runtime),
         T0 = erlang:monotonic_time(microsecond),
         Pids = [spawn_link(fun() ->
                                    [throng_storage:mam_store(<<"w", (integer_to_binary(W))/binary>>,
                                                              <<"localhost">>,
                                                              msg(throng_mam_id:next(), Packet))
                                     || _ <- lists:seq(1, M)],
                                    Self ! {done, self()}
                            end) || W <- lists:seq(1, C)],
         [receive {done, P} -> ok end || P <- Pids],
         T = erlang:monotonic_time(microsecond) - T0,
         {R1, _} = statistics(runtime),
         Backlog = lists:sum([N || P <- processes(),
                                   {registered_name, Name} <- [process_info(P, registered_name)],
                                   lists:prefix("throng_archive_writer_", atom_to_list(Name)),
                                   {message_queue_len, N} <- [process_info(P, message_queue_len)]]),
         io:format("writes: ~b writer(s) x ~b: ~b writes/s, ~.1f us of CPU each; ~b left in "
                   "the archive writers' queues at the end~n",
                   [C, M, round(C * M * 1000000 / T), (R1 - R0) * 1000 / (C * M), Backlog])
     end || {C, M} <- [{1, 20000}, {40, 10000}]],
    ok.

%% A page of 50 from either end and from the middle of a 20,000-message
%% archive, and a count of it.
queries(Packet) ->
    U = <<"big">>,
    Base = os:system_time(microsecond),
    [throng_storage:mam_store(U, <<"localhost">>, msg(Base + I, Packet)) || I <- lists:seq(1, 20000)],
    %% In the files, as an archive is half a second after its messages
    %% (a query also reads the messages still pending: a few, then).
    throng_archive_writer:catch_up(),
    Time = fun(F) ->
                   {T, _} = timer:tc(fun() -> [F() || _ <- lists:seq(1, 20)] end),
                   T / 20
           end,
    Q = fun(Filter, Dir) -> fun() -> throng_storage:mam_query(U, <<"localhost">>, Filter, Dir, 51) end end,
    io:format("queries (20,000 messages, 51 read): last page ~.1f us, first page ~.1f us, "
              "after the middle ~.1f us, with a peer that matches none ~.1f us, count ~.1f us~n",
              [Time(Q(#mam_filter{}, backward)), Time(Q(#mam_filter{}, forward)),
               Time(Q(#mam_filter{min = Base + 10000}, forward)),
               Time(Q(#mam_filter{with = {<<"nobody@localhost">>, any}}, forward)),
               Time(fun() -> throng_storage:mam_count(U, <<"localhost">>, #mam_filter{}) end)]).
