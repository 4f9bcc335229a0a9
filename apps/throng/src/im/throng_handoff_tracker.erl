%% @doc The node's keeper of the jobs it handed to other nodes ({@link
%% throng_handoff}), and the confirmer of the jobs other nodes handed to
%% it: once a second it tells each sending node, in one message, which of
%% its jobs this node's workers did. It forgets the jobs their homes
%% confirm, and does again those whose home went down before confirming
%% (once the home has left the member list, so that they go to their
%% users' new homes), and those not confirmed within 30 s (the home's
%% worker was restarted, or the home runs a version without workers). A
%% job done again may have been done once already (its home went down
%% after doing it and before confirming): a stanza may so arrive twice;
%% none is lost.
-module(throng_handoff_tracker).
-behaviour(gen_server).

-export([start_link/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).
-ignore_xref([{start_link, 0}]).

-define(CONFIRM_MS, 1000).
-define(STALE_MS, 30000).
-define(SWEEP_MS, 10000).
%% After a nodedown: how often and how many times to look for the node to
%% leave the member list before its jobs are done again (~5 s at most).
-define(LEFT_POLL_MS, 100).
-define(LEFT_POLLS, 50).

-record(st, {}).

-spec start_link() -> {ok, pid()} | {error, term()}.
start_link() ->
    gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

-spec init([]) -> {ok, #st{}}.
init([]) ->
    ok = net_kernel:monitor_nodes(true),
    _ = erlang:send_after(?SWEEP_MS, self(), sweep),
    _ = erlang:send_after(?CONFIRM_MS, self(), confirm),
    {ok, #st{}}.

-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, {error, unknown_call}, #st{}}.
handle_call(_Req, _From, St) ->
    {reply, {error, unknown_call}, St}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info(confirm, St) ->
    _ = [erlang:send({?MODULE, Origin}, {handoff_done, node(), Seqs}, [noconnect])
         || {Origin, Seqs} <- throng_handoff:take_done()],
    _ = erlang:send_after(?CONFIRM_MS, self(), confirm),
    {noreply, St};
handle_info({handoff_done, Home, Seqs}, St) ->
    ok = throng_handoff:confirmed(Home, Seqs),
    {noreply, St};
handle_info({nodedown, Node}, St) ->
    self() ! {home_down, Node, 0},
    {noreply, St};
handle_info({home_down, Node, Polls}, St) ->
    _ = case lists:member(Node, throng_members:members()) andalso Polls < ?LEFT_POLLS of
            true -> erlang:send_after(?LEFT_POLL_MS, self(), {home_down, Node, Polls + 1});
            false -> again(throng_handoff:take_from(Node), home_down)
        end,
    {noreply, St};
handle_info(sweep, St) ->
    again(throng_handoff:take_older(erlang:monotonic_time(millisecond) - ?STALE_MS), unconfirmed),
    _ = erlang:send_after(?SWEEP_MS, self(), sweep),
    {noreply, St};
handle_info(_Msg, St) ->
    {noreply, St}.

again([], _Why) ->
    ok;
again(Entries, Why) ->
    logger:warning(#{what => handoff_routed_again, reason => Why, stanzas => length(Entries)}),
    throng_metrics:add(handoff_routed_again, length(Entries)),
    lists:foreach(
      fun({_Key, _Since, Job}) ->
              try throng_handoff_worker:run(Job, again)
              catch Class:Reason:Stack ->
                      logger:error(#{what => handoff_route_failed, class => Class,
                                     reason => Reason, stack => Stack})
              end
      end, Entries).
