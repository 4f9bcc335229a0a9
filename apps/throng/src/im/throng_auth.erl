%% @doc Accounts and credentials: registration, password changes, bulk
%% registration for load tests, and the credential lookups SASL needs.
%%
%% Passwords are never stored: an account holds a salt, an iteration count
%% and the SCRAM StoredKey/ServerKey for SHA-1 and SHA-256 (RFC 5802).
%% PLAIN is verified by deriving the SCRAM keys from the offered password;
%% because that PBKDF2 costs about a millisecond, a successful PLAIN login is
%% remembered as HMAC(per-boot secret, password) for the user (see
%% auth.plain_cache_size), so the next login of that user is cheap. The cache
%% lives only in memory and is dropped on password change.
-module(throng_auth).

-include("throng.hrl").

-define(DISABLED, disabled_accounts).
%% In the process dictionary of the connection: the disabled flag its last
%% credential read found ({User, Server, boolean()}).
-define(LOGIN_READ, {?MODULE, login_read}).

-export([register/3, set_password/3, unregister/2, make_creds/1,
         bulk_register/5, bulk_register/6, sasl_ctx/1, prepare_user/1]).
-export([disable/2, enable/2, is_disabled/2, disabled_at_login/2, disabled_users/1]).
%% Called through rpc by bench/bench_stats_overhead.escript (and tests).
-ignore_xref([{bulk_register, 5}]).
%% API used by tests (credentials for storage-level tests).
-ignore_xref([{make_creds, 1}]).

%% @doc Creates an account. User is normalized (nodeprep), the password
%% SASLprep'ed.
-spec register(binary(), binary(), binary()) ->
    ok | {error, exists | invalid_user | invalid_password | unknown_host}.
register(User, Server, Password) ->
    with_account(User, Server, Password,
                 fun(U, S, Creds) ->
                         case throng_storage:create_account(U, S, Creds) of
                             ok ->
                                 throng_metrics:incr(registrations),
                                 throng_hooks:notify(user_registered, S, #{user => U, server => S}),
                                 logger:notice(#{what => account_registered, user => U,
                                                 server => S}),
                                 ok;
                             {error, exists} = E -> E
                         end
                 end).

%% @doc Changes a password (new salt, new keys).
-spec set_password(binary(), binary(), binary()) ->
    ok | {error, not_found | invalid_user | invalid_password | unknown_host}.
set_password(User, Server, Password) ->
    with_account(User, Server, Password,
                 fun(U, S, Creds) ->
                         %% A failed write may still have changed the keys in
                         %% memory: the cached PLAIN result goes either way.
                         try throng_storage:set_credentials(U, S, Creds)
                         after forget_plain(U, S)
                         end
                 end).

