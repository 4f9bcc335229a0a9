%% @doc XEP-0313 Message Archive Management for one-to-one chats, with
%% XEP-0359 stanza ids, XEP-0059 paging and XEP-0441 preferences, driven
%% through real clients on real sockets. Every case runs on both storage
%% backends (groups mnesia and pgsql).
-module(xep0313_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(MC, throng_mam_client).
-define(MAM, <<"urn:xmpp:mam:2">>).
-define(SID, <<"urn:xmpp:sid:0">>).
-define(RSM, <<"http://jabber.org/protocol/rsm">>).
-define(HOST, <<"localhost">>).

all() ->
    [{group, mnesia}, {group, mnesia_table}, {group, pgsql}].

%% mnesia keeps the archive in files (a node alone); mnesia_table in the
%% Mnesia table that a cluster's db nodes share (cluster.db_nodes: this
%% node), written with this node's id slot (throng_mam_slot).
groups() ->
    [{mnesia_table, [], cases()} | throng_ct:backend_groups(cases())].

cases() ->
      [archives_both_directions, stanza_id_same_online_offline_and_in_archive,
       spoofed_stanza_id_is_removed, routed_again_is_archived_once,
       pages_forward_with_after, pages_backward_with_before, flipped_page,
       page_size_is_capped, filter_with_bare_and_full_jid, filter_start_and_end,
       filter_after_id_before_id_and_ids, unknown_id_is_item_not_found,
       prefs_never_and_always, prefs_roster, prefs_read_only_for_users_who_set_them,
       no_store_hint, store_hint_without_body,
       groupchat_headline_and_error_not_archived, nonexistent_recipient_not_archived,
       blocked_message_in_senders_archive_only, senders_copy_written_at_the_routes_end,
       retention_max_messages, retention_max_age, retention_sweep_runs_by_itself,
       removed_account_loses_archive, archive_survives_restart,
       form_disco_and_metadata, only_the_owner_may_query, mam1_namespace].

init_per_group(mnesia_table, Config) ->
    [{db_nodes, [node()]} | throng_ct:init_backend(mnesia, Config)];
init_per_group(Group, Config) ->
    throng_ct:init_backend(Group, Config).

end_per_group(_Group, Config) ->
    throng_ct:end_backend(Config).

init_per_testcase(TC, Config) ->
    Mam = case TC of
              retention_max_messages -> #{max_messages => 3};
              retention_max_age -> #{max_age => 30};
              retention_sweep_runs_by_itself -> #{max_messages => 2, sweep_interval => 1};
              page_size_is_capped -> #{max_page_size => 5};
              _ -> #{}
          end,
    Modules = maps:merge(throng_config_spec:default_modules(),
                         #{ping => #{interval => 0}, mam => Mam}),
    Cluster = case ?config(db_nodes, Config) of
                  undefined -> #{};
                  DbNodes -> #{cluster => #{db_nodes => DbNodes}}
              end,
    throng_ct:start_backend(Config, Cluster#{modules => Modules}),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

online(User) ->
    online(User, <<"r">>).

online(User, Res) ->
    C = ?C:login(User, <<"password">>, Res),
    ok = ?C:available(C),
    C.

chat(C, To, Body) ->
    ?C:send(C, ?C:message(To, <<"chat">>, Body)).

%% Waits until the server has handled everything C sent before: its
%% stanzas are handled in order, so once a ping is answered the messages
%% sent before it are archived and routed. Other stanzas that arrive
%% meanwhile are returned.
sync(C) ->
    Id = integer_to_binary(erlang:unique_integer([positive])),
    ?C:send(C, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"get">>}, {<<"id">>, Id},
                                                 {<<"to">>, ?HOST}],
                      children = [#xmlel{name = <<"ping">>, attrs = [{<<"xmlns">>, ?NS_PING}]}]}),
    until_iq(C, Id, []).

until_iq(C, Id, Acc) ->
    El = ?C:recv_stanza(C),
    case {El#xmlel.name, throng_xml:attr(<<"id">>, El)} of
        {<<"iq">>, Id} -> lists:reverse(Acc);
        _ -> until_iq(C, Id, [El | Acc])
    end.

%% Messages with a body, until N came.
recv_chats(C, N) ->
    recv_chats(C, N, []).

recv_chats(_C, 0, Acc) ->
    lists:reverse(Acc);
recv_chats(C, N, Acc) ->
    El = ?C:recv_stanza(C),
    case El of
        #xmlel{name = <<"message">>} -> recv_chats(C, N - 1, [El | Acc]);
        _ -> recv_chats(C, N, Acc)
    end.

%% A query of one's own archive: the result messages in the order they
%% came, and the IQ's answer.
mam(C, Children) ->
    mam(C, ?MAM, Children).

mam(C, NS, Children) ->
    Id = integer_to_binary(erlang:unique_integer([positive])),
    ?C:send(C, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, Id}],
                      children = [#xmlel{name = <<"query">>,
                                         attrs = [{<<"xmlns">>, NS}, {<<"queryid">>, <<"q-", Id/binary>>}],
                                         children = Children}]}),
    collect(C, Id, <<"q-", Id/binary>>, []).

