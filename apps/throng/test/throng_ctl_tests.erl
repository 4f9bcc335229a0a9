%% @doc Commands that other applications register with throng_ctl at run
%% time: listed, run, refused arguments, redraw, removal.
-module(throng_ctl_tests).

-include_lib("eunit/include/eunit.hrl").

-export([echo/1]).

%% The handler of the test command: echoes one argument, refuses others.
-spec echo([string()]) -> {0 | 1, iodata()} | usage.
echo([Word]) -> {0, ["echo ", Word, "\n"]};
echo(["--fail", _]) -> {1, "failed\n"};
echo(_) -> usage.

command() ->
    #{name => "echo-test", usage => "WORD", help => "Echo a word", run => {?MODULE, echo}}.

registered_commands_test_() ->
    {foreach, fun() -> ok end, fun(_) -> throng_ctl:unregister_command("echo-test") end,
     [{"a registered command is listed after the built-in ones and runs",
       fun listed_and_run/0},
      {"wrong arguments give the usage line; the handler's exit code passes through",
       fun usage_and_codes/0},
      {"redraw only when registered so and given no arguments", fun redraw/0},
      {"a built-in command cannot be replaced; re-registering replaces", fun builtin/0},
      {"an unregistered command is unknown again", fun unregistered/0}]}.

listed_and_run() ->
    Builtin = throng_ctl:commands(),
    ?assertNot(lists:keymember("echo-test", 1, Builtin)),
    ok = throng_ctl:register_command(command()),
    ?assertEqual(Builtin ++ [{"echo-test", "WORD", "Echo a word"}], throng_ctl:commands()),
    ?assertEqual("echo hello\n", flat(throng_ctl:run("echo-test", ["hello"]), 0)).

usage_and_codes() ->
    ok = throng_ctl:register_command(command()),
    ?assertEqual("Usage: throng echo-test WORD (got 0 arguments)\n",
                 flat(throng_ctl:run("echo-test", []), 2)),
    ?assertEqual("failed\n", flat(throng_ctl:run("echo-test", ["--fail", "x"]), 1)).

redraw() ->
    ok = throng_ctl:register_command(command()),
    ?assertNot(throng_ctl:redraws("echo-test", [])),
    ok = throng_ctl:register_command((command())#{redraw => true}),
    ?assert(throng_ctl:redraws("echo-test", [])),
    ?assertNot(throng_ctl:redraws("echo-test", ["x"])),
    ?assertNot(throng_ctl:redraws("status", [])),
    ?assertEqual(1, length([C || {"echo-test", _, _} = C <- throng_ctl:commands()])).

builtin() ->
    ?assertEqual({error, builtin}, throng_ctl:register_command((command())#{name => "status"})),
    ok = throng_ctl:register_command(command()),
    ok = throng_ctl:register_command((command())#{help => "Echo, again"}),
    ?assertEqual([{"echo-test", "WORD", "Echo, again"}],
                 [C || {"echo-test", _, _} = C <- throng_ctl:commands()]).

unregistered() ->
    ok = throng_ctl:register_command(command()),
    ok = throng_ctl:unregister_command("echo-test"),
    ?assertEqual("Unknown command: echo-test\n", flat(throng_ctl:run("echo-test", ["x"]), 2)),
    ok = throng_ctl:unregister_command("echo-test").

flat({Code, Text}, Code) ->
    lists:flatten(io_lib:format("~s", [Text])).
