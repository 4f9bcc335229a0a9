%% @doc Memory per session of a running Throng node (bench/memory.sh runs
%% this). From a separate BEAM node it logs N users in over plain TCP with
%% SASL PLAIN (users user1..userN, bulk-registered with 18-contact mutual
%% rosters), with the Erlang'07 study's client mix: 20% inactive (roster get,
%% initial presence), 60% idle (initial presence), 20% active (roster get,
%% initial presence, a few chat messages to online contacts). It measures
%% the server's RSS (from /proc) and BEAM memory with the users offline and
%% with every session connected, idle and settled, and prints
%% (RSS connected - RSS offline) / N. /proc is read with throng_lib's
%% throng_proc_sample (bench/memory.sh puts the release's throng_lib on the
%% code path).
-module(membench).

-export([main/1, allocators/0, top_processes/1]).

%% @doc Runs on the server node: per allocator type, the bytes of carriers
%% it holds and of blocks in use, summed over instances (the difference is
%% free space inside carriers: fragmentation and cached carriers).
allocators() ->
    Types = [eheap_alloc, binary_alloc, ets_alloc, driver_alloc, std_alloc, ll_alloc,
             sl_alloc, temp_alloc, fix_alloc, literal_alloc],
    [begin
         Insts = erlang:system_info({allocator, T}),
         {C, B} = lists:foldl(fun({instance, _, Props}, {CA, BA}) ->
                                      {CA + carriers(Props), BA + blocks(Props)};
                                 (_, Acc) -> Acc
                              end, {0, 0}, Insts),
         {T, C, B}
     end || T <- Types].

carriers(Props) ->
    lists:sum([size_of(carriers_size, proplists:get_value(K, Props, [])) || K <- [mbcs, sbcs, mbcs_pool]]).

blocks(Props) ->
    lists:sum([size_of(blocks_size, proplists:get_value(K, Props, [])) || K <- [mbcs, sbcs, mbcs_pool]]).

size_of(Key, L) when is_list(L) ->
    case lists:keyfind(Key, 1, L) of
        {Key, V} when is_integer(V) -> V;
        {Key, V, _, _} -> V;
        _ ->
            %% OTP 25 reports blocks per allocator type: {blocks, [{Type, [{size,..}]}]}
            case lists:keyfind(blocks, 1, L) of
                {blocks, Bs} when Key =:= blocks_size ->
                    lists:sum([Cur || {_, P} <- Bs, {size, Cur, _, _} <- [lists:keyfind(size, 1, P)]]);
                _ -> 0
            end
    end;
size_of(_, _) -> 0.

-define(HDR, "<?xml version='1.0'?><stream:stream to='localhost' xmlns='jabber:client' "
             "xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>").