collect(C, Id, QueryId, Acc) ->
    El = ?C:recv_stanza(C),
    case El of
        #xmlel{name = <<"iq">>} ->
            ?assertEqual(Id, throng_xml:attr(<<"id">>, El)),
            {lists:reverse(Acc), El};
        #xmlel{name = <<"message">>} ->
            case throng_xml:subel(El, <<"result">>) of
                undefined -> collect(C, Id, QueryId, Acc);
                R ->
                    ?assertEqual(QueryId, throng_xml:attr(<<"queryid">>, R)),
                    collect(C, Id, QueryId, [El | Acc])
            end;
        _ -> collect(C, Id, QueryId, Acc)
    end.

%% Every message of one's archive (one page).
all(C) ->
    {Rs, IQ} = mam(C, []),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, IQ)),
    Rs.

form(Fields) -> ?MC:form(Fields).
rsm(Children) -> ?MC:rsm(Children).

%% A result's parts.
result_id(M) -> ?MC:result_id(M).
forwarded(M) -> ?MC:forwarded(M).
inner(M) -> ?MC:inner(M).
body(M) -> throng_xml:subel_cdata(inner(M), <<"body">>).
bodies(Rs) -> [body(M) || M <- Rs].
stamp(M) -> throng_xml:attr(<<"stamp">>, throng_xml:subel(forwarded(M), <<"delay">>)).

%% The <fin/> of an answer: complete, first, its index, last, count.
fin(IQ) ->
    Fin = throng_xml:subel(IQ, <<"fin">>, ?MAM),
    Set = throng_xml:subel(Fin, <<"set">>, ?RSM),
    First = throng_xml:subel(Set, <<"first">>),
    #{complete => throng_xml:attr(<<"complete">>, Fin),
      first => case First of undefined -> undefined; _ -> throng_xml:cdata(First) end,
      index => case First of undefined -> undefined;
                   _ -> binary_to_integer(throng_xml:attr(<<"index">>, First))
               end,
      last => case throng_xml:subel(Set, <<"last">>) of undefined -> undefined; L -> throng_xml:cdata(L) end,
      count => binary_to_integer(throng_xml:subel_cdata(Set, <<"count">>))}.

