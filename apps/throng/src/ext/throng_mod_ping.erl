%% @doc XEP-0199 XMPP Ping: the server answers pings, and keeps idle
%% sessions honest: after `interval' seconds without a byte from the client
%% it pings the client, and a client that sends nothing within `timeout'
%% seconds more is disconnected with a connection-timeout stream error.
%%
%% The keepalive runs in the session process and keeps no state of its own:
%% one compact timer per session ({@link throng_session:ext_timer/2}, the
%% module's name as the message, no memory of its own), and the session's
%% time of last traffic. When the timer fires, the client's silence says
%% everything: shorter than `interval', wait for the rest of it; between
%% `interval' and `interval' + `timeout', send a ping and look again after
%% `timeout'; longer, the ping sent then was not answered.
-module(throng_mod_ping).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1, session_info/2]).
-export([pong/2, session_opened/2]).
%% IQ handler and hook named in iq_handlers/0 and hooks/0 (throng_ext).
-ignore_xref([{pong, 2}, {session_opened, 2}]).

-spec options() -> throng_config_spec:spec().
options() ->
    #{interval => #{type => {int, 0, 86400}, default => 300,
                    doc => "Seconds without traffic from an authenticated client after "
                           "which the server sends it a XEP-0199 ping (0: never)."},
      timeout => #{type => {int, 1, 3600}, default => 60,
                   doc => "Seconds a pinged client has to send anything before the "
                          "connection is closed with a connection-timeout stream error."}}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{server, ?NS_PING, pong}].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{session_opened, 50, session_opened}].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    [?NS_PING].

%% @doc A ping to the server (or to the user's own account) gets a result.
-spec pong(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
pong(IQ, _Ctx) ->
    case throng_stanza:type(IQ) of
        <<"get">> -> throng_stanza:iq_result(IQ);
        _ -> throng_stanza:error_reply(IQ, 'service-unavailable')
    end.

%% @doc Hook: a session was bound; start watching it.
-spec session_opened(ok, #{jid := #jid{}}) -> ok.
session_opened(ok, #{jid := #jid{server = Host}}) ->
    case throng_ext:opt(Host, ?MODULE, interval) of
        0 -> ok;
        Interval -> throng_session:ext_timer(Interval * 1000, ?MODULE)
    end.

%% @doc The keepalive timer fired in the session process.
-spec session_info(timer, throng_session:ctx()) -> [throng_session:action()].
session_info(timer, #{jid := #jid{server = Host} = JID, last_in := Last}) ->
    Silent = erlang:monotonic_time(second) - Last,
    Interval = throng_ext:opt(Host, ?MODULE, interval),
    Timeout = throng_ext:opt(Host, ?MODULE, timeout),
    if
        Silent < Interval ->
            %% Traffic (a pong counts) within the interval.
            [{timer, (Interval - Silent) * 1000}];
        Silent < Interval + Timeout ->
            Ping = #xmlel{name = <<"iq">>,
                          attrs = [{<<"from">>, Host}, {<<"to">>, throng_jid:to_binary(JID)},
                                   {<<"type">>, <<"get">>}, {<<"id">>, <<"ping">>}],
                          children = [#xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]}]},
            [{send, Ping}, {timer, Timeout * 1000}];
        true ->
            %% Silent since before the ping that was sent `timeout' ago.
            [{stop, 'connection-timeout', <<"no answer to ping">>}]
    end.
