%% @doc XEP-0045 privileges as pure functions: the default role of an
%% affiliation (§5.1), who may change whose role (§5.1.2, §8, §9.6, §9.7)
%% and whose affiliation (§5.2.2, §9, §10), and who may read which list.
%% The room ({@link throng_muc_admin}) asks; nothing here has state.
%%
%% Errors follow the XEP: an actor without the privilege at all gets
%% `forbidden'; an actor with the privilege aimed at someone of an
%% affiliation it may not touch (kicking an admin, an admin banning an
%% owner) gets `not-allowed'; removing the last owner gets `conflict'.
-module(throng_muc_rules).

-export([rank/1, default_role/2, role_change/3, affiliation_change/4,
         may_read_affiliations/2, may_read_roles/1, affiliation/1, role/1,
         may_speak/1]).

-type affiliation() :: owner | admin | member | none | outcast.
-type role() :: moderator | participant | visitor | none.
%% Who acts or is acted on: an affiliation and (for occupants) a role.
-type who() :: {affiliation(), role()}.
-type refusal() :: forbidden | 'not-allowed' | conflict.
-export_type([affiliation/0, role/0, who/0, refusal/0]).

%% @doc Affiliations ordered by privilege.
-spec rank(affiliation()) -> 0..4.
rank(owner) -> 4;
rank(admin) -> 3;
rank(member) -> 2;
rank(none) -> 1;
rank(outcast) -> 0.

%% @doc The role an occupant gets on entering (§5.1: owners and admins
%% moderate; in a moderated room an unaffiliated occupant is a visitor).
-spec default_role(affiliation(), Moderated :: boolean()) -> role().
default_role(owner, _) -> moderator;
default_role(admin, _) -> moderator;
default_role(member, _) -> participant;
default_role(none, true) -> visitor;
default_role(none, false) -> participant;
default_role(outcast, _) -> none.

%% @doc Whether a role may send groupchat messages (§5.1.1: visitors may
%% not in a moderated room; the room gives them that role only there).
-spec may_speak(role()) -> boolean().
may_speak(moderator) -> true;
may_speak(participant) -> true;
may_speak(_) -> false.

%% @doc May Actor set Target's role to New? Kick (none) and voice
%% (visitor, participant) need a moderator; granting or revoking the
%% moderator role needs an admin or owner (§9.6, §9.7). Nobody may kick or
%% silence an admin or owner, nor anyone of a higher affiliation than
%% their own (§8.2, §8.4).
-spec role_change(who(), who(), role()) -> ok | {error, refusal()}.
role_change({ActorAff, ActorRole}, {TargetAff, TargetRole}, New) ->
    Admin = rank(ActorAff) >= rank(admin),
    %% §9.6, §9.7: moderator is granted and revoked by admins and owners;
    %% §8.2-§8.4: kicks and voice by moderators.
    Allowed = case New =:= moderator orelse (TargetRole =:= moderator andalso New =/= none) of
                  true -> Admin;
                  false -> ActorRole =:= moderator
              end,
    %% Owners and admins keep their role; nobody changes the role of one
    %% whose affiliation is above theirs.
    Protected = TargetAff =:= owner orelse TargetAff =:= admin
        orelse rank(TargetAff) > rank(ActorAff),
    if
        ActorRole =/= moderator, not Admin -> {error, forbidden};
        New =:= TargetRole, Allowed -> ok;
        New =:= TargetRole -> {error, forbidden};
        Protected -> {error, 'not-allowed'};
        not Allowed -> {error, forbidden};
        true -> ok
    end.

-spec affiliation_change(affiliation(), affiliation(), affiliation(), non_neg_integer()) ->
    ok | {error, refusal()}.
affiliation_change(owner, owner, New, Owners) when New =/= owner, Owners =< 1 ->
    {error, conflict};
affiliation_change(owner, _Old, _New, _Owners) ->
    ok;
affiliation_change(admin, _Old, New, _Owners) when New =:= owner; New =:= admin ->
    {error, forbidden};
affiliation_change(admin, Old, _New, _Owners) when Old =:= owner; Old =:= admin ->
    {error, 'not-allowed'};
affiliation_change(admin, _Old, _New, _Owners) ->
    ok;
affiliation_change(_Actor, _Old, _New, _Owners) ->
    {error, forbidden}.

%% @doc The member and outcast lists are for admins and owners (§9.3,
%% §9.5), the admin and owner lists for owners (§10.5, §10.8).
-spec may_read_affiliations(affiliation(), affiliation()) -> boolean().
may_read_affiliations(Actor, List) when List =:= owner; List =:= admin ->
    Actor =:= owner;
may_read_affiliations(Actor, _List) ->
    rank(Actor) >= rank(admin).

%% @doc The moderator and voice lists are for moderators (§8.5, §9.8).
-spec may_read_roles(role()) -> boolean().
may_read_roles(Role) ->
    Role =:= moderator.

%% @doc An affiliation named in a stanza, or error.
-spec affiliation(binary() | undefined) -> affiliation() | error.
affiliation(<<"owner">>) -> owner;
affiliation(<<"admin">>) -> admin;
affiliation(<<"member">>) -> member;
affiliation(<<"none">>) -> none;
affiliation(<<"outcast">>) -> outcast;
affiliation(_) -> error.

%% @doc A role named in a stanza, or error.
-spec role(binary() | undefined) -> role() | error.
role(<<"moderator">>) -> moderator;
role(<<"participant">>) -> participant;
role(<<"visitor">>) -> visitor;
role(<<"none">>) -> none;
role(_) -> error.
