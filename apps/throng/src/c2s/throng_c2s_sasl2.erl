%% @doc XEP-0388 SASL2 for a client connection, with Bind2 (XEP-0386) and
%% FAST (XEP-0484) inline: what is offered, what a client's
%% <authenticate/> asks, and what its success does. The SASL exchange
%% itself is {@link throng_sasl}'s; throng_c2s_auth carries it.
%%
%% Offered over TLS only. After <success/> there is no stream restart: the
%% features of the authenticated stream follow at once. With Bind2 the
%% session is bound in the same step: resource `Tag/random' (or random
%% without a tag), stream management enabled inline when asked; initial
%% presence is still the client's to send. Offline messages are delivered
%% as without Bind2 (at initial presence): Throng has no message archive
%% yet for a client to catch up from, so none are dropped.
%%
%% Stream resumption inline (XEP-0198 "Inline Stream Resumption"): a
%% <resume/> in <authenticate/> is tried first. When the old session takes
%% the connection over, it answers with the <success/> (its full JID, the
%% <resumed/>, the FAST token if any) and no stream features follow; a Bind2
%% request beside it is ignored. When it fails, the <success/> carries the
%% <failed/> and the login goes on as without it (Bind2 if asked).
%%
%% FAST: a client that sends a user-agent id may ask for a token
%% (<request-token/>); next time it logs in with HT-SHA-256-EXPR, -ENDP or
%% -NONE in one round trip. Tokens rotate (a token older than
%% auth.fast_token_refresh gets a successor in the <success/>),
%% `invalidate' ends them ({@link throng_fast}).
-module(throng_c2s_sasl2).

-include("throng.hrl").
-include("throng_c2s.hrl").

-export([offered/1, feature/1, request/1, mechanism_ok/3, sasl_ctx/3, challenge_el/1,
         failure_el/1, success/5]).

-type request() :: #{mechanism := binary(),
                     ua => binary(),                      % user-agent id
                     bind => #xmlel{},                    % Bind2 request
                     resume => #xmlel{},                  % XEP-0198 <resume/>
                     request_token => binary(),           % FAST mechanism
                     invalidate => boolean()}.
-export_type([request/0]).

-define(MAX_UA, 256).