main([NodeStr, PidStr, NStr, PortStr, SettleStr]) ->
    Node = list_to_atom(NodeStr),
    OsPid = list_to_integer(PidStr),
    N = list_to_integer(NStr),
    Port = list_to_integer(PortStr),
    Settle = list_to_integer(SettleStr),
    pong = net_adm:ping(Node),
    {ok, _} = application:ensure_all_started(ssl),
    %% allocators/0 runs on the server node: load this module there.
    {Mod, Bin, File} = code:get_object_code(?MODULE),
    {module, Mod} = rpc:call(Node, code, load_binary, [Mod, File, Bin]),
    io:format("server node ~s (os pid ~b), ~b users, port ~b~n", [Node, OsPid, N, Port]),
    %% Mnesia writes the bulk registration's log into its table files in the
    %% background; do it now so that it is not counted in either sample.
    {atomic_ok, _} = {atomic_ok, rpc:call(Node, mnesia, dump_log, [])},
    settle(Node, Settle),
    Off = sample(Node, OsPid),
    report("offline (N users registered)", Off),
    print_allocators(Node, "offline"),
    T0 = erlang:monotonic_time(millisecond),
    Cpu0 = cpu_ms(OsPid),
    Clients = login_all(N, Port),
    T1 = erlang:monotonic_time(millisecond),
    Cpu1 = cpu_ms(OsPid),
    io:format("logged in ~b sessions in ~.1f s (~.1f logins/s); server CPU ~.3f ms per login~n",
              [length(Clients), (T1 - T0) / 1000, length(Clients) * 1000 / max(1, T1 - T0),
               (Cpu1 - Cpu0) / length(Clients)]),
    %% throng_info is the server's read API; a build older than it (a
    %% before/after pair, bench/pair.sh) is asked through throng_sm.
    Sessions = case rpc:call(Node, throng_info, sessions, []) of
                   {badrpc, _} -> rpc:call(Node, throng_sm, count, []);
                   S -> S
               end,
    io:format("sessions on the server: ~p~n", [Sessions]),
    chat(Clients),
    settle(Node, Settle),
    On = sample(Node, OsPid),
    report("connected (N sessions, idle)", On),
    PerSession = fun(K) -> (maps:get(K, On) - maps:get(K, Off)) / N end,
    io:format("~n== memory per session (N = ~b) ==~n", [N]),
    [io:format("  ~-22s ~8.1f bytes~n", [K, PerSession(K)])
     || K <- [rss, beam_total, processes, ets, binary, system]],
    %% What the BEAM does not account for: libraries' own malloc (OpenSSL's
    %% per-connection state under TLS), allocator and page overhead.
    io:format("  ~-22s ~8.1f bytes~n", [outside_beam, PerSession(rss) - PerSession(beam_total)]),
    ArchivedRows = case rpc:call(Node, mnesia, table_info, [throng_mam, size]) of
                       Rows when is_integer(Rows) -> Rows;
                       _ -> 0
                   end,
    ArchivedInFiles = archived_in_files(Node),
    io:format("  ~-22s ~8.1f bytes (~b messages archived in RAM, ~.1f per session; "
              "~b in the archive's files, not in RAM)~n",
              [archive_rows, PerSession(archive), ArchivedRows, ArchivedRows / N, ArchivedInFiles]),
    %% The archived stanzas themselves are off-heap binaries (larger than
    %% 64 bytes), in binary_alloc, not in the table's words: counted here
    %% after the last sample (the read copies the table into the server).
    ArchiveBins = archive_binary_bytes(Node) / N,
    io:format("  ~-22s ~8.1f bytes~n", [archive_binaries, ArchiveBins]),
    io:format("  ~-22s ~8.1f bytes~n", [rss_but_archive, PerSession(rss) - PerSession(archive)]),
    io:format("  ~-22s ~8.1f bytes~n", [rss_but_archive_all, PerSession(rss) - PerSession(archive) - ArchiveBins]),
    Pid = session_pid(Node),
    C2S = rpc:call(Node, erlang, process_info, [Pid, [memory, total_heap_size, message_queue_len,
                                                      binary, links]]),
    io:format("  one idle c2s process: ~p~n", [C2S]),
    case os:getenv("MEMBENCH_DEBUG") of
        false -> ok;
        _ ->
            {St, Data} = rpc:call(Node, sys, get_state, [Pid]),
            io:format("  state ~p (~b words):~n  ~p~n",
                      [St, rpc:call(Node, erts_debug, flat_size, [Data]), Data])
    end,
    Ports = [P || P <- proplists:get_value(links, C2S), is_port(P)],
    io:format("  its socket: ~p~n", [[rpc:call(Node, erlang, port_info, [P, memory]) || P <- Ports]]),
    print_allocators(Node, "connected"),
    print_top_processes(Node),
    io:format("~nRESULT rss_per_session_bytes=~.1f archive_per_session_bytes=~.1f "
              "archive_binaries_per_session_bytes=~.1f n=~b sessions=~p~n",
              [PerSession(rss), PerSession(archive), ArchiveBins, N, Sessions]),
    %% MEMBENCH_HOLD=Seconds: keep the sessions that long after measuring
    %% (to inspect the server by hand: gdb, /proc/PID/smaps).
    case os:getenv("MEMBENCH_HOLD") of
        false -> ok;
        Hold -> io:format("holding the sessions ~s s~n", [Hold]),
                timer:sleep(list_to_integer(Hold) * 1000)
    end,
    [close(S) || {S, _} <- Clients],
    halt(0).

%% The largest processes of the server node: a per-session figure that
%% moved is either every session or one process that grew.
print_top_processes(Node) ->
    Top = rpc:call(Node, ?MODULE, top_processes, [5]),
    io:format("largest processes (bytes, registered name or initial call):~n"),
    [io:format("  ~10b  ~p~n", [M, Name]) || {M, Name} <- Top].

%% Runs in the server node (loaded there by main/1).
-spec top_processes(pos_integer()) -> [{non_neg_integer(), term()}].
top_processes(N) ->
    Infos = [{M, name(P)} || P <- processes(),
                             {memory, M} <- [erlang:process_info(P, memory)]],
    lists:sublist(lists:reverse(lists:sort(Infos)), N).

