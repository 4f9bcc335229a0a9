#!/usr/bin/env escript
%% Checks the layer rule of docs/architecture.md with xref queries over the
%% compiled server (apps/throng): a module may call modules of its own layer
%% and of the layers its layer may use (LAYERS below), and no modules call
%% each other in a cycle. Prints every breach; exits 1 if there is one.
%%   scripts/check_layers.escript            check
%%   scripts/check_layers.escript --edges    print the calls between layers
-mode(compile).

%% Bottom first. A layer may call the layers listed with it.
-define(LAYERS,
        [{xml, []},
         {config, [xml]},
         {core, [config, xml]},
         {auth, [core, config, xml]},
         {storage, [core, config, xml]},
         {net, [core, config, xml]},
         {im, [storage, auth, core, config, xml]},
         {ext, [im, storage, auth, core, config, xml]},
         {c2s, [im, net, storage, auth, core, config, xml]},
         {cluster, [im, net, storage, auth, core, config, xml]},
         {admin, [cluster, c2s, ext, im, net, storage, auth, core, config, xml]},
         {app, [admin, cluster, c2s, ext, im, net, storage, auth, core, config, xml]}]).

main(Args) ->
    Root = filename:dirname(filename:dirname(filename:absname(escript:script_name()))),
    Ebin = filename:join([Root, "_build", "default", "lib", "throng", "ebin"]),
    Src = filename:join([Root, "apps", "throng", "src"]),
    Layer = layer_map(Src),
    {ok, _} = xref:start(?MODULE, [{xref_mode, functions}]),
    ok = xref:set_default(?MODULE, [{warnings, false}, {verbose, false}]),
    {ok, _} = xref:add_directory(?MODULE, Ebin),
    Mods = maps:keys(Layer),
    %% ME: the module call graph; keep calls between two of our modules.
    {ok, Edges0} = xref:q(?MODULE, "ME"),
    Edges = [{A, B} || {A, B} <- Edges0, A =/= B, maps:is_key(A, Layer), maps:is_key(B, Layer)],
    {ok, Comps} = xref:q(?MODULE, "components ME"),
    Cycles = [lists:sort(C) || C <- Comps, length(C) > 1,
                               lists:all(fun(M) -> lists:member(M, Mods) end, C)],
    case Args of
        ["--edges"] -> print_edges(Edges, Layer), halt(0);
        _ -> ok
    end,
    Allowed = maps:from_list(?LAYERS),
    Breaches = [{A, maps:get(A, Layer), B, maps:get(B, Layer)}
                || {A, B} <- Edges,
                   maps:get(A, Layer) =/= maps:get(B, Layer),
                   not lists:member(maps:get(B, Layer), maps:get(maps:get(A, Layer), Allowed))],
    [io:format("layer breach: ~s (~s) calls ~s (~s)~n", [A, LA, B, LB])
     || {A, LA, B, LB} <- lists:usort(Breaches)],
    [io:format("call cycle: ~s~n", [lists:join(" <-> ", [atom_to_list(M) || M <- C])])
     || C <- Cycles],
    case Breaches =:= [] andalso Cycles =:= [] of
        true ->
            io:format("layers: ~b modules, ~b calls between modules, no breach, no cycle~n",
                      [length(Mods), length(Edges)]),
            halt(0);
        false ->
            halt(1)
    end.

%% Module -> layer: its folder under apps/throng/src (the root is `app').
layer_map(Src) ->
    Files = filelib:wildcard(filename:join(Src, "**/*.erl")),
    maps:from_list([{list_to_atom(filename:basename(F, ".erl")), folder(Src, F)} || F <- Files]).

folder(Src, File) ->
    case filename:split(string:prefix(filename:dirname(File), Src)) of
        ["/", Dir | _] -> list_to_atom(Dir);
        [Dir | _] when Dir =/= "/" -> list_to_atom(Dir);
        _ -> app
    end.

print_edges(Edges, Layer) ->
    Pairs = lists:usort([{maps:get(A, Layer), maps:get(B, Layer)} || {A, B} <- Edges]),
    [io:format("~s -> ~s~n", [LA, LB]) || {LA, LB} <- Pairs, LA =/= LB].
