%% @doc XEP-0049 Private XML Storage (throng_mod_private) against the real
%% server: a user stores XML fragments on their own account and gets them
%% back by element name and namespace; nobody else may read or write them
%% (forbidden); reserved namespaces and a query without a proper child are
%% refused (not-acceptable, bad-request for an empty get); a per-user size
%% limit; several children of one set stored together or not at all; the
%% data is gone with the account and survives a restart. The cases that
%% touch storage run on both backends (groups mnesia and pgsql).
-module(xep0049_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(NS_PRIVATE, <<"jabber:iq:private">>).

all() ->
    [advertised_in_disco, other_users_data_forbidden, server_is_not_a_store,
     reserved_namespaces_not_acceptable, child_without_namespace_not_acceptable,
     empty_query, get_of_two_namespaces_bad_request, disabled_module_answers_nothing,
     {group, mnesia}, {group, pgsql}].

groups() ->
    throng_ct:backend_groups(
      [store_and_retrieve, nothing_stored_is_the_empty_element, own_bare_jid_as_to,
       keyed_by_name_and_namespace, each_user_their_own, several_children_stored_together,
       refused_set_stores_nothing, empty_element_clears, size_limit, removed_account_forgotten,
       survives_restart, concurrent_sets_from_two_resources]).

init_per_group(Group, Config) ->
    throng_ct:init_backend(Group, Config).

end_per_group(_Group, Config) ->
    throng_ct:end_backend(Config).

init_per_testcase(disabled_module_answers_nothing, Config) ->
    throng_ct:start_exact(Config, #{disco => #{}}),
    throng_ct:register(<<"alice">>, <<"password">>),
    Config;
init_per_testcase(size_limit, Config) ->
    start(Config, #{modules => #{private => #{max_bytes => 300}}});
init_per_testcase(_TC, Config) ->
    start(Config, #{}).

start(Config, Overrides) ->
    throng_ct:start_backend(Config, Overrides),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>]],
    throng_ct:register(<<"alice">>, <<"example.org">>, <<"password">>),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

login(User) ->
    ?C:login(User, <<"password">>, <<"r">>).

el(Name, NS, Children) ->
    #xmlel{name = Name, attrs = [{<<"xmlns">>, NS}], children = Children}.

text(Name, Text) ->
    #xmlel{name = Name, children = [{xmlcdata, Text}]}.

%% The XEP's example: Exodus's preferences.
prefs(Nick) ->
    el(<<"exodus">>, <<"exodus:prefs">>, [text(<<"defaultnick">>, Nick)]).

query(Children) ->
    el(<<"query">>, ?NS_PRIVATE, Children).

%% A private-storage IQ: {result, Children of the query} or {error, Condition}.
private(C, Type, Children) ->
    private(C, Type, Children, []).

private(C, Type, Children, Attrs) ->
    answer(?C:iq(C, Type, query(Children), Attrs)).

answer(R) ->
    case throng_xml:attr(<<"type">>, R) of
        <<"result">> ->
            case throng_xml:subels(R) of
                [] -> {result, none};
                [Q] ->
                    ?assertEqual({<<"query">>, ?NS_PRIVATE}, {Q#xmlel.name, throng_xml:ns(Q)}),
                    {result, throng_xml:subels(Q)}
            end;
        <<"error">> ->
            #xmlel{children = [#xmlel{name = Cond} | _]} = throng_xml:subel(R, <<"error">>),
            {error, Cond}
    end.

set(C, Children) ->
    ?assertEqual({result, none}, private(C, <<"set">>, Children)).

%% What a get of one element returns (its serialization, to compare).
get(C, Name, NS) ->
    {result, [El]} = private(C, <<"get">>, [el(Name, NS, [])]),
    throng_xml:to_binary(El).

bin(El) ->
    throng_xml:to_binary(El).

empty(Name, NS) ->
    bin(el(Name, NS, [])).

%%% Cases outside the backend groups

%% disco#info of the domain lists jabber:iq:private (XEP-0049 has no
%% discovery section; the namespace is what clients look for).
advertised_in_disco(_) ->
    A = login(<<"alice">>),
    ?assert(lists:member(?NS_PRIVATE, ?C:disco_features(A, <<"localhost">>))).

%% A get or set addressed to another user's bare JID is refused with
%% forbidden (XEP-0049 §2.3, the preferable condition) and changes nothing.
other_users_data_forbidden(_) ->
    B = login(<<"bob">>),
    set(B, [prefs(<<"Bob">>)]),
    A = login(<<"alice">>),
    To = [{<<"to">>, <<"bob@localhost">>}],
    ?assertEqual({error, <<"forbidden">>}, private(A, <<"get">>, [prefs(<<>>)], To)),
    ?assertEqual({error, <<"forbidden">>}, private(A, <<"set">>, [prefs(<<"Macbeth">>)], To)),
    ?assertEqual(bin(prefs(<<"Bob">>)), get(B, <<"exodus">>, <<"exodus:prefs">>)).

%% The domain keeps no private data: a query addressed to it is forbidden
%% too (a JID other than the sender's).
server_is_not_a_store(_) ->
    A = login(<<"alice">>),
    To = [{<<"to">>, <<"localhost">>}],
    ?assertEqual({error, <<"forbidden">>}, private(A, <<"get">>, [prefs(<<>>)], To)),
    ?assertEqual({error, <<"forbidden">>}, private(A, <<"set">>, [prefs(<<"x">>)], To)).

%% Namespaces beginning with 'jabber:' or 'http://jabber.org/', and
%% 'vcard-temp', are reserved: a get or set in one is not-acceptable
%% (XEP-0049 §2.3, the "optional error" the XEP describes).
reserved_namespaces_not_acceptable(_) ->
    A = login(<<"alice">>),
    Reserved = [<<"jabber:client">>, <<"jabber:server">>, ?NS_PRIVATE, <<"jabber:iq:roster">>,
                <<"http://jabber.org/protocol/disco#info">>, <<"vcard-temp">>],
    [begin
         ?assertEqual({error, <<"not-acceptable">>},
                      private(A, <<"set">>, [el(<<"data">>, NS, [text(<<"a">>, <<"1">>)])])),
         ?assertEqual({error, <<"not-acceptable">>},
                      private(A, <<"get">>, [el(<<"data">>, NS, [])]))
     end || NS <- Reserved],
    %% Look-alikes are ordinary namespaces.
    set(A, [el(<<"data">>, <<"jabberwocky:prefs">>, [])]),
    set(A, [el(<<"data">>, <<"http://jabber.org.example/x">>, [text(<<"a">>, <<"1">>)])]),
    ?assertEqual(bin(el(<<"data">>, <<"http://jabber.org.example/x">>, [text(<<"a">>, <<"1">>)])),
                 get(A, <<"data">>, <<"http://jabber.org.example/x">>)).

%% A child must be qualified by its own namespace: one that only inherits
%% jabber:iq:private is not-acceptable, in a set and in a get.
child_without_namespace_not_acceptable(_) ->
    A = login(<<"alice">>),
    Bare = #xmlel{name = <<"prefs">>, children = [text(<<"a">>, <<"1">>)]},
    ?assertEqual({error, <<"not-acceptable">>}, private(A, <<"set">>, [Bare])),
    ?assertEqual({error, <<"not-acceptable">>}, private(A, <<"get">>, [Bare#xmlel{children = []}])).

%% A set with an empty query is not-acceptable (§2.3: at least one child
%% MUST be included); a get without a child is bad-request ("Bad Format").
empty_query(_) ->
    A = login(<<"alice">>),
    ?assertEqual({error, <<"not-acceptable">>}, private(A, <<"set">>, [])),
    ?assertEqual({error, <<"bad-request">>}, private(A, <<"get">>, [])).

%% A client MUST NOT query more than one namespace in a get (§2.3): such a
%% get is bad-request.
get_of_two_namespaces_bad_request(_) ->
    A = login(<<"alice">>),
    ?assertEqual({error, <<"bad-request">>},
                 private(A, <<"get">>, [el(<<"a">>, <<"ns:one">>, []), el(<<"a">>, <<"ns:two">>, [])])).

%% Without the module the namespace gets service-unavailable.
disabled_module_answers_nothing(_) ->
    A = login(<<"alice">>),
    ?assertEqual({error, <<"service-unavailable">>}, private(A, <<"get">>, [prefs(<<>>)])),
    ?assertEqual({error, <<"service-unavailable">>}, private(A, <<"set">>, [prefs(<<"x">>)])).

%%% Cases on both backends

%% The XEP's examples: a set with no 'to' is answered with an empty result;
%% a get with the empty element returns the stored fragment unchanged.
store_and_retrieve(_) ->
    A = login(<<"alice">>),
    set(A, [prefs(<<"Hamlet">>)]),
    ?assertEqual(bin(prefs(<<"Hamlet">>)), get(A, <<"exodus">>, <<"exodus:prefs">>)),
    %% A second set replaces it.
    set(A, [prefs(<<"Ophelia">>)]),
    ?assertEqual(bin(prefs(<<"Ophelia">>)), get(A, <<"exodus">>, <<"exodus:prefs">>)).

%% A get for something never stored returns the element asked for, empty.
nothing_stored_is_the_empty_element(_) ->
    A = login(<<"alice">>),
    ?assertEqual(empty(<<"storage">>, <<"storage:bookmarks">>),
                 get(A, <<"storage">>, <<"storage:bookmarks">>)).

%% Addressed to the user's own bare JID, a query is the same as with no 'to'.
own_bare_jid_as_to(_) ->
    A = login(<<"alice">>),
    To = [{<<"to">>, <<"alice@localhost">>}],
    ?assertEqual({result, none}, private(A, <<"set">>, [prefs(<<"Hamlet">>)], To)),
    ?assertEqual({result, [prefs(<<"Hamlet">>)]},
                 private(A, <<"get">>, [el(<<"exodus">>, <<"exodus:prefs">>, [])], To)),
    ?assertEqual(bin(prefs(<<"Hamlet">>)), get(A, <<"exodus">>, <<"exodus:prefs">>)).

%% Fragments are kept by element name and namespace: the same name in two
%% namespaces, and two names in one namespace, are four separate entries;
%% a set replaces only the entries it names.
keyed_by_name_and_namespace(_) ->
    A = login(<<"alice">>),
    Els = [el(N, NS, [text(<<"v">>, <<N/binary, " ", NS/binary>>)])
           || N <- [<<"a">>, <<"b">>], NS <- [<<"ns:one">>, <<"ns:two">>]],
    [set(A, [E]) || E <- Els],
    [?assertEqual(bin(E), get(A, E#xmlel.name, throng_xml:ns(E))) || E <- Els],
    New = el(<<"a">>, <<"ns:one">>, [text(<<"v">>, <<"new">>)]),
    set(A, [New]),
    ?assertEqual(bin(New), get(A, <<"a">>, <<"ns:one">>)),
    [?assertEqual(bin(E), get(A, E#xmlel.name, throng_xml:ns(E))) || E <- tl(Els)].

%% Each account has its own store: the same user name on another host, and
%% another user, see nothing of it.
each_user_their_own(_) ->
    A = login(<<"alice">>),
    set(A, [prefs(<<"Hamlet">>)]),
    B = login(<<"bob">>),
    ?assertEqual(empty(<<"exodus">>, <<"exodus:prefs">>), get(B, <<"exodus">>, <<"exodus:prefs">>)),
    AO = ?C:login(<<"alice">>, <<"password">>, <<"r">>, #{server => <<"example.org">>}),
    ?assertEqual(empty(<<"exodus">>, <<"exodus:prefs">>), get(AO, <<"exodus">>, <<"exodus:prefs">>)).

%% One set may carry several children: each is stored, and each can be
%% fetched alone.
several_children_stored_together(_) ->
    A = login(<<"alice">>),
    Marks = el(<<"storage">>, <<"storage:bookmarks">>,
               [#xmlel{name = <<"conference">>, attrs = [{<<"jid">>, <<"room@conference.localhost">>},
                                                         {<<"autojoin">>, <<"true">>}],
                       children = [text(<<"nick">>, <<"alice">>)]}]),
    Notes = el(<<"storage">>, <<"storage:rosternotes">>,
               [#xmlel{name = <<"note">>, attrs = [{<<"jid">>, <<"bob@localhost">>}],
                       children = [{xmlcdata, <<"met at the <conference> & stayed">>}]}]),
    set(A, [Marks, Notes]),
    ?assertEqual(bin(Marks), get(A, <<"storage">>, <<"storage:bookmarks">>)),
    ?assertEqual(bin(Notes), get(A, <<"storage">>, <<"storage:rosternotes">>)).

%% A set with one acceptable and one refused child stores neither: the
%% children of a set are stored together or not at all.
refused_set_stores_nothing(_) ->
    A = login(<<"alice">>),
    set(A, [prefs(<<"Hamlet">>)]),
    ?assertEqual({error, <<"not-acceptable">>},
                 private(A, <<"set">>, [prefs(<<"Macbeth">>), el(<<"x">>, <<"jabber:x:data">>, [])])),
    ?assertEqual(bin(prefs(<<"Hamlet">>)), get(A, <<"exodus">>, <<"exodus:prefs">>)).

%% Storing an empty element clears that entry (a get would return the same
%% empty element); with nothing left the user has no entry in storage.
empty_element_clears(_) ->
    A = login(<<"alice">>),
    set(A, [prefs(<<"Hamlet">>)]),
    ?assertMatch({ok, _}, throng_storage:kv_get(private, {<<"alice">>, <<"localhost">>})),
    set(A, [el(<<"exodus">>, <<"exodus:prefs">>, [])]),
    ?assertEqual(empty(<<"exodus">>, <<"exodus:prefs">>), get(A, <<"exodus">>, <<"exodus:prefs">>)),
    ?assertEqual(not_found, throng_storage:kv_get(private, {<<"alice">>, <<"localhost">>})).

%% With max_bytes 300, what a user keeps (the stored fragments' bytes) may
%% not pass 300: a set that would is refused with not-acceptable and a text
%% naming the limit, and stores nothing; replacing a fragment counts its new
%% size only.
size_limit(_) ->
    A = login(<<"alice">>),
    Big = fun(Name, N) -> el(Name, <<"ns:big">>, [{xmlcdata, binary:copy(<<"x">>, N)}]) end,
    %% <a xmlns='ns:big'>...</a>: 22 bytes of markup, so a is 200 bytes.
    set(A, [Big(<<"a">>, 178)]),
    R = ?C:iq(A, <<"set">>, query([Big(<<"b">>, 79)])),
    ?assertEqual({error, <<"not-acceptable">>}, answer(R)),
    Text = throng_xml:cdata(throng_xml:subel(throng_xml:subel(R, <<"error">>), <<"text">>)),
    ?assertMatch({match, _}, re:run(Text, "300 bytes")),
    ?assertEqual(empty(<<"b">>, <<"ns:big">>), get(A, <<"b">>, <<"ns:big">>)),
    %% Exactly at the limit is fine.
    set(A, [Big(<<"b">>, 78)]),
    ?assertEqual({error, <<"not-acceptable">>}, private(A, <<"set">>, [Big(<<"c">>, 1)])),
    %% Replacing a with a smaller fragment frees room.
    set(A, [Big(<<"a">>, 78)]),
    set(A, [Big(<<"c">>, 78)]),
    ?assertEqual(bin(Big(<<"c">>, 78)), get(A, <<"c">>, <<"ns:big">>)),
    ?assertEqual(bin(Big(<<"b">>, 78)), get(A, <<"b">>, <<"ns:big">>)),
    %% A single fragment over the limit is refused even when nothing is stored.
    ?assertEqual({error, <<"not-acceptable">>}, private(A, <<"set">>, [Big(<<"d">>, 300)])).

%% Removing the account removes its private data: a new account of that
%% name starts empty.
removed_account_forgotten(_) ->
    A = login(<<"alice">>),
    set(A, [prefs(<<"Hamlet">>)]),
    ?C:close(A),
    ok = throng_auth:unregister(<<"alice">>, <<"localhost">>),
    ?assertEqual(not_found, throng_storage:kv_get(private, {<<"alice">>, <<"localhost">>})),
    throng_ct:register(<<"alice">>, <<"password">>),
    A2 = login(<<"alice">>),
    ?assertEqual(empty(<<"exodus">>, <<"exodus:prefs">>), get(A2, <<"exodus">>, <<"exodus:prefs">>)).

%% Stored data is durable: it is there after the server restarts.
survives_restart(_) ->
    A = login(<<"alice">>),
    set(A, [prefs(<<"Hamlet">>), el(<<"storage">>, <<"storage:bookmarks">>, [])]),
    ?C:close(A),
    throng_ct:restart(),
    A2 = login(<<"alice">>),
    ?assertEqual(bin(prefs(<<"Hamlet">>)), get(A2, <<"exodus">>, <<"exodus:prefs">>)).

%% Two resources of one user set different namespaces at the same moment,
%% each many times without waiting for the answers: every set is kept (a
%% set reads, changes and writes the user's store: two of them at once
%% must not undo each other).
concurrent_sets_from_two_resources(_) ->
    A1 = ?C:login(<<"alice">>, <<"password">>, <<"one">>),
    A2 = ?C:login(<<"alice">>, <<"password">>, <<"two">>),
    N = 40,
    Send = fun(C, Tag) ->
                   [?C:send(C, #xmlel{name = <<"iq">>,
                                      attrs = [{<<"type">>, <<"set">>},
                                               {<<"id">>, <<Tag/binary, (integer_to_binary(I))/binary>>}],
                                      children = [query([el(<<"x">>, <<"urn:test:", Tag/binary,
                                                                       (integer_to_binary(I))/binary>>,
                                                            [text(<<"v">>, Tag)])])]})
                    || I <- lists:seq(1, N)]
           end,
    Send(A1, <<"a">>),
    Send(A2, <<"b">>),
    Results = fun(C) -> [throng_xml:attr(<<"type">>, ?C:recv_stanza(C)) || _ <- lists:seq(1, N)] end,
    ?assertEqual(lists:duplicate(N, <<"result">>), Results(A1)),
    ?assertEqual(lists:duplicate(N, <<"result">>), Results(A2)),
    Missing = [{Tag, I} || Tag <- [<<"a">>, <<"b">>], I <- lists:seq(1, N),
                           get(A1, <<"x">>, <<"urn:test:", Tag/binary, (integer_to_binary(I))/binary>>)
                               =:= empty(<<"x">>, <<"urn:test:", Tag/binary, (integer_to_binary(I))/binary>>)],
    ?assertEqual([], Missing).
