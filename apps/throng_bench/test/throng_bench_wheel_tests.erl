%% Far wake-ups come from the wheel, never before their time, each to the
%% process that asked; near ones use Erlang timers; the wheel ends with the
%% process that started it.
-module(throng_bench_wheel_tests).

-include_lib("eunit/include/eunit.hrl").

now_ms() -> erlang:monotonic_time(millisecond).

wheel_test_() ->
    {timeout, 30, fun wheel/0}.

wheel() ->
    Self = self(),
    Starter = spawn(fun() -> _ = throng_bench_wheel:start_link(), Self ! started,
                             receive stop -> ok end end),
    receive started -> ok end,
    Wheel = whereis(throng_bench_wheel),
    ?assert(is_pid(Wheel)),
    T0 = now_ms(),
    %% Two far wake-ups (out of order) from two processes, one near one.
    Far = [T0 + 2600, T0 + 2100],
    Others = [spawn(fun() -> ok = throng_bench_wheel:wake_at(At),
                             receive {wake, At} -> Self ! {woke, At, now_ms()} end
                    end) || At <- Far],
    Near = T0 + 50,
    ok = throng_bench_wheel:wake_at(Near),
    receive {wake, Near} -> ?assert(now_ms() >= Near) after 5000 -> error(near_not_woken) end,
    Woken = [receive {woke, At, When} -> {At, When} after 10000 -> error({not_woken, At}) end
             || At <- lists:sort(Far)],
    [?assert(When >= At) || {At, When} <- Woken],
    ?assertEqual(2, length(Others)),
    %% Only far wake-ups are kept by the wheel; it ends with its starter.
    MRef = monitor(process, Wheel),
    Starter ! stop,
    receive {'DOWN', MRef, process, Wheel, _} -> ok after 5000 -> error(wheel_still_running) end,
    %% Without a wheel, far wake-ups fall back to Erlang timers.
    Later = now_ms() + 2000,
    ok = throng_bench_wheel:wake_at(Later),
    receive {wake, Later} -> ok after 5000 -> error(fallback_not_woken) end.

bucket_rounds_down_test() ->
    %% A bucket is taken out at its start, before any of its wake-ups is
    %% due, for negative monotonic times too.
    G = throng_bench_wheel:grain(),
    [?assert(B * G =< At andalso At < (B + 1) * G)
     || At <- [-250, -200, -199, -1, 0, 1, 99, 100, 101, 12345],
        B <- [throng_bench_wheel:bucket(At)]].
