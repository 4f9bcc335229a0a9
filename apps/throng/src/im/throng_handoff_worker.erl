%% @doc One of the processes of a node that do what other nodes hand to it
%% ({@link throng_handoff}): route stanzas for users whose home is this
%% node, and deliver presence broadcasts to them. Each job is done here as
%% its sender would have done it ({@link run/2}) and noted as done, for the
%% node's tracker to confirm to the sending node ({@link
%% throng_handoff_tracker}).
-module(throng_handoff_worker).
-behaviour(gen_server).

-export([start_link/1, run/2]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).
-ignore_xref([{start_link, 1}]).

-record(st, {}).

-spec start_link(pos_integer()) -> {ok, pid()} | {error, term()}.
start_link(I) ->
    gen_server:start_link({local, throng_handoff:worker_name(I)}, ?MODULE, [], []).

%% @doc Does a job in the calling process: at_home (a home's worker), routed
%% with this node's view and never handed on; again (the tracker, for a job
%% whose home went), routed as the sender routes, to the user's home of now.
%% A route runs in a route scope of its own (throng_sm:memo/1) with the work
%% its sender deferred, unless the caller is in one.
-spec run(throng_handoff:job(), at_home | again) -> ok.
run({route, From, To, El, Carried}, How) ->
    throng_sm:memo(fun() ->
                           ok = throng_sm:resume(Carried),
                           case How of
                               at_home -> throng_router:route_at_home(From, To, El);
                               again -> throng_router:route(From, To, El)
                           end
                   end);
run({available, From, El, Contacts}, at_home) ->
    throng_handoff:deliver_here(From, El, Contacts);
run({available, From, El, Contacts}, again) ->
    throng_handoff:deliver_available(From, El, Contacts).

-spec init([]) -> {ok, #st{}}.
init([]) ->
    {ok, #st{}}.

-spec handle_call(term(), gen_server:from(), #st{}) -> {reply, {error, unknown_call}, #st{}}.
handle_call(_Req, _From, St) ->
    {reply, {error, unknown_call}, St}.

-spec handle_cast(term(), #st{}) -> {noreply, #st{}}.
handle_cast(_Msg, St) ->
    {noreply, St}.

-spec handle_info(term(), #st{}) -> {noreply, #st{}}.
handle_info({handoff, Origin, Seq, Job}, St) ->
    try run(Job, at_home)
    catch Class:Why:Stack ->
            %% Done as far as it will ever be: doing it again would fail again.
            logger:error(#{what => handoff_route_failed, from_node => Origin, class => Class,
                           reason => Why, stack => Stack})
    end,
    ok = throng_handoff:done(Origin, Seq),
    {noreply, St};
handle_info(_Msg, St) ->
    {noreply, St}.
