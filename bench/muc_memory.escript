#!/usr/bin/env escript
%% Memory of MUC rooms (docs/muc.md). Starts Throng in this node (fresh data
%% directory, Mnesia), then measures
%%  1. N idle persistent rooms: stored, no process. Each is written with the
%%     term throng_muc_store:save/1 writes (a name, one owner, the default
%%     configuration, persistent), and the node's memory (erlang:memory/1
%%     total, and the Mnesia kv table) is compared before and after;
%%  2. a running room per occupant: a room's state is built with the room's
%%     own code (throng_muc_room:init/1, the owner's instant-room form through
%%     throng_muc_admin:iq/5, throng_muc_logic:presence/5 for each entering
%%     occupant, each with a presence of its own), held by a hibernated
%%     process like a room's; its process memory with K+1 occupants against
%%     with 1, per occupant.
%%
%%   export ERL_LIBS=$PWD/_build/syslibs; rebar3 compile
%%   escript bench/muc_memory.escript [N] [K]     (defaults 100000 1000)
-mode(compile).
-export([hold_on/1]).

main(Args) ->
    {N, K} = case Args of
                 [A, B] -> {list_to_integer(A), list_to_integer(B)};
                 [A] -> {list_to_integer(A), 1000};
                 [] -> {100000, 1000}
             end,
    Root = filename:dirname(filename:dirname(filename:absname(escript:script_name()))),
    code:add_pathsz(filelib:wildcard(filename:join(Root, "_build/default/lib/*/ebin"))),
    Dir = string:trim(os:cmd("mktemp -d /tmp/throng-mucmem.XXXXXX")),
    ok = application:set_env(throng, config,
                             #{hosts => [<<"localhost">>], loglevel => warning,
                               data_dir => list_to_binary(Dir),
                               listen => [#{port => 0, ip => <<"127.0.0.1">>}]}),
    {ok, _} = application:ensure_all_started(throng),
    stored_rooms(N),
    room_per_occupant(K),
    os:cmd("rm -rf " ++ Dir),
    halt(0).

stored_rooms(N) ->
    Service = <<"conference.localhost">>,
    Limits = #{max_users => 200, history_size => 20},
    Before = settled(),
    KvBefore = kv_bytes(),
    T0 = erlang:monotonic_time(millisecond),
    [ok = throng_storage:kv_put(muc_room, {Service, <<"room", (integer_to_binary(I))/binary>>},
                                throng_muc_store:encode(
                                  (throng_muc_config:default(Limits))#{
                                    persistent => true,
                                    title => <<"Room ", (integer_to_binary(I))/binary>>},
                                  #{<<"owner", (integer_to_binary(I))/binary, "@localhost">> => owner},
                                  {<<>>, <<>>}, [], Limits))
     || I <- lists:seq(1, N)],
    T1 = erlang:monotonic_time(millisecond),
    After = settled(),
    KvAfter = kv_bytes(),
    io:format("~b idle persistent rooms (stored, no process): node memory +~.1f MB "
              "(~b bytes/room), Mnesia kv table +~.1f MB (~b bytes/room); "
              "running room processes: ~b; written in ~b ms~n",
              [N, (After - Before) / 1048576, (After - Before) div N,
               (KvAfter - KvBefore) / 1048576, (KvAfter - KvBefore) div N,
               length(throng_muc_room:running(Service)), T1 - T0]).

kv_bytes() ->
    mnesia:table_info(throng_kv, memory) * erlang:system_info(wordsize).

settled() ->
    [garbage_collect(P) || P <- processes()],
    timer:sleep(200),
    erlang:memory(total).

room_per_occupant(K) ->
    Service = <<"conference.localhost">>,
    ok = throng_muc_room:init_table(),
    Ctx = #{limits => #{max_users => 100000, history_size => 20}},
    Owner = jid(<<"owner">>, <<"r">>),
    {ok, St} = throng_muc_room:init({{Service, <<"bench">>}, {new, Owner, <<"secret">>}, Ctx}),
    S0 = element(2, St),
    Room = {jid, <<"bench">>, Service, <<>>},
    Enter = fun(S, {From, Nick}) ->
                    El = {xmlel, <<"presence">>, [],
                          [{xmlel, <<"x">>, [{<<"xmlns">>, <<"http://jabber.org/protocol/muc">>}], []}]},
                    {S1, _Out} = throng_muc_logic:presence(From, setelement(4, Room, Nick), El,
                                                          erlang:system_time(microsecond), S),
                    S1
            end,
    S1a = Enter(S0, {Owner, <<"owner">>}),
    %% The owner makes it an instant room (an empty form, XEP-0045 §10.1.2).
    Submit = {xmlel, <<"iq">>, [{<<"type">>, <<"set">>}, {<<"id">>, <<"1">>}],
              [{xmlel, <<"query">>, [{<<"xmlns">>, <<"http://jabber.org/protocol/muc#owner">>}],
                [{xmlel, <<"x">>, [{<<"xmlns">>, <<"jabber:x:data">>}, {<<"type">>, <<"submit">>}], []}]}]},
    {ok, S1, _} = throng_muc_admin:iq(Owner, Room, Submit, 0, S1a),
    Occupants = [{jid(<<"user", (integer_to_binary(I))/binary>>, <<"phone">>),
                  <<"nick", (integer_to_binary(I))/binary>>} || I <- lists:seq(1, K)],
    SK = lists:foldl(fun(O, S) -> Enter(S, O) end, S1, Occupants),
    M1 = held(S1),
    MK = held(SK),
    io:format("a running room (hibernated process): ~b bytes with 1 occupant, ~b bytes with ~b; "
              "~b bytes per occupant~n", [M1, MK, K + 1, (MK - M1) div K]).

jid(U, R) -> {jid, U, <<"localhost">>, R}.

%% The memory of a hibernated process holding State, as a room holds it.
held(State) ->
    P = spawn(fun() -> hold(State) end),
    timer:sleep(100),
    {memory, M} = process_info(P, memory),
    exit(P, kill),
    M.

hold(State) ->
    erlang:hibernate(?MODULE, hold_on, [State]).

hold_on(_State) -> ok.
