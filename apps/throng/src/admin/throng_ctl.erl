%% @doc Administration commands, run inside the server node on behalf of
%% `bin/throng COMMAND ARGS...' (see {@link throng_ctl_cli}). Arguments follow
%% ejabberdctl's order. Each command returns an exit code and text.
%%
%% Other applications add commands of their own at run time with
%% {@link register_command/1} (throng_stats adds `stats' when it starts and
%% removes it when it stops), so this module depends on none of them. A
%% registered command is listed by `bin/throng help' while the node runs and
%% is run like a built-in one. The registrations live in persistent_term
%% (written at application start and stop only; read by every command).
-module(throng_ctl).

-include("throng.hrl").

-export([run/2, commands/0, register_command/1, unregister_command/1, redraws/2]).
%% Called in the server node through rpc by throng_ctl_cli (bin/throng).
-ignore_xref([{run, 2}, {redraws, 2}]).

-type result() :: {non_neg_integer(), iodata()}.
%% name: the command word; usage: its arguments, for help and usage errors;
%% help: one line; run: {M, F}, called as M:F(Args) in the node, returns an
%% exit code and text, or `usage' when the arguments are wrong; redraw: when
%% true, `bin/throng NAME' without arguments runs it every second and
%% redraws the screen until Ctrl-C.
-type command() :: #{name := string(), usage := string(), help := string(),
                     run := {module(), atom()}, redraw => boolean()}.
-export_type([result/0, command/0]).

-define(REGISTERED, {?MODULE, commands}).

-define(OK, 0).
-define(ERROR, 1).
-define(USAGE, 2).

%% @doc The commands, their arguments and what they do (for help): the
%% built-in ones, then those registered, in the order they were registered.
-spec commands() -> [{string(), string(), string()}].
commands() ->
    builtin() ++ [{N, U, H} || #{name := N, usage := U, help := H} <- registered_commands()].

%% @doc Adds a command (or replaces the registration of the same name).
%% A built-in command cannot be replaced.
-spec register_command(command()) -> ok | {error, builtin}.
register_command(#{name := Name, usage := U, help := H, run := {M, F}} = Cmd)
  when is_list(Name), is_list(U), is_list(H), is_atom(M), is_atom(F) ->
    case lists:keymember(Name, 1, builtin()) of
        true -> {error, builtin};
        false ->
            Others = [C || #{name := N} = C <- registered_commands(), N =/= Name],
            persistent_term:put(?REGISTERED, Others ++ [maps:merge(#{redraw => false}, Cmd)])
    end.

%% @doc Removes a registered command (nothing when it is not registered).
-spec unregister_command(string()) -> ok.
unregister_command(Name) ->
    case [C || #{name := N} = C <- registered_commands(), N =/= Name] of
        [] -> _ = persistent_term:erase(?REGISTERED), ok;
        Others -> persistent_term:put(?REGISTERED, Others)
    end.

%% @doc Whether `bin/throng Cmd Args' redraws the command's output every
%% second (a registered command with redraw, given no arguments).
-spec redraws(string(), [string()]) -> boolean().
redraws(Cmd, []) ->
    case lookup(Cmd) of
        #{redraw := Redraw} -> Redraw;
        undefined -> false
    end;
redraws(_Cmd, _Args) ->
    false.

registered_commands() ->
    persistent_term:get(?REGISTERED, []).

