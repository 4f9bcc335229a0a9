%% @doc Presence (RFC 6121 §4): broadcasts to subscribers, answers to probes,
%% directed presence, and delivery of presence stanzas routed to a local user.
%%
%% A resource's current presence lives in the session table
%% ({@link throng_sm}), so probes are answered by reading the table: an
%% initial presence costs one table scan per contact, not a message to each
%% contact's process.
-module(throng_presence).

-include("throng.hrl").

-export([hooks/0, presence_in/2, initial/2, update/2, unavailable/3, to_subscribers/2,
         available_to/2, unavailable_to/2, priority/1, shares_with/3]).
%% Built-in hooks, installed by throng_ext for every host.
-ignore_xref([{hooks, 0}, {presence_in, 2}]).
%% Called by throng_presence_retry, named in the entries it keeps.
-ignore_xref([{to_subscribers, 2}]).

%% @doc Built-in handlers (see throng_ext:builtin/0): presence routed to a
%% local user, after the subscription handler of {@link throng_roster}.
-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{presence_in, 20, presence_in}].

%% @doc Hook: a presence stanza from From arrives for the local user To
%% (probes, available and unavailable presence, errors).
-spec presence_in(ok, #{from := #jid{}, to := #jid{}, el := #xmlel{}}) -> ok.
presence_in(ok, #{from := From, to := To, el := El}) ->
    case throng_stanza:type(El) of
        <<"probe">> ->
            probe(From, To);
        _ when To#jid.resource =:= <<>> ->
            %% RFC 6121 §8.5.2.1.2: to every available resource, and "the
            %% server MUST NOT rewrite the 'to' attribute".
            [throng_session:route(Pid, From, To, El)
             || {_R, Pid, _, _} <- throng_sm:available({To#jid.user, To#jid.server})],
            ok;
        _ ->
            case throng_sm:lookup(To) of
                Pid when is_pid(Pid) -> throng_session:route(Pid, From, To, El);
                undefined -> ok
            end
    end.

%% A probe is answered with the current presence of each available resource,
%% if the prober is subscribed (RFC 6121 §4.3.2).
probe(From, #jid{user = U, server = S}) ->
    case shares_with(U, S, {From#jid.user, From#jid.server}) of
        true -> available_to(#jid{user = U, server = S}, From);
        false -> ok
    end.

%% @doc Whether the local user U@S shares its presence with a contact (a
%% subscription from or both in U's roster): who may probe it, see its last
%% activity, its disco#info, its PEP nodes of access model presence.
-spec shares_with(binary(), binary(), {binary(), binary()}) -> boolean().
shares_with(U, S, Contact) ->
    case throng_storage:roster_get_item(U, S, Contact) of
        #roster_item{subscription = Sub} -> Sub =:= from orelse Sub =:= both;
        undefined -> false
    end.

%% @doc The session of User (a full JID) sent its initial presence El (no
%% from/to, priority already recorded). Broadcasts it to subscribers and the
%% user's other resources, and returns what the new resource must receive,
%% as {From, To, Stanza}: its own presence (RFC 6121 §4.2.2: an entity is
%% implicitly subscribed to its own presence), the current presence of every
%% contact it is subscribed to and of the user's other resources, then
%% pending subscription requests, complete as they were sent and addressed to
%% the bare JID (§3.1.3, §8.5.2.1.2).
-spec initial(#jid{}, #xmlel{}) -> [{#jid{}, #jid{}, #xmlel{}}].
initial(#jid{user = U, server = S} = User, El) ->
    {_Ver, Items} = throng_storage:roster_get(U, S),
    %% One session-table read per contact serves both directions: the
    %% broadcast to subscribers and the answer to the (implicit) probe. In a
    %% cluster the contacts' homes are asked together, each once.
    Contacts = [I || #roster_item{subscription = Sub, jid = {_, CS}} = I <- Items,
                     Sub =/= none, throng_router:is_local(CS)],
    Online = throng_sm:available_many([C || #roster_item{jid = C} <- Contacts]),
    Presences = lists:flatmap(fun(I) -> contact_initial(User, El, I, Online) end, Contacts),
    Others = [E || {R, _, _, _} = E <- throng_sm:available({U, S}), R =/= User#jid.resource],
    [throng_session:route(Pid, User, User#jid{resource = R}, El) || {R, Pid, _, _} <- Others],
    Own = [{User#jid{resource = R}, User, P} || {R, _Pid, _Prio, P} <- Others],
    Bare = throng_jid:bare(User),
    Requests = [{#jid{user = CU, server = CS}, Bare, throng_sub_request:get(U, S, C)}
                || {CU, CS} = C <- throng_roster_sub:pending_in(Items)],
    [{User, User, El} | Presences ++ Own ++ Requests].

contact_initial(User, El, #roster_item{jid = {CU, CS} = C, subscription = Sub}, Online) ->
    From = Sub =:= from orelse Sub =:= both,
    To = Sub =:= to orelse Sub =:= both,
    Available = maps:get(C, Online),
    [throng_session:route(Pid, User, #jid{user = CU, server = CS, resource = R}, El)
     || From, {R, Pid, _, _} <- Available],
    [{#jid{user = CU, server = CS, resource = R}, User, P}
     || To, {R, _, _, P} <- Available].

%% @doc A later available presence: to subscribers and all of the user's
%% available resources, the sending one included (RFC 6121 §4.4.2).
-spec update(#jid{}, #xmlel{}) -> ok.
update(User, El) ->
    broadcast(User, El, subscribers(User), true).

%% @doc The resource becomes unavailable: subscribers, the user's other
%% resources and every entity it sent directed presence to are told. When
%% the store cannot read the roster, the subscribers are told later, by
%% {@link throng_presence_retry}; this never raises storage_failed.
-spec unavailable(#jid{}, #xmlel{}, throng_directed:set()) -> ok.
unavailable(User, El, Directed) ->
    try subscribers(User) of
        Subscribers ->
            broadcast(User, El, Subscribers, false),
            directed_unavailable(User, El, throng_directed:to_list(Directed), Subscribers)
    catch error:{storage_failed, Why} ->
        %% The roster cannot be read: the user's other resources and those
        %% that had directed presence are told now (a subscriber among them
        %% hears it twice), the subscribers once the store answers again.
        broadcast(User, El, [], false),
        directed_unavailable(User, El, throng_directed:to_list(Directed), []),
        throng_presence_retry:later(User, El, {?MODULE, to_subscribers}, Why)
    end.

%% @doc Sends User's presence El to its subscribers only (not its own
%% resources): the deferred broadcast of {@link throng_presence_retry}.
%% Raises storage_failed when the roster cannot be read.
-spec to_subscribers(#jid{}, #xmlel{}) -> ok.
to_subscribers(User, El) ->
    deliver_to(User, El, subscribers(User)).

%% Those that got directed presence and are not subscribers (who had the
%% broadcast): one lookup each, not a scan of the subscribers. A JID of a
%% service domain (a MUC room) is told too: that is how a room learns that
%% an occupant's session ended.
directed_unavailable(_User, _El, [], _Subscribers) ->
    ok;
directed_unavailable(User, El, Directed, Subscribers) ->
    Subscribed = maps:from_keys(Subscribers, []),
    [throng_router:route(User, J, El)
     || J <- Directed, throng_router:is_served(J#jid.server),
        not is_map_key({J#jid.user, J#jid.server}, Subscribed)],
    ok.

%% @doc Sends the current presence of each of User's available resources to
%% Target (a bare JID: its available resources; a full JID: that resource).
-spec available_to(#jid{}, #jid{}) -> ok.
available_to(#jid{user = U, server = S}, Target) ->
    [throng_router:route(#jid{user = U, server = S, resource = R}, Target, P)
     || throng_router:is_local(Target#jid.server),
        {R, _Pid, _Prio, P} <- throng_sm:available({U, S})],
    ok.

%% @doc Sends unavailable presence from each of User's available resources
%% to Target.
-spec unavailable_to(#jid{}, #jid{}) -> ok.
unavailable_to(#jid{user = U, server = S}, Target) ->
    Unavailable = #xmlel{name = <<"presence">>, attrs = [{<<"type">>, <<"unavailable">>}]},
    [throng_router:route(#jid{user = U, server = S, resource = R}, Target, Unavailable)
     || throng_router:is_local(Target#jid.server),
        {R, _Pid, _Prio, _P} <- throng_sm:available({U, S})],
    ok.

%% @doc The bare JIDs subscribed to a user's presence.
-spec subscribers(#jid{}) -> [{binary(), binary()}].
subscribers(#jid{user = U, server = S}) ->
    {_Ver, Items} = throng_storage:roster_get(U, S),
    throng_roster_sub:subscribers(Items).

%% Presence goes to every available resource of each local subscriber, and
%% to the user's own available resources (RFC 6121 §4.2.2, §4.4.2): with
%% ToSelf, the sending resource too (available presence); without, only the
%% others (unavailable presence: the sender is leaving).
%% In a cluster with cluster.route_at_home, the subscribers whose home is
%% another node get it from their home, as a message to them would ({@link
%% throng_handoff}).
broadcast(#jid{user = U, server = S, resource = Self} = User, El, Subscribers, ToSelf) ->
    ok = deliver_to(User, El, Subscribers),
    [throng_session:route(Pid, User, User#jid{resource = R}, El)
     || {R, Pid, _, _} <- throng_sm:available({U, S}), ToSelf orelse R =/= Self],
    ok.

deliver_to(User, El, Subscribers) ->
    Local = [C || {_, CS} = C <- Subscribers, throng_router:is_local(CS)],
    throng_handoff:deliver_available(User, El, Local).

%% @doc The priority of an available presence: the <priority/> child, an
%% integer from -128 to 127 (0 when absent or invalid).
-spec priority(#xmlel{}) -> integer().
priority(El) ->
    case throng_xml:subel(El, <<"priority">>) of
        undefined -> 0;
        P ->
            try binary_to_integer(string:trim(throng_xml:cdata(P))) of
                N when N >= -128, N =< 127 -> N;
                _ -> 0
            catch error:badarg -> 0
            end
    end.
