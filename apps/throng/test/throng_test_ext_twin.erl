%% @doc A test extension module that answers the namespace of
%% throng_mod_version, to prove that two modules answering one namespace
%% stop the boot (extensions_SUITE:iq_namespace_conflict).
-module(throng_test_ext_twin).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, version/2]).

-spec options() -> throng_config_spec:spec().
options() -> #{}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() -> [{server, ?NS_VERSION, version}].

-spec hooks() -> [].
hooks() -> [].

-spec version(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
version(IQ, _Ctx) -> throng_stanza:iq_result(IQ).
