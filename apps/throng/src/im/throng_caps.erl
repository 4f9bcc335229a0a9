%% @doc XEP-0115 Entity Capabilities on the server's side: what a client
%% resource supports, known from the `<c/>' element of its presence.
%%
%% A session's presence is already kept in the session table ({@link
%% throng_sm}), `<c/>' included, so a resource's capabilities cost no
%% memory of their own: its verification string names an entry of one
%% node-wide cache (`ver' to features), shared by every client of the same
%% software and version. An entry is learnt once, by asking one resource
%% that advertises an unknown `ver' for its disco#info (`query/2'), and
%% kept only if the answer hashes to that `ver' (§5.4: a client cannot
%% poison the cache with features of its own choosing). Legacy `<c/>'
%% without a `hash' (XEP-0115 v1.3) is not trusted and not cached.
-module(throng_caps).

-include("throng.hrl").

-export([init/0, from_presence/1, features/1, lookup/1, query/1, answer/1, ver/1]).
%% Called by throng_table_owner at boot; ver/1 is the §5 algorithm, tested
%% against the XEP's examples.
-ignore_xref([{init, 0}, {ver, 1}]).

-define(NS_CAPS, <<"http://jabber.org/protocol/caps">>).
-define(CACHE, throng_caps).
-define(QUERY_ID, "throng-caps-").
%% The cache is bounded: a client that invents a new ver at every login
%% must not grow it without end.
-define(MAX_ENTRIES, 10000).

-type caps() :: {Hash :: binary(), Node :: binary(), Ver :: binary()}.
-export_type([caps/0]).

-spec init() -> ok.
init() ->
    ?CACHE = ets:new(?CACHE, [set, public, named_table, {read_concurrency, true}]),
    ok.

%% @doc The capabilities a presence element advertises (with a hash).
-spec from_presence(#xmlel{} | undefined) -> caps() | none.
from_presence(#xmlel{} = Pres) ->
    case throng_xml:subel(Pres, <<"c">>, ?NS_CAPS) of
        undefined -> none;
        C ->
            case {throng_xml:attr(<<"hash">>, C), throng_xml:attr(<<"node">>, C),
                  throng_xml:attr(<<"ver">>, C)} of
                {H, N, V} when is_binary(H), is_binary(N), is_binary(V) -> {H, N, V};
                _ -> none
            end
    end;
from_presence(undefined) ->
    none.

%% @doc The features of a resource with this presence: known, unknown (a
%% ver not learnt yet) or none (no capabilities advertised).
-spec features(#xmlel{} | undefined) -> {ok, [binary()]} | unknown | none.
features(Pres) ->
    case from_presence(Pres) of
        none -> none;
        Caps -> lookup(Caps)
    end.

-spec lookup(caps()) -> {ok, [binary()]} | unknown.
lookup({Hash, _Node, Ver}) ->
    case ets:lookup(?CACHE, {Hash, Ver}) of
        [{_, Features}] -> {ok, Features};
        [] -> unknown
    end.

%% @doc The disco#info query that learns a ver, sent to the resource from
%% its own bare JID (so that the answer passes through the resource's own
%% session, where {@link answer/1} recognizes it).
-spec query(caps()) -> #xmlel{}.
query({Hash, Node, Ver}) ->
    Id = iolist_to_binary([?QUERY_ID, base64:encode(term_to_binary({Hash, Ver}))]),
    #xmlel{name = <<"iq">>, attrs = [{<<"type">>, <<"get">>}, {<<"id">>, Id}],
           children = [#xmlel{name = <<"query">>,
                              attrs = [{<<"xmlns">>, ?NS_DISCO_INFO},
                                       {<<"node">>, <<Node/binary, "#", Ver/binary>>}]}]}.

%% @doc A stanza from a client: if it answers one of our queries, learn
%% from it. `{learnt, Features}' when the answer was right and is now
%% cached, `bad' when it was a wrong answer to our query, `no' when the
%% stanza is not such an answer.
-spec answer(#xmlel{}) -> {learnt, [binary()]} | bad | no.
answer(#xmlel{name = <<"iq">>} = IQ) ->
    case throng_stanza:id(IQ) of
        <<?QUERY_ID, Enc/binary>> ->
            case {throng_stanza:type(IQ), decode(Enc),
                  throng_xml:subel(IQ, <<"query">>, ?NS_DISCO_INFO)} of
                {<<"result">>, {ok, {Hash, Ver}}, #xmlel{} = Q} ->
                    case verify(Hash, {Ver, Q}) of
                        {ok, Features} ->
                            store(Hash, Ver, Features),
                            {learnt, Features};
                        error -> bad
                    end;
                _ -> bad
            end;
        _ -> no
    end;
answer(_) ->
    no.

decode(Enc) ->
    try binary_to_term(base64:decode(Enc), [safe]) of
        {H, V} = T when is_binary(H), is_binary(V) -> {ok, T};
        _ -> error
    catch _:_ -> error
    end.

store(Hash, Ver, Features) ->
    case ets:info(?CACHE, size) >= ?MAX_ENTRIES of
        true -> ets:delete_all_objects(?CACHE);
        false -> ok
    end,
    true = ets:insert(?CACHE, {{Hash, Ver}, Features}),
    ok.

%% @doc Checks a disco#info answer against the ver it should hash to;
%% the features when it does. sha-1 (the XEP's mandatory hash) and the
%% SHA-2 family are checked; any other hash is not trusted.
-spec verify(binary(), {binary(), #xmlel{}}) -> {ok, [binary()]} | error.
verify(Hash, {Ver, Query}) ->
    case algorithm(Hash) of
        undefined -> error;
        Alg ->
            case base64:encode(crypto:hash(Alg, ver(Query))) of
                Ver -> {ok, lists:usort([throng_xml:attr(<<"var">>, F, <<>>)
                                         || #xmlel{name = <<"feature">>} = F <- Query#xmlel.children])};
                _ -> error
            end
    end.

algorithm(<<"sha-1">>) -> sha;
algorithm(<<"sha-224">>) -> sha224;
algorithm(<<"sha-256">>) -> sha256;
algorithm(<<"sha-384">>) -> sha384;
algorithm(<<"sha-512">>) -> sha512;
algorithm(_) -> undefined.

%% @doc The verification string S of XEP-0115 §5.1 (before hashing):
%% identities, features and extended forms, each sorted, each part ended
%% by "<".
-spec ver(#xmlel{}) -> binary().
ver(#xmlel{children = Children}) ->
    Ids = lists:sort([[throng_xml:attr(<<"category">>, I, <<>>), $/,
                       throng_xml:attr(<<"type">>, I, <<>>), $/,
                       throng_xml:attr(<<"xml:lang">>, I, <<>>), $/,
                       throng_xml:attr(<<"name">>, I, <<>>), $<]
                      || #xmlel{name = <<"identity">>} = I <- Children]),
    Features = lists:sort([[throng_xml:attr(<<"var">>, F, <<>>), $<]
                           || #xmlel{name = <<"feature">>} = F <- Children]),
    Forms = lists:sort([form(X) || #xmlel{name = <<"x">>} = X <- Children,
                                   throng_xml:ns(X) =:= <<"jabber:x:data">>]),
    iolist_to_binary([[iolist_to_binary(I) || I <- Ids],
                      [iolist_to_binary(F) || F <- Features], Forms]).

%% A form: FORM_TYPE's value first, then the other fields sorted by var,
%% each with its values sorted.
form(X) ->
    Fields = [{throng_xml:attr(<<"var">>, F, <<>>),
               lists:sort([throng_xml:cdata(V) || #xmlel{name = <<"value">>} = V <- F#xmlel.children])}
              || #xmlel{name = <<"field">>} = F <- X#xmlel.children],
    Type = case lists:keyfind(<<"FORM_TYPE">>, 1, Fields) of
               {_, [T | _]} -> T;
               _ -> <<>>
           end,
    Rest = lists:keysort(1, [F || {V, _} = F <- Fields, V =/= <<"FORM_TYPE">>]),
    iolist_to_binary([Type, $<, [[V, $<, [[Val, $<] || Val <- Vals]] || {V, Vals} <- Rest]]).
