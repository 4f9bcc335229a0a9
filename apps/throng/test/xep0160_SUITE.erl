%% @doc XEP-0160 offline storage and its bounds: what a user may have stored
%% is limited in messages (max_messages) and in bytes (max_bytes), and the
%% node's store as a whole in bytes (max_node_bytes). A message beyond any
%% of them is refused with service-unavailable to its sender (RFC 6121
%% §8.5.2.1.1: the server returns an error when it does not store a message
%% it cannot deliver); nothing is dropped silently. Every case runs on both
%% storage backends (groups mnesia and pgsql).
-module(xep0160_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).

all() ->
    [{group, mnesia}, {group, pgsql}].

groups() ->
    throng_ct:backend_groups([count_limit_refuses_with_an_error, byte_limit_refuses_with_an_error,
                              node_limit_refuses_with_an_error,
                              byte_count_follows_delivery_and_removal]).

init_per_group(Group, Config) ->
    throng_ct:init_backend(Group, Config).

end_per_group(_Group, Config) ->
    throng_ct:end_backend(Config).

init_per_testcase(TC, Config) ->
    Offline = case TC of
                  count_limit_refuses_with_an_error -> #{max_messages => 3};
                  byte_limit_refuses_with_an_error -> #{max_bytes => 3000};
                  node_limit_refuses_with_an_error -> #{max_node_bytes => 5000};
                  _ -> #{}
              end,
    %% The exact module set: the defaults with this offline configuration.
    Modules = maps:merge(throng_config_spec:default_modules(),
                         #{ping => #{interval => 0}, offline => Offline}),
    throng_ct:start_backend(Config, #{modules => Modules}),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

online(User) ->
    C = ?C:login(User, <<"password">>, <<"r">>),
    ok = ?C:available(C),
    C.

%% A body of Size bytes.
body(Size) -> binary:copy(<<"x">>, Size).

count(User) -> throng_mod_offline:count(#jid{user = User, server = <<"localhost">>}).

%% Sends each body to To and returns, in order, the error condition that
%% came back for each (ok for a message that was stored). A bounce is
%% routed back to the sender's session after the sender's later stanzas
%% were answered, so errors are matched by id after a final ping.
send_all(A, To, Bodies) ->
    Ids = [integer_to_binary(I) || I <- lists:seq(1, length(Bodies))],
    [?C:send(A, #xmlel{name = <<"message">>,
                       attrs = [{<<"id">>, Id}, {<<"to">>, To}, {<<"type">>, <<"chat">>}],
                       children = [#xmlel{name = <<"body">>, children = [{xmlcdata, B}]}]})
     || {Id, B} <- lists:zip(Ids, Bodies)],
    %% Every bounce comes before the answer to the second ping.
    Errors = ping(A, <<"p1">>) ++ ping(A, <<"p2">>),
    [proplists:get_value(Id, Errors, ok) || Id <- Ids].

ping(A, Id) ->
    ?C:send(A, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"get">>}, {<<"id">>, Id},
                                                 {<<"to">>, <<"localhost">>}],
                      children = [#xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]}]}),
    errors_until(A, Id, []).

errors_until(A, Id, Acc) ->
    El = ?C:recv_stanza(A),
    case {El#xmlel.name, throng_xml:attr(<<"id">>, El)} of
        {<<"iq">>, Id} -> Acc;
        {<<"message">>, MId} ->
            <<"error">> = throng_xml:attr(<<"type">>, El),
            #xmlel{children = [#xmlel{name = Cond} | _]} = throng_xml:subel(El, <<"error">>),
            errors_until(A, Id, [{MId, Cond} | Acc]);
        _ -> errors_until(A, Id, Acc)
    end.

%%% Cases

%% max_messages: the fourth message to an offline user is refused.
count_limit_refuses_with_an_error(_) ->
    A = online(<<"alice">>),
    ?assertEqual([ok, ok, ok, <<"service-unavailable">>],
                 send_all(A, <<"bob@localhost">>, [<<"1">>, <<"2">>, <<"3">>, <<"4">>])),
    ?assertEqual(3, count(<<"bob">>)),
    %% `bin/throng status' shows what the store holds (bench/cluster.sh
    %% prints it at the end, beside the messages the bench did not see).
    {0, Status} = throng_ctl:run("status", []),
    ?assertMatch({match, _}, re:run(Status, "\noffline messages +3\n")).

%% max_bytes: messages are stored while their stanzas fit in the user's
%% quota; a small one still fits after a large one was refused.
byte_limit_refuses_with_an_error(_) ->
    A = online(<<"alice">>),
    ?assertEqual([ok, <<"service-unavailable">>, ok],
                 send_all(A, <<"bob@localhost">>, [body(1500), body(1500), body(100)])),
    ?assertEqual(2, count(<<"bob">>)),
    %% Another user has a quota of their own.
    ?assertEqual([ok], send_all(A, <<"carol@localhost">>, [body(1500)])).

%% max_node_bytes: the node's store as a whole is bounded, whoever the
%% messages are for.
node_limit_refuses_with_an_error(_) ->
    A = online(<<"alice">>),
    ?assertEqual([ok, ok], send_all(A, <<"bob@localhost">>, [body(2000), body(2000)])),
    ?assertEqual([<<"service-unavailable">>], send_all(A, <<"carol@localhost">>, [body(2000)])),
    ?assertEqual(0, count(<<"carol">>)),
    ?assert(throng_storage:offline_bytes() =< 5000).

%% The byte count follows the store: it drops when messages are delivered
%% and when an account is removed.
byte_count_follows_delivery_and_removal(_) ->
    A = online(<<"alice">>),
    _ = send_all(A, <<"bob@localhost">>, [body(1000), body(1000)]),
    _ = send_all(A, <<"carol@localhost">>, [body(1000)]),
    Three = throng_storage:offline_bytes(),
    ?assert(Three > 3000),
    B = ?C:login(<<"bob">>, <<"password">>, <<"r">>),
    ?C:send(B, ?C:presence([])),
    throng_ct:wait_until(fun() -> count(<<"bob">>) =:= 0 end, 5000),
    One = throng_storage:offline_bytes(),
    ?assert(One < Three div 2),
    ok = throng_storage:remove_account(<<"carol">>, <<"localhost">>),
    ?assertEqual(0, throng_storage:offline_bytes()).
