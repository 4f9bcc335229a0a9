%% @doc throng_hooks: handlers run in sequence order (stable for equal
%% numbers), pass, change and stop the accumulator, a crashing handler or a
%% bad return is logged and skipped, unknown events are refused, handlers are
%% per host, uninstall/1 and notify/3.
%%
%% The handlers are functions of this module; each appends its name to the
%% accumulator (a list) so a test can see which ran, and in what order. Every
%% test uses a host of its own and removes its handlers.
-module(throng_hooks_tests).

-include_lib("eunit/include/eunit.hrl").

-export([a/2, b/2, c/2, d/2, pass/2, halt/2, halt_with/2, crash/2, bad/2, tell/2, who/2]).
-export([log/2]).

-define(E, stanza_to_session).

%%% Handlers

a(Acc, _) -> {ok, Acc ++ [a]}.
b(Acc, _) -> {ok, Acc ++ [b]}.
c(Acc, _) -> {ok, Acc ++ [c]}.
d(Acc, _) -> {ok, Acc ++ [d]}.
pass(_Acc, _) -> ok.
halt(_Acc, _) -> stop.
halt_with(Acc, _) -> {stop, Acc ++ [halt_with]}.
crash(_Acc, _) -> error(handler_bug).
bad(_Acc, _) -> {weird, return}.
tell(Acc, #{pid := Pid}) -> Pid ! {ran, Acc}, ok.
who(_Acc, _) -> {ok, self()}.

%% A logger handler that forwards every event to the test process.
log(#{msg := {report, Report}}, #{config := #{pid := Pid}}) -> Pid ! {logged, Report};
log(_Event, _Config) -> ok.

%%% Fixture

host() ->
    <<"h", (integer_to_binary(erlang:unique_integer([positive])))/binary, ".test">>.

%% Installs handlers {Event, Seq, Fun} (all of this module) on a new host.
with(Handlers) ->
    Host = host(),
    ok = throng_hooks:install(Host, [{E, S, ?MODULE, F} || {E, S, F} <- Handlers]),
    Host.

run(Host) ->
    throng_hooks:run(?E, Host, [], #{}).

order(Host) ->
    [F || {_Seq, ?MODULE, F} <- throng_hooks:handlers(?E, Host)].

%%% Tests

%% Handlers run in ascending sequence number, whatever order they are given in.
sequence_order_test() ->
    H = with([{?E, 30, c}, {?E, 10, a}, {?E, 20, b}]),
    ?assertEqual({ok, [a, b, c]}, run(H)),
    ?assertEqual([a, b, c], order(H)),
    throng_hooks:uninstall(H).

%% Handlers with equal sequence numbers keep their installation order.
equal_sequence_is_stable_test() ->
    H = with([{?E, 50, d}, {?E, 10, b}, {?E, 50, a}, {?E, 10, c}]),
    ?assertEqual({ok, [b, c, d, a]}, run(H)),
    throng_hooks:uninstall(H).

%% `ok' passes the accumulator on unchanged, and the next handlers still run.
ok_passes_unchanged_test() ->
    H = with([{?E, 1, a}, {?E, 2, pass}, {?E, 3, b}]),
    ?assertEqual({ok, [a, b]}, run(H)),
    throng_hooks:uninstall(H).

%% `{ok, Acc}' changes the accumulator the next handler gets and run/4 returns.
ok_acc_changes_test() ->
    H = with([{?E, 1, a}]),
    ?assertEqual({ok, [start, a]}, throng_hooks:run(?E, H, [start], #{})),
    throng_hooks:uninstall(H).

%% `stop': later handlers do not run; run/4 says stop with the accumulator so far.
stop_ends_the_run_test() ->
    H = with([{?E, 1, a}, {?E, 2, halt}, {?E, 3, b}]),
    ?assertEqual({stop, [a]}, run(H)),
    throng_hooks:uninstall(H).

%% `{stop, Acc}': later handlers do not run; run/4 returns the new accumulator.
stop_with_acc_test() ->
    H = with([{?E, 1, a}, {?E, 2, halt_with}, {?E, 3, b}]),
    ?assertEqual({stop, [a, halt_with]}, run(H)),
    throng_hooks:uninstall(H).

%% A crashing handler is logged and skipped; the handlers after it run on the
%% accumulator it was given.
crash_is_logged_and_skipped_test() ->
    H = with([{?E, 1, a}, {?E, 2, crash}, {?E, 3, b}]),
    Reports = capture_logs(fun() -> ?assertEqual({ok, [a, b]}, run(H)) end),
    ?assertMatch([#{what := hook_crashed, event := ?E, module := ?MODULE, function := crash,
                    class := error, reason := handler_bug}], Reports),
    throng_hooks:uninstall(H).

%% A handler that returns something else than the four results is logged and
%% skipped like a crash.
bad_return_is_logged_and_skipped_test() ->
    H = with([{?E, 1, bad}, {?E, 2, a}]),
    Reports = capture_logs(fun() -> ?assertEqual({ok, [a]}, run(H)) end),
    ?assertMatch([#{what := hook_bad_return, function := bad, returned := {weird, return}}],
                 Reports),
    throng_hooks:uninstall(H).

%% With no handler the accumulator comes back unchanged.
no_handlers_test() ->
    ?assertEqual({ok, acc}, throng_hooks:run(?E, host(), acc, #{})),
    ?assertEqual([], throng_hooks:handlers(?E, host())).

%% install/2 refuses an event that events/0 does not list, and installs
%% nothing of that list.
unknown_event_refused_test() ->
    H = host(),
    ?assertError({unknown_hook, no_such_event, ?MODULE},
                 throng_hooks:install(H, [{?E, 1, ?MODULE, a},
                                          {no_such_event, 1, ?MODULE, b}])),
    ?assertEqual([], order(H)).

%% A refused install leaves the handlers the host had before in place.
refused_install_keeps_previous_test() ->
    H = with([{?E, 1, a}]),
    ?assertError({unknown_hook, no_such_event, ?MODULE},
                 throng_hooks:install(H, [{?E, 1, ?MODULE, b},
                                          {no_such_event, 1, ?MODULE, c}])),
    ?assertEqual({ok, [a]}, run(H)),
    throng_hooks:uninstall(H).

%% install/2 replaces every handler of the host, of every event.
install_replaces_test() ->
    H = with([{?E, 1, a}, {session_opened, 1, tell}]),
    ok = throng_hooks:install(H, [{?E, 1, ?MODULE, b}]),
    ?assertEqual({ok, [b]}, run(H)),
    ?assertEqual([], throng_hooks:handlers(session_opened, H)),
    throng_hooks:uninstall(H).

%% uninstall/1 removes every handler of the host, of every event.
uninstall_removes_all_test() ->
    H = with([{?E, 1, a}, {session_opened, 1, tell}]),
    ok = throng_hooks:uninstall(H),
    ?assertEqual({ok, []}, run(H)),
    ?assertEqual([], throng_hooks:handlers(session_opened, H)),
    ?assertEqual(ok, throng_hooks:uninstall(H)).

%% Handlers belong to a host: another host's run does not see them, and
%% uninstalling one host leaves the other's in place.
per_host_test() ->
    H1 = with([{?E, 1, a}]),
    H2 = with([{?E, 1, b}]),
    ?assertEqual({ok, [a]}, run(H1)),
    ?assertEqual({ok, [b]}, run(H2)),
    ok = throng_hooks:uninstall(H1),
    ?assertEqual({ok, []}, run(H1)),
    ?assertEqual({ok, [b]}, run(H2)),
    throng_hooks:uninstall(H2).

%% Handlers are per event: running one event does not run another's handlers.
per_event_test() ->
    H = with([{session_opened, 1, a}]),
    ?assertEqual({ok, []}, run(H)),
    ?assertEqual({ok, [a]}, throng_hooks:run(session_opened, H, [], #{})),
    throng_hooks:uninstall(H).

%% notify/3 runs the handlers with the accumulator `ok' and the arguments,
%% and returns ok even when a handler stops the event.
notify_test() ->
    H = with([{session_closed, 1, tell}, {session_closed, 2, halt},
              {session_closed, 3, tell}]),
    ?assertEqual(ok, throng_hooks:notify(session_closed, H, #{pid => self()})),
    receive {ran, Acc} -> ?assertEqual(ok, Acc) after 1000 -> error(not_run) end,
    receive {ran, _} -> error(ran_after_stop) after 50 -> ok end,
    throng_hooks:uninstall(H).

%% Handlers run in the calling process (no server process in between).
runs_in_caller_test() ->
    H = with([{?E, 1, who}]),
    ?assertEqual({ok, self()}, run(H)),
    throng_hooks:uninstall(H).

%% Every event named in the type is listed by events/0 with a description.
events_listed_test() ->
    Events = [E || {E, Acc, Args} <- throng_hooks:events(), is_list(Acc), is_list(Args)],
    ?assertEqual(length(throng_hooks:events()), length(lists:usort(Events))),
    ?assertEqual(lists:sort([stanza_from_session, stanza_to_session, presence_in,
                             session_opened, session_closed, initial_presence,
                             user_registered, user_removed, roster_item_changed,
                             roster_version, offline_message, stanza_to_user,
                             message_delivered, disco_info, disco_items, login_keys,
                             login_values]),
                 lists:sort(Events)).

%%% Helpers

%% Runs Fun with a logger handler that collects the reports logged meanwhile.
capture_logs(Fun) ->
    Id = list_to_atom("hooks_test_" ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = logger:add_handler(Id, ?MODULE, #{config => #{pid => self()}}),
    try
        Fun(),
        collect()
    after
        logger:remove_handler(Id)
    end.

collect() ->
    receive {logged, Report} -> [Report | collect()]
    after 100 -> []
    end.
