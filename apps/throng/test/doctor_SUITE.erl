%% @doc `bin/throng doctor' on a real node and this machine's real limits
%% (throng_ctl's doctor command, as bin/throng runs it in the node): the
%% file-descriptor limit it reports is the node process's own, a target
%% beyond it fails (exit 1) naming that limit and its fix, and a small
%% target passes.
-module(doctor_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-compile([export_all, nowarn_export_all]).

all() ->
    [reports_this_process_fd_limits, target_beyond_the_fd_limit_fails,
     small_target_passes, bad_arguments].

init_per_testcase(_TC, Config) ->
    throng_ct:start(Config),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%% The hard limit of open files, read here from /proc (this node is the
%% server's node).
hard_limit() ->
    {ok, Text} = file:read_file("/proc/self/limits"),
    {match, [Hard]} = re:run(Text, "Max open files\\s+\\S+\\s+(\\S+)", [{capture, all_but_first, list}]),
    Hard.

text(Iodata) ->
    lists:flatten(io_lib:format("~s", [Iodata])).

reports_this_process_fd_limits(_) ->
    #{fd_hard := Hard, fd_soft := Soft} = throng_doctor:facts(node),
    ?assertEqual(hard_limit(), case Hard of unlimited -> "unlimited"; _ -> integer_to_list(Hard) end),
    ct:pal("open files: soft ~p, hard ~p", [Soft, Hard]),
    #{process_limit := P} = throng_doctor:facts(node),
    ?assertEqual(erlang:system_info(process_limit), P).

target_beyond_the_fd_limit_fails(_) ->
    case hard_limit() of
        "unlimited" ->
            {skip, "no file-descriptor limit on this machine"};
        Hard ->
            Target = list_to_integer(Hard) * 5,
            {Code, Out} = throng_ctl:run("doctor", ["--target", integer_to_list(Target)]),
            Text = text(Out),
            ct:pal("~s", [Text]),
            ?assertEqual(1, Code),
            [Line] = [L || L <- string:split(Text, "\n", all),
                           string:find(L, "file descriptors") =/= nomatch,
                           string:find(L, "ERROR") =/= nomatch],
            ?assertNotEqual(nomatch, string:find(Line, "hard " ++ Hard)),
            ?assertNotEqual(nomatch, string:find(Text, "run more nodes"))
    end.

small_target_passes(_) ->
    {Code, Out} = throng_ctl:run("doctor", ["--target", "100"]),
    ct:pal("~s", [text(Out)]),
    ?assertEqual(0, Code),
    ?assertNotEqual(nomatch, string:find(text(Out), "This node's capacity:")).

bad_arguments(_) ->
    ?assertMatch({2, _}, throng_ctl:run("doctor", ["--target", "lots"])),
    ?assertMatch({2, _}, throng_ctl:run("doctor", ["--nope"])).
