%% @doc SASLprep (RFC 4013): the stringprep profile for user names and
%% passwords in SASL mechanisms (PLAIN passwords, SCRAM user names and
%% passwords).
%%
%% Steps, in RFC 3454 order: map non-ASCII spaces (C.1.2) to U+0020 and the
%% "commonly mapped to nothing" characters (B.1) to nothing; normalize with
%% NFKC; refuse prohibited output (C.1.2, C.2.1, C.2.2, C.3-C.9); apply the
%% bidirectional rule (RFC 3454 §6). Unassigned code points are allowed (the
%% "query" rules), since prepared strings are never stored by this module.
%%
%% U+200B is in both C.1.2 and B.1; it is mapped to nothing, as the common
%% client libraries do (mapping to nothing is applied first).
%%
%% Printable ASCII is returned unchanged without any of the above: no step
%% can change it. An ASCII control character is an error.
-module(throng_saslprep).

-export([prepare/1]).

%% @doc Prepares a string; error if it is not UTF-8 or breaks a rule.
-spec prepare(binary()) -> {ok, binary()} | error.
prepare(Bin) when is_binary(Bin) ->
    case ascii(Bin) of
        printable -> {ok, Bin};
        control -> error;
        non_ascii -> prepare_unicode(Bin)
    end.

ascii(<<C, Rest/binary>>) when C >= 16#20, C < 16#7F -> ascii(Rest);
ascii(<<C, _/binary>>) when C >= 16#80 -> non_ascii;
ascii(<<_, _/binary>>) -> control;   % C.2.1, whatever follows
ascii(<<>>) -> printable.

prepare_unicode(Bin) ->
    case unicode:characters_to_list(Bin) of
        Chars when is_list(Chars) ->
            Mapped = map_chars(Chars),
            Normalized = unicode:characters_to_nfkc_list(Mapped),
            case lists:any(fun prohibited/1, Normalized)
                orelse not bidi_ok(Normalized) of
                true -> error;
                false -> {ok, unicode:characters_to_binary(Normalized)}
            end;
        _ ->
            error
    end.

map_chars([C | Rest]) ->
    case mapped_to_nothing(C) of
        true -> map_chars(Rest);
        false ->
            case non_ascii_space(C) of
                true -> [$\s | map_chars(Rest)];
                false -> [C | map_chars(Rest)]
            end
    end;
map_chars([]) ->
    [].

