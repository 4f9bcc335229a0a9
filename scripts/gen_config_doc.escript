#!/usr/bin/env escript
%% Renders docs/configuration.md from the option table in
%% apps/throng/src/config/throng_config_spec.erl (the one place options are
%% declared). With --check FILE, exits 1 if FILE differs from the rendering.
%%   scripts/gen_config_doc.escript > docs/configuration.md
%%   scripts/gen_config_doc.escript --check docs/configuration.md
-mode(compile).

main(Args) ->
    Root = filename:dirname(filename:dirname(filename:absname(escript:script_name()))),
    Ebin = filename:join([Root, "_build", "default", "lib", "throng", "ebin"]),
    true = code:add_patha(Ebin),
    Doc = iolist_to_binary(render(throng_config_spec:spec())),
    case Args of
        [] -> io:put_chars(Doc);
        ["--check", File] ->
            case file:read_file(File) of
                {ok, Doc} -> io:format("~s is up to date~n", [File]);
                _ ->
                    io:format(standard_error, "~s is out of date: run make docs~n", [File]),
                    halt(1)
            end
    end.

render(Spec) ->
    ["# Configuration\n\n",
     "<!-- Generated from apps/throng/src/config/throng_config_spec.erl by scripts/gen_config_doc.escript"
     " (make docs). Do not edit by hand. -->\n\n",
     "Throng reads one YAML file: the path in `THRONG_CONFIG`, or `etc/throng.yml` in the release "
     "(`bin/throng` sets it). Every option below is optional and has the default shown. An unknown "
     "option or a wrong value stops the server at boot with a message naming the option, the value "
     "and what was expected, for example:\n\n",
     "```\nthrong: cannot start: config: /etc/throng.yml: listen[0].port: expected an integer "
     "from 0 to 65535, got 70000\n```\n\n",
     "`bin/throng check-config` validates the file without starting anything.\n\n",
     "A minimal file:\n\n```yaml\nhosts: [example.org]\nlisten:\n  - port: 5222\n    ip: \"0.0.0.0\"\n"
     "    starttls: required\ncertfile: /etc/throng/example.org.pem\nkeyfile: /etc/throng/example.org.key\n```\n\n",
     section("Top level", "", Spec)].

section(Title, Prefix, Spec) ->
    section(Title, Prefix, Spec, "###").

%% Heading: the level of the headings of nested sections ("###"; below a
%% module's heading, "#####").
section(Title, Prefix, Spec, Heading) ->
    Keys = lists:sort(maps:keys(Spec)),
    Simple = [K || K <- Keys, not nested(maps:get(K, Spec))],
    Nested = [K || K <- Keys, nested(maps:get(K, Spec))],
    ["## ", Title, "\n\n",
     case Simple of
         [] -> [];
         _ -> ["| option | type | default | meaning |\n|---|---|---|---|\n",
               [row(Prefix, K, maps:get(K, Spec)) || K <- Simple], "\n"]
     end,
     [sub(Prefix, K, maps:get(K, Spec), Heading) || K <- Nested]].

nested(#{type := {section, _}}) -> true;
nested(#{type := {list_of, _}}) -> true;
nested(#{type := modules}) -> true;
nested(_) -> false.

sub(Prefix, K, #{type := {section, S}, doc := Doc}, Heading) ->
    Name = Prefix ++ atom_to_list(K),
    [Heading, " `", Name, "`\n\n", Doc, "\n\n",
     tl(tl(tl(section("", Name ++ ".", S, Heading))))];
sub(Prefix, K, #{type := modules, doc := Doc} = O, _Heading) ->
    Name = Prefix ++ atom_to_list(K),
    Defaults = lists:sort(maps:keys(maps:get(default, O, #{}))),
    ["### `", Name, "`\n\n", Doc, "\n\n",
     case Defaults of
         [] -> [];
         _ -> ["Enabled when the key is absent: ",
               lists:join(", ", [["`", atom_to_list(D), "`"] || D <- Defaults]), ".\n\n"]
     end,
     [module_doc(Name, M, Mod) || {M, Mod} <- throng_config_spec:modules(), Prefix =:= ""]];
sub(Prefix, K, #{type := {list_of, S}, doc := Doc}, Heading) ->
    Name = Prefix ++ atom_to_list(K),
    [Heading, " `", Name, "` (a list)\n\n", Doc, "\n\n",
     tl(tl(tl(section("", Name ++ "[].", S, Heading))))].

module_doc(Name, M, Mod) ->
    Opts = Mod:options(),
    ["#### `", Name, ".", atom_to_list(M), "` (", atom_to_list(Mod), ")\n\n",
     case maps:size(Opts) of
         0 -> "No options.\n\n";
         _ -> tl(tl(tl(section("", Name ++ "." ++ atom_to_list(M) ++ ".", Opts, "#####"))))
     end].

row(Prefix, K, #{type := T, doc := Doc} = O) ->
    ["| `", Prefix, atom_to_list(K), "` | ", type(T), " | ",
     case O of #{default := D} -> ["`", default(D), "`"]; _ -> "required" end,
     " | ", Doc, " |\n"].

type(boolean) -> "boolean";
type(string) -> "string";
type(path) -> "path";
type(ip) -> "IP address";
type(domain) -> "domain";
type(bare_jid) -> "bare JID";
type(host_port) -> "host:port";
type(node) -> "node name";
type({int, Min, infinity}) -> io_lib:format("integer &ge; ~b", [Min]);
type({int, Min, Max}) -> io_lib:format("integer ~b..~b", [Min, Max]);
type({int_or_infinity, Min}) -> io_lib:format("integer &ge; ~b or `infinity`", [Min]);
type({enum, As}) -> lists:join(" \\| ", [atom_to_list(A) || A <- As]);
type({list, T}) -> ["list of ", type(T)].

default(<<>>) -> "\"\"";
default(B) when is_binary(B) -> B;
default(A) when is_atom(A) -> atom_to_list(A);
default(I) when is_integer(I) -> integer_to_list(I);
default(T) when is_tuple(T) -> inet:ntoa(T);
default(L) when is_list(L) -> ["[", lists:join(", ", [default(X) || X <- L]), "]"].
