%% @doc Persistent rooms in the store (`throng_storage' kv, bucket
%% `muc_room', on either backend): one entry per room under
%% `{Service, Room}' holding its configuration, affiliations, subject and
%% history. A persistent room is written when its configuration,
%% affiliations or subject change (rare: an owner's or moderator's act) and
%% when its last occupant leaves (with its history), never per message.
%% An empty persistent room has no process: it is only this entry.
-module(throng_muc_store).

-include("throng_muc.hrl").

-export([load/3, save/1, delete/1, rooms/1, listing/2, secret/1, encode/5]).
%% Used by bench/muc_memory.escript to store rooms as save/1 does.
-ignore_xref([{encode, 5}]).

-define(BUCKET, muc_room).

%% What is stored of a room.
-type stored() :: #{config := map(), affs := map(), subject := {binary(), binary()},
                    history := [throng_muc_history:entry()]}.
-export_type([stored/0]).

%% @doc The stored room, or not_found.
-spec load(binary(), binary(), throng_muc_config:limits()) ->
    {ok, throng_muc_config:config(), map(), {binary(), binary()}, throng_muc_history:history()}
    | not_found.
load(Service, Room, Limits) ->
    case throng_storage:kv_get(?BUCKET, {Service, Room}) of
        {ok, #{config := C0, affs := Affs, subject := Subject, history := H}} ->
            C = throng_muc_config:from_stored(C0, Limits),
            {ok, C, Affs, Subject, throng_muc_history:from_list(map_get(history_length, C), H)};
        _ ->
            not_found
    end.

%% @doc Writes a room (returns once it is on disk).
-spec save(#muc{}) -> ok.
save(#muc{jid = #jid{user = Room, server = Service}} = S) ->
    throng_storage:kv_put(?BUCKET, {Service, Room},
                          encode(S#muc.config, S#muc.affs, S#muc.subject,
                                 throng_muc_history:to_list(S#muc.history), S#muc.limits)).

%% @doc The stored term of a room. Of the configuration only what differs
%% from the service's defaults is kept (an idle persistent room is mostly
%% defaults: a third of the bytes); {@link load/3} puts the defaults back.
-spec encode(map(), map(), {binary(), binary()}, [throng_muc_history:entry()],
             throng_muc_config:limits()) -> stored().
encode(Config, Affs, Subject, History, Limits) ->
    Default = throng_muc_config:default(Limits),
    #{config => maps:filter(fun(K, V) -> maps:get(K, Default, undefined) =/= V end, Config),
      affs => Affs, subject => Subject, history => History}.

%% @doc Removes a room (destroyed, or no longer persistent).
-spec delete(#jid{}) -> ok.
delete(#jid{user = Room, server = Service}) ->
    throng_storage:kv_delete(?BUCKET, {Service, Room}).

%% @doc The stored rooms of a service.
-spec rooms(binary()) -> [binary()].
rooms(Service) ->
    [R || {S, R} <- throng_storage:kv_keys(?BUCKET), S =:= Service].

%% @doc How a stored room is listed in the service's disco#items: its name,
%% or hidden (not public).
-spec listing({binary(), binary()}, throng_muc_config:limits()) -> {listed, binary()} | hidden.
listing(Key, Limits) ->
    case throng_storage:kv_get(?BUCKET, Key) of
        {ok, #{config := Stored}} ->
            case throng_muc_config:from_stored(Stored, Limits) of
                #{public := true, title := Title} -> {listed, Title};
                _ -> hidden
            end;
        _ -> hidden
    end.

%% @doc The service's secret for occupant ids (XEP-0421: stable across
%% restarts), made and stored at the first start.
-spec secret(binary()) -> binary().
secret(Service) ->
    case throng_storage:kv_get(muc_secret, Service) of
        {ok, Secret} -> Secret;
        not_found ->
            Secret = crypto:strong_rand_bytes(32),
            ok = throng_storage:kv_put(muc_secret, Service, Secret),
            Secret
    end.
