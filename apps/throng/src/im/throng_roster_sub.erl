%% @doc The subscription state machine of RFC 6121 §3 and Appendix A, as a
%% pure function from (state, event) to (new state, what to do).
%%
%% A state is {Subscription, Ask, Approved}: Subscription is none, to, from or
%% both; Ask records pending requests: out (the user asked the contact:
%% "Pending Out"), in (the contact asked the user: "Pending In") or both;
%% Approved is a pre-approval of the contact's future request (§3.4).
%%
%% Outbound events are presence stanzas the user sends about the contact;
%% inbound events are the contact's presence stanzas arriving at the user's
%% server. The result says whether the state changed (then the server pushes
%% the roster item when it is visible), and whether the stanza is routed
%% (outbound) or delivered to the user (inbound), or auto-answered.
-module(throng_roster_sub).

-include("throng.hrl").

-export([outbound/2, inbound/2, visible/1, subscribers/1, pending_in/1]).

-type subscription() :: none | to | from | both.
-type ask() :: none | out | in | both.
-type state() :: {subscription(), ask(), boolean()}.
-type event() :: subscribe | subscribed | unsubscribe | unsubscribed.
%% route: send the stanza to the contact. deliver: give it to the user's
%% resources. auto_subscribed: answer the contact with 'subscribed' on the
%% user's behalf. ignore: do neither.
-type action() :: route | deliver | auto_subscribed | ignore.
-export_type([subscription/0, ask/0, state/0, event/0, action/0]).

%% @doc The user sends Event to the contact (RFC 6121 §3.1.2, §3.2.2,
%% §3.3.2, §A.2).
-spec outbound(event(), state()) -> {state(), action()}.
outbound(subscribe, {Sub, Ask, Ap}) ->
    %% Pending Out is added unless the user is already subscribed.
    case Sub of
        S when S =:= to; S =:= both -> {{Sub, Ask, Ap}, route};
        _ -> {{Sub, add_out(Ask), Ap}, route}
    end;
outbound(subscribed, {Sub, Ask, Ap}) ->
    case has_in(Ask) of
        true -> {{add_from(Sub), del_in(Ask), false}, route};
        false ->
            case Sub of
                S when S =:= from; S =:= both -> {{Sub, Ask, Ap}, ignore};
                %% No request pending: a pre-approval, not routed (§3.4).
                _ -> {{Sub, Ask, true}, ignore}
            end
    end;
outbound(unsubscribe, {Sub, Ask, Ap}) ->
    {{del_to(Sub), del_out(Ask), Ap}, route};
outbound(unsubscribed, {Sub, Ask, _Ap}) ->
    %% Cancels the contact's subscription, denies a pending request and
    %% withdraws a pre-approval.
    {{del_from(Sub), del_in(Ask), false}, route}.

%% @doc The contact's Event arrives for the user (RFC 6121 §3.1.3, §3.1.5,
%% §3.2.3, §3.3.3, §A.3).
-spec inbound(event(), state()) -> {state(), action()}.
inbound(subscribe, {Sub, Ask, Ap}) ->
    case {Sub, Ap} of
        {S, _} when S =:= from; S =:= both -> {{Sub, Ask, Ap}, auto_subscribed};
        {_, true} -> {{add_from(Sub), del_in(Ask), false}, auto_subscribed};
        {_, false} -> {{Sub, add_in(Ask), Ap}, deliver}
    end;
inbound(subscribed, {Sub, Ask, Ap}) ->
    case has_out(Ask) of
        true -> {{add_to(Sub), del_out(Ask), Ap}, deliver};
        false -> {{Sub, Ask, Ap}, ignore}
    end;
inbound(unsubscribe, {Sub, Ask, Ap}) ->
    case Sub =:= from orelse Sub =:= both orelse has_in(Ask) of
        true -> {{del_from(Sub), del_in(Ask), Ap}, deliver};
        false -> {{Sub, Ask, Ap}, ignore}
    end;
inbound(unsubscribed, {Sub, Ask, Ap}) ->
    case Sub =:= to orelse Sub =:= both orelse has_out(Ask) of
        true -> {{del_to(Sub), del_out(Ask), Ap}, deliver};
        false -> {{Sub, Ask, Ap}, ignore}
    end.

%% @doc Whether an item in this state is shown in roster results and pushes:
%% an item that exists only because of a pending inbound request is not
%% (RFC 6121 §3.1.3).
-spec visible(state()) -> boolean().
visible({none, in, false}) -> false;
visible(_) -> true.

add_to(none) -> to;
add_to(from) -> both;
add_to(S) -> S.

del_to(to) -> none;
del_to(both) -> from;
del_to(S) -> S.

add_from(none) -> from;
add_from(to) -> both;
add_from(S) -> S.

del_from(from) -> none;
del_from(both) -> to;
del_from(S) -> S.

has_out(A) -> A =:= out orelse A =:= both.
has_in(A) -> A =:= in orelse A =:= both.

add_out(none) -> out;
add_out(in) -> both;
add_out(A) -> A.

del_out(out) -> none;
del_out(both) -> in;
del_out(A) -> A.

add_in(none) -> in;
add_in(out) -> both;
add_in(A) -> A.

del_in(in) -> none;
del_in(both) -> out;
del_in(A) -> A.

%% @doc Contacts that receive the user's presence (subscription from/both).
-spec subscribers([#roster_item{}]) -> [{binary(), binary()}].
subscribers(Items) ->
    [J || #roster_item{jid = J, subscription = S} <- Items, S =:= from orelse S =:= both].

%% @doc Contacts with a subscription request waiting for the user.
-spec pending_in([#roster_item{}]) -> [{binary(), binary()}].
pending_in(Items) ->
    [J || #roster_item{jid = J, ask = A} <- Items, A =:= in orelse A =:= both].
