%% @doc XEP-0153 vCard-based avatars, server side (throng_mod_vcard)
%% against the real server: when a user's stored vCard has a PHOTO, the
%% available presence the user sends carries
%% `<x xmlns='vcard-temp:x:update'><photo>SHA-1 of the image</photo></x>'
%% unless the client put an update element there itself; an empty
%% `<photo/>' once the vCard has no photo (the XEP's "no avatar"), nothing
%% while the user has no vCard at all. Contacts get it in the broadcast and
%% in probe answers, others in directed presence; the hash follows a new
%% photo; a BINVAL that is not base64 is refused. The node's cache of hashes
%% drops idle users. The cases that touch storage run on both backends
%% (groups mnesia and pgsql); the cluster case is in cluster_SUITE.
-module(xep0153_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").
-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(NS_VCARD, <<"vcard-temp">>).
-define(NS_UPDATE, <<"vcard-temp:x:update">>).

all() ->
    [no_vcard_no_update, unavailable_untouched, host_started_again_from_another_process,
     {group, mnesia}, {group, pgsql}].

groups() ->
    throng_ct:backend_groups(
      [hash_added_to_presence, own_update_kept, empty_update_kept, hash_changes_after_new_photo,
       photo_removed_gives_empty_photo, binval_with_line_breaks, invalid_binval_refused,
       hash_in_probe_answer, directed_presence_carries_hash, survives_restart,
       removed_account_forgets_hash, idle_users_leave_the_cache,
       hash_read_with_the_credentials]).

init_per_group(Group, Config) ->
    throng_ct:init_backend(Group, Config).

end_per_group(_Group, Config) ->
    throng_ct:end_backend(Config).

init_per_testcase(idle_users_leave_the_cache, Config) ->
    start(Config, #{modules => #{vcard => #{hash_cache_ttl => 1}}});
init_per_testcase(_TC, Config) ->
    start(Config, #{}).

start(Config, Overrides) ->
    throng_ct:start_backend(Config, Overrides),
    [throng_ct:register(U, <<"password">>) || U <- [<<"alice">>, <<"bob">>, <<"carol">>]],
    throng_ct:mutual(<<"alice">>, <<"bob">>),
    Config.

end_per_testcase(_TC, _Config) ->
    throng_ct:stop().

%%% Helpers

login(User) ->
    ?C:login(User, <<"password">>, <<"r">>).

%% Logged in and available, with what the login brought flushed.
online(User) ->
    C = login(User),
    ok = ?C:available(C),
    C.

text(Name, Text) ->
    #xmlel{name = Name, children = [{xmlcdata, Text}]}.

vcard(Children) ->
    #xmlel{name = <<"vCard">>, attrs = [{<<"xmlns">>, ?NS_VCARD}], children = Children}.

photo_vcard(Image) ->
    photo_vcard_b64(base64:encode(Image)).

photo_vcard_b64(B64) ->
    vcard([text(<<"FN">>, <<"Alice">>),
           #xmlel{name = <<"PHOTO">>, children = [text(<<"TYPE">>, <<"image/png">>),
                                                 text(<<"BINVAL">>, B64)]}]).

%% Some bytes standing for an image.
image(Seed) ->
    crypto:hash(sha512, Seed).

sha1hex(Bin) ->
    string:lowercase(binary:encode_hex(crypto:hash(sha, Bin))).

set(C, VCard) ->
    R = iq(C, <<"set">>, VCard),
    ?assertEqual(<<"result">>, throng_xml:attr(<<"type">>, R)).

%% An IQ and its response; presence arriving meanwhile is skipped.
iq(C, Type, Payload) ->
    Id = integer_to_binary(erlang:unique_integer([positive])),
    ?C:send(C, #xmlel{name = <<"iq">>, attrs = [{<<"type">>, Type}, {<<"id">>, Id}],
                      children = [Payload]}),
    wait_iq(C, Id).

wait_iq(C, Id) ->
    case ?C:recv_stanza(C) of
        #xmlel{name = <<"iq">>} = R ->
            ?assertEqual(Id, throng_xml:attr(<<"id">>, R)),
            R;
        #xmlel{name = <<"presence">>} ->
            wait_iq(C, Id)
    end.

