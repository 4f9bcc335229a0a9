%% @doc XEP-0049 Private XML Storage: a user keeps XML fragments on the
%% server (client preferences, XEP-0048 bookmarks) and gets them back.
%%
%% <ul>
%% <li>A set stores each child of the query under its element name and
%% namespace, replacing what was there; a get with an (empty) element
%% returns the fragment stored under that name and namespace, or the
%% element as asked when there is none.</li>
%% <li>Only the account itself (no `to', or its own bare JID) may get or
%% set: to another user's bare JID, or to the domain, `forbidden' (§2.3,
%% the condition the XEP prefers).</li>
%% <li>Refused with `not-acceptable': a set with no child (§2.3), a child
%% with no namespace of its own, a reserved namespace (one beginning with
%% `jabber:' or `http://jabber.org/', and `vcard-temp', §2.3). A get with
%% no child, or with children of several namespaces, is `bad-request'
%% ("Bad Format").</li>
%% <li>What a user keeps is bounded by `max_bytes' (the stored fragments'
%% serialized bytes); a set that would go beyond is refused with
%% `not-acceptable' and a text naming the limit.</li>
%% </ul>
%%
%% Storage: one key-value entry per user ({@link throng_storage:kv_put/3},
%% bucket `private', key `{User, Server}'), a map from `{Name, Namespace}'
%% to the fragment serialized. So the children of one set are written in
%% one put, together or not at all, and removing an account is one delete
%% (hook `user_removed'). The price: a set writes the user's whole store
%% again (at most `max_bytes'). A set is a read-modify-write of the
%% user's store in one step of the storage ({@link
%% throng_storage:kv_update/3}: a lock on the entry in the database, not
%% in the cluster; two resources may be on two nodes), so that two sets
%% sent at the same moment by two resources both stay; gets take no lock.
%% Storing an empty element removes the entry, which answers a get the same
%% way.
-module(throng_mod_private).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1]).
-export([account/2, server/2, user_removed/2]).
%% IQ handlers and hooks named in iq_handlers/0 and hooks/0 (throng_ext).
-ignore_xref([{account, 2}, {server, 2}, {user_removed, 2}]).

-define(NS_PRIVATE, <<"jabber:iq:private">>).
-define(BUCKET, private).

-type store() :: #{{Name :: binary(), NS :: binary()} => Serialized :: binary()}.

-spec options() -> throng_config_spec:spec().
options() ->
    #{max_bytes => #{type => {int, 0, 16777216}, default => 262144,
                     doc => "Bytes of private XML kept per user (the stored fragments, "
                            "serialized). A set that would go beyond is refused with "
                            "not-acceptable and stores nothing."}}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{account, ?NS_PRIVATE, account},
     {server, ?NS_PRIVATE, server}].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{user_removed, 50, user_removed}].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    [?NS_PRIVATE].

%%% IQ handlers

%% @doc A query to a user's bare JID: the account's own, or forbidden.
-spec account(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
account(IQ, #{from := #jid{user = U, server = S}, to := #jid{user = U, server = S},
              payload := #xmlel{name = <<"query">>} = Query}) ->
    try
        case throng_stanza:type(IQ) of
            <<"get">> -> get(IQ, U, S, throng_xml:subels(Query));
            <<"set">> -> set(IQ, U, S, throng_xml:subels(Query))
        end
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => private_storage_failed, user => U, server => S,
                           reason => Why}),
            throng_stanza:error_reply(IQ, 'internal-server-error')
    end;
