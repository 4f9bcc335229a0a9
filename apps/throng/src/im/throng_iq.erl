%% @doc IQs the server answers itself: those addressed to the domain, and
%% those addressed to a user's bare JID (answered on the account's behalf,
%% RFC 6121 §8.5.2.1.3). Service discovery (XEP-0030), ping (XEP-0199),
%% software version (XEP-0092), legacy session establishment (RFC 3921),
%% and in-band registration (XEP-0077, in {@link throng_register}). The
%% roster IQ needs session state and is handled by the session itself.
-module(throng_iq).

-include("throng.hrl").

-export([handle/3, handle_routed/3, validate/1, server_features/0]).

%% @doc Checks the shape of an IQ (RFC 6120 §8.2.3): a known type, an id, and
%% exactly one payload child for get and set. Returns the payload (or none).
-spec validate(#xmlel{}) -> {ok, #xmlel{} | none} | {error, throng_stanza:condition()}.
validate(IQ) ->
    Type = throng_stanza:type(IQ),
    HasId = throng_stanza:id(IQ) =/= <<>>,
    Payload = throng_xml:subels(IQ),
    if
        not HasId -> {error, 'bad-request'};
        Type =:= <<"get">>; Type =:= <<"set">> ->
            case Payload of
                [P] -> {ok, P};
                _ -> {error, 'bad-request'}
            end;
        Type =:= <<"result">>; Type =:= <<"error">> -> {ok, none};
        true -> {error, 'bad-request'}
    end.

%% @doc Answers an IQ from From to To (the domain, or a bare JID). Returns the
%% reply to send back to From, or `noreply' for results and errors.
-spec handle(#jid{}, #jid{}, #xmlel{}) -> #xmlel{} | noreply.
handle(From, To, IQ) ->
    case validate(IQ) of
        {error, Cond} -> throng_stanza:error_reply(IQ, Cond);
        {ok, none} -> noreply;
        {ok, Payload} ->
            NS = throng_xml:ns(Payload),
            Type = throng_stanza:type(IQ),
            case To#jid.user of
                <<>> -> server(NS, Type, From, To, IQ, Payload);
                _ -> account(NS, Type, From, To, IQ, Payload)
            end
    end.

%% @doc Like {@link handle/3}, for an IQ routed from another session: the
%% reply is routed back to the sender.
-spec handle_routed(#jid{}, #jid{}, #xmlel{}) -> ok.
handle_routed(From, To, IQ) ->
    case handle(From, To, IQ) of
        noreply -> ok;
        Reply -> throng_router:route(To, From, throng_stanza:strip_from_to(Reply))
    end.

server(?NS_DISCO_INFO, <<"get">>, _From, _To, IQ, Payload) ->
    case throng_xml:attr(<<"node">>, Payload) of
        undefined ->
            throng_stanza:iq_result(IQ, [disco_info([{<<"server">>, <<"im">>, <<"Throng">>}],
                                                    server_features())]);
        _ ->
            throng_stanza:error_reply(IQ, 'item-not-found')
    end;
server(?NS_DISCO_ITEMS, <<"get">>, _From, _To, IQ, Payload) ->
    case throng_xml:attr(<<"node">>, Payload) of
        undefined ->
            throng_stanza:iq_result(IQ, [#xmlel{name = <<"query">>,
                                                attrs = [{<<"xmlns">>, ?NS_DISCO_ITEMS}]}]);
        _ ->
            throng_stanza:error_reply(IQ, 'item-not-found')
    end;
server(?NS_PING, <<"get">>, _From, _To, IQ, _Payload) ->
    throng_stanza:iq_result(IQ);
server(?NS_VERSION, <<"get">>, _From, _To, IQ, _Payload) ->
    {ok, Vsn} = application:get_key(throng, vsn),
    throng_stanza:iq_result(
      IQ, [#xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_VERSION}],
                  children = [text_el(<<"name">>, <<"Throng">>),
                              text_el(<<"version">>, list_to_binary(Vsn))]}]);
server(?NS_SESSION, <<"set">>, _From, _To, IQ, _Payload) ->
    throng_stanza:iq_result(IQ);
server(?NS_REGISTER, _Type, From, _To, IQ, _Payload) ->
    throng_register:process_iq(From, IQ);
server(_NS, _Type, _From, _To, IQ, _Payload) ->
    throng_stanza:error_reply(IQ, 'service-unavailable').

account(?NS_DISCO_INFO, <<"get">>, _From, _To, IQ, Payload) ->
    case throng_xml:attr(<<"node">>, Payload) of
        undefined ->
            throng_stanza:iq_result(IQ, [disco_info([{<<"account">>, <<"registered">>, <<>>}],
                                                    [?NS_DISCO_INFO, ?NS_DISCO_ITEMS])]);
        _ ->
            throng_stanza:error_reply(IQ, 'item-not-found')
    end;
account(?NS_DISCO_ITEMS, <<"get">>, _From, _To, IQ, _Payload) ->
    throng_stanza:iq_result(IQ, [#xmlel{name = <<"query">>,
                                        attrs = [{<<"xmlns">>, ?NS_DISCO_ITEMS}]}]);
account(NS, Type, #jid{user = U, server = S} = From, #jid{user = U, server = S} = To, IQ, Payload) ->
    %% The user's own account (an IQ with no 'to'): the server's services.
    server(NS, Type, From, To, IQ, Payload);
account(_NS, _Type, _From, _To, IQ, _Payload) ->
    throng_stanza:error_reply(IQ, 'service-unavailable').

%% @doc The features the server advertises in disco#info.
-spec server_features() -> [binary()].
server_features() ->
    [?NS_DISCO_INFO, ?NS_DISCO_ITEMS, ?NS_PING, ?NS_VERSION, ?NS_ROSTER, ?NS_DELAY,
     <<"msgoffline">>] ++
        [?NS_REGISTER || throng_config:get([registration, enabled])].

disco_info(Identities, Features) ->
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_DISCO_INFO}],
           children = [#xmlel{name = <<"identity">>,
                              attrs = [{<<"category">>, C}, {<<"type">>, T}] ++
                                  [{<<"name">>, N} || N =/= <<>>]}
                       || {C, T, N} <- Identities] ++
               [#xmlel{name = <<"feature">>, attrs = [{<<"var">>, F}]}
                || F <- lists:usort(Features)]}.

text_el(Name, Text) ->
    #xmlel{name = Name, children = [{xmlcdata, Text}]}.
