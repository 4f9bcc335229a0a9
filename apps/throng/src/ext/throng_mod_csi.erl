%% @doc XEP-0352 Client State Indication: a client tells the server when
%% its user is not looking (`<inactive/>') and when it is again
%% (`<active/>'), and the server holds back what can wait meanwhile —
%% presence updates (only the latest per contact resource is kept) and
%% messages with nothing to notify (chat states, receipts, markers) — and
%% writes it out when anything urgent comes, when the client is active
%% again, or when `queue_max' stanzas are held. A phone's radio wakes up
%% far less often, and sends fewer bytes.
%%
%% This module offers the stream feature and the option; the session does
%% the holding (throng_c2s_csi, one field of its state: the atom `active',
%% or the held stanzas). Counters: `csi_held', `csi_dropped',
%% `csi_flushes'.
-module(throng_mod_csi).
-behaviour(throng_ext).

-export([options/0, iq_handlers/0, hooks/0, stream_features/2]).

-spec options() -> throng_config_spec:spec().
options() ->
    #{queue_max => #{type => {int, 0, 10000}, default => 100,
                     doc => "Stanzas held for an inactive client at most; one more writes "
                            "them all out. 0: nothing is held (the client's state is "
                            "accepted and ignored)."}}.

-spec iq_handlers() -> [].
iq_handlers() ->
    [].

-spec hooks() -> [].
hooks() ->
    [].

-spec stream_features(pre_auth | authenticated, binary()) -> iodata().
stream_features(authenticated, _Host) ->
    <<"<csi xmlns='urn:xmpp:csi:0'/>">>;
stream_features(pre_auth, _Host) ->
    [].
