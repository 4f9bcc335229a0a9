#!/usr/bin/env escript
%% Creates user1..userN (password "password") with `neighbours' rosters (user
%% N's contacts: N-C/2..N-1 and N+1..N+C/2, wrapping around, subscription
%% both) in a running ejabberd node, through distributed Erlang: accounts
%% with ejabberd_auth:try_register/3, roster items written straight into the
%% Mnesia roster table (ejabberdctl add_rosteritem takes ~0.5 s per item).
%%
%%   bench/bench_ejabberd_users.escript NODE COOKIE DOMAIN USERS CONTACTS
main([Node0, Cookie, Domain0, Users0, Contacts0]) ->
    {ok, _} = net_kernel:start(list_to_atom("throng_bench_users_" ++ os:getpid()), #{name_domain => shortnames}),
    erlang:set_cookie(list_to_atom(Cookie)),
    Node = list_to_atom(Node0),
    pong = net_adm:ping(Node),
    Domain = list_to_binary(Domain0),
    N = list_to_integer(Users0),
    H = min(list_to_integer(Contacts0) div 2, (N - 1) div 2),
    Attrs = rpc:call(Node, mnesia, table_info, [roster, attributes]),
    Name = fun(I) -> <<"user", (integer_to_binary(I))/binary>> end,
    lists:foreach(
      fun(I) ->
              U = Name(I),
              case rpc:call(Node, ejabberd_auth, try_register, [U, Domain, <<"password">>]) of
                  ok -> ok;
                  {error, exists} -> ok;
                  Other -> io:format(standard_error, "register ~s: ~p~n", [U, Other]), halt(1)
              end,
              Items = [begin
                           C = Name(((I - 1 + D) rem N + N) rem N + 1),
                           Jid = {C, Domain, <<>>},
                           Vals = #{usj => {U, Domain, Jid}, us => {U, Domain}, jid => Jid,
                                    name => <<>>, subscription => both, ask => none,
                                    groups => [], askmessage => <<>>, xs => []},
                           list_to_tuple([roster | [maps:get(A, Vals) || A <- Attrs]])
                       end || D <- lists:seq(-H, -1) ++ lists:seq(1, H)],
              ok = rpc:call(Node, lists, foreach, [fun mnesia:dirty_write/1, Items])
      end, lists:seq(1, N)),
    io:format(standard_error, "ejabberd: ~b users with ~b contacts each~n", [N, 2 * H]);
main(_) ->
    io:format(standard_error, "usage: bench_ejabberd_users.escript NODE COOKIE DOMAIN USERS CONTACTS~n", []),
    halt(2).
