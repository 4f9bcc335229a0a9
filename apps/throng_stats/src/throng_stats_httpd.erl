%% @doc The statistics HTTP endpoint: the listen socket bound to
%% stats.ip:stats.port, one acceptor, and the connections it admits
%% ({@link throng_stats_http_conn}, one process each, linked to this one).
%% The bound port (useful with port 0) is kept in the throng_stats table for
%% {@link throng_stats:http_port/0}.
%%
%% <b>A cap that cannot be starved.</b> At most `stats.http_max_connections'
%% connections are held. Each is either <em>waiting</em> (for its request
%% line and headers, or idle between kept-alive requests) or <em>busy</em>
%% (a complete request is being answered). A connection accepted at the cap
%% makes room by closing the waiting connection that has waited longest: the
%% oldest half-sent request or idle keep-alive connection. So clients that
%% open connections and never finish a request (slowloris) cannot keep a
%% complete request out; they only push each other out. Only when every held
%% connection is busy is the newcomer answered 503 and closed. The deadlines
%% of a connection (`stats.http_request_timeout', `stats.http_idle_timeout')
%% are the connection's own.
%%
%% A port that cannot be bound does not stop the node (the XMPP service
%% matters more than its statistics): the error is logged and binding is
%% retried every 10 seconds.
-module(throng_stats_httpd).
-behaviour(gen_server).

-export([start_link/0, busy/1, waiting/1, info/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 0}]).
%% API used by tests: connections held and closed.
-ignore_xref([{info, 0}]).

-define(TAB, throng_stats).
-define(RETRY_MS, 10000).
-define(BACKOFF_MS, 100).

-record(st, {listen :: gen_tcp:socket() | undefined,
             acceptor :: pid() | undefined,
             max :: pos_integer(),
             opts :: throng_stats_http_conn:opts(),
             %% Pid => {waiting | busy, Since (monotonic ms)}
             conns = #{} :: #{pid() => {waiting | busy, integer()}},
             evicted = 0 :: non_neg_integer(),
             refused = 0 :: non_neg_integer()}).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc From a connection: a complete request is being answered.
-spec busy(pid()) -> ok.
busy(Owner) ->
    Owner ! {phase, self(), busy},
    ok.

%% @doc From a connection: waiting again for a request.
-spec waiting(pid()) -> ok.
waiting(Owner) ->
    Owner ! {phase, self(), waiting},
    ok.

%% @doc Connections held now (by phase), the cap, and how many were evicted
%% or refused since the endpoint started.
-spec info() -> #{held := non_neg_integer(), waiting := non_neg_integer(),
                  busy := non_neg_integer(), max := pos_integer(),
                  evicted := non_neg_integer(), refused := non_neg_integer()}.
info() ->
    gen_server:call(?MODULE, info).

-spec init([]) -> {ok, #st{}}.
init([]) ->
    process_flag(trap_exit, true),
    St = #st{max = throng_config:get([stats, http_max_connections]),
             opts = #{request_timeout => throng_config:get([stats, http_request_timeout]),
                      idle_timeout => throng_config:get([stats, http_idle_timeout])}},
    {ok, start(St)}.

start(St) ->
    IP = throng_config:get([stats, ip]),
    Port = throng_config:get([stats, port]),
    Family = case tuple_size(IP) of 8 -> inet6; 4 -> inet end,
    Opts = [Family, {ip, IP}, binary, {active, false}, {packet, http_bin},
            {packet_size, 8192}, {reuseaddr, true}, {nodelay, true}, {backlog, 128},
            {send_timeout, 10000}, {send_timeout_close, true}],
    case gen_tcp:listen(Port, Opts) of
        {ok, L} ->
            {ok, Bound} = inet:port(L),
            true = ets:insert(?TAB, {http, IP, Bound}),
            Auth = throng_config:get([stats, auth_user]) =/= <<>>,
            logger:notice(#{what => stats_http_started, ip => inet:ntoa(IP), port => Bound,
                            basic_auth => Auth, max_connections => St#st.max}),
            Auth orelse is_loopback(IP) orelse
                logger:warning(#{what => stats_http_without_auth, ip => inet:ntoa(IP),
                                 hint => "set stats.auth_user and stats.auth_password"}),
            Self = self(),
            Acceptor = spawn_link(fun() -> accept(Self, L) end),
            St#st{listen = L, acceptor = Acceptor};
        {error, Why} ->
            logger:error(#{what => stats_http_failed, ip => inet:ntoa(IP), port => Port,
                           reason => Why, retry_in_ms => ?RETRY_MS}),
            erlang:send_after(?RETRY_MS, self(), retry),
            St
    end.

