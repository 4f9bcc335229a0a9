%% @doc Which keys a sparse key-value bucket holds, known on every node
%% without a read: a per-node filter ({@link throng_bloom}) of the
%% bucket's keys, for the buckets where most users have no row and the
%% question is asked on a hot path ("has this user blocked anyone?").
%% {@link maybe/2} answers false only for a key certainly not stored; the
%% caller then skips the read it would otherwise make (a remote one on a
%% node without a copy of the tables, a PostgreSQL round trip).
%%
%% == Its size ==
%% A filter is sized when it is built, for twice the keys the bucket holds
%% then and at least 1,024: 64 bits a key, so that a key never stored
%% answers "perhaps" about once in 74,000 when it is full, once in a
%% million when it is half full as built (8 KiB for a bucket of up to 512
%% keys, 1.6 MB for 100,000). A filter that has taken more adds than it was
%% sized for is built again, at the new size, while it goes on answering.
%% (It used to be 1 MiB whatever the bucket held: 2 MiB a node for the two
%% buckets, most of a cluster node's memory growth beyond its sessions'.)
%%
%% == Keeping it true ==
%% The filter only grows: a key that goes stays in it until the next build
%% (it costs one read, as without a filter). A key that comes must be in it
%% on every node before the writer relies on it, so the bucket's owner
%% calls {@link added/2} on every member after each write of a key (the
%% broadcast it makes anyway for its caches). A broadcast reaches the nodes
%% in the writer's member list and is lost when a link drops, so a filter
%% is built, and trusted, like this:
%% <ol>
%% <li>the builder notes the membership epoch ({@link throng_members:epoch/0}),
%%     registers an empty filter as being built (from then on {@link
%%     added/2} adds to it too),</li>
%% <li>asks every other member whether it lists this node (so that every
%%     broadcast made from then on reaches it),</li>
%% <li>adds every key of the bucket (a scan of the store), and makes the
%%     filter current for that epoch.</li>
%% </ol>
%% A key written before step 2's answer is in the scan; one written after
%% is broadcast to this node. Any change of the member list (a node joins,
%% leaves, goes down or comes back) changes the epoch, and a filter of
%% another epoch is not trusted: every question is answered "perhaps" (the
%% caller reads, as it would without a filter) and a new build starts. A
%% build that cannot finish (a member does not list this node yet, the
%% store is down) is tried again a second later. During a netsplit that
%% the nodes have not noticed yet (up to net_ticktime), a key written on
%% the other side is not known here: the filter answers as the other
%% nodes' caches do, by broadcast.
-module(throng_kv_filter).

-export([init/0, maybe/2, added/2, put/3, ready/1]).
%% Called by throng_table_owner (a table creator named in throng_sup), by
%% the other members (erpc) and by tests.
-ignore_xref([{init, 0}, {added, 2}, {ready, 1}]).

-define(TAB, ?MODULE).
-define(BITS_PER_KEY, 64).
-define(MIN_KEYS, 1024).
-define(RETRY_MS, 1000).
-define(CALL_TIMEOUT, 5000).
%% Builds in a row while the member list keeps changing under them.
-define(MAX_ROUNDS, 5).

%% @doc Creates the table of filters, owned by the calling process.
-spec init() -> ok.
init() ->
    ?TAB = ets:new(?TAB, [set, public, named_table, {read_concurrency, true}]),
    ok.

%% @doc false: Bucket certainly holds no Key. true: it may (or no filter
%% can be trusted now; a build is started).
-spec maybe(atom(), term()) -> boolean().
maybe(Bucket, Key) ->
    case ets:lookup(?TAB, {Bucket, current}) of
        [{_, Epoch, Bloom}] ->
            case throng_members:epoch() of
                Epoch -> throng_bloom:member(Bloom, Key);
                _ -> build_soon(Bucket)
            end;
        [] ->
            build_soon(Bucket)
    end.

