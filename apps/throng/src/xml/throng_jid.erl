%% @doc XMPP addresses (RFC 6120 §3, RFC 7622), prepared with the stringprep
%% profiles ejabberd and Prosody use: nodeprep for the localpart, nameprep for
%% the domainpart, resourceprep for the resourcepart (RFC 3920 appendices A, B).
%%
%% Every #jid{} this module returns is canonical: each part went through its
%% profile, so two JIDs name the same entity iff their records are equal
%% (except IPv6 literal domains, kept as written: [::1] is not [0::1]).
%%
%% The three prep functions have an ASCII fast path in Erlang that returns
%% exactly what the stringprep NIF returns for any ASCII input (a PropEr
%% property in throng_jid_tests checks this against the NIF); input with a
%% byte >= 128 goes to the NIF. The stringprep application must be started
%% (throng depends on it) before non-ASCII input is prepared.
-module(throng_jid).

-include("throng.hrl").

-export([parse/1, make/3, to_binary/1, bare/1]).
-export([nodeprep/1, nameprep/1, resourceprep/1, domainprep/1]).
%% API used by tests: the property test holds nameprep's fast path to the NIF.
-ignore_xref([{nameprep, 1}]).

-type jid() :: #jid{}.
-export_type([jid/0]).

%% RFC 7622 §3: each part is at most 1023 octets once prepared.
-define(MAX_PART, 1023).
%% Refuse to run stringprep on parts this long: no real address is, and it
%% bounds the work a hostile peer can make us do.
-define(MAX_RAW_PART, 4 * ?MAX_PART).

%%% Parsing and construction

%% @doc Parses "localpart@domainpart/resourcepart". The first '/' starts the
%% resourcepart; a '@' before it ends the localpart. A separator followed by
%% nothing ("@example.com", "example.com/") is an error, as are an empty
%% domainpart and any part that fails its stringprep profile.
-spec parse(binary()) -> {ok, jid()} | error.
parse(Bin) when is_binary(Bin) ->
    {Bare, Resource} = split_at(Bin, $/),
    case split_at(Bare, $@) of
        {Server, none} -> build(none, Server, Resource);
        {User, Server} -> build(User, Server, Resource)
    end.

%% Splits at the first Sep: {Before, After}, or {Bin, none} if there is
%% none. (A byte scan: binary:split/2 compiles its pattern on every call,
%% which cost more than the rest of parse/1.)
split_at(Bin, Sep) ->
    case position(Bin, Sep, 0) of
        nomatch ->
            {Bin, none};
        Pos ->
            <<Before:Pos/binary, _, After/binary>> = Bin,
            {Before, After}
    end.

position(<<C, _/binary>>, C, Pos) -> Pos;
position(<<_, Rest/binary>>, C, Pos) -> position(Rest, C, Pos + 1);
position(<<>>, _, _) -> nomatch.

%% @doc Builds a JID from parts already split; <<>> for an absent localpart
%% or resourcepart. The parts are prepared and checked as {@link parse/1}
%% does.
-spec make(binary(), binary(), binary()) -> {ok, jid()} | error.
make(User, Server, Resource)
  when is_binary(User), is_binary(Server), is_binary(Resource) ->
    build(absent_if_empty(User), Server, absent_if_empty(Resource)).

absent_if_empty(<<>>) -> none;
absent_if_empty(Part) -> Part.

