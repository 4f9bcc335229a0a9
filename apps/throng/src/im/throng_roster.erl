%% @doc Rosters (RFC 6121 §2) and presence subscriptions (§3): the roster
%% IQ, roster pushes with versioning, and the subscription stanzas in both
%% directions, driven by the pure state machine in {@link throng_roster_sub}.
%%
%% Everything here runs in the process of the session that caused it (the
%% sender's session for outbound subscription stanzas and for routed inbound
%% ones). Roster changes are read-modify-write transactions in storage;
%% pushes go to the user's sessions ({@link throng_session:roster_push/3}) and
%% each session forwards them only if it requested the roster. Every change
%% runs the `roster_item_changed' hook; the 'ver' of results and pushes
%% comes from the `roster_version' hook (roster versioning is a module).
-module(throng_roster).

-include("throng.hrl").

-export([hooks/0, presence_in/2, user_removed/2, process_iq/2, push_el/3, outbound/3, query_el/2]).
%% Built-in hooks, installed by throng_ext for every host.
-ignore_xref([{hooks, 0}, {presence_in, 2}, {user_removed, 2}]).

-type subscription() :: none | to | from | both.
-type ask() :: none | out | in | both.
-export_type([subscription/0, ask/0]).


%% @doc Built-in handlers (see throng_ext:builtin/0): subscription stanzas
%% routed to a local user are handled here, before the presence handler.
-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{presence_in, 10, presence_in}, {user_removed, 10, user_removed}].

