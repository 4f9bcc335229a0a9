%% @doc The SCRAM computations of RFC 5802 §3 (SHA-1) and RFC 7677
%% (SHA-256), and the credentials Throng stores: per hash a StoredKey and a
%% ServerKey derived from a salted password, never the password itself.
%%
%% Passwords given here must already be SASLprep'ed (throng_saslprep;
%% throng_auth prepares a password before it derives an account's keys). The
%% SASL exchange itself (message syntax, nonces, state) is in throng_sasl.
-module(throng_scram).

-export([salted_password/4, client_key/2, stored_key/2, server_key/2,
         client_signature/3, server_signature/3, client_proof/2,
         verify_proof/4, keys/4, verify_password/3]).
%% API used by tests: the client side of SCRAM (throng_test_client, the RFC
%% test vectors).
-ignore_xref([{salted_password, 4}, {client_key, 2}, {stored_key, 2}, {server_key, 2},
              {client_signature, 3}, {client_proof, 2}]).

-type hash() :: sha | sha256.
-type keys() :: #{stored_key := binary(), server_key := binary()}.
%% What a user's SCRAM credentials are stored as: one salt and iteration
%% count shared by both hashes.
-type creds() :: #{salt := binary(), iterations := pos_integer(),
                   sha := keys(), sha256 := keys()}.
-export_type([hash/0, keys/0, creds/0]).

%% @doc SaltedPassword := Hi(Normalize(password), salt, i), Hi being PBKDF2
%% with HMAC(Hash) and an output as long as the hash.
-spec salted_password(hash(), binary(), binary(), pos_integer()) -> binary().
salted_password(Hash, Password, Salt, Iterations)
  when is_integer(Iterations), Iterations > 0 ->
    crypto:pbkdf2_hmac(Hash, Password, Salt, Iterations, digest_size(Hash)).

%% @doc ClientKey := HMAC(SaltedPassword, "Client Key").
-spec client_key(hash(), binary()) -> binary().
client_key(Hash, SaltedPassword) ->
    crypto:mac(hmac, Hash, SaltedPassword, <<"Client Key">>).

%% @doc StoredKey := H(ClientKey).
-spec stored_key(hash(), binary()) -> binary().
stored_key(Hash, ClientKey) ->
    crypto:hash(Hash, ClientKey).

%% @doc ServerKey := HMAC(SaltedPassword, "Server Key").
-spec server_key(hash(), binary()) -> binary().
server_key(Hash, SaltedPassword) ->
    crypto:mac(hmac, Hash, SaltedPassword, <<"Server Key">>).

%% @doc ClientSignature := HMAC(StoredKey, AuthMessage).
-spec client_signature(hash(), binary(), iodata()) -> binary().
client_signature(Hash, StoredKey, AuthMessage) ->
    crypto:mac(hmac, Hash, StoredKey, AuthMessage).

%% @doc ServerSignature := HMAC(ServerKey, AuthMessage).
-spec server_signature(hash(), binary(), iodata()) -> binary().
server_signature(Hash, ServerKey, AuthMessage) ->
    crypto:mac(hmac, Hash, ServerKey, AuthMessage).

%% @doc ClientProof := ClientKey XOR ClientSignature. (XOR with the
%% signature again gives the ClientKey back, which is how the server checks
%% a proof: see {@link verify_proof/4}.)
-spec client_proof(binary(), binary()) -> binary().
client_proof(ClientKey, ClientSignature)
  when byte_size(ClientKey) =:= byte_size(ClientSignature) ->
    crypto:exor(ClientKey, ClientSignature).

%% @doc The server's check of a client proof: H(ClientProof XOR
%% ClientSignature) must equal StoredKey. Constant time in the contents of
%% the proof; a proof of the wrong length is simply false.
-spec verify_proof(hash(), binary(), iodata(), binary()) -> boolean().
verify_proof(Hash, StoredKey, AuthMessage, Proof)
  when byte_size(Proof) =:= byte_size(StoredKey) ->
    Signature = client_signature(Hash, StoredKey, AuthMessage),
    crypto:hash_equals(stored_key(Hash, crypto:exor(Proof, Signature)), StoredKey);
verify_proof(_Hash, _StoredKey, _AuthMessage, _Proof) ->
    false.

%% @doc The keys stored for a password (already SASLprep'ed).
-spec keys(hash(), binary(), binary(), pos_integer()) -> keys().
keys(Hash, Password, Salt, Iterations) ->
    Salted = salted_password(Hash, Password, Salt, Iterations),
    #{stored_key => stored_key(Hash, client_key(Hash, Salted)),
      server_key => server_key(Hash, Salted)}.

%% @doc Checks a plaintext password (already SASLprep'ed, e.g. from SASL
%% PLAIN) against stored keys: one PBKDF2, then a constant-time comparison.
-spec verify_password(hash(), binary(),
                      #{salt := binary(), iterations := pos_integer(),
                        stored_key := binary(), _ => _}) -> boolean().
verify_password(Hash, Password,
                #{salt := Salt, iterations := Iterations, stored_key := StoredKey}) ->
    Salted = salted_password(Hash, Password, Salt, Iterations),
    Candidate = stored_key(Hash, client_key(Hash, Salted)),
    byte_size(Candidate) =:= byte_size(StoredKey)
        andalso crypto:hash_equals(Candidate, StoredKey).

digest_size(sha) -> 20;
digest_size(sha256) -> 32.
