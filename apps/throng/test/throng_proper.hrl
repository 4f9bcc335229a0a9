%% PropEr's macros for the test modules: Debian's erlang-proper ships no
%% proper.hrl. The forms the tests use, each as PropEr defines it. A module
%% that uses ?LET includes this before eunit.hrl, whose ?LET is another
%% thing (eunit.hrl defines its own only when none is defined yet).
-define(FORALL(X, Gen, Prop), proper:forall(Gen, fun(X) -> Prop end)).
-ifndef(LET).
-define(LET(X, Gen, Expr), proper_types:bind(Gen, fun(X) -> Expr end, false)).
-endif.
-define(BIND(X, Gen, Expr), proper_types:bind(Gen, fun(X) -> Expr end, false)).
-define(SUCHTHAT(X, Gen, Cond), proper_types:add_constraint(Gen, fun(X) -> Cond end, true)).
-define(SIZED(S, Gen), proper_types:sized(fun(S) -> Gen end)).
-define(LAZY(Gen), proper_types:lazy(fun() -> Gen end)).
