%% @doc Key derivation for the TLS record layer: HKDF-Expand (RFC 5869) and
%% TLS 1.3's HKDF-Expand-Label (RFC 8446 §7.1), the TLS 1.2 PRF (RFC 5246
%% §5), and the AEAD suites Throng negotiates: their cipher, hash and key
%% sizes.
-module(throng_tls_kdf).

-export([suite/1, hkdf_expand/4, expand_label/5, tls13_keys/3, tls12_keys/4]).
%% Checked against RFC 5869's vectors (throng_tls_record_tests).
-ignore_xref([{hkdf_expand, 4}]).

-type hash() :: sha256 | sha384.
-type aead() :: aes_128_gcm | aes_256_gcm | chacha20_poly1305.
-export_type([hash/0, aead/0]).

%% @doc The AEAD cipher, the hash and the key length of a cipher suite (its
%% standard name), for the suites the handshake NIF allows.
-spec suite(atom()) -> {aead(), hash(), KeyLen :: pos_integer()}.
suite('TLS_AES_128_GCM_SHA256') -> {aes_128_gcm, sha256, 16};
suite('TLS_AES_256_GCM_SHA384') -> {aes_256_gcm, sha384, 32};
suite('TLS_CHACHA20_POLY1305_SHA256') -> {chacha20_poly1305, sha256, 32};
suite('TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256') -> {aes_128_gcm, sha256, 16};
suite('TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256') -> {aes_128_gcm, sha256, 16};
suite('TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384') -> {aes_256_gcm, sha384, 32};
suite('TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384') -> {aes_256_gcm, sha384, 32};
suite('TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256') -> {chacha20_poly1305, sha256, 32};
suite('TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256') -> {chacha20_poly1305, sha256, 32}.

-spec hkdf_expand(hash(), binary(), binary(), pos_integer()) -> binary().
hkdf_expand(Hash, PRK, Info, Len) ->
    expand(Hash, PRK, Info, Len, <<>>, 1, <<>>).

expand(_Hash, _PRK, _Info, Len, _Prev, _I, Acc) when byte_size(Acc) >= Len ->
    binary:part(Acc, 0, Len);
expand(Hash, PRK, Info, Len, Prev, I, Acc) ->
    T = crypto:mac(hmac, Hash, PRK, [Prev, Info, I]),
    expand(Hash, PRK, Info, Len, T, I + 1, <<Acc/binary, T/binary>>).

%% @doc HKDF-Expand-Label(Secret, Label, Context, Length).
-spec expand_label(hash(), binary(), binary(), binary(), pos_integer()) -> binary().
expand_label(Hash, Secret, Label, Context, Len) ->
    Full = <<"tls13 ", Label/binary>>,
    Info = <<Len:16, (byte_size(Full)):8, Full/binary, (byte_size(Context)):8, Context/binary>>,
    hkdf_expand(Hash, Secret, Info, Len).

%% The TLS 1.2 PRF: P_hash(Secret, Label ++ Seed), Len bytes.
-spec prf(hash(), binary(), binary(), binary(), pos_integer()) -> binary().
prf(Hash, Secret, Label, Seed, Len) ->
    S = <<Label/binary, Seed/binary>>,
    p_hash(Hash, Secret, S, Len, crypto:mac(hmac, Hash, Secret, S), <<>>).

p_hash(_Hash, _Secret, _Seed, Len, _A, Acc) when byte_size(Acc) >= Len ->
    binary:part(Acc, 0, Len);
p_hash(Hash, Secret, Seed, Len, A, Acc) ->
    Out = crypto:mac(hmac, Hash, Secret, <<A/binary, Seed/binary>>),
    p_hash(Hash, Secret, Seed, Len, crypto:mac(hmac, Hash, Secret, A), <<Acc/binary, Out/binary>>).

%% @doc TLS 1.3 traffic key and IV from a traffic secret (RFC 8446 §7.3).
-spec tls13_keys(hash(), binary(), pos_integer()) -> {Key :: binary(), IV :: binary()}.
tls13_keys(Hash, Secret, KeyLen) ->
    {expand_label(Hash, Secret, <<"key">>, <<>>, KeyLen),
     expand_label(Hash, Secret, <<"iv">>, <<>>, 12)}.

%% @doc TLS 1.2 AEAD keys from the master secret (RFC 5246 §6.3; AEAD
%% suites have no MAC keys): {ClientKey, ClientIV, ServerKey, ServerIV}.
%% The IV is the 4-byte salt of AES-GCM (RFC 5288) or ChaCha20-Poly1305's
%% 12 bytes (RFC 7905).
-spec tls12_keys(atom(), binary(), binary(), binary()) ->
    {binary(), binary(), binary(), binary()}.
tls12_keys(Suite, Master, ClientRandom, ServerRandom) ->
    {Aead, Hash, KeyLen} = suite(Suite),
    IVLen = case Aead of chacha20_poly1305 -> 12; _ -> 4 end,
    Block = prf(Hash, Master, <<"key expansion">>, <<ServerRandom/binary, ClientRandom/binary>>,
                2 * (KeyLen + IVLen)),
    <<CK:KeyLen/binary, SK:KeyLen/binary, CIV:IVLen/binary, SIV:IVLen/binary>> = Block,
    {CK, CIV, SK, SIV}.
