%% @doc One of the processes of a node that do what other nodes hand to it
%% ({@link throng_handoff}): route stanzas for users whose home is this
%% node, and deliver presence broadcasts to them. Each job is done here as
%% its sender would have done it ({@link run/2}) and noted as done, for the
%% node's tracker to confirm to the sending node ({@link
%% throng_handoff_tracker}).
%%
%% == A node that does not answer ==
%% A message for a detached session of a third node is kept by that node
%% before it counts as routed ({@link throng_router:keep_and_deliver/4}):
%% a call that waits up to 10 s for a node that is cut off. That call runs
%% in a process of its own ({@link throng_router:defer_keeps/1}), so the
%% worker goes on with other users' stanzas meanwhile; the job is done
%% (confirmed to its sender) when the call is over, and what comes for the
%% same bare JID until then (a message, its part of a presence broadcast)
%% is held here and done after it, in the order it came.
-module(throng_handoff_worker).
-behaviour(gen_server).

-include("throng.hrl").

-export([start_link/1, run/2]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).
-ignore_xref([{start_link, 1}]).

-type us() :: {binary(), binary()}.
-type key() :: {node(), integer()}.
-record(st, {
          %% Bare JIDs with keeps not over: how many, and the parts of
          %% jobs for them that came since, to do after them in order.
          held = #{} :: #{us() => {non_neg_integer(), queue:queue({key(), throng_handoff:job()})}},
          %% The keeps not over: the bare JID and the job of each.
          keeps = #{} :: #{reference() => {us(), key()}},
          %% Jobs not done yet: how many of their parts (keeps, held parts)
          %% are not over.
          open = #{} :: #{key() => pos_integer()}}).

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
handle_info({handoff, Origin, Seq, Job}, St0) ->
    Key = {Origin, Seq},
    {Now, Later} = split(Job, St0#st.held),
    St1 = lists:foldl(fun({US, Part}, St) -> hold(US, Key, Part, St) end, St0, Later),
    St2 = case Now of
              none -> St1;
              _ -> do(Key, Now, St1)
          end,
    {noreply, settle(Key, St2)};
handle_info({'DOWN', MRef, process, _, Why}, #st{keeps = Keeps} = St)
  when is_map_key(MRef, Keeps) ->
    {{{U, S} = US, Key}, Rest} = maps:take(MRef, Keeps),
    Why =:= normal orelse
        logger:error(#{what => handoff_keep_failed, to => <<U/binary, "@", S/binary>>,
                       reason => Why}),
    {noreply, release(US, part_over(Key, St#st{keeps = Rest}))};
handle_info(_Msg, St) ->
    {noreply, St}.

%% What of a job is done now, and the parts held for bare JIDs with keeps
%% not over.
split(Job, Held) when map_size(Held) =:= 0 ->
    {Job, []};
split({route, _, #jid{user = U, server = S}, _, _} = Job, Held) ->
    case is_map_key({U, S}, Held) of
        true -> {none, [{{U, S}, Job}]};
        false -> {Job, []}
    end;
split({available, From, El, Contacts}, Held) ->
    {Later, Free} = lists:partition(fun(US) -> is_map_key(US, Held) end, Contacts),
    {case Free of
         [] -> none;
         _ -> {available, From, El, Free}
     end,
     [{US, {available, From, El, [US]}} || US <- Later]};
split(Job, _Held) ->
    %% Not a job this worker knows (a node of another version): done now,
    %% where run/2 fails and its failure is logged.
    {Job, []}.

%% Does a part of job Key; the keeps it started count as its parts.
do(Key, Part, St) ->
    {Ended, Started} = throng_router:defer_keeps(fun() -> run(Part, at_home) end),
    case Ended of
        {ok, _} -> ok;
        {Class, Why, Stack} ->
            %% Done as far as it will ever be: doing it again would fail again.
            {Origin, _} = Key,
            logger:error(#{what => handoff_route_failed, from_node => Origin, class => Class,
                           reason => Why, stack => Stack})
    end,
    lists:foldl(
      fun({MRef, US}, #st{held = Held, keeps = Keeps} = S) ->
              Entry = case Held of
                          #{US := {N, Q}} -> {N + 1, Q};
                          _ -> {1, queue:new()}
                      end,
              opened(Key, S#st{held = Held#{US => Entry}, keeps = Keeps#{MRef => {US, Key}}})
      end, St, Started).

hold(US, Key, Part, #st{held = Held} = St) ->
    #{US := {N, Q}} = Held,
    opened(Key, St#st{held = Held#{US => {N, queue:in({Key, Part}, Q)}}}).

opened(Key, #st{open = Open} = St) ->
    St#st{open = Open#{Key => maps:get(Key, Open, 0) + 1}}.

%% A job with no part left open is done.
settle({Origin, Seq} = Key, #st{open = Open} = St) ->
    is_map_key(Key, Open) orelse throng_handoff:done(Origin, Seq),
    St.

part_over({Origin, Seq} = Key, #st{open = Open} = St) ->
    case maps:get(Key, Open) of
        1 ->
            ok = throng_handoff:done(Origin, Seq),
            St#st{open = maps:remove(Key, Open)};
        N ->
            St#st{open = Open#{Key => N - 1}}
    end.

%% A keep for US is over: with none left, what was held for US is done,
%% in order, until a part starts keeps of its own.
release(US, #st{held = Held} = St) ->
    case Held of
        #{US := {1, Q}} -> drain(US, Q, St);
        #{US := {N, Q}} -> St#st{held = Held#{US => {N - 1, Q}}}
    end.

drain(US, Q0, #st{held = Held} = St0) ->
    case queue:out(Q0) of
        {empty, _} ->
            St0#st{held = maps:remove(US, Held)};
        {{value, {Key, Part}}, Q} ->
            St1 = part_over(Key, do(Key, Part, St0#st{held = Held#{US => {0, Q}}})),
            case St1#st.held of
                #{US := {0, Rest}} -> drain(US, Rest, St1);
                _ -> St1
            end
    end.
