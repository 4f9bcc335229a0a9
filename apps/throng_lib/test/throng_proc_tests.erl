%% @doc The /proc parsers against files captured on Linux 6 (fixtures/).
-module(throng_proc_tests).

-include_lib("eunit/include/eunit.hrl").

fixture(Name) ->
    {ok, Bin} = file:read_file(filename:join([filename:dirname(?FILE), "fixtures", Name])),
    Bin.

stat_test() ->
    ?assertEqual(#{utime => 17, stime => 4, threads => 20, vsize => 2152935424,
                   rss_pages => 8718},
                 throng_proc:stat(fixture("self_stat.txt"))).

%% The command name may hold spaces and parentheses: fields count from the last ") ".
stat_odd_command_name_test() ->
    ?assertEqual(throng_proc:stat(fixture("self_stat.txt")),
                 throng_proc:stat(fixture("self_stat_odd_comm.txt"))).

host_stat_test() ->
    H = throng_proc:host_stat(fixture("proc_stat.txt")),
    ?assertEqual(#{user => 96698, nice => 0, system => 24005, idle => 409571, iowait => 3710,
                   irq => 0, softirq => 1596, steal => 170}, maps:get(cpu, H)),
    ?assertEqual(16029264, maps:get(ctxt, H)),
    ?assertEqual(1, maps:get(procs_running, H)),
    ?assertEqual(0, maps:get(procs_blocked, H)).

%% An old kernel's "cpu" line has fewer columns.
host_stat_short_cpu_line_test() ->
    H = throng_proc:host_stat(<<"cpu  10 20 30 40\nctxt 5\n">>),
    ?assertEqual(#{user => 10, nice => 20, system => 30, idle => 40}, maps:get(cpu, H)).

status_test() ->
    St = throng_proc:status(fixture("self_status.txt")),
    ?assertEqual(35232 * 1024, maps:get(<<"VmRSS">>, St)),
    ?assertEqual(20, maps:get(<<"Threads">>, St)),
    ?assertEqual(7, maps:get(<<"voluntary_ctxt_switches">>, St)),
    ?assertEqual(14, maps:get(<<"nonvoluntary_ctxt_switches">>, St)),
    ?assertNot(maps:is_key(<<"Name">>, St)).

%% The targeted reader finds the same numbers as the full parser.
status_keys_test() ->
    Bin = fixture("self_status.txt"),
    Keys = [<<"VmRSS">>, <<"voluntary_ctxt_switches">>, <<"nonvoluntary_ctxt_switches">>,
            <<"Tgid">>],
    ?assertEqual(maps:with(Keys, throng_proc:status(Bin)),
                 throng_proc:status(Bin, Keys)),
    %% "voluntary_ctxt_switches" must not match inside "nonvoluntary_ctxt_switches".
    ?assertEqual(#{<<"voluntary_ctxt_switches">> => 7},
                 throng_proc:status(Bin, [<<"voluntary_ctxt_switches">>])),
    ?assertEqual(#{}, throng_proc:status(Bin, [<<"NoSuchKey">>])).

limits_test() ->
    ?assertEqual(#{max_open_files => {32768, 32768}},
                 throng_proc:limits(fixture("self_limits.txt"))),
    ?assertEqual(#{max_open_files => {infinity, infinity}},
                 throng_proc:limits(<<"Max open files            unlimited            "
                                            "unlimited            files     \n">>)).

netstat_test() ->
    N = throng_proc:netstat(fixture("net_netstat.txt")),
    Ext = maps:get(<<"TcpExt">>, N),
    ?assertEqual(302, maps:get(<<"ListenOverflows">>, Ext)),
    ?assertEqual(302, maps:get(<<"ListenDrops">>, Ext)),
    ?assertEqual(130, maps:get(<<"PruneCalled">>, Ext)),
    ?assertEqual(1074424019, maps:get(<<"InOctets">>, maps:get(<<"IpExt">>, N))),
    ?assert(maps:is_key(<<"MPTcpExt">>, N)).

netstat_group_test() ->
    Bin = fixture("net_netstat.txt"),
    ?assertEqual(maps:get(<<"TcpExt">>, throng_proc:netstat(Bin)),
                 throng_proc:netstat(Bin, <<"TcpExt">>)),
    ?assertEqual(#{}, throng_proc:netstat(Bin, <<"NoSuchGroup">>)).

sockstat_test() ->
    S = throng_proc:sockstat(fixture("net_sockstat.txt")),
    ?assertEqual(#{<<"inuse">> => 13, <<"orphan">> => 0, <<"tw">> => 38, <<"alloc">> => 16,
                   <<"mem">> => 285}, maps:get(<<"TCP">>, S)),
    ?assertEqual(#{<<"used">> => 36}, maps:get(<<"sockets">>, S)),
    ?assertEqual(#{<<"inuse">> => 0, <<"memory">> => 0}, maps:get(<<"FRAG">>, S)).

auxv_test() ->
    A = throng_proc:auxv(fixture("self_auxv.bin")),
    ?assertEqual(100, maps:get(17, A)),    %% AT_CLKTCK
    ?assertEqual(4096, maps:get(6, A)),    %% AT_PAGESZ
    ?assertEqual(56, maps:get(4, A)).      %% AT_PHENT

%% The live files of this machine parse (skipped where there is no /proc).
live_proc_test_() ->
    case file:read_file("/proc/self/stat") of
        {ok, Stat} ->
            fun() ->
                    #{threads := T} = throng_proc:stat(Stat),
                    ?assert(T >= 1),
                    {ok, Host} = file:read_file("/proc/stat"),
                    ?assert(maps:get(user, maps:get(cpu, throng_proc:host_stat(Host))) > 0)
            end;
        {error, _} ->
            []
    end.
