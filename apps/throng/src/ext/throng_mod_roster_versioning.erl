%% @doc Roster versioning (RFC 6121 §2.6): the server advertises the
%% `rosterver' stream feature and stamps roster results and pushes with the
%% roster's version; a client that already holds the current version gets an
%% empty result instead of the whole roster. Without this module every
%% roster get returns the whole roster and no 'ver' is sent.
-module(throng_mod_roster_versioning).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, stream_features/2]).
-export([roster_version/2]).
%% Hook named in hooks/0, run through throng_hooks.
-ignore_xref([{roster_version, 2}]).

-spec options() -> throng_config_spec:spec().
options() ->
    #{}.

-spec iq_handlers() -> [].
iq_handlers() ->
    [].

-spec hooks() -> [{throng_hooks:event(), integer(), atom()}].
hooks() ->
    [{roster_version, 50, roster_version}].

-spec stream_features(pre_auth | authenticated, binary()) -> iodata().
stream_features(authenticated, _Host) ->
    ["<ver xmlns='", ?NS_ROSTERVER, "'/>"];
stream_features(pre_auth, _Host) ->
    [].

%% @doc Hook: the 'ver' to put on a roster result or push.
-spec roster_version(undefined | binary(), #{version := non_neg_integer()}) -> {ok, binary()}.
roster_version(_Acc, #{version := V}) ->
    {ok, integer_to_binary(V)}.
