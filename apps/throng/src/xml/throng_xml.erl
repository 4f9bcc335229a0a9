%%% @doc XML elements: serialization and small accessors.
%%%
%%% Elements are `#xmlel{}' records (see throng.hrl), character data is
%%% `{xmlcdata, Bin}', the same shapes fast_xml uses. Names are written as
%%% they are: no namespace rewriting.
%%%
%%% Escaping: text escapes `&', `<', `>' and CR (as `&#13;', which XML line-end
%%% normalization would otherwise turn into LF); attribute values are quoted
%%% with `'' and escape `&', `<', `>', `"', `'' and tab, LF, CR (as character
%%% references, which attribute-value normalization would otherwise turn into
%%% spaces). So whatever the parser returns, serialized again, parses back
%%% equal.
-module(throng_xml).

-include("throng.hrl").

-export([to_iolist/1, to_binary/1, from_binary/1, escape_text/1, escape_attr/1]).
-export([attr/2, attr/3, set_attr/3, subel/2, subel/3, subels/1,
         cdata/1, subel_cdata/2, ns/1]).
%% API used by tests (rfc6120_SUITE forges a stanza's from with it).
-ignore_xref([{set_attr, 3}]).

-export_type([child/0, attrs/0]).

%% Nesting allowed when reading back a stored element: above the deepest
%% stanza the stream parser accepts (limits.max_depth, at most 1024).
-define(FROM_BINARY_DEPTH, 1100).

-type child() :: #xmlel{} | {xmlcdata, binary()}.
-type attrs() :: [{binary(), binary()}].

%%% Serialization

%% @doc The element or character data as XML.
-spec to_iolist(child()) -> iodata().
to_iolist(#xmlel{name = Name, attrs = Attrs, children = []}) ->
    [$<, Name, attrs_iolist(Attrs), "/>"];
to_iolist(#xmlel{name = Name, attrs = Attrs, children = Children}) ->
    [$<, Name, attrs_iolist(Attrs), $>, [to_iolist(C) || C <- Children], "</", Name, $>];
to_iolist({xmlcdata, Text}) ->
    escape_text(Text).

%% @doc The element or character data as an XML binary.
-spec to_binary(child()) -> binary().
to_binary(El) ->
    iolist_to_binary(to_iolist(El)).

%% @doc The element back from the bytes {@link to_binary/1} made of it (for a
%% module that stores elements serialized). Anything but one whole element
%% raises `error({bad_xml, Why})'.
-spec from_binary(binary()) -> #xmlel{}.
from_binary(<<"<", _/binary>> = Bin) ->
    Size = byte_size(Bin),
    try throng_xml_el:parse_el(Bin, ?FROM_BINARY_DEPTH) of
        {El, Size} -> El;
        {_, _} -> error({bad_xml, trailing_bytes})
    catch
        throw:Why -> error({bad_xml, Why})
    end;
from_binary(_) ->
    error({bad_xml, not_an_element}).

attrs_iolist(Attrs) ->
    [[$\s, Name, "='", escape_attr(Value), $'] || {Name, Value} <- Attrs].

%% @doc Character data escaped for element content.
-spec escape_text(binary()) -> iodata().
escape_text(Text) ->
    escape(Text, text_pattern()).

%% @doc An attribute value escaped for either quote character.
-spec escape_attr(binary()) -> iodata().
escape_attr(Value) ->
    escape(Value, attr_pattern()).

escape(Bin, Pattern) ->
    case binary:match(Bin, Pattern) of
        nomatch -> Bin;
        {Pos, 1} -> escape(Bin, Pattern, 0, Pos, [])
    end.

%% Start: first byte not yet emitted; Pos: a byte to escape.
escape(Bin, Pattern, Start, Pos, Acc) ->
    Acc1 = [entity(binary:at(Bin, Pos)), binary_part(Bin, Start, Pos - Start) | Acc],
    Next = Pos + 1,
    case binary:match(Bin, Pattern, [{scope, {Next, byte_size(Bin) - Next}}]) of
        nomatch -> lists:reverse(Acc1, [binary_part(Bin, Next, byte_size(Bin) - Next)]);
        {Pos1, 1} -> escape(Bin, Pattern, Next, Pos1, Acc1)
    end.

entity($&) -> <<"&amp;">>;
entity($<) -> <<"&lt;">>;
entity($>) -> <<"&gt;">>;
entity($") -> <<"&quot;">>;
entity($') -> <<"&apos;">>;
entity($\t) -> <<"&#9;">>;
entity($\n) -> <<"&#10;">>;
entity($\r) -> <<"&#13;">>.

text_pattern() ->
    pattern(text, [<<"&">>, <<"<">>, <<">">>, <<"\r">>]).

attr_pattern() ->
    pattern(attr, [<<"&">>, <<"<">>, <<">">>, <<"\"">>, <<"'">>, <<"\t">>, <<"\n">>, <<"\r">>]).

pattern(Key, Bytes) ->
    case persistent_term:get({?MODULE, Key}, undefined) of
        undefined ->
            Pattern = binary:compile_pattern(Bytes),
            persistent_term:put({?MODULE, Key}, Pattern),
            Pattern;
        Pattern ->
            Pattern
    end.

%%% Accessors

%% @doc The value of attribute Name, or `undefined'.
-spec attr(binary(), #xmlel{}) -> binary() | undefined.
attr(Name, El) ->
    attr(Name, El, undefined).

%% @doc The value of attribute Name, or Default.
-spec attr(binary(), #xmlel{}, Default) -> binary() | Default.
attr(Name, #xmlel{attrs = Attrs}, Default) ->
    case lists:keyfind(Name, 1, Attrs) of
        {_, Value} -> Value;
        false -> Default
    end.

%% @doc Sets attribute Name: replaces its value in place or appends it.
-spec set_attr(binary(), binary(), #xmlel{}) -> #xmlel{}.
set_attr(Name, Value, #xmlel{attrs = Attrs} = El) ->
    case lists:keymember(Name, 1, Attrs) of
        true -> El#xmlel{attrs = lists:keyreplace(Name, 1, Attrs, {Name, Value})};
        false -> El#xmlel{attrs = Attrs ++ [{Name, Value}]}
    end.

%% @doc The first child element called Name, or `undefined'.
-spec subel(#xmlel{}, binary()) -> #xmlel{} | undefined.
subel(#xmlel{children = Children}, Name) ->
    find(fun(#xmlel{name = N}) -> N =:= Name;
            (_) -> false
         end, Children).

%% @doc The first child element called Name whose xmlns attribute is NS.
-spec subel(#xmlel{}, binary(), binary()) -> #xmlel{} | undefined.
subel(#xmlel{children = Children}, Name, NS) ->
    find(fun(#xmlel{name = N} = El) when N =:= Name -> ns(El) =:= NS;
            (_) -> false
         end, Children).

find(Pred, [X | Rest]) ->
    case Pred(X) of
        true -> X;
        false -> find(Pred, Rest)
    end;
find(_Pred, []) ->
    undefined.

%% @doc The child elements, without character data.
-spec subels(#xmlel{}) -> [#xmlel{}].
subels(#xmlel{children = Children}) ->
    [El || #xmlel{} = El <- Children].

%% @doc The element's own character data, concatenated.
-spec cdata(#xmlel{}) -> binary().
cdata(#xmlel{children = Children}) ->
    case [Text || {xmlcdata, Text} <- Children] of
        [] -> <<>>;
        [Text] -> Text;
        Texts -> iolist_to_binary(Texts)
    end.

%% @doc The character data of the first child element called Name, or `<<>>'.
-spec subel_cdata(#xmlel{}, binary()) -> binary().
subel_cdata(El, Name) ->
    case subel(El, Name) of
        undefined -> <<>>;
        Sub -> cdata(Sub)
    end.

%% @doc The element's xmlns attribute, or `<<>>'.
-spec ns(#xmlel{}) -> binary().
ns(El) ->
    attr(<<"xmlns">>, El, <<>>).
