%% @doc Extension modules: the behaviour a feature module implements, and
%% the per-host registry of the enabled ones.
%%
%% A feature (service discovery, ping, in-band registration, offline
%% messages, ...) is one module, enabled per host by one line under
%% `modules:' in throng.yml (see docs/extensions.md). At boot, for every
%% host, {@link start/0} reads the enabled modules and their validated
%% options, starts the ones that need it, installs their hooks
%% ({@link throng_hooks}) and builds the host's registry — IQ handlers by
%% namespace, disco#info features and identities, stream features — in one
%% `persistent_term' entry, so every lookup on a session's path is a read
%% with no message and no copy.
%%
%% The built-in IM handlers (roster subscriptions, presence) are installed
%% the same way, from {@link builtin/0}, and cannot be disabled.
-module(throng_ext).

-include("throng.hrl").

-export([start/0, stop/0, start_host/2, stop_host/1,
         iq_handler/3, disco_features/1, disco_identities/1, account_features/1,
         account_identities/1,
         stream_features/2, modules/1, is_enabled/2, opt/3]).
%% API used by tests and operators (docs/extensions.md).
-ignore_xref([{start_host, 2}, {stop_host, 1}, {modules, 1}, {is_enabled, 2}]).

-type iq_scope() :: server | account | preauth.
-type identity() :: {Category :: binary(), Type :: binary(), Name :: binary()}.
-type iq_ctx() :: #{scope := iq_scope(), host := binary(), payload := #xmlel{},
                    from := #jid{} | undefined, to := #jid{},
                    ip => inet:ip_address() | undefined}.
-export_type([iq_scope/0, identity/0, iq_ctx/0]).

%% The options the module takes (validated at boot under modules.NAME).
-callback options() -> throng_config_spec:spec().
%% IQ namespaces it answers: server (to the domain, or the user's own bare
%% JID when no account handler takes it), account (to a user's bare JID,
%% answered on the account's behalf), preauth (on a stream that has not
%% authenticated). Fun(IQ, iq_ctx()) returns the reply, or noreply.
-callback iq_handlers() -> [{iq_scope(), Namespace :: binary(), Fun :: atom()}].
%% Hooks: Fun(Acc, Args), see throng_hooks.
-callback hooks() -> [{throng_hooks:event(), Seq :: integer(), Fun :: atom()}].
-callback disco_features(Host :: binary()) -> [binary()].
-callback disco_identities(Host :: binary()) -> [identity()].
%% Features added to the disco#info of every user's bare JID (answered for
%% the account: an archive, a PEP service, ...).
-callback account_features(Host :: binary()) -> [binary()].
%% Identities added there (the account is a PEP service: pubsub/pep).
-callback account_identities(Host :: binary()) -> [identity()].
%% Extra stream features (iodata) before authentication or after it.
-callback stream_features(pre_auth | authenticated, Host :: binary()) -> iodata().
-callback start(Host :: binary(), Opts :: map()) -> ok | {error, term()}.
-callback stop(Host :: binary()) -> ok.
%% A message {throng_session, ext, Module, Msg} reached a session process.
-callback session_info(Msg :: term(), throng_session:ctx()) -> [throng_session:action()].
%% The kind (for the counters) and bytes of a stanza the module queued for
%% a session (see throng_session:item()), and what to do with it when the
%% session ends before the client acknowledged it.
-callback item_bytes(Data :: term(), Host :: binary()) ->
    {message | presence | iq | other, iodata()}.
