%% @doc Where Throng keeps its files: the data directory from the
%% configuration, resolved against the release root.
-module(throng_paths).

-export([data_dir/0, log_file/0, absolute/1]).

%% @doc The release root (RELEASE_ROOT, set by bin/throng), or the current
%% directory outside a release.
-spec root() -> file:filename().
root() ->
    case os:getenv("RELEASE_ROOT") of
        Dir when is_list(Dir), Dir =/= "" -> Dir;
        _ -> element(2, file:get_cwd())
    end.

-spec data_dir() -> file:filename().
data_dir() ->
    absolute(throng_config:get([data_dir])).

-spec log_file() -> file:filename().
log_file() ->
    case throng_config:get([log_file]) of
        <<>> -> filename:join([data_dir(), "log", "throng.log"]);
        F -> absolute(F)
    end.

%% @doc A configured path made absolute against the release root.
-spec absolute(binary() | string()) -> file:filename().
absolute(Path) ->
    filename:absname(unicode:characters_to_list(Path), root()).