%% The next presence from From that C receives (other stanzas are skipped).
presence_from(C, From) ->
    presence_from(C, From, <<>>).

%% The next one of that type.
presence_from(C, From, Type) ->
    case ?C:recv_stanza(C) of
        #xmlel{name = <<"presence">>} = P ->
            case {throng_xml:attr(<<"from">>, P), throng_stanza:type(P)} of
                {From, Type} -> P;
                _ -> presence_from(C, From, Type)
            end;
        _ ->
            presence_from(C, From, Type)
    end.

%% What a presence says of the avatar: none (no update element),
%% no_photo_element (an update element without <photo/>), {photo, Hash}
%% (<<>> for an empty <photo/>). Fails if there are several update elements.
update(P) ->
    case [X || #xmlel{name = <<"x">>} = X <- throng_xml:subels(P), throng_xml:ns(X) =:= ?NS_UPDATE] of
        [] -> none;
        [X] ->
            case throng_xml:subel(X, <<"photo">>) of
                undefined -> no_photo_element;
                Photo -> {photo, throng_xml:cdata(Photo)}
            end;
        Xs -> ct:fail({several_update_elements, Xs})
    end.

%% Alice sends available presence (with these children); Bob, online and
%% subscribed, gets it: what it says of the avatar.
seen_by_bob(A, B, Children) ->
    ?C:flush(B),
    ?C:send(A, #xmlel{name = <<"presence">>, children = Children}),
    update(presence_from(B, <<"alice@localhost/r">>)).

%%% Cases outside the backend groups

%% A user who never stored a vCard sends presence as written: the server
%% knows nothing of an avatar and adds nothing.
no_vcard_no_update(_) ->
    B = online(<<"bob">>),
    A = login(<<"alice">>),
    ?assertEqual(none, seen_by_bob(A, B, [])).

%% Unavailable presence never gets an update element.
unavailable_untouched(_) ->
    B = online(<<"bob">>),
    A = online(<<"alice">>),
    set(A, photo_vcard(image(<<"a">>))),
    ?C:send(A, ?C:presence([{<<"type">>, <<"unavailable">>}])),
    P = presence_from(B, <<"alice@localhost/r">>, <<"unavailable">>),
    ?assertEqual(none, update(P)).

%% The host's modules started again (throng_ext:start_host/2, as tests do)
%% from a process that then ends: the cache made at boot stays in use, so
%% presence still carries the hash.
host_started_again_from_another_process(_) ->
    B = online(<<"bob">>),
    A = login(<<"alice">>),
    set(A, photo_vcard(image(<<"alice">>))),
    {Pid, Ref} = spawn_monitor(fun() ->
                                       ok = throng_ext:start_host(<<"localhost">>,
                                                                  throng_config:modules(<<"localhost">>))
                               end),
    receive {'DOWN', Ref, process, Pid, normal} -> ok after 5000 -> ct:fail(start_host) end,
    ?assertEqual({photo, sha1hex(image(<<"alice">>))}, seen_by_bob(A, B, [])),
    %% The same table: Bob's row and Alice's from before are there.
    ?assertEqual(2, throng_mod_vcard:cached(<<"localhost">>)).

%%% Cases on both backends

%% With a PHOTO in the stored vCard, the user's available presence reaches
%% a contact with the SHA-1 (hex) of the decoded image (XEP-0153 §3.1), next
%% to what the client wrote.
hash_added_to_presence(_) ->
    B = online(<<"bob">>),
    A = login(<<"alice">>),
    Image = image(<<"alice">>),
    set(A, photo_vcard(Image)),
    ?C:send(A, #xmlel{name = <<"presence">>,
                      children = [text(<<"show">>, <<"away">>), text(<<"status">>, <<"lunch">>)]}),
    P = presence_from(B, <<"alice@localhost/r">>),
    ?assertEqual({photo, sha1hex(Image)}, update(P)),
    ?assertEqual(<<"away">>, throng_xml:subel_cdata(P, <<"show">>)),
    ?assertEqual(<<"lunch">>, throng_xml:subel_cdata(P, <<"status">>)),
    %% The user's own resource gets the same presence back.
    ?assertEqual({photo, sha1hex(Image)}, update(presence_from(A, <<"alice@localhost/r">>))).

%% A client that puts its own update element is left alone: the contact
%% gets the client's element, once (§4.1 rule 1 is the client's to keep).
own_update_kept(_) ->
    B = online(<<"bob">>),
    A = login(<<"alice">>),
    set(A, photo_vcard(image(<<"alice">>))),
    Own = #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, ?NS_UPDATE}],
                 children = [text(<<"photo">>, <<"0123456789abcdef0123456789abcdef01234567">>)]},
    ?assertEqual({photo, <<"0123456789abcdef0123456789abcdef01234567">>}, seen_by_bob(A, B, [Own])).

