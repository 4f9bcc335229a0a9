%% @doc A room's IQs: service discovery of the room (§6.4), the moderator
%% and admin use cases of `muc#admin' (§8, §9: kick, voice, ban, member
%% and moderator lists), the owner use cases of `muc#owner' (§10:
%% configuration, instant room, destroy), XEP-0410 self-ping and IQs
%% between occupants. Pure, like {@link throng_muc_logic}: the state and a
%% stanza in; `destroyed' when the room is to go.
-module(throng_muc_admin).

-include("throng_muc.hrl").

-export([iq/5]).

-define(X, throng_muc_xml).
-define(R, throng_muc_rules).

-type out() :: throng_muc_xml:out().

%% @doc An IQ from the real JID From to the room or room/nick.
-spec iq(#jid{}, #jid{}, #xmlel{}, integer(), #muc{}) -> {ok | destroyed, #muc{}, [out()]}.
iq(From, #jid{resource = <<>>} = To, El, _Now, S) ->
    Type = throng_stanza:type(El),
    Payload = case throng_xml:subels(El) of
                  [P] -> P;
                  _ -> undefined
              end,
    NS = case Payload of
             undefined -> undefined;
             _ -> throng_xml:ns(Payload)
         end,
    case {Type, NS} of
        {T, _} when T =:= <<"result">>; T =:= <<"error">> -> {ok, S, []};
        {_, undefined} -> {ok, S, ?X:error(From, To, El, 'bad-request')};
        {<<"get">>, ?NS_DISCO_INFO} -> {ok, S, [?X:result(From, To, El, [info(S, Payload)])]};
        {<<"get">>, ?NS_DISCO_ITEMS} ->
            {ok, S, [?X:result(From, To, El, [query(?NS_DISCO_ITEMS, occupant_items(From, S))])]};
        {<<"get">>, ?NS_PING} -> {ok, S, [?X:result(From, To, El, [])]};
        {<<"get">>, ?NS_MUC_ADMIN} -> {ok, S, admin_get(From, To, El, Payload, S)};
        {<<"set">>, ?NS_MUC_ADMIN} -> admin_set(From, To, El, Payload, S);
        {<<"get">>, ?NS_MUC_OWNER} -> {ok, S, owner_get(From, To, El, S)};
        {<<"set">>, ?NS_MUC_OWNER} -> owner_set(From, To, El, Payload, S);
        _ -> {ok, S, ?X:error(From, To, El, 'service-unavailable')}
    end;
iq(From, #jid{resource = Nick} = To, El, _Now, S) ->
    Mine = maps:get(From, S#muc.nicks, undefined),
    IsPing = throng_xml:subel(El, <<"ping">>, ?NS_PING) =/= undefined,
    Type = throng_stanza:type(El),
    IsDisco = lists:any(fun(P) -> lists:member(throng_xml:ns(P), [?NS_DISCO_INFO, ?NS_DISCO_ITEMS])
                        end, throng_xml:subels(El)),
    case maps:find(Nick, S#muc.occs) of
        %% §6.6: a non-occupant may not query an occupant.
        _ when Mine =:= undefined, IsDisco -> {ok, S, ?X:error(From, To, El, 'bad-request')};
        %% XEP-0410 §3: a non-occupant learns it is not in the room.
        _ when Mine =:= undefined -> {ok, S, ?X:error(From, To, El, 'not-acceptable')};
        %% XEP-0410 §3: the room answers a self-ping.
        {ok, _} when Nick =:= Mine, IsPing, Type =:= <<"get">> ->
            {ok, S, [?X:result(From, To, El, [])]};
        error -> {ok, S, ?X:error(From, To, El, 'item-not-found')};
        %% §7.5 (IQs): from one occupant to another, the sender's room
        %% JID as from; the answer comes back the same way.
        {ok, #occ{jid = Target}} ->
            {ok, S, [{?X:occ_jid(S, Mine), Target, throng_stanza:strip_from_to(El)}]}
    end.

query(NS, Children) ->
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, NS}], children = Children}.

%% §6.5: the room's items are its occupants (their room JIDs), for an
%% occupant, and for anyone when the room is public and open to view (not
%% locked); nobody else learns who is there.
occupant_items(From, #muc{config = C} = S) ->
    case maps:is_key(From, S#muc.nicks)
        orelse (map_get(public, C) andalso not S#muc.locked) of
        true ->
            [#xmlel{name = <<"item">>,
                    attrs = [{<<"jid">>, throng_jid:to_binary(?X:occ_jid(S, Nick))},
                             {<<"name">>, Nick}]}
             || Nick <- lists:sort(maps:keys(S#muc.occs))];
        false ->
            []
    end.

%%% Service discovery (§6.4)

info(#muc{config = C, subject = {Subject, _}} = S, Payload) ->
    case throng_xml:attr(<<"node">>, Payload) of
        undefined ->
            Name = case map_get(title, C) of
                       <<>> -> S#muc.jid#jid.user;
                       T -> T
                   end,
            query(?NS_DISCO_INFO,
                  [#xmlel{name = <<"identity">>,
                          attrs = [{<<"category">>, <<"conference">>}, {<<"type">>, <<"text">>},
                                   {<<"name">>, Name}]}] ++
                      [#xmlel{name = <<"feature">>, attrs = [{<<"var">>, F}]}
                       || F <- throng_muc_config:features(C)] ++
                      [throng_muc_config:info_form(C, map_size(S#muc.occs), Subject)]);
        _ ->
            query(?NS_DISCO_INFO, [])
    end.

%%% muc#admin

%% §8.5, §9.3, §9.5, §9.8, §10.5, §10.8: the list of one affiliation or
%% one role.
admin_get(From, To, El, Payload, S) ->
    Items = [I || #xmlel{name = <<"item">>} = I <- throng_xml:subels(Payload)],
    {Aff, Role, _} = actor(From, S),
    case Items of
        [I] ->
            case {?R:affiliation(throng_xml:attr(<<"affiliation">>, I)),
                  ?R:role(throng_xml:attr(<<"role">>, I))} of
                {error, error} -> ?X:error(From, To, El, 'bad-request');
                {error, R} ->
                    case ?R:may_read_roles(Role) of
                        true ->
                            [?X:result(From, To, El,
                                    [query(?NS_MUC_ADMIN,
                                           [item([{<<"nick">>, O#occ.nick},
                                                  {<<"role">>, atom_to_binary(R)},
                                                  {<<"affiliation">>,
                                                   atom_to_binary(?X:affiliation(S, O#occ.jid))},
                                                  {<<"jid">>, throng_jid:to_binary(O#occ.jid)}])
                                            || O <- maps:values(S#muc.occs), O#occ.role =:= R])])];
                        false -> ?X:error(From, To, El, forbidden)
                    end;
                {A, _} ->
                    case ?R:may_read_affiliations(Aff, A) of
                        true ->
                            [?X:result(From, To, El,
                                    [query(?NS_MUC_ADMIN,
                                           [item([{<<"affiliation">>, atom_to_binary(A)},
                                                  {<<"jid">>, J}])
                                            || {J, A1} <- lists:sort(maps:to_list(S#muc.affs)),
                                               A1 =:= A])])];
                        false -> ?X:error(From, To, El, forbidden)
                    end
            end;
        _ -> ?X:error(From, To, El, 'bad-request')
    end.

item(Attrs) -> #xmlel{name = <<"item">>, attrs = Attrs}.

%% §8, §9: every item is applied, or none (the first refusal answers).
admin_set(From, To, El, Payload, S0) ->
    Items = [I || #xmlel{name = <<"item">>} = I <- throng_xml:subels(Payload)],
    Actor = actor(From, S0),
    Self = ?X:bare(From),
    Apply = fun(_I, {error, _} = E) -> E;
               (I, {ok, S, Out}) ->
                    case admin_item(Actor, Self, I, S) of
                        {ok, S1, Out1} -> {ok, S1, [Out1 | Out]};
                        {error, _} = E -> E
                    end
            end,
    case Items of
        [] -> {ok, S0, ?X:error(From, To, El, 'bad-request')};
        _ ->
            case lists:foldl(Apply, {ok, S0, []}, Items) of
                {ok, S, Outs} ->
                    {ok, S, [?X:result(From, To, El, []) | lists:append(lists:reverse(Outs))]};
                {error, Cond} -> {ok, S0, ?X:error(From, To, El, Cond)}
            end
    end.

%% The acting real JID's affiliation, role and nick (none, none and <<>>
%% for a non-occupant).
actor(From, S) ->
    case maps:find(From, S#muc.nicks) of
        {ok, Nick} -> {?X:affiliation(S, From), (maps:get(Nick, S#muc.occs))#occ.role, Nick};
        error -> {?X:affiliation(S, From), none, <<>>}
    end.

admin_item(Actor, Self, I, S) ->
    case {throng_xml:attr(<<"role">>, I), throng_xml:attr(<<"affiliation">>, I)} of
        {undefined, undefined} -> {error, 'bad-request'};
        {R, undefined} -> set_role(Actor, I, ?R:role(R), S);
        %% §9.1: an admin or owner may not ban itself.
        {_, <<"outcast">>} ->
            case parse_bare(throng_xml:attr(<<"jid">>, I)) of
                {ok, J} ->
                    case throng_jid:to_binary(J) of
                        Self -> {error, conflict};
                        _ -> set_affiliation(Actor, I, outcast, S)
                    end;
                error -> set_affiliation(Actor, I, outcast, S)
            end;
        {_, A} -> set_affiliation(Actor, I, ?R:affiliation(A), S)
    end.

set_role(_Actor, _I, error, _S) ->
    {error, 'bad-request'};
set_role({AAff, ARole, ANick}, I, New, S) ->
    Nick = throng_xml:attr(<<"nick">>, I),
    case maps:find(Nick, S#muc.occs) of
        error -> {error, 'item-not-found'};
        {ok, #occ{jid = J, role = Role} = Occ} ->
            case ?R:role_change({AAff, ARole}, {?X:affiliation(S, J), Role}, New) of
                {error, _} = E -> E;
                ok when New =:= none ->
                    %% §8.2: kicked, 307.
                    {S1, Out} = ?X:remove(S, Nick, item_extra(ANick, I), [307]),
                    {ok, S1, Out};
                ok ->
                    %% §8.3, §8.4, §9.6, §9.7: voice and moderator.
                    Occ1 = Occ#occ{role = New},
                    S1 = S#muc{occs = (S#muc.occs)#{Nick => Occ1}},
                    {Attrs, Children} = item_extra(ANick, I),
                    {ok, S1, ?X:broadcast_presence(S1, Occ1, {<<>>, Attrs, Children}, [])}
            end
    end.

%% The actor and reason a kick or ban is reported with (§8.2, §9.1).
item_extra(ANick, I) ->
    {[], [#xmlel{name = <<"actor">>, attrs = [{<<"nick">>, ANick}]} || ANick =/= <<>>] ++
         [R || #xmlel{name = <<"reason">>} = R <- throng_xml:subels(I)]}.

set_affiliation(_Actor, _I, error, _S) ->
    {error, 'bad-request'};
set_affiliation({AAff, _ARole, ANick}, I, New, S) ->
    case parse_bare(throng_xml:attr(<<"jid">>, I)) of
        error -> {error, 'jid-malformed'};
        {ok, J} ->
            Key = throng_jid:to_binary(J),
            Old = maps:get(Key, S#muc.affs, none),
            case ?R:affiliation_change(AAff, Old, New, ?X:owners(S)) of
                {error, _} = E -> E;
                ok ->
                    Affs = case New of
                               none -> maps:remove(Key, S#muc.affs);
                               _ -> (S#muc.affs)#{Key => New}
                           end,
                    affected(S#muc{affs = Affs}, J, New, item_extra(ANick, I))
            end
    end.

%% The occupants whose real bare JID got a new affiliation: banned (301),
%% removed from a members-only room (321), or given the role it implies.
affected(S, Bare, New, Extra) ->
    Mine = [O || O <- maps:values(S#muc.occs), throng_jid:bare(O#occ.jid) =:= Bare],
    MembersOnly = map_get(members_only, S#muc.config),
    Moderated = map_get(moderated, S#muc.config),
    {S2, Out} =
        fold_out(
          fun(#occ{nick = Nick} = O, S1) ->
                  if New =:= outcast ->
                          ?X:remove(S1, Nick, Extra, [301]);
                     MembersOnly, New =:= none ->
                          ?X:remove(S1, Nick, Extra, [321]);
                     true ->
                          O1 = O#occ{role = ?R:default_role(New, Moderated)},
                          S3 = S1#muc{occs = (S1#muc.occs)#{Nick => O1}},
                          {Attrs, Children} = Extra,
                          {S3, ?X:broadcast_presence(S3, O1, {<<>>, Attrs, Children}, [])}
                  end
          end, S, Mine),
    {ok, S2, Out}.

%% Folds Fun(Elem, S) -> {S1, Out1} over the list: the last state and
%% every Out1 in order (collected in reverse, appended once).
-spec fold_out(fun((T, #muc{}) -> {#muc{}, [out()]}), #muc{}, [T]) -> {#muc{}, [out()]}.
fold_out(Fun, S0, List) ->
    {S, Outs} = lists:foldl(fun(E, {S1, Acc}) ->
                                    {S2, Out1} = Fun(E, S1),
                                    {S2, [Out1 | Acc]}
                            end, {S0, []}, List),
    {S, lists:append(lists:reverse(Outs))}.

parse_bare(undefined) -> error;
parse_bare(Bin) ->
    case throng_jid:parse(Bin) of
        {ok, J} -> {ok, throng_jid:bare(J)};
        error -> error
    end.

%%% muc#owner

owner_get(From, To, El, S) ->
    case ?X:affiliation(S, From) of
        owner ->
            [?X:result(From, To, El,
                       [query(?NS_MUC_OWNER, [throng_muc_config:form(S#muc.config,
                                                                     S#muc.affs)])])];
        _ -> ?X:error(From, To, El, forbidden)
    end.

owner_set(From, To, El, Payload, S) ->
    case ?X:affiliation(S, From) of
        owner ->
            case {throng_xml:subel(Payload, <<"destroy">>), throng_xml:subel(Payload, <<"x">>, ?NS_XDATA)} of
                {#xmlel{} = D, _} -> destroy(From, To, El, D, S);
                {undefined, #xmlel{} = X} -> configure(From, To, El, Payload, X, S);
                _ -> {ok, S, ?X:error(From, To, El, 'bad-request')}
            end;
        _ ->
            {ok, S, ?X:error(From, To, El, forbidden)}
    end.

%% §10.9: every occupant gets unavailable presence with <destroy/>.
destroy(From, To, El, D, S) ->
    Destroy = #xmlel{name = <<"destroy">>,
                     attrs = [A || {<<"jid">>, _} = A <- D#xmlel.attrs],
                     %% §10.9: the reason, and the alternate venue's password.
                     children = [C || #xmlel{name = N} = C <- throng_xml:subels(D),
                                      N =:= <<"reason">> orelse N =:= <<"password">>]},
    Occs = maps:values(S#muc.occs),
    Gone = fun(#occ{oid = Oid}, Self) ->
                   #xmlel{name = <<"presence">>, attrs = [{<<"type">>, <<"unavailable">>}],
                          children = [?X:muc_user(
                                         [#xmlel{name = <<"item">>,
                                                 attrs = [{<<"affiliation">>, <<"none">>},
                                                          {<<"role">>, <<"none">>}]},
                                          Destroy] ++
                                             [?X:status(110) || Self]),
                                      ?X:occupant_id(Oid)]}
           end,
    %% Two versions of each occupant's presence: its own (110) and the
    %% others'.
    Out = lists:append(
            [begin
                 Own = Gone(O, true),
                 Others = Gone(O, false),
                 [{?X:occ_jid(S, Nick), V#occ.jid,
                   case V#occ.nick of
                       Nick -> Own;
                       _ -> Others
                   end} || V <- Occs]
             end || #occ{nick = Nick} = O <- Occs]),
    %% The occupants' presence first, then the owner's result (§10.9's
    %% order): a client that sees the result knows it is out of the room.
    {destroyed, S#muc{occs = #{}, nicks = #{}}, Out ++ [?X:result(From, To, El, [])]}.

%% §10.1.2 (instant room: an empty submit), §10.1.3 and §10.2: a
%% submitted form configures and unlocks the room; cancelling the first
%% configuration destroys the new room (§10.1.3).
configure(From, To, El, Payload, X, S) ->
    case {throng_xml:attr(<<"type">>, X), throng_xdata:parse(Payload)} of
        {<<"cancel">>, _} when S#muc.locked ->
            %% The owner is told it is out, as for any destroyed room.
            destroy(From, To, El, #xmlel{name = <<"destroy">>}, S);
        {<<"cancel">>, _} ->
            {ok, S, [?X:result(From, To, El, [])]};
        {_, {ok, Values}} ->
            Refuse = fun(Cond, Text) ->
                             {ok, S, [{To, From, throng_stanza:error_reply(
                                                   throng_stanza:strip_from_to(El), Cond, Text)}]}
                     end,
            case {throng_muc_config:parse(Values, S#muc.config, S#muc.limits),
                  throng_muc_config:affiliation_lists(Values)} of
                {{ok, C}, {ok, Lists}} ->
                    case listed_affiliations(Lists, S#muc.affs) of
                        {ok, Changes} -> configured(From, To, El, C, Changes, S);
                        %% §10.5: a room keeps an owner.
                        none_left -> Refuse(conflict, <<"a room needs an owner">>)
                    end;
                {{error, Text}, _} -> Refuse('not-acceptable', Text);
                {_, {error, Text}} -> Refuse('not-acceptable', Text)
            end;
        _ ->
            {ok, S, ?X:error(From, To, El, 'bad-request')}
    end.

%% The affiliations that the form's owner and admin lists change, as
%% {Bare, New}: one listed gets the list's affiliation, one that had it and
%% is not listed has none; the owners' list is applied last (a JID in both
%% is an owner). none_left when no owner would be left.
listed_affiliations(#{owner := Owners, admin := Admins}, Affs0) ->
    Set = fun(unchanged, _Aff, Affs) -> Affs;
             (List, Aff, Affs) ->
                  Kept = maps:filter(fun(J, A) -> A =/= Aff orelse lists:member(J, List) end, Affs),
                  lists:foldl(fun(J, M) -> M#{J => Aff} end, Kept, List)
          end,
    Affs = Set(Owners, owner, Set(Admins, admin, Affs0)),
    case lists:member(owner, maps:values(Affs)) of
        false -> none_left;
        true ->
            {ok, [{J, maps:get(J, Affs, none)}
                  || J <- lists:usort(maps:keys(Affs0) ++ maps:keys(Affs)),
                     maps:get(J, Affs0, none) =/= maps:get(J, Affs, none)]}
    end.

configured(From, To, El, C, Changes, S0) ->
    {ok, S1, Out} = configured(From, To, El, C, S0),
    {S, Affected} =
        fold_out(fun({Bare, New}, SA) ->
                         Affs = case New of
                                    none -> maps:remove(Bare, SA#muc.affs);
                                    _ -> (SA#muc.affs)#{Bare => New}
                                end,
                         {ok, J} = throng_jid:parse(Bare),
                         {ok, SB, O} = affected(SA#muc{affs = Affs}, J, New, {[], []}),
                         {SB, O}
                 end, S1, Changes),
    {ok, S, Out ++ Affected}.

configured(From, To, El, C, #muc{config = Old} = S0) ->
    S = S0#muc{config = C, locked = false,
               history = throng_muc_history:resize(map_get(history_length, C), S0#muc.history)},
    %% §10.2.1: occupants learn of the change: 104, and 172/173 when the
    %% room becomes non-anonymous or semi-anonymous.
    Codes = [104] ++
        case {map_get(whois, Old), map_get(whois, C)} of
            {moderators, anyone} -> [172];
            {anyone, moderators} -> [173];
            _ -> []
        end,
    Changed = #xmlel{name = <<"message">>, attrs = [{<<"type">>, <<"groupchat">>}],
                     children = [?X:muc_user([?X:status(Code) || Code <- Codes])]},
    Notice = [{S#muc.jid, O#occ.jid, Changed}
              || C =/= Old, not S0#muc.locked, O <- maps:values(S#muc.occs)],
    %% §9.4 / §10.2: becoming members-only removes those without an
    %% affiliation (322).
    {S1, Removed} =
        case map_get(members_only, C) andalso not map_get(members_only, Old) of
            false -> {S, []};
            true ->
                fold_out(fun(#occ{nick = N, jid = J}, SA) ->
                                 case ?X:affiliation(SA, J) of
                                     none -> ?X:remove(SA, N, {[], []}, [322]);
                                     _ -> {SA, []}
                                 end
                         end, S, maps:values(S#muc.occs))
        end,
    {ok, S1, [?X:result(From, To, El, []) | Notice ++ Removed]}.
