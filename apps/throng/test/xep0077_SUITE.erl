%% @doc XEP-0077 In-Band Registration against the real server: off by
%% default; when enabled, account creation with its errors and per-address
%% rate limit; password change and account removal for a logged-in user.
-module(xep0077_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).

all() -> [disabled_by_default, fields, register_and_login, conflict, short_password,
          rate_limited_per_address, change_password, remove_account].

init_per_testcase(disabled_by_default, Config) ->
    throng_ct:start(Config),
    Config;
init_per_testcase(rate_limited_per_address, Config) ->
    throng_ct:start(Config, #{modules => #{register => #{allow_create => true, ip_interval => 3600}}}),
    Config;
init_per_testcase(_TC, Config) ->
    throng_ct:start(Config, #{modules => #{register => #{allow_create => true, ip_interval => 0}}}),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

q(Children) -> #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_REGISTER}], children = Children}.
field(Name, Value) -> #xmlel{name = Name, children = [{xmlcdata, Value}]}.

stream() ->
    C = ?C:connect(#{}),
    F = ?C:open_stream(C),
    {C, F}.

register(C, User, Password) ->
    ?C:iq(C, <<"set">>, q([field(<<"username">>, User), field(<<"password">>, Password)])).

cond_of(R) ->
    [N | _] = [Name || #xmlel{name = Name} <- throng_xml:subels(throng_xml:subel(R, <<"error">>)),
                       Name =/= <<"text">>],
    N.

disabled_by_default(_) ->
    {C, F} = stream(),
    ?assertEqual(undefined, throng_xml:subel(F, <<"register">>)),
    R = ?C:iq(C, <<"get">>, q([])),
    ?assertEqual(<<"service-unavailable">>, cond_of(R)).

fields(_) ->
    {C, F} = stream(),
    ?assertNotEqual(undefined, throng_xml:subel(F, <<"register">>, ?NS_REGISTER_FEATURE)),
    R = ?C:iq(C, <<"get">>, q([])),
    Q = throng_xml:subel(R, <<"query">>),
    ?assertNotEqual(undefined, throng_xml:subel(Q, <<"username">>)),
    ?assertNotEqual(undefined, throng_xml:subel(Q, <<"password">>)).

register_and_login(_) ->
    {C, _} = stream(),
    R = register(C, <<"newbie">>, <<"secret123">>),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    ok = ?C:auth_plain(C, <<"newbie">>, <<"secret123">>),
    L = ?C:login(<<"newbie">>, <<"secret123">>, <<"r">>, #{mechanism => sha256}),
    ?assertEqual(<<"newbie@localhost/r">>, ?C:jid(L)).

conflict(_) ->
    throng_ct:register(<<"taken">>, <<"password">>),
    {C, _} = stream(),
    ?assertEqual(<<"conflict">>, cond_of(register(C, <<"taken">>, <<"secret123">>))).

short_password(_) ->
    {C, _} = stream(),
    ?assertEqual(<<"not-acceptable">>, cond_of(register(C, <<"shorty">>, <<"abc">>))).

rate_limited_per_address(_) ->
    {C, _} = stream(),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, register(C, <<"first">>, <<"secret123">>))),
    {C2, _} = stream(),
    ?assertEqual(<<"resource-constraint">>, cond_of(register(C2, <<"second">>, <<"secret123">>))),
    ?assertNot(throng_storage:account_exists(<<"second">>, <<"localhost">>)).

change_password(_) ->
    throng_ct:register(<<"alice">>, <<"password">>),
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = register(A, <<"alice">>, <<"newpassword">>),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    {C, _} = stream(),
    ?assertEqual({failure, <<"not-authorized">>}, ?C:auth_plain(C, <<"alice">>, <<"password">>)),
    ok = ?C:auth_plain(C, <<"alice">>, <<"newpassword">>),
    %% Another user's password cannot be changed.
    ?assertEqual(<<"not-allowed">>, cond_of(register(A, <<"bob">>, <<"whatever1">>))).

remove_account(_) ->
    throng_ct:register(<<"alice">>, <<"password">>),
    A = ?C:login(<<"alice">>, <<"password">>, <<"r">>),
    R = ?C:iq(A, <<"set">>, q([#xmlel{name = <<"remove">>}])),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    ?assertNotEqual(timeout, ?C:closed(A, 5000)),
    ?assertNot(throng_storage:account_exists(<<"alice">>, <<"localhost">>)).
