%% @doc The server part of the per-second sample: every throng_metrics
%% counter (connections, logins, stanzas and bytes by kind, offline
%% storage, errors...), the bound sessions, the connections of each
%% listener and the messages held in offline storage.
%%
%% All of it is read from counters, atomics and table sizes: no message to
%% any server process.
-module(throng_stats_xmpp).

-export([sample/0]).

-spec sample() -> [throng_stats_os:sample()].
sample() ->
    counters() ++ sessions() ++ listeners() ++ offline().

counters() ->
    try throng_metrics:all() of
        All ->
            [begin {Name, Labels} = throng_stats_spec:xmpp_counter(K), {Name, Labels, V} end
             || {K, V} <- lists:sort(maps:to_list(All))]
    catch error:badarg -> []   %% throng not started: no counters yet
    end.

sessions() ->
    case ets:whereis(throng_session) of
        undefined -> [];
        _ -> [{throng_sessions, [], throng_sm:count()}]
    end.

listeners() ->
    Refs = try throng_listeners_sup:listeners() catch error:badarg -> [] end,
    lists:append([listener(Ref) || Ref <- Refs]).

listener({listener, I} = Ref) ->
    try throng_listener:info(Ref) of
        #{count := Count, opts := Opts} ->
            Port = try throng_listener:port(Ref) catch _:_ -> maps:get(port, Opts, 0) end,
            [{throng_listener_connections,
              [{listener, integer_to_binary(I)}, {port, integer_to_binary(Port)}],
              atomics:get(Count, 1)}]
    catch error:badarg -> []   %% not started (yet)
    end.

%% Offline messages held: the size of the Mnesia table when that is the
%% backend (an O(1) read of the table's size).
offline() ->
    try mnesia:table_info(throng_offline, size) of
        N when is_integer(N) -> [{throng_offline_messages, [], N}];
        _ -> []
    catch exit:_ -> []
    end.
