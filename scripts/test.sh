#!/bin/sh
# The whole test suite, as `make test` and CI run it:
#   unit tests (EUnit, PropEr), Common Test suites against the real server,
#   xref and Dialyzer, the configuration reference check, then end-to-end
#   tests of the release with real third-party clients (scripts/e2e.sh).
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh --test
# Bursts of connects in the tests should queue, not be reset.
sysctl -q -w net.core.somaxconn=65535 2>/dev/null || true

step() { printf '\n==> %s\n' "$*"; }

step "compile"
# Debian names some library directories differently from their applications
# (p1_tls-* holds fast_tls): link them so relx and Dialyzer find them.
scripts/syslibs.sh
export ERL_LIBS="$PWD/_build/syslibs"
rebar3 compile
step "unit tests (EUnit + PropEr)"
rebar3 eunit
step "Common Test suites"
# A failure also names its cases at the end, where a CI log's tail shows them.
rebar3 ct || { scripts/ct_failures.sh; exit 1; }
step "xref"
rebar3 xref
step "layer rule: who may call whom (docs/architecture.md), no call cycles"
scripts/check_layers.escript
step "dialyzer"
rebar3 dialyzer
step "configuration reference is in sync with the option table"
scripts/gen_config_doc.escript --check docs/configuration.md
step "release + end-to-end tests"
rebar3 release
scripts/e2e.sh
printf '\nAll tests passed.\n'
