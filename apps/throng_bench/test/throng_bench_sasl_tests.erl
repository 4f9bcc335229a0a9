%% SASL client: PLAIN and the SCRAM test vectors of RFC 5802 and RFC 7677.
-module(throng_bench_sasl_tests).
-include_lib("eunit/include/eunit.hrl").

plain_test() ->
    ?assertEqual(<<0, "user", 0, "pencil">>, throng_bench_sasl:plain(<<"user">>, <<"pencil">>)).

%% RFC 5802 section 5.
scram_sha1_vector_test() ->
    {First, S0} = throng_bench_sasl:scram_first('scram-sha-1', <<"user">>,
                                                <<"fyko+d2lbbFgONRv9qkxdawL">>),
    ?assertEqual(<<"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL">>, First),
    {ok, Final, S1} = throng_bench_sasl:scram_final(
                        S0, <<"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,"
                              "i=4096">>, <<"pencil">>),
    ?assertEqual(<<"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
                   "p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=">>, Final),
    ?assertEqual(ok, throng_bench_sasl:scram_verify(S1, <<"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=">>)),
    ?assertMatch({error, _}, throng_bench_sasl:scram_verify(S1, <<"v=AAAAAAAAAAAAAAAAAAAAAAAAAAA=">>)).

%% RFC 7677 section 3.
scram_sha256_vector_test() ->
    {_, S0} = throng_bench_sasl:scram_first('scram-sha-256', <<"user">>, <<"rOprNGfwEbeRWgbNEkqO">>),
    {ok, Final, S1} = throng_bench_sasl:scram_final(
                        S0, <<"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                              "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096">>, <<"pencil">>),
    ?assertEqual(<<"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                   "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=">>, Final),
    ?assertEqual(ok, throng_bench_sasl:scram_verify(
                       S1, <<"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=">>)).

scram_rejects_foreign_nonce_test() ->
    {_, S0} = throng_bench_sasl:scram_first('scram-sha-1', <<"u">>, <<"abc">>),
    ?assertMatch({error, _}, throng_bench_sasl:scram_final(S0, <<"r=xyz,s=QSXCR+Q6sek8bf92,i=1">>,
                                                           <<"p">>)),
    ?assertMatch({error, _}, throng_bench_sasl:scram_final(S0, <<"r=abcdef">>, <<"p">>)).

scram_escapes_user_name_test() ->
    {First, _} = throng_bench_sasl:scram_first('scram-sha-1', <<"a=b,c">>, <<"n">>),
    ?assertEqual(<<"n,,n=a=3Db=2Cc,r=n">>, First).

%% -PLUS (RFC 5802 §6): the gs2 header names tls-server-end-point, and the
%% client-final message's c= carries it with the binding data.
scram_plus_binds_test() ->
    {First, S0} = throng_bench_sasl:scram_first('scram-sha-256-plus', <<"user">>, <<"nonce">>,
                                                <<"certificate hash">>),
    ?assertEqual(<<"p=tls-server-end-point,,n=user,r=nonce">>, First),
    {ok, Final, _} = throng_bench_sasl:scram_final(S0, <<"r=nonceSERVER,s=c2FsdA==,i=1">>,
                                                   <<"pencil">>),
    [C | _] = binary:split(Final, <<",">>),
    ?assertEqual(<<"c=", (base64:encode(<<"p=tls-server-end-point,,certificate hash">>))/binary>>, C).

%% RFC 5929 §4.1: the certificate's own signature hash, SHA-256 for SHA-1.
end_point_hash_test() ->
    [begin
         #{cert := Der} = public_key:pkix_test_root_cert("throng bench", [{digest, Digest}]),
         ?assertEqual(crypto:hash(Expected, Der), throng_bench_sasl:end_point_hash(Der)),
         ?assertEqual(crypto:hash(Expected, Der),
                      throng_bench_sasl:end_point_hash(public_key:pkix_decode_cert(Der, plain)))
     end || {Digest, Expected} <- [{sha256, sha256}, {sha384, sha384}, {sha512, sha512},
                                   {sha, sha256}]].