lookup(Name) ->
    case [C || #{name := N} = C <- registered_commands(), N =:= Name] of
        [C] -> C;
        [] -> undefined
    end.

builtin() ->
    [{"status", "", "Node status: uptime, connections, sessions, memory, offline messages"},
     {"register", "USER DOMAIN PASSWORD", "Create an account"},
     {"unregister", "USER DOMAIN", "Remove an account, its roster and offline messages"},
     {"passwd", "USER DOMAIN PASSWORD", "Change a password"},
     {"disable", "USER DOMAIN", "Disable an account: its sessions end, its logins are refused "
      "(account-disabled), its data stays"},
     {"enable", "USER DOMAIN", "Let a disabled account log in again"},
     {"sessions", "", "List connected sessions (full JIDs) of every cluster member"},
     {"cluster", "", "Cluster members with their sessions, directory entries and the address "
     "clients are sent to (see-other-host)"},
     {"join-cluster", "NODE", "Join the cluster of NODE (same cookie, same storage); "
      "remembered across restarts"},
     {"leave-cluster", "", "End this node's sessions cleanly, leave the cluster and stop "
      "the node"},
     {"kick", "JID", "End the session of a full JID, or every session of a bare JID"},
     {"bulk-register", "DOMAIN COUNT PASSWORD [PREFIX [CONTACTS [ITERATIONS]]]",
      "Create PREFIX1..PREFIXCOUNT (default prefix user) with one password, mutual "
      "rosters of CONTACTS neighbours (default 18) and SCRAM credentials of ITERATIONS "
      "PBKDF2 rounds (default auth.scram_iterations), for load tests"},
     {"accounts", "DOMAIN", "Count the accounts of a domain"},
     {"counters", "", "Print the server's counters (name value), e.g. for scripts"},
     {"reload-certs", "", "Read the TLS certificates (certfile, keyfile, certfiles) again: "
      "new connections get them, open ones keep theirs; on an error the running ones stay"},
     {"gc", "", "Write Mnesia's log into its tables, garbage-collect every process and "
      "return the C heap's free pages to the OS (before a memory measurement)"},
     {"doctor", "[--target SESSIONS]", "Check the OS and the node's limits against a target "
      "number of sessions: what caps it and the fix; exit 1 when a limit caps it (works "
      "with the node down too)"}].

-spec run(string(), [string()]) -> result().
run("status", []) ->
    status();
run("register", [U, S, P]) ->
    account_result(throng_auth:register(bin(U), bin(S), bin(P)),
                   io_lib:format("User ~s@~s successfully registered", [U, S]));
run("unregister", [U, S]) ->
    account_result(throng_auth:unregister(bin(U), bin(S)),
                   io_lib:format("User ~s@~s unregistered", [U, S]));
run("disable", [U, S]) ->
    account_result(throng_auth:disable(bin(U), bin(S)),
                   io_lib:format("User ~s@~s disabled", [U, S]));
run("enable", [U, S]) ->
    account_result(throng_auth:enable(bin(U), bin(S)),
                   io_lib:format("User ~s@~s enabled", [U, S]));
run("passwd", [U, S, P]) ->
    account_result(throng_auth:set_password(bin(U), bin(S), bin(P)),
                   io_lib:format("Password of ~s@~s changed", [U, S]));
run("sessions", []) ->
    Members = throng_cluster:members(),
    All = lists:append([case R of
                            {ok, L} -> L;
                            _ -> []
                        end || R <- erpc:multicall(Members, throng_sm, all, [], 10000)]),
    {?OK, lists:sort([[throng_jid:to_binary(J), "\n"] || {J, _} <- All])};
run("cluster", []) ->
    Rows = [[atom_to_list(N), show(S), show(D), case A of none -> "-"; _ -> show(A) end]
            || #{node := N, sessions := S, directory := D, address := A} <- throng_cluster:status()],
    {?OK, [io_lib:format("~-40s ~12s ~12s  ~s~n", R)
           || R <- [["node", "sessions", "directory", "clients sent to"] | Rows]]};
run("join-cluster", [Node]) ->
    case throng_cluster:join(list_to_atom(Node)) of
        ok -> {?OK, io_lib:format("Joined the cluster of ~s; members: ~s~n",
                                  [Node, lists:join(" ", [atom_to_list(N) || N <- throng_cluster:members()])])};
        {error, Why} -> {?ERROR, ["Error: ", Why, "\n"]}
    end;
run("leave-cluster", []) ->
    leave_cluster();
run("kick", [J]) ->
    case throng_jid:parse(bin(J)) of
        {ok, #jid{resource = <<>>, user = U, server = S}} ->
            kick([P || {_, P, _, _} <- throng_sm:resources({U, S})], J);
        {ok, JID} ->
            case throng_sm:lookup(JID) of
                undefined -> kick([], J);
                P -> kick([P], J)
            end;
        error ->
            {?ERROR, io_lib:format("Invalid JID: ~s~n", [J])}
    end;
run("bulk-register", [S, N, P]) ->
    run("bulk-register", [S, N, P, "user", "18"]);
run("bulk-register", [S, N, P, Prefix]) ->
    run("bulk-register", [S, N, P, Prefix, "18"]);
run("bulk-register", [S, N, P, Prefix, C]) ->
    run("bulk-register", [S, N, P, Prefix, C,
                          integer_to_list(throng_config:get([auth, scram_iterations]))]);
run("bulk-register", [S, N, P, Prefix, C, It]) ->
    case {int(N), int(C), int(It)} of
        {Count, Contacts, Iter} when is_integer(Count), Count > 0, is_integer(Contacts),
                                     Contacts >= 0, is_integer(Iter), Iter > 0 ->
            T0 = erlang:monotonic_time(millisecond),
            case throng_auth:bulk_register(bin(S), bin(Prefix), Count, bin(P), Contacts, Iter) of
                {ok, Done} ->
                    Ms = erlang:monotonic_time(millisecond) - T0,
                    {?OK, io_lib:format("Registered ~b users ~s1..~s~b on ~s with ~b contacts "
                                        "each in ~.1f s~n",
                                        [Done, Prefix, Prefix, Done, S, Contacts, Ms / 1000])};
                {error, Why} ->
                    {?ERROR, io_lib:format("Bulk registration failed: ~p~n", [Why])}
            end;
        _ ->
            {?USAGE, "COUNT, CONTACTS and ITERATIONS must be whole numbers\n"}
    end;
run("counters", []) ->
    M = throng_metrics:all(),
    {?OK, [io_lib:format("~s ~b~n", [N, maps:get(N, M)]) || N <- throng_metrics:names()]};
run("gc", []) ->
    Before = erlang:memory(total),
    _ = mnesia:dump_log(),
    _ = [erlang:garbage_collect(P) || P <- processes()],
    ok = throng_tls_nif:trim(),
    After = erlang:memory(total),
    {?OK, io_lib:format("memory ~.1f MB -> ~.1f MB~n", [Before / 1048576, After / 1048576])};
run("reload-certs", []) ->
    case throng_cert:reload() of
        ok ->
            Names = case throng_cert:names() of
                        [] -> "none";
                        Ns -> lists:join(", ", Ns)
                    end,
            {?OK, io_lib:format("Certificates reloaded: default ~ts; by name (SNI): ~ts~n",
                                [throng_cert:certfile(), Names])};
        {error, Why} ->
            {?ERROR, ["Error: ", Why, "; the certificates in use stay\n"]}
    end;
run("doctor", Args) ->
    throng_doctor:run(Args);
run("accounts", [S]) ->
    {?OK, io_lib:format("~b~n", [throng_storage:count_accounts(bin(S))])};
run(Cmd, Args) ->
    case lookup(Cmd) of
        #{run := {M, F}} ->
            case M:F(Args) of
                usage -> usage(Cmd, Args);
                {Code, Text} when is_integer(Code), Code >= 0 -> {Code, Text}
            end;
        undefined ->
            usage(Cmd, Args)
    end.

usage(Cmd, Args) ->
    case lists:keyfind(Cmd, 1, commands()) of
        {_, Usage, _} ->
            {?USAGE, io_lib:format("Usage: throng ~s ~s (got ~b arguments)~n",
                                   [Cmd, Usage, length(Args)])};
        false ->
            {?USAGE, io_lib:format("Unknown command: ~s~n", [Cmd])}
    end.

account_result(ok, Text) -> {?OK, [Text, "\n"]};
account_result({error, exists}, _) -> {?ERROR, "Error: the user already exists\n"};
account_result({error, not_found}, _) -> {?ERROR, "Error: no such user\n"};
account_result({error, not_disabled}, _) -> {?ERROR, "Error: the user is not disabled\n"};
account_result({error, invalid_user}, _) -> {?ERROR, "Error: invalid user name\n"};
account_result({error, invalid_password}, _) -> {?ERROR, "Error: invalid (empty) password\n"};
account_result({error, unknown_host}, _) -> {?ERROR, "Error: this server does not serve that domain\n"}.

kick([], J) ->
    {?ERROR, io_lib:format("No session for ~s~n", [J])};
kick(Pids, J) ->
    [throng_session:kick(P, <<"kicked by an administrator">>) || P <- Pids],
    {?OK, io_lib:format("Kicked ~b session(s) of ~s~n", [length(Pids), J])}.

%% While still a member: no new connections, every session ends with
%% system-shutdown (contacts everywhere see it go, what it held goes to
%% other resources or to the shared storage), the unavailable presence kept
%% for a store that did not answer goes to another member; then the others
%% are told, and the node stops.
leave_cluster() ->
    N = throng_sm:count(),
    _ = supervisor:terminate_child(throng_sup, throng_listeners_sup),
    {Handed, Left, Holder} = throng_presence_retry:hand_over(),
    ok = throng_cluster:leave(),
    spawn(fun() -> timer:sleep(500), init:stop() end),
    {?OK, [io_lib:format("Ended ~b session(s), left the cluster; the node stops~n", [N]),
           kept_presence(Handed, Left, Holder)]}.

%% The unavailable presence kept for a store that did not answer (none,
%% almost always).
kept_presence(0, 0, _Holder) ->
    [];
kept_presence(Handed, Left, none) ->
    io_lib:format("Unavailable presence kept for the store: ~b handed to a member, ~b forgotten~n",
                  [Handed, Left]);
kept_presence(Handed, Left, Holder) ->
    io_lib:format("Unavailable presence kept for the store: ~b handed to a member, ~b left with "
                  "~s (it holds their copies and sends them when this node is gone)~n",
                  [Handed, Left, Holder]).

show(N) when is_integer(N) -> integer_to_list(N);
show(B) when is_binary(B) -> binary_to_list(B);
show(A) -> atom_to_list(A).

status() ->
    {Uptime, _} = erlang:statistics(wall_clock),
    M = throng_metrics:all(),
    Mem = erlang:memory(),
    Lines = [io_lib:format("~-24s ~s~n", [K, V]) ||
                {K, V} <- [{"node", atom_to_list(node())},
                           {"version", vsn()},
                           {"uptime", io_lib:format("~b s", [Uptime div 1000])},
                           {"connections open", integer_to_list(maps:get(connections_open, M))},
                           {"sessions", integer_to_list(throng_sm:count())},
                           {"cluster members", integer_to_list(length(throng_cluster:members()))},
                           {"logins", integer_to_list(maps:get(logins, M))},
                           {"processes", integer_to_list(erlang:system_info(process_count))},
                           {"memory total", mb(proplists:get_value(total, Mem))},
                           {"memory processes", mb(proplists:get_value(processes, Mem))},
                           {"memory ets", mb(proplists:get_value(ets, Mem))},
                           {"offline messages", case throng_info:offline_total() of
                                                    undefined -> "-";
                                                    N -> integer_to_list(N)
                                                end},
                           {"config", binary_to_list(throng_config:source())}]],
    {?OK, ["throng is running\n" | Lines]}.

vsn() ->
    {ok, V} = application:get_key(throng, vsn),
    V.

mb(Bytes) -> io_lib:format("~.1f MB", [Bytes / 1048576]).

bin(S) -> unicode:characters_to_binary(S).

int(S) ->
    try list_to_integer(S) catch error:badarg -> undefined end.
