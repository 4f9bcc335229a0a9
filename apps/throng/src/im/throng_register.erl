%% @doc XEP-0077 in-band registration: account creation on an
%% unauthenticated stream (only when registration.enabled, at most one per
%% address per registration.ip_interval), and, for an authenticated user,
%% password change and account removal.
-module(throng_register).

-include("throng.hrl").

-export([process_preauth/3, process_iq/2]).

%% @doc A registration IQ on a stream that has not authenticated yet.
-spec process_preauth(binary(), inet:ip_address() | undefined, #xmlel{}) -> #xmlel{}.
process_preauth(Server, IP, IQ) ->
    Query = throng_xml:subel(IQ, <<"query">>, ?NS_REGISTER),
    case {throng_config:get([registration, enabled]), throng_stanza:type(IQ), Query} of
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
    case check_password(Password) of
        ok ->
            case throng_auth:prepare_user(User) of
                error ->
                    throng_stanza:error_reply(IQ, 'jid-malformed', <<"invalid username">>);
                _ ->
                    case throng_tables:registration_allowed(IP) of
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
-spec process_iq(#jid{}, #xmlel{}) -> #xmlel{}.
process_iq(#jid{user = U, server = S}, IQ) ->
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
                    %% The result is sent before the session is ended by the kick.
                    Reply = throng_stanza:iq_result(IQ),
                    self() ! {unregister, U, S},
                    Reply
            end;
        _ ->
            throng_stanza:error_reply(IQ, 'bad-request')
    end.

change_password(U, S, IQ, Query) ->
    User = throng_xml:subel_cdata(Query, <<"username">>),
    Password = throng_xml:subel_cdata(Query, <<"password">>),
    case throng_auth:prepare_user(User) of
        U ->
            case check_password(Password) of
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

check_password(Password) ->
    Min = throng_config:get([registration, min_password_length]),
    case string:length(Password) of
        0 -> {error, <<"password missing">>};
        N when N < Min -> {error, <<"password too short">>};
        _ -> ok
    end.

query(Children) ->
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_REGISTER}], children = Children}.
