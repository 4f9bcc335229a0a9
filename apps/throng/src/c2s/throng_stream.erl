%% @doc The stream-level XML of a c2s connection (RFC 6120 §4–§7): the
%% stream header, stream features, stream errors, and the checks on the
%% initiating entity's stream header. Pure functions.
-module(throng_stream).

-include("throng.hrl").

-export([check_header/3, header/2, close/0, error/2, features/1, new_id/0, sasl2_success/4]).

-type features_opts() :: #{stage := pre_auth | authenticated,
                           tls := boolean(),
                           starttls := disabled | optional | required,
                           mechanisms := [binary()],
                           channel_bindings => [binary()],
                           sasl2 => iodata(),
                           extra := iodata(),
                           sm := boolean()}.
-export_type([features_opts/0]).

%% @doc Checks the client's stream header (name, namespaces, version, host).
%% Returns the domain to serve, or the stream error condition to send.
-spec check_header(binary(), [{binary(), binary()}], [binary()]) ->
    {ok, binary()} | {error, atom(), binary()}.
check_header(Name, Attrs, Hosts) ->
    {Prefix, Local} = case binary:split(Name, <<":">>) of
                          [P, L] -> {P, L};
                          [L] -> {<<>>, L}
                      end,
    NsAttr = case Prefix of
                 <<>> -> <<"xmlns">>;
                 _ -> <<"xmlns:", Prefix/binary>>
             end,
    Default = proplists:get_value(<<"xmlns">>, Attrs),
    case proplists:get_value(NsAttr, Attrs) of
        undefined when Prefix =/= <<>> ->
            {error, 'bad-namespace-prefix', <<"the stream prefix is not declared">>};
        ?NS_STREAM when Local =:= <<"stream">> ->
            if
                Default =/= ?NS_CLIENT ->
                    {error, 'invalid-namespace', <<"the default namespace must be jabber:client">>};
                true ->
                    check_version(Attrs, Hosts)
            end;
        _ ->
            {error, 'invalid-namespace', <<"not an XMPP stream header">>}
    end.

check_version(Attrs, Hosts) ->
    Major = case proplists:get_value(<<"version">>, Attrs) of
                undefined -> 0;
                V -> case string:to_integer(V) of
                         {N, _} when is_integer(N) -> N;
                         _ -> 0
                     end
            end,
    if
        Major < 1 -> {error, 'unsupported-version', <<"version 1.0 or later is required">>};
        true -> check_host(proplists:get_value(<<"to">>, Attrs), Hosts)
    end.

check_host(undefined, [Host | _]) ->
    {ok, Host};
check_host(To, Hosts) ->
    case throng_jid:domainprep(To) of
        error -> {error, 'host-unknown', <<"unknown domain">>};
        Host ->
            case lists:member(Host, Hosts) of
                true -> {ok, Host};
                false -> {error, 'host-unknown', <<"this server does not serve that domain">>}
            end
    end.

%% @doc The response stream header.
-spec header(binary(), binary()) -> iodata().
header(Id, Server) ->
    ["<?xml version='1.0'?><stream:stream xmlns='", ?NS_CLIENT,
     "' xmlns:stream='", ?NS_STREAM, "' id='", Id, "' from='", throng_xml:escape_attr(Server),
     "' version='1.0' xml:lang='en'>"].

-spec close() -> iodata().
close() ->
    <<"</stream:stream>">>.

%% @doc A stream error element (RFC 6120 §4.9), to be followed by close/0.
%% {'see-other-host', "host:port"} carries the address in the condition
%% element (§4.9.3.19).
-spec error(atom() | {'see-other-host', binary()}, binary()) -> iodata().
error(Cond, Text) ->
    ["<stream:error>",
     case Cond of
         {'see-other-host', Where} ->
             ["<see-other-host xmlns='", ?NS_STREAM_ERRORS, "'>", throng_xml:escape_text(Where),
              "</see-other-host>"];
         _ ->
             ["<", atom_to_binary(Cond), " xmlns='", ?NS_STREAM_ERRORS, "'/>"]
     end,
     case Text of
         <<>> -> [];
         _ -> ["<text xmlns='", ?NS_STREAM_ERRORS, "' xml:lang='en'>",
               throng_xml:escape_text(Text), "</text>"]
     end,
     "</stream:error>"].

%% @doc The stream features for the stage of negotiation.
-spec features(features_opts()) -> iodata().
features(#{stage := pre_auth, tls := TLS, starttls := StartTLS, mechanisms := Mechs,
           extra := Extra} = Opts) ->
    OfferTLS = not TLS andalso StartTLS =/= disabled,
    MustTLS = not TLS andalso StartTLS =:= required,
    ["<stream:features>",
     [["<starttls xmlns='", ?NS_TLS, "'>", [<<"<required/>">> || MustTLS], "</starttls>"]
      || OfferTLS],
     [["<mechanisms xmlns='", ?NS_SASL, "'>",
       [["<mechanism>", M, "</mechanism>"] || M <- Mechs], "</mechanisms>"]
      || not MustTLS],
     %% XEP-0388 SASL2 (with Bind2 and FAST inline), when offered.
     [maps:get(sasl2, Opts, []) || not MustTLS],
     %% XEP-0440: the channel binding types the -PLUS mechanisms accept.
     [["<sasl-channel-binding xmlns='", ?NS_SASL_CB, "'>",
       [["<channel-binding type='", T, "'/>"] || T <- CBs], "</sasl-channel-binding>"]
      || CBs <- [maps:get(channel_bindings, Opts, [])], CBs =/= [], not MustTLS],
     %% What extension modules add (in-band registration) needs TLS first
     %% when TLS is required.
     [Extra || not MustTLS],
     "</stream:features>"];
features(#{stage := authenticated, sm := SM, extra := Extra}) ->
    ["<stream:features><bind xmlns='", ?NS_BIND, "'/>",
     "<session xmlns='", ?NS_SESSION, "'><optional/></session>",
     Extra, "<sub xmlns='", ?NS_PREAPPROVAL, "'/>",
     [["<sm xmlns='", ?NS_SM, "'/>"] || SM],
     "</stream:features>"].

%% @doc A fresh random stream id.
-spec new_id() -> binary().
new_id() ->
    base64:encode(crypto:strong_rand_bytes(12)).

%% @doc A SASL2 <success/> (XEP-0388): the additional data, the
%% authorization identifier, what inline features answered (XEP-0198
%% <resumed/> or <failed/>, XEP-0386 <bound/>), the XEP-0484 token.
-spec sasl2_success(iodata(), binary(), iodata(), iodata()) -> iodata().
sasl2_success(Additional, Identifier, Inline, Token) ->
    ["<success xmlns='", ?NS_SASL2, "'>", Additional,
     "<authorization-identifier>", throng_xml:escape_text(Identifier), "</authorization-identifier>",
     Inline, Token, "</success>"].
