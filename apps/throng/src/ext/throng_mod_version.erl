%% @doc XEP-0092 Software Version: the server's name and version, and, when
%% `show_os' is on, the operating system it runs on.
-module(throng_mod_version).
-behaviour(throng_ext).

-include("throng.hrl").

-export([options/0, iq_handlers/0, hooks/0, disco_features/1]).
-export([version/2]).
%% IQ handler named in iq_handlers/0, called through the throng_ext registry.
-ignore_xref([{version, 2}]).

-spec options() -> throng_config_spec:spec().
options() ->
    #{show_os => #{type => boolean, default => false,
                   doc => "Include the operating system (e.g. \"Linux 6.1.0\") in the "
                          "answer. Off by default: it tells an attacker what to aim at."}}.

-spec iq_handlers() -> [{throng_ext:iq_scope(), binary(), atom()}].
iq_handlers() ->
    [{server, ?NS_VERSION, version}].

-spec hooks() -> [].
hooks() ->
    [].

-spec disco_features(binary()) -> [binary()].
disco_features(_Host) ->
    [?NS_VERSION].

%% @doc Answers a version query to the server.
-spec version(#xmlel{}, throng_ext:iq_ctx()) -> #xmlel{}.
version(IQ, #{host := Host}) ->
    case throng_stanza:type(IQ) of
        <<"get">> ->
            {ok, Vsn} = application:get_key(throng, vsn),
            OS = [text_el(<<"os">>, os()) || throng_ext:opt(Host, ?MODULE, show_os)],
            throng_stanza:iq_result(
              IQ, [#xmlel{name = <<"query">>, attrs = [{<<"xmlns">>, ?NS_VERSION}],
                          children = [text_el(<<"name">>, <<"Throng">>),
                                      text_el(<<"version">>, list_to_binary(Vsn)) | OS]}]);
        _ ->
            throng_stanza:error_reply(IQ, 'service-unavailable')
    end.

os() ->
    {_Family, Name} = os:type(),
    Release = case os:version() of
                  {Ma, Mi, Pa} -> io_lib:format(" ~b.~b.~b", [Ma, Mi, Pa]);
                  V when is_list(V) -> [" ", V]
              end,
    unicode:characters_to_binary([string:titlecase(atom_to_list(Name)), Release]).

text_el(Name, Text) ->
    #xmlel{name = Name, children = [{xmlcdata, Text}]}.