%% @doc Key was written to Bucket: recorded in this node's filters (call
%% it on every member).
-spec added(atom(), term()) -> ok.
added(Bucket, Key) ->
    %% The filter being built first, then the current one: a build that
    %% ends in between has made its filter current before it stopped being
    %% the one built, so the key is in whichever filter is current after.
    [throng_bloom:add(B, Key) || {_, B} <- ets:lookup(?TAB, {Bucket, building})],
    [begin
         throng_bloom:add(B, Key),
         throng_bloom:count(B) > capacity(B) andalso build_soon(Bucket)
     end || {_, _, B} <- ets:lookup(?TAB, {Bucket, current})],
    ok.

%% @doc Stores Value under Key in Bucket (durable when it returns, as
%% {@link throng_storage:kv_put/3}) and records Key in the filters of every
%% member: for a bucket whose owner keeps no cache of its own to broadcast.
-spec put(atom(), term(), term()) -> ok.
put(Bucket, Key, Value) ->
    ok = throng_storage:kv_put(Bucket, Key, Value),
    ok = added(Bucket, Key),
    erpc:multicast(throng_members:others(), ?MODULE, added, [Bucket, Key]).

%% @doc Whether this node has a filter of Bucket it trusts.
-spec ready(atom()) -> boolean().
ready(Bucket) ->
    case ets:lookup(?TAB, {Bucket, current}) of
        [{_, Epoch, _}] -> Epoch =:= throng_members:epoch();
        [] -> false
    end.

%%% Building

%% One builder per bucket, registered under a name: a question asked while
%% one runs (or waits to try again) starts nothing.
build_soon(Bucket) ->
    case whereis(builder(Bucket)) of
        undefined -> _ = spawn(fun() -> builder(Bucket, 1) end), ok;
        _ -> ok
    end,
    true.

builder(Bucket) ->
    list_to_atom("throng_kv_filter_" ++ atom_to_list(Bucket)).

builder(Bucket, Round) ->
    try register(builder(Bucket), self()) of
        true -> build(Bucket, Round)
    catch
        error:badarg -> ok   %% another one runs
    end.

build(Bucket, Round) ->
    Epoch = throng_members:epoch(),
    try
        %% Sized by a first count of the keys; one that comes before the
        %% scan is counted in the adds, and if they outgrow the size, the
        %% filter is built again.
        Bloom = throng_bloom:new(bytes_for(length(throng_storage:kv_keys(Bucket)))),
        true = ets:insert(?TAB, {{Bucket, building}, Bloom}),
        {Bloom, fill(Bucket, Bloom)}
    of
        {Bloom, Keys} ->
            true = ets:insert(?TAB, {{Bucket, current}, Epoch, Bloom}),
            true = ets:delete(?TAB, {Bucket, building}),
            logger:info(#{what => kv_filter_built, bucket => Bucket, keys => Keys, epoch => Epoch,
                          bytes => throng_bloom:bytes(Bloom)}),
            case throng_members:epoch() of
                Epoch -> ok;
                _ when Round < ?MAX_ROUNDS -> build(Bucket, Round + 1);
                _ -> timer:sleep(?RETRY_MS)
            end
    catch
        Class:Why ->
            true = ets:delete(?TAB, {Bucket, building}),
            logger:notice(#{what => kv_filter_not_built, bucket => Bucket,
                            reason => {Class, Why}, retry_ms => ?RETRY_MS}),
            timer:sleep(?RETRY_MS)
    end.

%% Steps 2 and 3: how many keys went in.
fill(Bucket, Bloom) ->
    ok = confirm(throng_members:others()),
    Keys = throng_storage:kv_keys(Bucket),
    lists:foreach(fun(K) -> throng_bloom:add(Bloom, K) end, Keys),
    length(Keys).

%% The size of a filter for N keys, and how many adds a filter was sized for.
bytes_for(N) ->
    max(?MIN_KEYS, 2 * N) * ?BITS_PER_KEY div 8.

capacity(Bloom) ->
    throng_bloom:bytes(Bloom) * 8 div ?BITS_PER_KEY.

%% Every other member lists this node.
confirm([]) ->
    ok;
confirm([N | Rest]) ->
    case lists:member(node(), erpc:call(N, throng_members, members, [], ?CALL_TIMEOUT)) of
        true -> confirm(Rest);
        false -> error({not_listed_by, N})
    end.
