%% @doc FAST tokens (XEP-0484): what lets a returning client log in with
%% one round trip and no PBKDF2 (the HT-* SASL mechanisms).
%%
%% Tokens are kept per account and per client (its XEP-0388 user-agent id,
%% stored as a hash: the id itself is never kept), in the storage's key-value
%% store (bucket `fast_tokens'), one entry per account: so they survive a
%% restart, follow the account's backend (Mnesia or PostgreSQL) and go with
%% it. Each client has two slots (XEP-0484 §"Token storage"): `current',
%% the token in use, and `new', one issued but not used yet; using `new'
%% makes it current and ends the old one. A token is bound to the
%% mechanism it was issued for, expires (`auth.fast_token_lifetime'), and
%% is void after a password change (it carries a tag of the account's
%% stored key). At most ?MAX_CLIENTS clients per account: the oldest go.
-module(throng_fast).

-export([tokens/4, issue/4, used/4, invalidate/3, forget/2, due/1]).

-define(BUCKET, fast_tokens).
-define(MAX_CLIENTS, 16).
-define(TOKEN_BYTES, 24).

-type slot() :: current | new.
%% {Token, Mechanism, IssuedAt, ExpiresAt, CredentialsTag}
-type token() :: {binary(), binary(), integer(), integer(), binary()}.
-export_type([slot/0, token/0]).

%% @doc The usable tokens of a client for a mechanism, with when each was
%% issued: `new' first, then `current'; `expired' when it has tokens for
%% it, none still valid; `none' when it has none; `unavailable' when the
%% store cannot answer (the login fails with temporary-auth-failure, not
%% as if the token were wrong or expired).
-spec tokens(binary(), binary(), binary(), binary()) ->
    {ok, [{slot(), binary(), integer()}]} | expired | none | unavailable.
tokens(U, S, UA, Mech) ->
    try valid_tokens(U, S, UA, Mech)
    catch error:{storage_failed, Why} ->
            logger:error(#{what => fast_tokens_unavailable, user => U, server => S, reason => Why}),
            unavailable
    end.

valid_tokens(U, S, UA, Mech) ->
    Client = maps:get(ua_key(UA), entry(U, S), #{}),
    Now = erlang:system_time(second),
    Tag = creds_tag(U, S),
    Mine = [{Slot, T} || Slot <- [new, current], {_, M, _, _, _} = T <- [slot(Slot, Client)],
                         M =:= Mech],
    case [{Slot, Tok, Issued} || {Slot, {Tok, _, Issued, Exp, TTag}} <- Mine,
                                  Exp > Now, TTag =:= Tag] of
        [] when Mine =/= [] -> expired;
        [] -> none;
        Valid -> {ok, Valid}
    end.

%% @doc A new token for the client (into its `new' slot): the token and
%% its expiry (seconds since the epoch).
-spec issue(binary(), binary(), binary(), binary()) -> {binary(), integer()}.
issue(U, S, UA, Mech) ->
    Token = base64:encode(crypto:strong_rand_bytes(?TOKEN_BYTES)),
    Now = erlang:system_time(second),
    Expiry = Now + throng_config:get([auth, fast_token_lifetime]),
    update(U, S, UA, fun(Client) -> Client#{new => {Token, Mech, Now, Expiry, creds_tag(U, S)},
                                          seen => Now}
                     end),
    {Token, Expiry}.

%% @doc A token was used to log in: `new' becomes `current' (the old
%% current token ends); the current one needs nothing.
-spec used(binary(), binary(), binary(), slot()) -> ok.
used(U, S, UA, new) ->
    update(U, S, UA, fun(#{new := New} = Client) ->
                             maps:remove(new, Client#{current => New,
                                                      seen => erlang:system_time(second)});
                        (Client) -> Client
                     end);
used(_U, _S, _UA, current) ->
    %% Nothing to write: a login with the current token costs no storage
    %% write (its client's place in the eviction order is from its last
    %% token).
    ok.

%% @doc Whether a token issued at Issued is old enough to be replaced
%% (`auth.fast_token_refresh'): a new one then comes with this login.
-spec due(integer()) -> boolean().
due(Issued) ->
    erlang:system_time(second) - Issued >= throng_config:get([auth, fast_token_refresh]).

%% @doc The client's tokens end (XEP-0484 `invalidate').
-spec invalidate(binary(), binary(), binary()) -> ok.
invalidate(U, S, UA) ->
    Entry = entry(U, S),
    put_entry(U, S, maps:remove(ua_key(UA), Entry)).

%% @doc Every token of the account ends (the account is removed).
-spec forget(binary(), binary()) -> ok.
forget(U, S) ->
    try throng_storage:kv_delete(?BUCKET, {U, S})
    catch error:{storage_failed, _} -> ok
    end.

%%% Internal

-spec slot(slot(), map()) -> token() | none.
slot(Slot, Client) -> maps:get(Slot, Client, none).

update(U, S, UA, Fun) ->
    Key = ua_key(UA),
    Entry = entry(U, S),
    Client = Fun(maps:get(Key, Entry, #{})),
    put_entry(U, S, bounded(Entry#{Key => Client})).

%% At most ?MAX_CLIENTS clients: the ones seen longest ago go.
bounded(Entry) when map_size(Entry) =< ?MAX_CLIENTS ->
    Entry;
bounded(Entry) ->
    Sorted = lists:sort([{maps:get(seen, C, 0), K} || {K, C} <- maps:to_list(Entry)]),
    {_, Oldest} = hd(Sorted),
    bounded(maps:remove(Oldest, Entry)).

entry(U, S) ->
    case throng_storage:kv_get(?BUCKET, {U, S}) of
        {ok, Entry} when is_map(Entry) -> Entry;
        _ -> #{}
    end.

put_entry(U, S, Entry) when map_size(Entry) =:= 0 ->
    throng_storage:kv_delete(?BUCKET, {U, S});
put_entry(U, S, Entry) ->
    throng_storage:kv_put(?BUCKET, {U, S}, Entry).

ua_key(UA) ->
    crypto:hash(sha256, UA).

%% Ties a token to the account's current credentials: a password change
%% gives new keys, and the tokens issued before no longer match.
creds_tag(U, S) ->
    case throng_storage:get_credentials(U, S) of
        {ok, Creds} -> binary:part(crypto:hash(sha256, term_to_binary(Creds)), 0, 16);
        not_found -> <<>>
    end.
