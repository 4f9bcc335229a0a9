%% @doc Subscription requests waiting for a user (RFC 6121 §3.1.3): "the
%% contact's server MUST keep a record of the complete presence stanza
%% comprising the subscription request, including any extended content
%% contained therein", and deliver it whenever the user becomes available
%% until the request is approved or denied.
%%
%% The roster item's `ask' (Pending In) says that a request waits; the
%% stanza itself (its id, status, nick, any extension) is kept here, in the
%% storage's key-value store: bucket `sub_request', key
%% `{User, Server, {ContactUser, ContactServer}}', without from/to. One per
%% contact: a newer request replaces the older one (§3.1.3: only the most
%% recent is delivered). A stanza larger than `limits.subscription_request_max_bytes'
%% is kept without the children that do not fit (the request itself, its
%% attributes and the children before the limit are kept). A request stored
%% before this record existed (an item Pending In with no stanza) is
%% delivered as a plain `<presence type='subscribe'/>'.
-module(throng_sub_request).

-include("throng.hrl").

-export([store/4, get/3, delete/3, remove_user/2]).

-define(BUCKET, sub_request).

%% @doc Keeps the request El from Contact for the user U@S, bounded.
-spec store(binary(), binary(), {binary(), binary()}, #xmlel{}) -> ok.
store(U, S, Contact, El) ->
    Max = throng_config:get([limits, subscription_request_max_bytes]),
    Kept = bound(throng_stanza:copy(throng_stanza:strip_from_to(El)), Max),
    case length(Kept#xmlel.children) < length(El#xmlel.children) of
        true ->
            logger:info(#{what => subscription_request_truncated, user => U, server => S,
                          max_bytes => Max});
        false -> ok
    end,
    throng_storage:kv_put(?BUCKET, {U, S, Contact}, Kept).

%% @doc The request from Contact waiting for U@S, as it is to be delivered
%% (no from/to).
-spec get(binary(), binary(), {binary(), binary()}) -> #xmlel{}.
get(U, S, Contact) ->
    case throng_storage:kv_get(?BUCKET, {U, S, Contact}) of
        {ok, #xmlel{} = El} -> El;
        not_found -> #xmlel{name = <<"presence">>, attrs = [{<<"type">>, <<"subscribe">>}]}
    end.

%% @doc The request was answered or withdrawn.
-spec delete(binary(), binary(), {binary(), binary()}) -> ok.
delete(U, S, Contact) ->
    throng_storage:kv_delete(?BUCKET, {U, S, Contact}).

%% @doc Every request waiting for an account that is removed. The store has
%% no index by user: this scans the bucket's keys, once per removed account.
-spec remove_user(binary(), binary()) -> ok.
remove_user(U, S) ->
    lists:foreach(fun({U1, S1, _} = K) when U1 =:= U, S1 =:= S ->
                          throng_storage:kv_delete(?BUCKET, K);
                     (_) -> ok
                  end, throng_storage:kv_keys(?BUCKET)).

%% The stanza with as many of its children, in order, as keep its
%% serialized size within Max bytes (the element itself is always kept).
bound(#xmlel{children = Children} = El, Max) ->
    Base = iolist_size(throng_xml:to_iolist(El#xmlel{children = []})) + closing(El),
    El#xmlel{children = fit(Children, Max - Base)}.

%% `<name/>' becomes `<name>...</name>': the closing tag and one byte.
closing(#xmlel{name = Name}) -> byte_size(Name) + 2.

fit([], _Left) -> [];
fit([C | Rest], Left) ->
    Size = iolist_size(throng_xml:to_iolist(C)),
    case Size =< Left of
        true -> [C | fit(Rest, Left - Size)];
        false -> []
    end.
