%% @doc In a cluster routing at the home, a stanza for a local user whose
%% home is another node is handed to the home, which routes it with its
%% own view of the user's sessions ({@link throng_sm:home_view/1}: an ETS
%% read there) and sends it on: one message to the home and one from it to
%% the session, and the sender does not wait. Without it the sender asks
%% the home for the view (an `erpc' round trip) and then delivers: three
%% messages, and a wait.
%% (An IQ to the account, which the server answers for it, and the
%% server's answer to a session of the sending node need no view, and are
%% routed where they are: throng_router.)
%%
%% == Order ==
%% Every stanza handed over for one bare JID goes through the same one of
%% the home's {@link throng_handoff_worker} processes (by a hash of the bare
%% JID), so what one process sends to one user arrives in the order it was
%% sent. Presence a session broadcasts to the subscribers whose home is
%% another node takes the same way ({@link deliver_available/3}), so a
%% presence cannot overtake a message sent before it (an initial presence,
%% which asks the homes for their answers, does not).
%%
%% == Nothing accepted is lost ==
%% Until the home says it has routed a stanza (delivered it to a session,
%% stored it offline, bounced it), the sending node keeps it in a table of
%% its own (`throng_handoff_pending'), with the work its route had deferred
%% ({@link throng_sm:carry/0}: the sender's archive copy). The home
%% confirms in batches: once a second its tracker sends each sending node
%% one message listing the jobs its workers did for it (at light load a
%% confirmation per job would cost as much as the lookup it replaces). When
%% the home goes down first, this node's tracker ({@link
%% throng_handoff_tracker}) routes the stanzas it kept again, once the home
%% has left the member list: to the user's new home, or to offline storage.
%% A stanza the home routed in the second before it went down may so be
%% delivered twice; none is lost. A stanza not confirmed in 30 s (the
%% home's worker was restarted, or the home runs a version without
%% workers) is routed again from here.
%%
%% Only with `cluster.route_at_home: true'. Off by default: measured at 4 x
%% 9,000 sessions it cost no less CPU than the lookup, and logouts more
%% (docs/benchmarks.md, "Routing at the home against the lookup"); without
%% it the sender looks the user up at the home and delivers itself.
-module(throng_handoff).

-include("throng.hrl").

-export([init_table/0, child_specs/0]).
-export([home_elsewhere/1, route/4, deliver_available/3, deliver_here/3]).
-export([pending/0, worker_name/1, worker_for/1, confirmed/2, take_from/1, take_older/1]).
-export([done/2, take_done/0]).
%% Called by throng_table_owner (a table creator named in throng_sup).
-ignore_xref([{init_table, 0}]).
%% For tests and operators: what this node keeps unconfirmed, which worker
%% takes a bare JID.
-ignore_xref([{pending, 0}, {worker_for, 1}]).

-define(PENDING, throng_handoff_pending).
%% On the home: {SendingNode, Seq} of each job done, until confirmed.
-define(DONE, throng_handoff_done).
%% The workers of a node; the same number on every node, since the sender
%% picks the home's worker.
-define(WORKERS, 8).

%% What a home's worker does: route a stanza (with the work its route
%% deferred), or deliver a presence to the available resources of bare JIDs.
-type job() :: {route, #jid{}, #jid{}, #xmlel{}, throng_sm:deferred()}
             | {available, #jid{}, #xmlel{}, [{binary(), binary()}]}.
-type entry() :: {{node(), integer()}, integer(), job()}.
-export_type([job/0, entry/0]).

-spec init_table() -> ok.
init_table() ->
    ?PENDING = ets:new(?PENDING, [set, public, named_table, {write_concurrency, true}]),
    ?DONE = ets:new(?DONE, [bag, public, named_table, {write_concurrency, true}]),
    ok.

%% @doc The tracker and the workers, for throng_sup's services.
-spec child_specs() -> [supervisor:child_spec()].
child_specs() ->
    [#{id => throng_handoff_tracker, start => {throng_handoff_tracker, start_link, []}}
     | [#{id => {throng_handoff_worker, I}, start => {throng_handoff_worker, start_link, [I]}}
        || I <- lists:seq(1, ?WORKERS)]].

%% @doc The registered name of worker I (the same on every node).
-spec worker_name(pos_integer()) -> atom().
worker_name(I) ->
    list_to_atom("throng_handoff_" ++ integer_to_list(I)).

%% @doc The name of the worker, on every node, that takes the jobs for a
%% bare JID.
-spec worker_for({binary(), binary()}) -> atom().
worker_for(US) ->
    worker_name(erlang:phash2(US, ?WORKERS) + 1).

%% @doc The stanzas this node keeps until their homes confirm them.
-spec pending() -> non_neg_integer().
pending() ->
    ets:info(?PENDING, size).

%% @doc Where a stanza for the local user To is routed: at its home, when
%% that is another member (and route_at_home is on), or here.
-spec home_elsewhere(#jid{}) -> {home, node()} | here.
home_elsewhere(#jid{user = U, server = S}) ->
    case on() of
        false -> here;
        true ->
            case throng_members:home({U, S}) of
                Home when Home =:= node() -> here;
                Home -> {home, Home}
            end
    end.

on() ->
    throng_members:clustered() andalso throng_config:get([cluster, route_at_home]).

%% @doc Hands a stanza for the local user To to To's home (see {@link
%% home_elsewhere/1}), with what the calling route deferred; here when this
%% node is not connected to the home (the caller routes it itself).
-spec route(node(), #jid{}, #jid{}, #xmlel{}) -> ok | here.
route(Home, From, #jid{user = U, server = S} = To, El) ->
    Carried = throng_sm:carry(),
    case send(Home, {U, S}, {route, From, To, El, Carried}) of
        ok -> ok;
        here ->
            ok = throng_sm:resume(Carried),
            here
    end.

%% @doc Delivers a presence From sends to every available resource of each
%% local bare JID of Contacts (a broadcast to subscribers): those whose home
%% is this node here, the others by their homes' workers.
-spec deliver_available(#jid{}, #xmlel{}, [{binary(), binary()}]) -> ok.
deliver_available(From, El, Contacts) ->
    ByHome = case on() of
                 false -> #{node() => Contacts};
                 true -> maps:groups_from_list(fun throng_members:home/1, Contacts)
             end,
    maps:foreach(
      fun(Home, USs) when Home =:= node() -> deliver_here(From, El, USs);
         (Home, USs) ->
              maps:foreach(fun(Worker, Group) ->
                                   case send_to(Home, Worker, {available, From, El, Group}) of
                                       ok -> ok;
                                       here -> deliver_here(From, El, Group)
                                   end
                           end, maps:groups_from_list(fun worker_for/1, USs))
      end, ByHome).

%% @doc Delivers a presence to the available resources of Contacts, with
%% this node's view of their sessions.
-spec deliver_here(#jid{}, #xmlel{}, [{binary(), binary()}]) -> ok.
deliver_here(From, El, Contacts) ->
    Online = throng_sm:available_many(Contacts),
    _ = [throng_session:route(Pid, From, #jid{user = CU, server = CS, resource = R}, El)
         || {CU, CS} = C <- Contacts, {R, Pid, _, _} <- maps:get(C, Online)],
    ok.

send(Home, US, Job) ->
    send_to(Home, worker_for(US), Job).

%% Kept, then sent; not kept when the home is not connected (here).
send_to(Home, Worker, Job) ->
    Seq = erlang:unique_integer([positive]),
    Key = {Home, Seq},
    true = ets:insert(?PENDING, {Key, erlang:monotonic_time(millisecond), Job}),
    case erlang:send({Worker, Home}, {handoff, node(), Seq, Job}, [noconnect]) of
        ok -> ok;
        noconnect ->
            _ = ets:delete(?PENDING, Key),
            here
    end.

%% @doc On the home: job Seq of node Origin is done (to be confirmed).
-spec done(node(), integer()) -> ok.
done(Origin, Seq) ->
    true = ets:insert(?DONE, {Origin, Seq}),
    ok.

%% @doc On the home: the jobs done since the last call, by sending node.
-spec take_done() -> [{node(), [integer()]}].
take_done() ->
    [{Origin, [Seq || {_, Seq} <- ets:take(?DONE, Origin)]}
     || Origin <- lists:usort(ets:select(?DONE, [{{'$1', '_'}, [], ['$1']}]))].

%% @doc On a confirmation from Home: its jobs Seqs are done.
-spec confirmed(node(), [integer()]) -> ok.
confirmed(Home, Seqs) ->
    _ = [ets:delete(?PENDING, {Home, Seq}) || Seq <- Seqs],
    ok.

%% @doc Takes the kept jobs handed to Home (to be done again).
-spec take_from(node()) -> [entry()].
take_from(Home) ->
    taken(ets:select(?PENDING, [{{{Home, '_'}, '_', '_'}, [], ['$_']}])).

%% @doc Takes the kept jobs handed over before Since (monotonic milliseconds).
-spec take_older(integer()) -> [entry()].
take_older(Since) ->
    taken(ets:select(?PENDING, [{{'_', '$1', '_'}, [{'<', '$1', Since}], ['$_']}])).

%% Each once: a confirmation or another taker may have come first.
taken(Entries) ->
    [E || {Key, _, _} = E <- Entries, ets:take(?PENDING, Key) =/= []].
