%% @doc What a room sends, built from its state: occupant presence as each
%% occupant sees it (§7.2.3; the real JID only where the room's whois
%% allows), status codes, occupant ids (XEP-0421), errors, and removing an
%% occupant with the unavailable presence that says why (leave, kick, ban,
%% destroy). Pure: every function returns the stanzas to route as
%% `{From, To, El}' and leaves the routing to the room's process.
-module(throng_muc_xml).

-include("throng_muc.hrl").

-export([occ_jid/2, bare/1, affiliation/2, presence/5, presence_to/5, broadcast_presence/4,
         remove/4, result/4, error/4, muc_user/1, status/1, occupant_id/1, strip/1, owners/1,
         occupant_id_of/2]).

-type out() :: {#jid{}, #jid{}, #xmlel{}}.
-export_type([out/0]).

%% @doc The occupant JID room/nick.
-spec occ_jid(#muc{}, binary()) -> #jid{}.
occ_jid(#muc{jid = R}, Nick) -> R#jid{resource = Nick}.

%% @doc A JID's bare JID as a binary (how affiliations are keyed).
-spec bare(#jid{}) -> binary().
bare(JID) -> throng_jid:to_binary(throng_jid:bare(JID)).

%% @doc The affiliation of a real JID (any resource) with the room.
-spec affiliation(#muc{}, #jid{}) -> throng_muc_rules:affiliation().
affiliation(#muc{affs = Affs}, JID) ->
    maps:get(bare(JID), Affs, none).

%% @doc The number of owners.
-spec owners(#muc{}) -> non_neg_integer().
owners(#muc{affs = Affs}) ->
    length([O || O <- maps:values(Affs), O =:= owner]).

%% @doc Occ's presence as Viewer sees it: type (`<<>>' available or
%% `<<"unavailable">>'), item attributes and children beyond affiliation,
%% role and jid (nick, actor, reason), status codes (110 is added when the
%% viewer is the occupant itself, 100 with it in a non-anonymous room).
-spec presence(#muc{}, #occ{}, #occ{}, {binary(), [{binary(), binary()}], [#xmlel{}]},
               [integer()]) -> #xmlel{}.
presence(S, #occ{nick = Nick} = Occ, #occ{nick = VNick} = Viewer, Item, Codes) ->
    Self = Nick =:= VNick,
    build(S, Occ, Self, Self orelse shows_jid(S, Viewer), Item, Codes).

%% Whether Viewer, not the occupant itself, sees the real JIDs of others.
shows_jid(S, #occ{role = VRole}) ->
    maps:get(whois, S#muc.config) =:= anyone orelse VRole =:= moderator.

%% Occ's presence as the occupant itself (Self) or another sees it, with
%% or without the real JID.
build(S, #occ{jid = J} = Occ, Self, ShowJid, {Type, ItemAttrs, ItemChildren}, Codes0) ->
    Item = #xmlel{name = <<"item">>,
                  attrs = [{<<"affiliation">>, atom_to_binary(affiliation(S, J))},
                           {<<"role">>, atom_to_binary(Occ#occ.role)}] ++
                      [{<<"jid">>, throng_jid:to_binary(J)} || ShowJid] ++ ItemAttrs,
                  children = ItemChildren},
    Codes = case Self of
                true -> [110 | [100 || maps:get(whois, S#muc.config) =:= anyone]] ++ Codes0;
                false -> Codes0
            end,
    Body = case Type of
               <<"unavailable">> -> [C || #xmlel{name = <<"status">>} = C <- subels(Occ#occ.pres)];
               _ -> subels(Occ#occ.pres)
           end,
    #xmlel{name = <<"presence">>,
           attrs = [{<<"type">>, Type} || Type =/= <<>>],
           children = Body ++ [user_x([Item | [status(C) || C <- lists:usort(Codes)]], []),
                               occupant_id(Occ#occ.oid)]}.

subels(#xmlel{children = Ch}) -> [C || #xmlel{} = C <- Ch].

%% @doc Occ's presence to every occupant (Occ itself included), each as it
%% sees it; Codes for everyone, 110 added for Occ.
-spec broadcast_presence(#muc{}, #occ{}, {binary(), list(), list()}, [integer()]) -> [out()].
broadcast_presence(S, Occ, Item, Codes) ->
    presence_to(S, Occ, Item, Codes, maps:values(S#muc.occs)).

%% @doc Occ's presence to each of Viewers, in their order, each getting
%% what {@link presence/5} gives it. There are only three versions (the
%% occupant's own, and the others' with or without the real JID): each is
%% built once, not once per viewer.
-spec presence_to(#muc{}, #occ{}, {binary(), list(), list()}, [integer()], [#occ{}]) -> [out()].
presence_to(S, #occ{nick = Nick} = Occ, Item, Codes, Viewers) ->
    From = occ_jid(S, Nick),
    Shown = build(S, Occ, false, true, Item, Codes),
    Hidden = case maps:get(whois, S#muc.config) of
                 anyone -> Shown;
                 _ -> build(S, Occ, false, false, Item, Codes)
             end,
    [{From, V#occ.jid,
      case V of
          %% Nicks are unique: the occupant's own is built at most once.
          #occ{nick = Nick} -> build(S, Occ, true, true, Item, Codes);
          _ ->
              case shows_jid(S, V) of
                  true -> Shown;
                  false -> Hidden
              end
      end} || V <- Viewers].

%% @doc Takes the occupant with Nick out of the room; everyone (the
%% occupant too) gets its unavailable presence with role none, Item's
%% extra attributes and children, and Codes.
-spec remove(#muc{}, binary(), {list(), list()}, [integer()]) -> {#muc{}, [out()]}.
remove(S, Nick, {Attrs, Children}, Codes) ->
    #occ{jid = J} = Occ0 = maps:get(Nick, S#muc.occs),
    Occ = Occ0#occ{role = none},
    Out = broadcast_presence(S#muc{occs = (S#muc.occs)#{Nick => Occ}}, Occ,
                             {<<"unavailable">>, Attrs, Children}, Codes),
    {S#muc{occs = maps:remove(Nick, S#muc.occs), nicks = maps:remove(J, S#muc.nicks)}, Out}.

%% @doc The result of an IQ from From to To, with Children.
-spec result(#jid{}, #jid{}, #xmlel{}, [#xmlel{}]) -> out().
result(From, To, El, Children) ->
    {To, From, throng_stanza:iq_result(throng_stanza:strip_from_to(El), Children)}.

%% @doc The error answer to a stanza from From to To.
-spec error(#jid{}, #jid{}, #xmlel{}, throng_stanza:condition()) -> [out()].
error(From, To, El, Cond) ->
    case throng_stanza:is_error(El) of
        true -> [];
        false -> [{To, From, throng_stanza:error_reply(throng_stanza:strip_from_to(El), Cond)}]
    end.

%% @doc `<x xmlns="http://jabber.org/protocol/muc#user"/>' with Children.
-spec muc_user([#xmlel{}]) -> #xmlel{}.
muc_user(Children) -> user_x(Children, []).

user_x(Children, Attrs) ->
    #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, ?NS_MUC_USER} | Attrs], children = Children}.

-spec status(integer()) -> #xmlel{}.
status(Code) ->
    #xmlel{name = <<"status">>, attrs = [{<<"code">>, integer_to_binary(Code)}]}.

%% @doc XEP-0421 `<occupant-id/>'.
-spec occupant_id(binary()) -> #xmlel{}.
occupant_id(Id) ->
    #xmlel{name = <<"occupant-id">>, attrs = [{<<"xmlns">>, ?NS_OCCUPANT_ID}, {<<"id">>, Id}]}.

%% @doc The occupant id of a real JID in this room: a MAC of its bare JID
%% under the room's secret, the same for every resource and every visit
%% (XEP-0421 §4), telling nothing about the JID.
-spec occupant_id_of(#muc{}, #jid{}) -> binary().
occupant_id_of(#muc{secret = Secret}, JID) ->
    Mac = crypto:mac(hmac, sha256, Secret, bare(JID)),
    base64:encode(binary:part(Mac, 0, 18)).

%% @doc A client's stanza without what only the room may write: occupant
%% ids (XEP-0421 §4: a client cannot forge one), MUC `<x/>' children.
-spec strip(#xmlel{}) -> #xmlel{}.
strip(#xmlel{children = Ch} = El) ->
    El#xmlel{children = [C || C <- Ch, not own(C)]}.

own(#xmlel{name = <<"occupant-id">>} = C) -> throng_xml:ns(C) =:= ?NS_OCCUPANT_ID;
own(#xmlel{name = <<"x">>} = C) ->
    NS = throng_xml:ns(C),
    NS =:= ?NS_MUC orelse NS =:= ?NS_MUC_USER;
own(_) -> false.
