%% @doc Test helpers for the MUC suites (xep0045, xep0410, xep0421): a real
%% client (throng_test_client) entering rooms, reading presence, status
%% codes and items, and configuring rooms.
-module(throng_muc_client).

-include("throng.hrl").

-compile([export_all, nowarn_export_all]).

-define(C, throng_test_client).
-define(SERVICE, <<"conference.localhost">>).
-define(NS_MUC, <<"http://jabber.org/protocol/muc">>).
-define(NS_MUC_USER, <<"http://jabber.org/protocol/muc#user">>).
-define(NS_MUC_OWNER, <<"http://jabber.org/protocol/muc#owner">>).
-define(NS_MUC_ADMIN, <<"http://jabber.org/protocol/muc#admin">>).

service() -> ?SERVICE.

room(Name) -> <<Name/binary, "@", ?SERVICE/binary>>.
occ(Room, Nick) -> <<(room(Room))/binary, "/", Nick/binary>>.

%% Logged in, available, what arrived at login read (up to its own
%% presence's echo, however late it comes: throng_test_client:available/1).
online(User) -> online(User, <<"r">>).
online(User, Res) ->
    C = ?C:login(User, <<"password">>, Res),
    ok = ?C:available(C),
    C.

%% Sends an entering presence (with the MUC <x/> and its Children).
enter_send(C, Room, Nick, Children) ->
    ?C:send(C, #xmlel{name = <<"presence">>, attrs = [{<<"to">>, occ(Room, Nick)}],
                      children = [#xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, ?NS_MUC}],
                                         children = Children}]}).

%% Enters and reads up to the subject (what comes last, §7.2.15); returns
%% everything received, the subject message last.
enter(C, Room, Nick) -> enter(C, Room, Nick, []).
enter(C, Room, Nick, Children) ->
    enter_send(C, Room, Nick, Children),
    until(C, fun is_subject/1).

%% Enters a room that must be created: 201, then an instant room (§10.1.2).
create(C, Room, Nick) ->
    Got = enter(C, Room, Nick),
    Self = self_presence(Got),
    true = lists:member(201, codes(Self)),
    <<"result">> = type(owner_submit(C, Room, [])),
    Got.

%% Creates a room configured with Fields ({Var, Value}).
create(C, Room, Nick, Fields) ->
    Got = enter(C, Room, Nick),
    true = lists:member(201, codes(self_presence(Got))),
    <<"result">> = type(owner_submit(C, Room, Fields)),
    Got.

owner_submit(C, Room, Fields) ->
    X = #xmlel{name = <<"x">>, attrs = [{<<"xmlns">>, <<"jabber:x:data">>}, {<<"type">>, <<"submit">>}],
               children = [field(V, Val) || {V, Val} <- Fields]},
    iq(C, <<"set">>, room(Room), query(?NS_MUC_OWNER, [X])).

field(Var, Val) ->
    #xmlel{name = <<"field">>, attrs = [{<<"var">>, Var}],
           children = [#xmlel{name = <<"value">>, children = [{xmlcdata, Val}]}]}.

query(NS, Children) ->
    #xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, NS}], children = Children}.

iq(C, Type, To, Payload) ->
    ?C:iq_skipping(C, Type, Payload, [{<<"to">>, To}]).

%% muc#admin set with one item.
admin(C, Room, Attrs) -> admin(C, Room, Attrs, []).
admin(C, Room, Attrs, Children) ->
    iq(C, <<"set">>, room(Room),
       query(?NS_MUC_ADMIN, [#xmlel{name = <<"item">>, attrs = Attrs, children = Children}])).

%% Reads stanzas until Pred holds for one; returns all read, that one last.
until(C, Pred) -> until(C, Pred, []).
until(C, Pred, Acc) ->
    El = ?C:recv_stanza(C),
    case Pred(El) of
        true -> lists:reverse([El | Acc]);
        false -> until(C, Pred, [El | Acc])
    end.

%% The next stanza that satisfies Pred (others are skipped).
next(C, Pred) -> lists:last(until(C, Pred)).

is_subject(#xmlel{name = <<"message">>} = El) -> throng_xml:subel(El, <<"subject">>) =/= undefined
                                                     andalso throng_xml:subel(El, <<"body">>) =:= undefined;
is_subject(_) -> false.

is_presence(#xmlel{name = N}) -> N =:= <<"presence">>.

from(El) -> throng_xml:attr(<<"from">>, El).
type(El) -> throng_xml:attr(<<"type">>, El, <<>>).

presence_from(C, From) ->
    next(C, fun(E) -> is_presence(E) andalso from(E) =:= From end).

self_presence(Got) ->
    [P] = [E || E <- Got, is_presence(E), lists:member(110, codes(E))],
    P.

user_x(El) -> throng_xml:subel(El, <<"x">>, ?NS_MUC_USER).

codes(El) ->
    case user_x(El) of
        undefined -> [];
        X -> [binary_to_integer(throng_xml:attr(<<"code">>, S))
              || #xmlel{name = <<"status">>} = S <- throng_xml:subels(X)]
    end.

%% The muc#user item's attributes.
item(El) ->
    #xmlel{attrs = Attrs} = throng_xml:subel(user_x(El), <<"item">>),
    maps:from_list(Attrs).

condition(El) ->
    #xmlel{children = [#xmlel{name = Cond} | _]} = throng_xml:subel(El, <<"error">>),
    Cond.

occupant_id(El) ->
    case throng_xml:subel(El, <<"occupant-id">>, <<"urn:xmpp:occupant-id:0">>) of
        undefined -> undefined;
        O -> throng_xml:attr(<<"id">>, O)
    end.

groupchat(C, Room, Body) ->
    ?C:send(C, ?C:message(room(Room), <<"groupchat">>, Body)).

body(El) -> throng_xml:subel_cdata(El, <<"body">>).

features(R) ->
    [throng_xml:attr(<<"var">>, F)
     || #xmlel{name = <<"feature">>} = F <- throng_xml:subels(throng_xml:subel(R, <<"query">>))].

disco_info(C, To) ->
    iq(C, <<"get">>, To, query(<<"http://jabber.org/protocol/disco#info">>, [])).

disco_items(C, To) ->
    R = iq(C, <<"get">>, To, query(<<"http://jabber.org/protocol/disco#items">>, [])),
    [throng_xml:attr(<<"jid">>, I) || #xmlel{name = <<"item">>} = I
                                          <- throng_xml:subels(throng_xml:subel(R, <<"query">>))].

settle(Cs) ->
    timer:sleep(150),
    [?C:flush(C) || C <- Cs],
    ok.