error_cond(IQ) ->
    ?assertEqual(<<"error">>, throng_xml:attr(<<"type">>, IQ)),
    [#xmlel{name = Cond} | _] = throng_xml:subels(throng_xml:subel(IQ, <<"error">>)),
    Cond.

%% The stanza ids of a message: {by, id}.
stanza_ids(M) -> ?MC:stanza_ids(M).

count(User) ->
    throng_storage:mam_count(User, ?HOST, #mam_filter{}).

%% Alice sends Bob N chat messages "1".."N" (Bob online reads them).
send_numbered(A, N) ->
    [chat(A, <<"bob@localhost">>, integer_to_binary(I)) || I <- lists:seq(1, N)],
    _ = sync(A),
    ok.

nums(From, To) -> [integer_to_binary(I) || I <- lists:seq(From, To)].

%%% Cases

%% A chat message is in the recipient's archive (from the sender) and in
%% the sender's (to the recipient), each with the stanza as sent.
archives_both_directions(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    chat(A, <<"bob@localhost">>, <<"hello">>),
    [_] = recv_chats(B, 1),
    chat(B, <<"alice@localhost/r">>, <<"hi back">>),
    [_] = recv_chats(A, 1),
    [BIn, BOut] = all(B),
    ?assertEqual({<<"hello">>, <<"alice@localhost/r">>, <<"bob@localhost">>},
                 {body(BIn), throng_xml:attr(<<"from">>, inner(BIn)), throng_xml:attr(<<"to">>, inner(BIn))}),
    ?assertEqual({<<"hi back">>, <<"bob@localhost/r">>, <<"alice@localhost/r">>},
                 {body(BOut), throng_xml:attr(<<"from">>, inner(BOut)),
                  throng_xml:attr(<<"to">>, inner(BOut))}),
    ?assertEqual([<<"hello">>, <<"hi back">>], bodies(all(A))),
    ?assertEqual(<<"chat">>, throng_xml:attr(<<"type">>, inner(BIn))).

%% The id Bob's archive gave a message is in the stanza he receives online,
%% in the copy Carol gets from offline storage, and in the archive's results
%% (XEP-0313 §3.3, XEP-0359).
stanza_id_same_online_offline_and_in_archive(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    chat(A, <<"bob@localhost">>, <<"online">>),
    [M] = recv_chats(B, 1),
    [{<<"bob@localhost">>, Id}] = stanza_ids(M),
    [R] = all(B),
    ?assertEqual(Id, result_id(R)),
    %% Carol is offline: the stored copy carries the id of her archive.
    chat(A, <<"carol@localhost">>, <<"offline">>),
    _ = sync(A),
    C = ?C:login(<<"carol">>, <<"password">>, <<"r">>),
    ?C:send(C, ?C:presence([])),
    [Stored] = recv_chats(C, 1),
    ?assertEqual(<<"offline">>, throng_xml:subel_cdata(Stored, <<"body">>)),
    [{<<"carol@localhost">>, CId}] = stanza_ids(Stored),
    [CR] = all(C),
    ?assertEqual(CId, result_id(CR)),
    ?assertNotEqual(Id, CId).

%% A stanza id with Bob's archive as 'by' put in by the sender is replaced
%% by the archive's own; one by someone else stays (XEP-0359 §5).
spoofed_stanza_id_is_removed(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    Sid = fun(By, Id) -> #xmlel{name = <<"stanza-id">>,
                                attrs = [{<<"xmlns">>, ?SID}, {<<"by">>, By}, {<<"id">>, Id}]} end,
    M0 = ?C:message(<<"bob@localhost">>, <<"chat">>, <<"spoof">>),
    ?C:send(A, M0#xmlel{children = M0#xmlel.children ++
                            [Sid(<<"bob@localhost">>, <<"forged">>), Sid(<<"Bob@LOCALHOST">>, <<"f2">>),
                             Sid(<<"other@example.org">>, <<"kept">>)]}),
    [M] = recv_chats(B, 1),
    Ids = stanza_ids(M),
    [{<<"bob@localhost">>, Id}] = [I || {<<"bob@localhost">>, _} = I <- Ids],
    ?assertEqual([{<<"other@example.org">>, <<"kept">>}],
                 [I || {By, _} = I <- Ids, By =/= <<"bob@localhost">>]),
    ?assertNotEqual(<<"forged">>, Id),
    [R] = all(B),
    ?assertEqual(Id, result_id(R)),
    %% A message with a forged id that is not archivable loses it too.
    H0 = ?C:message(<<"bob@localhost">>, <<"headline">>, <<"news">>),
    ?C:send(A, H0#xmlel{children = H0#xmlel.children ++ [Sid(<<"bob@localhost">>, <<"forged">>)]}),
    [H] = recv_chats(B, 1),
    ?assertEqual([], stanza_ids(H)).

%% A message a session had not acknowledged (XEP-0198) when it ended is
%% routed again to offline storage: it keeps its stanza id and the archive
%% keeps one copy.
routed_again_is_archived_once(_) ->
    B = online(<<"bob">>, <<"b">>),
    ?C:send(B, #xmlel{name = <<"enable">>, attrs = [{<<"xmlns">>, ?NS_SM}]}),
    #xmlel{name = <<"enabled">>} = ?C:recv_stanza(B),
    A = online(<<"alice">>),
    chat(A, <<"bob@localhost/b">>, <<"unacked">>),
    [M] = recv_chats(B, 1),
    [{_, Id}] = stanza_ids(M),
    ?C:close(B),
    throng_ct:wait_until(fun() -> throng_mod_offline:count(#jid{user = <<"bob">>, server = ?HOST}) =:= 1 end,
                         5000),
    ?assertEqual(1, count(<<"bob">>)),
    B2 = ?C:login(<<"bob">>, <<"password">>, <<"b2">>),
    ?C:send(B2, ?C:presence([])),
    [Again] = recv_chats(B2, 1),
    ?assertEqual([{<<"bob@localhost">>, Id}], stanza_ids(Again)),
    [R] = all(B2),
    ?assertEqual(Id, result_id(R)).

%% RSM forward paging with <after>: pages of max, complete only on the
%% last; first (with its index), last and count describe each page.
pages_forward_with_after(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    send_numbered(A, 7),
    _ = recv_chats(B, 7),
    {P1, IQ1} = mam(B, [rsm([{<<"max">>, <<"3">>}])]),
    ?assertEqual(nums(1, 3), bodies(P1)),
    F1 = fin(IQ1),
    ?assertMatch(#{complete := <<"false">>, index := 0, count := 7}, F1),
    ?assertEqual({result_id(hd(P1)), result_id(lists:last(P1))},
                 {maps:get(first, F1), maps:get(last, F1)}),
    {P2, IQ2} = mam(B, [rsm([{<<"max">>, <<"3">>}, {<<"after">>, maps:get(last, F1)}])]),
    ?assertEqual(nums(4, 6), bodies(P2)),
    ?assertMatch(#{complete := <<"false">>, index := 3, count := 7}, fin(IQ2)),
    {P3, IQ3} = mam(B, [rsm([{<<"max">>, <<"3">>}, {<<"after">>, maps:get(last, fin(IQ2))}])]),
    ?assertEqual([<<"7">>], bodies(P3)),
    ?assertMatch(#{complete := <<"true">>, index := 6, count := 7}, fin(IQ3)),
    %% A page that ends exactly at the end is complete too.
    {P4, IQ4} = mam(B, [rsm([{<<"max">>, <<"4">>}, {<<"after">>, maps:get(last, F1)}])]),
    ?assertEqual(nums(4, 7), bodies(P4)),
    ?assertMatch(#{complete := <<"true">>}, fin(IQ4)).

%% An empty <before/> reads the last page; <before> the pages before it,
%% each in chronological order, complete once the first message is in.
pages_backward_with_before(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    send_numbered(A, 7),
    _ = recv_chats(B, 7),
    {P1, IQ1} = mam(B, [rsm([{<<"max">>, <<"3">>}, {<<"before">>, <<>>}])]),
    ?assertEqual(nums(5, 7), bodies(P1)),
    ?assertMatch(#{complete := <<"false">>, index := 4, count := 7}, fin(IQ1)),
    {P2, IQ2} = mam(B, [rsm([{<<"max">>, <<"3">>}, {<<"before">>, maps:get(first, fin(IQ1))}])]),
    ?assertEqual(nums(2, 4), bodies(P2)),
    ?assertMatch(#{complete := <<"false">>, index := 1}, fin(IQ2)),
    {P3, IQ3} = mam(B, [rsm([{<<"max">>, <<"3">>}, {<<"before">>, maps:get(first, fin(IQ2))}])]),
    ?assertEqual([<<"1">>], bodies(P3)),
    ?assertMatch(#{complete := <<"true">>, index := 0, count := 7}, fin(IQ3)).

%% <flip-page/> sends the same page newest first; <first>/<last> still
%% name its oldest and newest message.
flipped_page(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    send_numbered(A, 5),
    _ = recv_chats(B, 5),
    {Plain, IQ1} = mam(B, [rsm([{<<"max">>, <<"3">>}, {<<"before">>, <<>>}])]),
    {Flipped, IQ2} = mam(B, [rsm([{<<"max">>, <<"3">>}, {<<"before">>, <<>>}]),
                             #xmlel{name = <<"flip-page">>}]),
    ?assertEqual(nums(3, 5), bodies(Plain)),
    ?assertEqual(lists:reverse(nums(3, 5)), bodies(Flipped)),
    ?assertEqual(fin(IQ1), fin(IQ2)).

%% The server's page size bounds what a client asks for, and applies when
%% it asks for nothing in particular (max_page_size 5 here).
page_size_is_capped(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    send_numbered(A, 7),
    _ = recv_chats(B, 7),
    {P1, IQ1} = mam(B, []),
    ?assertEqual(nums(1, 5), bodies(P1)),
    ?assertMatch(#{complete := <<"false">>, count := 7}, fin(IQ1)),
    {P2, _} = mam(B, [rsm([{<<"max">>, <<"100">>}])]),
    ?assertEqual(5, length(P2)),
    {[], IQ3} = mam(B, [rsm([{<<"max">>, <<"0">>}])]),
    ?assertMatch(#{count := 7, first := undefined}, fin(IQ3)).

%% 'with' a bare JID matches every resource of it; a full JID only that
%% resource; messages with others are left out.
filter_with_bare_and_full_jid(_) ->
    A1 = online(<<"alice">>, <<"one">>),
    A2 = online(<<"alice">>, <<"two">>),
    C = online(<<"carol">>),
    B = online(<<"bob">>),
    chat(A1, <<"bob@localhost">>, <<"from one">>),
    _ = sync(A1),
    chat(A2, <<"bob@localhost">>, <<"from two">>),
    _ = sync(A2),
    chat(C, <<"bob@localhost">>, <<"from carol">>),
    _ = recv_chats(B, 3),
    {Bare, _} = mam(B, [form([{<<"with">>, [<<"alice@localhost">>]}])]),
    ?assertEqual([<<"from one">>, <<"from two">>], bodies(Bare)),
    {Full, _} = mam(B, [form([{<<"with">>, [<<"alice@localhost/two">>]}])]),
    ?assertEqual([<<"from two">>], bodies(Full)),
    {Carol, IQ} = mam(B, [form([{<<"with">>, [<<"carol@localhost">>]}])]),
    ?assertEqual([<<"from carol">>], bodies(Carol)),
    ?assertMatch(#{count := 1, complete := <<"true">>}, fin(IQ)),
    %% Bob's messages to Alice, in his archive, match her too.
    chat(B, <<"alice@localhost/one">>, <<"to one">>),
    _ = sync(B),
    {Both, _} = mam(B, [form([{<<"with">>, [<<"alice@localhost">>]}])]),
    ?assertEqual([<<"from one">>, <<"from two">>, <<"to one">>], bodies(Both)).

%% 'start' and 'end' bound the time a message was archived, inclusively
%% (XEP-0082 stamps with microseconds, as the results carry them).
filter_start_and_end(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    send_numbered(A, 6),
    _ = recv_chats(B, 6),
    Rs = all(B),
    Stamp = fun(N) -> stamp(lists:nth(N, Rs)) end,
    {From3, _} = mam(B, [form([{<<"start">>, [Stamp(3)]}])]),
    ?assertEqual(nums(3, 6), bodies(From3)),
    {To4, _} = mam(B, [form([{<<"end">>, [Stamp(4)]}])]),
    ?assertEqual(nums(1, 4), bodies(To4)),
    {Between, IQ} = mam(B, [form([{<<"start">>, [Stamp(2)]}, {<<"end">>, [Stamp(5)]}])]),
    ?assertEqual(nums(2, 5), bodies(Between)),
    ?assertMatch(#{count := 4}, fin(IQ)),
    {[], _} = mam(B, [form([{<<"start">>, [<<"2100-01-01T00:00:00Z">>]}])]).

%% The extended fields: after-id and before-id bound the set (excluded
%% themselves), ids picks messages.
filter_after_id_before_id_and_ids(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    send_numbered(A, 6),
    _ = recv_chats(B, 6),
    Ids = [result_id(R) || R <- all(B)],
    Id = fun(N) -> lists:nth(N, Ids) end,
    {After2, _} = mam(B, [form([{<<"after-id">>, [Id(2)]}])]),
    ?assertEqual(nums(3, 6), bodies(After2)),
    {Before5, _} = mam(B, [form([{<<"before-id">>, [Id(5)]}])]),
    ?assertEqual(nums(1, 4), bodies(Before5)),
    {Between, IQ} = mam(B, [form([{<<"after-id">>, [Id(1)]}, {<<"before-id">>, [Id(4)]}])]),
    ?assertEqual(nums(2, 3), bodies(Between)),
    ?assertMatch(#{count := 2, complete := <<"true">>}, fin(IQ)),
    {Picked, _} = mam(B, [form([{<<"ids">>, [Id(5), Id(2)]}])]),
    ?assertEqual([<<"2">>, <<"5">>], bodies(Picked)),
    %% RSM pages within the extended fields.
    {Page, IQ2} = mam(B, [form([{<<"after-id">>, [Id(1)]}]), rsm([{<<"max">>, <<"2">>}])]),
    ?assertEqual(nums(2, 3), bodies(Page)),
    ?assertMatch(#{count := 5, index := 0, complete := <<"false">>}, fin(IQ2)).

%% An id the archive does not hold — made up, or a real one of another
%% user's archive — in RSM after/before, after-id, before-id or ids:
%% item-not-found (XEP-0313 §4.1.3, §4.3.2).
unknown_id_is_item_not_found(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    chat(A, <<"bob@localhost">>, <<"x">>),
    _ = recv_chats(B, 1),
    [AliceR] = all(A),
    Foreign = result_id(AliceR),
    [?assertEqual(<<"item-not-found">>, error_cond(element(2, mam(B, Q))))
     || Bad <- [<<"nonsense">>, Foreign, <<"AAAAAAAAAAAAAAAAAAAAAA">>],
        Q <- [[rsm([{<<"after">>, Bad}])], [rsm([{<<"before">>, Bad}])],
              [form([{<<"after-id">>, [Bad]}])], [form([{<<"before-id">>, [Bad]}])],
              [form([{<<"ids">>, [Bad]}])]]],
    %% The one that is there works.
    [BobR] = all(B),
    {[_], _} = mam(B, [form([{<<"ids">>, [result_id(BobR)]}])]).

prefs(C, Attrs, Always, Never) ->
    List = fun(Name, JIDs) -> #xmlel{name = Name, children = [#xmlel{name = <<"jid">>,
                                                                     children = [{xmlcdata, J}]}
                                                              || J <- JIDs]} end,
    ?C:iq(C, <<"set">>, #xmlel{name = <<"prefs">>, attrs = [{<<"xmlns">>, ?MAM} | Attrs],
                               children = [List(<<"always">>, Always), List(<<"never">>, Never)]}).

%% XEP-0441: a JID in 'never' is not archived (in this user's archive; the
%% other party's keeps it), 'always' wins over a default of never, and the
%% preferences are read back as set.
prefs_never_and_always(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    C = online(<<"carol">>),
    R = prefs(B, [{<<"default">>, <<"always">>}], [], [<<"alice@localhost">>]),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    chat(A, <<"bob@localhost">>, <<"not kept by bob">>),
    chat(C, <<"bob@localhost">>, <<"kept">>),
    _ = recv_chats(B, 2),
    ?assertEqual([<<"kept">>], bodies(all(B))),
    ?assertEqual([<<"not kept by bob">>], bodies(all(A))),
    %% Outgoing too: Bob's message to Alice is not in his archive.
    chat(B, <<"alice@localhost">>, <<"to alice">>),
    _ = recv_chats(A, 1),
    ?assertEqual([<<"kept">>], bodies(all(B))),
    %% Default never, Carol always.
    _ = prefs(B, [{<<"default">>, <<"never">>}], [<<"carol@localhost">>], []),
    chat(A, <<"bob@localhost">>, <<"never">>),
    chat(C, <<"bob@localhost">>, <<"always">>),
    _ = recv_chats(B, 2),
    ?assertEqual([<<"kept">>, <<"always">>], bodies(all(B))),
    Get = ?C:iq(B, <<"get">>, #xmlel{name = <<"prefs">>, attrs = [{<<"xmlns">>, ?MAM}]}),
    P = throng_xml:subel(Get, <<"prefs">>),
    ?assertEqual(<<"never">>, throng_xml:attr(<<"default">>, P)),
    ?assertEqual(<<"carol@localhost">>,
                 throng_xml:subel_cdata(throng_xml:subel(P, <<"always">>), <<"jid">>)),
    ?assertEqual(<<"bad-request">>,
                 error_cond(prefs(B, [{<<"default">>, <<"sometimes">>}], [], []))).

%% Preferences are read (for both archives of every message) only for a
%% user in the node's filter of those who set them: none for users who
%% never did, once the filter is trusted. Preferences set after the filter
%% was built are in it at once, and obeyed.
prefs_read_only_for_users_who_set_them(_) ->
    _ = throng_kv_filter:maybe(throng_mod_mam, {<<"nobody">>, ?HOST}),
    ok = throng_ct:wait_until(fun() -> throng_kv_filter:ready(throng_mod_mam) end, 5000),
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    %% The first archived message reads the key of the stanza ids, once.
    chat(A, <<"bob@localhost">>, <<"zero">>),
    _ = recv_chats(B, 1),
    MFA = {throng_storage, kv_get, 2},
    1 = erlang:trace_pattern(MFA, true, [call_count]),
    try
        chat(A, <<"bob@localhost">>, <<"one">>),
        chat(A, <<"bob@localhost">>, <<"two">>),
        _ = recv_chats(B, 2),
        ?assertEqual({call_count, 0}, erlang:trace_info(MFA, call_count)),
        ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, prefs(B, [{<<"default">>, <<"always">>}],
                                                                     [], [<<"alice@localhost">>]))),
        chat(A, <<"bob@localhost">>, <<"not kept by bob">>),
        _ = recv_chats(B, 1),
        {call_count, Reads} = erlang:trace_info(MFA, call_count),
        ?assert(Reads >= 1, Reads)
    after
        erlang:trace_pattern(MFA, false, [call_count])
    end,
    ?assertEqual([<<"zero">>, <<"one">>, <<"two">>], bodies(all(B))),
    ?assertEqual([<<"zero">>, <<"one">>, <<"two">>, <<"not kept by bob">>], bodies(all(A))).

%% Default roster: only messages with contacts of the roster are archived.
prefs_roster(_) ->
    ok = throng_ct:mutual(<<"alice">>, <<"bob">>),
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    C = online(<<"carol">>),
    _ = ?C:flush(B),
    _ = prefs(B, [{<<"default">>, <<"roster">>}], [], []),
    chat(A, <<"bob@localhost">>, <<"contact">>),
    chat(C, <<"bob@localhost">>, <<"stranger">>),
    _ = recv_chats(B, 2),
    ?assertEqual([<<"contact">>], bodies(all(B))).

%% XEP-0334: <no-store/> keeps a message out of every archive, and it is
%% delivered without a stanza id.
no_store_hint(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    M = ?C:message(<<"bob@localhost">>, <<"chat">>, <<"secret">>),
    ?C:send(A, M#xmlel{children = M#xmlel.children ++
                           [#xmlel{name = <<"no-store">>, attrs = [{<<"xmlns">>, <<"urn:xmpp:hints">>}]}]}),
    [Got] = recv_chats(B, 1),
    ?assertEqual([], stanza_ids(Got)),
    ?assertEqual([], all(B)),
    ?assertEqual([], all(A)).

%% <store/> makes a message without a body archivable; a chat state alone
%% is not archived.
store_hint_without_body(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    Msg = fun(Child) -> #xmlel{name = <<"message">>,
                               attrs = [{<<"to">>, <<"bob@localhost">>}, {<<"type">>, <<"chat">>}],
                               children = [Child]} end,
    ?C:send(A, Msg(#xmlel{name = <<"active">>, attrs = [{<<"xmlns">>, <<"http://jabber.org/protocol/chatstates">>}]})),
    ?C:send(A, Msg(#xmlel{name = <<"store">>, attrs = [{<<"xmlns">>, <<"urn:xmpp:hints">>}]})),
    [State, Stored] = recv_chats(B, 2),
    ?assertEqual([], stanza_ids(State)),
    ?assertMatch([{<<"bob@localhost">>, _}], stanza_ids(Stored)),
    [R] = all(B),
    ?assertNotEqual(undefined, throng_xml:subel(inner(R), <<"store">>)).

%% Group chat, headline and error messages are not archived.
groupchat_headline_and_error_not_archived(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    [?C:send(A, ?C:message(<<"bob@localhost">>, T, <<"x">>))
     || T <- [<<"groupchat">>, <<"headline">>, <<"error">>]],
    _ = sync(A),
    _ = sync(B),
    ?assertEqual(0, count(<<"bob">>)),
    ?assertEqual(0, count(<<"alice">>)).

%% A message to an account that does not exist is refused and makes no
%% archive for it; the sender's archive keeps what the user sent.
nonexistent_recipient_not_archived(_) ->
    A = online(<<"alice">>),
    chat(A, <<"nobody@localhost">>, <<"anyone?">>),
    %% The bounce comes back through the session's mailbox: before the
    %% second ping's answer.
    [Err] = sync(A) ++ sync(A),
    ?assertEqual(<<"error">>, throng_xml:attr(<<"type">>, Err)),
    ?assertEqual(0, count(<<"nobody">>)),
    ?assertEqual([<<"anyone?">>], bodies(all(A))).

%% A message the recipient's blocklist stops (XEP-0191, before the
%% recipient's archive sees it) is still in its sender's archive: the
%% sender's copy, which waits for the recipient's to be written with it,
%% is written alone at the route's end.
blocked_message_in_senders_archive_only(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    R = ?C:iq(B, <<"set">>, #xmlel{name = <<"block">>, attrs = [{<<"xmlns">>, <<"urn:xmpp:blocking">>}],
                                   children = [#xmlel{name = <<"item">>,
                                                      attrs = [{<<"jid">>, <<"alice@localhost">>}]}]}),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)),
    chat(A, <<"bob@localhost">>, <<"blocked">>),
    _ = sync(A) ++ sync(A),
    ?assertEqual({1, 0}, {count(<<"alice">>), count(<<"bob">>)}),
    ?assertEqual([<<"blocked">>], bodies(all(A))),
    ?assertEqual([], all(B)).

%% The sender's copy waits in the routing process for the recipient's, to
%% be written with it; a route that reaches no local user's archive (a
%% module took the message, and answered nothing) writes it alone at its
%% end (throng_sm:defer/2).
senders_copy_written_at_the_routes_end(_) ->
    {ok, From} = throng_jid:parse(<<"alice@localhost/r">>),
    {ok, To} = throng_jid:parse(<<"someone@elsewhere.example">>),
    El = ?C:message(<<"someone@elsewhere.example">>, <<"chat">>, <<"kept">>),
    throng_sm:memo(fun() ->
                           ok = throng_mod_mam:outgoing(El, #{from => From, to => To}),
                           ?assertEqual(0, count(<<"alice">>))
                   end),
    ?assertEqual(1, count(<<"alice">>)),
    A = online(<<"alice">>),
    ?assertEqual([<<"kept">>], bodies(all(A))).

%% max_messages (3 here): the sweep leaves each user's newest 3.
retention_max_messages(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    send_numbered(A, 5),
    _ = recv_chats(B, 5),
    ?assertEqual(5, count(<<"bob">>)),
    ok = throng_mod_mam:sweep(?HOST),
    ?assertEqual(nums(3, 5), bodies(all(B))),
    ?assertEqual(nums(3, 5), bodies(all(A))).

%% max_age (30 days here): the sweep removes older messages, not newer.
retention_max_age(_) ->
    B = online(<<"bob">>),
    Day = 86400 * 1000000,
    Now = os:system_time(microsecond),
    Old = fun(Days, Body) ->
                  Packet = throng_xml:to_binary(?C:message(<<"bob@localhost">>, <<"chat">>, Body)),
                  throng_storage:mam_store(<<"bob">>, ?HOST,
                                           #mam_msg{id = Now - Days * Day,
                                                    peer = {<<"alice@localhost">>, <<>>},
                                                    packet = Packet})
          end,
    _ = Old(31, <<"31 days">>),
    _ = Old(29, <<"29 days">>),
    _ = Old(0, <<"now">>),
    ok = throng_mod_mam:sweep(?HOST),
    ?assertEqual([<<"29 days">>, <<"now">>], bodies(all(B))).

%% The sweep runs by itself every sweep_interval (1 s here, max_messages 2).
retention_sweep_runs_by_itself(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    send_numbered(A, 4),
    _ = recv_chats(B, 4),
    throng_ct:wait_until(fun() -> count(<<"bob">>) =:= 2 end, 5000),
    ?assertEqual(nums(3, 4), bodies(all(B))).

%% A removed account leaves no archive and no preferences behind.
removed_account_loses_archive(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    _ = prefs(B, [{<<"default">>, <<"never">>}], [<<"alice@localhost">>], []),
    send_numbered(A, 3),
    _ = recv_chats(B, 3),
    ?assertEqual(3, count(<<"bob">>)),
    ok = throng_auth:unregister(<<"bob">>, ?HOST),
    ?assertEqual(0, count(<<"bob">>)),
    ?assertEqual(not_found, throng_storage:kv_get(throng_mod_mam, {<<"bob">>, ?HOST})),
    ?assertEqual(3, count(<<"alice">>)).

%% The archive, its ids and the ids' meaning survive a restart.
archive_survives_restart(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    send_numbered(A, 3),
    Got = recv_chats(B, 3),
    Ids = [Id || M <- Got, {_, Id} <- stanza_ids(M)],
    ?C:close(A), ?C:close(B),
    throng_ct:restart(),
    B2 = online(<<"bob">>),
    Rs = all(B2),
    ?assertEqual(Ids, [result_id(R) || R <- Rs]),
    ?assertEqual(nums(1, 3), bodies(Rs)),
    {[_], _} = mam(B2, [form([{<<"after-id">>, [lists:nth(2, Ids)]}])]),
    %% New messages go on after the old ones.
    A2 = online(<<"alice">>),
    chat(A2, <<"bob@localhost">>, <<"4">>),
    _ = recv_chats(B2, 1),
    ?assertEqual(nums(1, 4), bodies(all(B2))).

%% The query form (§4.1.5), the disco features of the account (§8) and the
%% archive's metadata (§5).
form_disco_and_metadata(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    Form = ?C:iq(B, <<"get">>, #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?MAM}]}),
    X = throng_xml:subel(throng_xml:subel(Form, <<"query">>), <<"x">>),
    Vars = [throng_xml:attr(<<"var">>, F) || F <- throng_xml:subels(X)],
    ?assertEqual([<<"FORM_TYPE">>, <<"with">>, <<"start">>, <<"end">>, <<"before-id">>,
                  <<"after-id">>, <<"ids">>], Vars),
    Info = ?C:iq(B, <<"get">>, #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_DISCO_INFO}]},
                 [{<<"to">>, <<"bob@localhost">>}]),
    Features = [throng_xml:attr(<<"var">>, F)
                || #xmlel{name = <<"feature">>} = F <- throng_xml:subels(throng_xml:subel(Info, <<"query">>))],
    [?assert(lists:member(F, Features))
     || F <- [?MAM, <<"urn:xmpp:mam:2#extended">>, ?SID, <<"urn:xmpp:mam:1">>]],
    Meta0 = ?C:iq(B, <<"get">>, #xmlel{name = <<"metadata">>, attrs = [{<<"xmlns">>, ?MAM}]}),
    ?assertEqual([], throng_xml:subels(throng_xml:subel(Meta0, <<"metadata">>))),
    send_numbered(A, 3),
    _ = recv_chats(B, 3),
    Rs = all(B),
    Meta = throng_xml:subel(?C:iq(B, <<"get">>, #xmlel{name = <<"metadata">>,
                                                       attrs = [{<<"xmlns">>, ?MAM}]}), <<"metadata">>),
    ?assertEqual(result_id(hd(Rs)), throng_xml:attr(<<"id">>, throng_xml:subel(Meta, <<"start">>))),
    ?assertEqual(result_id(lists:last(Rs)), throng_xml:attr(<<"id">>, throng_xml:subel(Meta, <<"end">>))),
    ?assertEqual(stamp(hd(Rs)), throng_xml:attr(<<"timestamp">>, throng_xml:subel(Meta, <<"start">>))).

%% Only the owner reads an archive: a query to another user's bare JID,
%% even from a contact, is forbidden (XEP-0313 §9.1).
only_the_owner_may_query(_) ->
    ok = throng_ct:mutual(<<"alice">>, <<"bob">>),
    A = online(<<"alice">>),
    Q = #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?MAM}]},
    ?assertEqual(<<"forbidden">>, error_cond(?C:iq(A, <<"set">>, Q, [{<<"to">>, <<"bob@localhost">>}]))),
    ?assertEqual(<<"forbidden">>,
                 error_cond(?C:iq(A, <<"get">>, #xmlel{name = <<"prefs">>, attrs = [{<<"xmlns">>, ?MAM}]},
                                  [{<<"to">>, <<"bob@localhost">>}]))).

%% urn:xmpp:mam:1 queries work the same, in their own namespace.
mam1_namespace(_) ->
    A = online(<<"alice">>),
    B = online(<<"bob">>),
    send_numbered(A, 2),
    _ = recv_chats(B, 2),
    NS = <<"urn:xmpp:mam:1">>,
    {Rs, IQ} = mam(B, NS, [rsm([{<<"max">>, <<"1">>}])]),
    ?assertEqual([NS], [throng_xml:ns(throng_xml:subel(R, <<"result">>)) || R <- Rs]),
    Fin = throng_xml:subel(IQ, <<"fin">>, NS),
    ?assertEqual(<<"false">>, throng_xml:attr(<<"complete">>, Fin)).
