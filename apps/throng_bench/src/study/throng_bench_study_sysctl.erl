%% @doc The sysctls of a study's settings (net.* keys under /proc/sys):
%% check that they can be written, set them for one run and put the old
%% values back after it, whatever the run does. Before a value is changed
%% the old ones go to a journal file; it is removed once they are back. A
%% study killed in the middle of a run (kill -9, a power cut) leaves the
%% journal behind, and the next start of the study puts those values back
%% first (recover/2).
-module(throng_bench_study_sysctl).

-export([writable/2, read/2, with/4, recover/2]).

%% @doc ok when the sysctl can be read and written back (Root: /proc/sys).
-spec writable(file:filename(), binary()) -> ok | {error, iolist()}.
writable(Root, Name) ->
    Path = path(Root, Name),
    case file:read_file(Path) of
        {ok, Old} ->
            case file:write_file(Path, Old) of
                ok -> ok;
                {error, R} -> {error, io_lib:format("~ts is not writable here (~s)", [Path, R])}
            end;
        {error, R} -> {error, io_lib:format("~ts cannot be read (~s)", [Path, R])}
    end.

%% @doc A sysctl's value, without its trailing newline.
-spec read(file:filename(), binary()) -> {ok, binary()} | {error, file:posix()}.
read(Root, Name) ->
    case file:read_file(path(Root, Name)) of
        {ok, V} -> {ok, strip(V)};
        {error, _} = E -> E
    end.

%% @doc Set the sysctls [{Name, Value}], run F, put the old values back.
-spec with(file:filename(), file:filename(), [{binary(), binary()}], fun(() -> T)) -> T.
with(_Root, _Journal, [], F) -> F();
with(Root, Journal, Sys, F) ->
    Old = [{K, V} || {K, _} <- Sys, {ok, V} <- [read(Root, K)]],
    ok = file:write_file(Journal, term_to_binary(Old)),
    try
        [ok = file:write_file(path(Root, K), V) || {K, V} <- Sys],
        F()
    after
        put_back(Root, Old),
        _ = file:delete(Journal)
    end.

%% @doc Put back what a journal left by an interrupted run holds; returns
%% the values put back ([] without a journal).
-spec recover(file:filename(), file:filename()) -> [{binary(), binary()}].
recover(Root, Journal) ->
    case file:read_file(Journal) of
        {ok, Bin} ->
            Old = binary_to_term(Bin, [safe]),
            put_back(Root, Old),
            ok = file:delete(Journal),
            Old;
        {error, enoent} -> []
    end.

put_back(Root, Old) ->
    _ = [file:write_file(path(Root, K), V) || {K, V} <- Old],
    ok.

path(Root, Name) ->
    filename:join(Root, lists:flatten(string:replace(binary_to_list(Name), ".", "/", all))).

strip(V) -> string:trim(V, trailing, "\n").