%% @doc Removes an account, its roster and offline messages, and ends its
%% sessions.
-spec unregister(binary(), binary()) -> ok | {error, not_found | invalid_user | unknown_host}.
unregister(User, Server) ->
    case prepare(User, Server) of
        {ok, U, S} ->
            case try throng_storage:remove_account(U, S)
                 after forget_plain(U, S), throng_fast:forget(U, S)
                 end of
                ok ->
                    _ = [throng_session:kick(Pid, <<"account removed">>)
                         || {_, Pid, _, _} <- throng_sm:resources({U, S})],
                    %% A later account of the same name starts enabled.
                    ok = throng_storage:kv_delete(?DISABLED, {U, S}),
                    removed(U, S),
                    logger:notice(#{what => account_removed, user => U, server => S}),
                    ok;
                {error, not_found} = E -> E
            end;
        {error, _} = E -> E
    end.

%%% Disabled accounts (XEP-0133 disable-user): the account and its data
%%% stay; it cannot log in (SASL `account-disabled', RFC 6120 §6.5.1) until
%%% it is enabled again. One key per disabled account in the store (bucket
%%% `disabled_accounts'), read once per successful authentication.

%% @doc Disables an account and ends its sessions.
-spec disable(binary(), binary()) -> ok | {error, not_found | invalid_user | unknown_host}.
disable(User, Server) ->
    case prepare(User, Server) of
        {ok, U, S} ->
            case throng_storage:account_exists(U, S) of
                false -> {error, not_found};
                true ->
                    ok = throng_storage:kv_put(?DISABLED, {U, S},
                                               #{since => erlang:system_time(second)}),
                    _ = [throng_session:kick(Pid, <<"account disabled">>)
                         || {_, Pid, _, _} <- throng_sm:resources({U, S})],
                    logger:notice(#{what => account_disabled, user => U, server => S}),
                    ok
            end;
        {error, _} = E -> E
    end.

%% @doc Lets a disabled account log in again.
-spec enable(binary(), binary()) -> ok | {error, not_disabled | invalid_user | unknown_host}.
enable(User, Server) ->
    case prepare(User, Server) of
        {ok, U, S} ->
            case is_disabled(U, S) of
                false -> {error, not_disabled};
                true ->
                    ok = throng_storage:kv_delete(?DISABLED, {U, S}),
                    logger:notice(#{what => account_enabled, user => U, server => S}),
                    ok
            end;
        {error, _} = E -> E
    end.

%% @doc Whether the (normalized) account U@S is disabled.
-spec is_disabled(binary(), binary()) -> boolean().
is_disabled(U, S) ->
    throng_storage:kv_get(?DISABLED, {U, S}) =/= not_found.

%% @doc Whether U@S is disabled, as the login's credential read found it
%% when that read was made by this process for this account (one read
%% less: the flag came with the credentials); else read now.
-spec disabled_at_login(binary(), binary()) -> boolean().
disabled_at_login(U, S) ->
    case erase(?LOGIN_READ) of
        {U, S, Disabled} -> Disabled;
        _ -> is_disabled(U, S)
    end.

%% @doc The disabled accounts of a host, sorted user names.
-spec disabled_users(binary()) -> [binary()].
disabled_users(Host) ->
    lists:sort([U || {U, S} <- throng_storage:kv_keys(?DISABLED), S =:= Host]).

%% The modules forget the account's data (archive, PEP nodes, vCard, ...)
%% in one batch: their deletes become durable together, one sync, not one
%% each. A sync that fails is logged; the account is gone either way.
removed(U, S) ->
    try throng_storage:batch(fun() -> throng_hooks:notify(user_removed, S, #{user => U, server => S}) end)
    catch error:{storage_failed, Why} ->
            logger:error(#{what => account_data_removal_not_synced, user => U, server => S,
                           reason => Why})
    end.

with_account(User, Server, Password, Fun) ->
    case prepare(User, Server) of
        {ok, U, S} ->
            case throng_saslprep:prepare(Password) of
                {ok, Pw} when Pw =/= <<>> -> Fun(U, S, make_creds(Pw));
                _ -> {error, invalid_password}
            end;
        {error, _} = E -> E
    end.

prepare(User, Server) ->
    case {prepare_user(User), throng_jid:domainprep(Server)} of
        {error, _} -> {error, invalid_user};
        {_, error} -> {error, unknown_host};
        {U, S} ->
            case throng_router:is_local(S) of
                true -> {ok, U, S};
                false -> {error, unknown_host}
            end
    end.

%% @doc A username as stored: nodeprep'ed, not empty.
-spec prepare_user(binary()) -> binary() | error.
prepare_user(User) ->
    case throng_jid:nodeprep(User) of
        U when is_binary(U), U =/= <<>> -> U;
        _ -> error
    end.

%% @doc SCRAM credentials for a (SASLprep'ed) password with a fresh salt.
-spec make_creds(binary()) -> #scram_creds{}.
make_creds(Password) ->
    make_creds(Password, crypto:strong_rand_bytes(16), throng_config:get([auth, scram_iterations])).

-spec make_creds(binary(), binary(), pos_integer()) -> #scram_creds{}.
make_creds(Password, Salt, Iterations) ->
    #{stored_key := S1, server_key := K1} = throng_scram:keys(sha, Password, Salt, Iterations),
    #{stored_key := S2, server_key := K2} = throng_scram:keys(sha256, Password, Salt, Iterations),
    #scram_creds{salt = Salt, iterations = Iterations,
                 sha_stored = S1, sha_server = K1, sha256_stored = S2, sha256_server = K2}.

%%% Bulk registration

-define(BULK_CHUNK, 2000).

%% @doc Registers Prefix1..PrefixN on Server, all with one password, each
%% with a mutual roster of Contacts neighbours (see {@link contacts/3}),
%% subscription both. Existing accounts of those names are overwritten. The
%% SCRAM keys are derived once and shared (one salt for the whole batch):
%% these are load-test accounts. Progress goes to the Progress fun.
-spec bulk_register(binary(), binary(), pos_integer(), binary(), non_neg_integer()) ->
    {ok, non_neg_integer()} | {error, term()}.
bulk_register(Server, Prefix, N, Password, Contacts) ->
    bulk_register(Server, Prefix, N, Password, Contacts,
                  throng_config:get([auth, scram_iterations])).

%% @doc As bulk_register/5, with the PBKDF2 iteration count of these
%% accounts' credentials. Load tests of the login path use a low count so
%% that they measure the server rather than PBKDF2 (a PLAIN login derives
%% the key once per user and boot); benchmarks state the count they used.
-spec bulk_register(binary(), binary(), pos_integer(), binary(), non_neg_integer(),
                    pos_integer()) -> {ok, non_neg_integer()} | {error, term()}.
bulk_register(Server, Prefix, N, Password, Contacts, Iterations) ->
    case {throng_jid:domainprep(Server), throng_saslprep:prepare(Password)} of
        {S, {ok, Pw}} when is_binary(S), Pw =/= <<>> ->
            case throng_router:is_local(S) of
                false -> {error, unknown_host};
                true ->
                    Creds = make_creds(Pw, crypto:strong_rand_bytes(16), Iterations),
                    bulk_chunks(S, Prefix, N, Creds, Contacts, 1),
                    throng_metrics:add(registrations, N),
                    logger:notice(#{what => bulk_registered, server => S, count => N,
                                    prefix => Prefix, contacts => Contacts,
                                    scram_iterations => Iterations}),
                    {ok, N}
            end;
        {error, _} -> {error, unknown_host};
        _ -> {error, invalid_password}
    end.

bulk_chunks(_S, _Prefix, N, _Creds, _Contacts, From) when From > N ->
    ok;
bulk_chunks(S, Prefix, N, Creds, Contacts, From) ->
    To = min(N, From + ?BULK_CHUNK - 1),
    Users = [{user_name(Prefix, I), Creds,
              [#roster_item{jid = {user_name(Prefix, C), S}, subscription = both}
               || C <- contacts(I, N, Contacts)]}
             || I <- lists:seq(From, To)],
    ok = throng_storage:bulk_create(S, Users),
    bulk_chunks(S, Prefix, N, Creds, Contacts, To + 1).

user_name(Prefix, I) ->
    <<Prefix/binary, (integer_to_binary(I))/binary>>.

%% @doc The contacts of user I among users 1..N: its Contacts nearest
%% neighbours, Contacts/2 on each side, wrapping around (so the relation is
%% mutual). With fewer than Contacts + 1 users, everyone else.
-spec contacts(pos_integer(), pos_integer(), non_neg_integer()) -> [pos_integer()].
contacts(I, N, Contacts) when N =< Contacts + 1 ->
    [J || J <- lists:seq(1, N), J =/= I];
contacts(I, N, Contacts) ->
    Half = Contacts div 2,
    Offsets = [D || D <- lists:seq(-Half, Contacts - Half), D =/= 0],
    [((I - 1 + D + N) rem N) + 1 || D <- Offsets].

%%% SASL

%% @doc The context {@link throng_sasl} needs for a domain, for one
%% exchange: what an earlier exchange of this process read is forgotten.
-spec sasl_ctx(binary()) -> throng_sasl:ctx().
sasl_ctx(Server) ->
    _ = erase(?LOGIN_READ),
    #{host => Server,
      get_credentials => fun(U) -> login_read(U, Server) end,
      iterations => throng_config:get([auth, scram_iterations]),
      secret => throng_tables:boot_secret(),
      verify_plain => fun(U, Pw, Creds) -> verify_plain(U, Server, Pw, Creds) end}.

%% The credentials, read with what else the login needs from the store in
%% one read: the disabled flag (kept for disabled_at_login/2) and the keys
%% the modules ask for (hook login_keys; what was found goes to hook
%% login_values).
login_read(U, S) ->
    Args = #{user => U, server => S},
    {_, Wanted} = throng_hooks:run(login_keys, S, [], Args),
    try throng_storage:login_read(U, S, [{?DISABLED, {U, S}} | Wanted]) of
        {ok, C, [Disabled | Values]} ->
            put(?LOGIN_READ, {U, S, Disabled =/= not_found}),
            Wanted =:= [] orelse
                throng_hooks:notify(login_values, S, Args#{values => lists:zip(Wanted, Values)}),
            {ok, creds_map(C)};
        not_found ->
            not_found
    catch
        %% The store cannot answer now: temporary-auth-failure.
        error:{storage_failed, Why} -> {error, Why}
    end.

creds_map(#scram_creds{salt = Salt, iterations = I, sha_stored = S1, sha_server = K1,
                       sha256_stored = S2, sha256_server = K2}) ->
    #{salt => Salt, iterations => I,
      sha => #{stored_key => S1, server_key => K1},
      sha256 => #{stored_key => S2, server_key => K2}}.

%% @doc Checks a PLAIN password (already SASLprep'ed) against a user's
%% stored SHA-256 keys, through the login cache.
-spec verify_plain(binary(), binary(), binary(),
                   #{salt := binary(), iterations := pos_integer(), stored_key := binary()}) ->
    boolean().
verify_plain(U, S, Password, #{stored_key := Stored} = Creds) ->
    %% The tag binds the password to the stored key it was verified against:
    %% after a password change it no longer matches.
    Tag = plain_tag(Password, Stored),
    case throng_tables:plain_cache_get({U, S}) of
        Tag -> true;
        _ ->
            case throng_scram:verify_password(sha256, Password, Creds) of
                true -> throng_tables:plain_cache_put({U, S}, Tag), true;
                false -> false
            end
    end.

plain_tag(Password, StoredKey) ->
    crypto:macN(hmac, sha256, throng_tables:boot_secret(), [StoredKey, Password], 16).

forget_plain(U, S) ->
    throng_tables:plain_cache_delete({U, S}).
