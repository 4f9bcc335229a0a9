%% @doc The inets httpd module of the statistics endpoint. Every request
%% reads the latest snapshot from the throng_stats table; none reaches the
%% collector.
%%
%% <dl>
%% <dt>GET /metrics</dt><dd>Prometheus text format</dd>
%% <dt>GET /stats</dt><dd>JSON: every series, the queues, the latency</dd>
%% <dt>GET /history</dt><dd>JSON: the last 300 chart points</dd>
%% <dt>GET /</dt><dd>the dashboard (priv/dashboard.html, .js, .css)</dd>
%% </dl>
%% With stats.auth_user set, every path needs HTTP basic authentication.
-module(throng_stats_http).

-include_lib("inets/include/httpd.hrl").

-export([do/1, authorized/3]).
%% The inets httpd module callback (throng_stats_httpd names the module).
-ignore_xref([{do, 1}]).
%% API used by tests: the Basic authentication check.
-ignore_xref([{authorized, 3}]).

-define(STATIC, [{"/", "dashboard.html", "text/html; charset=utf-8"},
                 {"/dashboard.js", "dashboard.js", "application/javascript; charset=utf-8"},
                 {"/dashboard.css", "dashboard.css", "text/css; charset=utf-8"}]).

-spec do(#mod{}) -> {proceed, list()}.
do(#mod{method = Method, request_uri = Uri, parsed_header = Headers}) ->
    User = throng_config:get([stats, auth_user]),
    Password = throng_config:get([stats, auth_password]),
    Response =
        case authorized(proplists:get_value("authorization", Headers), User, Password) of
            false ->
                respond(401, "text/plain; charset=utf-8", <<"authentication required\n">>,
                        [{"www-authenticate", "Basic realm=\"throng\", charset=\"UTF-8\""}]);
            true when Method =:= "GET"; Method =:= "HEAD" ->
                Body = route(path(Uri)),
                case Method of
                    "HEAD" -> head(Body);
                    "GET" -> Body
                end;
            true ->
                respond(405, "text/plain; charset=utf-8", <<"method not allowed\n">>,
                        [{"allow", "GET, HEAD"}])
        end,
    {proceed, [{response, Response}]}.

%% @doc Whether an Authorization header value grants access: always when
%% no user is configured, else when it is Basic with the right user and
%% password (compared in constant time).
-spec authorized(string() | undefined, binary(), binary()) -> boolean().
authorized(_Header, <<>>, _Password) ->
    true;
authorized("Basic " ++ B64, User, Password) ->
    try base64:decode(string:trim(B64)) of
        Given -> crypto:hash_equals(crypto:hash(sha256, Given),
                                    crypto:hash(sha256, <<User/binary, ":", Password/binary>>))
    catch error:_ -> false
    end;
authorized("basic " ++ B64, User, Password) ->
    authorized("Basic " ++ B64, User, Password);
authorized(_, _, _) ->
    false.

path(Uri) ->
    hd(string:split(Uri, "?")).

route("/metrics") ->
    respond(200, throng_stats_prom:content_type(), throng_stats_prom:render(snapshot()));
route("/stats") ->
    json(throng_stats_view:stats(snapshot()));
route("/history") ->
    json(throng_stats_view:history(throng_stats:history()));
route(Path) ->
    case lists:keyfind(Path, 1, ?STATIC) of
        {_, File, Type} ->
            case file:read_file(filename:join(priv_dir(), File)) of
                {ok, Bin} -> respond(200, Type, Bin);
                {error, _} -> respond(500, "text/plain", <<"dashboard file missing\n">>)
            end;
        false ->
            respond(404, "text/plain; charset=utf-8", <<"not found\n">>)
    end.

snapshot() ->
    case throng_stats:snapshot() of
        undefined -> #{};
        S -> S
    end.

json(Doc) ->
    respond(200, "application/json", throng_stats_json:encode(Doc)).

respond(Code, Type, Body) ->
    respond(Code, Type, Body, []).

respond(Code, Type, Body0, Extra) ->
    Body = iolist_to_binary(Body0),
    {response, [{code, Code}, {content_type, Type},
                {content_length, integer_to_list(byte_size(Body))},
                {cache_control, "no-store"} | Extra], Body}.

head({response, Headers, _Body}) ->
    {response, Headers, <<>>}.

priv_dir() ->
    case code:priv_dir(throng_stats) of
        {error, bad_name} -> "priv";
        Dir -> Dir
    end.