%% @doc Hook: a presence stanza for a local user; subscription stanzas stop here.
-spec presence_in(ok, #{from := #jid{}, to := #jid{}, el := #xmlel{}}) -> ok | stop.
presence_in(ok, #{from := From, to := To, el := El}) ->
    case throng_stanza:type(El) of
        T when T =:= <<"subscribe">>; T =:= <<"subscribed">>;
               T =:= <<"unsubscribe">>; T =:= <<"unsubscribed">> ->
            inbound(From, To, El),
            stop;
        _ ->
            ok
    end.

%% @doc Hook: an account was removed; the subscription requests kept for it
%% go too (its roster went with the account).
-spec user_removed(ok, #{user := binary(), server := binary()}) -> ok.
user_removed(ok, #{user := U, server := S}) ->
    throng_sub_request:remove_user(U, S).

%%% The roster IQ

%% @doc Handles a roster get or set from the user's own session. Returns the
%% reply, and whether the session has now requested the roster.
-spec process_iq(#jid{}, #xmlel{}) -> {#xmlel{}, requested | unchanged}.
process_iq(User, IQ) ->
    Query = throng_xml:subel(IQ, <<"query">>, ?NS_ROSTER),
    case throng_stanza:type(IQ) of
        <<"get">> -> {get(User, IQ, Query), requested};
        <<"set">> -> {set(User, IQ, Query), unchanged};
        _ -> {throng_stanza:error_reply(IQ, 'bad-request'), unchanged}
    end.

get(#jid{user = U, server = S}, IQ, Query) ->
    {Ver, Items} = throng_storage:roster_get(U, S),
    VerBin = version(S, Ver),
    case VerBin =/= undefined andalso VerBin =:= throng_xml:attr(<<"ver">>, Query) of
        true ->
            %% The client's copy is current (RFC 6121 §2.6.3).
            throng_stanza:iq_result(IQ);
        false ->
            throng_stanza:iq_result(IQ, [query_el(Items, VerBin)])
    end.

%% @doc The roster as a `<query xmlns="jabber:iq:roster"/>' (RFC 6121
%% §2.1.4): the items a roster result shows, with the version when it has
%% one. Also the XEP-0133 get-user-roster result's payload.
-spec query_el([#roster_item{}], binary() | undefined) -> #xmlel{}.
query_el(Items, VerBin) ->
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_ROSTER} | ver_attr(VerBin)],
           children = [item_el(I) || I <- Items, is_visible(I)]}.

%% The 'ver' of the roster at version Ver, or undefined without versioning.
version(Host, Ver) ->
    {_, VerBin} = throng_hooks:run(roster_version, Host, undefined, #{version => Ver}),
    VerBin.

ver_attr(undefined) -> [];
ver_attr(VerBin) -> [{<<"ver">>, VerBin}].

set(User, IQ, Query) ->
    case [E || #xmlel{name = <<"item">>} = E <- throng_xml:subels(Query)] of
        [Item] ->
            case parse_item(Item) of
                {ok, Contact, Attrs} -> set_item(User, IQ, Contact, Attrs);
                {error, Cond} -> throng_stanza:error_reply(IQ, Cond)
            end;
        _ ->
            throng_stanza:error_reply(IQ, 'bad-request', <<"exactly one item expected">>)
    end.

parse_item(Item) ->
    case throng_jid:parse(throng_xml:attr(<<"jid">>, Item, <<>>)) of
        {ok, #jid{resource = <<>>} = J} ->
            Name = throng_xml:attr(<<"name">>, Item, <<>>),
            Groups = [throng_xml:cdata(G) || #xmlel{name = <<"group">>} = G <- throng_xml:subels(Item)],
            case throng_xml:attr(<<"subscription">>, Item) =:= <<"remove">> of
                true -> {ok, J, remove};
                false -> check_item(J, Name, Groups)
            end;
        {ok, _} -> {error, 'bad-request'};
        error -> {error, 'jid-malformed'}
    end.

%% RFC 6121 §2.3.3: not-acceptable for a name or group longer than the
%% server's limit and for an empty group; bad-request for a duplicate group.
%% The number of groups and the bytes of the whole item are bounded the same
%% way (limits.roster_*): together with the number of items they bound a
%% roster and every roster result.
check_item(J, Name, Groups) ->
    #{roster_max_name_bytes := MaxName, roster_max_groups := MaxGroups,
      roster_max_item_bytes := MaxItem} = throng_config:get([limits]),
    Bytes = byte_size(Name) + lists:sum([byte_size(G) || G <- Groups]),
    TooLong = byte_size(Name) > MaxName orelse lists:any(fun(G) -> byte_size(G) > MaxName end, Groups),
    if
        TooLong; length(Groups) > MaxGroups; Bytes > MaxItem -> {error, 'not-acceptable'};
        true ->
            case lists:member(<<>>, Groups) of
                true -> {error, 'not-acceptable'};
                false ->
                    case length(lists:usort(Groups)) =:= length(Groups) of
                        true -> {ok, J, {Name, Groups}};
                        false -> {error, 'bad-request'}
                    end
            end
    end.

%% Whether the user's roster can take Contact: it is there already, or the
%% roster has fewer than limits.roster_max_items items. Read before the
%% write, outside its transaction: concurrent additions (the user's own
%% sessions, requests arriving at the same moment) can pass it by a few.
room_for(U, S, Contact) ->
    %% One read: the item lookup would read the same rows.
    {_Ver, Items} = throng_storage:roster_get(U, S),
    lists:keymember(Contact, #roster_item.jid, Items)
        orelse length(Items) < throng_config:get([limits, roster_max_items]).

set_item(#jid{user = U, server = S} = User, IQ, #jid{user = CU, server = CS}, {Name, Groups}) ->
    Contact = {CU, CS},
    case room_for(U, S, Contact) of
        true -> update_item(User, IQ, Contact, Name, Groups);
        false -> throng_stanza:error_reply(IQ, 'policy-violation', <<"the roster is full">>)
    end;
set_item(#jid{user = U, server = S} = User, IQ, #jid{user = CU, server = CS} = C, remove) ->
    Contact = {CU, CS},
    case throng_storage:roster_update(U, S, Contact, fun(_) -> delete end) of
        {ok, undefined, _, _} ->
            throng_stanza:error_reply(IQ, 'item-not-found');
        {ok, Old, undefined, Ver} ->
            %% RFC 6121 §2.5.2: cancel both directions of the subscription.
            Bare = throng_jid:bare(User),
            (has_to(Old) orelse has_out(Old))
                andalso send_presence(Bare, C, <<"unsubscribe">>),
            case has_from(Old) of
                true ->
                    send_presence(Bare, C, <<"unsubscribed">>),
                    throng_presence:unavailable_to(User, C);
                false -> ok
            end,
            forget_request(User, Contact, Old, undefined),
            push(User, Old, undefined, Ver),
            throng_stanza:iq_result(IQ)
    end.

update_item(#jid{user = U, server = S} = User, IQ, Contact, Name, Groups) ->
    {ok, Old, New, Ver} =
        throng_storage:roster_update(
          U, S, Contact,
          fun(undefined) -> {set, #roster_item{jid = Contact, name = Name, groups = Groups}};
             (Old0) -> {set, Old0#roster_item{name = Name, groups = Groups}}
          end),
    push(User, Old, New, Ver),
    throng_stanza:iq_result(IQ).

%%% Subscription stanzas

%% @doc The user's session sends a subscription stanza (subscribe,
%% subscribed, unsubscribe, unsubscribed) to a contact.
-spec outbound(#jid{}, #jid{}, #xmlel{}) -> ok.
outbound(#jid{user = U, server = S} = User, To, El) ->
    Event = event(El),
    Contact = throng_jid:bare(To),
    CUS = {Contact#jid.user, Contact#jid.server},
    %% A subscribe or a pre-approval creates an item when there is none.
    case (Event =/= subscribe andalso Event =/= subscribed) orelse room_for(U, S, CUS) of
        true -> outbound(User, Contact, CUS, Event, El);
        false -> throng_router:bounce(User, To, El, 'policy-violation')
    end.

outbound(#jid{user = U, server = S} = User, Contact, CUS, Event, El) ->
    {ok, Old, New, Ver} =
        throng_storage:roster_update(U, S, CUS, transition(outbound, Event, CUS)),
    {_, Action} = throng_roster_sub:outbound(Event, state_of(Old)),
    maybe_push(User, Old, New, Ver),
    forget_request(User, CUS, Old, New),
    case Action of
        route ->
            %% Stamped with the bare JID (RFC 6121 §3.1.2).
            throng_router:route(throng_jid:bare(User), Contact,
                                throng_stanza:strip_from_to(El)),
            after_outbound(Event, User, Contact);
        _ ->
            ok
    end.

%% After approving, the contact gets the user's current presence; after
%% cancelling the contact's subscription, it sees the user go away.
after_outbound(subscribed, User, Contact) -> throng_presence:available_to(User, Contact);
after_outbound(unsubscribed, User, Contact) -> throng_presence:unavailable_to(User, Contact);
after_outbound(_, _, _) -> ok.

%% @doc A subscription stanza from From arrives for the local user To.
-spec inbound(#jid{}, #jid{}, #xmlel{}) -> ok.
inbound(From, #jid{user = U, server = S} = To, El) ->
    case throng_storage:account_exists(U, S) of
        %% RFC 6121 §8.5.1: for an account that does not exist, "for a
        %% presence stanza of type "subscribe", "subscribed", "unsubscribe",
        %% or "unsubscribed", the server MUST silently ignore the stanza".
        false -> ok;
        true -> inbound_existing(From, To, El)
    end.

inbound_existing(From, #jid{user = U, server = S} = To, El) ->
    Contact = throng_jid:bare(From),
    CUS = {Contact#jid.user, Contact#jid.server},
    %% Only a request creates an item (Pending In); past the roster limit it
    %% is not kept, and its sender learns so.
    case event(El) =/= subscribe orelse room_for(U, S, CUS) of
        true -> inbound_existing(Contact, throng_jid:bare(To), CUS, event(El), El);
        false -> throng_router:bounce(From, To, El, 'policy-violation')
    end.

inbound_existing(Contact, #jid{user = U, server = S} = User, CUS, Event, El) ->
    {ok, Old, New, Ver} =
        throng_storage:roster_update(U, S, CUS, transition(inbound, Event, CUS)),
    {_, Action} = throng_roster_sub:inbound(Event, state_of(Old)),
    maybe_push(User, Old, New, Ver),
    keep_request(User, CUS, Event, Action, Old, New, El),
    Stanza = throng_stanza:strip_from_to(El),
    case Action of
        deliver ->
            [throng_router:deliver(Pid, Contact, User, Stanza)
             || {_, Pid, _, _} <- throng_sm:available({U, S})],
            after_inbound(Event, User, Contact);
        auto_subscribed ->
            send_presence(User, Contact, <<"subscribed">>),
            throng_presence:available_to(User, Contact);
        ignore ->
            ok
    end.

%% The complete request is kept while it waits (RFC 6121 §3.1.3), and
%% forgotten once it no longer does (approved, denied, withdrawn).
keep_request(#jid{user = U, server = S}, Contact, subscribe, deliver, _Old, _New, El) ->
    throng_sub_request:store(U, S, Contact, El);
keep_request(User, Contact, _Event, _Action, Old, New, _El) ->
    forget_request(User, Contact, Old, New).

forget_request(#jid{user = U, server = S}, Contact, Old, New) ->
    case has_in(Old) andalso not has_in(New) of
        true -> throng_sub_request:delete(U, S, Contact);
        false -> ok
    end.

%% The contact stopped receiving the user's presence: it sees the user leave.
after_inbound(unsubscribe, User, Contact) -> throng_presence:unavailable_to(User, Contact);
after_inbound(_, _, _) -> ok.

transition(Direction, Event, Contact) ->
    fun(Old) ->
            {{Sub, Ask, Ap}, _} = throng_roster_sub:Direction(Event, state_of(Old)),
            case Old of
                undefined when Sub =:= none, Ask =:= none, Ap =:= false ->
                    keep;
                #roster_item{} when Sub =:= none, Ask =:= none, Ap =:= false ->
                    %% An item that existed only for a pending request goes.
                    case is_visible(Old) of
                        true -> {set, Old#roster_item{subscription = Sub, ask = Ask,
                                                      approved = Ap}};
                        false -> delete
                    end;
                undefined ->
                    {set, #roster_item{jid = Contact, subscription = Sub, ask = Ask,
                                       approved = Ap}};
                _ ->
                    {set, Old#roster_item{subscription = Sub, ask = Ask, approved = Ap}}
            end
    end.

state_of(undefined) -> {none, none, false};
state_of(#roster_item{subscription = S, ask = A, approved = Ap}) -> {S, A, Ap}.

event(El) ->
    case throng_stanza:type(El) of
        <<"subscribe">> -> subscribe;
        <<"subscribed">> -> subscribed;
        <<"unsubscribe">> -> unsubscribe;
        <<"unsubscribed">> -> unsubscribed
    end.

send_presence(From, To, Type) ->
    throng_router:route(From, To, #xmlel{name = <<"presence">>,
                                         attrs = [{<<"type">>, Type}]}).

%%% Pushes

maybe_push(_User, Same, Same, _Ver) -> ok;
maybe_push(User, Old, undefined, Ver) ->
    case is_visible(Old) of
        true -> push(User, Old, undefined, Ver);
        false -> ok
    end;
maybe_push(User, Old, New, Ver) ->
    case is_visible(New) of
        true -> push(User, Old, New, Ver);
        false -> ok
    end.

%% Sends a roster push to every session of the user; each forwards it to its
%% client if that client requested the roster.
push(#jid{user = U, server = S} = User, Old, New, Ver) ->
    Item = case New of
               undefined -> {removed, Old#roster_item.jid};
               _ -> New
           end,
    throng_hooks:notify(roster_item_changed, S, #{user => throng_jid:bare(User),
                                                  old => Old, new => New, version => Ver}),
    lists:foreach(fun({_, Pid, _, _}) -> throng_session:roster_push(Pid, Item, Ver) end,
                  throng_sm:resources({U, S})).

%% @doc The roster push IQ for an item (RFC 6121 §2.1.6), on a host.
-spec push_el(binary(), #roster_item{} | {removed, {binary(), binary()}}, non_neg_integer()) ->
    #xmlel{}.
push_el(Host, Item, Ver) ->
    ItemEl = case Item of
                 {removed, {CU, CS}} ->
                     #xmlel{name = <<"item">>,
                            attrs = [{<<"jid">>, throng_jid:to_binary(#jid{user = CU, server = CS})},
                                     {<<"subscription">>, <<"remove">>}]};
                 #roster_item{} -> item_el(Item)
             end,
    #xmlel{name = <<"iq">>,
           attrs = [{<<"type">>, <<"set">>},
                    {<<"id">>, <<"push", (integer_to_binary(erlang:unique_integer([positive])))/binary>>}],
           children = [#xmlel{name = <<"query">>,
                              attrs = [{<<"xmlns">>, ?NS_ROSTER} | ver_attr(version(Host, Ver))],
                              children = [ItemEl]}]}.

%%% Items

is_visible(#roster_item{subscription = S, ask = A, approved = Ap}) ->
    throng_roster_sub:visible({S, A, Ap}).

%% The <item/> of a roster result or push.
item_el(#roster_item{jid = {CU, CS}, name = Name, subscription = Sub, ask = Ask,
                     approved = Ap, groups = Groups}) ->
    Attrs = [{<<"jid">>, throng_jid:to_binary(#jid{user = CU, server = CS})}] ++
        [{<<"name">>, Name} || Name =/= <<>>] ++
        [{<<"subscription">>, atom_to_binary(Sub)}] ++
        [{<<"ask">>, <<"subscribe">>} || Ask =:= out orelse Ask =:= both] ++
        [{<<"approved">>, <<"true">>} || Ap],
    #xmlel{name = <<"item">>, attrs = Attrs,
           children = [#xmlel{name = <<"group">>, children = [{xmlcdata, G}]} || G <- Groups]}.

has_from(#roster_item{subscription = S}) -> S =:= from orelse S =:= both.
has_to(#roster_item{subscription = S}) -> S =:= to orelse S =:= both.
has_out(#roster_item{ask = A}) -> A =:= out orelse A =:= both.
has_in(#roster_item{ask = A}) -> A =:= in orelse A =:= both;
has_in(undefined) -> false.