%% The acceptor: takes a connection, asks the owner for a slot, hands the
%% socket over.
accept(Owner, L) ->
    case throng_accept:accept(L) of
        {ok, Sock} ->
            case gen_server:call(Owner, admit, infinity) of
                {ok, Pid} ->
                    case gen_tcp:controlling_process(Sock, Pid) of
                        ok -> Pid ! {go, Sock}, ok;
                        {error, _} -> gen_tcp:close(Sock)   % the connection ends itself
                    end;
                full ->
                    throng_stats_http_conn:refuse(Sock)
            end,
            accept(Owner, L);
        {error, closed} ->
            ok;
        {error, Why} ->
            %% emfile and the like: back off, connections wait in the backlog.
            logger:warning(#{what => stats_http_accept_failed, reason => Why}),
            timer:sleep(?BACKOFF_MS),
            accept(Owner, L)
    end.

is_loopback({127, _, _, _}) -> true;
is_loopback({0, 0, 0, 0, 0, 0, 0, 1}) -> true;
is_loopback(_) -> false.

-spec handle_call(admit | info | term(), gen_server:from(), #st{}) ->
    {reply, term(), #st{}}.
handle_call(admit, _From, #st{conns = Conns, max = Max} = St) ->
    case map_size(Conns) < Max of
        true ->
            {Pid, St1} = spawn_conn(St),
            {reply, {ok, Pid}, St1};
        false ->
            case oldest_waiting(Conns) of
                none ->
                    {reply, full, St#st{refused = St#st.refused + 1}};
                Victim ->
                    exit(Victim, kill),
                    {Pid, St1} = spawn_conn(St#st{conns = maps:remove(Victim, Conns),
                                                  evicted = St#st.evicted + 1}),
                    {reply, {ok, Pid}, St1}
            end
    end;
handle_call(info, _From, #st{conns = Conns} = St) ->
    Busy = maps:size(maps:filter(fun(_, {Ph, _}) -> Ph =:= busy end, Conns)),
    {reply, #{held => map_size(Conns), busy => Busy, waiting => map_size(Conns) - Busy,
              max => St#st.max, evicted => St#st.evicted, refused => St#st.refused}, St};
handle_call(_Req, _From, St) ->
    {reply, ok, St}.

spawn_conn(#st{opts = Opts, conns = Conns} = St) ->
    Pid = throng_stats_http_conn:start_link(self(), Opts),
    {Pid, St#st{conns = Conns#{Pid => {waiting, now_ms()}}}}.

oldest_waiting(Conns) ->
    Oldest = maps:fold(fun(Pid, {waiting, T}, none) -> {Pid, T};
                          (Pid, {waiting, T}, {_, T0}) when T < T0 -> {Pid, T};
                          (_, _, Acc) -> Acc
                       end, none, Conns),
    case Oldest of
        none -> none;
        {Pid, _} -> Pid
    end.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}} | {stop, term(), #st{}}.
handle_info({phase, Pid, Phase}, #st{conns = Conns} = St) ->
    case Conns of
        #{Pid := _} -> {noreply, St#st{conns = Conns#{Pid := {Phase, now_ms()}}}};
        _ -> {noreply, St}
    end;
handle_info(retry, #st{listen = undefined} = St) ->
    {noreply, start(St)};
handle_info({'EXIT', Pid, Why}, #st{acceptor = Pid} = St) ->
    {stop, {acceptor_exited, Why}, St};
handle_info({'EXIT', Pid, _}, #st{conns = Conns} = St) ->
    {noreply, St#st{conns = maps:remove(Pid, Conns)}};
handle_info(_Msg, St) ->
    {noreply, St}.

-spec terminate(term(), #st{}) -> ok.
terminate(_Reason, #st{listen = undefined}) ->
    ok;
terminate(_Reason, #st{listen = L}) ->
    ets:delete(?TAB, http),
    _ = gen_tcp:close(L),
    ok.

now_ms() ->
    erlang:monotonic_time(millisecond).
