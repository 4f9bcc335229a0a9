%% @doc The client side of `bin/throng COMMAND': runs in a short-lived hidden
%% node, connects to the server node and runs the command there
%% ({@link throng_ctl}). Exit codes: 0 ok, 1 command failed, 2 usage,
%% 3 the server node is not running.
-module(throng_ctl_cli).

-export([main/0, check_config/0, doctor/0]).
%% Entry points of bin/throng (erl -s throng_ctl_cli main | check_config |
%% doctor).
-ignore_xref([{main, 0}, {check_config, 0}, {doctor, 0}]).

-spec main() -> no_return().
main() ->
    [NodeStr | Rest] = init:get_plain_arguments(),
    Node = list_to_atom(NodeStr),
    case Rest of
        [] -> usage(Node), halt(2);
        ["help" | _] -> usage(Node), halt(0);
        [Cmd | Args] -> halt(command(Node, Cmd, Args))
    end.

%% @doc Validates the configuration file (THRONG_CONFIG) without starting
%% the server; exit code 0 when valid, 1 with the message otherwise.
-spec check_config() -> no_return().
check_config() ->
    {ok, _} = application:ensure_all_started(fast_yaml),
    {ok, _} = application:ensure_all_started(stringprep),
    ok = application:load(throng),
    case throng_config:load() of
        ok ->
            io:format("~ts: ok~n", [throng_config:source()]),
            halt(0);
        {error, Msg} ->
            io:format(standard_error, "throng: configuration error: ~ts~n", [Msg]),
            halt(1)
    end.

%% @doc `throng doctor' with the node down: the configuration file and this
%% process's limits (those a node started from the same shell gets).
-spec doctor() -> no_return().
doctor() ->
    {ok, _} = application:ensure_all_started(fast_yaml),
    {ok, _} = application:ensure_all_started(stringprep),
    ok = application:load(throng),
    {Code, Text} = throng_doctor:offline(init:get_plain_arguments()),
    io:put_chars(Text),
    halt(Code).

command(Node, "ping", []) ->
    case net_adm:ping(Node) of
        pong -> io:put_chars("pong\n"), 0;
        pang -> not_running(Node)
    end;
command(Node, "ready", []) ->
    %% The node is up and the server application has started (used by
    %% bin/throng start; a node answers pings before its applications run).
    case net_adm:ping(Node) of
        pong ->
            case rpc:call(Node, application, which_applications, []) of
                Apps when is_list(Apps) ->
                    case lists:keymember(throng, 1, Apps) of
                        true -> 0;
                        false -> 1
                    end;
                _ -> 1
            end;
        pang -> 3
    end;
command(Node, "stop", []) ->
    case net_adm:ping(Node) of
        pong -> _ = rpc:call(Node, init, stop, []), 0;
        pang -> not_running(Node)
    end;
command(Node, Cmd, Args) ->
    case net_adm:ping(Node) of
        pang -> not_running(Node);
        pong ->
            case rpc:call(Node, throng_ctl, redraws, [Cmd, Args]) of
                true -> redraw_loop(Node, Cmd);
                _ -> once(Node, Cmd, Args)
            end
    end.

once(Node, Cmd, Args) ->
    result(Node, Cmd, rpc:call(Node, throng_ctl, run, [Cmd, Args], infinity)).

%% A command registered with redraw (`throng stats'), given no arguments:
%% its output redrawn every second until Ctrl-C or a failure.
redraw_loop(Node, Cmd) ->
    case rpc:call(Node, throng_ctl, run, [Cmd, []], 10000) of
        {0, Text} ->
            io:put_chars(["\e[H\e[2J", Text, "\n(redrawn every second; Ctrl-C to quit)\n"]),
            timer:sleep(1000),
            redraw_loop(Node, Cmd);
        Other ->
            result(Node, Cmd, Other)
    end.

result(_Node, _Cmd, {Code, Text}) when is_integer(Code) ->
    io:put_chars(Text),
    Code;
result(Node, Cmd, {badrpc, Why}) ->
    io:format(standard_error, "throng: ~s failed on ~s: ~p~n", [Cmd, Node, Why]),
    1.

not_running(Node) ->
    io:format(standard_error, "throng: node ~s is not running~n", [Node]),
    3.

%% The help: the running node's commands (its applications may have added
%% some), or the built-in ones when it is not running.
usage(Node) ->
    {Commands, Note} = case net_adm:ping(Node) of
                           pong ->
                               case rpc:call(Node, throng_ctl, commands, [], 10000) of
                                   L when is_list(L) -> {L, []};
                                   {badrpc, _} -> {throng_ctl:commands(), not_listed()}
                               end;
                           pang ->
                               {throng_ctl:commands(), not_listed()}
                       end,
    io:put_chars(
      ["Usage: throng COMMAND [ARGS]\n\n"
       "Node:\n"
       "  start                     start the server in the background\n"
       "  stop                      stop it\n"
       "  foreground                run it in the foreground (logs to the terminal)\n"
       "  console                   run it with an Erlang shell\n"
       "  ping                      pong if the node is running\n"
       "  check-config              validate the configuration file and exit\n\n"
       "Administration (on the running node):\n",
       [io_lib:format("  ~-25s ~s~n", [Cmd ++ " " ++ Args, Doc])
        || {Cmd, Args, Doc} <- Commands],
       Note,
       "\nEnvironment: THRONG_CONFIG (configuration file), THRONG_NODE (node name,\n"
       "default throng@127.0.0.1), THRONG_COOKIE (distribution cookie).\n"]).

not_listed() ->
    "  (the node is not running: commands added by its applications, such as\n"
    "  stats, are listed while it runs)\n".
