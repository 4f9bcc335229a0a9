%% @doc XEP-0313 Message Archive Management on MUC rooms (§4.1.2: the
%% archive of a room's JID), with XEP-0359 stanza ids given by the room,
%% driven through real clients on real sockets, on both storage backends:
%% what is archived and with which id, queries with paging and filters,
%% who may read, the room's configuration and discovery, the archive's end
%% with its room, retention, restarts.
-module(xep0313_muc_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(M, throng_muc_client).
-define(MC, throng_mam_client).
-define(MAM, <<"urn:xmpp:mam:2">>).
-define(SID, <<"urn:xmpp:sid:0">>).
-define(RSM, <<"http://jabber.org/protocol/rsm">>).
-define(NS_MUC_OWNER, <<"http://jabber.org/protocol/muc#owner">>).
-define(ARCHIVING, <<"muc#roomconfig_enablearchiving">>).

all() ->
    [{group, mnesia}, {group, pgsql}].

groups() ->
    throng_ct:backend_groups(
      [archived_before_fan_out_with_stanza_id, spoofed_stanza_id_is_removed,
       pages_and_filters, only_what_belongs_is_archived, history_carries_stanza_id,
       who_may_read, archiving_turned_off, service_without_archives, metadata_and_form,
       destroyed_room_loses_archive, temporary_room_loses_archive_when_empty,
       persistent_room_archive_survives_restart, retention_sweep, mam1_namespace]).

init_per_group(Group, Config) ->
    throng_ct:init_backend(Group, Config).

end_per_group(_Group, Config) ->
    throng_ct:end_backend(Config).

init_per_testcase(TC, Config) ->
    Muc = case TC of
              service_without_archives -> #{archive => false};
              retention_sweep -> #{archive_max_messages => 2, archive_sweep_interval => 1};
              pages_and_filters -> #{archive_page_size => 3};
              _ -> #{}
          end,
    Modules = maps:merge(throng_config_spec:default_modules(),
                         #{ping => #{interval => 0}, muc => Muc}),
    throng_ct:start_backend(Config, #{modules => Modules}),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

%% Alice creates room r (instant, or configured with Fields) as a, Bob
%% enters as b; both have read everything up to now.
room_with_two(Fields) ->
    A = ?M:online(<<"alice">>),
    case Fields of
        [] -> ?M:create(A, <<"r">>, <<"a">>);
        _ -> ?M:create(A, <<"r">>, <<"a">>, Fields)
    end,
    B = ?M:online(<<"bob">>),
    ?M:enter(B, <<"r">>, <<"b">>),
    ?M:settle([A, B]),
    {A, B}.

%% C says Body in room r; returns the message as C got it back.
say(C, Body) ->
    ?M:groupchat(C, <<"r">>, Body),
    ?M:next(C, fun(E) -> E#xmlel.name =:= <<"message">> andalso ?M:body(E) =:= Body end).

%% A query of room r's archive: the result messages, and the IQ's answer.
query(C, Children) ->
    query(C, ?MAM, Children).

query(C, NS, Children) ->
    Id = integer_to_binary(erlang:unique_integer([positive])),
    ?C:send(C, #xmlel{name = <<"iq">>,
                      attrs = [{<<"type">>, <<"set">>}, {<<"id">>, Id}, {<<"to">>, ?M:room(<<"r">>)}],
                      children = [#xmlel{name = <<"query">>,
                                         attrs = [{<<"xmlns">>, NS}, {<<"queryid">>, Id}],
                                         children = Children}]}),
    collect(C, Id, []).

collect(C, Id, Acc) ->
    El = ?C:recv_stanza(C),
    case El of
        #xmlel{name = <<"iq">>} ->
            ?assertEqual(Id, throng_xml:attr(<<"id">>, El)),
            {lists:reverse(Acc), El};
        #xmlel{name = <<"message">>} ->
            case throng_xml:subel(El, <<"result">>) of
                undefined -> collect(C, Id, Acc);
                R ->
                    ?assertEqual(Id, throng_xml:attr(<<"queryid">>, R)),
                    ?assertEqual(?M:room(<<"r">>), ?M:from(El)),
                    collect(C, Id, [El | Acc])
            end;
        _ -> collect(C, Id, Acc)
    end.

all_bodies(C) ->
    {Rs, IQ} = query(C, []),
    ?assertEqual(<<"result">>, ?M:type(IQ)),
    bodies(Rs).

inner(M) -> ?MC:inner(M).
bodies(Rs) -> [?M:body(inner(M)) || M <- Rs].
result_id(M) -> ?MC:result_id(M).
stanza_ids(M) -> ?MC:stanza_ids(M).

form(Fields) -> ?MC:form([{V, [Val]} || {V, Val} <- Fields]).
rsm(Children) -> ?MC:rsm(Children).

fin_set(IQ) ->
    Set = throng_xml:subel(throng_xml:subel(IQ, <<"fin">>, ?MAM), <<"set">>, ?RSM),
    #{complete => throng_xml:attr(<<"complete">>, throng_xml:subel(IQ, <<"fin">>, ?MAM)),
      count => binary_to_integer(throng_xml:subel_cdata(Set, <<"count">>)),
      last => throng_xml:subel_cdata(Set, <<"last">>)}.

count(Room) ->
    throng_storage:mam_count(Room, ?M:service(), #mam_filter{}).

%%% Cases

%% A groupchat message is in the room's archive before it fans out, and
%% every occupant gets it with the room's stanza id; the archive gives the
%% same id, the message from the occupant's room JID, with its occupant id.
archived_before_fan_out_with_stanza_id(_) ->
    {A, B} = room_with_two([]),
    Sent = say(A, <<"hello room">>),
    Got = ?M:next(B, fun(E) -> ?M:body(E) =:= <<"hello room">> end),
    Room = ?M:room(<<"r">>),
    [{Room, Id}] = stanza_ids(Sent),
    ?assertEqual([{Room, Id}], stanza_ids(Got)),
    {[R], IQ} = query(B, []),
    ?assertEqual(<<"result">>, ?M:type(IQ)),
    ?assertEqual(Id, result_id(R)),
    Inner = inner(R),
    ?assertEqual(?M:occ(<<"r">>, <<"a">>), ?M:from(Inner)),
    ?assertEqual(<<"groupchat">>, ?M:type(Inner)),
    ?assertEqual(<<"hello room">>, ?M:body(Inner)),
    ?assertEqual(?M:occupant_id(Got), ?M:occupant_id(Inner)),
    ?assertNotEqual(undefined, throng_xml:subel(throng_xml:subel(throng_xml:subel(R, <<"result">>),
                                                                 <<"forwarded">>),
                                                <<"delay">>)),
    ?assertEqual(#{complete => <<"true">>, count => 1, last => Id}, fin_set(IQ)).

%% XEP-0359 §5: a stanza id claiming to be the room's is the room's to
%% give: the sender's is removed, the room's is added; others stay.
spoofed_stanza_id_is_removed(_) ->
    {A, B} = room_with_two([]),
    Room = ?M:room(<<"r">>),
    Sid = fun(By, Id) -> #xmlel{name = <<"stanza-id">>,
                                attrs = [{<<"xmlns">>, ?SID}, {<<"by">>, By}, {<<"id">>, Id}]}
          end,
    Msg = ?C:message(Room, <<"groupchat">>, <<"spoof">>),
    ?C:send(A, Msg#xmlel{children = Msg#xmlel.children ++ [Sid(Room, <<"fake">>),
                                                           Sid(<<"other@localhost">>, <<"o1">>)]}),
    Got = ?M:next(B, fun(E) -> ?M:body(E) =:= <<"spoof">> end),
    Ids = stanza_ids(Got),
    ?assert(lists:member({<<"other@localhost">>, <<"o1">>}, Ids)),
    [Id] = [I || {By, I} <- Ids, By =:= Room],
    ?assertNotEqual(<<"fake">>, Id),
    {[R], _} = query(B, []),
    ?assertEqual(Id, result_id(R)).

%% Paging (XEP-0059) and filters: the service's page size caps a page
%% (3 here), `after' walks on, `before' with no id is the last page,
%% `with' a room JID with a nick selects that occupant's messages.
pages_and_filters(_) ->
    {A, B} = room_with_two([]),
    [say(C, Body) || {C, Body} <- [{A, <<"1">>}, {B, <<"2">>}, {A, <<"3">>}, {B, <<"4">>},
                                   {A, <<"5">>}]],
    {P1, IQ1} = query(B, []),
    ?assertEqual([<<"1">>, <<"2">>, <<"3">>], bodies(P1)),
    #{complete := <<"false">>, count := 5, last := Last} = fin_set(IQ1),
    {P2, IQ2} = query(B, [rsm([{<<"after">>, Last}])]),
    ?assertEqual([<<"4">>, <<"5">>], bodies(P2)),
    ?assertMatch(#{complete := <<"true">>}, fin_set(IQ2)),
    {P3, _} = query(B, [rsm([{<<"max">>, <<"2">>}, {<<"before">>, <<>>}])]),
    ?assertEqual([<<"4">>, <<"5">>], bodies(P3)),
    {P4, IQ4} = query(B, [form([{<<"with">>, ?M:occ(<<"r">>, <<"a">>)}])]),
    ?assertEqual([<<"1">>, <<"3">>, <<"5">>], bodies(P4)),
    ?assertMatch(#{count := 3}, fin_set(IQ4)),
    {P5, _} = query(B, [form([{<<"with">>, ?M:occ(<<"r">>, <<"nobody">>)}])]),
    ?assertEqual([], P5),
    %% An id the archive never gave: item-not-found.
    {[], Bad} = query(B, [rsm([{<<"after">>, <<"nosuchid">>}])]),
    ?assertEqual(<<"item-not-found">>, ?M:condition(Bad)).

%% Only groupchat messages with a body (or a store hint) are archived, not
%% subject changes, chat states, no-store messages or private messages.
only_what_belongs_is_archived(_) ->
    {A, B} = room_with_two([]),
    Room = ?M:room(<<"r">>),
    Send = fun(Children) ->
                   ?C:send(A, #xmlel{name = <<"message">>,
                                     attrs = [{<<"to">>, Room}, {<<"type">>, <<"groupchat">>}],
                                     children = Children})
           end,
    Send([#xmlel{name = <<"subject">>, children = [{xmlcdata, <<"topic">>}]}]),
    Send([#xmlel{name = <<"composing">>,
                 attrs = [{<<"xmlns">>, <<"http://jabber.org/protocol/chatstates">>}]}]),
    Send([#xmlel{name = <<"body">>, children = [{xmlcdata, <<"secret">>}]},
          #xmlel{name = <<"no-store">>, attrs = [{<<"xmlns">>, <<"urn:xmpp:hints">>}]}]),
    ?C:send(A, ?C:message(?M:occ(<<"r">>, <<"b">>), <<"chat">>, <<"private">>)),
    say(A, <<"kept">>),
    ?M:settle([B]),
    ?assertEqual([<<"kept">>], all_bodies(B)).

%% The discussion history sent on entering has the messages' stanza ids
%% (a client that also reads the archive sees the same message once).
history_carries_stanza_id(_) ->
    {A, _B} = room_with_two([]),
    [{_, Id}] = stanza_ids(say(A, <<"earlier">>)),
    Cc = ?M:online(<<"carol">>),
    Got = ?M:enter(Cc, <<"r">>, <<"c">>),
    [H] = [E || #xmlel{name = <<"message">>} = E <- Got, ?M:body(E) =:= <<"earlier">>],
    ?assertEqual([{?M:room(<<"r">>), Id}], stanza_ids(H)).

%% Who may read: anyone in an open room; in a members-only room members and
%% occupants; in a password-protected room occupants only; never an
%% outcast.
who_may_read(_) ->
    {A, _B} = room_with_two([]),
    say(A, <<"open">>),
    Cc = ?M:online(<<"carol">>),
    ?assertEqual([<<"open">>], all_bodies(Cc)),
    <<"result">> = ?M:type(?M:admin(A, <<"r">>, [{<<"jid">>, <<"carol@localhost">>},
                                                 {<<"affiliation">>, <<"outcast">>}])),
    {[], Out} = query(Cc, []),
    ?assertEqual(<<"forbidden">>, ?M:condition(Out)),
    <<"result">> = ?M:type(?M:admin(A, <<"r">>, [{<<"jid">>, <<"carol@localhost">>},
                                                 {<<"affiliation">>, <<"none">>}])),
    <<"result">> = ?M:type(?M:owner_submit(A, <<"r">>,
                                           [{<<"muc#roomconfig_membersonly">>, <<"1">>}])),
    ?M:settle([A, Cc]),
    {[], MO} = query(Cc, []),
    ?assertEqual(<<"forbidden">>, ?M:condition(MO)),
    <<"result">> = ?M:type(?M:admin(A, <<"r">>, [{<<"jid">>, <<"carol@localhost">>},
                                                 {<<"affiliation">>, <<"member">>}])),
    ?M:settle([A, Cc]),
    ?assertEqual([<<"open">>], all_bodies(Cc)),
    %% Password-protected and open: an occupant reads, a member outside
    %% does not.
    <<"result">> = ?M:type(?M:owner_submit(A, <<"r">>,
                                           [{<<"muc#roomconfig_membersonly">>, <<"0">>},
                                            {<<"muc#roomconfig_passwordprotectedroom">>, <<"1">>},
                                            {<<"muc#roomconfig_roomsecret">>, <<"pw">>}])),
    ?M:settle([A, Cc]),
    {[], PW} = query(Cc, []),
    ?assertEqual(<<"forbidden">>, ?M:condition(PW)),
    ?assertEqual([<<"open">>], all_bodies(A)).

%% The owner turns archiving off (muc#roomconfig_enablearchiving): messages
%% are no longer archived nor get a stanza id, the room stops announcing
%% the feature, and queries are feature-not-implemented. On again, it
%% archives again (what was archived before is still there).
archiving_turned_off(_) ->
    {A, B} = room_with_two([]),
    say(A, <<"before">>),
    Form = ?M:iq(A, <<"get">>, ?M:room(<<"r">>), ?M:query(?NS_MUC_OWNER, [])),
    ?assert(lists:member(?ARCHIVING, form_vars(Form))),
    <<"result">> = ?M:type(?M:owner_submit(A, <<"r">>, [{?ARCHIVING, <<"0">>}])),
    ?M:settle([A, B]),
    ?assertNot(lists:member(?MAM, ?M:features(?M:disco_info(B, ?M:room(<<"r">>))))),
    ?assertEqual([], stanza_ids(say(A, <<"off the record">>))),
    {[], Off} = query(B, []),
    ?assertEqual(<<"feature-not-implemented">>, ?M:condition(Off)),
    <<"result">> = ?M:type(?M:owner_submit(A, <<"r">>, [{?ARCHIVING, <<"1">>}])),
    ?M:settle([A, B]),
    ?assert(lists:member(?MAM, ?M:features(?M:disco_info(B, ?M:room(<<"r">>))))),
    say(A, <<"after">>),
    ?assertEqual([<<"before">>, <<"after">>], all_bodies(B)).

form_vars(IQ) ->
    X = throng_xml:subel(throng_xml:subel(IQ, <<"query">>), <<"x">>),
    [throng_xml:attr(<<"var">>, F) || #xmlel{name = <<"field">>} = F <- throng_xml:subels(X)].

%% A service configured without archives (archive: false): no field in the
%% room's form, no feature, no stanza id, nothing stored.
service_without_archives(_) ->
    {A, B} = room_with_two([]),
    Form = ?M:iq(A, <<"get">>, ?M:room(<<"r">>), ?M:query(?NS_MUC_OWNER, [])),
    ?assertNot(lists:member(?ARCHIVING, form_vars(Form))),
    %% A submitted value is not taken.
    <<"result">> = ?M:type(?M:owner_submit(A, <<"r">>, [{?ARCHIVING, <<"1">>}])),
    ?M:settle([A, B]),
    ?assertNot(lists:member(?MAM, ?M:features(?M:disco_info(B, ?M:room(<<"r">>))))),
    ?assertEqual([], stanza_ids(say(A, <<"unarchived">>))),
    {[], IQ} = query(B, []),
    ?assertEqual(<<"feature-not-implemented">>, ?M:condition(IQ)),
    ?assertEqual(0, count(<<"r">>)).

%% The room announces the archive (disco#info), gives the query form on a
%% get, its first and last message (metadata), and has no preferences.
metadata_and_form(_) ->
    {A, B} = room_with_two([]),
    Features = ?M:features(?M:disco_info(B, ?M:room(<<"r">>))),
    ?assert(lists:member(?MAM, Features)),
    ?assert(lists:member(?SID, Features)),
    Get = ?M:iq(B, <<"get">>, ?M:room(<<"r">>), ?M:query(?MAM, [])),
    ?assert(lists:member(<<"with">>, form_vars(Get))),
    [{_, First}] = stanza_ids(say(A, <<"first">>)),
    [{_, Last}] = stanza_ids(say(A, <<"last">>)),
    Meta = ?M:iq(B, <<"get">>, ?M:room(<<"r">>),
                 #xmlel{name = <<"metadata">>, attrs = [{<<"xmlns">>, ?MAM}]}),
    M = throng_xml:subel(Meta, <<"metadata">>, ?MAM),
    ?assertEqual(First, throng_xml:attr(<<"id">>, throng_xml:subel(M, <<"start">>))),
    ?assertEqual(Last, throng_xml:attr(<<"id">>, throng_xml:subel(M, <<"end">>))),
    Prefs = ?M:iq(B, <<"get">>, ?M:room(<<"r">>),
                  #xmlel{name = <<"prefs">>, attrs = [{<<"xmlns">>, ?MAM}]}),
    ?assertEqual(<<"feature-not-implemented">>, ?M:condition(Prefs)).

%% A destroyed room leaves no archive (a room made again with its name
%% starts empty).
destroyed_room_loses_archive(_) ->
    {A, _B} = room_with_two([{<<"muc#roomconfig_persistentroom">>, <<"1">>}]),
    say(A, <<"gone soon">>),
    ?assertEqual(1, count(<<"r">>)),
    Destroy = ?M:query(?NS_MUC_OWNER, [#xmlel{name = <<"destroy">>}]),
    ?C:send(A, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"set">>}, {<<"id">>, <<"d1">>},
                                               {<<"to">>, ?M:room(<<"r">>)}],
                      children = [Destroy]}),
    ?M:next(A, fun(E) -> E#xmlel.name =:= <<"iq">> end),
    %% Removed by the room's process as it ends, after its answers.
    throng_ct:wait_until(fun() -> count(<<"r">>) =:= 0 end, 2000),
    ?M:create(A, <<"r">>, <<"a">>),
    ?assertEqual([], all_bodies(A)).

%% A temporary room ends with its last occupant, and its archive with it.
temporary_room_loses_archive_when_empty(_) ->
    {A, B} = room_with_two([]),
    say(A, <<"fleeting">>),
    ?assertEqual(1, count(<<"r">>)),
    [?C:send(C, ?C:presence([{<<"to">>, ?M:occ(<<"r">>, N)}, {<<"type">>, <<"unavailable">>}]))
     || {C, N} <- [{A, <<"a">>}, {B, <<"b">>}]],
    throng_ct:wait_until(fun() -> throng_muc_room:running(?M:service()) =:= [] end, 2000),
    ?assertEqual(0, count(<<"r">>)).

%% A persistent room's archive survives a restart, and the room answers a
%% query with nobody in it (its process starts for the query).
persistent_room_archive_survives_restart(_) ->
    {A, B} = room_with_two([{<<"muc#roomconfig_persistentroom">>, <<"1">>}]),
    say(A, <<"kept 1">>),
    say(B, <<"kept 2">>),
    ?C:close(A),
    ?C:close(B),
    throng_ct:wait_until(fun() -> throng_muc_room:running(?M:service()) =:= [] end, 2000),
    throng_ct:restart(),
    Cc = ?M:online(<<"carol">>),
    ?assertEqual([<<"kept 1">>, <<"kept 2">>], all_bodies(Cc)).

%% The sweep keeps each room's newest archive_max_messages (2 here), on its
%% own (archive_sweep_interval: 1 s).
retention_sweep(_) ->
    {A, B} = room_with_two([]),
    [say(A, integer_to_binary(I)) || I <- lists:seq(1, 5)],
    throng_ct:wait_until(fun() -> count(<<"r">>) =:= 2 end, 5000),
    ?assertEqual([<<"4">>, <<"5">>], all_bodies(B)).

%% The older namespace, urn:xmpp:mam:1, is answered in its own.
mam1_namespace(_) ->
    {A, B} = room_with_two([]),
    say(A, <<"old ns">>),
    {[R], IQ} = query(B, <<"urn:xmpp:mam:1">>, []),
    ?assertEqual(<<"urn:xmpp:mam:1">>, throng_xml:ns(throng_xml:subel(R, <<"result">>))),
    ?assertNotEqual(undefined, throng_xml:subel(IQ, <<"fin">>, <<"urn:xmpp:mam:1">>)).
