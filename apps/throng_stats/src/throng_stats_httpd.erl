%% @doc Runs the statistics HTTP endpoint: an OTP inets httpd instance
%% bound to stats.ip:stats.port whose only module is
%% {@link throng_stats_http}. The bound port (useful with port 0) is kept in
%% the throng_stats table for {@link throng_stats:http_port/0}.
%%
%% A port that cannot be bound does not stop the node (the XMPP service
%% matters more than its statistics): the error is logged and binding is
%% retried every 10 seconds.
-module(throng_stats_httpd).
-behaviour(gen_server).

-export([start_link/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 0}]).

-define(TAB, throng_stats).
-define(RETRY_MS, 10000).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

-spec init([]) -> {ok, undefined | pid()}.
init([]) ->
    process_flag(trap_exit, true),
    {ok, start()}.

start() ->
    IP = throng_config:get([stats, ip]),
    Port = throng_config:get([stats, port]),
    Priv = priv_dir(),
    Family = case tuple_size(IP) of 8 -> inet6; 4 -> inet end,
    Config = [{port, Port}, {bind_address, IP}, {ipfamily, Family},
              {server_name, "throng_stats"}, {server_root, Priv}, {document_root, Priv},
              {modules, [throng_stats_http]}, {server_tokens, none},
              {keep_alive, true}, {max_clients, 64}, {max_header_size, 8192},
              {max_body_size, 4096}, {max_uri_size, 2048}],
    case inets:start(httpd, Config) of
        {ok, Pid} ->
            link(Pid),
            [{port, Bound}] = httpd:info(Pid, [port]),
            true = ets:insert(?TAB, {http, IP, Bound}),
            Auth = throng_config:get([stats, auth_user]) =/= <<>>,
            logger:notice(#{what => stats_http_started, ip => inet:ntoa(IP), port => Bound,
                            basic_auth => Auth}),
            Auth orelse is_loopback(IP) orelse
                logger:warning(#{what => stats_http_without_auth, ip => inet:ntoa(IP),
                                 hint => "set stats.auth_user and stats.auth_password"}),
            Pid;
        {error, Why} ->
            logger:error(#{what => stats_http_failed, ip => inet:ntoa(IP), port => Port,
                           reason => Why, retry_in_ms => ?RETRY_MS}),
            erlang:send_after(?RETRY_MS, self(), retry),
            undefined
    end.

is_loopback({127, _, _, _}) -> true;
is_loopback({0, 0, 0, 0, 0, 0, 0, 1}) -> true;
is_loopback(_) -> false.

priv_dir() ->
    case code:priv_dir(throng_stats) of
        {error, bad_name} -> filename:join(filename:dirname(filename:dirname(code:which(?MODULE))), "priv");
        Dir -> Dir
    end.

-spec handle_call(term(), gen_server:from(), undefined | pid()) -> {reply, ok, undefined | pid()}.
handle_call(_Req, _From, St) ->
    {reply, ok, St}.

-spec handle_cast(term(), undefined | pid()) -> {noreply, undefined | pid()}.
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), undefined | pid()) ->
    {noreply, undefined | pid()} | {stop, term(), undefined}.
handle_info(retry, undefined) ->
    {noreply, start()};
handle_info({'EXIT', Pid, Why}, Pid) ->
    ets:delete(?TAB, http),
    {stop, {httpd_exited, Why}, undefined};
handle_info(_Msg, St) ->
    {noreply, St}.

-spec terminate(term(), undefined | pid()) -> ok.
terminate(_Reason, undefined) ->
    ok;
terminate(_Reason, Pid) ->
    ets:delete(?TAB, http),
    _ = inets:stop(httpd, Pid),
    ok.