name(P) ->
    case erlang:process_info(P, [registered_name, initial_call]) of
        [{registered_name, Name}, _] when is_atom(Name) -> Name;
        [_, {initial_call, Call}] -> Call;
        _ -> gone
    end.

print_allocators(Node, Label) ->
    io:format("allocators, ~s (carriers / blocks in use, MB):~n", [Label]),
    [io:format("  ~-14s ~8.1f / ~8.1f~n", [A, C / 1048576, B / 1048576])
     || {A, C, B} <- rpc:call(Node, ?MODULE, allocators, [])].

session_pid(Node) ->
    case rpc:call(Node, throng_info, next_session, [undefined]) of
        {_, Pid} when is_pid(Pid) -> Pid;
        {badrpc, _} ->
            %% A build older than throng_info (bench/pair.sh).
            case rpc:call(Node, throng_sm, all, []) of
                [{_, Pid} | _] -> Pid;
                _ -> self()
            end;
        _ -> self()
    end.

%% Garbage-collects every process on the server, then waits for things to
%% settle (hibernation after hibernate_after, Mnesia dumps).
settle(Node, Seconds) ->
    timer:sleep(Seconds * 1000),
    _ = rpc:call(Node, erlang, garbage_collect, []),
    [rpc:call(Node, erlang, garbage_collect, [P])
     || P <- rpc:call(Node, erlang, processes, [])],
    %% Free C heap pages back to the OS in both samples alike (a release
    %% without the TLS NIF answers badrpc: nothing to trim there).
    _ = rpc:call(Node, throng_tls_nif, trim, []),
    timer:sleep(1000).

sample(Node, OsPid) ->
    Mem = rpc:call(Node, erlang, memory, []),
    #{rss => rss(OsPid),
      beam_total => proplists:get_value(total, Mem),
      processes => proplists:get_value(processes, Mem),
      ets => proplists:get_value(ets, Mem),
      binary => proplists:get_value(binary, Mem),
      system => proplists:get_value(system, Mem),
      archive => archive_bytes(Node)}.

%% The messages in the archives' files (a node alone on its data keeps its
%% archives there, not in RAM): 20 bytes of index per message after a
%% 16-byte header.
archived_in_files(Node) ->
    case rpc:call(Node, throng_archive_files, root, []) of
        Root when is_list(Root) ->
            Idx = rpc:call(Node, filelib, wildcard, [filename:join([Root, "*", "*", "*.idx"])]),
            lists:sum([max(0, (rpc:call(Node, filelib, file_size, [F]) - 16) div 20) || F <- Idx]);
        _ ->
            0
    end.

%% The bytes of the message archive's rows in RAM (Mnesia's throng_mam
%% table, a disc_copies table: the archive is kept in RAM and on disk);
%% 0 with PostgreSQL, or a build without MAM. Archived messages are data,
%% not session state: the report gives the figure with and without them.
archive_bytes(Node) ->
    case rpc:call(Node, mnesia, table_info, [throng_mam, memory]) of
        Words when is_integer(Words) -> Words * erlang:system_info(wordsize);
        _ -> 0
    end.

%% The bytes of the archived stanzas kept off-heap (binaries larger than
%% 64 bytes, each with its ~40-byte header); 0 without the table.
archive_binary_bytes(Node) ->
    case rpc:call(Node, ets, tab2list, [throng_mam], 60000) of
        Rows when is_list(Rows) -> lists:sum([off_heap(R) || R <- Rows]);
        _ -> 0
    end.

off_heap(B) when is_binary(B), byte_size(B) > 64 -> byte_size(B) + 40;
off_heap(T) when is_tuple(T) -> lists:sum([off_heap(E) || E <- tuple_to_list(T)]);
off_heap(L) when is_list(L) -> lists:sum([off_heap(E) || E <- L]);
off_heap(_) -> 0.

%% User + system CPU time of a process, in milliseconds.
cpu_ms(OsPid) ->
    throng_proc_sample:cpu_seconds(proc(OsPid)) * 1000.

rss(OsPid) ->
    #{rss := Rss} = proc(OsPid),
    Rss.

proc(OsPid) ->
    #{} = throng_proc_sample:sample(OsPid).

report(Label, M) ->
    io:format("~s: RSS ~.1f MB, BEAM ~.1f MB (processes ~.1f, ets ~.1f, binary ~.1f)~n",
              [Label, mb(rss, M), mb(beam_total, M), mb(processes, M), mb(ets, M), mb(binary, M)]).

mb(K, M) -> maps:get(K, M) / 1048576.

%%% Clients: one process each, logins pipelined (header + auth, then the
%%% restarted header + bind + roster/presence), 200 in flight at a time.

