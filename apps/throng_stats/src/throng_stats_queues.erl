%% @doc Message-queue health: the total and the longest queues, and the
%% queue alarm, kept cheap on a node with a million processes.
%%
%% No second-by-second scan of every process. Each second the collector
%% checks the queue length (one process_info each) of:
%% <ol>
%% <li>the processes that reported themselves: a connection process checks
%%     its own queue after each event and, when it is longer than
%%     stats.queue_alarm, reports itself to the server
%%     ({@link throng_info:hot_queues/0}). Reports of queues that drained
%%     (or of dead processes) are cleared here;</li>
%% <li>the registered processes (a few dozen: the servers everything goes
%%     through);</li>
%% <li>the watched processes: any process seen with a queue of at least
%%     watch_min messages (stats.queue_alarm / 10 by default) stays watched
%%     until it drops below;</li>
%% <li>a slice of a rolling sweep of every process: erlang:processes() is
%%     taken once per full sweep and walked a slice per second: a tenth of
%%     the processes (a full sweep every 10 seconds), at most sweep_rate
%%     (application env `queue_sweep_rate', 5,000 by default; 0 turns the
%%     sweep off). It finds a long queue that did not report itself (a
%%     process stuck in a call, a suspended one, one that is not a
%%     connection) within 10 seconds up to 50,000 processes, within
%%     process_count / sweep_rate seconds beyond (200 s for a million); a
%%     process started after a sweep began waits for the next one (up to
%%     twice that). The process found joins the watched set.</li>
%% </ol>
%% The total is the sum over (1)-(3): the queues that matter, re-checked
%% every second; short queues of unwatched processes are not counted.
-module(throng_stats_queues).

-export([init/0, init/1, tick/1]).
%% API used by tests: a watch with explicit thresholds.
-ignore_xref([{init, 1}]).

-record(q, {threshold :: pos_integer(),
            watch_min :: pos_integer(),
            sweep_rate :: non_neg_integer(),
            watched = #{} :: #{pid() => integer()},   %% pid => first seen (ms)
            sweep = [] :: [pid()],                    %% what is left of this sweep
            sweep_started :: integer() | undefined,
            sweep_seconds :: float() | undefined,
            swept = 0 :: non_neg_integer(),
            alarm_since :: integer() | undefined,     %% system time (ms)
            logged_at = 0 :: integer(),
            alarms = 0 :: non_neg_integer()}).
-opaque state() :: #q{}.
-export_type([state/0]).

-type entry() :: #{pid := binary(), name := binary(), len := non_neg_integer(),
                   since_ms := integer()}.
-type report() :: #{total := non_neg_integer(), max := non_neg_integer(),
                    watched := non_neg_integer(), threshold := pos_integer(),
                    alarm := boolean(), over := non_neg_integer(),
                    since_ms := integer() | null, top := [entry()]}.
-export_type([report/0]).

-define(TOP, 10).
-define(RELOG_MS, 60000).

%% @doc Reads stats.queue_alarm and the application environment
%% (queue_watch_min, queue_sweep_rate).
-spec init() -> state().
init() ->
    Threshold = try throng_config:get([stats, queue_alarm]) catch error:badarg -> 10000 end,
    init(#{threshold => Threshold,
           watch_min => application:get_env(throng_stats, queue_watch_min, undefined),
           sweep_rate => application:get_env(throng_stats, queue_sweep_rate, 5000)}).

-spec init(#{threshold := pos_integer(), watch_min => pos_integer() | undefined,
             sweep_rate => non_neg_integer()}) -> state().
init(#{threshold := T} = Opts) ->
    WatchMin = case maps:get(watch_min, Opts, undefined) of
                   undefined -> max(1, T div 10);
                   W -> W
               end,
    #q{threshold = T, watch_min = WatchMin, sweep_rate = maps:get(sweep_rate, Opts, 5000)}.

%% @doc One second's check.
-spec tick(state()) -> {[throng_stats_os:sample()], report(), state()}.
tick(#q{threshold = Threshold, watch_min = WatchMin} = Q0) ->
    Now = erlang:system_time(millisecond),
    Hot = throng_info:hot_queues(),
    Registered = [P || N <- registered(), P <- [whereis(N)], is_pid(P)],
    {Slice, Q1} = sweep_slice(Q0),
    Always = lists:usort([P || {P, _, _} <- Hot] ++ Registered ++ maps:keys(Q1#q.watched)),
    Lens = lens(Always, #{}),
    SliceLens = lens([P || P <- Slice, not maps:is_key(P, Lens)], #{}),
    Checked = maps:merge(SliceLens, Lens),
    %% Reports of queues that drained or processes that died go.
    ok = throng_info:clear_hot_queues([Row || {P, _, _} = Row <- Hot,
                                             maps:get(P, Lens, 0) =< Threshold]),
    Watched = maps:from_list(
                [{P, maps:get(P, Q1#q.watched, Now)}
                 || {P, L} <- maps:to_list(Checked), L >= WatchMin]),
    Counted = maps:merge(maps:with(maps:keys(Watched), Checked), Lens),
    Total = lists:sum(maps:values(Counted)),
    Max = lists:max([0 | maps:values(Checked)]),
    Over = [{P, L} || {P, L} <- maps:to_list(Checked), L > Threshold],
    Top = top(Checked, Watched, Hot, Now),
    Q2 = alarm(Over, Top, Now, Q1#q{watched = Watched}),
    Report = #{total => Total, max => Max, watched => map_size(Counted),
               threshold => Threshold, alarm => Over =/= [], over => length(Over),
               since_ms => case Q2#q.alarm_since of undefined -> null; S -> S end,
               top => Top},
    Samples = [{throng_message_queue_total, [], Total},
               {throng_message_queue_max, [], Max},
               {throng_message_queue_watched, [], map_size(Counted)},
               {throng_message_queue_alarm, [], case Over of [] -> 0; _ -> 1 end},
               {throng_message_queue_alarm_processes, [], length(Over)},
               {throng_message_queue_alarm_threshold, [], Threshold},
               {throng_message_queue_alarms, [], Q2#q.alarms},
               {throng_message_queue_swept, [], Q2#q.swept}] ++
        [{throng_message_queue_sweep_seconds, [], S} || S <- [Q2#q.sweep_seconds], S =/= undefined],
    {Samples, Report, Q2}.

lens([], Acc) -> Acc;
lens([P | Ps], Acc) ->
    case erlang:process_info(P, message_queue_len) of
        {message_queue_len, L} -> lens(Ps, Acc#{P => L});
        undefined -> lens(Ps, Acc)
    end.

%% The next slice of the sweep; a new sweep starts when the last one ended.
sweep_slice(#q{sweep_rate = 0} = Q) ->
    {[], Q};
sweep_slice(#q{sweep = [], sweep_started = Started} = Q) ->
    Now = erlang:monotonic_time(millisecond),
    Seconds = case Started of
                  undefined -> Q#q.sweep_seconds;
                  _ -> (Now - Started) / 1000
              end,
    take(slice(Q), Q#q{sweep = erlang:processes(), sweep_started = Now, sweep_seconds = Seconds});
sweep_slice(Q) ->
    take(slice(Q), Q).

%% A tenth of the processes, at most sweep_rate: a sweep lasts 10 ticks
%% or more, however few the processes, because what costs is taking the
%% list (erlang:processes/0 walks the whole process table, +P slots: about
%% 3 ms at the release's 2 million), not checking a slice.
slice(#q{sweep_rate = Rate}) ->
    min(Rate, erlang:system_info(process_count) div 10 + 1).

take(N, #q{sweep = Pids, swept = Swept} = Q) ->
    {Slice, Rest, Taken} = split(N, Pids, [], 0),
    {Slice, Q#q{sweep = Rest, swept = Swept + Taken}}.

%% lists:split/2 without its length check (the list may hold a million pids).
split(0, Rest, Acc, Taken) -> {Acc, Rest, Taken};
split(_, [], Acc, Taken) -> {Acc, [], Taken};
split(N, [P | Rest], Acc, Taken) -> split(N - 1, Rest, [P | Acc], Taken + 1).

top(Checked, Watched, Hot, Now) ->
    Sorted = lists:sublist(lists:reverse(lists:keysort(2, [{P, L} || {P, L} <- maps:to_list(Checked),
                                                                    L > 0])), ?TOP),
    HotSince = maps:from_list([{P, T} || {P, _, T} <- Hot]),
    [#{pid => list_to_binary(pid_to_list(P)), name => name(P), len => L,
       since_ms => maps:get(P, Watched, maps:get(P, HotSince, Now))}
     || {P, L} <- Sorted].

%% A readable name: the registered name, else the initial call (the one
%% proc_lib recorded, for gen_* processes), else the current function.
name(P) ->
    case erlang:process_info(P, [registered_name, dictionary, initial_call]) of
        [{registered_name, N}, _, _] when is_atom(N) ->
            atom_to_binary(N);
        [_, {dictionary, Dict}, {initial_call, Initial}] ->
            case lists:keyfind('$initial_call', 1, Dict) of
                {_, MFA} -> mfa(MFA);
                false -> mfa(Initial)
            end;
        _ ->
            <<"exited">>
    end.

mfa({M, F, A}) when is_atom(M), is_atom(F), is_integer(A) ->
    iolist_to_binary([atom_to_binary(M), ":", atom_to_binary(F), "/", integer_to_binary(A)]);
mfa(_) ->
    <<"unknown">>.

alarm([], _Top, Now, #q{alarm_since = Since} = Q) when Since =/= undefined ->
    logger:notice(#{what => message_queue_alarm_cleared, threshold => Q#q.threshold,
                    lasted_s => (Now - Since) div 1000}),
    Q#q{alarm_since = undefined};
alarm([], _Top, _Now, Q) ->
    Q;
alarm(Over, Top, Now, #q{alarm_since = undefined, alarms = N} = Q) ->
    logger:warning(alarm_event(message_queue_alarm, Over, Top, Q)),
    Q#q{alarm_since = Now, logged_at = Now, alarms = N + 1};
alarm(Over, Top, Now, #q{logged_at = At} = Q) when Now - At >= ?RELOG_MS ->
    logger:warning(alarm_event(message_queue_alarm_continues, Over, Top, Q)),
    Q#q{logged_at = Now};
alarm(_Over, _Top, _Now, Q) ->
    Q.

alarm_event(What, Over, Top, #q{threshold = T}) ->
    #{what => What, threshold => T, processes => length(Over),
      longest => [{Pid, Name, Len} || #{pid := Pid, name := Name, len := Len} <- lists:sublist(Top, 3)]}.
