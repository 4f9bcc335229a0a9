%% @doc How close the server comes to the machine's floor: the most chat
%% messages per second a Throng node routes without loss and in time,
%% against the round trips per second of raw TCP echo with as many
%% connections and messages of the same size.
%%
%% The chat side is a search over the offered rate, one fresh baseline node
%% per step (a step that overloaded the server leaves queues behind): every
%% user sends one message every USERS/RATE seconds to an online contact.
%% A step holds when no user failed, nothing bounced, at most one message
%% in ?LOSS_DENOM was lost (the end-of-run race: a message sent in the
%% moment its contact goes unavailable goes to offline storage; the users
%% all log in within a moment and stop sending 2 s before their sessions
%% end (quiet_end), so only a delivery slower than that meets it; an
%% overload loses whole queues), the load
%% generator sent at least 90% of the offered rate and the delivery p99
%% stayed under the bound. The rate doubles from `from' until a step
%% fails (or halves until one holds), then `refine' bisections narrow the
%% bracket. The capacity is the delivered rate (the median of the
%% per-second deliveries once every user is in) of the highest step that
%% held. An offered rate far past the capacity measures the overload, not
%% the server: queues grow and messages are lost.
%%
%% The echo side: as many sockets against the built-in echo server, one
%% message in flight on each (throng_bench_echo).
-module(throng_bench_study_ratio).

-export([measure/4, next/2, best/1, chat_scenario/3]).
%% API used by tests: the search and the scenario of a step.
-ignore_xref([{next, 2}, {best, 1}, {chat_scenario, 3}]).

-type step() :: #{offered := number(), ok := boolean(), atom() => term()}.
-type env() :: #{start := fun((file:filename(), file:filename()) -> {ok, [integer()]} | {error, binary()}),
                 stop := fun((file:filename(), file:filename()) -> ok),
                 progress := boolean()}.
-export_type([env/0]).