build(User0, Server0, Resource0) ->
    case {part(fun nodeprep/1, User0), domain(Server0),
          part(fun resourceprep/1, Resource0)} of
        {{ok, User}, {ok, Server}, {ok, Resource}} ->
            {ok, #jid{user = User, server = Server, resource = Resource}};
        _ ->
            error
    end.

%% A localpart or resourcepart: absent, or non-empty both before and after
%% preparation (a part that preps to nothing, e.g. only U+00AD, is an error).
part(_Prep, none) ->
    {ok, <<>>};
part(_Prep, Raw) when Raw =:= <<>>; byte_size(Raw) > ?MAX_RAW_PART ->
    error;
part(Prep, Raw) ->
    case Prep(Raw) of
        error -> error;
        <<>> -> error;
        Out when byte_size(Out) > ?MAX_PART -> error;
        Out -> {ok, Out}
    end.

%% A domainpart: an IPv6 literal in brackets is taken as is; anything else
%% goes through nameprep, has ideographic full stops turned into '.', loses
%% one trailing '.', and must then be a sequence of non-empty labels whose
%% ASCII characters are letters, digits, '-' or '_' (nameprep itself lets
%% spaces, '@', ':' and control characters through).
domain(Raw) when byte_size(Raw) > ?MAX_RAW_PART ->
    error;
domain(<<$[, _/binary>> = Raw) ->
    AddrSize = byte_size(Raw) - 2,
    case Raw of
        <<$[, Addr:AddrSize/binary, $]>> when AddrSize > 0 ->
            case inet:parse_ipv6strict_address(binary_to_list(Addr)) of
                {ok, _} -> {ok, Raw};
                {error, _} -> error
            end;
        _ ->
            error
    end;
domain(Raw) ->
    case nameprep(Raw) of
        error ->
            error;
        Prepped ->
            Domain = strip_dot(ideographic_stops(Prepped)),
            case Domain =/= <<>> andalso byte_size(Domain) =< ?MAX_PART
                andalso valid_labels(Domain, 0) of
                true -> {ok, Domain};
                false -> error
            end
    end.

%% U+3002 IDEOGRAPHIC FULL STOP separates labels (nameprep's NFKC has
%% already turned U+FF0E and U+FF61 into '.' and U+3002). Only a non-ASCII
%% domain can hold it, and only then is binary:replace/4 worth its cost.
ideographic_stops(Domain) ->
    case name_canonical(Domain) of
        true -> Domain;
        false -> binary:replace(Domain, <<16#3002/utf8>>, <<".">>, [global])
    end.

strip_dot(<<>>) -> <<>>;
strip_dot(D) ->
    case binary:last(D) of
        $. -> binary:part(D, 0, byte_size(D) - 1);
        _ -> D
    end.

%% Len is the length of the current label so far.
valid_labels(<<>>, Len) -> Len > 0;
valid_labels(<<$., Rest/binary>>, Len) -> Len > 0 andalso valid_labels(Rest, 0);
valid_labels(<<C, Rest/binary>>, Len)
  when C >= $a, C =< $z; C >= $0, C =< $9; C =:= $-; C =:= $_; C >= 128 ->
    valid_labels(Rest, Len + 1);
valid_labels(<<_, _/binary>>, _) -> false.

%%% Rendering

%% @doc The textual form of a JID.
-spec to_binary(jid()) -> binary().
to_binary(#jid{user = U, server = S, resource = R}) ->
    Bare = case U of
               <<>> -> S;
               _ -> <<U/binary, $@, S/binary>>
           end,
    case R of
        <<>> -> Bare;
        _ -> <<Bare/binary, $/, R/binary>>
    end.

%% @doc The JID without its resource.
-spec bare(jid()) -> jid().
bare(#jid{} = J) -> J#jid{resource = <<>>}.

%%% Stringprep profiles with an ASCII fast path
%%
%% The fast path only recognizes ASCII strings the profile leaves unchanged
%% (the common case: clients mostly send lowercase names) and returns them
%% as they are; everything else, including strings that need case folding
%% or are invalid, goes to the NIF. Lowercasing in Erlang measured no faster
%% than the NIF, so the NIF does it.

%% @doc Nodeprep (RFC 3920 appendix A).
-spec nodeprep(binary()) -> binary() | error.
nodeprep(Bin) ->
    case node_canonical(Bin) of
        true -> Bin;
        false -> stringprep:nodeprep(Bin)
    end.

%% @doc A domainpart as a JID holds it: nameprep plus the checks nameprep
%% leaves out (labels of letters, digits, '-' and '_'; IPv6 literals in
%% brackets). For configured hosts and stream headers.
-spec domainprep(binary()) -> binary() | error.
domainprep(Bin) ->
    case domain(Bin) of
        {ok, D} -> D;
        error -> error
    end.

%% @doc Nameprep (RFC 3491).
-spec nameprep(binary()) -> binary() | error.
nameprep(Bin) ->
    case name_canonical(Bin) of
        true -> Bin;
        false -> stringprep:nameprep(Bin)
    end.

%% @doc Resourceprep (RFC 3920 appendix B).
-spec resourceprep(binary()) -> binary() | error.
resourceprep(Bin) ->
    case resource_canonical(Bin) of
        true -> Bin;
        false -> stringprep:resourceprep(Bin)
    end.

%% Nodeprep leaves an ASCII character unchanged unless it is A-Z (case
%% folded) or prohibited: space (C.1.1), controls (C.2.1) and "&'/:<>@
%% (RFC 3920 A.5).
node_canonical(<<C, Rest/binary>>)
  when C >= $a, C =< $z; C >= $0, C =< $9; C =:= $.; C =:= $-; C =:= $_ ->
    node_canonical(Rest);
node_canonical(<<C, Rest/binary>>)
  when C > 32, C < 127, C =/= $", C =/= $&, C =/= $', C =/= $/, C =/= $:,
       C =/= $<, C =/= $>, C =/= $@, (C < $A orelse C > $Z) ->
    node_canonical(Rest);
node_canonical(<<_, _/binary>>) ->
    false;
node_canonical(<<>>) ->
    true.

%% Nameprep changes no ASCII character but A-Z and prohibits none.
name_canonical(<<C, Rest/binary>>) when C < $A; C > $Z, C < 128 ->
    name_canonical(Rest);
name_canonical(<<_, _/binary>>) ->
    false;
name_canonical(<<>>) ->
    true.

%% Resourceprep maps no ASCII character and prohibits controls (C.2.1).
resource_canonical(<<C, Rest/binary>>) when C >= 32, C < 127 ->
    resource_canonical(Rest);
resource_canonical(<<_, _/binary>>) ->
    false;
resource_canonical(<<>>) ->
    true.
