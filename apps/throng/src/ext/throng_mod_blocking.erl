%% @doc XEP-0191 Blocking Command: a user keeps a list of JIDs it does not
%% want to hear from or talk to.
%%
%% <ul>
%% <li>The list (`urn:xmpp:blocking'): get, block, unblock, unblock all;
%% every change is pushed to the user's resources that have asked for the
%% list (§3.3, §3.4).</li>
%% <li>From a blocked entity (§3.5): presence is dropped, a message or an
%% IQ get/set is answered with `service-unavailable', other IQs dropped.
%% Matching follows XEP-0016 §2.1: an item `user@domain/resource' blocks
%% that full JID, `user@domain' every resource of it, `domain/resource' and
%% `domain' the same at the domain level.</li>
%% <li>To a blocked entity (§3.6): the user's stanza is not routed; the
%% user gets `not-acceptable' with `&lt;blocked xmlns="urn:xmpp:blocking:errors"/&gt;'.
%% Presence the user broadcasts does not reach it.</li>
%% <li>Blocking a contact that may see the user's presence sends it
%% unavailable presence from each available resource; unblocking sends the
%% current presence again. (Unavailable presence from the user is the one
%% kind of stanza that still reaches a blocked contact: it shows nothing the
%% block does not already show.)</li>
%% </ul>
%%
%% == Where the list is read ==
%% Checks run on every stanza's path, so they must cost nothing for the
%% usual user, whose list is empty. The list is kept durably in the
%% per-module store (bucket `blocking', key `{User, Server}', a sorted list
%% of JIDs), and each node caches in ETS the <b>non-empty</b> lists of the
%% users who have a session on it (loaded when a session opens, dropped when
%% the last one closes). So for a user with a session on this node the
%% answer is one ETS read (no row: nothing blocked). For a user with no
%% session here (a message to an offline user; in a cluster, a user online
%% on another node, whose presence reaches a login here), the node's
%% filter of the users that have a list ({@link throng_kv_filter}) answers
%% first: only a user in it (or any user while the filter is not trusted,
%% just after a change of the cluster's members) is read from the store. A
%% change is applied to the cache and the filter of every node of the
%% cluster; a login reads the store only for a user in the filter.
-module(throng_mod_blocking).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1, start/2, stop/1]).
-export([iq/2, stanza_from_session/2, stanza_to_user/2, stanza_to_session/2,
         presence_in/2, session_opened/2, session_closed/2, user_removed/2]).
-export([cache_update/2, blocks/2, matches/2]).
%% IQ handler and hooks named in iq_handlers/0 and hooks/0 (throng_ext);
%% cache_update/2 is called on the other nodes of a cluster (erpc).
-ignore_xref([{iq, 2}, {stanza_from_session, 2}, {stanza_to_user, 2}, {stanza_to_session, 2},
              {presence_in, 2}, {session_opened, 2}, {session_closed, 2}, {user_removed, 2},
              {cache_update, 2}, {blocks, 2}]).
%% Pure rules, tested by throng_mod_blocking_tests.
-ignore_xref([{matches, 2}]).

-define(NS, <<"urn:xmpp:blocking">>).
-define(NS_ERRORS, <<"urn:xmpp:blocking:errors">>).
-define(BUCKET, blocking).
-define(CACHE, throng_mod_blocking).

-type us() :: {binary(), binary()}.

-spec options() -> throng_config_spec:spec().
options() ->
    #{max_items => #{type => {int, 1, 100000}, default => 1000,
                     doc => "JIDs a user may block. A block command that would go beyond "
                            "is refused with not-acceptable and changes nothing."}}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{account, ?NS, iq}].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    %% Before every other module: a blocked stanza is not archived,
    %% copied or answered.
    [{stanza_from_session, 10, stanza_from_session},
     {stanza_to_user, 10, stanza_to_user},
     {stanza_to_session, 10, stanza_to_session},
     {presence_in, 5, presence_in},
     {session_opened, 10, session_opened},
     {session_closed, 90, session_closed},
     {user_removed, 50, user_removed}].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    [?NS].