%% RFC 3454 table B.1.
mapped_to_nothing(C) ->
    C =:= 16#AD orelse C =:= 16#34F orelse C =:= 16#1806
        orelse (C >= 16#180B andalso C =< 16#180D)
        orelse (C >= 16#200B andalso C =< 16#200D)
        orelse C =:= 16#2060
        orelse (C >= 16#FE00 andalso C =< 16#FE0F)
        orelse C =:= 16#FEFF.

%% RFC 3454 table C.1.2.
non_ascii_space(C) ->
    C =:= 16#A0 orelse C =:= 16#1680
        orelse (C >= 16#2000 andalso C =< 16#200B)
        orelse C =:= 16#202F orelse C =:= 16#205F orelse C =:= 16#3000.

%% RFC 4013 §2.3: tables C.1.2, C.2.1, C.2.2, C.3, C.4, C.5, C.6, C.7, C.8
%% and C.9 of RFC 3454.
prohibited(C) when C < 16#20; C >= 16#7F, C =< 16#9F ->          % C.2.1, C.2.2
    true;
prohibited(C) when C < 16#A0 ->
    false;
prohibited(C) when C >= 16#E000, C =< 16#F8FF;                    % C.3
                   C >= 16#F0000, C =< 16#FFFFD;
                   C >= 16#100000, C =< 16#10FFFD ->
    true;
prohibited(C) when C >= 16#FDD0, C =< 16#FDEF;                    % C.4
                   C band 16#FFFE =:= 16#FFFE ->
    true;
prohibited(C) when C >= 16#D800, C =< 16#DFFF ->                  % C.5
    true;
prohibited(C) when C >= 16#FFF9, C =< 16#FFFD ->                  % C.2.2, C.6
    true;
prohibited(C) when C >= 16#2FF0, C =< 16#2FFB ->                  % C.7
    true;
prohibited(C) when C =:= 16#E0001; C >= 16#E0020, C =< 16#E007F -> % C.9
    true;
prohibited(C) ->
    non_ascii_space(C)                                            % C.1.2
        orelse C =:= 16#6DD orelse C =:= 16#70F orelse C =:= 16#180E   % C.2.2
        orelse C =:= 16#200C orelse C =:= 16#200D
        orelse C =:= 16#2028 orelse C =:= 16#2029
        orelse (C >= 16#2060 andalso C =< 16#2063)
        orelse (C >= 16#206A andalso C =< 16#206F)                % C.2.2, C.8
        orelse C =:= 16#FEFF
        orelse (C >= 16#1D173 andalso C =< 16#1D17A)
        orelse C =:= 16#340 orelse C =:= 16#341                   % C.8
        orelse C =:= 16#200E orelse C =:= 16#200F
        orelse (C >= 16#202A andalso C =< 16#202E).

%% RFC 3454 §6: a string with a RandALCat character (table D.1) has no LCat
%% character (table D.2) and begins and ends with a RandALCat character.
bidi_ok(Chars) ->
    case lists:any(fun rand_al/1, Chars) of
        false ->
            true;
        true ->
            rand_al(hd(Chars)) andalso rand_al(lists:last(Chars))
                andalso not lists:any(fun l_cat/1, Chars)
    end.

rand_al(C) when C < 16#5BE -> false;
rand_al(C) -> in_ranges(C, rand_al_ranges()).

l_cat(C) when C >= $a, C =< $z; C >= $A, C =< $Z -> true;
l_cat(C) when C < 16#80 -> false;
l_cat(C) -> in_ranges(C, l_ranges()).

%% Binary search in a tuple of sorted, disjoint {First, Last} ranges.
in_ranges(C, Ranges) ->
    in_ranges(C, Ranges, 1, tuple_size(Ranges)).

in_ranges(_C, _Ranges, Lo, Hi) when Lo > Hi ->
    false;
in_ranges(C, Ranges, Lo, Hi) ->
    Mid = (Lo + Hi) div 2,
    case element(Mid, Ranges) of
        {First, _} when C < First -> in_ranges(C, Ranges, Lo, Mid - 1);
        {_, Last} when C > Last -> in_ranges(C, Ranges, Mid + 1, Hi);
        _ -> true
    end.

%%% Tables D.1 (RandALCat) and D.2 (LCat) of RFC 3454.
%%% GENERATED: do not edit by hand. The ranges of code points c (surrogates
%%% excluded) for which Python 3's stringprep.in_table_d1(chr(c)) and
%%% in_table_d2(chr(c)) hold, i.e. bidirectional categories R/AL and L of
%%% unicodedata.ucd_3_2_0 (Unicode 3.2, the version RFC 3454 uses). D.1 has
%%% 34 ranges and D.2 360, as in the RFC.

rand_al_ranges() ->
    {{16#5BE,16#5BE}, {16#5C0,16#5C0}, {16#5C3,16#5C3}, {16#5D0,16#5EA}, {16#5F0,16#5F4},
     {16#61B,16#61B}, {16#61F,16#61F}, {16#621,16#63A}, {16#640,16#64A}, {16#66D,16#66F},
     {16#671,16#6D5}, {16#6DD,16#6DD}, {16#6E5,16#6E6}, {16#6FA,16#6FE}, {16#700,16#70D},
     {16#710,16#710}, {16#712,16#72C}, {16#780,16#7A5}, {16#7B1,16#7B1},
     {16#200F,16#200F}, {16#FB1D,16#FB1D}, {16#FB1F,16#FB28}, {16#FB2A,16#FB36},
     {16#FB38,16#FB3C}, {16#FB3E,16#FB3E}, {16#FB40,16#FB41}, {16#FB43,16#FB44},
     {16#FB46,16#FBB1}, {16#FBD3,16#FD3D}, {16#FD50,16#FD8F}, {16#FD92,16#FDC7},
     {16#FDF0,16#FDFC}, {16#FE70,16#FE74}, {16#FE76,16#FEFC}}.

l_ranges() ->
    {{16#41,16#5A}, {16#61,16#7A}, {16#AA,16#AA}, {16#B5,16#B5}, {16#BA,16#BA},
     {16#C0,16#D6}, {16#D8,16#F6}, {16#F8,16#220}, {16#222,16#233}, {16#250,16#2AD},
     {16#2B0,16#2B8}, {16#2BB,16#2C1}, {16#2D0,16#2D1}, {16#2E0,16#2E4}, {16#2EE,16#2EE},
     {16#37A,16#37A}, {16#386,16#386}, {16#388,16#38A}, {16#38C,16#38C}, {16#38E,16#3A1},
     {16#3A3,16#3CE}, {16#3D0,16#3F5}, {16#400,16#482}, {16#48A,16#4CE}, {16#4D0,16#4F5},
     {16#4F8,16#4F9}, {16#500,16#50F}, {16#531,16#556}, {16#559,16#55F}, {16#561,16#587},
     {16#589,16#589}, {16#903,16#903}, {16#905,16#939}, {16#93D,16#940}, {16#949,16#94C},
     {16#950,16#950}, {16#958,16#961}, {16#964,16#970}, {16#982,16#983}, {16#985,16#98C},
     {16#98F,16#990}, {16#993,16#9A8}, {16#9AA,16#9B0}, {16#9B2,16#9B2}, {16#9B6,16#9B9},
     {16#9BE,16#9C0}, {16#9C7,16#9C8}, {16#9CB,16#9CC}, {16#9D7,16#9D7}, {16#9DC,16#9DD},
     {16#9DF,16#9E1}, {16#9E6,16#9F1}, {16#9F4,16#9FA}, {16#A05,16#A0A}, {16#A0F,16#A10},
     {16#A13,16#A28}, {16#A2A,16#A30}, {16#A32,16#A33}, {16#A35,16#A36}, {16#A38,16#A39},
     {16#A3E,16#A40}, {16#A59,16#A5C}, {16#A5E,16#A5E}, {16#A66,16#A6F}, {16#A72,16#A74},
     {16#A83,16#A83}, {16#A85,16#A8B}, {16#A8D,16#A8D}, {16#A8F,16#A91}, {16#A93,16#AA8},
     {16#AAA,16#AB0}, {16#AB2,16#AB3}, {16#AB5,16#AB9}, {16#ABD,16#AC0}, {16#AC9,16#AC9},
     {16#ACB,16#ACC}, {16#AD0,16#AD0}, {16#AE0,16#AE0}, {16#AE6,16#AEF}, {16#B02,16#B03},
     {16#B05,16#B0C}, {16#B0F,16#B10}, {16#B13,16#B28}, {16#B2A,16#B30}, {16#B32,16#B33},
     {16#B36,16#B39}, {16#B3D,16#B3E}, {16#B40,16#B40}, {16#B47,16#B48}, {16#B4B,16#B4C},
     {16#B57,16#B57}, {16#B5C,16#B5D}, {16#B5F,16#B61}, {16#B66,16#B70}, {16#B83,16#B83},
     {16#B85,16#B8A}, {16#B8E,16#B90}, {16#B92,16#B95}, {16#B99,16#B9A}, {16#B9C,16#B9C},
     {16#B9E,16#B9F}, {16#BA3,16#BA4}, {16#BA8,16#BAA}, {16#BAE,16#BB5}, {16#BB7,16#BB9},
     {16#BBE,16#BBF}, {16#BC1,16#BC2}, {16#BC6,16#BC8}, {16#BCA,16#BCC}, {16#BD7,16#BD7},
     {16#BE7,16#BF2}, {16#C01,16#C03}, {16#C05,16#C0C}, {16#C0E,16#C10}, {16#C12,16#C28},
     {16#C2A,16#C33}, {16#C35,16#C39}, {16#C41,16#C44}, {16#C60,16#C61}, {16#C66,16#C6F},
     {16#C82,16#C83}, {16#C85,16#C8C}, {16#C8E,16#C90}, {16#C92,16#CA8}, {16#CAA,16#CB3},
     {16#CB5,16#CB9}, {16#CBE,16#CBE}, {16#CC0,16#CC4}, {16#CC7,16#CC8}, {16#CCA,16#CCB},
     {16#CD5,16#CD6}, {16#CDE,16#CDE}, {16#CE0,16#CE1}, {16#CE6,16#CEF}, {16#D02,16#D03},
     {16#D05,16#D0C}, {16#D0E,16#D10}, {16#D12,16#D28}, {16#D2A,16#D39}, {16#D3E,16#D40},
     {16#D46,16#D48}, {16#D4A,16#D4C}, {16#D57,16#D57}, {16#D60,16#D61}, {16#D66,16#D6F},
     {16#D82,16#D83}, {16#D85,16#D96}, {16#D9A,16#DB1}, {16#DB3,16#DBB}, {16#DBD,16#DBD},
     {16#DC0,16#DC6}, {16#DCF,16#DD1}, {16#DD8,16#DDF}, {16#DF2,16#DF4}, {16#E01,16#E30},
     {16#E32,16#E33}, {16#E40,16#E46}, {16#E4F,16#E5B}, {16#E81,16#E82}, {16#E84,16#E84},
     {16#E87,16#E88}, {16#E8A,16#E8A}, {16#E8D,16#E8D}, {16#E94,16#E97}, {16#E99,16#E9F},
     {16#EA1,16#EA3}, {16#EA5,16#EA5}, {16#EA7,16#EA7}, {16#EAA,16#EAB}, {16#EAD,16#EB0},
     {16#EB2,16#EB3}, {16#EBD,16#EBD}, {16#EC0,16#EC4}, {16#EC6,16#EC6}, {16#ED0,16#ED9},
     {16#EDC,16#EDD}, {16#F00,16#F17}, {16#F1A,16#F34}, {16#F36,16#F36}, {16#F38,16#F38},
     {16#F3E,16#F47}, {16#F49,16#F6A}, {16#F7F,16#F7F}, {16#F85,16#F85}, {16#F88,16#F8B},
     {16#FBE,16#FC5}, {16#FC7,16#FCC}, {16#FCF,16#FCF}, {16#1000,16#1021},
     {16#1023,16#1027}, {16#1029,16#102A}, {16#102C,16#102C}, {16#1031,16#1031},
     {16#1038,16#1038}, {16#1040,16#1057}, {16#10A0,16#10C5}, {16#10D0,16#10F8},
     {16#10FB,16#10FB}, {16#1100,16#1159}, {16#115F,16#11A2}, {16#11A8,16#11F9},
     {16#1200,16#1206}, {16#1208,16#1246}, {16#1248,16#1248}, {16#124A,16#124D},
     {16#1250,16#1256}, {16#1258,16#1258}, {16#125A,16#125D}, {16#1260,16#1286},
     {16#1288,16#1288}, {16#128A,16#128D}, {16#1290,16#12AE}, {16#12B0,16#12B0},
     {16#12B2,16#12B5}, {16#12B8,16#12BE}, {16#12C0,16#12C0}, {16#12C2,16#12C5},
     {16#12C8,16#12CE}, {16#12D0,16#12D6}, {16#12D8,16#12EE}, {16#12F0,16#130E},
     {16#1310,16#1310}, {16#1312,16#1315}, {16#1318,16#131E}, {16#1320,16#1346},
     {16#1348,16#135A}, {16#1361,16#137C}, {16#13A0,16#13F4}, {16#1401,16#1676},
     {16#1681,16#169A}, {16#16A0,16#16F0}, {16#1700,16#170C}, {16#170E,16#1711},
     {16#1720,16#1731}, {16#1735,16#1736}, {16#1740,16#1751}, {16#1760,16#176C},
     {16#176E,16#1770}, {16#1780,16#17B6}, {16#17BE,16#17C5}, {16#17C7,16#17C8},
     {16#17D4,16#17DA}, {16#17DC,16#17DC}, {16#17E0,16#17E9}, {16#1810,16#1819},
     {16#1820,16#1877}, {16#1880,16#18A8}, {16#1E00,16#1E9B}, {16#1EA0,16#1EF9},
     {16#1F00,16#1F15}, {16#1F18,16#1F1D}, {16#1F20,16#1F45}, {16#1F48,16#1F4D},
     {16#1F50,16#1F57}, {16#1F59,16#1F59}, {16#1F5B,16#1F5B}, {16#1F5D,16#1F5D},
     {16#1F5F,16#1F7D}, {16#1F80,16#1FB4}, {16#1FB6,16#1FBC}, {16#1FBE,16#1FBE},
     {16#1FC2,16#1FC4}, {16#1FC6,16#1FCC}, {16#1FD0,16#1FD3}, {16#1FD6,16#1FDB},
     {16#1FE0,16#1FEC}, {16#1FF2,16#1FF4}, {16#1FF6,16#1FFC}, {16#200E,16#200E},
     {16#2071,16#2071}, {16#207F,16#207F}, {16#2102,16#2102}, {16#2107,16#2107},
     {16#210A,16#2113}, {16#2115,16#2115}, {16#2119,16#211D}, {16#2124,16#2124},
     {16#2126,16#2126}, {16#2128,16#2128}, {16#212A,16#212D}, {16#212F,16#2131},
     {16#2133,16#2139}, {16#213D,16#213F}, {16#2145,16#2149}, {16#2160,16#2183},
     {16#2336,16#237A}, {16#2395,16#2395}, {16#249C,16#24E9}, {16#3005,16#3007},
     {16#3021,16#3029}, {16#3031,16#3035}, {16#3038,16#303C}, {16#3041,16#3096},
     {16#309D,16#309F}, {16#30A1,16#30FA}, {16#30FC,16#30FF}, {16#3105,16#312C},
     {16#3131,16#318E}, {16#3190,16#31B7}, {16#31F0,16#321C}, {16#3220,16#3243},
     {16#3260,16#327B}, {16#327F,16#32B0}, {16#32C0,16#32CB}, {16#32D0,16#32FE},
     {16#3300,16#3376}, {16#337B,16#33DD}, {16#33E0,16#33FE}, {16#3400,16#4DB5},
     {16#4E00,16#9FA5}, {16#A000,16#A48C}, {16#AC00,16#D7A3}, {16#E000,16#FA2D},
     {16#FA30,16#FA6A}, {16#FB00,16#FB06}, {16#FB13,16#FB17}, {16#FF21,16#FF3A},
     {16#FF41,16#FF5A}, {16#FF66,16#FFBE}, {16#FFC2,16#FFC7}, {16#FFCA,16#FFCF},
     {16#FFD2,16#FFD7}, {16#FFDA,16#FFDC}, {16#10300,16#1031E}, {16#10320,16#10323},
     {16#10330,16#1034A}, {16#10400,16#10425}, {16#10428,16#1044D}, {16#1D000,16#1D0F5},
     {16#1D100,16#1D126}, {16#1D12A,16#1D166}, {16#1D16A,16#1D172}, {16#1D183,16#1D184},
     {16#1D18C,16#1D1A9}, {16#1D1AE,16#1D1DD}, {16#1D400,16#1D454}, {16#1D456,16#1D49C},
     {16#1D49E,16#1D49F}, {16#1D4A2,16#1D4A2}, {16#1D4A5,16#1D4A6}, {16#1D4A9,16#1D4AC},
     {16#1D4AE,16#1D4B9}, {16#1D4BB,16#1D4BB}, {16#1D4BD,16#1D4C0}, {16#1D4C2,16#1D4C3},
     {16#1D4C5,16#1D505}, {16#1D507,16#1D50A}, {16#1D50D,16#1D514}, {16#1D516,16#1D51C},
     {16#1D51E,16#1D539}, {16#1D53B,16#1D53E}, {16#1D540,16#1D544}, {16#1D546,16#1D546},
     {16#1D54A,16#1D550}, {16#1D552,16#1D6A3}, {16#1D6A8,16#1D7C9}, {16#20000,16#2A6D6},
     {16#2F800,16#2FA1D}, {16#F0000,16#FFFFD}, {16#100000,16#10FFFD}}.
