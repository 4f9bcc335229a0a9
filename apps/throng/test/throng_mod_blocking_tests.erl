%% @doc XEP-0191's JID matching (XEP-0016 §2.1) in throng_mod_blocking:
%% each of the four item forms against the JIDs it must and must not match.
-module(throng_mod_blocking_tests).

-include_lib("eunit/include/eunit.hrl").
-include("throng.hrl").

jid(B) -> {ok, J} = throng_jid:parse(B), J.

m(Items, Jid) -> throng_mod_blocking:matches(lists:usort(Items), jid(Jid)).

full_jid_item_test() ->
    ?assert(m([<<"a@x/r">>], <<"a@x/r">>)),
    ?assertNot(m([<<"a@x/r">>], <<"a@x/s">>)),
    ?assertNot(m([<<"a@x/r">>], <<"a@x">>)).

bare_jid_item_test() ->
    ?assert(m([<<"a@x">>], <<"a@x">>)),
    ?assert(m([<<"a@x">>], <<"a@x/any">>)),
    ?assertNot(m([<<"a@x">>], <<"b@x/any">>)),
    ?assertNot(m([<<"a@x">>], <<"x">>)).

domain_resource_item_test() ->
    ?assert(m([<<"x/r">>], <<"x/r">>)),
    %% The item is compared with the JID's domain/resource form (as
    %% ejabberd's privacy lists do): any user's resource r at x.
    ?assert(m([<<"x/r">>], <<"a@x/r">>)),
    ?assertNot(m([<<"x/r">>], <<"a@x/s">>)),
    ?assertNot(m([<<"x/r">>], <<"x">>)).

domain_item_test() ->
    ?assert(m([<<"x">>], <<"x">>)),
    ?assert(m([<<"x">>], <<"a@x">>)),
    ?assert(m([<<"x">>], <<"a@x/r">>)),
    ?assert(m([<<"x">>], <<"x/r">>)),
    ?assertNot(m([<<"x">>], <<"a@y">>)),
    ?assertNot(m([<<"x">>], <<"sub.x">>)).

empty_list_matches_nothing_test() ->
    ?assertNot(m([], <<"a@x/r">>)).
