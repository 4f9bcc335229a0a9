%% @doc IQs the server answers itself: those addressed to the domain and
%% those addressed to a user's bare JID (answered on the account's behalf,
%% RFC 6121 §8.5.2.1.3). Each namespace is answered by the extension module
%% that registered it for the host ({@link throng_ext:iq_handler/3}); a
%% namespace no enabled module answers gets `service-unavailable'. The
%% roster IQ needs session state and is handled by the session itself.
-module(throng_iq).

-include("throng.hrl").

-export([process/3, process_preauth/3]).

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

%% @doc Answers an IQ from From to To (the domain, or a bare JID of the
%% domain). Returns the reply to send back to From, or `noreply' for
%% results and errors (and handlers that answer later).
-spec process(#jid{}, #jid{}, #xmlel{}) -> #xmlel{} | noreply.
process(From, #jid{server = Host} = To, IQ) ->
    case validate(IQ) of
        {error, Cond} -> throng_stanza:error_reply(IQ, Cond);
        {ok, none} -> noreply;
        {ok, Payload} ->
            NS = throng_xml:ns(Payload),
            Own = To#jid.user =:= From#jid.user andalso To#jid.server =:= From#jid.server,
            Handler = case To#jid.user of
                          <<>> -> found(server, throng_ext:iq_handler(Host, server, NS));
                          _ ->
                              %% The user's own account falls back to the
                              %% server's services (an IQ with no 'to').
                              case throng_ext:iq_handler(Host, account, NS) of
                                  undefined when Own ->
                                      found(server, throng_ext:iq_handler(Host, server, NS));
                                  H -> found(account, H)
                              end
                      end,
            case Handler of
                undefined ->
                    case NS =:= ?NS_SESSION andalso (To#jid.user =:= <<>> orelse Own)
                        andalso throng_stanza:type(IQ) =:= <<"set">> of
                        %% RFC 3921 session establishment: a no-op kept for old clients.
                        true -> throng_stanza:iq_result(IQ);
                        false -> throng_stanza:error_reply(IQ, 'service-unavailable')
                    end;
                {Scope, {Mod, Fun}} ->
                    call(Mod, Fun, IQ, #{scope => Scope, host => Host, payload => Payload,
                                         from => From, to => To})
            end
    end.

found(_Scope, undefined) -> undefined;
found(Scope, H) -> {Scope, H}.

%% @doc An IQ on a stream that has not authenticated: answered by a module
%% registered for the `preauth' scope (in-band registration), or
%% `not_found' (the stream is then closed: authenticate first).
-spec process_preauth(binary(), inet:ip_address() | undefined, #xmlel{}) -> #xmlel{} | not_found.
process_preauth(Host, IP, IQ) ->
    case validate(IQ) of
        {ok, #xmlel{} = Payload} ->
            case throng_ext:iq_handler(Host, preauth, throng_xml:ns(Payload)) of
                undefined -> not_found;
                {Mod, Fun} ->
                    call(Mod, Fun, IQ, #{scope => preauth, host => Host, payload => Payload,
                                         from => undefined, to => #jid{server = Host}, ip => IP})
            end;
        _ ->
            not_found
    end.

%% A module's bug answers the IQ with internal-server-error and is logged;
%% it does not end the session that ran it.
call(Mod, Fun, IQ, Ctx) ->
    try Mod:Fun(IQ, Ctx) of
        #xmlel{} = Reply -> Reply;
        noreply -> noreply
    catch
        Class:Reason:Stack ->
            logger:error(#{what => iq_handler_crashed, module => Mod, function => Fun,
                           class => Class, reason => Reason, stacktrace => Stack}),
            throng_stanza:error_reply(IQ, 'internal-server-error')
    end.
