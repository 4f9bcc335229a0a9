%% @doc XEP-0054 vcard-temp, with the server's part of XEP-0153 vCard-based
%% avatars.
%%
%% <ul>
%% <li>A user sets and gets their own vCard (no `to', or their own bare
%% JID); a get with nothing stored returns an empty vCard (§3.1). A set
%% replaces the whole vCard; one larger than `max_bytes' (serialized) is
%% refused with `not-acceptable' and a text naming the limit.</li>
%% <li>Anyone may get a user's vCard at the bare JID, answered by the server
%% (§3.3). With none stored the answer is `service-unavailable', the
%% condition the router gives for an account that does not exist: version
%% 1.3 of the XEP requires the same error in both cases, so that vCards
%% cannot be used to find out which accounts exist. A set to another user's
%% bare JID is `forbidden' (§3.2).</li>
%% <li>The server's own vCard (to the domain) is built from the
%% `server_vcard' options (empty by default); a set to it is
%% `forbidden'.</li>
%% <li>XEP-0153: when the stored vCard has a PHOTO, the SHA-1 of its decoded
%% BINVAL (hex) is added to the user's available presence, broadcast or
%% directed, as `<x xmlns="vcard-temp:x:update"><photo>HASH</photo></x>',
%% unless the client put an update element there itself. A vCard with no
%% PHOTO, or an empty BINVAL, gives an empty `<photo/>' ("no avatar", §4.1
%% rule 3), so that contacts drop an old image; a user with no vCard at all
%% gets nothing added. A BINVAL that is not base64 is refused with
%% `bad-request'. The change is made in the `stanza_from_session' hook, so
%% what is broadcast, kept for probes and sent to directed-presence
%% targets is the presence with the hash.</li>
%% </ul>
%%
%% Storage (bucket `vcard' of {@link throng_storage:kv_put/3}): the vCard
%% serialized under `{User, Server}', and the update it gives (`<<>>' or the
%% hash) under `{User, Server, photo}', so that presence reads a few bytes,
%% not the vCard. A set writes both in one {@link throng_storage:batch/1}
%% (one fsync), the photo key only when it changed; they are two writes, so
%% a crash between them leaves the previous hash until the next set.
%% Both go with the account (hook `user_removed').
%%
%% The hash is looked up on every available presence a user sends, so each
%% node keeps the updates it read in an ETS table per host (created in
%% start/2): `{{User, Server}, Update | none, ReadAt}', `none' for a user
%% with no vCard. A row is used for `hash_cache_ttl' seconds after it was
%% read from storage and dropped by a sweep every `hash_cache_ttl' seconds
%% (an OTP interval timer; no process of the module's own), so an idle
%% session costs nothing here once that has passed, and a busy user costs
%% one small storage read per `hash_cache_ttl'. A login reads the row with
%% the account's credentials (hooks `login_keys' and `login_values': one
%% read of the store for both), so the initial presence that follows finds
%% it here and makes no read of its own. A set updates this node's
%% row and has the other members of the cluster drop theirs before the set
%% is answered (`erpc:multicall', a second at most: a vCard set is rare), so
%% a presence sent through any node after the answer carries the new hash;
%% a member that does not answer in time (or a read racing the set on
%% another node) carries the old hash for at most `hash_cache_ttl'
%% seconds.
-module(throng_mod_vcard).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1, start/2, stop/1]).
-export([account/2, server/2, stanza_from_session/2, user_removed/2, login_keys/2,
         login_values/2]).
-export([forget/1, sweep/1, cached/1]).
%% IQ handlers and hooks named in iq_handlers/0 and hooks/0 (throng_ext).
-ignore_xref([{account, 2}, {server, 2}, {stanza_from_session, 2}, {user_removed, 2},
              {login_keys, 2}, {login_values, 2}]).
%% Called by the other members of a cluster (erpc), by the interval timer
%% of start/2, and by tests and operators (rows in a host's cache).
-ignore_xref([{forget, 1}, {sweep, 1}, {cached, 1}]).

-define(NS_VCARD, <<"vcard-temp">>).
-define(NS_UPDATE, <<"vcard-temp:x:update">>).
-define(BUCKET, vcard).

%% What presence says of the avatar: the hash (hex), <<>> for "no avatar"
%% (an empty <photo/>), none for nothing (no vCard stored).
-type update() :: binary() | none.

-spec options() -> throng_config_spec:spec().
options() ->
    #{max_bytes => #{type => {int, 0, 16777216}, default => 65536,
                     doc => "Largest vCard a user may store, in bytes (serialized). A larger "
                            "one is refused with not-acceptable."},
      hash_cache_ttl => #{type => {int, 1, 86400}, default => 60,
                          doc => "Seconds a node keeps a user's avatar hash (XEP-0153) after "
                                 "reading it from storage. Bounds the memory of idle users "
                                 "and how long a change made through another node of a "
                                 "cluster can take to show in presence sent through this one "
                                 "(normally it shows at once)."},
      server_vcard => #{type => {section, server_vcard_spec()}, default => #{},
                        doc => "The server's own vCard, answered to a vcard-temp get "
                               "addressed to the domain. Empty fields are left out."}}.

