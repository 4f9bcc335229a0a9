#!/bin/sh
# The whole test suite, as `make test` and CI run it:
#   unit tests (EUnit, PropEr), Common Test suites against the real server,
#   xref, the configuration reference check, then end-to-end tests of the
#   release with real third-party clients (scripts/e2e.sh) with Dialyzer
#   running beside them.
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
step "configuration reference is in sync with the option table"
scripts/gen_config_doc.escript --check docs/configuration.md
step "release"
rebar3 release
# Dialyzer (about 3 minutes on a fresh machine, most of it on one core)
# runs beside the end-to-end tests, which test the release (a copy: relx
# dev_mode is off) and mostly wait on sockets; its output follows theirs.
step "end-to-end tests, Dialyzer beside them"
dlog=_build/dialyzer.log
rebar3 dialyzer > "$dlog" 2>&1 &
dpid=$!
trap 'kill "$dpid" 2>/dev/null || true' EXIT INT TERM
erc=0
scripts/e2e.sh || erc=$?
drc=0
wait "$dpid" || drc=$?
trap - EXIT INT TERM
step "dialyzer"
cat "$dlog"
[ "$drc" -eq 0 ] || { echo "dialyzer failed (exit status $drc)"; exit 1; }
[ "$erc" -eq 0 ] || { echo "end-to-end tests failed"; exit 1; }
printf '\nAll tests passed.\n'