%% An empty update element ("not ready to advertise an image", §4.1 rule
%% 2) is the client's too: no photo is added to it.
empty_update_kept(_) ->
    B = online(<<"bob">>),
    A = login(<<"alice">>),
    set(A, photo_vcard(image(<<"alice">>))),
    Empty = #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, ?NS_UPDATE}]},
    ?assertEqual(no_photo_element, seen_by_bob(A, B, [Empty])).

%% A new PHOTO changes the hash of the next presence.
hash_changes_after_new_photo(_) ->
    B = online(<<"bob">>),
    A = login(<<"alice">>),
    set(A, photo_vcard(image(<<"one">>))),
    ?assertEqual({photo, sha1hex(image(<<"one">>))}, seen_by_bob(A, B, [])),
    set(A, photo_vcard(image(<<"two">>))),
    ?assertEqual({photo, sha1hex(image(<<"two">>))}, seen_by_bob(A, B, [])).

%% Once the stored vCard has no PHOTO (or an empty BINVAL), presence says
%% "no avatar" with an empty <photo/> (§4.1 rule 3), so contacts drop the
%% old image instead of keeping the last hash.
photo_removed_gives_empty_photo(_) ->
    B = online(<<"bob">>),
    A = login(<<"alice">>),
    set(A, photo_vcard(image(<<"one">>))),
    ?assertEqual({photo, sha1hex(image(<<"one">>))}, seen_by_bob(A, B, [])),
    set(A, vcard([text(<<"FN">>, <<"Alice">>)])),
    ?assertEqual({photo, <<>>}, seen_by_bob(A, B, [])),
    set(A, photo_vcard_b64(<<>>)),
    ?assertEqual({photo, <<>>}, seen_by_bob(A, B, [])).

%% Whitespace in the BINVAL is ignored (§4.5 rule 5: lines of 76
%% characters), and so is missing padding: the hash is of the image.
binval_with_line_breaks(_) ->
    B = online(<<"bob">>),
    A = login(<<"alice">>),
    Image = binary:copy(image(<<"big">>), 4),
    B64 = base64:encode(Image),
    Lines = iolist_to_binary(lists:join(<<"\r\n ">>, [binary_part(B64, I, min(76, byte_size(B64) - I))
                                                      || I <- lists:seq(0, byte_size(B64) - 1, 76)])),
    set(A, photo_vcard_b64(<<"\n  ", Lines/binary, "\n">>)),
    ?assertEqual({photo, sha1hex(Image)}, seen_by_bob(A, B, [])),
    Odd = <<"abcde">>,
    Unpadded = string:trim(base64:encode(Odd), trailing, "="),
    ?assertEqual(byte_size(base64:encode(Odd)) - 1, byte_size(Unpadded)),
    set(A, photo_vcard_b64(Unpadded)),
    ?assertEqual({photo, sha1hex(Odd)}, seen_by_bob(A, B, [])).

%% A BINVAL that is not base64 has no image to hash: the set is refused
%% with bad-request and the stored vCard stays.
invalid_binval_refused(_) ->
    B = online(<<"bob">>),
    A = login(<<"alice">>),
    set(A, photo_vcard(image(<<"one">>))),
    R = iq(A, <<"set">>, photo_vcard_b64(<<"not base64!">>)),
    ?assertEqual(<<"error">>, throng_xml:attr(<<"type">>, R)),
    ?assertMatch(#xmlel{children = [#xmlel{name = <<"bad-request">>} | _]},
                 throng_xml:subel(R, <<"error">>)),
    ?assertEqual({photo, sha1hex(image(<<"one">>))}, seen_by_bob(A, B, [])).

