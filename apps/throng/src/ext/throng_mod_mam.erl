%% @doc XEP-0313 Message Archive Management for one-to-one chats, with
%% XEP-0359 stanza ids, XEP-0059 paging and XEP-0441 preferences.
%%
%% <ul>
%% <li>Archiving, before delivery. A message for a local user is archived
%% in the recipient's archive by the `stanza_to_user' hook, in the sender's
%% process and before the router decides where it goes (a session, offline
%% storage), and gets `<stanza-id by="user@host" id="..."/>': the recipient
%% receives it, online or from offline storage, and finds the same id in
%% the archive. A message a local user sends is archived in the sender's
%% archive: the `stanza_from_session' hook gives that copy its id and it
%% waits in the sender's process for the recipient's copy, to be written
%% with it (one write, in a cluster one round trip to a db node), or alone
%% when the route ends without one. Only archivable messages ({@link
%% archivable/1}), only for existing accounts, only as the user's
%% preferences allow ({@link wanted/3}). The copies are written (and read
%% by every query) before the message is delivered, durable as {@link
%% throng_storage:mam_store/3} says; a write that fails is logged and the
%% message is delivered without an id.</li>
%% <li>Stanza ids. A `<stanza-id/>' a sender put in a message with the
%% recipient's archive as `by' is removed (XEP-0359: only the archive
%% assigns them), unless it names the very message in the archive: a
%% message a session routes again when it ends unacknowledged (XEP-0198)
%% keeps its id and is not archived twice.</li>
%% <li>Queries (`urn:xmpp:mam:2' and `urn:xmpp:mam:1') to the user's own
%% bare JID: the form and paging of {@link throng_mam_query}; the results
%% and then the IQ result go to the asking session in that order through
%% its queue (XEP-0198 covers them); `<metadata/>'; the form on a get.</li>
%% <li>Retention: a sweep every `sweep_interval' seconds (one timer per
%% host, run by the first member of the cluster) removes what is older than
%% `max_age' days and what is beyond each user's newest `max_messages'.
%% A removed account loses its archive and preferences.</li>
%% </ul>
%% No process on the message path and nothing per session: the archive is
%% in storage ({@link throng_storage:mam_store_many/1}), the preferences in the
%% key-value store, the key of the client ids ({@link throng_mam_id}) in
%% the key-value store and, once read, in a `persistent_term'.
-module(throng_mod_mam).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, account_features/1, start/2, stop/1]).
-export([iq/2, outgoing/2, incoming/2, user_removed/2, route_end/1]).
-export([sweep/1, archivable/1, parse_prefs/1, prefs_el/2, wanted/3]).
%% For the archives of MUC rooms (throng_muc_mam).
-export([storable/1, id_key/0, sweep/3, answer/6, metadata_el/3]).
%% IQ handlers and hooks named in iq_handlers/0 and hooks/0 (throng_ext);
%% sweep/1 and sweep/3 (the rooms' archives, throng_mod_muc) run from
%% timers (timer:apply_interval/4).
-ignore_xref([{iq, 2}, {outgoing, 2}, {incoming, 2}, {user_removed, 2}, {sweep, 1}, {sweep, 3}]).
%% Called by throng_sm when a route ends (throng_sm:defer/2).
-ignore_xref([{route_end, 1}]).
%% Pure parts, used by throng_mam_tests.
-ignore_xref([{archivable, 1}, {parse_prefs, 1}, {prefs_el, 2}, {wanted, 3}]).

-define(NS_MAM2, <<"urn:xmpp:mam:2">>).
-define(NS_MAM1, <<"urn:xmpp:mam:1">>).
-define(NS_SID, <<"urn:xmpp:sid:0">>).
-define(NS_HINTS, <<"urn:xmpp:hints">>).
-define(NS_CARBONS, <<"urn:xmpp:carbons:2">>).
%% Hooks run late: filters (blocking, privacy) before them decide first.
-define(SEQ, 80).
-define(KEY_CACHE, {?MODULE, id_key}).

%% Preferences (XEP-0441): the default, then the JIDs always and never
%% archived (bare or full, normalized).
-type mode() :: always | never | roster.
-type prefs() :: {mode(), [binary()], [binary()]}.
-export_type([prefs/0]).

-spec options() -> throng_config_spec:spec().
options() ->
    #{max_page_size =>
          #{type => {int, 1, 250}, default => 50,
            doc => "Messages in one page of query results: a client that asks for more "
                   "(RSM max), or for none in particular, gets this many."},
      max_age =>
          #{type => {int, 0, 36500}, default => 30,
            doc => "Days a message stays in the archive; 0: no limit. Enforced by the "
                   "sweep."},
      max_messages =>
          #{type => {int, 0, 100000000}, default => 10000,
            doc => "Messages kept per user: beyond them the oldest go; 0: no limit. "
                   "Enforced by the sweep (an archive may pass it until the next one)."},
      sweep_interval =>
          #{type => {int, 1, 86400}, default => 3600,
            doc => "Seconds between two sweeps that enforce max_age and max_messages "
                   "(one timer per host, run by one node of a cluster)."},
      default_mode =>
          #{type => {enum, [always, roster, never]}, default => always,
            doc => "What is archived for a user who has set no preferences (XEP-0441): "
                   "every message, those with contacts of the roster, or none."}}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{account, ?NS_MAM2, iq},
     {account, ?NS_MAM1, iq}].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{stanza_from_session, ?SEQ, outgoing},
     {stanza_to_user, ?SEQ, incoming},
     {user_removed, 50, user_removed}].

%% XEP-0313 §8: the archive is the user's bare JID's.
-spec account_features(binary()) -> [binary()].
account_features(_Host) ->
    [?NS_MAM1, ?NS_MAM2, <<"urn:xmpp:mam:2#extended">>, ?NS_SID].

%% One timer per host runs the sweep, in a process of its own each time
%% (timer:apply_interval/4; the timer goes with the process that started
%% the host's modules, the application's). A host started again replaces
%% its timer.
-spec start(binary(), map()) -> ok.
start(Host, #{sweep_interval := Seconds}) ->
    %% The key now, not at the first archived message, so that reading
    %% the storage is not on the routing path. With the storage down it is
    %% read when first used.
    _ = try key()
        catch
            error:{storage_failed, Why} ->
                logger:warning(#{what => mam_key_not_read, host => Host, reason => Why,
                                 next => <<"read when first used">>})
        end,
    cancel_sweep(Host),
    {ok, TRef} = timer:apply_interval(Seconds * 1000, ?MODULE, sweep, [Host]),
    persistent_term:put({?MODULE, sweep, Host}, TRef).

cancel_sweep(Host) ->
    case persistent_term:get({?MODULE, sweep, Host}, undefined) of
        undefined -> ok;
        TRef -> _ = timer:cancel(TRef), ok
    end.

%% The key's cache is the node's, not the host's: it goes with the last
%% host that runs the module (a host runs it from its start to its stop:
%% while its sweep's entry is there).
-spec stop(binary()) -> ok.
stop(Host) ->
    cancel_sweep(Host),
    _ = persistent_term:erase({?MODULE, sweep, Host}),
    case [H || {{?MODULE, sweep, H}, _} <- persistent_term:get()] of
        [] ->
            %% Read again at the next start: the storage may be another one.
            _ = persistent_term:erase(?KEY_CACHE),
            ok;
        _Running ->
            ok
    end.

%%% Archiving

%% @doc Hook: a message a user's session sends goes to the sender's archive
%% (a message to the user's own account is archived once, as it arrives).
%% Its id is taken now; the copy waits for the recipient's ({@link
%% incoming/2}, later in the same route) to be written with it, one write
%% for both (in a cluster, one round trip to the db node), or is written
%% alone when the route ends without one (throng_sm:defer/2).
-spec outgoing(#xmlel{}, #{from := #jid{}, to := #jid{}}) -> ok.
outgoing(#xmlel{name = <<"message">>} = El,
         #{from := #jid{user = U, server = S} = From, to := #jid{user = TU} = To})
  when TU =/= <<>> ->
    case throng_jid:bare(To) =/= throng_jid:bare(From) andalso archivable(El)
        andalso wanted(U, S, To) of
        true -> later(U, S, mam_msg(From, To, To, El));
        false -> ok
    end;
outgoing(_El, _Args) ->
    ok.

%% @doc Hook: a message for a local user goes to the user's archive before
%% it is delivered, and carries the archive's stanza id on. The copy for
%% its sender's archive, waiting since {@link outgoing/2}, is written with
%% it, or alone when the recipient's archive does not take it: before the
%% message is delivered, either way.
-spec incoming(#xmlel{}, #{from := #jid{}, to := #jid{}}) -> ok | {ok, #xmlel{}}.
incoming(#xmlel{name = <<"message">>} = El0, #{from := From, to := #jid{user = U, server = S} = To}) ->
    Archive = throng_jid:to_binary(throng_jid:bare(To)),
    {Claimed, El} = take_stanza_ids(El0, Archive),
    case Claimed =/= [] andalso archived(U, S, hd(Claimed), From, To, El) of
        true ->
            %% Routed again (its session ended): it is in the archive already.
            store_waiting();
        false ->
            Id = case archivable(El) andalso exists(U, S) andalso wanted(U, S, From) of
                     true -> archive(U, S, From, To, From, El);
                     false -> store_waiting(), none
                 end,
            case {Id, Claimed} of
                {none, []} -> ok;
                {none, _} -> {ok, El};
                _ -> {ok, El#xmlel{children = El#xmlel.children ++ [stanza_id(Archive, Id)]}}
            end
    end;
incoming(_El, _Args) ->
    ok.

%% Stores the message in the archive of U@S, Peer being the other party,
%% with the copies that wait for it (later/3); the id it got, or none when
%% storage failed (the message goes on).
archive(U, S, From, To, Peer, El) ->
    case store(take_waiting() ++ [{U, S, mam_msg(From, To, Peer, El)}]) of
        none -> none;
        Ids -> lists:last(Ids)
    end.

mam_msg(From, To, Peer, El) ->
    #mam_msg{id = throng_mam_id:next(),
             peer = {throng_jid:to_binary(throng_jid:bare(Peer)), Peer#jid.resource},
             packet = packet(From, To, El)}.

%% A copy that waits, in the routing process, for the next one of the same
%% route, or for the route's end (route_end/1).
later(U, S, Msg) ->
    throng_sm:defer(?MODULE, {U, S, Msg}).

%% @doc The route ended with copies no later one took ({@link later/3},
%% throng_sm:defer/2): written now.
-spec route_end([{binary(), binary(), #mam_msg{}}]) -> ok.
route_end(Items) ->
    _ = store(Items),
    ok.

store_waiting() ->
    route_end(take_waiting()).

take_waiting() ->
    throng_sm:take_deferred(?MODULE).

%% The ids, or none when storage failed (logged for each copy).
store(Items) ->
    try throng_storage:mam_store_many(Items)
    catch
        error:{storage_failed, Why} ->
            [logger:error(#{what => mam_store_failed, user => U, server => S, reason => Why})
             || {U, S, _} <- Items],
            none
    end.

packet(From, To, El) ->
    throng_xml:to_binary(throng_stanza:set_from_to(El, throng_jid:to_binary(From),
                                                   throng_jid:to_binary(To))).

%% A user with a session exists (the lookup is the route's own, in a
%% cluster asked of the home once: throng_sm:memo/1); else the store says.
exists(U, S) ->
    throng_sm:resources({U, S}) =/= [] orelse stored(U, S).

stored(U, S) ->
    try throng_storage:account_exists(U, S)
    catch error:{storage_failed, _} -> false
    end.

%% Whether the stanza id a message carries names this very message in the
%% archive (a message routed again).
archived(U, S, Text, From, To, El) ->
    try throng_mam_id:decode(key(), Text) of
        {ok, Id} ->
            case throng_storage:mam_query(U, S, #mam_filter{ids = [Id]}, forward, 1) of
                [#mam_msg{packet = Packet}] -> Packet =:= packet(From, To, El);
                [] -> false
            end;
        error -> false
    catch
        error:{storage_failed, _} -> false
    end.

%% The message without the stanza ids that claim to be Archive's, and the
%% ids they held.
take_stanza_ids(#xmlel{children = Children} = El, Archive) ->
    {Claims, Rest} =
        lists:partition(fun(#xmlel{name = <<"stanza-id">>} = C) ->
                                throng_xml:ns(C) =:= ?NS_SID andalso
                                    same_bare(throng_xml:attr(<<"by">>, C), Archive);
                           (_) -> false
                        end, Children),
    {[throng_xml:attr(<<"id">>, C, <<>>) || C <- Claims], El#xmlel{children = Rest}}.

same_bare(undefined, _Archive) -> false;
same_bare(By, Archive) ->
    case throng_jid:parse(By) of
        {ok, J} -> throng_jid:to_binary(throng_jid:bare(J)) =:= Archive;
        error -> false
    end.

stanza_id(Archive, Id) ->
    #xmlel{name = <<"stanza-id">>,
           attrs = [{<<"xmlns">>, ?NS_SID}, {<<"by">>, Archive},
                    {<<"id">>, throng_mam_id:encode(key(), Id)}]}.

%% @doc Whether a message belongs in an archive (XEP-0313 §6.1.1, XEP-0334):
%% chat and normal messages with a body or a store hint; not those with a
%% no-store or no-permanent-store hint, not group chat, headlines or
%% errors, and never a carbon copy or an archive result.
-spec archivable(#xmlel{}) -> boolean().
archivable(#xmlel{name = <<"message">>} = El) ->
    not lists:member(throng_stanza:type(El), [<<"groupchat">>, <<"headline">>, <<"error">>])
        andalso storable(El);
archivable(_) ->
    false.

%% @doc Whether a message's content belongs in an archive, whatever its
%% type (a room's archive takes group chat): a body or a store hint, no
%% no-store or no-permanent-store hint, not a carbon copy or an archive
%% result.
-spec storable(#xmlel{}) -> boolean().
storable(#xmlel{} = El) ->
    Children = throng_xml:subels(El),
    Has = fun(Name, NS) -> lists:any(fun(C) -> C#xmlel.name =:= Name andalso
                                                   throng_xml:ns(C) =:= NS end, Children)
          end,
    not Has(<<"no-store">>, ?NS_HINTS)
        andalso not Has(<<"no-permanent-store">>, ?NS_HINTS)
        andalso not Has(<<"received">>, ?NS_CARBONS)
        andalso not Has(<<"sent">>, ?NS_CARBONS)
        andalso not lists:any(fun(C) -> C#xmlel.name =:= <<"result">> andalso
                                            lists:member(throng_xml:ns(C), [?NS_MAM2, ?NS_MAM1])
                              end, Children)
        andalso (Has(<<"body">>, <<>>) orelse Has(<<"body">>, ?NS_CLIENT)
                 orelse Has(<<"store">>, ?NS_HINTS)).

%%% Preferences (XEP-0441)

%% @doc Whether the user's preferences archive messages with Peer.
-spec wanted(binary(), binary(), #jid{}) -> boolean().
wanted(U, S, Peer) ->
    {Default, Always, Never} = prefs(U, S),
    Bare = throng_jid:bare(Peer),
    Listed = fun([]) -> false;
                (JIDs) -> lists:member(throng_jid:to_binary(Peer), JIDs)
                              orelse lists:member(throng_jid:to_binary(Bare), JIDs)
             end,
    case {Listed(Never), Listed(Always), Default} of
        {true, _, _} -> false;
        {false, true, _} -> true;
        {false, false, always} -> true;
        {false, false, never} -> false;
        {false, false, roster} -> in_roster(U, S, Bare)
    end.

in_roster(U, S, #jid{user = CU, server = CS}) ->
    case throng_storage:roster_get_item(U, S, {CU, CS}) of
        #roster_item{subscription = Sub, ask = Ask, approved = Ap} ->
            throng_roster_sub:visible({Sub, Ask, Ap});
        undefined -> false
    end.

%% Read for the sender's and the recipient's archive of every message:
%% only for a user in the node's filter of those who set preferences
%% (most never do; in a cluster each read is a remote one).
prefs(U, S) ->
    Stored = case throng_kv_filter:maybe(?MODULE, {U, S}) of
                 true -> throng_storage:kv_get(?MODULE, {U, S});
                 false -> not_found
             end,
    case Stored of
        {ok, Prefs} -> Prefs;
        not_found -> {throng_ext:opt(S, ?MODULE, default_mode), [], []}
    end.

%% @doc The preferences a `<prefs/>' element sets; a list that is missing
%% is empty (XEP-0441).
-spec parse_prefs(#xmlel{}) -> {ok, prefs()} | error.
parse_prefs(El) ->
    Default = case throng_xml:attr(<<"default">>, El) of
                  <<"always">> -> always;
                  <<"never">> -> never;
                  <<"roster">> -> roster;
                  _ -> error
              end,
    List = fun(Name) ->
                   case throng_xml:subel(El, Name) of
                       undefined -> [];
                       L -> [throng_jid:parse(throng_xml:cdata(J))
                             || #xmlel{name = <<"jid">>} = J <- throng_xml:subels(L)]
                   end
           end,
    {Always, Never} = {List(<<"always">>), List(<<"never">>)},
    case Default =/= error andalso not lists:member(error, Always ++ Never) of
        true -> {ok, {Default, jids(Always), jids(Never)}};
        false -> error
    end.

jids(Parsed) ->
    lists:usort([throng_jid:to_binary(J) || {ok, J} <- Parsed]).

%% @doc The `<prefs/>' element of preferences.
-spec prefs_el(binary(), prefs()) -> #xmlel{}.
prefs_el(NS, {Default, Always, Never}) ->
    List = fun(Name, JIDs) ->
                   #xmlel{name = Name, children = [#xmlel{name = <<"jid">>,
                                                          children = [{xmlcdata, J}]}
                                                   || J <- JIDs]}
           end,
    #xmlel{name = <<"prefs">>, attrs = [{<<"xmlns">>, NS}, {<<"default">>, atom_to_binary(Default)}],
           children = [List(<<"always">>, Always), List(<<"never">>, Never)]}.

%%% The IQs of the archive's owner

%% @doc IQ handler: queries, the query form, preferences and metadata of
%% the user's own archive; anyone else is refused (XEP-0313 §9.1).
-spec iq(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{} | noreply.
iq(IQ, #{from := #jid{user = U, server = S}, to := #jid{user = U, server = S}} = Ctx) ->
    try own_iq(IQ, Ctx)
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => mam_iq_failed, user => U, server => S, reason => Why}),
            throng_stanza:error_reply(IQ, 'internal-server-error')
    end;
iq(IQ, _Ctx) ->
    throng_stanza:error_reply(IQ, forbidden).

own_iq(IQ, #{from := #jid{user = U, server = S}, payload := #xmlel{name = Name} = P} = Ctx) ->
    NS = throng_xml:ns(P),
    case {throng_stanza:type(IQ), Name} of
        {<<"set">>, <<"query">>} -> query(IQ, P, NS, Ctx);
        {<<"get">>, <<"query">>} -> throng_stanza:iq_result(IQ, [throng_mam_query:form(NS)]);
        {<<"get">>, <<"prefs">>} -> throng_stanza:iq_result(IQ, [prefs_el(NS, prefs(U, S))]);
        {<<"set">>, <<"prefs">>} -> set_prefs(IQ, P, NS, U, S);
        {<<"get">>, <<"metadata">>} when NS =:= ?NS_MAM2 -> metadata(IQ, U, S);
        _ -> throng_stanza:error_reply(IQ, 'bad-request')
    end.

set_prefs(IQ, P, NS, U, S) ->
    case parse_prefs(P) of
        {ok, Prefs} ->
            ok = throng_kv_filter:put(?MODULE, {U, S}, Prefs),
            throng_stanza:iq_result(IQ, [prefs_el(NS, Prefs)]);
        error ->
            throng_stanza:error_reply(IQ, 'bad-request')
    end.

%% The results, then the IQ result, go through the asking session's queue
%% in this order.
query(IQ, P, NS, #{from := #jid{user = U, server = S} = From, to := To}) ->
    PageSize = throng_ext:opt(S, ?MODULE, max_page_size),
    case throng_sm:lookup(From) of
        Pid when is_pid(Pid) ->
            case answer(IQ, P, NS, U, S, PageSize) of
                {ok, Results, Answer} ->
                    [throng_session:route(Pid, To, From, El) || El <- Results ++ [Answer]],
                    noreply;
                {error, Error} ->
                    Error
            end;
        _ ->
            throng_stanza:error_reply(IQ, 'internal-server-error')
    end.

%% @doc A query (`<query/>' P of namespace NS in the IQ) of the archive
%% U@S, with pages of PageSize at most: the result messages in the order
%% they go out, then the IQ's answer with its `<fin/>'; or the IQ's error.
-spec answer(#xmlel{}, #xmlel{}, binary(), binary(), binary(), pos_integer()) ->
    {ok, [#xmlel{}], #xmlel{}} | {error, #xmlel{}}.
answer(IQ, P, NS, U, S, PageSize) ->
    Key = key(),
    Limits = #{default => PageSize, cap => PageSize},
    case throng_mam_query:parse(P, fun(T) -> throng_mam_id:decode(Key, T) end, Limits) of
        {error, Cond, Text} ->
            {error, throng_stanza:error_reply(IQ, Cond, Text)};
        {ok, #{named := Named} = Q} ->
            case all_archived(U, S, lists:usort(Named)) of
                false ->
                    {error, throng_stanza:error_reply(IQ, 'item-not-found')};
                true ->
                    Page = throng_mam_query:page(
                             Q, fun(F, Dir, N) -> throng_storage:mam_query(U, S, F, Dir, N) end,
                             fun(F, Before) -> throng_storage:mam_count(U, S, F, Before) end),
                    Fin = throng_mam_query:fin(NS, Page, fun(Id) -> throng_mam_id:encode(Key, Id) end),
                    {ok, results(NS, Key, Q, Page), throng_stanza:iq_result(IQ, [Fin])}
            end
    end.

%% No ids: a query of 0 messages, which throng_storage answers itself.
all_archived(U, S, Ids) ->
    length(throng_storage:mam_query(U, S, #mam_filter{ids = Ids}, forward, length(Ids)))
        =:= length(Ids).

results(NS, Key, #{queryid := QueryId, flip := Flip}, #{messages := Msgs}) ->
    Ordered = case Flip of
                  true -> lists:reverse(Msgs);
                  false -> Msgs
              end,
    [throng_mam_query:result_message(NS, QueryId, throng_mam_id:encode(Key, Id), M)
     || #mam_msg{id = Id} = M <- Ordered].

metadata(IQ, U, S) ->
    throng_stanza:iq_result(IQ, [metadata_el(U, S, key())]).

%% @doc XEP-0313 §5: the `<metadata/>' of the archive U@S, its first and
%% last message.
-spec metadata_el(binary(), binary(), binary()) -> #xmlel{}.
metadata_el(U, S, Key) ->
    End = fun(Name, Direction) ->
                  [#xmlel{name = Name,
                          attrs = [{<<"id">>, throng_mam_id:encode(Key, Id)},
                                   {<<"timestamp">>, throng_stanza:stamp(Id)}]}
                   || #mam_msg{id = Id} <- throng_storage:mam_query(U, S, #mam_filter{},
                                                                    Direction, 1)]
          end,
    #xmlel{name = <<"metadata">>, attrs = [{<<"xmlns">>, ?NS_MAM2}],
           children = End(<<"start">>, forward) ++ End(<<"end">>, backward)}.

%%% Accounts and retention

%% @doc Hook: a removed account leaves no archive and no preferences.
-spec user_removed(ok, #{user := binary(), server := binary()}) -> ok.
user_removed(ok, #{user := U, server := S}) ->
    ok = throng_storage:mam_delete_user(U, S),
    throng_storage:kv_delete(?MODULE, {U, S}).

%% @doc Removes the host's messages past max_age or max_messages; run by the
%% timer on the first member of the cluster only, one sweep at a time.
-spec sweep(binary()) -> ok.
sweep(Host) ->
    sweep(Host, throng_ext:opt(Host, ?MODULE, max_age),
          throng_ext:opt(Host, ?MODULE, max_messages)).

%% @doc Removes the messages of the archives of a domain (a host's users,
%% or a MUC service's rooms) older than Days days and beyond each archive's
%% newest MaxMessages (0: no limit for either); does it only on the first
%% member of the cluster, one sweep of the domain at a time.
-spec sweep(binary(), non_neg_integer(), non_neg_integer()) -> ok.
sweep(Host, Days, MaxMessages) ->
    Max = case MaxMessages of
              0 -> infinity;
              N -> N
          end,
    Before = case Days of
                 0 -> 0;
                 _ -> max(0, os:system_time(microsecond) - Days * 86400 * 1000000)
             end,
    case hd(throng_members:members()) =:= node() andalso (Before > 0 orelse Max =/= infinity) of
        false -> ok;
        true ->
            Run = fun() -> expire(Host, Before, Max) end,
            _ = global:trans({{?MODULE, sweep, Host}, self()}, Run, [node()], 0),
            ok
    end.

expire(Host, Before, Max) ->
    try throng_storage:mam_expire(Host, Before, Max) of
        0 -> ok;
        N -> logger:info(#{what => mam_expired, host => Host, messages => N})
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => mam_expire_failed, host => Host, reason => Why})
    end.

%%% The key of the ids clients see

%% @doc The key of the ids clients see, the same for every archive.
-spec id_key() -> binary().
id_key() ->
    key().

%% Made once for every node that shares the storage (one kv_update/3 step,
%% serialized by the storage, so that two nodes starting on new storage do
%% not make two, and no node of the cluster is asked: one that hangs holds
%% up no one), kept in the key-value store, read once per node. The cache
%% is looked at again under a lock of this node only, so that the queries
%% of a burst that waited for it do not each read the store.
key() ->
    case persistent_term:get(?KEY_CACHE, undefined) of
        undefined ->
            global:trans({?KEY_CACHE, self()}, fun cached_key/0, [node()]);
        Key ->
            Key
    end.

cached_key() ->
    case persistent_term:get(?KEY_CACHE, undefined) of
        undefined ->
            Key = stored_key(),
            persistent_term:put(?KEY_CACHE, Key),
            Key;
        Key ->
            Key
    end.

stored_key() ->
    case throng_storage:kv_get(?MODULE, id_key) of
        {ok, Key} ->
            Key;
        not_found ->
            throng_storage:kv_update(?MODULE, id_key, fun({ok, Key}) -> {Key, keep};
                                                         (not_found) ->
                                                              Key = throng_mam_id:new_key(),
                                                              {Key, {put, Key}}
                                                      end)
    end.
