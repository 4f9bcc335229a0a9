%% @doc XEP-0012 Last Activity, written against the extension API as its
%% proof: an IQ handler in two scopes, four hooks, a disco feature and the
%% generic per-module store ({@link throng_storage:kv_put/3}).
%%
%% <ul>
%% <li>To the server: its uptime in seconds (XEP-0012 §5).</li>
%% <li>To a user's bare JID (§3): 0 seconds while the user has an available
%% resource; otherwise the seconds since the user last went unavailable and
%% the status text of that unavailable presence. Only the user and contacts
%% subscribed to the user's presence may ask; anyone else gets
%% `forbidden'.</li>
%% <li>To a full JID (§4) the IQ is the client's to answer, but the server
%% blocks it with `forbidden' when the asker may not see the user's presence
%% (hook on stanzas about to be delivered).</li>
%% </ul>
%% The time is recorded when a session sends unavailable presence or ends
%% while available — one write per logout, not waited on ({@link
%% throng_storage:kv_put_soon/3}: no fsync, no round trip to the database
%% nodes; a crash right after may lose it, and the user's last activity is
%% then the one before) — and forgotten when the account is removed.
-module(throng_mod_last).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1, start/2, stop/1]).
-export([server_uptime/2, user_last/2]).
-export([stanza_from_session/2, stanza_to_session/2, session_closed/2, user_removed/2]).
%% IQ handlers and hooks named in iq_handlers/0 and hooks/0 (throng_ext).
-ignore_xref([{server_uptime, 2}, {user_last, 2}, {stanza_from_session, 2},
              {stanza_to_session, 2}, {session_closed, 2}, {user_removed, 2}]).

-define(NS_LAST, <<"jabber:iq:last">>).
-define(BUCKET, last_activity).

-spec options() -> throng_config_spec:spec().
options() ->
    #{}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{server, ?NS_LAST, server_uptime},
     {account, ?NS_LAST, user_last}].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{stanza_from_session, 50, stanza_from_session},
     {stanza_to_session, 50, stanza_to_session},
     {session_closed, 50, session_closed},
     {user_removed, 50, user_removed}].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    [?NS_LAST].

-spec start(binary(), map()) -> ok.
start(Host, _Opts) ->
    persistent_term:put({?MODULE, started, Host}, erlang:monotonic_time(second)),
    ok.

-spec stop(binary()) -> ok.
stop(Host) ->
    _ = persistent_term:erase({?MODULE, started, Host}),
    ok.

%%% IQ handlers

%% @doc Last activity of the server: its uptime.
-spec server_uptime(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
server_uptime(IQ, #{host := Host}) ->
    case throng_stanza:type(IQ) of
        <<"get">> ->
            Started = persistent_term:get({?MODULE, started, Host}),
            result(IQ, erlang:monotonic_time(second) - Started, <<>>);
        _ ->
            throng_stanza:error_reply(IQ, 'service-unavailable')
    end.

%% @doc Last activity of a user, asked at the bare JID.
-spec user_last(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
user_last(IQ, #{from := From, to := #jid{user = U, server = S} = To}) ->
    case {throng_stanza:type(IQ), may_see(From, To)} of
        {<<"get">>, true} ->
            case throng_sm:available({U, S}) of
                [_ | _] -> result(IQ, 0, <<>>);
                [] ->
                    case throng_storage:kv_get(?BUCKET, {U, S}) of
                        {ok, {When, Status}} ->
                            result(IQ, max(0, erlang:system_time(second) - When), Status);
                        not_found ->
                            throng_stanza:error_reply(IQ, 'service-unavailable')
                    end
            end;
        {<<"get">>, false} ->
            throng_stanza:error_reply(IQ, forbidden);
        _ ->
            throng_stanza:error_reply(IQ, 'service-unavailable')
    end.

result(IQ, Seconds, Status) ->
    throng_stanza:iq_result(
      IQ, [#xmlel{name = <<"query">>,
                  attrs = [{<<"xmlns">>, ?NS_LAST}, {<<"seconds">>, integer_to_binary(Seconds)}],
                  children = [{xmlcdata, Status} || Status =/= <<>>]}]).

%% The user, and contacts the user shares presence with (subscription from
%% or both), may know when the user was last active.
may_see(#jid{user = U, server = S}, #jid{user = U, server = S}) ->
    true;
may_see(#jid{user = FU, server = FS}, #jid{user = U, server = S}) ->
    throng_presence:shares_with(U, S, {FU, FS}).

%%% Hooks

%% @doc The client went unavailable: remember when, and its status text.
-spec stanza_from_session(#xmlel{}, #{from := #jid{}, to := #jid{}}) -> ok.
stanza_from_session(#xmlel{name = <<"presence">>} = El, #{from := #jid{user = U, server = S}}) ->
    case throng_stanza:type(El) =:= <<"unavailable">> andalso
        throng_xml:attr(<<"to">>, El) =:= undefined of
        true -> record(U, S, throng_xml:subel_cdata(El, <<"status">>));
        false -> ok
    end;
stanza_from_session(_El, _Args) ->
    ok.

%% @doc A last-activity query to a full JID from someone who may not see the
%% user's presence is refused by the server (XEP-0012 §4).
-spec stanza_to_session(#xmlel{}, #{from := #jid{}, to := #jid{}, jid := #jid{}}) -> ok | stop.
stanza_to_session(#xmlel{name = <<"iq">>} = El, #{from := From, to := To}) ->
    case throng_stanza:type(El) =:= <<"get">> andalso
        throng_xml:subel(El, <<"query">>, ?NS_LAST) =/= undefined andalso
        not may_see(From, To) of
        true ->
            throng_router:bounce(From, To, El, forbidden),
            stop;
        false ->
            ok
    end;
stanza_to_session(_El, _Args) ->
    ok.

%% @doc A session that ends while available is a logout.
-spec session_closed(ok, #{jid := #jid{}, available := boolean()}) -> ok.
session_closed(ok, #{jid := #jid{user = U, server = S}, available := true}) ->
    record(U, S, <<>>);
session_closed(ok, _Args) ->
    ok.

%% @doc A removed account leaves nothing behind.
-spec user_removed(ok, #{user := binary(), server := binary()}) -> ok.
user_removed(ok, #{user := U, server := S}) ->
    throng_storage:kv_delete(?BUCKET, {U, S}).

record(U, S, Status) ->
    throng_storage:kv_put_soon(?BUCKET, {U, S}, {erlang:system_time(second), binary:copy(Status)}).
