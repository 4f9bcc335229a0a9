%% @doc The pure parts of XEP-0050 (throng_mod_adhoc): which step a command
%% request asks for, given its action and its session's stages, and the
%% session ids that tell an ended session from one never issued.
-module(throng_mod_adhoc_tests).

-include_lib("eunit/include/eunit.hrl").

stage(Actions) -> {stage, Actions, form}.

%% Without a session id, execute (the default) and complete start a
%% session; the actions that continue one need its id.
no_session_test() ->
    ?assertEqual(start, throng_mod_adhoc:plan(<<"execute">>, none)),
    ?assertEqual(start, throng_mod_adhoc:plan(<<"complete">>, none)),
    [?assertEqual({error, 'bad-sessionid'}, throng_mod_adhoc:plan(A, none))
     || A <- [<<"next">>, <<"prev">>, <<"cancel">>]].

%% An action XEP-0050 does not define is malformed, with or without a session.
malformed_test() ->
    [?assertEqual({error, 'malformed-action'}, throng_mod_adhoc:plan(A, S))
     || A <- [<<"jump">>, <<>>, <<"Execute">>], S <- [none, [stage([next])]]].

%% In a session execute is the stage's default: the first allowed action.
execute_is_default_test() ->
    ?assertEqual(next, throng_mod_adhoc:plan(<<"execute">>, [stage([next, complete])])),
    ?assertEqual(complete, throng_mod_adhoc:plan(<<"execute">>, [stage([complete]), stage([next])])).

%% next and complete only where the stage allows them; prev only with a
%% stage to go back to; cancel always.
allowed_actions_test() ->
    One = [stage([next])],
    Two = [stage([next, complete]), stage([next])],
    ?assertEqual(next, throng_mod_adhoc:plan(<<"next">>, One)),
    ?assertEqual({error, 'bad-action'}, throng_mod_adhoc:plan(<<"complete">>, One)),
    ?assertEqual({error, 'bad-action'}, throng_mod_adhoc:plan(<<"prev">>, One)),
    ?assertEqual(prev, throng_mod_adhoc:plan(<<"prev">>, Two)),
    ?assertEqual(complete, throng_mod_adhoc:plan(<<"complete">>, Two)),
    ?assertEqual({error, 'bad-action'}, throng_mod_adhoc:plan(<<"next">>, [stage([complete])])),
    [?assertEqual(cancel, throng_mod_adhoc:plan(<<"cancel">>, S)) || S <- [One, Two]].

%% A session id is recognised only for the host, requester and node it was
%% issued for; ids are not reused; garbage is never recognised.
sessionid_test() ->
    ok = throng_tables:init_boot_secret(),
    H = <<"localhost">>, O = <<"admin@localhost/r">>, N = <<"wizard">>,
    Sid = throng_mod_adhoc:new_sessionid(H, O, N),
    ?assert(throng_mod_adhoc:issued(Sid, H, O, N)),
    ?assertNot(throng_mod_adhoc:issued(Sid, <<"example.org">>, O, N)),
    ?assertNot(throng_mod_adhoc:issued(Sid, H, <<"admin@localhost/other">>, N)),
    ?assertNot(throng_mod_adhoc:issued(Sid, H, O, <<"echo">>)),
    ?assertNotEqual(Sid, throng_mod_adhoc:new_sessionid(H, O, N)),
    [?assertNot(throng_mod_adhoc:issued(Bad, H, O, N))
     || Bad <- [<<>>, <<"made-up">>, <<"!!">>, binary:part(Sid, 0, 20),
                <<Sid/binary, "AAAA">>, base64:encode(crypto:strong_rand_bytes(21))]],
    %% Another boot (secret) does not recognise it either.
    ok = throng_tables:init_boot_secret(),
    ?assertNot(throng_mod_adhoc:issued(Sid, H, O, N)).
