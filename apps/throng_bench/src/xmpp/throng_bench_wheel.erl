%% @doc Far wake-ups of many simulated users from one process per VM.
%%
%% An idle simulated user waits minutes for its next keepalive or the end of
%% its session. An Erlang timer (erlang:send_after/3) costs about 330 bytes
%% of VM memory while it is pending (measured with 5,000 hibernated socket
%% owners, OTP 25) — a tenth of what an idle user costs. Here a pending
%% wake-up is a list cell in a bucket of ?GRAIN ms, kept in this process's
%% dictionary (~40 bytes; updating it leaves almost no garbage, unlike a
%% tree). When a bucket's time comes, each of its wake-ups becomes an Erlang
%% timer for the rest of its wait (under ?GRAIN ms), so a wake-up comes at
%% its exact time, as with erlang:send_after/3, and wake-ups are not
%% bunched together. Waits shorter than ?NEAR ms use Erlang timers directly;
%% so does every wait when no wheel runs.
-module(throng_bench_wheel).

-export([start_link/0, wake_at/1, grain/0, bucket/1]).
%% API used by tests: the bucket rounding.
-ignore_xref([{grain, 0}, {bucket, 1}]).
-export([init/1]).

-define(NAME, throng_bench_wheel).
-define(GRAIN, 100).
-define(NEAR, 2000).

%% @doc Start the VM's wheel (registered), linked to the caller.
-spec start_link() -> pid().
start_link() ->
    Self = self(),
    Pid = spawn_link(?MODULE, init, [Self]),
    receive {?NAME, Pid, started} -> Pid end.

%% @doc Send {wake, At} to the calling process at monotonic time At (ms).
%% (The message is fixed so that a held wake-up is only {Pid, At}.)
-spec wake_at(integer()) -> ok.
wake_at(At) ->
    Wait = At - erlang:monotonic_time(millisecond),
    Wheel = case Wait < ?NEAR of
                true -> undefined;
                false -> whereis(?NAME)
            end,
    case Wheel of
        undefined -> _ = erlang:send_after(max(0, Wait), self(), {wake, At}), ok;
        W -> W ! {at, At, self()}, ok
    end.

%% @doc The length of a bucket, in ms.
-spec grain() -> pos_integer().
grain() -> ?GRAIN.

%% @doc The bucket of time At, floor(At / ?GRAIN) (div truncates towards
%% zero): it is taken out at bucket * ?GRAIN, never after At.
-spec bucket(integer()) -> integer().
bucket(At) when At >= 0 -> At div ?GRAIN;
bucket(At) -> (At - ?GRAIN + 1) div ?GRAIN.

%% The wheel ends with the process that started it (the job), whatever its
%% exit reason; a crash of the wheel takes the job down with it (link).
-spec init(pid()) -> ok.
init(Parent) ->
    claim_name(100),
    MRef = erlang:monitor(process, Parent),
    Parent ! {?NAME, self(), started},
    loop(MRef, bucket(erlang:monotonic_time(millisecond)), 0).

%% The wheel of a previous job may still be on its way out.
claim_name(Tries) ->
    try register(?NAME, self()) of
        true -> ok
    catch error:badarg when Tries > 0 ->
            timer:sleep(10),
            claim_name(Tries - 1)
    end.

%% Cursor: the next bucket to take out; Count: wake-ups held. Due buckets
%% are taken out before each receive, so that a steady stream of new
%% wake-ups cannot hold back the due ones.
loop(MRef, Cursor0, Count0) ->
    Now = erlang:monotonic_time(millisecond),
    {Cursor, Count} = turn(Now, Cursor0, Count0),
    receive
        {at, At, Pid} ->
            case bucket(At) of
                B when B < Cursor ->
                    %% Its bucket was already taken out: a timer now.
                    timer_for(At, Pid, Now),
                    loop(MRef, Cursor, Count);
                B ->
                    put(B, [{Pid, At} | case get(B) of undefined -> []; L -> L end]),
                    loop(MRef, Cursor, Count + 1)
            end;
        {'DOWN', MRef, process, _, _} ->
            ok
    after timeout(Now, Cursor, Count) ->
            loop(MRef, Cursor, Count)
    end.

turn(Now, _Cursor, 0) ->
    %% Nothing held: no bucket to walk through.
    {bucket(Now) + 1, 0};
turn(Now, Cursor, Count) when Cursor * ?GRAIN =< Now ->
    Due = case erase(Cursor) of undefined -> []; L -> L end,
    _ = [timer_for(At, Pid, Now) || {Pid, At} <- Due],
    turn(Now, Cursor + 1, Count - length(Due));
turn(_Now, Cursor, Count) ->
    {Cursor, Count}.

timer_for(At, Pid, Now) when At =< Now -> Pid ! {wake, At}, ok;
timer_for(At, Pid, Now) -> _ = erlang:send_after(At - Now, Pid, {wake, At}), ok.

timeout(_Now, _Cursor, 0) -> infinity;
timeout(Now, Cursor, _Count) -> max(0, Cursor * ?GRAIN - Now).
