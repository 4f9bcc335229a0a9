#!/bin/sh
# What the message archive (XEP-0313) costs in the embedded store: RAM and
# disk per archived message, durable archive writes per second (1 and 50
# writers), page queries in a 20,000-message archive. Runs the compiled
# server (rebar3 compile) in a node of its own with a fresh data directory;
# touches no running server.
#
#   bench/mam.sh [MESSAGES] [USERS]      (default 100000 over 1000 users)
set -eu
N=${1:-100000}
USERS=${2:-1000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# Not /tmp/throng-*: code:priv_dir(throng) would take it for the application.
WORK=$(mktemp -d /tmp/mambench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT INT TERM
export ERL_LIBS="$ROOT/_build/syslibs:$ROOT/_build/default/lib"
erlc -I "$ROOT/apps" -o "$WORK" "$ROOT/bench/mambench.erl"
erl -noshell -pa "$WORK" -eval "mambench:main([\"$WORK/data\", \"$N\", \"$USERS\"])"
