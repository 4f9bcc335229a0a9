%% @doc XEP-0198 stream management state of one session: counters of
%% handled stanzas in both directions and the queue of stanzas sent but not
%% yet acknowledged. Pure functions; the c2s process holds the record.
%%
%% The resumption id names the session process and is signed with the
%% node's boot secret, so no table maps ids to sessions and an id cannot be
%% forged or reused after a restart.
-module(throng_stream_mgmt).

-include("throng.hrl").

-export([new/1, handled/1, sent/2, ack/2, unacked/1, set_unacked/2, pending/1, should_request/2,
         requested/1, id/1, resumable/1, in_count/1, parse_id/1,
         enabled_el/3, a_el/1, r_el/0, resumed_el/2, failed_el/1]).

-define(MOD32, 4294967296).

-record(sm, {id :: binary(),
             resume :: boolean(),
             in = 0 :: non_neg_integer(),      %% stanzas handled from the client
             out = 0 :: non_neg_integer(),     %% stanzas sent to the client
             acked = 0 :: non_neg_integer(),   %% the client's last h
             queue = queue:new() :: queue:queue({non_neg_integer(), term()}),
             requested = false :: boolean()}). %% an <r/> is outstanding

-opaque state() :: #sm{}.
-export_type([state/0]).

-spec new(boolean()) -> state().
new(Resume) ->
    #sm{id = make_id(self()), resume = Resume}.

-spec id(state()) -> binary().
id(#sm{id = Id}) -> Id.

-spec resumable(state()) -> boolean().
resumable(#sm{resume = R}) -> R.

-spec in_count(state()) -> non_neg_integer().
in_count(#sm{in = In}) -> In.

%% @doc A stanza from the client was handled.
-spec handled(state()) -> state().
handled(#sm{in = In} = SM) -> SM#sm{in = (In + 1) rem ?MOD32}.

%% @doc A stanza was sent to the client (Item is what to re-deliver or store
%% if it is never acknowledged).
-spec sent(term(), state()) -> state().
sent(Item, #sm{out = Out, queue = Q} = SM) ->
    N = (Out + 1) rem ?MOD32,
    SM#sm{out = N, queue = queue:in({N, Item}, Q)}.

%% @doc The client acknowledged H stanzas. Drops them from the queue and
%% returns them, oldest first.
-spec ack(non_neg_integer(), state()) -> {ok, state(), [term()]} | {error, too_high}.
ack(H, #sm{out = Out, acked = Acked, queue = Q} = SM) ->
    case unacked_count(Acked, Out) >= unacked_count(Acked, H) of
        true ->
            {Dropped, Q1} = drop(H, Acked, Q, []),
            {ok, SM#sm{acked = H, queue = Q1, requested = false}, Dropped};
        false -> {error, too_high}
    end.

unacked_count(From, To) -> (To - From + ?MOD32) rem ?MOD32.

drop(H, Acked, Q, Dropped) ->
    case queue:peek(Q) of
        {value, {N, Item}} ->
            case unacked_count(Acked, N) =< unacked_count(Acked, H) of
                true -> drop(H, Acked, queue:drop(Q), [Item | Dropped]);
                false -> {lists:reverse(Dropped), Q}
            end;
        empty -> {lists:reverse(Dropped), Q}
    end.

%% @doc Items sent but not acknowledged, oldest first.
-spec unacked(state()) -> [term()].
unacked(#sm{queue = Q}) ->
    [Item || {_, Item} <- queue:to_list(Q)].

%% @doc Replaces the unacknowledged items, one for one and in order (the
%% same items, made durable).
-spec set_unacked([term()], state()) -> state().
set_unacked(Items, #sm{queue = Q} = SM) ->
    Numbers = [N || {N, _} <- queue:to_list(Q)],
    SM#sm{queue = queue:from_list(lists:zip(Numbers, Items))}.

-spec pending(state()) -> non_neg_integer().
pending(#sm{queue = Q}) ->
    queue:len(Q).

%% @doc Whether to send an <r/>: Every stanzas unacknowledged and none asked.
-spec should_request(state(), pos_integer()) -> boolean().
should_request(#sm{requested = true}, _Every) -> false;
should_request(#sm{queue = Q}, Every) -> queue:len(Q) >= Every.

-spec requested(state()) -> state().
requested(SM) -> SM#sm{requested = true}.

%%% Resumption ids

-spec make_id(pid()) -> binary().
make_id(Pid) ->
    Bin = term_to_binary(Pid),
    Mac = crypto:macN(hmac, sha256, throng_tables:boot_secret(), Bin, 16),
    base64:encode(<<Mac/binary, Bin/binary>>).

-spec parse_id(binary()) -> {ok, pid()} | error.
parse_id(Id) ->
    try base64:decode(Id) of
        <<Mac:16/binary, Bin/binary>> ->
            case crypto:hash_equals(Mac, crypto:macN(hmac, sha256, throng_tables:boot_secret(), Bin, 16)) of
                true -> {ok, binary_to_term(Bin, [safe])};
                false -> error
            end;
        _ -> error
    catch _:_ -> error
    end.

%%% Elements

-spec enabled_el(binary(), boolean(), non_neg_integer()) -> iodata().
enabled_el(Id, true, Max) ->
    ["<enabled xmlns='", ?NS_SM, "' id='", Id, "' resume='true' max='",
     integer_to_binary(Max), "'/>"];
enabled_el(_Id, false, _Max) ->
    ["<enabled xmlns='", ?NS_SM, "'/>"].

-spec a_el(non_neg_integer()) -> iodata().
a_el(H) -> ["<a xmlns='", ?NS_SM, "' h='", integer_to_binary(H), "'/>"].

-spec r_el() -> iodata().
r_el() -> ["<r xmlns='", ?NS_SM, "'/>"].

-spec resumed_el(binary(), non_neg_integer()) -> iodata().
resumed_el(Id, H) ->
    ["<resumed xmlns='", ?NS_SM, "' previd='", Id, "' h='", integer_to_binary(H), "'/>"].

-spec failed_el(atom()) -> iodata().
failed_el(Cond) ->
    ["<failed xmlns='", ?NS_SM, "'><", atom_to_binary(Cond), " xmlns='", ?NS_STANZAS,
     "'/></failed>"].