server_vcard_spec() ->
    #{fn => #{type => string, default => <<>>, doc => "Name (FN)."},
      url => #{type => string, default => <<>>, doc => "Web address (URL)."},
      email => #{type => string, default => <<>>, doc => "Contact address (EMAIL/USERID)."},
      desc => #{type => string, default => <<>>, doc => "Description (DESC)."}}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{account, ?NS_VCARD, account},
     {server, ?NS_VCARD, server}].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{stanza_from_session, 50, stanza_from_session},
     {user_removed, 50, user_removed},
     {login_keys, 50, login_keys},
     {login_values, 50, login_values}].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    [?NS_VCARD].

%% The cache table, its sweep timer and the server's vCard, per host. The
%% table and the timer belong to the process that runs start/2 (at boot,
%% the application's): a host started again while it runs
%% (throng_ext:start_host/2 from a test) keeps them.
-spec start(binary(), map()) -> ok.
start(Host, #{hash_cache_ttl := TTL, server_vcard := Server}) ->
    {Tab, Timer} =
        case persistent_term:get({?MODULE, Host}, undefined) of
            #{tab := T, timer := Tm} ->
                case ets:info(T, id) of
                    undefined -> new_cache(Host, TTL);
                    _ -> {T, Tm}
                end;
            undefined ->
                new_cache(Host, TTL)
        end,
    persistent_term:put({?MODULE, Host}, #{tab => Tab, ttl => TTL, timer => Timer,
                                           server_vcard => server_vcard(Server)}).

new_cache(Host, TTL) ->
    Tab = ets:new(?MODULE, [set, public, {read_concurrency, true}, {write_concurrency, true}]),
    {ok, Timer} = timer:apply_interval(TTL * 1000, ?MODULE, sweep, [Host]),
    {Tab, Timer}.

-spec stop(binary()) -> ok.
stop(Host) ->
    case persistent_term:get({?MODULE, Host}, undefined) of
        #{tab := Tab, timer := Timer} ->
            _ = timer:cancel(Timer),
            _ = persistent_term:erase({?MODULE, Host}),
            ets:delete(Tab),
            ok;
        undefined ->
            ok
    end.

server_vcard(#{fn := FN, url := URL, email := Email, desc := Desc}) ->
    vcard([text(<<"FN">>, FN) || FN =/= <<>>] ++
              [text(<<"URL">>, URL) || URL =/= <<>>] ++
              [#xmlel{name = <<"EMAIL">>, children = [#xmlel{name = <<"INTERNET">>},
                                                      text(<<"USERID">>, Email)]}
               || Email =/= <<>>] ++
              [text(<<"DESC">>, Desc) || Desc =/= <<>>]).

vcard(Children) ->
    #xmlel{name = <<"vCard">>, attrs = [{<<"xmlns">>, ?NS_VCARD}], children = Children}.

text(Name, Text) ->
    #xmlel{name = Name, children = [{xmlcdata, Text}]}.

%%% IQ handlers

%% @doc A vCard IQ to a user's bare JID: the user's own get and set; anyone
%% else's get.
-spec account(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
account(IQ, #{payload := #xmlel{name = <<"vCard">>} = VCard, from := From,
              to := #jid{user = U, server = S}}) ->
    Own = From#jid.user =:= U andalso From#jid.server =:= S,
    try
        case {throng_stanza:type(IQ), Own} of
            {<<"get">>, _} -> get(IQ, U, S, Own);
            {<<"set">>, true} -> set(IQ, U, S, VCard);
            {<<"set">>, false} -> throng_stanza:error_reply(IQ, forbidden)
        end
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => vcard_storage_failed, user => U, server => S, reason => Why}),
            throng_stanza:error_reply(IQ, 'internal-server-error')
    end;
account(IQ, _Ctx) ->
    throng_stanza:error_reply(IQ, 'bad-request').

