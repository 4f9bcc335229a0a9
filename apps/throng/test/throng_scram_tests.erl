%% @doc RFC 5802 / RFC 7677 computations: the worked examples of both RFCs,
%% reproduced byte for byte by a client built from throng_scram's functions,
%% plus the server's checks and the keys it stores.
-module(throng_scram_tests).

-include_lib("eunit/include/eunit.hrl").

%%% RFC 5802 §5 (SCRAM-SHA-1) and RFC 7677 §3 (SCRAM-SHA-256): user "user",
%%% password "pencil".

-define(SHA1_CLIENT_FIRST_BARE, <<"n=user,r=fyko+d2lbbFgONRv9qkxdawL">>).
-define(SHA1_SERVER_FIRST,
        <<"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096">>).
-define(SHA1_CLIENT_FINAL,
        <<"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
          "p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=">>).
-define(SHA1_SERVER_FINAL, <<"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=">>).

-define(SHA256_CLIENT_FIRST_BARE, <<"n=user,r=rOprNGfwEbeRWgbNEkqO">>).
-define(SHA256_SERVER_FIRST,
        <<"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
          "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096">>).
-define(SHA256_CLIENT_FINAL,
        <<"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
          "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=">>).
-define(SHA256_SERVER_FINAL, <<"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=">>).

%% A client for the example: from the client-first-bare and server-first
%% messages, the client-final message and the server-final it expects.
example_client(Hash, ClientFirstBare, ServerFirst, Password) ->
    #{<<"r">> := Nonce, <<"s">> := Salt64, <<"i">> := Iter} = attributes(ServerFirst),
    Salted = throng_scram:salted_password(Hash, Password, base64:decode(Salt64),
                                          binary_to_integer(Iter)),
    ClientKey = throng_scram:client_key(Hash, Salted),
    StoredKey = throng_scram:stored_key(Hash, ClientKey),
    WithoutProof = <<"c=", (base64:encode(<<"n,,">>))/binary, ",r=", Nonce/binary>>,
    AuthMessage = <<ClientFirstBare/binary, ",", ServerFirst/binary, ",",
                    WithoutProof/binary>>,
    Proof = throng_scram:client_proof(
              ClientKey, throng_scram:client_signature(Hash, StoredKey, AuthMessage)),
    ServerSignature = throng_scram:server_signature(
                        Hash, throng_scram:server_key(Hash, Salted), AuthMessage),
    {<<WithoutProof/binary, ",p=", (base64:encode(Proof))/binary>>,
     <<"v=", (base64:encode(ServerSignature))/binary>>,
     #{stored_key => StoredKey, auth_message => AuthMessage, proof => Proof}}.

attributes(Message) ->
    maps:from_list([list_to_tuple(binary:split(A, <<"=">>))
                    || A <- binary:split(Message, <<",">>, [global])]).

rfc5802_sha1_example_test() ->
    {ClientFinal, ServerFinal, _} =
        example_client(sha, ?SHA1_CLIENT_FIRST_BARE, ?SHA1_SERVER_FIRST, <<"pencil">>),
    ?assertEqual(?SHA1_CLIENT_FINAL, ClientFinal),
    ?assertEqual(?SHA1_SERVER_FINAL, ServerFinal).

rfc7677_sha256_example_test() ->
    {ClientFinal, ServerFinal, _} =
        example_client(sha256, ?SHA256_CLIENT_FIRST_BARE, ?SHA256_SERVER_FIRST,
                       <<"pencil">>),
    ?assertEqual(?SHA256_CLIENT_FINAL, ClientFinal),
    ?assertEqual(?SHA256_SERVER_FINAL, ServerFinal).

%% The server's check accepts the RFC's proof and nothing else.
verify_proof_test() ->
    {_, _, #{stored_key := StoredKey, auth_message := AuthMessage, proof := Proof}} =
        example_client(sha256, ?SHA256_CLIENT_FIRST_BARE, ?SHA256_SERVER_FIRST,
                       <<"pencil">>),
    ?assert(throng_scram:verify_proof(sha256, StoredKey, AuthMessage, Proof)),
    <<First, Rest/binary>> = Proof,
    ?assertNot(throng_scram:verify_proof(sha256, StoredKey, AuthMessage,
                                         <<(First bxor 1), Rest/binary>>)),
    ?assertNot(throng_scram:verify_proof(sha256, StoredKey, [AuthMessage, $x], Proof)),
    ?assertNot(throng_scram:verify_proof(sha256, StoredKey, AuthMessage, Rest)),
    ?assertNot(throng_scram:verify_proof(sha256, StoredKey, AuthMessage, <<>>)).

%% keys/4 gives what the primitive functions give; lengths per hash.
keys_test() ->
    Salt = <<"saltsaltsaltsalt">>,
    [begin
         Salted = throng_scram:salted_password(Hash, <<"pw">>, Salt, 7),
         ?assertEqual(Size, byte_size(Salted)),
         ?assertEqual(#{stored_key => throng_scram:stored_key(
                                        Hash, throng_scram:client_key(Hash, Salted)),
                        server_key => throng_scram:server_key(Hash, Salted)},
                      throng_scram:keys(Hash, <<"pw">>, Salt, 7))
     end || {Hash, Size} <- [{sha, 20}, {sha256, 32}]].

%% SaltedPassword is PBKDF2 (RFC 6070 test vector 2: "password", "salt",
%% 2 iterations, SHA-1).
pbkdf2_vector_test() ->
    ?assertEqual(<<16#ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957:160>>,
                 throng_scram:salted_password(sha, <<"password">>, <<"salt">>, 2)).

verify_password_test() ->
    Salt = base64:decode(<<"W22ZaJ0SNY7soEsUEjb6gQ==">>),
    #{stored_key := StoredKey} = throng_scram:keys(sha256, <<"pencil">>, Salt, 4096),
    Creds = #{salt => Salt, iterations => 4096, stored_key => StoredKey},
    ?assert(throng_scram:verify_password(sha256, <<"pencil">>, Creds)),
    ?assertNot(throng_scram:verify_password(sha256, <<"pencil ">>, Creds)),
    ?assertNot(throng_scram:verify_password(sha256, <<"Pencil">>, Creds)),
    %% A wrong-sized stored key is a mismatch, not a crash.
    ?assertNot(throng_scram:verify_password(sha256, <<"pencil">>,
                                            Creds#{stored_key => <<1, 2, 3>>})),
    %% The other hash's keys never match.
    ?assertNot(throng_scram:verify_password(sha, <<"pencil">>, Creds)).

%% Prints (does not assert) what one PBKDF2 at 4096 iterations costs here.
pbkdf2_cost_test_() ->
    {timeout, 30,
     fun() ->
             [begin
                  Times = [element(1, timer:tc(throng_scram, salted_password,
                                               [Hash, <<"pencil">>, <<"0123456789abcdef">>,
                                                4096]))
                           || _ <- lists:seq(1, 21)],
                  Sorted = lists:sort(Times),
                  io:format(user, "~nPBKDF2-HMAC-~s, 4096 iterations: median ~b us "
                            "(min ~b, max ~b, 21 runs)~n",
                            [Hash, lists:nth(11, Sorted), hd(Sorted), lists:last(Sorted)])
              end || Hash <- [sha, sha256]]
     end}.
