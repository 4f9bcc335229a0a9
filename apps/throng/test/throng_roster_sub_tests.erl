%% @doc The subscription state machine against the tables of RFC 6121
%% Appendix A, written out state by state.
-module(throng_roster_sub_tests).

-include_lib("eunit/include/eunit.hrl").

%% The nine states of Appendix A.1 as {Subscription, Ask}.
-define(NONE, {none, none}).
-define(NONE_OUT, {none, out}).
-define(NONE_IN, {none, in}).
-define(NONE_OUT_IN, {none, both}).
-define(TO, {to, none}).
-define(TO_IN, {to, in}).
-define(FROM, {from, none}).
-define(FROM_OUT, {from, out}).
-define(BOTH, {both, none}).

check(Fun, Event, Table) ->
    [?assertEqual({From, Expected},
                  {From, begin
                             {{S, A, _}, Action} = throng_roster_sub:Fun(Event, erlang:append_element(From, false)),
                             {{S, A}, Action}
                         end})
     || {From, Expected} <- Table].

%% A.2.1: the user sends subscribe.
outbound_subscribe_test() ->
    check(outbound, subscribe,
          [{?NONE, {?NONE_OUT, route}}, {?NONE_OUT, {?NONE_OUT, route}},
           {?NONE_IN, {?NONE_OUT_IN, route}}, {?NONE_OUT_IN, {?NONE_OUT_IN, route}},
           {?TO, {?TO, route}}, {?TO_IN, {?TO_IN, route}},
           {?FROM, {?FROM_OUT, route}}, {?FROM_OUT, {?FROM_OUT, route}},
           {?BOTH, {?BOTH, route}}]).

%% A.2.3: the user sends unsubscribe.
outbound_unsubscribe_test() ->
    check(outbound, unsubscribe,
          [{?NONE, {?NONE, route}}, {?NONE_OUT, {?NONE, route}},
           {?NONE_IN, {?NONE_IN, route}}, {?NONE_OUT_IN, {?NONE_IN, route}},
           {?TO, {?NONE, route}}, {?TO_IN, {?NONE_IN, route}},
           {?FROM, {?FROM, route}}, {?FROM_OUT, {?FROM, route}},
           {?BOTH, {?FROM, route}}]).

%% A.2.2: the user approves (subscribed). Without a pending request it is a
%% pre-approval (checked below), never routed.
outbound_subscribed_test() ->
    check(outbound, subscribed,
          [{?NONE_IN, {?FROM, route}}, {?NONE_OUT_IN, {?FROM_OUT, route}},
           {?TO_IN, {?BOTH, route}},
           {?FROM, {?FROM, ignore}}, {?FROM_OUT, {?FROM_OUT, ignore}}, {?BOTH, {?BOTH, ignore}}]).

%% A.2.4: the user cancels or denies (unsubscribed).
outbound_unsubscribed_test() ->
    check(outbound, unsubscribed,
          [{?NONE, {?NONE, route}}, {?NONE_OUT, {?NONE_OUT, route}},
           {?NONE_IN, {?NONE, route}}, {?NONE_OUT_IN, {?NONE_OUT, route}},
           {?TO, {?TO, route}}, {?TO_IN, {?TO, route}},
           {?FROM, {?NONE, route}}, {?FROM_OUT, {?NONE_OUT, route}},
           {?BOTH, {?TO, route}}]).

%% A.3.1: a contact's subscribe arrives.
inbound_subscribe_test() ->
    check(inbound, subscribe,
          [{?NONE, {?NONE_IN, deliver}}, {?NONE_OUT, {?NONE_OUT_IN, deliver}},
           {?NONE_IN, {?NONE_IN, deliver}}, {?NONE_OUT_IN, {?NONE_OUT_IN, deliver}},
           {?TO, {?TO_IN, deliver}}, {?TO_IN, {?TO_IN, deliver}},
           {?FROM, {?FROM, auto_subscribed}}, {?FROM_OUT, {?FROM_OUT, auto_subscribed}},
           {?BOTH, {?BOTH, auto_subscribed}}]).

%% A.3.2: a contact's subscribed arrives.
inbound_subscribed_test() ->
    check(inbound, subscribed,
          [{?NONE, {?NONE, ignore}}, {?NONE_OUT, {?TO, deliver}},
           {?NONE_IN, {?NONE_IN, ignore}}, {?NONE_OUT_IN, {?TO_IN, deliver}},
           {?TO, {?TO, ignore}}, {?TO_IN, {?TO_IN, ignore}},
           {?FROM, {?FROM, ignore}}, {?FROM_OUT, {?BOTH, deliver}},
           {?BOTH, {?BOTH, ignore}}]).

%% A.3.3: a contact's unsubscribe arrives.
inbound_unsubscribe_test() ->
    check(inbound, unsubscribe,
          [{?NONE, {?NONE, ignore}}, {?NONE_OUT, {?NONE_OUT, ignore}},
           {?NONE_IN, {?NONE, deliver}}, {?NONE_OUT_IN, {?NONE_OUT, deliver}},
           {?TO, {?TO, ignore}}, {?TO_IN, {?TO, deliver}},
           {?FROM, {?NONE, deliver}}, {?FROM_OUT, {?NONE_OUT, deliver}},
           {?BOTH, {?TO, deliver}}]).

%% A.3.4: a contact's unsubscribed arrives.
inbound_unsubscribed_test() ->
    check(inbound, unsubscribed,
          [{?NONE, {?NONE, ignore}}, {?NONE_OUT, {?NONE, deliver}},
           {?NONE_IN, {?NONE_IN, ignore}}, {?NONE_OUT_IN, {?NONE_IN, deliver}},
           {?TO, {?NONE, deliver}}, {?TO_IN, {?NONE_IN, deliver}},
           {?FROM, {?FROM, ignore}}, {?FROM_OUT, {?FROM, deliver}},
           {?BOTH, {?FROM, deliver}}]).

%% §3.4: approving without a request records a pre-approval; the contact's
%% later request is answered automatically and the approval is used up.
pre_approval_test() ->
    {Approved, ignore} = throng_roster_sub:outbound(subscribed, {none, none, false}),
    ?assertEqual({none, none, true}, Approved),
    ?assertEqual({{from, none, false}, auto_subscribed},
                 throng_roster_sub:inbound(subscribe, Approved)),
    ?assertEqual({{both, none, false}, auto_subscribed},
                 throng_roster_sub:inbound(subscribe, {to, none, true})),
    %% Cancelling (unsubscribed) withdraws a pre-approval.
    ?assertEqual({{none, none, false}, route},
                 throng_roster_sub:outbound(unsubscribed, Approved)).

visibility_test() ->
    ?assertNot(throng_roster_sub:visible({none, in, false})),
    [?assert(throng_roster_sub:visible(S))
     || S <- [{none, none, false}, {none, out, false}, {none, both, false}, {to, in, false},
              {from, none, false}, {none, in, true}]].
