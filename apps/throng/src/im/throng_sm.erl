%% @doc The session table: every bound resource on this node, with its
%% process, its presence priority and its last available presence.
%%
%% One ETS ordered_set keyed by {{User, Server}, Resource}, with read and
%% write concurrency: a login, a presence change or a message route reads and
%% writes it directly from the session's own process, never through a
%% server process. The ordered key makes "all resources of a bare JID" a
%% short range scan.
%%
%% Presence is kept here rather than in the session process so that a probe
%% or a new subscriber is answered by reading the table, without waking the
%% contact's (hibernated) process.
-module(throng_sm).

-include("throng.hrl").

-compile({no_auto_import, [register/2, unregister/1]}).
-export([init/0, register/2, unregister/2, set_presence/3, resources/1,
         available/1, lookup/1, count/0, all/0, next/1, set_detached/2, is_detached/1]).
%% Called by throng_table_owner (a table creator named in throng_sup).
-ignore_xref([{init, 0}]).

-define(TAB, throng_session).
%% Sessions whose connection dropped and that wait for a XEP-0198
%% resumption: only those, so an attached session costs nothing here.
-define(DETACHED, throng_detached).

%% prio: undefined while the resource is not available (no initial presence
%% yet, or it sent unavailable). pres: the presence element, without from and
%% to, or undefined. (Match specs below spell the record as a plain tuple,
%% {session, Key, Pid, Prio, Pres}, since '$1' is not of the fields' types.)
-record(session, {key :: {{binary(), binary()}, binary()},
                  pid :: pid(),
                  prio :: undefined | integer(),
                  pres :: undefined | empty | #xmlel{}}).

-type entry() :: {Resource :: binary(), pid(), Prio :: undefined | integer(),
                  Pres :: undefined | #xmlel{}}.
-type key() :: {{binary(), binary()}, binary()}.
-export_type([entry/0, key/0]).

-spec init() -> ok.
init() ->
    ?TAB = ets:new(?TAB, [ordered_set, public, named_table, {keypos, #session.key},
                          {read_concurrency, true}, {write_concurrency, true}]),
    ?DETACHED = ets:new(?DETACHED, [set, public, named_table,
                                    {read_concurrency, true}, {write_concurrency, true}]),
    ok.

%% @doc Registers the calling session for a full JID. When another process
%% holds that JID, returns it (the caller replaces it and retries).
-spec register(#jid{}, pid()) -> ok | {exists, pid()}.
register(#jid{user = U, server = S, resource = R}, Pid) ->
    Key = {{U, S}, R},
    case ets:insert_new(?TAB, #session{key = Key, pid = Pid}) of
        true -> ok;
        false ->
            case ets:lookup(?TAB, Key) of
                [#session{pid = Old}] -> {exists, Old};
                [] -> register(#jid{user = U, server = S, resource = R}, Pid)
            end
    end.

%% @doc Removes the entry of a full JID if it still belongs to Pid.
-spec unregister(#jid{}, pid()) -> ok.
unregister(#jid{user = U, server = S, resource = R}, Pid) ->
    Key = {{U, S}, R},
    _ = ets:select_delete(?TAB, [{{session, Key, Pid, '_', '_'}, [], [true]}]),
    ok.

%% @doc Records a resource's presence: a priority and presence element when
%% available, undefined when not.
-spec set_presence(#jid{}, undefined | integer(), undefined | #xmlel{}) -> ok.
set_presence(#jid{user = U, server = S, resource = R}, Prio, Pres) ->
    _ = ets:update_element(?TAB, {{U, S}, R}, [{#session.prio, Prio}, {#session.pres, pack(Pres)}]),
    ok.

%% The usual presence, <presence/> with nothing in it, is kept as an atom:
%% a few words less per session.
-define(EMPTY, #xmlel{name = <<"presence">>, attrs = [], children = []}).
pack(?EMPTY) -> empty;
pack(P) -> P.

unpack(empty) -> ?EMPTY;
unpack(P) -> P.

unpack_entries(Entries) ->
    [{R, Pid, Prio, unpack(P)} || {R, Pid, Prio, P} <- Entries].

%% @doc Every bound resource of a bare JID.
-spec resources({binary(), binary()}) -> [entry()].
resources(US) ->
    unpack_entries(
      ets:select(?TAB, [{{session, {US, '$1'}, '$2', '$3', '$4'}, [], [{{'$1', '$2', '$3', '$4'}}]}])).

%% @doc The available resources of a bare JID (those that sent presence).
-spec available({binary(), binary()}) -> [entry()].
available(US) ->
    unpack_entries(
      ets:select(?TAB, [{{session, {US, '$1'}, '$2', '$3', '$4'},
                         [{'=/=', '$3', undefined}], [{{'$1', '$2', '$3', '$4'}}]}])).

%% @doc The process of a full JID.
-spec lookup(#jid{}) -> pid() | undefined.
lookup(#jid{user = U, server = S, resource = R}) ->
    try ets:lookup_element(?TAB, {{U, S}, R}, #session.pid)
    catch error:badarg -> undefined
    end.

-spec count() -> non_neg_integer().
count() ->
    ets:info(?TAB, size).

%% @doc Every session as {FullJID, Pid} (admin use; walks the table).
-spec all() -> [{#jid{}, pid()}].
all() ->
    [{#jid{user = U, server = S, resource = R}, P}
     || #session{key = {{U, S}, R}, pid = P} <- ets:tab2list(?TAB)].

%% @doc The session after Key in table order, wrapping around to the first
%% (undefined: the first), with its process; none when there is no session.
%% One ets:next per call: walking with it visits every session in turn.
-spec next(key() | undefined) -> {key(), pid()} | none.
next(Key) ->
    Next = case Key of
               undefined -> ets:first(?TAB);
               _ -> case ets:next(?TAB, Key) of
                        '$end_of_table' -> ets:first(?TAB);
                        K -> K
                    end
           end,
    case Next of
        '$end_of_table' -> none;
        _ ->
            try {Next, ets:lookup_element(?TAB, Next, #session.pid)}
            catch error:badarg -> none   %% ended meanwhile
            end
    end.

%% @doc Marks the calling session as detached (its connection dropped and it
%% waits for a resumption) or attached again. Messages routed to a detached
%% session are kept durably by the router ({@link throng_inflight}).
-spec set_detached(pid(), boolean()) -> ok.
set_detached(Pid, true) ->
    true = ets:insert(?DETACHED, {Pid}),
    ok;
set_detached(Pid, false) ->
    true = ets:delete(?DETACHED, Pid),
    ok.

-spec is_detached(pid()) -> boolean().
is_detached(Pid) ->
    ets:member(?DETACHED, Pid).
