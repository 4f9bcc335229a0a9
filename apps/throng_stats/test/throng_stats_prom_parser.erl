%% @doc Test helper: a strict parser of the Prometheus text exposition format
%% (0.0.4), enough to check what /metrics serves. It fails on a sample line
%% outside the family announced by the last # TYPE, on a family announced
%% twice, on a TYPE without a HELP before it, on a counter whose name does
%% not end in _total, on a duplicate sample, and on a malformed line.
-module(throng_stats_prom_parser).

-export([parse/1, value/2, value/3, family/2]).

-type labels() :: [{binary(), binary()}].
-type parsed() :: #{families := #{binary() => #{type := binary(), help := binary()}},
                    samples := #{{binary(), labels()} => float()}}.
-export_type([parsed/0]).

-spec parse(iodata()) -> parsed().
parse(Text) ->
    Lines = binary:split(iolist_to_binary(Text), <<"\n">>, [global, trim_all]),
    #{families := F, samples := S} =
        lists:foldl(fun line/2, #{families => #{}, samples => #{}, current => undefined,
                                  help => undefined}, Lines),
    #{families => F, samples => S}.

line(<<"# HELP ", Rest/binary>>, St) ->
    [Name, Help] = binary:split(Rest, <<" ">>),
    St#{help => {Name, Help}};
line(<<"# TYPE ", Rest/binary>>, #{families := F, help := Help} = St) ->
    [Name, Type] = binary:split(Rest, <<" ">>),
    lists:member(Type, [<<"counter">>, <<"gauge">>, <<"histogram">>, <<"summary">>,
                        <<"untyped">>]) orelse error({bad_type, Name, Type}),
    maps:is_key(Name, F) andalso error({family_twice, Name}),
    H = case Help of
            {Name, Text} -> Text;
            _ -> error({type_without_help, Name})
        end,
    Type =:= <<"counter">> andalso not ends_with(Name, <<"_total">>)
        andalso error({counter_without_total, Name}),
    St#{families => F#{Name => #{type => Type, help => H}}, current => {Name, Type}};
line(<<"#", _/binary>>, St) ->
    St;
line(Line, #{samples := S, current := Current} = St) ->
    {Name, Labels, Value} = sample(Line),
    case Current of
        {Name, _} -> ok;
        {Family, <<"histogram">>} ->
            lists:member(Name, [<<Family/binary, Suffix/binary>>
                                    || Suffix <- [<<"_bucket">>, <<"_sum">>, <<"_count">>]])
                orelse error({sample_outside_family, Name, Family});
        {Family, _} -> error({sample_outside_family, Name, Family});
        undefined -> error({sample_before_type, Name})
    end,
    Key = {Name, Labels},
    maps:is_key(Key, S) andalso error({duplicate_sample, Key}),
    St#{samples => S#{Key => Value}}.

sample(Line) ->
    {Name, Rest} = name(Line, <<>>),
    {Labels, Rest1} = case Rest of
                          <<"{", R/binary>> -> labels(R, []);
                          _ -> {[], Rest}
                      end,
    <<" ", ValueBin/binary>> = Rest1,
    {Name, lists:sort(Labels), number(ValueBin)}.

name(<<C, Rest/binary>>, Acc) when C >= $a, C =< $z; C >= $A, C =< $Z; C >= $0, C =< $9;
                                   C =:= $_; C =:= $: ->
    name(Rest, <<Acc/binary, C>>);
name(Rest, Acc) when Acc =/= <<>> ->
    {Acc, Rest}.

labels(<<"}", Rest/binary>>, Acc) ->
    {Acc, Rest};
labels(<<",", Rest/binary>>, Acc) ->
    labels(Rest, Acc);
labels(Bin, Acc) ->
    {Key, <<"=\"", Rest/binary>>} = name(Bin, <<>>),
    {Value, Rest1} = label_value(Rest, <<>>),
    labels(Rest1, [{Key, Value} | Acc]).

label_value(<<"\\\\", Rest/binary>>, Acc) -> label_value(Rest, <<Acc/binary, "\\">>);
label_value(<<"\\\"", Rest/binary>>, Acc) -> label_value(Rest, <<Acc/binary, "\"">>);
label_value(<<"\\n", Rest/binary>>, Acc) -> label_value(Rest, <<Acc/binary, "\n">>);
label_value(<<"\"", Rest/binary>>, Acc) -> {Acc, Rest};
label_value(<<"\n", _/binary>>, _) -> error(newline_in_label);
label_value(<<C, Rest/binary>>, Acc) -> label_value(Rest, <<Acc/binary, C>>).

number(<<"+Inf">>) -> infinity;
number(<<"NaN">>) -> nan;
number(B) ->
    try binary_to_integer(B) * 1.0
    catch error:badarg -> binary_to_float(B)
    end.

ends_with(Bin, Suffix) ->
    byte_size(Bin) >= byte_size(Suffix) andalso
        binary:part(Bin, byte_size(Bin) - byte_size(Suffix), byte_size(Suffix)) =:= Suffix.

%% @doc The value of an unlabelled sample.
-spec value(parsed(), binary()) -> float() | undefined.
value(P, Name) ->
    value(P, Name, []).

-spec value(parsed(), binary(), labels()) -> float() | undefined.
value(#{samples := S}, Name, Labels) ->
    maps:get({Name, lists:sort(Labels)}, S, undefined).

%% @doc Every sample of a metric name: [{Labels, Value}].
-spec family(parsed(), binary()) -> [{labels(), float()}].
family(#{samples := S}, Name) ->
    lists:sort([{L, V} || {{N, L}, V} <- maps:to_list(S), N =:= Name]).
