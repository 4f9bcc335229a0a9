%% @doc The request handler of the statistics endpoint: a parsed request in,
%% a response out (the connection, its timeouts and limits are
%% {@link throng_stats_http_conn}'s). Every request reads the latest snapshot
%% from the throng_stats table; none reaches the collector.
%%
%% <dl>
%% <dt>GET /metrics</dt><dd>Prometheus text format</dd>
%% <dt>GET /stats</dt><dd>JSON: every series, the queues, the latency</dd>
%% <dt>GET /history</dt><dd>JSON: the last 300 chart points</dd>
%% <dt>GET /</dt><dd>the dashboard (priv/dashboard.html, .js, .css)</dd>
%% </dl>
%% With stats.auth_user set, every path needs HTTP basic authentication.
-module(throng_stats_http).

-export([handle/3, authorized/3]).
%% API used by tests: the Basic authentication check.
-ignore_xref([{authorized, 3}]).

-export_type([response/0]).

%% Status, headers (lower-case names) and body.
-type response() :: {100..599, [{binary(), iodata()}], binary()}.

-define(STATIC, [{<<"/">>, "dashboard.html", <<"text/html; charset=utf-8">>},
                 {<<"/dashboard.js">>, "dashboard.js", <<"application/javascript; charset=utf-8">>},
                 {<<"/dashboard.css">>, "dashboard.css", <<"text/css; charset=utf-8">>}]).

%% @doc The response to a request: its method, its target (path and query)
%% and its Authorization header (undefined when there is none). HEAD gets
%% GET's headers without the body.
-spec handle(binary(), binary(), binary() | undefined) -> response().
handle(Method, Target, Authorization) ->
    User = throng_config:get([stats, auth_user]),
    Password = throng_config:get([stats, auth_password]),
    case authorized(Authorization, User, Password) of
        false ->
            respond(401, <<"text/plain; charset=utf-8">>, <<"authentication required\n">>,
                    [{<<"www-authenticate">>, <<"Basic realm=\"throng\", charset=\"UTF-8\"">>}]);
        true when Method =:= <<"GET">>; Method =:= <<"HEAD">> ->
            Response = route(path(Target)),
            case Method of
                <<"HEAD">> -> head(Response);
                <<"GET">> -> Response
            end;
        true ->
            respond(405, <<"text/plain; charset=utf-8">>, <<"method not allowed\n">>,
                    [{<<"allow">>, <<"GET, HEAD">>}])
    end.

%% @doc Whether an Authorization header value grants access: always when
%% no user is configured, else when it is Basic with the right user and
%% password (compared in constant time).
-spec authorized(binary() | string() | undefined, binary(), binary()) -> boolean().
authorized(_Header, <<>>, _Password) ->
    true;
authorized(Header, User, Password) when is_list(Header) ->
    authorized(unicode:characters_to_binary(Header), User, Password);
authorized(<<Scheme:6/binary, B64/binary>>, User, Password) when is_binary(Scheme) ->
    case string:lowercase(Scheme) of
        <<"basic ">> -> basic(B64, User, Password);
        _ -> false
    end;
authorized(_, _, _) ->
    false.

basic(B64, User, Password) ->
    try base64:decode(string:trim(B64)) of
        Given -> crypto:hash_equals(crypto:hash(sha256, Given),
                                    crypto:hash(sha256, <<User/binary, ":", Password/binary>>))
    catch error:_ -> false
    end.

path(Target) ->
    hd(binary:split(Target, <<"?">>)).

route(<<"/metrics">>) ->
    respond(200, throng_stats_prom:content_type(), throng_stats_prom:render(snapshot()));
route(<<"/stats">>) ->
    json(throng_stats_view:stats(snapshot()));
route(<<"/history">>) ->
    json(throng_stats_view:history(throng_stats:history()));
route(Path) ->
    case lists:keyfind(Path, 1, ?STATIC) of
        {_, File, Type} ->
            case file:read_file(filename:join(priv_dir(), File)) of
                {ok, Bin} -> respond(200, Type, Bin);
                {error, _} -> respond(500, <<"text/plain">>, <<"dashboard file missing\n">>)
            end;
        false ->
            respond(404, <<"text/plain; charset=utf-8">>, <<"not found\n">>)
    end.

snapshot() ->
    case throng_stats:snapshot() of
        undefined -> #{};
        S -> S
    end.

json(Doc) ->
    respond(200, <<"application/json">>, throng_stats_json:encode(Doc)).

respond(Code, Type, Body) ->
    respond(Code, Type, Body, []).

respond(Code, Type, Body, Extra) ->
    {Code, [{<<"content-type">>, Type}, {<<"cache-control">>, <<"no-store">>} | Extra],
     iolist_to_binary(Body)}.

head({Code, Headers, Body}) ->
    {Code, [{<<"content-length">>, integer_to_binary(byte_size(Body))} | Headers], <<>>}.

priv_dir() ->
    case code:priv_dir(throng_stats) of
        {error, bad_name} -> "priv";
        Dir -> Dir
    end.
