%% @doc Routing latency, measured by sampling: a few times a second a probe
%% is put in the message queue of one session process and the time until
%% that process answers it is recorded in a histogram (throng_lib's
%% throng_hist, microseconds).
%%
%% What a stanza routed to a session waits for is that process's queue: the
%% messages ahead of it, the process being scheduled (and woken from
%% hibernation). The probe waits for exactly that. It is a system message
%% (`{system, From, {debug, {statistics, get}}}'), which every gen_statem
%% answers from its main loop, in queue order, without running any Throng
%% code and without cancelling its timeouts: no hook in the router or the
%% connection. The sessions are visited round robin through
%% {@link throng_info:next_session/1} (one ets:next of the session table per
%% probe, from where the last one stopped), so over time every session is
%% sampled alike.
%%
%% A probe not answered within 10 seconds counts as lost (the session ended,
%% or its process is stuck: both worth seeing). Rate: application env
%% `route_probes_per_second' (default 10; 0 turns probing off).
-module(throng_stats_probe).
-behaviour(gen_server).

-export([start_link/0, read/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).
%% Called by supervisors (child specs) and proc_lib.
-ignore_xref([{start_link, 0}]).

-define(TAB, throng_stats).
-define(LOST_AFTER_US, 10000000).

-record(st, {hist :: throng_hist:hist(),
             counts :: throng_counters:t(),       %% sent, answered, lost
             every :: pos_integer() | infinity,   %% ms between probes
             cursor :: throng_info:session_cursor() | undefined,
             inflight = #{} :: #{reference() => integer()}}).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @doc The histogram and the probe counts so far (empty before start).
-spec read() -> {throng_hist:snapshot(), #{sent | answered | lost => non_neg_integer()}}
              | undefined.
read() ->
    case ets:lookup(?TAB, probe) of
        [{probe, Hist, Counts}] ->
            {throng_hist:snapshot(Hist), throng_counters:to_map(Counts)};
        [] ->
            undefined
    end.

-spec init([]) -> {ok, #st{}}.
init([]) ->
    Hist = throng_hist:new(),
    Counts = throng_counters:new([sent, answered, lost], []),
    true = ets:insert(?TAB, {probe, Hist, Counts}),
    Every = case application:get_env(throng_stats, route_probes_per_second, 10) of
                0 -> infinity;
                Rate -> max(1, 1000 div Rate)
            end,
    schedule(Every),
    {ok, #st{hist = Hist, counts = Counts, every = Every}}.

-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, ok, #st{}}.
handle_call(_Req, _From, St) ->
    {reply, ok, St}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(probe, #st{every = Every} = St) ->
    schedule(Every),
    {noreply, expire(probe(St))};
handle_info({Ref, _Reply}, #st{inflight = In, hist = Hist, counts = Counts} = St)
  when is_reference(Ref) ->
    case maps:take(Ref, In) of
        {T0, In1} ->
            throng_hist:record(Hist, erlang:monotonic_time(microsecond) - T0),
            throng_counters:add(Counts, answered, 1),
            {noreply, St#st{inflight = In1}};
        error ->
            {noreply, St}
    end;
handle_info(_Msg, St) ->
    {noreply, St}.

schedule(infinity) -> ok;
schedule(Ms) -> erlang:send_after(Ms, self(), probe), ok.

probe(#st{cursor = Cursor, inflight = In, counts = Counts} = St) ->
    case throng_info:next_session(Cursor) of
        {Next, Pid} ->
            Ref = make_ref(),
            Pid ! {system, {self(), Ref}, {debug, {statistics, get}}},
            throng_counters:add(Counts, sent, 1),
            St#st{cursor = Next,
                  inflight = In#{Ref => erlang:monotonic_time(microsecond)}};
        none ->
            St#st{cursor = undefined}
    end.

expire(#st{inflight = In, counts = Counts} = St) ->
    Limit = erlang:monotonic_time(microsecond) - ?LOST_AFTER_US,
    Lost = maps:filter(fun(_, T0) -> T0 < Limit end, In),
    case map_size(Lost) of
        0 -> St;
        N ->
            throng_counters:add(Counts, lost, N),
            St#st{inflight = maps:without(maps:keys(Lost), In)}
    end.