%% Steps below this offered rate are not tried (a server that cannot route
%% this many has a problem the search would not explain); nor steps whose
%% users would send fewer than ?MIN_SENDS messages each in `duration'.
-define(FLOOR, 10).
-define(MIN_SENDS, 4).
%% At most one message in this many may be lost (see above).
-define(LOSS_DENOM, 10000).
%% The users send nothing in the last 2 s of their sessions.
-define(QUIET_MS, 2000).

%% @doc Measure the ratio into DIR (result.json and each step's run);
%% `done' or `failed' (no step held, or the echo test failed).
-spec measure(map(), map(), file:filename(), env()) -> done | failed.
measure(Design, R = #{users := Users, size := Size}, Dir, Env) ->
    File = filename:join(Dir, "result.json"),
    case previous(File) of
        done -> done;
        redo ->
            io:format(standard_error, "~n== study ~ts: routed messages vs TCP echo, ~b connections, "
                      "~b-byte messages~n", [maps:get(name, Design), Users, Size]),
            %% what an earlier measurement left (its steps, or the old
            %% method's chat/ and echo/) is replaced
            _ = file:del_dir_r(Dir),
            ok = filelib:ensure_dir(filename:join(Dir, "x")),
            Steps = search(Design, R, Dir, Env, []),
            Echo = echo(Users, Size, Dir),
            Best = best(Steps),
            Result = #{users => Users, size => Size, method => <<"capacity">>,
                       p99_bound_ms => maps:get(p99_ms, R),
                       steps => Steps, chat => Best, echo => Echo,
                       ratio => case {Best, Echo} of
                                    {#{msgs_per_s := M}, #{round_trips_per_s := E}} when E > 0 -> M / E;
                                    _ -> null
                                end},
            ok = file:write_file(File, throng_bench_out:encode_json(Result)),
            case Result of
                #{ratio := null} -> failed;
                _ -> done
            end
    end.

%% A result of this method is kept; one of the earlier method (every user
%% chatting every `think', whatever the server could take) is measured again.
previous(File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            case catch jiffy:decode(Bin, [return_maps]) of
                #{<<"method">> := <<"capacity">>} -> done;
                _ -> redo
            end;
        {error, _} -> redo
    end.

search(Design, R, Dir, Env, Steps) ->
    case next(Steps, R) of
        done -> Steps;
        {step, Rate} ->
            Step = step(Design, R, Rate, filename:join(Dir, "rate-" ++ integer_to_list(Rate)), Env),
            io:format(standard_error, "== ratio: ~ts~n", [describe(Step)]),
            search(Design, R, Dir, Env, Steps ++ [Step])
    end.

describe(#{offered := O, ok := true, msgs_per_s := M, delivery_p99_ms := P}) ->
    io_lib:format("~b messages/s offered: held (~b/s delivered, p99 ~ts)",
                  [round(O), round(M), throng_bench_units:format_ms(P)]);
describe(#{offered := O, why := Why}) ->
    io_lib:format("~b messages/s offered: not held (~ts)", [round(O), Why]).

%% @doc The next offered rate to try after the steps made (in order), or
%% done. Options: from (the first rate), refine (bisections once a held and
%% a failed step bracket the capacity), max_steps, users (a user sends at
%% most one message per millisecond).
-spec next([step()], map()) -> {step, pos_integer()} | done.
next(Steps, #{max_steps := Max}) when length(Steps) >= Max -> done;
next([], #{from := From}) -> {step, From};
next(Steps, O = #{users := Users}) ->
    Held = [Of || #{offered := Of, ok := true} <- Steps],
    Failed = [Of || #{offered := Of, ok := false} <- Steps],
    case {Held, Failed} of
        {_, []} ->
            Up = round(2 * lists:max(Held)),
            case Up =< Users * 1000 of
                true -> {step, Up};
                false -> done
            end;
        {[], _} ->
            Down = round(lists:min(Failed) / 2),
            case Down >= floor_rate(O) of
                true -> {step, Down};
                false -> done
            end;
        _ ->
            Hi = lists:min(Failed),
            case [H || H <- Held, H < Hi] of
                [] -> done;
                Below ->
                    Lo = lists:max(Below),
                    Mid = round((Lo + Hi) / 2),
                    case refinements(Steps) >= maps:get(refine, O)
                        orelse Mid =< Lo orelse Mid >= Hi of
                        true -> done;
                        false -> {step, Mid}
                    end
            end
    end.

%% The lowest rate worth a step: every user sends ?MIN_SENDS messages or
%% more in the step's chat time.
floor_rate(#{users := Users, duration_ms := Dur}) ->
    max(?FLOOR, Users * 1000 * ?MIN_SENDS / Dur);
floor_rate(_) -> ?FLOOR.

%% Steps made after the first moment a held and a failed step existed.
refinements(Steps) ->
    refinements(Steps, false, false, 0).

refinements([], _, _, N) -> N;
refinements([#{ok := Ok} | Rest], H, F, N) ->
    case H andalso F of
        true -> refinements(Rest, H, F, N + 1);
        false -> refinements(Rest, H orelse Ok, F orelse not Ok, N)
    end.

%% @doc The held step of the highest offered rate, or null.
-spec best([step()]) -> step() | null.
best(Steps) ->
    case lists:sort(fun(#{offered := A}, #{offered := B}) -> A >= B end,
                    [S || S = #{ok := true} <- Steps]) of
        [B | _] -> B;
        [] -> null
    end.

%%% One step

step(Design, R = #{users := Users, p99_ms := Bound}, Rate, Dir, #{start := Start, stop := Stop} = Env) ->
    Think = max(1, round(Users * 1000 / Rate)),
    Offered = Users * 1000 / Think,
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Scenario = filename:join(Dir, "chat.yml"),
    ok = file:write_file(Scenario, chat_scenario(Design, R, Think)),
    Work = filename:join(["/tmp", "throng-study-" ++ os:getpid(), "ratio"]),
    io:format(standard_error, "~n== ratio: ~b users, one message every ~ts each: ~b messages/s offered~n",
              [Users, throng_bench_units:format_ms(Think), round(Offered)]),
    Measured =
        case Start(Work, Dir) of
            {error, Why} -> #{error => Why};
            {ok, Pids} ->
                try
                    {_, Summary} = throng_bench_xmpp:run(#{scenario => Scenario, server_pid => Pids,
                                                           out => Dir, print_summary => false,
                                                           progress => maps:get(progress, Env, true)}),
                    figures(Summary, throng_bench_study:read_csv(filename:join(Dir, "timeseries.csv")),
                            Users, Think)
                after
                    Stop(Work, Dir)
                end
        end,
    _ = file:del_dir_r(Work),
    judge(Measured#{offered => Offered, think_ms => Think}, Bound).

%% The figures of a step: rates are medians over the seconds every user
%% was in and sending (from 5 s + one think time after the last login, when
%% the last user has sent its first message, to the quiet end; the last
%% second left out).
figures(Summary, Rows, Users, Think) ->
    Full = [R || R <- Rows, throng_bench_study:num(sessions, R) >= Users],
    Steady = case Full of
                 [] -> [];
                 [First | _] ->
                     From = throng_bench_study:num(t, First) + 5 + Think / 1000,
                     To = throng_bench_study:num(t, lists:last(Full)) - ?QUIET_MS / 1000,
                     case [R || R <- Full, throng_bench_study:num(t, R) >= From,
                                throng_bench_study:num(t, R) =< To] of
                         [] -> [];
                         Sending -> lists:droplast(Sending)
                     end
             end,
    Med = fun(K) -> median(lists:sort([throng_bench_study:num(K, R) || R <- Steady])) end,
    Msgs = maps:get(messages, Summary, #{}),
    case length(Steady) >= 3 of
        false -> #{error => <<"the users were never all in and sending for 3 s">>};
        true ->
            #{msgs_per_s => Med(msgs_received_s), sent_per_s => Med(msgs_sent_s),
               server_cpu_pct => Med(server_cpu_pct), seconds => length(Steady),
               sent => maps:get(sent, Msgs, 0),
               lost => maps:get(lost, Msgs, 0), bounced => maps:get(bounced, Msgs, 0),
               errors => maps:get(total, maps:get(errors, Summary, #{}), 0),
               delivery_p99_ms => case maps:get(latency_ms, Summary, #{}) of
                                      #{delivery := #{p99 := P}} -> P;
                                      _ -> null
                                  end}
    end.

judge(S = #{error := Why}, _Bound) -> S#{ok => false, why => Why};
judge(S = #{offered := O, sent_per_s := Sent, sent := Total, lost := Lost, bounced := Bounced,
            errors := Errors, delivery_p99_ms := P99}, Bound) ->
    Why = [Txt || {true, Txt} <- [{Errors > 0, io_lib:format("~b errors", [Errors])},
                                  {Lost * ?LOSS_DENOM > Total,
                                   io_lib:format("~b of ~b messages lost", [Lost, Total])},
                                  {Bounced > 0, io_lib:format("~b messages bounced", [Bounced])},
                                  {Sent < 0.9 * O, io_lib:format("the load generator sent only ~b/s",
                                                                 [round(Sent)])},
                                  {not is_number(P99) orelse P99 > Bound,
                                   io_lib:format("delivery p99 ~ts above ~ts",
                                                 [fmt_ms(P99), throng_bench_units:format_ms(Bound)])}]],
    case Why of
        [] -> S#{ok => true};
        _ -> S#{ok => false, why => iolist_to_binary(lists:join("; ", Why))}
    end.

fmt_ms(null) -> "none";
fmt_ms(Ms) -> throng_bench_units:format_ms(Ms).

%% @doc The scenario of a step: every user logs in (1,000 a second), waits
%% five seconds and a random part of one THINK (so that the users' sends
%% spread evenly instead of coming in bursts), then sends one SIZE-byte
%% message every THINK ms to an online contact for `duration'.
-spec chat_scenario(map(), map(), pos_integer()) -> iodata().
chat_scenario(#{port := Port, contacts := Contacts}, #{users := Users, size := Size, duration_ms := Dur},
              Think) ->
    io_lib:format(
      "# Written by throng-bench study: one step of the search for the\n"
      "# server's routing capacity (one message every ~b ms per user).\n"
      "name: study-ratio-chat\n"
      "server: {host: 127.0.0.1, port: ~b, domain: localhost}\n"
      "users: {name: \"user%N\", password: \"password\", contact_count: ~b}\n"
      "arrival:\n  - rate: 1000\n    max_users: ~b\n    distribution: constant\n"
      "length: ~bms\nkeepalive: 60s\n"
      "sessions:\n  - name: active\n    probability: 1\n    presence: true\n    roster: false\n"
      "    chat:\n      think: {constant: ~bms}\n      first_after: {uniform: [5000ms, ~bms]}\n"
      "      size: ~b\n      quiet_end: ~bms\n",
      [Think, Port, Contacts, Users, Dur + (Users div 1000 + 1) * 1000 + 5000 + Think + ?QUIET_MS,
       Think, 5000 + Think, Size, ?QUIET_MS]).

%% The echo side: as many sockets, one message of the same size in flight
%% on each, against the built-in echo server; about 200 round trips each.
echo(Users, Size, Dir) ->
    {_, #{rows := Rows}} = throng_bench_echo:run(echo, #{min_size => Size, max_size => Size,
                                                        total => Users * 200 * Size,
                                                        parallel => [Users],
                                                        max_count => Users * 200,
                                                        timeout => 30000, nodelay => true,
                                                        out => filename:join(Dir, "echo")}),
    case Rows of
        [#{msgs_per_s := M} | _] -> #{round_trips_per_s => M};
        [] -> #{error => <<"the echo test failed">>}
    end.

median([]) -> 0;
median(L) -> lists:nth((length(L) + 1) div 2, L).