login_all(N, Port) ->
    Self = self(),
    Kinds = [kind(I) || I <- lists:seq(1, N)],
    batches(lists:zip(lists:seq(1, N), Kinds), Port, Self, 200, []).

kind(I) when I rem 10 < 2 -> inactive;
kind(I) when I rem 10 < 8 -> idle;
kind(_) -> active.

batches([], _Port, _Self, _W, Acc) ->
    lists:reverse(Acc);
batches(Users, Port, Self, W, Acc) ->
    {Now, Later} = lists:split(min(W, length(Users)), Users),
    Pids = [spawn(fun() -> client(Self, Port, I, K) end) || {I, K} <- Now],
    Got = [receive {ready, P, S, K} -> {S, {P, K}}; {failed, P, Why} -> error({login_failed, Why})
           after 30000 -> error(login_timeout) end || P <- Pids],
    case length(Acc) rem 5000 < W of
        true -> io:format("  ~b sessions~n", [length(Acc) + length(Got)]);
        false -> ok
    end,
    batches(Later, Port, Self, W, lists:reverse(Got, Acc)).

client(Parent, Port, I, Kind) ->
    User = <<"user", (integer_to_binary(I))/binary>>,
    {ok, T} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {active, false}, {nodelay, true}]),
    S = secure(os:getenv("MEMBENCH_TLS"), T),
    Auth = base64:encode(<<0, User/binary, 0, "password">>),
    ok = send(S, [?HDR, "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>",
                  Auth, "</auth>"]),
    ok = wait_for(S, <<"<success">>),
    Roster = case Kind of
                 idle -> [];
                 _ -> "<iq type='get' id='r'><query xmlns='jabber:iq:roster'/></iq>"
             end,
    ok = send(S, [?HDR, "<iq type='set' id='b'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'>"
                  "<resource>bench</resource></bind></iq>", Roster, "<presence/>"]),
    ok = wait_for(S, <<"id='b'">>),
    Parent ! {ready, self(), S, Kind},
    ok = controlling_process(S, Parent).

%% MEMBENCH_TLS=starttls: the stream is secured with STARTTLS first (OTP
%% ssl on the client side, TLS 1.2 or 1.3, no certificate check: the
%% server's is self-signed).
secure(false, T) -> {gen_tcp, T};
secure("", T) -> {gen_tcp, T};
secure("starttls", T) ->
    ok = gen_tcp:send(T, [?HDR]),
    ok = wait_for({gen_tcp, T}, <<"</stream:features>">>),
    ok = gen_tcp:send(T, "<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>"),
    ok = wait_for({gen_tcp, T}, <<"<proceed">>),
    {ok, S} = ssl:connect(T, [{verify, verify_none}, {versions, ['tlsv1.3', 'tlsv1.2']},
                              {active, false}], 30000),
    {ssl, S}.

send({M, S}, Data) -> M:send(S, Data).
recv({M, S}, Len, Timeout) -> M:recv(S, Len, Timeout).
close({M, S}) -> M:close(S).
controlling_process({M, S}, Pid) -> M:controlling_process(S, Pid).

wait_for(S, Pattern) -> wait_for(S, Pattern, <<>>).
wait_for(S, Pattern, Buf) ->
    case binary:match(Buf, Pattern) of
        nomatch ->
            case recv(S, 0, 30000) of
                {ok, Data} -> wait_for(S, Pattern, <<(tail(Buf))/binary, Data/binary>>);
                {error, Why} -> exit({recv, Why})
            end;
        _ -> ok
    end.

tail(B) when byte_size(B) > 64 -> binary:part(B, byte_size(B) - 64, 64);
tail(B) -> B.

%% Active users send a few chat messages to their contacts; receiving
%% sockets are drained so the server does not buffer.
chat(Clients) ->
    Active = [{S, I} || {{S, {_P, active}}, I} <- lists:zip(Clients, lists:seq(1, length(Clients)))],
    N = length(Clients),
    [begin
         To = [<<"user", (integer_to_binary(((I + D - 1) rem N) + 1))/binary, "@localhost">>
               || D <- [1, 2, 3]],
         send(S, [["<message type='chat' to='", T, "'><body>hello from the memory bench</body></message>"]
                          || T <- To])
     end || {S, I} <- Active],
    timer:sleep(2000),
    [drain(S) || {S, _} <- Clients],
    ok.

drain(S) ->
    case recv(S, 0, 0) of
        {ok, _} -> drain(S);
        _ -> ok
    end.