%% A contact who comes online later gets the user's presence, from the
%% server's copy, with the hash.
hash_in_probe_answer(_) ->
    A = login(<<"alice">>),
    set(A, photo_vcard(image(<<"alice">>))),
    ok = ?C:available(A),
    B = login(<<"bob">>),
    ?C:send(B, ?C:presence([])),
    ?assertEqual({photo, sha1hex(image(<<"alice">>))}, update(presence_from(B, <<"alice@localhost/r">>))).

%% Directed presence carries the hash too (§4.1 rule 1: SHOULD, e.g. to a
%% chat room), also to someone not subscribed.
directed_presence_carries_hash(_) ->
    C = online(<<"carol">>),
    A = online(<<"alice">>),
    set(A, photo_vcard(image(<<"alice">>))),
    ?C:send(A, ?C:presence([{<<"to">>, <<"carol@localhost">>}])),
    ?assertEqual({photo, sha1hex(image(<<"alice">>))}, update(presence_from(C, <<"alice@localhost/r">>))).

%% The hash is known again after a restart (the node's cache is empty then;
%% it comes from storage).
survives_restart(_) ->
    A = login(<<"alice">>),
    set(A, photo_vcard(image(<<"alice">>))),
    ?C:close(A),
    throng_ct:restart(),
    B = online(<<"bob">>),
    A2 = login(<<"alice">>),
    ?assertEqual({photo, sha1hex(image(<<"alice">>))}, seen_by_bob(A2, B, [])).

%% A removed account's hash goes with its vCard: a new account of that name
%% sends presence with no update element.
removed_account_forgets_hash(_) ->
    A = login(<<"alice">>),
    set(A, photo_vcard(image(<<"alice">>))),
    ?C:send(A, ?C:presence([])),
    ?C:close(A),
    ok = throng_auth:unregister(<<"alice">>, <<"localhost">>),
    throng_ct:register(<<"alice">>, <<"password">>),
    throng_ct:mutual(<<"alice">>, <<"bob">>),
    B = online(<<"bob">>),
    A2 = login(<<"alice">>),
    ?assertEqual(none, seen_by_bob(A2, B, [])).

%% A node keeps a user's hash only for hash_cache_ttl seconds after reading
%% it (here 1): users who send no presence cost the cache nothing after
%% that, and the next presence reads storage again.
idle_users_leave_the_cache(_) ->
    B = online(<<"bob">>),
    A = online(<<"alice">>),
    set(A, photo_vcard(image(<<"alice">>))),
    ?assert(throng_mod_vcard:cached(<<"localhost">>) >= 1),
    throng_ct:wait_until(fun() -> throng_mod_vcard:cached(<<"localhost">>) =:= 0 end, 5000),
    ?assertEqual({photo, sha1hex(image(<<"alice">>))}, seen_by_bob(A, B, [])),
    ?assertEqual(1, throng_mod_vcard:cached(<<"localhost">>)).

%% A login reads the user's hash with the credentials (one read of the
%% store for both): the initial presence that follows carries it and reads
%% nothing of the vCard bucket itself.
hash_read_with_the_credentials(_) ->
    B = online(<<"bob">>),
    A = login(<<"alice">>),
    set(A, photo_vcard(image(<<"alice">>))),
    ?C:close(A),
    ok = throng_mod_vcard:forget({<<"alice">>, <<"localhost">>}),
    %% The reads of the vCard bucket made by processes started from now
    %% on (the connection's among them).
    MFA = {throng_storage, kv_get, 2},
    1 = erlang:trace_pattern(MFA, [{[vcard, '_'], [], []}], [global]),
    _ = erlang:trace(new_processes, true, [call]),
    try
        A2 = login(<<"alice">>),
        ?assertEqual(0, vcard_reads()),
        ?assertEqual({photo, sha1hex(image(<<"alice">>))}, seen_by_bob(A2, B, [])),
        ?assertEqual(0, vcard_reads())
    after
        _ = erlang:trace(new_processes, false, [call]),
        erlang:trace_pattern(MFA, false, [global])
    end.

vcard_reads() ->
    receive {trace, _, call, {throng_storage, kv_get, [vcard, _]}} -> 1 + vcard_reads()
    after 100 -> 0
    end.
