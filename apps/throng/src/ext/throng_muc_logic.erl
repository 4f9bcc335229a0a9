%% @doc A room's presence and messages (XEP-0045 §7): entering (with the
%% checks of §7.2: banned, locked, members-only, nick conflict, password,
%% full), the presence exchange and status codes, history and subject on
%% entering, presence updates, nick changes (§7.6), leaving, groupchat
%% messages, subject changes (§8.1), private messages (§7.5), mediated
%% invitations and declines (§7.8.2, §7.9), and occupant errors. Pure but
%% for the room's archive, which takes a groupchat message before it fans
%% out ({@link throng_muc_mam:archive/3}; a room whose configuration has
%% no archive does not touch storage): a stanza and the room's state in,
%% the new state and the stanzas to route out. IQs are {@link
%% throng_muc_admin}'s.
-module(throng_muc_logic).

-include("throng_muc.hrl").

-export([presence/5, message/5]).

-define(X, throng_muc_xml).

-type out() :: throng_muc_xml:out().

%%% Presence

%% @doc A presence from the real JID From to the room or room/nick. The
%% occupant's own presence that it causes, to itself and to the others,
%% carries the client's presence id (§7.2.3: a client matches its
%% self-presence by it; the others' presence from other occupants does not).
-spec presence(#jid{}, #jid{}, #xmlel{}, integer(), #muc{}) -> {#muc{}, [out()]}.
presence(From, To, El, Now, S0) ->
    Old = maps:get(From, S0#muc.nicks, undefined),
    {S, Out} = presence1(From, To, El, Now, S0),
    case throng_stanza:id(El) of
        <<>> -> {S, Out};
        Id ->
            Own = [N || N <- [Old, maps:get(From, S#muc.nicks, undefined)], N =/= undefined],
            {S, [with_id(Id, Own, O) || O <- Out]}
    end.

%% An occupant presence from one of the nicks Own gets the id Id.
with_id(Id, Own, {#jid{resource = Nick} = F, T, #xmlel{name = <<"presence">>} = Stanza} = O)
  when Nick =/= <<>> ->
    case lists:member(Nick, Own) andalso throng_stanza:type(Stanza) =/= <<"error">> of
        true -> {F, T, throng_xml:set_attr(<<"id">>, Id, Stanza)};
        false -> O
    end;
with_id(_Id, _Own, O) ->
    O.

presence1(From, #jid{resource = Nick} = To, El, Now, S) ->
    Mine = maps:get(From, S#muc.nicks, undefined),
    case {throng_stanza:type(El), Mine} of
        {<<"unavailable">>, undefined} -> {S, []};
        {<<"unavailable">>, _} -> leave(Mine, El, S);
        {<<"error">>, undefined} -> {S, []};
        %% The occupant's server bounced what the room sent it (§7.2 and
        %% §16.1.2: 333, removed because of an error).
        {<<"error">>, _} -> ?X:remove(S, Mine, {[], []}, [333]);
        {<<>>, _} when Nick =:= <<>> -> {S, ?X:error(From, To, El, 'jid-malformed')};
        {<<>>, undefined} -> enter(From, To, El, Now, S);
        {<<>>, Nick} -> update(Nick, El, S);
        {<<>>, _} -> change_nick(Mine, From, To, El, S);
        _ -> {S, []}
    end.

enter(From, #jid{resource = Nick} = To, El, Now, #muc{config = C} = S) ->
    Aff = ?X:affiliation(S, From),
    X = throng_xml:subel(El, <<"x">>, ?NS_MUC),
    Password = case X of
                   undefined -> <<>>;
                   _ -> throng_xml:subel_cdata(X, <<"password">>)
               end,
    Privileged = throng_muc_rules:rank(Aff) >= throng_muc_rules:rank(admin),
    Refusal =
        if Aff =:= outcast -> forbidden;
           S#muc.locked, Aff =/= owner -> 'item-not-found';
           map_get(members_only, C), Aff =:= none -> 'registration-required';
           is_map_key(Nick, S#muc.occs) -> conflict;
           map_get(password_protected, C), Password =/= map_get(password, C) -> 'not-authorized';
           not Privileged, map_size(S#muc.occs) >= map_get(max_users, C) -> 'service-unavailable';
           true -> ok
        end,
    case Refusal of
        ok -> entered(From, To, El, X, Aff, Now, S);
        Cond -> {S, ?X:error(From, To, El, Cond)}
    end.

entered(From, #jid{resource = Nick}, El, X, Aff, Now, S) ->
    Created = S#muc.locked andalso map_size(S#muc.occs) =:= 0,
    Occ = #occ{nick = Nick, jid = From,
               role = throng_muc_rules:default_role(Aff, map_get(moderated, S#muc.config)),
               pres = kept_presence(El), oid = ?X:occupant_id_of(S, From)},
    Others = maps:values(S#muc.occs),
    S1 = S#muc{occs = (S#muc.occs)#{Nick => Occ}, nicks = (S#muc.nicks)#{From => Nick}},
    Avail = {<<>>, [], []},
    %% §7.2.3: the others' presence to the newcomer, the newcomer's to the
    %% others, then its own (110; 201 for a new room, §10.1.1).
    Existing = [{?X:occ_jid(S, O#occ.nick), From, ?X:presence(S1, O, Occ, Avail, [])}
                || O <- Others],
    ToOthers = ?X:presence_to(S1, Occ, Avail, [], Others),
    Own = {?X:occ_jid(S, Nick), From, ?X:presence(S1, Occ, Occ, Avail, [201 || Created])},
    History = case X of
                  undefined -> [];
                  _ -> history(S, From, throng_xml:subel(X, <<"history">>), Now)
              end,
    {S1, Existing ++ ToOthers ++ [Own] ++ History ++ [subject(S, From)]}.

%% §7.2.14: the requested part of the history, each with its delay stamp.
history(#muc{jid = R, history = H}, To, HistoryEl, Now) ->
    [{R#jid{resource = throng_xml:attr(<<"nick">>, El, <<>>)}, To, delayed(El, Stamp, R)}
     || {Stamp, El} <- throng_muc_history:select(throng_muc_history:request(HistoryEl), Now, H)].

delayed(#xmlel{children = Ch} = El, Stamp, R) ->
    Delay = #xmlel{name = <<"delay">>,
                   attrs = [{<<"xmlns">>, ?NS_DELAY},
                            {<<"from">>, throng_jid:to_binary(R)},
                            {<<"stamp">>, list_to_binary(calendar:system_time_to_rfc3339(
                                                           Stamp, [{unit, microsecond},
                                                                   {offset, "Z"}]))}]},
    (strip_nick(El))#xmlel{children = Ch ++ [Delay]}.

%% The history keeps the sender's nick in an attribute of its own (it is
%% not sent): the stanza's from is set when it is routed.
strip_nick(#xmlel{attrs = A} = El) ->
    El#xmlel{attrs = lists:keydelete(<<"nick">>, 1, A)}.

%% §7.2.15: the subject comes last, also when there is none.
subject(#muc{jid = R, subject = {Text, By}}, To) ->
    {R#jid{resource = By}, To,
     #xmlel{name = <<"message">>, attrs = [{<<"type">>, <<"groupchat">>}],
            children = [#xmlel{name = <<"subject">>, children = [{xmlcdata, Text} || Text =/= <<>>]}]}}.

%% What the room keeps of an occupant's presence: show, status, priority
%% and anything else but its MUC elements.
kept_presence(El) ->
    throng_stanza:copy(?X:strip(throng_stanza:strip_from_to(El))).

update(Nick, El, S) ->
    Occ = (maps:get(Nick, S#muc.occs))#occ{pres = kept_presence(El)},
    S1 = S#muc{occs = (S#muc.occs)#{Nick => Occ}},
    {S1, ?X:broadcast_presence(S1, Occ, {<<>>, [], []}, [])}.

leave(Nick, El, S) ->
    Occ = maps:get(Nick, S#muc.occs),
    S1 = S#muc{occs = (S#muc.occs)#{Nick => Occ#occ{pres = kept_presence(El)}}},
    ?X:remove(S1, Nick, {[], []}, []).

%% §7.6: unavailable from the old nick with 303 and the new nick, then
%% available from the new one; a nick in use is a conflict.
change_nick(Old, From, #jid{resource = New} = To, El, S) ->
    case is_map_key(New, S#muc.occs) of
        true ->
            {S, ?X:error(From, To, El, conflict)};
        false ->
            Occ = maps:get(Old, S#muc.occs),
            Gone = ?X:broadcast_presence(S, Occ, {<<"unavailable">>, [{<<"nick">>, New}], []}, [303]),
            Renamed = Occ#occ{nick = New, pres = kept_presence(El)},
            S1 = S#muc{occs = maps:put(New, Renamed, maps:remove(Old, S#muc.occs)),
                       nicks = (S#muc.nicks)#{From => New}},
            {S1, Gone ++ ?X:broadcast_presence(S1, Renamed, {<<>>, [], []}, [])}
    end.

%%% Messages

%% @doc A message from the real JID From to the room or room/nick.
-spec message(#jid{}, #jid{}, #xmlel{}, integer(), #muc{}) -> {#muc{}, [out()]}.
message(From, To, El, Now, S) ->
    Mine = maps:get(From, S#muc.nicks, undefined),
    Type = throng_stanza:type(El),
    case {To#jid.resource, Type} of
        {_, <<"error">>} when Mine =/= undefined -> ?X:remove(S, Mine, {[], []}, [333]);
        {_, <<"error">>} -> {S, []};
        {<<>>, <<"groupchat">>} -> groupchat(Mine, From, To, El, Now, S);
        {<<>>, _} -> to_room(Mine, From, To, El, S);
        {_, <<"groupchat">>} -> {S, ?X:error(From, To, El, 'bad-request')};
        {Nick, _} -> private(Mine, From, Nick, To, El, S)
    end.

groupchat(undefined, From, To, El, _Now, S) ->
    {S, ?X:error(From, To, El, 'not-acceptable')};
groupchat(Nick, From, To, El0, Now, S) ->
    #occ{role = Role, oid = Oid} = maps:get(Nick, S#muc.occs),
    El1 = throng_muc_mam:take_claims(?X:strip(throng_stanza:strip_from_to(El0)), S#muc.jid),
    El = El1#xmlel{children = El1#xmlel.children ++ [?X:occupant_id(Oid)]},
    Subject = throng_xml:subel(El, <<"subject">>),
    HasBody = throng_xml:subel(El, <<"body">>) =/= undefined,
    C = S#muc.config,
    Speaks = throng_muc_rules:may_speak(Role),
    if
        not Speaks ->
            {S, ?X:error(From, To, El0, forbidden)};
        Subject =/= undefined, not HasBody ->
            case Role =:= moderator orelse map_get(allow_subject_change, C) of
                true ->
                    S1 = S#muc{subject = {throng_xml:cdata(Subject), Nick}},
                    {S1, fan_out(S1, Nick, El)};
                false ->
                    {S, ?X:error(From, To, El0, forbidden)}
            end;
        HasBody, map_get(history_length, C) > 0 ->
            %% Only what the history keeps is copied off the buffer it
            %% was read from.
            Copy = throng_stanza:copy(throng_muc_mam:archive(S, Nick, El)),
            H = throng_muc_history:add(Now, throng_xml:set_attr(<<"nick">>, Nick, Copy),
                                       S#muc.history),
            {S#muc{history = H}, fan_out(S, Nick, Copy)};
        true ->
            {S, fan_out(S, Nick, throng_muc_mam:archive(S, Nick, El))}
    end.

fan_out(S, Nick, El) ->
    From = ?X:occ_jid(S, Nick),
    [{From, O#occ.jid, El} || O <- maps:values(S#muc.occs)].

%% §7.5: from an occupant to another, through the room, marked as MUC.
private(undefined, From, _Nick, To, El, S) ->
    {S, ?X:error(From, To, El, 'not-acceptable')};
private(Mine, From, Nick, To, El0, S) ->
    case maps:find(Nick, S#muc.occs) of
        error ->
            {S, ?X:error(From, To, El0, 'item-not-found')};
        {ok, #occ{jid = Target}} ->
            #occ{oid = Oid} = maps:get(Mine, S#muc.occs),
            El = ?X:strip(throng_stanza:strip_from_to(El0)),
            {S, [{?X:occ_jid(S, Mine), Target,
                  El#xmlel{children = El#xmlel.children ++
                               [?X:muc_user([]), ?X:occupant_id(Oid)]}}]}
    end.

%% A message to the room's bare JID that is not groupchat: invitations and
%% declines (§7.8.2, §7.9); anything else is not for the room.
to_room(Mine, From, To, El, S) ->
    case throng_xml:subel(El, <<"x">>, ?NS_MUC_USER) of
        undefined ->
            {S, ?X:error(From, To, El, 'bad-request')};
        X ->
            Invites = [I || #xmlel{name = <<"invite">>} = I <- throng_xml:subels(X)],
            Declines = [D || #xmlel{name = <<"decline">>} = D <- throng_xml:subels(X)],
            case {Invites, Declines} of
                {[_ | _], _} -> invite(Mine, From, To, El, Invites, S);
                {[], [D | _]} -> {S, decline(From, D, S)};
                {[], []} -> {S, ?X:error(From, To, El, 'bad-request')}
            end
    end.

invite(undefined, From, To, El, _Invites, S) ->
    {S, ?X:error(From, To, El, 'not-acceptable')};
invite(Nick, From, To, El, Invites, #muc{config = C} = S) ->
    #occ{role = Role} = maps:get(Nick, S#muc.occs),
    Aff = ?X:affiliation(S, From),
    Admin = throng_muc_rules:rank(Aff) >= throng_muc_rules:rank(admin),
    Targets = [{J, I} || I <- Invites, {ok, J} <- [parse(throng_xml:attr(<<"to">>, I))]],
    if
        Targets =:= [] -> {S, ?X:error(From, To, El, 'jid-malformed')};
        not (Role =:= moderator orelse map_get(allow_invites, C)) ->
            {S, ?X:error(From, To, El, forbidden)};
        map_get(members_only, C), not Admin, not map_get(allow_invites, C) ->
            {S, ?X:error(From, To, El, forbidden)};
        true ->
            %% §7.8.2: in a members-only room the invitee becomes a member.
            Affs = case map_get(members_only, C) of
                       true ->
                           lists:foldl(fun({J, _}, A) ->
                                               K = ?X:bare(J),
                                               case maps:get(K, A, none) of
                                                   none -> A#{K => member};
                                                   _ -> A
                                               end
                                       end, S#muc.affs, Targets);
                       false -> S#muc.affs
                   end,
            Inviter = ?X:bare(From),
            Password = [#xmlel{name = <<"password">>, children = [{xmlcdata, map_get(password, C)}]}
                        || map_get(password_protected, C)],
            Out = [{S#muc.jid, J,
                    #xmlel{name = <<"message">>,
                           children = [?X:muc_user([#xmlel{name = <<"invite">>,
                                                           attrs = [{<<"from">>, Inviter}],
                                                           children = reason(I)} | Password])]}}
                   || {J, I} <- Targets],
            {S#muc{affs = Affs}, Out}
    end.

decline(From, D, S) ->
    case parse(throng_xml:attr(<<"to">>, D)) of
        {ok, Inviter} ->
            [{S#muc.jid, Inviter,
              #xmlel{name = <<"message">>,
                     children = [?X:muc_user([#xmlel{name = <<"decline">>,
                                                     attrs = [{<<"from">>, ?X:bare(From)}],
                                                     children = reason(D)}])]}}];
        error -> []
    end.

reason(El) ->
    [R || #xmlel{name = <<"reason">>} = R <- throng_xml:subels(El)].

parse(undefined) -> error;
parse(Bin) -> throng_jid:parse(Bin).
