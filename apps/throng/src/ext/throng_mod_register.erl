%% @doc XEP-0077 In-Band Registration: account creation on an
%% unauthenticated stream (only with `allow_create', at most one per address
%% per `ip_interval'), and, for an authenticated user, password change and
%% account removal.
-module(throng_mod_register).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1, stream_features/2]).
-export([process_preauth/2, process_iq/2]).
%% IQ handlers named in iq_handlers/0, called through the throng_ext registry.
-ignore_xref([{process_preauth, 2}, {process_iq, 2}]).

-spec options() -> throng_config_spec:spec().
options() ->
    #{allow_create => #{type => boolean, default => false,
                        doc => "Let clients create accounts on an unauthenticated stream. "
                               "Password change and account removal by a logged-in user "
                               "work whenever the module is enabled."},
      min_password_length => #{type => {int, 0, 1024}, default => 6,
                               doc => "Shortest password accepted by in-band registration "
                                      "and password change."},
      ip_interval => #{type => {int, 0, 86400}, default => 60,
                       doc => "Seconds that must pass between two in-band registrations "
                              "from the same IP address (0: no limit)."}}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{preauth, ?NS_REGISTER, process_preauth},
     {server, ?NS_REGISTER, process_iq}].

-spec hooks() -> [].
hooks() ->
    [].

-spec disco_features(binary()) -> [binary()].
disco_features(Host) ->
    [?NS_REGISTER || allow_create(Host)].

-spec stream_features(pre_auth | authenticated, binary()) -> iodata().
stream_features(pre_auth, Host) ->
    [["<register xmlns='", ?NS_REGISTER_FEATURE, "'/>"] || allow_create(Host)];
stream_features(authenticated, _Host) ->
    [].

allow_create(Host) ->
    opt(Host, allow_create).

opt(Host, Key) ->
    throng_ext:opt(Host, ?MODULE, Key).

%% @doc A registration IQ on a stream that has not authenticated yet.
-spec process_preauth(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
process_preauth(IQ, #{host := Server} = Ctx) ->
    IP = maps:get(ip, Ctx, undefined),
    Query = throng_xml:subel(IQ, <<"query">>, ?NS_REGISTER),
    case {allow_create(Server), throng_stanza:type(IQ), Query} of
        {false, _, _} ->
            throng_stanza:error_reply(IQ, 'service-unavailable');
        {true, _, undefined} ->
            throng_stanza:error_reply(IQ, 'bad-request');
        {true, <<"get">>, _} ->
            throng_stanza:iq_result(
              IQ, [query([#xmlel{name = <<"instructions">>,
                                 children = [{xmlcdata, <<"Choose a username and password.">>}]},
                          #xmlel{name = <<"username">>}, #xmlel{name = <<"password">>}])]);
        {true, <<"set">>, _} ->
            create(Server, IP, IQ, Query);
        _ ->
            throng_stanza:error_reply(IQ, 'bad-request')
    end.

create(Server, IP, IQ, Query) ->
    User = throng_xml:subel_cdata(Query, <<"username">>),
    Password = throng_xml:subel_cdata(Query, <<"password">>),
    case check_password(Server, Password) of
        ok ->
            case throng_auth:prepare_user(User) of
                error ->
                    throng_stanza:error_reply(IQ, 'jid-malformed', <<"invalid username">>);
                _ ->
                    case throng_tables:registration_allowed(IP, opt(Server, ip_interval)) of
                        false ->
                            throng_stanza:error_reply(IQ, 'resource-constraint',
                                                      <<"too many registrations from your address">>);
                        true ->
                            case throng_auth:register(User, Server, Password) of
                                ok -> throng_stanza:iq_result(IQ);
                                {error, exists} -> throng_stanza:error_reply(IQ, 'conflict');
                                {error, _} -> throng_stanza:error_reply(IQ, 'not-acceptable')
                            end
                    end
            end;
        {error, Text} ->
            throng_stanza:error_reply(IQ, 'not-acceptable', Text)
    end.

%% @doc A registration IQ from an authenticated user: registration info,
%% password change, or account removal (`<remove/>').
-spec process_iq(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
process_iq(IQ, #{from := #jid{user = U, server = S}}) ->
    Query = throng_xml:subel(IQ, <<"query">>, ?NS_REGISTER),
    case {throng_stanza:type(IQ), Query} of
        {_, undefined} ->
            throng_stanza:error_reply(IQ, 'bad-request');
        {<<"get">>, _} ->
            throng_stanza:iq_result(IQ, [query([#xmlel{name = <<"registered">>},
                                                #xmlel{name = <<"username">>,
                                                       children = [{xmlcdata, U}]},
                                                #xmlel{name = <<"password">>}])]);
        {<<"set">>, _} ->
            case throng_xml:subel(Query, <<"remove">>) of
                undefined -> change_password(U, S, IQ, Query);
                _ ->
                    %% The account is removed before the result is written (a
                    %% failed write answers internal-server-error); the session
                    %% ends after the result, when it handles the kick.
                    case throng_auth:unregister(U, S) of
                        ok -> throng_stanza:iq_result(IQ);
                        {error, _} -> throng_stanza:error_reply(IQ, 'item-not-found')
                    end
            end;
        _ ->
            throng_stanza:error_reply(IQ, 'bad-request')
    end.

change_password(U, S, IQ, Query) ->
    User = throng_xml:subel_cdata(Query, <<"username">>),
    Password = throng_xml:subel_cdata(Query, <<"password">>),
    case throng_auth:prepare_user(User) of
        U ->
            case check_password(S, Password) of
                ok ->
                    case throng_auth:set_password(U, S, Password) of
                        ok -> throng_stanza:iq_result(IQ);
                        {error, _} -> throng_stanza:error_reply(IQ, 'not-acceptable')
                    end;
                {error, Text} ->
                    throng_stanza:error_reply(IQ, 'not-acceptable', Text)
            end;
        _ ->
            throng_stanza:error_reply(IQ, 'not-allowed', <<"username does not match">>)
    end.

check_password(Host, Password) ->
    Min = opt(Host, min_password_length),
    case string:length(Password) of
        0 -> {error, <<"password missing">>};
        N when N < Min -> {error, <<"password too short">>};
        _ -> ok
    end.

query(Children) ->
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_REGISTER}], children = Children}.