-callback item_reroute(Data :: term(), User :: #jid{}) -> ok.
-optional_callbacks([disco_features/1, disco_identities/1, account_features/1,
                     account_identities/1,
                     stream_features/2, start/2, stop/1,
                     session_info/2, item_bytes/2, item_reroute/2]).

-define(KEY(Host), {?MODULE, Host}).

%% @doc Modules that are part of the server itself: they implement hooks/0
%% only and run for every host.
-spec builtin() -> [module()].
builtin() ->
    [throng_roster, throng_presence].

%% @doc Starts the enabled modules of every host. Stops at the first module
%% that fails, with a message naming it.
-spec start() -> ok | {error, string()}.
start() ->
    start_hosts(throng_config:get([hosts])).

start_hosts([]) ->
    ok;
start_hosts([Host | Rest]) ->
    case start_host(Host, throng_config:modules(Host)) of
        ok -> start_hosts(Rest);
        {error, _} = E -> E
    end.

%% @doc Starts a host's modules (#{Module => Opts}) and publishes its registry.
-spec start_host(binary(), #{module() => map()}) -> ok | {error, string()}.
start_host(Host, Mods) ->
    Enabled = lists:sort(maps:keys(Mods)),
    %% function_exported/3 (optional callbacks) is false for a module not
    %% loaded yet.
    _ = [code:ensure_loaded(M) || M <- Enabled],
    try iq_handlers(Enabled) of
        Iq -> start_checked(Host, Enabled, Mods, Iq)
    catch
        throw:{conflict, Msg} -> {error, lists:flatten(io_lib:format("~ts: ~ts", [Host, Msg]))}
    end.

start_checked(Host, Enabled, Mods, Iq) ->
    case start_each(Host, Enabled, Mods, []) of
        ok ->
            Hooks = [{Event, Seq, M, Fun} || M <- builtin() ++ Enabled,
                                             {Event, Seq, Fun} <- M:hooks()],
            ok = throng_hooks:install(Host, Hooks),
            %% The options first: modules read them while they describe
            %% their features.
            persistent_term:put(?KEY(Host), (registry(Host))#{modules => Mods}),
            persistent_term:put(?KEY(Host), registry(Host, Enabled, Mods, Iq)),
            logger:info(#{what => modules_started, host => Host, modules => Enabled}),
            ok;
        {error, _} = E ->
            E
    end.

start_each(_Host, [], _Opts, _Started) ->
    ok;
start_each(Host, [M | Rest], Opts, Started) ->
    Result = case erlang:function_exported(M, start, 2) of
                 true -> try M:start(Host, maps:get(M, Opts))
                         catch C:R -> {error, {C, R}}
                         end;
                 false -> ok
             end,
    case Result of
        ok -> start_each(Host, Rest, Opts, [M | Started]);
        {error, Why} ->
            _ = [stop_module(Host, S) || S <- Started],
            {error, lists:flatten(io_lib:format("module ~s on ~ts: ~tp", [M, Host, Why]))}
    end.

registry(Host, Enabled, Opts, Iq) ->
    #{modules => Opts,
      iq => maps:from_list(Iq),
      features => lists:usort([?NS_ROSTER | optional(Enabled, disco_features, [Host])]),
      identities => lists:usort(optional(Enabled, disco_identities, [Host])),
      account_features => lists:usort(optional(Enabled, account_features, [Host])),
      account_identities => lists:usort(optional(Enabled, account_identities, [Host])),
      stream_features => maps:from_list(
                           [{Stage, optional(Enabled, stream_features, [Stage, Host], iodata)}
                            || Stage <- [pre_auth, authenticated]])}.

%% Two modules answering the same namespace is a configuration error.
iq_handlers(Enabled) ->
    All = [{{Scope, NS}, {M, Fun}} || M <- Enabled, {Scope, NS, Fun} <- M:iq_handlers()],
    case [{K, M1, M2} || {K, {M1, _}} <- All, {K2, {M2, _}} <- All, K =:= K2, M1 < M2] of
        [] -> All;
        [{{Scope, NS}, M1, M2} | _] ->
            throw({conflict, lists:flatten(io_lib:format("modules ~s and ~s both answer ~ts IQs "
                                                         "(~s scope): enable one",
                                                         [M1, M2, NS, Scope]))})
    end.

optional(Mods, Fun, Args) ->
    lists:append([apply(M, Fun, Args) || M <- Mods,
                                         erlang:function_exported(M, Fun, length(Args))]).

optional(Mods, Fun, Args, iodata) ->
    [iolist_to_binary(apply(M, Fun, Args)) || M <- Mods,
                                              erlang:function_exported(M, Fun, length(Args))].

%% @doc Stops every host's modules (application stop).
-spec stop() -> ok.
stop() ->
    lists:foreach(fun stop_host/1, throng_config:get([hosts])).

%% @doc Stops a host's modules and removes its hooks and registry.
-spec stop_host(binary()) -> ok.
stop_host(Host) ->
    _ = [stop_module(Host, M) || M <- modules(Host)],
    ok = throng_hooks:uninstall(Host),
    _ = persistent_term:erase(?KEY(Host)),
    ok.

stop_module(Host, M) ->
    case erlang:function_exported(M, stop, 1) of
        true ->
            try M:stop(Host)
            catch C:R -> logger:error(#{what => module_stop_failed, module => M, host => Host,
                                        class => C, reason => R})
            end;
        false -> ok
    end.

registry(Host) ->
    persistent_term:get(?KEY(Host), #{modules => #{}, iq => #{}, features => [],
                                      identities => [], account_features => [],
                                      account_identities => [],
                                      stream_features => #{}}).

%% @doc The handler of an IQ namespace in a scope for a host.
-spec iq_handler(binary(), iq_scope(), binary()) -> {module(), atom()} | undefined.
iq_handler(Host, Scope, NS) ->
    #{iq := Iq} = registry(Host),
    maps:get({Scope, NS}, Iq, undefined).

%% @doc The features a host's disco#info lists: the server's own and those
%% of every enabled module.
-spec disco_features(binary()) -> [binary()].
disco_features(Host) ->
    maps:get(features, registry(Host)).

-spec disco_identities(binary()) -> [identity()].
disco_identities(Host) ->
    maps:get(identities, registry(Host)).

%% @doc The features the enabled modules add to the disco#info of a user's
%% bare JID.
-spec account_features(binary()) -> [binary()].
account_features(Host) ->
    maps:get(account_features, registry(Host)).

%% @doc The identities the enabled modules add to the disco#info of a
%% user's bare JID.
-spec account_identities(binary()) -> [identity()].
account_identities(Host) ->
    maps:get(account_identities, registry(Host)).

%% @doc Stream features the enabled modules add at a stage of negotiation.
-spec stream_features(pre_auth | authenticated, binary()) -> iodata().
stream_features(Stage, Host) ->
    maps:get(Stage, maps:get(stream_features, registry(Host)), []).

%% @doc The enabled modules of a host.
-spec modules(binary()) -> [module()].
modules(Host) ->
    maps:keys(maps:get(modules, registry(Host))).

-spec is_enabled(binary(), module()) -> boolean().
is_enabled(Host, Mod) ->
    maps:is_key(Mod, maps:get(modules, registry(Host))).

%% @doc A module's option on a host (validated at boot; crashes if the
%% module is not enabled there or has no such option: a programming error).
-spec opt(binary(), module(), atom()) -> term().
opt(Host, Mod, Key) ->
    #{modules := #{Mod := Opts}} = registry(Host),
    maps:get(Key, Opts).
