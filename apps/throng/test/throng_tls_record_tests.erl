%% The TLS record layer and its key derivation, without sockets: RFC 5869's
%% HKDF vector, and PropEr round trips between a server's state and its
%% mirror (the same keys seen from the client's side) for every suite and
%% both versions, with records cut anywhere. rfc8446_tls_SUITE checks the
%% same code against OTP's ssl over real sockets.
-module(throng_tls_record_tests).
-include_lib("eunit/include/eunit.hrl").

-include("throng_proper.hrl").

%% RFC 5869 A.1 (SHA-256, basic).
hkdf_rfc5869_test() ->
    IKM = binary:copy(<<16#0b>>, 22),
    Salt = binary:decode_hex(<<"000102030405060708090a0b0c">>),
    Info = binary:decode_hex(<<"f0f1f2f3f4f5f6f7f8f9">>),
    PRK = crypto:mac(hmac, sha256, Salt, IKM),    % HKDF-Extract
    ?assertEqual(binary:decode_hex(<<"077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5">>),
                 PRK),
    ?assertEqual(binary:decode_hex(<<"3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                                     "34007208d5b887185865">>),
                 throng_tls_kdf:hkdf_expand(sha256, PRK, Info, 42)).

%% RFC 8448 §3 (simple 1-RTT handshake): the server's application traffic
%% key and IV from its traffic secret.
tls13_keys_rfc8448_test() ->
    Secret = binary:decode_hex(<<"a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643">>),
    {Key, IV} = throng_tls_kdf:tls13_keys(sha256, Secret, 16),
    ?assertEqual(binary:decode_hex(<<"9f02283b6c9c07efc26bb9f2ac92e356">>), Key),
    ?assertEqual(binary:decode_hex(<<"cf782b88dd83549aadf1e984">>), IV).

suites(tls13) ->
    ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];
suites(tls12) ->
    ['TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', 'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384',
     'TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256'].

%% A server state and its mirror: what the server seals, the mirror opens,
%% and the other way round.
pair(tls13, Suite) ->
    {_, Hash, _} = throng_tls_kdf:suite(Suite),
    Len = case Hash of sha256 -> 32; sha384 -> 48 end,
    Server = throng_tls_record:new(#{version => tls13, cipher => Suite, write_records => 2,
                                     client_secret => crypto:strong_rand_bytes(Len),
                                     server_secret => crypto:strong_rand_bytes(Len)}),
    {Server, throng_tls_record:mirror(Server)};
pair(tls12, Suite) ->
    Server = throng_tls_record:new(#{version => tls12, cipher => Suite,
                                     master_secret => crypto:strong_rand_bytes(48),
                                     client_random => crypto:strong_rand_bytes(32),
                                     server_random => crypto:strong_rand_bytes(32)}),
    {Server, throng_tls_record:mirror(Server)}.

%% The server seals Data; the mirror opens it whatever the cut of the
%% bytes; and back.
prop_round_trip() ->
    ?FORALL({V, Data, Cuts}, {proper_types:oneof([tls13, tls12]), proper_types:binary(), proper_types:list(proper_types:pos_integer())},
            begin
                Suite = lists:nth(1 + erlang:phash2(Data, 3), suites(V)),
                {Server, Mirror} = pair(V, Suite),
                Wire = iolist_to_binary(throng_tls_record:seal(Data, Server)),
                {Got, Mirror1} = open_in_pieces(Wire, cut(Wire, Cuts), Mirror, <<>>),
                Back = iolist_to_binary(throng_tls_record:seal(Data, Mirror1)),
                {ok, Got2, [], _} = throng_tls_record:open(Back, Server),
                Got =:= Data andalso Got2 =:= Data
            end).

cut(Wire, Cuts) ->
    cut(Wire, Cuts, []).
cut(<<>>, _, Acc) -> lists:reverse(Acc);
cut(Wire, [], Acc) -> lists:reverse([Wire | Acc]);
cut(Wire, [C | Cs], Acc) ->
    K = min(C, byte_size(Wire)),
    <<P:K/binary, Rest/binary>> = Wire,
    cut(Rest, Cs, [P | Acc]).

open_in_pieces(_Wire, [], S, Acc) -> {Acc, S};
open_in_pieces(Wire, [P | Ps], S, Acc) ->
    {ok, Plain, [], S1} = throng_tls_record:open(P, S),
    open_in_pieces(Wire, Ps, S1, <<Acc/binary, Plain/binary>>).

