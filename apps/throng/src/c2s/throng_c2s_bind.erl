%% @doc Resource binding (RFC 6120 §7) for a client connection: the bind
%% IQ, and the session registration Bind2 (XEP-0386) shares with it.
-module(throng_c2s_bind).

-include("throng.hrl").
-include("throng_c2s.hrl").

-export([bind/3, open_session/2]).

%% How long a new session waits for the older one of its full JID to end.
-define(REPLACE_WAIT, 5000).


%% @doc A bind IQ: the resource asked for (or a random one) is bound, the
%% session opened; the connection moves to the session state.
-spec bind(#xmlel{}, #xmlel{}, data()) -> throng_c2s:element_result().
bind(IQ, Bind, D) ->
    Requested = throng_xml:subel_cdata(Bind, <<"resource">>),
    Resource = case Requested of
                   <<>> -> base64:encode(crypto:strong_rand_bytes(9));
                   R -> throng_jid:resourceprep(R)
               end,
    case Resource of
        error ->
            {next, wait_bind, throng_c2s_io:emit(throng_xml:to_iolist(
                                     throng_stanza:error_reply(IQ, 'bad-request',
                                                               <<"invalid resource">>)), D)};
        _ ->
            case open_session(Resource, D) of
                %% A session of this full JID registered on another node at
                %% the same moment, and later: it wins (RFC 6120 §7.7.2.2
                %% lets the server refuse the new binding).
                conflict ->
                    {next, wait_bind, throng_c2s_io:emit(throng_xml:to_iolist(
                                             throng_stanza:error_reply(IQ, conflict)), D)};
                %% The user's home node did not answer in time (overloaded):
                %% a wait-type error, the client binds again later.
                unreachable ->
                    {next, wait_bind, throng_c2s_io:emit(throng_xml:to_iolist(
                                             throng_stanza:error_reply(
                                               IQ, 'resource-constraint',
                                               <<"the session directory is busy; try again">>)), D)};
                {ok, #d{jid = JID} = D1} ->
                    Reply = throng_stanza:iq_result(
                              IQ, [#xmlel{name = <<"bind">>, attrs = [{<<"xmlns">>, ?NS_BIND}],
                                          children = [#xmlel{name = <<"jid">>,
                                                             children = [{xmlcdata, throng_jid:to_binary(JID)}]}]}]),
                    {next, session, throng_c2s_io:emit(throng_xml:to_iolist(Reply), D1),
                     [{{timeout, negotiation}, cancel}]}
            end
    end.

%% @doc Registers the session of the authenticated user with Resource
%% (already prepared): the newer session wins. The caller moves to the
%% session state and cancels the negotiation timeout.
-spec open_session(binary(), data()) -> {ok, data()} | conflict | unreachable.
open_session(Resource, D) ->
    %% Copied: these live as long as the session, and must not keep
    %% the receive buffers they were parsed from.
    JID = #jid{user = binary:copy(D#d.user), server = binary:copy(D#d.server),
               resource = binary:copy(Resource)},
    case register_session(JID) of
        Failed when Failed =:= conflict; Failed =:= unreachable ->
            Failed;
        ok ->
            throng_metrics:incr(sessions_opened),
            logger:info(#{what => session_opened, jid => throng_jid:to_binary(JID)}),
            throng_hooks:notify(session_opened, JID#jid.server, #{jid => JID}),
            ok = throng_c2s_io:session_reads(D),
            %% What only negotiation needed is dropped: an idle session's
            %% state is what it keeps for hours.
            {ok, D#d{jid = JID, user = JID#jid.user, server = JID#jid.server,
                     stream_id = <<>>, ip = undefined, auth_failures = 0}}
    end.

%% The newer session wins (RFC 6120 §7.7.2.2): the older one is told to go
%% and this one waits until it is gone, so its unavailable presence goes out
%% before this session can send any.
%%
%% An older session that has not ended after ?REPLACE_WAIT (stuck in a
%% call, or itself still waiting for an older one) is killed: it runs no
%% clean-up, so its entries are removed here (a dead process's entry would
%% otherwise be found again at every claim: the login used to spin) and the
%% messages it held in flight go back to offline storage, where this
%% session takes them at its initial presence. A session replaced while it
%% waits gives up: conflict, and the `replaced' it got ends its stream.
register_session(JID) ->
    case throng_sm:register(JID, self()) of
        ok -> ok;
        conflict -> conflict;
        unreachable -> unreachable;
        {exists, Old} ->
            MRef = erlang:monitor(process, Old),
            throng_session:replace(Old, self()),
            receive
                {'DOWN', MRef, process, Old, _} ->
                    ok = throng_sm:forget(JID, Old),
                    register_session(JID);
                {replaced, _By} = Replaced ->
                    erlang:demonitor(MRef, [flush]),
                    ok = throng_sm:unregister(JID, self()),
                    self() ! Replaced,
                    conflict
            after ?REPLACE_WAIT ->
                    exit(Old, kill),
                    receive {'DOWN', MRef, process, Old, _} -> ok end,
                    logger:warning(#{what => replaced_session_killed,
                                     jid => throng_jid:to_binary(JID), wait_ms => ?REPLACE_WAIT}),
                    ok = throng_sm:forget(JID, Old),
                    ok = throng_sm:recover_killed(Old),
                    register_session(JID)
            end
    end.

