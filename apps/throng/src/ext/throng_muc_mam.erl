%% @doc The archive of a MUC room (XEP-0313 §4.1.2 on a room's bare JID,
%% with XEP-0359 stanza ids): what the room's groupchat messages leave in
%% storage and how an occupant, or anyone the room lets in, reads it back.
%%
%% A room's archive is an archive of {@link throng_storage} like a user's,
%% under the room's name and its service's domain (`room@conference.host'
%% is the archive `{Room, Service}'), so both backends, the retention sweep
%% and the ids clients see ({@link throng_mod_mam:id_key/0}) are the same
%% as for one-to-one chats. Each entry is the message as occupants got it:
%% from `room@service/nick', with its XEP-0421 occupant id, without `to';
%% its peer is `{Room's bare JID, Nick}', so that `with' of a query selects
%% a nick (`room@service/nick') or the whole room.
%%
%% Runs in the room's process ({@link throng_muc_logic} calls {@link
%% archive/3} before a message fans out; {@link throng_muc_room} hands the
%% room's MAM IQs to {@link iq/5}): a message is in the archive before any
%% occupant gets it, and carries `<stanza-id by="room@service"/>'.
-module(throng_muc_mam).

-include("throng_muc.hrl").

-export([enabled/1, archive/3, is_iq/1, iq/5, delete/1, take_claims/2]).

-define(NS_MAM2, <<"urn:xmpp:mam:2">>).
-define(NS_MAM1, <<"urn:xmpp:mam:1">>).
-define(NS_SID, <<"urn:xmpp:sid:0">>).

%% @doc Whether the room archives its messages (its configuration says so;
%% it can only when the service has archives on).
-spec enabled(#muc{}) -> boolean().
enabled(#muc{config = C}) ->
    maps:get(archive, C, false).

%% @doc A groupchat message of Nick (as it fans out, without from or to)
%% after the archive took it: with its stanza id when it was archived. A
%% message that is not archived (the room does not archive, no body, a
%% no-store hint) goes on as it came, and so does one whose write failed
%% (logged).
-spec archive(#muc{}, binary(), #xmlel{}) -> #xmlel{}.
archive(#muc{jid = #jid{user = Room, server = Service} = JID} = S, Nick, El) ->
    case enabled(S) andalso throng_mod_mam:storable(El) of
        false ->
            El;
        true ->
            Bare = throng_jid:to_binary(JID),
            From = throng_jid:to_binary(JID#jid{resource = Nick}),
            Msg = #mam_msg{id = throng_mam_id:next(), peer = {Bare, Nick},
                           packet = throng_xml:to_binary(throng_xml:set_attr(<<"from">>, From, El))},
            try throng_storage:mam_store(Room, Service, Msg) of
                Id ->
                    Sid = #xmlel{name = <<"stanza-id">>,
                                 attrs = [{<<"xmlns">>, ?NS_SID}, {<<"by">>, Bare},
                                          {<<"id">>, throng_mam_id:encode(throng_mod_mam:id_key(),
                                                                          Id)}]},
                    El#xmlel{children = El#xmlel.children ++ [Sid]}
            catch
                error:{storage_failed, Why} ->
                    logger:error(#{what => muc_archive_store_failed, room => Bare,
                                   reason => Why}),
                    El
            end
    end.

%% @doc A client's message without the stanza ids that claim to be the
%% room's (XEP-0359 §5: only the room gives them).
-spec take_claims(#xmlel{}, #jid{}) -> #xmlel{}.
take_claims(#xmlel{children = Children} = El, Room) ->
    Bare = throng_jid:to_binary(Room),
    El#xmlel{children = [C || C <- Children, not claims(C, Bare)]}.

claims(#xmlel{name = <<"stanza-id">>} = C, Bare) ->
    throng_xml:ns(C) =:= ?NS_SID andalso
        case throng_jid:parse(throng_xml:attr(<<"by">>, C, <<>>)) of
            {ok, J} -> throng_jid:to_binary(throng_jid:bare(J)) =:= Bare;
            error -> false
        end;
claims(_, _) ->
    false.

%% @doc Whether an IQ's payload is for the archive.
-spec is_iq(#xmlel{} | undefined) -> boolean().
is_iq(#xmlel{name = Name} = P) when Name =:= <<"query">>; Name =:= <<"metadata">>;
                                    Name =:= <<"prefs">> ->
    lists:member(throng_xml:ns(P), [?NS_MAM2, ?NS_MAM1]);
is_iq(_) ->
    false.

%% @doc An IQ From sent to the room's archive: a query (its results, then
%% its answer), the query form, the archive's metadata. Who may read: not
%% an outcast; in a members-only room a member (or higher) or an occupant;
%% in a password-protected room an occupant (the password guards what is
%% said); anyone else. A room that does not archive answers
%% feature-not-implemented; preferences are a user archive's only.
-spec iq(#jid{}, #jid{}, #xmlel{}, #xmlel{}, #muc{}) -> [throng_muc_xml:out()].
iq(From, To, El, #xmlel{name = Name} = P, #muc{limits = Limits} = S) ->
    Type = throng_stanza:type(El),
    case may_read(From, S) of
        _ when Type =:= <<"result">>; Type =:= <<"error">> -> [];
        _ when Name =:= <<"prefs">> ->
            error(From, To, El, 'feature-not-implemented', <<"a room has no preferences">>);
        _ when not (Type =:= <<"get">> orelse Type =:= <<"set">>) ->
            throng_muc_xml:error(From, To, El, 'bad-request');
        false ->
            throng_muc_xml:error(From, To, El, forbidden);
        true ->
            case enabled(S) of
                false ->
                    error(From, To, El, 'feature-not-implemented', <<"this room is not archived">>);
                true ->
                    answer(From, To, El, Type, Name, P, maps:get(page_size, Limits, 50), S)
            end
    end.

answer(From, To, El, Type, Name, P, PageSize, #muc{jid = #jid{user = Room, server = Service}}) ->
    IQ = throng_stanza:strip_from_to(El),
    NS = throng_xml:ns(P),
    try {Type, Name} of
        {<<"set">>, <<"query">>} ->
            case throng_mod_mam:answer(IQ, P, NS, Room, Service, PageSize) of
                {ok, Results, Answer} -> [{To, From, R} || R <- Results ++ [Answer]];
                {error, Error} -> [{To, From, Error}]
            end;
        {<<"get">>, <<"query">>} ->
            [{To, From, throng_stanza:iq_result(IQ, [throng_mam_query:form(NS)])}];
        {<<"get">>, <<"metadata">>} when NS =:= ?NS_MAM2 ->
            [{To, From, throng_stanza:iq_result(
                          IQ, [throng_mod_mam:metadata_el(Room, Service,
                                                          throng_mod_mam:id_key())])}];
        _ ->
            throng_muc_xml:error(From, To, El, 'bad-request')
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => muc_archive_query_failed, room => Room, service => Service,
                           reason => Why}),
            throng_muc_xml:error(From, To, El, 'internal-server-error')
    end.

may_read(From, #muc{config = C} = S) ->
    Aff = throng_muc_xml:affiliation(S, From),
    Occupant = maps:is_key(From, S#muc.nicks),
    if Aff =:= outcast -> false;
       Occupant -> true;
       S#muc.locked -> false;
       map_get(password_protected, C) -> false;
       map_get(members_only, C) -> Aff =/= none;
       true -> true
    end.

error(From, To, El, Cond, Text) ->
    [{To, From, throng_stanza:error_reply(throng_stanza:strip_from_to(El), Cond, Text)}].

%% @doc Removes a room's archive (the room is destroyed, or a temporary
%% room ends); a failure is logged.
-spec delete(#jid{}) -> ok.
delete(#jid{user = Room, server = Service} = JID) ->
    try throng_storage:mam_delete_user(Room, Service)
    catch
        error:{storage_failed, Why} ->
            logger:error(#{what => muc_archive_delete_failed,
                           room => throng_jid:to_binary(JID), reason => Why}),
            ok
    end.
