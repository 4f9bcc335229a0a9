%% @doc The server part of the per-second sample: every throng_metrics
%% counter (connections, logins, stanzas and bytes by kind, offline
%% storage, errors...), the bound sessions, the connections of each
%% listener and the messages held in offline storage.
%%
%% All of it comes from {@link throng_info}, the server's read API: counters,
%% atomics and table sizes, no message to any server process.
-module(throng_stats_xmpp).

-export([sample/0]).

-spec sample() -> [throng_stats_os:sample()].
sample() ->
    counters() ++ sessions() ++ listeners() ++ offline().

counters() ->
    [{throng_stats_spec:server_metric(Name), Labels, V}
     || {Name, Labels, V} <- throng_info:metric_values()].

sessions() ->
    case throng_info:sessions() of
        undefined -> [];
        N -> [{throng_sessions, [], N}]
    end.

listeners() ->
    [{throng_listener_connections, [{listener, integer_to_binary(I)}, {port, integer_to_binary(Port)}],
      N}
     || #{index := I, port := Port, connections := N} <- throng_info:listeners()].

offline() ->
    case throng_info:offline_total() of
        undefined -> [];
        N -> [{throng_offline_messages, [], N}]
    end.
