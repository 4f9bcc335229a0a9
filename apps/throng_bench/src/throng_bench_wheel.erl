%% @doc Far wake-ups of many simulated users from one process per VM.
%%
%% An idle simulated user waits minutes for its next keepalive or the end of
%% its session. An Erlang timer (erlang:send_after/3) costs about 330 bytes
%% of VM memory while it is pending (measured with 5,000 hibernated socket
%% owners, OTP 25) — a tenth of what an idle user costs. Here a pending
%% wake-up is one list cell in this process's heap (~64 bytes), in buckets
%% of ?GRAIN ms kept in a gb_tree: a wake-up comes at most ?GRAIN ms late.
%% Waits shorter than ?NEAR ms (chat think times, step deadlines) still use
%% Erlang timers, which are exact; so does every wait when no wheel runs.
-module(throng_bench_wheel).

-export([start_link/0, wake_at/2, grain/0, bucket/1]).
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

%% @doc Send Msg to the calling process at monotonic time At (ms), or up
%% to grain() ms later when At is far away.
-spec wake_at(integer(), term()) -> ok.
wake_at(At, Msg) ->
    Wait = At - erlang:monotonic_time(millisecond),
    Wheel = case Wait < ?NEAR of
                true -> undefined;
                false -> whereis(?NAME)
            end,
    case Wheel of
        undefined -> _ = erlang:send_after(max(0, Wait), self(), Msg), ok;
        W -> W ! {at, bucket(At), self(), Msg}, ok
    end.

%% @doc How late a far wake-up may come, in ms.
-spec grain() -> pos_integer().
grain() -> ?GRAIN.

%% @doc The bucket of time At, ceil(At / ?GRAIN) (div truncates towards
%% zero): fired at bucket * ?GRAIN, never before At.
-spec bucket(integer()) -> integer().
bucket(At) when At >= 0 -> (At + ?GRAIN - 1) div ?GRAIN;
bucket(At) -> At div ?GRAIN.

%% The wheel ends with the process that started it (the job), whatever its
%% exit reason; a crash of the wheel takes the job down with it (link).
-spec init(pid()) -> ok.
init(Parent) ->
    claim_name(100),
    MRef = erlang:monitor(process, Parent),
    Parent ! {?NAME, self(), started},
    loop(MRef, gb_trees:empty()).

%% The wheel of a previous job may still be on its way out.
claim_name(Tries) ->
    try register(?NAME, self()) of
        true -> ok
    catch error:badarg when Tries > 0 ->
            timer:sleep(10),
            claim_name(Tries - 1)
    end.

%% Due buckets are fired before each receive, so that a steady stream of
%% new wake-ups cannot hold back the due ones.
loop(MRef, T0) ->
    Now = erlang:monotonic_time(millisecond),
    T = fire(Now, T0),
    receive
        {at, B, Pid, Msg} ->
            loop(MRef, case gb_trees:lookup(B, T) of
                           none -> gb_trees:insert(B, [{Pid, Msg}], T);
                           {value, L} -> gb_trees:update(B, [{Pid, Msg} | L], T)
                       end);
        {'DOWN', MRef, process, _, _} ->
            ok
    after timeout(Now, T) ->
            loop(MRef, T)
    end.

fire(Now, T) ->
    case gb_trees:is_empty(T) of
        true -> T;
        false ->
            case gb_trees:smallest(T) of
                {B, L} when B * ?GRAIN =< Now ->
                    _ = [Pid ! Msg || {Pid, Msg} <- L],
                    fire(Now, gb_trees:delete(B, T));
                _ -> T
            end
    end.

timeout(Now, T) ->
    case gb_trees:is_empty(T) of
        true -> infinity;
        false ->
            {B, _} = gb_trees:smallest(T),
            max(0, B * ?GRAIN - Now)
    end.