%% One cache table for every host, owned by the application's start process.
-spec start(binary(), map()) -> ok.
start(_Host, _Opts) ->
    case ets:whereis(?CACHE) of
        undefined ->
            _ = ets:new(?CACHE, [set, public, named_table, {read_concurrency, true}]),
            ok;
        _ -> ok
    end.

-spec stop(binary()) -> ok.
stop(Host) ->
    case ets:whereis(?CACHE) of
        undefined -> ok;
        _ -> _ = ets:match_delete(?CACHE, {{'_', Host}, '_'}), ok
    end.

%%% The protocol

%% @doc IQ handler: the user's own list. Another account's list is nobody
%% else's business.
-spec iq(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
iq(IQ, #{from := #jid{user = U, server = S} = From, to := #jid{user = U, server = S},
         payload := Payload, host := Host}) ->
    case {throng_stanza:type(IQ), Payload#xmlel.name} of
        {<<"get">>, <<"blocklist">>} ->
            throng_sm:set_flag(blocklist, true),
            throng_stanza:iq_result(IQ, [list_el(<<"blocklist">>, list({U, S}))]);
        {<<"set">>, <<"block">>} ->
            change(IQ, From, block, items(Payload), Host);
        {<<"set">>, <<"unblock">>} ->
            change(IQ, From, unblock, items(Payload), Host);
        _ ->
            throng_stanza:error_reply(IQ, 'bad-request')
    end;
iq(IQ, _Ctx) ->
    throng_stanza:error_reply(IQ, 'service-unavailable').

%% The JIDs of a block/unblock element: {ok, [Binary]} or the error.
items(#xmlel{children = Children}) ->
    Jids = [throng_xml:attr(<<"jid">>, C) || #xmlel{name = <<"item">>} = C <- Children],
    case lists:member(undefined, Jids) of
        true -> {error, 'bad-request'};
        false ->
            Parsed = [throng_jid:parse(J) || J <- Jids],
            case lists:member(error, Parsed) of
                true -> {error, 'jid-malformed'};
                false -> {ok, lists:usort([throng_jid:to_binary(J) || {ok, J} <- Parsed])}
            end
    end.

change(IQ, _From, _Op, {error, Cond}, _Host) ->
    throng_stanza:error_reply(IQ, Cond);
change(IQ, _From, block, {ok, []}, _Host) ->
    %% §3.3: a block with no item is an error (unblock with none is "all").
    throng_stanza:error_reply(IQ, 'bad-request');
change(IQ, #jid{user = U, server = S} = From, Op, {ok, Items}, Host) ->
    Old = list({U, S}),
    New = case {Op, Items} of
              {block, _} -> lists:umerge(Old, Items);
              {unblock, []} -> [];
              {unblock, _} -> Old -- Items
          end,
    Max = throng_ext:opt(Host, ?MODULE, max_items),
    if
        length(New) > Max ->
            throng_stanza:error_reply(IQ, 'not-acceptable',
                                      <<"the blocklist would exceed its limit">>);
        New =:= Old ->
            %% Nothing changes: the result, but no push and no presence.
            throng_stanza:iq_result(IQ);
        true ->
            try store({U, S}, New) of
                ok ->
                    %% An unblock of everything is pushed as one (§3.5).
                    changed(From, Op, Items, Old, New),
                    throng_stanza:iq_result(IQ)
            catch
                error:{storage_failed, Why} ->
                    logger:error(#{what => blocklist_write_failed,
                                   jid => throng_jid:to_binary(From), reason => Why}),
                    throng_stanza:error_reply(IQ, 'internal-server-error')
            end
    end.

%% After the change is stored: pushes to the resources that asked for the
%% list, then presence to the contacts whose view of the user changed.
changed(#jid{user = U, server = S} = From, Op, Pushed, Old, New) ->
    Bare = throng_jid:bare(From),
    Push = #xmlel{name = <<"iq">>,
                  attrs = [{<<"type">>, <<"set">>},
                           {<<"id">>, <<"push", (integer_to_binary(erlang:unique_integer([positive])))/binary>>}],
                  children = [list_el(atom_to_binary(Op), Pushed)]},
    throng_session:route_flagged(
      blocklist, [{Pid, Bare#jid{resource = R}} || {R, Pid, _, _} <- throng_sm:resources({U, S})],
      Bare, Push),
    Gone = [J || J <- New, not lists:member(J, Old)],
    Back = [J || J <- Old, not lists:member(J, New)],
    [throng_presence:unavailable_to(Bare, J) || J <- presence_targets(Bare, Gone)],
    [throng_presence:available_to(Bare, J) || J <- presence_targets(Bare, Back)],
    ok.

%% The blocked or unblocked items that may see the user's presence (a
%% subscription from or both, RFC 6121's rule for probes), as bare JIDs.
presence_targets(#jid{user = U, server = S}, Items) ->
    Parsed = [J || B <- Items, {ok, #jid{user = CU} = J} <- [throng_jid:parse(B)], CU =/= <<>>],
    [throng_jid:bare(J) || J <- Parsed, throng_presence:shares_with(U, S, {J#jid.user, J#jid.server})].

list_el(Name, Jids) ->
    #xmlel{name = Name, attrs = [{<<"xmlns">>, ?NS}],
           children = [#xmlel{name = <<"item">>, attrs = [{<<"jid">>, J}]} || J <- Jids]}.

%%% The checks

%% @doc Hook: the user sends a stanza to a JID it blocked: not routed, and
%% answered with not-acceptable + blocked (§3.6).
-spec stanza_from_session(#xmlel{}, #{from := #jid{}, to := #jid{}}) -> ok | stop.
stanza_from_session(El, #{from := From, to := To}) ->
    case blocks(From, To) of
        false -> ok;
        true ->
            Blocked = #xmlel{name = <<"blocked">>, attrs = [{<<"xmlns">>, ?NS_ERRORS}]},
            case throng_router:error_answer(From, To, El, 'not-acceptable', Blocked) of
                none -> ok;
                %% Straight to this session: the error comes from the
                %% blocked JID, which the inbound check would drop.
                Err -> throng_session:route(self(), To, From, Err)
            end,
            stop
    end.

%% @doc Hook: a message or IQ for a local user from a JID the user blocked
%% (§3.5): a message or IQ get/set gets service-unavailable, the rest is
%% dropped.
-spec stanza_to_user(#xmlel{}, #{from := #jid{}, to := #jid{}}) -> ok | stop.
stanza_to_user(El, #{from := From, to := To}) ->
    case blocks(To, From) of
        false -> ok;
        true ->
            throng_router:bounce(From, To, El, 'service-unavailable'),
            stop
    end.

%% @doc Hook: presence about to reach a client (broadcasts, the contacts'
%% presence at login, probe answers): not from a JID the user blocked, and
%% not from a user who blocked this one.
-spec stanza_to_session(#xmlel{}, #{from := #jid{}, to := #jid{}, jid := #jid{}}) -> ok | stop.
stanza_to_session(#xmlel{name = <<"presence">>} = El, #{from := From, jid := JID}) ->
    case own_blocks(JID, From) orelse local_blocks(From, JID, El) of
        true -> stop;
        false -> ok
    end;
stanza_to_session(_El, _Args) ->
    ok.

%% @doc Hook: presence routed to a local user (directed presence, probes,
%% subscription stanzas) in either direction of a block is dropped.
-spec presence_in(ok, #{from := #jid{}, to := #jid{}, el := #xmlel{}}) -> ok | stop.
presence_in(ok, #{from := From, to := To, el := El}) ->
    case blocks(To, From) orelse local_blocks(From, To, El) of
        true -> stop;
        false -> ok
    end.

%% Whether a local sender blocked the recipient of its presence. Unavailable
%% presence still goes: it is what blocking shows the contact (§3.3), and
%% it is sent so when the block is made.
%% In the session of JID: its user has a session here (this one), so its
%% list is cached if it is not empty: one ETS read, nothing else.
own_blocks(#jid{user = U, server = S}, #jid{user = U, server = S}) ->
    false;
own_blocks(#jid{user = U, server = S}, Other) ->
    case ets:lookup(?CACHE, {U, S}) of
        [] -> false;
        [{_, List}] -> matches(List, Other)
    end.

local_blocks(#jid{server = S} = From, To, El) ->
    throng_stanza:type(El) =/= <<"unavailable">>
        andalso From#jid.user =/= <<>> andalso throng_router:is_local(S)
        andalso blocks(From, To).

%% @doc Whether the local user of JID User blocks the entity Other (never
%% its own account, whatever the list says: a domain item does not cut a
%% user off from its own resources).
-spec blocks(#jid{}, #jid{}) -> boolean().
blocks(#jid{user = U, server = S}, #jid{user = U, server = S}) ->
    false;
blocks(#jid{user = U, server = S}, Other) ->
    case list({U, S}) of
        [] -> false;
        List -> matches(List, Other)
    end.

%% @doc Whether a blocklist (sorted JIDs as binaries) matches a JID, with
%% XEP-0016 §2.1's four forms.
-spec matches([binary()], #jid{}) -> boolean().
matches(List, #jid{user = U, server = S, resource = R}) ->
    Forms = [#jid{user = U, server = S, resource = R}, #jid{user = U, server = S, resource = <<>>},
             #jid{user = <<>>, server = S, resource = R}, #jid{user = <<>>, server = S, resource = <<>>}],
    lists:any(fun(J) -> lists:member(throng_jid:to_binary(J), List) end, lists:usort(Forms)).

%%% The list and its cache

%% A user's list: cached for a user with a session on this node (no row:
%% empty), otherwise read from the store.
-spec list(us()) -> [binary()].
list(US) ->
    case ets:lookup(?CACHE, US) of
        [{_, List}] -> List;
        [] ->
            case throng_sm:has_local(US) of
                true -> [];
                false -> stored(US)
            end
    end.

%% The stored list, read only if the filter says there may be one.
stored(US) ->
    case throng_kv_filter:maybe(?BUCKET, US) of
        true -> read(US);
        false -> []
    end.

read(US) ->
    case throng_storage:kv_get(?BUCKET, US) of
        {ok, List} -> List;
        not_found -> []
    end.

store(US, []) ->
    ok = throng_storage:kv_delete(?BUCKET, US),
    cache_everywhere(US, []);
store(US, List) ->
    ok = throng_storage:kv_put(?BUCKET, US, List),
    cache_everywhere(US, List).

cache_everywhere(US, List) ->
    cache_update(US, List),
    erpc:multicast(throng_members:others(), ?MODULE, cache_update, [US, List]).

%% @doc On every node: a user's new list, cached if the user has a session
%% here and the list is not empty (and then in the node's filter).
-spec cache_update(us(), [binary()]) -> ok.
cache_update(US, List) ->
    List =/= [] andalso throng_kv_filter:added(?BUCKET, US),
    case List =/= [] andalso throng_sm:has_local(US) of
        true -> true = ets:insert(?CACHE, {US, List});
        false -> true = ets:delete(?CACHE, US)
    end,
    ok.

%% @doc Hook: a session opened; its user's list is cached here (a store
%% read per login of a user in the filter; the row only if the list is not
%% empty). A change made meanwhile on another node reaches this cache by
%% its broadcast: the session is in the session table already.
-spec session_opened(ok, #{jid := #jid{}}) -> ok.
session_opened(ok, #{jid := #jid{user = U, server = S}}) ->
    try stored({U, S}) of
        [] -> ok;
        List -> true = ets:insert(?CACHE, {{U, S}, List}), ok
    catch
        error:{storage_failed, Why} ->
            %% Not fatal to the login, but blocking is not enforced for
            %% this user until its next session: say so loudly.
            logger:error(#{what => blocklist_read_failed, user => U, server => S, reason => Why}),
            ok
    end.

%% @doc Hook: the last session of the user on this node closed: the cached
%% list is dropped (the session already left the session table).
-spec session_closed(ok, #{jid := #jid{}}) -> ok.
session_closed(ok, #{jid := #jid{user = U, server = S}}) ->
    case throng_sm:has_local({U, S}) of
        true -> ok;
        false -> true = ets:delete(?CACHE, {U, S}), ok
    end.

%% @doc Hook: the account is gone, and its list with it.
-spec user_removed(ok, #{user := binary(), server := binary()}) -> ok.
user_removed(ok, #{user := U, server := S}) ->
    ok = throng_storage:kv_delete(?BUCKET, {U, S}),
    cache_everywhere({U, S}, []).
