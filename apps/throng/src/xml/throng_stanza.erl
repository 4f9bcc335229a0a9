%% @doc Stanza helpers: kinds, types, addresses, and the stanza errors of
%% RFC 6120 §8.3 with their default error types.
-module(throng_stanza).

-include("throng.hrl").

-export([kind/1, type/1, id/1, error_reply/2, error_reply/3, error_reply/4,
         iq_result/1, iq_result/2, is_error/1, set_from_to/3, strip_from_to/1,
         copy/1, stamp/1, delay/2, forwarded/3]).

-type condition() :: atom().

-define(NS_FORWARD, <<"urn:xmpp:forward:0">>).
-export_type([condition/0]).

%% @doc message | presence | iq | other.
-spec kind(#xmlel{}) -> message | presence | iq | other.
kind(#xmlel{name = <<"message">>}) -> message;
kind(#xmlel{name = <<"presence">>}) -> presence;
kind(#xmlel{name = <<"iq">>}) -> iq;
kind(_) -> other.

-spec type(#xmlel{}) -> binary().
type(El) -> throng_xml:attr(<<"type">>, El, <<>>).

-spec id(#xmlel{}) -> binary().
id(El) -> throng_xml:attr(<<"id">>, El, <<>>).

-spec is_error(#xmlel{}) -> boolean().
is_error(El) -> type(El) =:= <<"error">>.

%% @doc The error answer to a stanza: same name and id, type="error", from
%% and to swapped, the original payload kept, and an <error/> child.
-spec error_reply(#xmlel{}, condition()) -> #xmlel{}.
error_reply(El, Cond) ->
    error_reply(El, Cond, <<>>).

-spec error_reply(#xmlel{}, condition(), binary()) -> #xmlel{}.
error_reply(El, Cond, Text) ->
    error_reply(El, Cond, Text, []).

%% @doc As error_reply/3, with an application-specific condition element
%% after the text (RFC 6120 §8.3.2), e.g. XEP-0050's
%% `<bad-sessionid xmlns="http://jabber.org/protocol/commands"/>'.
-spec error_reply(#xmlel{}, condition(), binary(), #xmlel{} | []) -> #xmlel{}.
error_reply(#xmlel{attrs = Attrs, children = Children} = El, Cond, Text, AppCond) ->
    From = proplists:get_value(<<"from">>, Attrs),
    To = proplists:get_value(<<"to">>, Attrs),
    Kept = [A || {K, _} = A <- Attrs,
                 K =/= <<"from">>, K =/= <<"to">>, K =/= <<"type">>],
    Swapped = [{<<"from">>, To} || To =/= undefined] ++ [{<<"to">>, From} || From =/= undefined],
    #xmlel{children = ErrChildren} = Err = error_el(Cond, Text),
    El#xmlel{attrs = Swapped ++ [{<<"type">>, <<"error">>} | Kept],
             children = Children ++ [Err#xmlel{children = ErrChildren ++ lists:flatten([AppCond])}]}.

%% @doc An <error/> element for a condition, with its default type.
-spec error_el(condition(), binary()) -> #xmlel{}.
error_el(Cond, Text) ->
    CondEl = #xmlel{name = atom_to_binary(Cond), attrs = [{<<"xmlns">>, ?NS_STANZAS}]},
    TextEl = [#xmlel{name = <<"text">>,
                     attrs = [{<<"xmlns">>, ?NS_STANZAS}, {<<"xml:lang">>, <<"en">>}],
                     children = [{xmlcdata, Text}]} || Text =/= <<>>],
    #xmlel{name = <<"error">>, attrs = [{<<"type">>, error_type(Cond)}],
           children = [CondEl | TextEl]}.

error_type('bad-request') -> <<"modify">>;
error_type('conflict') -> <<"cancel">>;
error_type('feature-not-implemented') -> <<"cancel">>;
error_type('forbidden') -> <<"auth">>;
error_type('gone') -> <<"cancel">>;
error_type('internal-server-error') -> <<"cancel">>;
error_type('item-not-found') -> <<"cancel">>;
error_type('jid-malformed') -> <<"modify">>;
error_type('not-acceptable') -> <<"modify">>;
error_type('not-allowed') -> <<"cancel">>;
error_type('not-authorized') -> <<"auth">>;
error_type('policy-violation') -> <<"modify">>;
error_type('recipient-unavailable') -> <<"wait">>;
error_type('redirect') -> <<"modify">>;
error_type('registration-required') -> <<"auth">>;
error_type('remote-server-not-found') -> <<"cancel">>;
error_type('remote-server-timeout') -> <<"wait">>;
error_type('resource-constraint') -> <<"wait">>;
error_type('service-unavailable') -> <<"cancel">>;
error_type('subscription-required') -> <<"auth">>;
error_type('unexpected-request') -> <<"wait">>;
error_type(_) -> <<"cancel">>.

%% @doc The empty result of an IQ get/set.
-spec iq_result(#xmlel{}) -> #xmlel{}.
iq_result(IQ) ->
    iq_result(IQ, []).

-spec iq_result(#xmlel{}, [#xmlel{}]) -> #xmlel{}.
iq_result(#xmlel{attrs = Attrs}, Children) ->
    From = proplists:get_value(<<"from">>, Attrs),
    To = proplists:get_value(<<"to">>, Attrs),
    #xmlel{name = <<"iq">>,
           attrs = [{<<"from">>, To} || To =/= undefined] ++
               [{<<"to">>, From} || From =/= undefined] ++
               [{<<"type">>, <<"result">>},
                {<<"id">>, proplists:get_value(<<"id">>, Attrs, <<>>)}],
           children = Children}.

%% @doc Replaces the from and to attributes (either may be undefined: removed).
-spec set_from_to(#xmlel{}, binary() | undefined, binary() | undefined) -> #xmlel{}.
set_from_to(#xmlel{attrs = Attrs} = El, From, To) ->
    Rest = [A || {K, _} = A <- Attrs, K =/= <<"from">>, K =/= <<"to">>],
    El#xmlel{attrs = [{<<"from">>, From} || From =/= undefined] ++
                 [{<<"to">>, To} || To =/= undefined] ++ Rest}.

-spec strip_from_to(#xmlel{}) -> #xmlel{}.
strip_from_to(El) ->
    set_from_to(El, undefined, undefined).

%% @doc A deep copy whose binaries no longer point into the buffer they were
%% parsed from. The parser hands out sub-binaries of the received data
%% (cheap for a stanza that is routed and dropped); anything kept for long
%% (a presence in the session table) is copied so that it does not hold a
%% whole receive buffer alive.
-spec copy(#xmlel{}) -> #xmlel{}.
copy(#xmlel{name = N, attrs = A, children = C}) ->
    #xmlel{name = binary:copy(N),
           attrs = [{binary:copy(K), binary:copy(V)} || {K, V} <- A],
           children = [copy_child(Ch) || Ch <- C]}.

copy_child({xmlcdata, B}) -> {xmlcdata, binary:copy(B)};
copy_child(#xmlel{} = El) -> copy(El).

%% @doc A time in microseconds since the epoch as a XEP-0082 DateTime, in
%% UTC with its microseconds (`2010-07-10T22:28:25.000000Z').
-spec stamp(integer()) -> binary().
stamp(Microseconds) ->
    list_to_binary(calendar:system_time_to_rfc3339(Microseconds, [{unit, microsecond},
                                                                   {offset, "Z"}])).

%% @doc A XEP-0203 `<delay/>' stamped with a time in microseconds since the
%% epoch, from an entity (`undefined': no `from').
-spec delay(integer(), binary() | undefined) -> #xmlel{}.
delay(Microseconds, From) ->
    #xmlel{name = <<"delay">>,
           attrs = [{<<"xmlns">>, ?NS_DELAY}] ++ [{<<"from">>, From} || From =/= undefined]
               ++ [{<<"stamp">>, stamp(Microseconds)}]}.

%% @doc A XEP-0297 `<forwarded/>' of a stanza, after the elements given
%% before it (a {@link delay/2}, or none). Inside it the stanza's namespace
%% is spelled out: one that has no `xmlns' gets `jabber:client' as its
%% first attribute or as its last.
-spec forwarded([#xmlel{}], #xmlel{}, first | last) -> #xmlel{}.
forwarded(Before, #xmlel{attrs = Attrs} = Stanza, XmlnsAt) ->
    Inner = case lists:keymember(<<"xmlns">>, 1, Attrs) of
                true -> Stanza;
                false when XmlnsAt =:= first -> Stanza#xmlel{attrs = [{<<"xmlns">>, ?NS_CLIENT} | Attrs]};
                false -> Stanza#xmlel{attrs = Attrs ++ [{<<"xmlns">>, ?NS_CLIENT}]}
            end,
    #xmlel{name = <<"forwarded">>, attrs = [{<<"xmlns">>, ?NS_FORWARD}],
           children = Before ++ [Inner]}.
