%% Character classes and search patterns shared by the XML stream scanner
%% (throng_xml_stream) and the element parser (throng_xml_el). Private to
%% apps/throng/src/xml/.
-ifndef(THRONG_XML_CHARS_HRL).
-define(THRONG_XML_CHARS_HRL, true).

-define(IS_WS(C), (C =:= $\s orelse C =:= $\n orelse C =:= $\t orelse C =:= $\r)).
-define(IS_NAME_START(C), ((C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                           orelse C =:= $_ orelse C =:= $:)).
-define(IS_NAME_CHAR(C), (?IS_NAME_START(C) orelse (C >= $0 andalso C =< $9)
                          orelse C =:= $- orelse C =:= $.)).
-define(IS_DIGIT(C), (C >= $0 andalso C =< $9)).

%% Positions in the tuple of compiled patterns, see patterns/0.
-define(P_TEXT, 1).
-define(P_CDATA, 2).
-define(P_DQ, 3).
-define(P_SQ, 4).
-define(P_LT, 5).
-define(P_GT, 6).
-define(P_QUOT, 7).
-define(P_APOS, 8).
-define(P_CDATA_END, 9).
-define(P_STAG, 10).
-define(P_PI_END, 11).

%% Bytes that need no attention in character data and attribute values.
-define(IS_PLAIN_TEXT(C), ((C >= $\s andalso C =< 16#7F andalso C =/= $< andalso C =/= $&
                            andalso C =/= $]) orelse C =:= $\n orelse C =:= $\t)).
-define(IS_PLAIN_ATTR(C), (C >= $\s andalso C =< 16#7F andalso C =/= $< andalso C =/= $&
                           andalso C =/= $" andalso C =/= $')).
-define(RUN, 16).

-endif.
