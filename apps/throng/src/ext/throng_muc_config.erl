%% @doc A room's configuration (XEP-0045 §10.2, the `muc#roomconfig'
%% form): its defaults, the form an owner gets, reading a submitted form,
%% and what the configuration shows in service discovery (the room's
%% features, §6.4, and the `muc#roominfo' form). Pure.
-module(throng_muc_config).

-include("throng_muc.hrl").

-export([default/1, form/2, parse/3, features/1, info_form/3, from_stored/2,
         affiliation_lists/1]).

%% The room configuration.
-type config() :: #{title := binary(), description := binary(), persistent := boolean(),
                    public := boolean(), members_only := boolean(),
                    password_protected := boolean(), password := binary(),
                    moderated := boolean(), whois := moderators | anyone,
                    max_users := pos_integer(), history_length := non_neg_integer(),
                    allow_subject_change := boolean(), allow_invites := boolean(),
                    %% Present when the service keeps archives (XEP-0313).
                    archive => boolean()}.
%% The service's: its limits, whether its rooms may keep archives (absent:
%% no) and the page size of archive queries.
-type limits() :: #{max_users := pos_integer(), history_size := non_neg_integer(),
                    archive => boolean(), page_size => pos_integer()}.
-export_type([config/0, limits/0]).

-define(MAX_HISTORY, 200).

-define(OWNERS, <<"muc#roomconfig_roomowners">>).
-define(ADMINS, <<"muc#roomconfig_roomadmins">>).

%% The form's fields: {Key, Var, Type, Label}.
-define(FIELDS,
        [{title, <<"muc#roomconfig_roomname">>, text, <<"Natural-language room name">>},
         {description, <<"muc#roomconfig_roomdesc">>, text, <<"Short description of the room">>},
         {persistent, <<"muc#roomconfig_persistentroom">>, bool, <<"Make room persistent">>},
         {public, <<"muc#roomconfig_publicroom">>, bool,
          <<"Make room publicly searchable">>},
         {members_only, <<"muc#roomconfig_membersonly">>, bool, <<"Make room members-only">>},
         {password_protected, <<"muc#roomconfig_passwordprotectedroom">>, bool,
          <<"Password required to enter">>},
         {password, <<"muc#roomconfig_roomsecret">>, secret, <<"Password">>},
         {moderated, <<"muc#roomconfig_moderatedroom">>, bool, <<"Make room moderated">>},
         {whois, <<"muc#roomconfig_whois">>, whois, <<"Who may discover real JIDs">>},
         {max_users, <<"muc#roomconfig_maxusers">>, max_users,
          <<"Maximum number of occupants">>},
         {history_length, <<"muc#maxhistoryfetch">>, history,
          <<"Maximum number of history messages">>},
         {allow_subject_change, <<"muc#roomconfig_changesubject">>, bool,
          <<"Allow occupants to change the subject">>},
         {allow_invites, <<"muc#roomconfig_allowinvites">>, bool,
          <<"Allow occupants to invite others">>},
         %% Only in the form of a service that keeps archives.
         {archive, <<"muc#roomconfig_enablearchiving">>, bool,
          <<"Archive the room's messages (XEP-0313)">>}]).

%% @doc A new room's configuration: temporary, public, open, unmoderated,
%% semi-anonymous, without password, with the service's defaults; archived
%% when the service keeps archives.
-spec default(limits()) -> config().
default(#{max_users := Max, history_size := H} = Limits) ->
    Archive = case maps:get(archive, Limits, false) of
                  true -> #{archive => true};
                  false -> #{}
              end,
    Archive#{title => <<>>, description => <<>>, persistent => false, public => true,
             members_only => false, password_protected => false, password => <<>>,
             moderated => false, whois => moderators, max_users => Max,
             history_length => min(H, ?MAX_HISTORY), allow_subject_change => true,
             allow_invites => false}.

%% @doc The configuration form with the current values and the room's
%% owners and admins (§10.2: `muc#roomconfig_roomowners' and
%% `muc#roomconfig_roomadmins', jid-multi; affiliations by bare JID).
-spec form(config(), #{binary() => throng_muc_rules:affiliation()}) -> #xmlel{}.
form(Config, Affs) ->
    #xmlel{children = Fields} = Form = form(Config),
    Lists = [#xmlel{name = <<"field">>,
                    attrs = [{<<"var">>, Var}, {<<"type">>, <<"jid-multi">>},
                             {<<"label">>, Label}],
                    children = [#xmlel{name = <<"value">>, children = [{xmlcdata, J}]}
                                || J <- lists:sort([J || {J, A} <- maps:to_list(Affs), A =:= Aff])]}
             || {Aff, Var, Label} <- [{owner, ?OWNERS, <<"Full list of room owners">>},
                                      {admin, ?ADMINS, <<"Full list of room admins">>}]],
    Form#xmlel{children = Fields ++ Lists}.

%% @doc The owner and admin lists a submitted form sets (§10.2, §10.5,
%% §10.8), each `unchanged' when the form does not have it; an invalid JID
%% is an error naming the field.
-spec affiliation_lists(throng_xdata:values()) ->
    {ok, #{owner := [binary()] | unchanged, admin := [binary()] | unchanged}} | {error, binary()}.
affiliation_lists(Values) ->
    Read = fun(Var) ->
                   case maps:find(Var, Values) of
                       error -> {ok, unchanged};
                       {ok, Vs} ->
                           Parsed = [throng_jid:parse(V) || V <- Vs, V =/= <<>>],
                           case lists:member(error, Parsed) of
                               true -> error;
                               false -> {ok, lists:usort([throng_jid:to_binary(throng_jid:bare(J))
                                                          || {ok, J} <- Parsed])}
                           end
                   end
           end,
    case {Read(?OWNERS), Read(?ADMINS)} of
        {{ok, O}, {ok, A}} -> {ok, #{owner => O, admin => A}};
        {error, _} -> {error, <<"invalid JID in ", ?OWNERS/binary>>};
        {_, error} -> {error, <<"invalid JID in ", ?ADMINS/binary>>}
    end.

%% @doc The configuration form with the current values (§10.2).
-spec form(config()) -> #xmlel{}.
form(Config) ->
    Form = throng_xdata:form(<<"Room configuration">>,
                             <<"Complete this form to configure the room.">>,
                             [field(F, Config) || {Key, _, _, _} = F <- ?FIELDS,
                                                  is_map_key(Key, Config)]),
    Type = #xmlel{name = <<"field">>,
                  attrs = [{<<"var">>, <<"FORM_TYPE">>}, {<<"type">>, <<"hidden">>}],
                  children = [#xmlel{name = <<"value">>, children = [{xmlcdata, ?NS_MUC_CONFIG}]}]},
    Form#xmlel{children = [Type | Form#xmlel.children]}.

field({Key, Var, Kind, Label}, Config) ->
    V = maps:get(Key, Config),
    Base = #{var => Var, label => Label},
    case Kind of
        text -> Base#{type => <<"text-single">>, values => [V]};
        secret -> Base#{type => <<"text-private">>, values => [V]};
        bool -> Base#{type => <<"boolean">>, values => [bool(V)]};
        whois -> Base#{type => <<"list-single">>, values => [atom_to_binary(V)],
                       options => [{<<"Moderators only">>, <<"moderators">>},
                                   {<<"Anyone">>, <<"anyone">>}]};
        max_users -> Base#{type => <<"text-single">>, values => [integer_to_binary(V)]};
        history -> Base#{type => <<"text-single">>, values => [integer_to_binary(V)]}
    end.

bool(true) -> <<"1">>;
bool(false) -> <<"0">>.

%% @doc A submitted form applied to Config (fields absent from the form keep
%% their value; an empty form is the instant room of §10.1.2). An invalid
%% value, or a password-protected room without a password, is an error
%% whose text names the field.
-spec parse(throng_xdata:values(), config(), limits()) -> {ok, config()} | {error, binary()}.
parse(Values, Config, Limits) ->
    case throng_xdata:value(<<"FORM_TYPE">>, Values) of
        T when T =:= undefined; T =:= ?NS_MUC_CONFIG -> fold(?FIELDS, Values, Config, Limits);
        _ -> {error, <<"FORM_TYPE is not ", ?NS_MUC_CONFIG/binary>>}
    end.

fold([], _Values, #{password_protected := true, password := <<>>}, _Limits) ->
    {error, <<"a password-protected room needs muc#roomconfig_roomsecret">>};
fold([], _Values, Config, _Limits) ->
    {ok, Config};
fold([{Key, Var, Kind, _} | Rest], Values, Config, Limits) ->
    case is_map_key(Key, Config) andalso maps:find(Var, Values) of
        %% Not in the form (archiving, on a service without archives), or
        %% not submitted.
        false -> fold(Rest, Values, Config, Limits);
        error -> fold(Rest, Values, Config, Limits);
        {ok, Vs} ->
            V = case Vs of
                    [One | _] -> One;
                    [] -> <<>>
                end,
            case value(Kind, V, Limits) of
                {ok, New} -> fold(Rest, Values, Config#{Key => New}, Limits);
                error -> {error, <<"invalid value for ", Var/binary>>}
            end
    end.

value(text, V, _) -> {ok, V};
value(secret, V, _) -> {ok, V};
value(bool, V, _) when V =:= <<"1">>; V =:= <<"true">> -> {ok, true};
value(bool, V, _) when V =:= <<"0">>; V =:= <<"false">> -> {ok, false};
value(whois, <<"moderators">>, _) -> {ok, moderators};
value(whois, <<"anyone">>, _) -> {ok, anyone};
value(max_users, V, #{max_users := Max}) -> int(V, 1, Max);
value(history, V, _) -> int(V, 0, ?MAX_HISTORY);
value(_, _, _) -> error.

int(V, Min, Max) ->
    try binary_to_integer(V) of
        N when N >= Min, N =< Max -> {ok, N};
        _ -> error
    catch error:badarg -> error
    end.

%% @doc The room's disco#info features (§6.4, §15.6).
-spec features(config()) -> [binary()].
features(C) ->
    [?NS_MUC, ?NS_OCCUPANT_ID, ?NS_PING, ?NS_MUC_SELF_PING, ?NS_DISCO_INFO,
     pick(maps:get(persistent, C), <<"muc_persistent">>, <<"muc_temporary">>),
     pick(maps:get(public, C), <<"muc_public">>, <<"muc_hidden">>),
     pick(maps:get(members_only, C), <<"muc_membersonly">>, <<"muc_open">>),
     pick(maps:get(password_protected, C), <<"muc_passwordprotected">>, <<"muc_unsecured">>),
     pick(maps:get(moderated, C), <<"muc_moderated">>, <<"muc_unmoderated">>),
     pick(maps:get(whois, C) =:= anyone, <<"muc_nonanonymous">>, <<"muc_semianonymous">>)]
        ++ case maps:get(archive, C, false) of
               true -> [<<"urn:xmpp:mam:1">>, <<"urn:xmpp:mam:2">>, <<"urn:xmpp:mam:2#extended">>,
                        <<"urn:xmpp:sid:0">>];
               false -> []
           end.

pick(true, Yes, _) -> Yes;
pick(false, _, No) -> No.

%% @doc The `muc#roominfo' form of the room's disco#info (§6.4, §15.5.4).
-spec info_form(config(), non_neg_integer(), binary()) -> #xmlel{}.
info_form(C, Occupants, Subject) ->
    Form = throng_xdata:result(<<>>,
               [#{var => <<"FORM_TYPE">>, type => <<"hidden">>, values => [?NS_MUC_INFO]},
                #{var => <<"muc#roomconfig_roomname">>, label => <<"Name">>,
                  values => [maps:get(title, C)]},
                #{var => <<"muc#roominfo_description">>, label => <<"Description">>,
                  values => [maps:get(description, C)]},
                #{var => <<"muc#roominfo_occupants">>, label => <<"Number of occupants">>,
                  values => [integer_to_binary(Occupants)]},
                #{var => <<"muc#roominfo_subject">>, label => <<"Subject">>,
                  values => [Subject]},
                #{var => <<"muc#roomconfig_changesubject">>,
                  label => <<"Occupants may change the subject">>,
                  values => [bool(maps:get(allow_subject_change, C))]}]),
    Form.

%% @doc A stored configuration over today's defaults (a room stored by an
%% older version gets today's defaults for the keys it did not have).
-spec from_stored(map(), limits()) -> config().
from_stored(Stored, Limits) ->
    maps:merge(default(Limits), maps:with(maps:keys(default(Limits)), Stored)).