%% @doc SASL2 is offered on TLS connections, when enabled.
-spec offered(data()) -> boolean().
offered(#d{sock = Sock}) ->
    Sock =/= undefined andalso throng_transport:is_tls(Sock)
        andalso throng_config:get([auth, sasl2]).

%% @doc The <authentication/> stream feature (pre-auth), or nothing.
-spec feature(data()) -> iodata().
feature(#d{sock = Sock} = D) ->
    case offered(D) of
        false -> [];
        true ->
            Mechs = throng_c2s_mechs:mechanisms(Sock),
            ["<authentication xmlns='", ?NS_SASL2, "'>",
             [["<mechanism>", M, "</mechanism>"] || M <- Mechs],
             "<inline>",
             [["<sm xmlns='", ?NS_SM, "'/>"] || throng_config:get([stream_management, enabled])],
             "<bind xmlns='", ?NS_BIND2, "'><inline><feature var='", ?NS_SM, "'/></inline></bind>",
             [["<fast xmlns='", ?NS_FAST, "'>", [["<mechanism>", M, "</mechanism>"] || M <- Fast],
               "</fast>"] || Fast <- [throng_c2s_mechs:fast_mechanisms(Sock)], Fast =/= []],
             "</inline></authentication>"]
    end.

%% @doc What an <authenticate/> asks besides authentication.
-spec request(#xmlel{}) -> request().
request(El) ->
    UA = case throng_xml:subel(El, <<"user-agent">>) of
             undefined -> <<>>;
             U -> throng_xml:attr(<<"id">>, U, <<>>)
         end,
    Bind = throng_xml:subel(El, <<"bind">>, ?NS_BIND2),
    Resume = throng_xml:subel(El, <<"resume">>, ?NS_SM),
    Token = throng_xml:subel(El, <<"request-token">>, ?NS_FAST),
    Fast = throng_xml:subel(El, <<"fast">>, ?NS_FAST),
    maps:from_list(
      [{mechanism, throng_xml:attr(<<"mechanism">>, El, <<>>)}] ++
      [{ua, binary:copy(UA)} || UA =/= <<>>, byte_size(UA) =< ?MAX_UA] ++
      [{bind, Bind} || Bind =/= undefined] ++
      [{resume, Resume} || Resume =/= undefined] ++
      [{request_token, throng_xml:attr(<<"mechanism">>, Token, <<>>)} || Token =/= undefined] ++
      [{invalidate, lists:member(throng_xml:attr(<<"invalidate">>, Fast, <<>>), [<<"true">>, <<"1">>])}
       || Fast =/= undefined]).

%% @doc The mechanism is offered on this connection: a SASL one, or a FAST
%% one for a client that says who it is.
-spec mechanism_ok(binary(), request(), data()) -> boolean().
mechanism_ok(Mech, Req, #d{sock = Sock}) ->
    lists:member(Mech, throng_c2s_mechs:mechanisms(Sock))
        orelse (is_map_key(ua, Req) andalso lists:member(Mech, throng_c2s_mechs:fast_mechanisms(Sock))).

%% @doc The SASL context with this client's FAST tokens.
-spec sasl_ctx(request(), throng_sasl:ctx(), data()) -> throng_sasl:ctx().
sasl_ctx(#{ua := UA}, Ctx, #d{server = Server, sock = Sock}) ->
    case throng_c2s_mechs:fast_mechanisms(Sock) of
        [] -> Ctx;
        _ -> Ctx#{fast_tokens => fun(User, Mech) -> throng_fast:tokens(User, Server, UA, Mech) end}
    end;
sasl_ctx(_Req, Ctx, _D) ->
    Ctx.

-spec challenge_el(binary()) -> iodata().
challenge_el(Data) ->
    ["<challenge xmlns='", ?NS_SASL2, "'>", base64:encode(Data), "</challenge>"].

-spec failure_el(atom()) -> iodata().
failure_el(Cond) ->
    ["<failure xmlns='", ?NS_SASL2, "'><", atom_to_binary(Cond), " xmlns='", ?NS_SASL, "'/></failure>"].

%% @doc Authentication succeeded: FAST tokens, an inline resumption, Bind2,
%% then <success/> and the features of the authenticated stream (no
%% restart; none after a resumption).
-spec success(binary(), binary(), password | {fast, throng_fast:slot(), integer()}, request(),
              data()) -> throng_c2s:element_result().
success(Extra, User, How, Req, D0) ->
    D = D0#d{user = User},
    Token = token(User, How, Req, D),
    Additional = [["<additional-data>", base64:encode(Extra), "</additional-data>"] || Extra =/= <<>>],
    case resume(Req, D) of
        {ok, Pid} ->
            %% The old session sends the <success/> with its <resumed/>.
            {handover, {Pid, {sasl2, Additional, Token}}, D};
        {failed, Failed} ->
            case maps:get(bind, Req, undefined) of
                undefined ->
                    Bare = throng_jid:to_binary(#jid{user = User, server = D#d.server, resource = <<>>}),
                    D1 = throng_c2s_io:emit(throng_stream:sasl2_success(Additional, Bare, Failed, Token), D),
                    {next, wait_bind, throng_c2s_io:emit(authenticated_features(D1), D1)};
                Bind ->
                    bind(Bind, Additional, Failed, Token, D)
            end
    end.

%% An inline <resume/>: the session that takes the connection over, or
%% the <failed/> for the <success/> ([] when none was asked).
resume(#{resume := El}, D) ->
    case throng_config:get([stream_management, enabled]) of
        false ->
            {failed, throng_stream_mgmt:failed_el('feature-not-implemented')};
        true ->
            case throng_c2s_sm:take_over(El, D) of
                {ok, Pid} -> {ok, Pid};
                {error, Cond} -> {failed, throng_stream_mgmt:failed_el(Cond)}
            end
    end;
resume(_Req, _D) ->
    {failed, []}.

%% The features of an authenticated stream before binding (as after a
%% legacy SASL restart).
authenticated_features(#d{server = Server}) ->
    throng_stream:features(#{stage => authenticated, tls => true, starttls => disabled,
                             mechanisms => [],
                             sm => throng_config:get([stream_management, enabled]),
                             extra => throng_ext:stream_features(authenticated, Server)}).

%% Bind2: the resource is the client's tag (if valid) and a random part.
%% Failed: the <failed/> of an inline resumption that did not work, if any.
bind(Bind, Additional, Failed, Token, D) ->
    Random = binary:encode_hex(crypto:strong_rand_bytes(6)),
    Resource = case throng_jid:resourceprep(throng_xml:subel_cdata(Bind, <<"tag">>)) of
                   Tag when is_binary(Tag), Tag =/= <<>>, byte_size(Tag) =< 64 ->
                       <<Tag/binary, "/", Random/binary>>;
                   _ ->
                       Random
               end,
    case throng_c2s_bind:open_session(Resource, D) of
        Refused when Refused =:= conflict; Refused =:= unreachable ->
            %% Another node took this random resource at the same moment
            %% (as good as impossible), or the user's home node did not
            %% answer in time: not an authentication failure.
            {next, wait_bind, throng_c2s_io:emit(
                                failure_el('temporary-auth-failure'), D#d{user = undefined})};
        {ok, #d{jid = JID} = D1} ->
            {SmAnswer, D2} = case throng_xml:subel(Bind, <<"enable">>, ?NS_SM) of
                                 undefined -> {[], D1};
                                 Enable -> throng_c2s_sm:enable(Enable, D1)
                             end,
            Bound = ["<bound xmlns='", ?NS_BIND2, "'>", SmAnswer, "</bound>"],
            D3 = throng_c2s_io:emit(throng_stream:sasl2_success(Additional, throng_jid:to_binary(JID),
                                                                [Failed, Bound], Token), D2),
            Features = ["<stream:features>",
                        [["<sm xmlns='", ?NS_SM, "'/>"]
                         || D3#d.sm =:= undefined, throng_config:get([stream_management, enabled])],
                        "</stream:features>"],
            {next, session, throng_c2s_io:emit(Features, D3), [{{timeout, negotiation}, cancel}]}
    end.

%% FAST: what the <success/> carries for the client's tokens.
token(User, How, #{ua := UA} = Req, #d{server = S, sock = Sock}) ->
    Requested = maps:get(request_token, Req, undefined),
    Offered = throng_c2s_mechs:fast_mechanisms(Sock),
    case How of
        {fast, Slot, Issued} ->
            ok = throng_fast:used(User, S, UA, Slot),
            case maps:get(invalidate, Req, false) of
                true ->
                    ok = throng_fast:invalidate(User, S, UA),
                    new_token(User, S, UA, Requested, Offered);
                false when Requested =/= undefined ->
                    new_token(User, S, UA, Requested, Offered);
                false ->
                    case throng_fast:due(Issued) of
                        true -> new_token(User, S, UA, maps:get(mechanism, Req), Offered);
                        false -> []
                    end
            end;
        password ->
            new_token(User, S, UA, Requested, Offered)
    end;
token(_User, _How, _Req, _D) ->
    [].

new_token(User, S, UA, Mech, Offered) ->
    case Mech =/= undefined andalso lists:member(Mech, Offered) of
        true ->
            {Token, Expiry} = throng_fast:issue(User, S, UA, Mech),
            ["<token xmlns='", ?NS_FAST, "' expiry='",
             calendar:system_time_to_rfc3339(Expiry, [{offset, "Z"}]), "' token='", Token, "'/>"];
        false ->
            []
    end.