account(IQ, #{from := #jid{user = U, server = S}, to := #jid{user = U, server = S}}) ->
    throng_stanza:error_reply(IQ, 'bad-request');
account(IQ, _Ctx) ->
    throng_stanza:error_reply(IQ, forbidden).

%% @doc A query to the domain: it keeps nobody's data there.
-spec server(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
server(IQ, _Ctx) ->
    throng_stanza:error_reply(IQ, forbidden).

get(IQ, _U, _S, []) ->
    throng_stanza:error_reply(IQ, 'bad-request');
get(IQ, U, S, Els) ->
    case {acceptable(Els), lists:usort([throng_xml:ns(E) || E <- Els])} of
        {false, _} ->
            throng_stanza:error_reply(IQ, 'not-acceptable');
        {true, [_]} ->
            Store = stored(U, S),
            throng_stanza:iq_result(IQ, [query([fetch(E, Store) || E <- Els])]);
        {true, _} ->
            throng_stanza:error_reply(IQ, 'bad-request')
    end.

set(IQ, _U, _S, []) ->
    throng_stanza:error_reply(IQ, 'not-acceptable');
set(IQ, U, S, Els) ->
    case acceptable(Els) of
        false ->
            throng_stanza:error_reply(IQ, 'not-acceptable');
        true ->
            Max = throng_ext:opt(S, ?MODULE, max_bytes),
            case throng_storage:kv_update(?BUCKET, {U, S}, fun(Found) -> change(Found, Els, Max) end) of
                ok ->
                    throng_stanza:iq_result(IQ);
                {full, Bytes} ->
                    logger:info(#{what => private_storage_full, user => U, server => S,
                                  bytes => Bytes, max_bytes => Max}),
                    throng_stanza:error_reply(
                      IQ, 'not-acceptable',
                      iolist_to_binary(io_lib:format("private XML storage is limited to ~b "
                                                     "bytes per user", [Max])))
            end
    end.

%% The user's store with the set's children in it (kv_update/3's function).
change(Found, Els, Max) ->
    Old = case Found of
              {ok, Store} -> Store;
              not_found -> #{}
          end,
    New = lists:foldl(fun put/2, Old, Els),
    case bytes(New) of
        Bytes when Bytes > Max -> {{full, Bytes}, keep};
        _ when New =:= Old -> {ok, keep};
        _ when map_size(New) =:= 0 -> {ok, delete};
        _ -> {ok, {put, New}}
    end.

query(Children) ->
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_PRIVATE}], children = Children}.

%% Every child qualified by a namespace of its own that is not reserved.
acceptable(Els) ->
    lists:all(fun(E) -> not reserved(throng_xml:ns(E)) end, Els).

reserved(<<>>) -> true;
reserved(<<"jabber:", _/binary>>) -> true;
reserved(<<"http://jabber.org/", _/binary>>) -> true;
reserved(<<"vcard-temp">>) -> true;
reserved(_) -> false.

key(#xmlel{name = Name} = El) ->
    {Name, throng_xml:ns(El)}.

fetch(El, Store) ->
    case maps:find(key(El), Store) of
        {ok, Bin} -> throng_xml:from_binary(Bin);
        error -> #xmlel{name = El#xmlel.name, attrs = [{<<"xmlns">>, throng_xml:ns(El)}]}
    end.

%% An element with nothing but its namespace is what a get returns when
%% nothing is stored: storing one removes the entry.
put(#xmlel{attrs = [{<<"xmlns">>, _}], children = []} = El, Store) ->
    maps:remove(key(El), Store);
put(El, Store) ->
    Store#{key(El) => throng_xml:to_binary(El)}.

-spec bytes(store()) -> non_neg_integer().
bytes(Store) ->
    maps:fold(fun(_, Bin, Sum) -> Sum + byte_size(Bin) end, 0, Store).

-spec stored(binary(), binary()) -> store().
stored(U, S) ->
    case throng_storage:kv_get(?BUCKET, {U, S}) of
        {ok, Store} -> Store;
        not_found -> #{}
    end.

%%% Hooks

%% @doc A removed account leaves nothing behind.
-spec user_removed(ok, #{user := binary(), server := binary()}) -> ok.
user_removed(ok, #{user := U, server := S}) ->
    throng_storage:kv_delete(?BUCKET, {U, S}).
