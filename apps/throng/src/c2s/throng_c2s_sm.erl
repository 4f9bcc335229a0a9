%% @doc XEP-0198 stream management of a session: enable, acknowledgements,
%% and resumption — the handover of a new connection's socket to the
%% session that waited for it. The counters and the queue themselves are the
%% pure {@link throng_stream_mgmt}.
-module(throng_c2s_sm).

-include("throng.hrl").
-include("throng_c2s.hrl").

-export([resume_elsewhere/6, element/3, enable/2, handled/1, maybe_request/1, resume/2, take_over/2,
         handover/3, resume_request/5, resumed/6]).

-export_type([target/0, answer/0]).

%% Where a resumed connection goes, and how the old session answers it: a
%% <resumed/> of its own (a <resume/> after authentication), or a SASL2
%% <success/> that carries it (XEP-0198 inline resumption: the additional
%% data and FAST token elements of that success).
-type answer() :: resumed | {sasl2, Additional :: iodata(), Token :: iodata()}.
-type target() :: {pid(), answer()}.

%%% XEP-0198 stream management

-spec element(binary(), #xmlel{}, data()) -> throng_c2s:element_result().
element(<<"enable">>, El, D) ->
    {Answer, D1} = enable(El, D),
    {next, session, throng_c2s_io:emit(Answer, D1)};
element(<<"r">>, _El, #d{sm = SM} = D) when SM =/= undefined ->
    {next, session, throng_c2s_io:emit(throng_stream_mgmt:a_el(throng_stream_mgmt:in_count(SM)), D)};
element(<<"a">>, El, #d{sm = SM} = D) when SM =/= undefined ->
    case string:to_integer(throng_xml:attr(<<"h">>, El, <<>>)) of
        {H, <<>>} when is_integer(H), H >= 0 ->
            case throng_stream_mgmt:ack(H, SM) of
                {ok, SM1, Acked} ->
                    throng_c2s_items:acked(Acked),
                    {next, session, D#d{sm = SM1}};
                {error, too_high} ->
                    throng_c2s_io:stream_error('undefined-condition', <<"acknowledged more than was sent">>, D)
            end;
        _ ->
            throng_c2s_io:stream_error('bad-format', <<"invalid h">>, D)
    end;
element(_Name, _El, #d{sm = undefined} = D) ->
    throng_c2s_io:stream_error('unsupported-stanza-type', <<"stream management is not enabled">>, D);
element(_Name, _El, D) ->
    throng_c2s_io:stream_error('unsupported-stanza-type', <<"unexpected stream management element">>, D).

%% @doc XEP-0198 §3: enables stream management on a bound session (an
%% <enable/>, also inline in a Bind2 request); the <enabled/> or <failed/>
%% to send, and the new state.
-spec enable(#xmlel{}, data()) -> {iodata(), data()}.
enable(El, #d{sm = undefined} = D) ->
    case throng_config:get([stream_management, enabled]) of
        false ->
            {throng_stream_mgmt:failed_el('feature-not-implemented'), D};
        true ->
            Timeout = throng_config:get([stream_management, resume_timeout]),
            Resume = Timeout > 0 andalso
                lists:member(throng_xml:attr(<<"resume">>, El), [<<"true">>, <<"1">>]),
            SM = throng_stream_mgmt:new(Resume),
            {throng_stream_mgmt:enabled_el(throng_stream_mgmt:id(SM), Resume, Timeout), D#d{sm = SM}}
    end;
enable(_El, D) ->
    {throng_stream_mgmt:failed_el('unexpected-request'), D}.

-spec handled(data()) -> data().
handled(#d{sm = undefined} = D) -> D;
handled(#d{sm = SM} = D) -> D#d{sm = throng_stream_mgmt:handled(SM)}.

-spec maybe_request(data()) -> data().
maybe_request(#d{sm = SM} = D) ->
    case throng_stream_mgmt:should_request(SM, throng_config:get([stream_management, ack_every])) of
        true -> throng_c2s_io:emit(throng_stream_mgmt:r_el(), D#d{sm = throng_stream_mgmt:requested(SM)});
        false -> D
    end.

%% A new connection asks to resume the session of previd.
-spec resume(#xmlel{}, data()) -> throng_c2s:element_result().
resume(El, D) ->
    case take_over(El, D) of
        {ok, Pid} -> {handover, {Pid, resumed}, D};
        {error, Cond} -> {next, wait_bind, throng_c2s_io:emit(throng_stream_mgmt:failed_el(Cond), D)}
    end.

%% @doc Asks the session a <resume/> names (previd, h) to take this
%% authenticated connection over: {ok, Pid} when it agreed (the caller
%% hands the socket over), or the condition of the <failed/> to send.
-spec take_over(#xmlel{}, data()) -> {ok, pid()} | {error, throng_stream_mgmt:failure()}.
take_over(El, D) ->
    case {throng_stream_mgmt:parse_id(throng_xml:attr(<<"previd">>, El, <<>>)),
          string:to_integer(throng_xml:attr(<<"h">>, El, <<>>))} of
        {{ok, Pid}, {H, <<>>}} when is_integer(H), H >= 0, node(Pid) =/= node() ->
            resume_remote(Pid, H, D);
        {{ok, Pid}, {H, <<>>}} when is_integer(H), H >= 0, Pid =/= self() ->
            Bare = #jid{user = D#d.user, server = D#d.server},
            try gen_statem:call(Pid, {resume, Bare, H}, 5000) of
                ok -> {ok, Pid};
                {error, _} = Error -> Error
            catch exit:_ -> {error, 'item-not-found'}
            end;
        _ ->
            {error, 'item-not-found'}
    end.

%% The session is on another node of the cluster: a socket cannot move
%% there, so the resumption fails, cleanly. The old session first takes the
%% client's acknowledgement, ends and routes again what it held (to another
%% resource, or to offline storage); only when it is gone does the client
%% hear <failed/>, so the new session it binds finds those messages at its
%% initial presence: nothing is lost, nothing acknowledged comes twice.
%% The <failed/> carries the count of the client's stanzas the old session
%% handled (h), so the client sends again only those it did not.
resume_remote(Pid, H, D) ->
    Bare = #jid{user = D#d.user, server = D#d.server},
    MRef = erlang:monitor(process, Pid),
    try gen_statem:call(Pid, {resume_elsewhere, Bare, H, with_h}, 5000) of
        Ok when Ok =:= ok; element(1, Ok) =:= ok ->   % ok: a node of an older release
            receive {'DOWN', MRef, process, Pid, _} -> ok
            after 10000 -> erlang:demonitor(MRef, [flush])
            end,
            case Ok of
                {ok, Handled} -> {error, {'item-not-found', Handled}};
                ok -> {error, 'item-not-found'}
            end;
        {error, _} = Error ->
            erlang:demonitor(MRef, [flush]),
            Error
    catch exit:_ ->
            erlang:demonitor(MRef, [flush]),
            {error, 'item-not-found'}
    end.

%% In the old session, asked by a connection on another node: take the
%% acknowledgement and end (the end of a session routes its queue again).
%% Reply: with_h, the answer carries the count of the client's stanzas
%% handled ({ok, H}); ok, a plain ok (a node of an older release asks).
-spec resume_elsewhere(gen_statem:from(), #jid{}, non_neg_integer(), with_h | ok, atom(),
                       data()) -> gen_statem:event_handler_result(atom()).
resume_elsewhere(From, Bare, H, Reply, State, D) ->
    case resume_request(From, Bare, H, State, D) of
        {keep_state, D1, [{reply, From, ok}]} ->
            gen_statem:reply(From, case Reply of
                                       with_h -> {ok, throng_stream_mgmt:in_count(D1#d.sm)};
                                       ok -> ok
                                   end),
            {stop, {shutdown, resumed_on_other_node}, D1};
        Refused ->
            Refused
    end.

%% The old session agrees: give it the socket and the stream, and go.
%% The socket stops reading first; what the driver had already delivered to
%% this process goes along, in order.
-spec handover(target(), list(), data()) -> {stop, term(), data()}.
handover({Pid, Answer}, RestEvents, D0) ->
    case throng_c2s_io:flush(D0) of
        {ok, D} -> give_socket(Pid, Answer, RestEvents, D);
        {error, _} ->
            %% The new connection died before it could hand itself over: the
            %% old session stays resumable until its timeout, as if this
            %% connection had never come.
            {stop, normal, D0#d{out = []}}
    end.

give_socket(Pid, Answer, RestEvents, D1) ->
    Sock = D1#d.sock,
    _ = throng_transport:pause(Sock),
    Pending = socket_messages(throng_transport:tcp_socket(Sock), throng_transport:messages(Sock)),
    case throng_transport:controlling_process(Sock, Pid) of
        ok ->
            Pid ! {resume_socket, D1#d.sock, D1#d.parser, RestEvents, Pending, Answer},
            {stop, {shutdown, resumed_elsewhere}, D1#d{sock = undefined}};
        {error, _} ->
            {stop, normal, D1}
    end.

%% In the old session: check the request, acknowledge what the client says it
%% received, then wait for the socket.
-spec resume_request(gen_statem:from(), #jid{}, non_neg_integer(), atom(), data()) -> gen_statem:event_handler_result(atom()).
resume_request(From, Bare, H, State, #d{sm = SM, jid = JID} = D) ->
    Ok = State =:= resumable orelse State =:= session,
    case Ok andalso SM =/= undefined andalso throng_stream_mgmt:resumable(SM)
        andalso JID =/= undefined andalso throng_jid:bare(JID) =:= Bare of
        false ->
            {keep_state_and_data, [{reply, From, {error, 'item-not-found'}}]};
        true ->
            case throng_stream_mgmt:ack(H, SM) of
                {ok, SM1, Acked} ->
                    throng_c2s_items:acked(Acked),
                    {keep_state, D#d{sm = SM1}, [{reply, From, ok}]};
                {error, too_high} ->
                    {keep_state_and_data, [{reply, From, {error, 'unexpected-request'}}]}
            end
    end.

socket_messages(TCP, {DataTag, Closed, Error, Passive} = Tags) ->
    receive
        {DataTag, TCP, _} = M -> [M | socket_messages(TCP, Tags)];
        {Closed, TCP} = M -> [M | socket_messages(TCP, Tags)];
        {Error, TCP, _} = M -> [M | socket_messages(TCP, Tags)];
        {Passive, TCP} -> socket_messages(TCP, Tags)
    after 0 -> []
    end.

%% @doc In the old session: the socket of the connection that resumed it
%% has come. Answer (<resumed/>, or inside a SASL2 <success/> with this
%% session's full JID, after which no stream features are sent: XEP-0198
%% "Inline Stream Resumption"), re-send what was not acknowledged, read.
-spec resumed(throng_transport:socket(), throng_xml_stream:state(), list(), list(), answer(),
              data()) -> {resumed, list(), data()}.
resumed(Sock, Parser, Rest, Pending, Answer, #d{sm = SM} = D0) ->
    throng_metrics:incr(sm_resumed),
    Unacked = throng_stream_mgmt:unacked(SM),
    throng_metrics:add(sm_redelivered, length(Unacked)),
    %% What the old connection process had received is handled next, then
    %% the socket reads again.
    _ = [self() ! M || M <- Pending],
    throng_sm:set_detached(D0#d.jid, false),
    D1 = D0#d{sock = Sock, parser = Parser, paused = false},
    ok = throng_c2s_io:session_reads(D1),
    _ = throng_c2s_io:activate(D1),
    Resumed = throng_stream_mgmt:resumed_el(throng_stream_mgmt:id(SM), throng_stream_mgmt:in_count(SM)),
    D2 = throng_c2s_io:emit(case Answer of
                                resumed ->
                                    Resumed;
                                {sasl2, Additional, Token} ->
                                    throng_stream:sasl2_success(
                                      Additional, throng_jid:to_binary(D0#d.jid), Resumed, Token)
                            end, D1),
    %% Re-send what was not acknowledged, in order (they stay queued until acked).
    D3 = lists:foldl(fun(Item, Acc) ->
                             throng_c2s_io:emit(element(2, throng_c2s_items:bytes(Item, Acc#d.server)), Acc)
                     end, D2, Unacked),
    logger:info(#{what => session_resumed, jid => throng_jid:to_binary(D0#d.jid),
                  redelivered => length(Unacked)}),
    {resumed, Rest, D3}.
