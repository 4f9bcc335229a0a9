%% @doc XEP-0045 Multi-User Chat, with XEP-0410 (self-ping) and XEP-0421
%% (occupant ids), as a service on a subdomain of each host (option
%% `host', `conference.@HOST@' by default). docs/muc.md describes the
%% design, what is supported and the measured costs.
%%
%% The module registers the service domain with the router
%% ({@link throng_router:register_service/2}); every stanza to the service
%% or to a room reaches {@link route/3} in the sender's process. The
%% service's own IQs (disco#info, disco#items: the public rooms) are
%% answered there; a stanza for a room goes to the room's process on the
%% room's home node ({@link throng_muc_room}), started on demand. The
%% domain's disco#items lists the service (hook `disco_items').
%%
%% Rooms keep archives (XEP-0313 on the room's JID, {@link
%% throng_muc_mam}) when option `archive' is on (the default): a new room
%% archives until its owner turns `muc#roomconfig_enablearchiving' off; a
%% sweep every `archive_sweep_interval' seconds removes what is older than
%% `archive_max_age' days and beyond each room's newest
%% `archive_max_messages'.
-module(throng_mod_muc).
-behaviour(throng_ext).

-include("throng_muc.hrl").

-export([options/0, iq_handlers/0, hooks/0, start/2, stop/1]).
-export([route/3, disco_items/2]).
%% Called by the router for the registered service domain, and as a hook.
-ignore_xref([{route, 3}, {disco_items, 2}]).

-define(SERVICE_OF(Host), {?MODULE, service_of, Host}).

-spec options() -> throng_config_spec:spec().
options() ->
    #{host => #{type => string, default => <<"conference.@HOST@">>,
                doc => "The domain of the MUC service; @HOST@ is replaced by the host. "
                       "It must not be one of the hosts."},
      history_size => #{type => {int, 0, 200}, default => 20,
                        doc => "Messages a new room keeps for history on join (an owner can "
                               "set 0 to 200 in the room's configuration)."},
      max_users => #{type => {int, 1, 100000}, default => 200,
                     doc => "Occupants a room admits (an owner can lower it; owners and "
                            "admins enter a full room)."},
      archive => #{type => boolean, default => true,
                   doc => "Whether rooms keep an archive of their messages (XEP-0313 on the "
                          "room's JID). A new room archives; its owner can turn it off "
                          "(muc#roomconfig_enablearchiving)."},
      archive_max_age => #{type => {int, 0, 36500}, default => 30,
                           doc => "Days a message stays in a room's archive; 0: no limit."},
      archive_max_messages => #{type => {int, 0, 100000000}, default => 10000,
                                doc => "Messages kept per room: beyond them the oldest go; 0: "
                                       "no limit. Enforced by the sweep."},
      archive_sweep_interval => #{type => {int, 1, 86400}, default => 3600,
                                  doc => "Seconds between two sweeps of the rooms' archives (one "
                                         "timer per service, run by one node of a cluster)."},
      archive_page_size => #{type => {int, 1, 250}, default => 50,
                             doc => "Messages in one page of a room archive's query results."}}.

-spec iq_handlers() -> [].
iq_handlers() ->
    [].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{disco_items, 50, disco_items}].

%% @doc Registers the host's service domain and publishes what its rooms need.
-spec start(binary(), map()) -> ok | {error, string()}.
start(Host, #{host := Pattern, history_size := H, max_users := Max, archive := Archive,
              archive_page_size := PageSize} = Opts) ->
    case throng_jid:domainprep(binary:replace(Pattern, <<"@HOST@">>, Host, [global])) of
        error ->
            {error, "modules.muc.host: not a domain: " ++ binary_to_list(Pattern)};
        Service ->
            ok = throng_muc_room:init_table(),
            Limits = #{max_users => Max, history_size => H, archive => Archive,
                       page_size => PageSize},
            ok = throng_muc_room:set_service(Service, #{limits => Limits}),
            case throng_router:register_service(Service, ?MODULE) of
                ok ->
                    persistent_term:put(?SERVICE_OF(Host), Service),
                    start_sweep(Service, Opts);
                {error, _} = E -> E
            end
    end.

%% The rooms' archives are swept like users' (throng_mod_mam:sweep/3), on
%% the service's domain.
start_sweep(Service, #{archive := true, archive_max_age := Days, archive_max_messages := N,
                       archive_sweep_interval := Seconds}) ->
    cancel_sweep(Service),
    {ok, TRef} = timer:apply_interval(Seconds * 1000, throng_mod_mam, sweep, [Service, Days, N]),
    persistent_term:put({?MODULE, sweep, Service}, TRef);
start_sweep(_Service, _Opts) ->
    ok.

cancel_sweep(Service) ->
    case persistent_term:get({?MODULE, sweep, Service}, undefined) of
        undefined -> ok;
        TRef ->
            _ = timer:cancel(TRef),
            _ = persistent_term:erase({?MODULE, sweep, Service}),
            ok
    end.

-spec stop(binary()) -> ok.
stop(Host) ->
    case persistent_term:get(?SERVICE_OF(Host), undefined) of
        undefined -> ok;
        Service ->
            ok = cancel_sweep(Service),
            ok = throng_router:unregister_service(Service),
            ok = throng_muc_room:stop_all(Service),
            ok = throng_muc_room:unset_service(Service),
            _ = persistent_term:erase(?SERVICE_OF(Host)),
            ok
    end.

%% The service domain of a host where the module runs.
service(Host) ->
    persistent_term:get(?SERVICE_OF(Host), undefined).

%% @doc Hook: the domain's disco#items lists the service (XEP-0045 §6.1).
-spec disco_items(term(), #{to := #jid{}, node := binary() | undefined}) ->
    ok | {ok, list()}.
disco_items(Items, #{to := #jid{user = <<>>, server = Host}, node := undefined}) when is_list(Items) ->
    case service(Host) of
        undefined -> ok;
        Service -> {ok, Items ++ [{Service, <<>>, <<"Chatrooms">>}]}
    end;
disco_items(_, _) ->
    ok.

%% @doc A stanza to the service domain or a room, in the sender's process.
-spec route(#jid{}, #jid{}, #xmlel{}) -> ok.
route(From, #jid{user = <<>>} = To, El) ->
    to_service(From, To, El);
route(From, #jid{user = Room, server = Service} = To, El) ->
    case throng_members:home({Room, Service}) of
        Home when Home =:= node() -> throng_muc_room:dispatch(Service, From, To, El);
        %% One process per room in a cluster: on the room's home node.
        Home -> erpc:cast(Home, throng_muc_room, dispatch, [Service, From, To, El])
    end.

%% The service itself: disco (§6.1, §6.3); nothing else is offered.
to_service(From, To, El) ->
    case {throng_stanza:kind(El), throng_stanza:type(El)} of
        {iq, <<"get">>} ->
            Payload = case throng_xml:subels(El) of
                          [P] -> P;
                          _ -> undefined
                      end,
            case Payload =/= undefined andalso throng_xml:ns(Payload) of
                ?NS_DISCO_INFO -> reply(From, To, El, [service_info(Payload)]);
                ?NS_DISCO_ITEMS -> reply(From, To, El, [service_items(To, Payload)]);
                ?NS_PING -> reply(From, To, El, []);
                _ -> throng_router:bounce(From, To, El, 'service-unavailable')
            end;
        {iq, <<"set">>} -> throng_router:bounce(From, To, El, 'service-unavailable');
        {message, _} -> throng_router:bounce(From, To, El, 'service-unavailable');
        _ -> ok
    end.

reply(From, To, El, Children) ->
    {F, T, Result} = throng_muc_xml:result(From, To, El, Children),
    throng_router:route(F, T, Result).

service_info(Payload) ->
    Features = [?NS_DISCO_INFO, ?NS_DISCO_ITEMS, ?NS_MUC, ?NS_OCCUPANT_ID, ?NS_PING],
    Node = [{<<"node">>, N} || N <- [throng_xml:attr(<<"node">>, Payload)], N =/= undefined],
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_DISCO_INFO} | Node],
           children = [#xmlel{name = <<"identity">>,
                              attrs = [{<<"category">>, <<"conference">>}, {<<"type">>, <<"text">>},
                                       {<<"name">>, <<"Chatrooms">>}]} || Node =:= []] ++
               [#xmlel{name = <<"feature">>, attrs = [{<<"var">>, F}]} || Node =:= [], F <- Features]}.

%% §6.3: the public rooms, running (the node's table) or stored.
service_items(#jid{server = Service}, Payload) ->
    Running = throng_muc_room:running(Service),
    RunningNames = maps:from_list([{R, []} || {R, _, _} <- Running]),
    Limits = throng_muc_room:limits(Service),
    Stored = [{R, throng_muc_store:listing({Service, R}, Limits)}
              || R <- throng_muc_store:rooms(Service), not is_map_key(R, RunningNames)],
    Listed = lists:sort([{R, Name} || {R, _, {listed, Name}} <- Running] ++
                            [{R, Name} || {R, {listed, Name}} <- Stored]),
    Node = [{<<"node">>, N} || N <- [throng_xml:attr(<<"node">>, Payload)], N =/= undefined],
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_DISCO_ITEMS} | Node],
           children = [#xmlel{name = <<"item">>,
                              attrs = [{<<"jid">>, <<R/binary, "@", Service/binary>>}] ++
                                  [{<<"name">>, Name} || Name =/= <<>>]}
                       || Node =:= [], {R, Name} <- Listed]}.
