%% @doc A boot that cannot complete stops with one readable line on standard
%% error, `throng: cannot start: STEP: CAUSE', the same text in a critical
%% `boot_failed' log event and in the application's start error: for a
%% database directory that cannot be created, a database that belongs to
%% another node name, a step that crashes instead of returning an error, and
%% a listener port that is taken.
-module(boot_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-compile([export_all, nowarn_export_all]).

all() ->
    [data_dir_is_a_file, database_dir_is_a_file, database_of_another_node,
     crashing_step_is_named, port_in_use].

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%% A fresh directory under priv_dir.
new_dir(Config) ->
    Dir = filename:join(?config(priv_dir, Config),
                        "boot-" ++ integer_to_list(erlang:unique_integer([positive]))),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Dir.

%% Boots with the given configuration overrides; returns the start error,
%% the line printed on standard error and the boot_failed log event.
failed_boot(Overrides) ->
    ok = application:set_env(throng, config, throng_ct:config(Overrides)),
    ok = logger:add_handler(boot_capture, ?MODULE, #{config => #{pid => self()}}),
    {Result, Printed} =
        try capture_stderr(fun() -> application:ensure_all_started(throng) end)
        after logger:remove_handler(boot_capture)
        end,
    {error, {throng, StartError}} = Result,
    Event = receive {boot_failed, E} -> E after 1000 -> none end,
    {StartError, Printed, Event}.

%% The step and message of the start error, also checked against what was
%% printed and logged.
boot_error(Overrides) ->
    {{{Step, Msg}, {throng_app, start, _}}, Printed, Event} = failed_boot(Overrides),
    ?assertEqual(iolist_to_binary(["throng: cannot start: ", atom_to_list(Step), ": ", Msg, "\n"]),
                 Printed),
    ?assertMatch(#{what := boot_failed, step := Step}, Event),
    ?assertEqual(Msg, lists:flatten(maps:get(reason, Event))),
    ct:pal("~ts", [Printed]),
    {Step, Msg}.

contains(Text, Part) ->
    string:find(Text, Part) =/= nomatch.

%%% Cases

%% data_dir is a regular file (the log file elsewhere): the storage step
%% says the database directory cannot be made and which file is in the way.
data_dir_is_a_file(Config) ->
    Dir = new_dir(Config),
    File = filename:join(Dir, "data"),
    ok = file:write_file(File, <<>>),
    {Step, Msg} = boot_error(#{data_dir => list_to_binary(File),
                               log_file => list_to_binary(filename:join(Dir, "throng.log"))}),
    ?assertEqual(storage, Step),
    ?assert(contains(Msg, "cannot create the database directory " ++ File ++ "/mnesia")),
    ?assert(contains(Msg, File ++ " is a file, not a directory")).

%% DATA_DIR/mnesia is a regular file.
database_dir_is_a_file(Config) ->
    Dir = new_dir(Config),
    ok = file:write_file(filename:join(Dir, "mnesia"), <<"not a directory">>),
    {Step, Msg} = boot_error(#{data_dir => list_to_binary(Dir)}),
    ?assertEqual(storage, Step),
    ?assert(contains(Msg, filename:join(Dir, "mnesia") ++ " is a file, not a directory")).

%% A database created under another node name: the message names both
%% names and what to do; Mnesia is left stopped.
database_of_another_node(Config) ->
    nonode@nohost = node(),
    Dir = new_dir(Config),
    ok = case application:load(mnesia) of {error, {already_loaded, mnesia}} -> ok; L -> L end,
    ok = application:set_env(mnesia, dir, filename:join(Dir, "mnesia")),
    ok = mnesia:create_schema([node()]),
    ok = mnesia:start(),
    stopped = mnesia:stop(),
    {ok, _} = throng_ct:start_distribution(boot_suite_other, shortnames),
    try
        {Step, Msg} = boot_error(#{data_dir => list_to_binary(Dir)}),
        ?assertEqual(storage, Step),
        ?assert(contains(Msg, "belongs to node nonode@nohost, but this node is "
                         ++ atom_to_list(node()))),
        ?assertEqual(false, lists:keyfind(mnesia, 1, application:which_applications()))
    after
        net_kernel:stop()
    end.

%% A step that raises instead of returning an error is still reported by
%% name (here logging: the log file's directory is a file).
crashing_step_is_named(Config) ->
    Dir = new_dir(Config),
    ok = file:write_file(filename:join(Dir, "log"), <<>>),
    {Step, _Msg} = boot_error(#{data_dir => list_to_binary(Dir),
                                log_file => list_to_binary(filename:join([Dir, "log", "t.log"]))}),
    ?assertEqual(logging, Step).

%% The listener's port is taken: the processes step names the child that
%% did not start and why.
port_in_use(Config) ->
    {ok, Taken} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}]),
    {ok, Port} = inet:port(Taken),
    try
        {Step, Msg} = boot_error(#{data_dir => list_to_binary(new_dir(Config)),
                                   listener => #{port => Port}}),
        ?assertEqual(processes, Step),
        ?assert(contains(Msg, "throng_listeners_sup > ")),
        ?assert(contains(Msg, "{listen_failed," ++ integer_to_list(Port) ++ ",eaddrinuse}"))
    after
        gen_tcp:close(Taken)
    end.

%%% Capturing what the boot prints and logs

%% Runs Fun with the registered standard_error replaced by a process that
%% keeps what is written; returns {Fun's result, the text}.
capture_stderr(Fun) ->
    Real = whereis(standard_error),
    Capture = spawn_link(fun() -> capture([]) end),
    true = unregister(standard_error),
    true = register(standard_error, Capture),
    Result = try Fun()
             after
                 unregister(standard_error),
                 register(standard_error, Real)
             end,
    Capture ! {get, self()},
    receive {captured, Text} -> {Result, Text} after 1000 -> ct:fail(no_capture) end.

capture(Acc) ->
    receive
        {io_request, From, ReplyAs, {put_chars, Enc, Chars}} ->
            From ! {io_reply, ReplyAs, ok},
            capture([Acc, unicode:characters_to_binary(Chars, Enc)]);
        {io_request, From, ReplyAs, {put_chars, Enc, M, F, A}} ->
            From ! {io_reply, ReplyAs, ok},
            capture([Acc, unicode:characters_to_binary(apply(M, F, A), Enc)]);
        {io_request, From, ReplyAs, _} ->
            From ! {io_reply, ReplyAs, {error, enotsup}},
            capture(Acc);
        {get, Pid} ->
            Pid ! {captured, iolist_to_binary(Acc)}
    end.

%% logger handler callback: forwards boot_failed events to the test.
log(#{msg := {report, #{what := boot_failed} = Report}}, #{config := #{pid := Pid}}) ->
    Pid ! {boot_failed, Report},
    ok;
log(_Event, _HandlerConfig) ->
    ok.