round_trip_test_() ->
    {timeout, 120, ?_assert(proper:quickcheck(prop_round_trip(), [{numtests, 300}, {to_file, user}]))}.

%% Every suite and version, a record of each size class.
each_suite_test() ->
    [begin
         {Server, Mirror} = pair(V, Suite),
         Data = crypto:strong_rand_bytes(40000),
         Wire = iolist_to_binary(throng_tls_record:seal(Data, Server)),
         ?assertMatch({ok, Data, [], _}, throng_tls_record:open(Wire, Mirror))
     end || V <- [tls13, tls12], Suite <- suites(V)].

%% One flipped bit anywhere in a record: bad_record_mac, and the alert.
tampered_test() ->
    [begin
         {Server, Mirror} = pair(V, hd(suites(V))),
         Wire = iolist_to_binary(throng_tls_record:seal(<<"hello">>, Server)),
         Pos = byte_size(Wire) - 3,
         <<A:Pos/binary, B, C/binary>> = Wire,
         ?assertMatch({error, {alert, bad_record_mac}, [_ | _]},
                      throng_tls_record:open(<<A/binary, (B bxor 4), C/binary>>, Mirror))
     end || V <- [tls13, tls12]].

%% A record longer than the protocol allows, and bytes that are no record.
malformed_test() ->
    {Server, _} = pair(tls13, hd(suites(tls13))),
    ?assertMatch({error, {alert, record_overflow}, _},
                 throng_tls_record:open(<<23, 3, 3, 16#ff, 16#ff>>, Server)),
    ?assertMatch({error, {alert, decode_error}, _},
                 throng_tls_record:open(<<"GET / HTTP/1.1\r\n">>, Server)),
    %% A header cut short is kept for later, not refused.
    ?assertMatch({ok, <<>>, [], _}, throng_tls_record:open(<<23, 3>>, Server)).

%% RFC 8446 §5.1: a KeyUpdate must end its record (nothing may follow it
%% under the old key), and a handshake message split over records must not
%% be interleaved with other records: unexpected_message.
key_update_alignment_test() ->
    CS = binary:copy(<<1>>, 32),
    S0 = throng_tls_record:new(#{version => tls13, cipher => 'TLS_AES_128_GCM_SHA256',
                                 client_secret => CS, server_secret => binary:copy(<<2>>, 32),
                                 write_records => 0}),
    Seal = fun(Seq, Inner) ->
                   {K, IV} = throng_tls_kdf:tls13_keys(sha256, CS, 16),
                   Nonce = crypto:exor(IV, <<0:32, Seq:64>>),
                   H = <<23, 3, 3, (byte_size(Inner) + 16):16>>,
                   {C, T} = crypto:crypto_one_time_aead(aes_128_gcm, K, Nonce, Inner, H, 16, true),
                   <<H/binary, C/binary, T/binary>>
           end,
    KeyUpdate = <<24, 0, 0, 1, 0>>,
    Refused = fun(Wire, S) ->
                      case throng_tls_record:open(Wire, S) of
                          {error, {alert, unexpected_message}, _} -> true;
                          _ -> false
                      end
              end,
    %% two KeyUpdates in one record; a KeyUpdate and the start of another message
    ?assert(Refused(Seal(0, <<KeyUpdate/binary, KeyUpdate/binary, 22>>), S0)),
    ?assert(Refused(Seal(0, <<KeyUpdate/binary, 24, 22>>), S0)),
    %% application data while a handshake message is half received
    {ok, <<>>, _, S1} = throng_tls_record:open(Seal(0, <<24, 0, 22>>), S0),
    ?assert(Refused(Seal(1, <<"x", 23>>), S1)),
    %% the same message completed by the next record is fine, and so is a
    %% KeyUpdate alone in its record
    ?assertMatch({ok, <<>>, _, _}, throng_tls_record:open(Seal(1, <<0, 1, 0, 22>>), S1)),
    ?assertMatch({ok, <<>>, _, _}, throng_tls_record:open(Seal(0, <<KeyUpdate/binary, 22>>), S0)).

%% Sealing with a stale copy of the state never repeats a nonce: the write
%% sequence number is shared by every copy.
stale_copy_test() ->
    {Server, Mirror} = pair(tls13, hd(suites(tls13))),
    R1 = iolist_to_binary(throng_tls_record:seal(<<"one">>, Server)),
    R2 = iolist_to_binary(throng_tls_record:seal(<<"two">>, Server)),
    {ok, <<"onetwo">>, [], _} = throng_tls_record:open(<<R1/binary, R2/binary>>, Mirror).

%% RFC 8446 §5.5, with the limits lowered to renew a write key after 3
%% records and refuse a 7th: the first read after the server's third
%% record answers with a KeyUpdate under the old key and moves to the next
%% key; the mirror follows it and reads what comes after. Without reads,
%% the sixth record is the last one the key seals.
key_limits_test_() ->
    {setup, fun() -> throng_tls_record:set_limits(3, 6) end,
     fun(_) -> throng_tls_record:reset_limits() end,
     [fun key_update_after_soft_limit/0, fun tls12_refuses_at_hard_limit/0,
      fun chacha_has_no_limit/0]}.

key_update_after_soft_limit() ->
    {Server, Mirror} = pair(tls13, 'TLS_AES_128_GCM_SHA256'),
    ?assertEqual(2, throng_tls_record:written(Server)),       % the tickets
    W1 = iolist_to_binary(throng_tls_record:seal(<<"a">>, Server)),
    Ping = iolist_to_binary(throng_tls_record:seal(<<"ping">>, Mirror)),
    {ok, <<"ping">>, Out, Server1} = throng_tls_record:open(Ping, Server),
    Update = iolist_to_binary(Out),
    ?assertNotEqual(<<>>, Update),
    ?assertEqual(0, throng_tls_record:written(Server1)),
    %% The mirror reads the record, then the KeyUpdate (nothing to answer:
    %% update_not_requested), then the next key's records.
    {ok, <<"a">>, Answer, Mirror1} = throng_tls_record:open(<<W1/binary, Update/binary>>, Mirror),
    ?assertEqual(0, iolist_size(Answer)),
    W2 = iolist_to_binary(throng_tls_record:seal(<<"b">>, Server1)),
    ?assertMatch({ok, <<"b">>, _, _}, throng_tls_record:open(W2, Mirror1)),
    %% The old key no longer opens for the mirror: the records really
    %% changed keys.
    ?assertMatch({error, {alert, bad_record_mac}, _}, throng_tls_record:open(W2, Mirror)),
    %% Five more records under the new key fit (6 in all); then it refuses,
    %% also a write that would need three records at once.
    [_ = iolist_to_binary(throng_tls_record:seal(<<"c">>, Server1)) || _ <- lists:seq(1, 4)],
    ?assertEqual({error, key_limit},
                 throng_tls_record:seal(crypto:strong_rand_bytes(3 * 16384), Server1)),
    _ = iolist_to_binary(throng_tls_record:seal(<<"d">>, Server1)),
    ?assertEqual(6, throng_tls_record:written(Server1)),
    ?assertEqual({error, key_limit}, throng_tls_record:seal(<<"e">>, Server1)).

%% TLS 1.2 cannot change its keys: no KeyUpdate, and the key's limit ends
%% the writing.
tls12_refuses_at_hard_limit() ->
    {Server, Mirror} = pair(tls12, 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256'),
    [_ = iolist_to_binary(throng_tls_record:seal(<<"x">>, Server)) || _ <- lists:seq(1, 4)],
    Ping = iolist_to_binary(throng_tls_record:seal(<<"ping">>, Mirror)),
    {ok, <<"ping">>, NoUpdate, _} = throng_tls_record:open(Ping, Server),
    ?assertEqual(0, iolist_size(NoUpdate)),
    _ = iolist_to_binary(throng_tls_record:seal(<<"x">>, Server)),
    ?assertEqual({error, key_limit}, throng_tls_record:seal(<<"y">>, Server)).

%% ChaCha20-Poly1305's limit is beyond the sequence numbers (RFC 8446 §5.5).
chacha_has_no_limit() ->
    {Server, Mirror} = pair(tls13, 'TLS_CHACHA20_POLY1305_SHA256'),
    [_ = iolist_to_binary(throng_tls_record:seal(<<"x">>, Server)) || _ <- lists:seq(1, 10)],
    Ping = iolist_to_binary(throng_tls_record:seal(<<"ping">>, Mirror)),
    {ok, <<"ping">>, NoUpdate, _} = throng_tls_record:open(Ping, Server),
    ?assertEqual(0, iolist_size(NoUpdate)).