%% @doc A vCard IQ to the domain: the server's vCard.
-spec server(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
server(IQ, #{payload := #xmlel{name = <<"vCard">>}, host := Host}) ->
    case throng_stanza:type(IQ) of
        <<"get">> ->
            #{server_vcard := VCard} = persistent_term:get({?MODULE, Host}),
            throng_stanza:iq_result(IQ, [VCard]);
        <<"set">> ->
            throng_stanza:error_reply(IQ, forbidden)
    end;
server(IQ, _Ctx) ->
    throng_stanza:error_reply(IQ, 'bad-request').

get(IQ, U, S, Own) ->
    case {throng_storage:kv_get(?BUCKET, {U, S}), Own} of
        {{ok, Bin}, _} -> throng_stanza:iq_result(IQ, [throng_xml:from_binary(Bin)]);
        {not_found, true} -> throng_stanza:iq_result(IQ, [vcard([])]);
        {not_found, false} -> throng_stanza:error_reply(IQ, 'service-unavailable')
    end.

set(IQ, U, S, VCard) ->
    Bin = throng_xml:to_binary(VCard),
    Max = throng_ext:opt(S, ?MODULE, max_bytes),
    case {byte_size(Bin) > Max, photo_update(VCard)} of
        {true, _} ->
            logger:info(#{what => vcard_too_large, user => U, server => S,
                          bytes => byte_size(Bin), max_bytes => Max}),
            throng_stanza:error_reply(
              IQ, 'not-acceptable',
              iolist_to_binary(io_lib:format("a vCard is limited to ~b bytes", [Max])));
        {false, error} ->
            throng_stanza:error_reply(IQ, 'bad-request', <<"the PHOTO's BINVAL is not base64">>);
        {false, {ok, Update}} ->
            Changed = throng_storage:kv_get(?BUCKET, {U, S, photo}) =/= {ok, Update},
            throng_storage:batch(
              fun() ->
                      ok = throng_storage:kv_put(?BUCKET, {U, S}, Bin),
                      case Changed of
                          true -> throng_storage:kv_put(?BUCKET, {U, S, photo}, Update);
                          false -> ok
                      end
              end),
            cache(S, {U, S}, Update),
            case Changed of
                true -> forget_elsewhere({U, S});
                false -> ok
            end,
            throng_stanza:iq_result(IQ)
    end.

%% XEP-0153: the hash of the PHOTO's image, <<>> when there is none; error
%% when the BINVAL cannot be decoded. Whitespace is ignored (§4.5 rule 5),
%% and so is missing padding.
-spec photo_update(#xmlel{}) -> {ok, binary()} | error.
photo_update(VCard) ->
    case throng_xml:subel(VCard, <<"PHOTO">>) of
        undefined -> {ok, <<>>};
        Photo ->
            case << <<C>> || <<C>> <= throng_xml:subel_cdata(Photo, <<"BINVAL">>),
                             C =/= $\s, C =/= $\t, C =/= $\r, C =/= $\n >> of
                <<>> -> {ok, <<>>};
                B64 ->
                    try base64:decode(pad(B64)) of
                        Image -> {ok, hex(crypto:hash(sha, Image))}
                    catch
                        error:_ -> error
                    end
            end
    end.

pad(B64) ->
    case byte_size(B64) rem 4 of
        2 -> <<B64/binary, "==">>;
        3 -> <<B64/binary, "=">>;
        _ -> B64
    end.

hex(Bin) ->
    << <<(hex_digit(N))>> || <<N:4>> <= Bin >>.

hex_digit(N) when N < 10 -> $0 + N;
hex_digit(N) -> $a + N - 10.

%%% Hooks

%% @doc XEP-0153: the user's available presence gets the avatar's update
%% element, unless the client put one there.
-spec stanza_from_session(#xmlel{}, #{from := #jid{}, to := #jid{}}) -> ok | {ok, #xmlel{}}.
stanza_from_session(#xmlel{name = <<"presence">>, children = Children} = El,
                    #{from := #jid{user = U, server = S}}) ->
    case throng_stanza:type(El) =:= <<>> andalso not has_update(Children) of
        true ->
            case update(U, S) of
                none -> ok;
                Update -> {ok, El#xmlel{children = Children ++ [update_el(Update)]}}
            end;
        false ->
            ok
    end;
stanza_from_session(_El, _Args) ->
    ok.

has_update(Children) ->
    lists:any(fun(#xmlel{name = <<"x">>} = X) -> throng_xml:ns(X) =:= ?NS_UPDATE;
                 (_) -> false
              end, Children).

update_el(Hash) ->
    #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, ?NS_UPDATE}],
           children = [#xmlel{name = <<"photo">>, children = [{xmlcdata, Hash} || Hash =/= <<>>]}]}.

%% @doc A removed account leaves nothing behind, in storage or in a cache.
-spec user_removed(ok, #{user := binary(), server := binary()}) -> ok.
user_removed(ok, #{user := U, server := S}) ->
    throng_storage:batch(fun() ->
                                 ok = throng_storage:kv_delete(?BUCKET, {U, S, photo}),
                                 throng_storage:kv_delete(?BUCKET, {U, S})
                         end),
    forget({U, S}),
    forget_elsewhere({U, S}),
    ok.

%%% The cache of updates

%% What presence of U@S says of the avatar: from this node's cache when the
%% row is fresh, else from storage (and cached).
-spec update(binary(), binary()) -> update().
update(U, S) ->
    #{tab := Tab, ttl := TTL} = persistent_term:get({?MODULE, S}),
    Now = erlang:monotonic_time(second),
    case ets:lookup(Tab, {U, S}) of
        [{_, Update, ReadAt}] when Now - ReadAt < TTL -> Update;
        _ -> load(Tab, U, S, Now)
    end.

load(Tab, U, S, Now) ->
    try throng_storage:kv_get(?BUCKET, {U, S, photo}) of
        Found -> loaded(Tab, U, S, Found, Now)
    catch
        error:{storage_failed, Why} ->
            %% Presence goes out as the client wrote it.
            logger:warning(#{what => vcard_hash_read_failed, user => U, server => S,
                             reason => Why}),
            none
    end.

loaded(Tab, U, S, Found, Now) ->
    Update = case Found of
                 {ok, Hash} -> Hash;
                 not_found -> none
             end,
    ets:insert(Tab, {{binary:copy(U), binary:copy(S)}, Update, Now}),
    Update.

%% @doc Hook: a login reads the credentials; the update is read with them
%% (unless this node's row is fresh), so that the initial presence finds
%% it here.
-spec login_keys([{atom(), term()}], #{user := binary(), server := binary()}) ->
    ok | {ok, [{atom(), term()}]}.
login_keys(Keys, #{user := U, server := S}) ->
    #{tab := Tab, ttl := TTL} = persistent_term:get({?MODULE, S}),
    Now = erlang:monotonic_time(second),
    case ets:lookup(Tab, {U, S}) of
        [{_, _, ReadAt}] when Now - ReadAt < TTL -> ok;
        _ -> {ok, [{?BUCKET, {U, S, photo}} | Keys]}
    end.

%% @doc Hook: what the login's read found, cached as a read of update/2.
-spec login_values(ok, #{user := binary(), server := binary(),
                         values := [{{atom(), term()}, {ok, term()} | not_found}]}) -> ok.
login_values(ok, #{user := U, server := S, values := Values}) ->
    case lists:keyfind({?BUCKET, {U, S, photo}}, 1, Values) of
        {_, Found} ->
            #{tab := Tab} = persistent_term:get({?MODULE, S}),
            _ = loaded(Tab, U, S, Found, erlang:monotonic_time(second)),
            ok;
        false ->
            ok
    end.

cache(S, {U, S}, Update) ->
    #{tab := Tab} = persistent_term:get({?MODULE, S}),
    ets:insert(Tab, {{binary:copy(U), binary:copy(S)}, Update, erlang:monotonic_time(second)}).

%% @doc Drops this node's row of a user (called by the node where the
%% user's vCard changed).
-spec forget({binary(), binary()}) -> ok.
forget({_U, S} = US) ->
    case persistent_term:get({?MODULE, S}, undefined) of
        #{tab := Tab} -> ets:delete(Tab, US), ok;
        undefined -> ok
    end.

forget_elsewhere(US) ->
    case throng_members:members() -- [node()] of
        [] -> ok;
        Others ->
            _ = erpc:multicall(Others, ?MODULE, forget, [US], 1000),
            ok
    end.

%% @doc Drops the rows of a host's cache read more than hash_cache_ttl
%% seconds ago (every hash_cache_ttl seconds, from the timer of start/2).
-spec sweep(binary()) -> non_neg_integer().
sweep(Host) ->
    case persistent_term:get({?MODULE, Host}, undefined) of
        #{tab := Tab, ttl := TTL} ->
            Stale = erlang:monotonic_time(second) - TTL,
            ets:select_delete(Tab, [{{'_', '_', '$1'}, [{'=<', '$1', Stale}], [true]}]);
        undefined ->
            0
    end.

%% @doc The users a host's cache holds a row for.
-spec cached(binary()) -> non_neg_integer().
cached(Host) ->
    #{tab := Tab} = persistent_term:get({?MODULE, Host}),
    ets:info(Tab, size).
