#!/bin/sh
# Memory per idle session: (server RSS with N sessions connected - server
# RSS with the same N users registered but offline) / N. Users have
# 18-contact mutual rosters; the client mix is the Erlang'07 study's.
#
#   [EXTRA_CONFIG="yaml lines"] [ITERATIONS=4096] [TLS=starttls] [RESTART=1] bench/memory.sh [N]
#       (default 15000; N must stay below ~19,000 because one load process
#       holds every socket)
#
# TLS=starttls: every client secures its stream with STARTTLS (the
# listener requires it; OTP ssl on the client side, in the load VM).
#
# Starts its own Throng node from the release (make release) with a fresh
# data directory on port 25222, so it does not touch a running server.
set -eu
N=${1:-15000}
SETTLE=${SETTLE:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REL="${THRONG_REL:-$ROOT/_build/default/rel/throng}"   # THRONG_REL: another release (bench/pair.sh)
[ -x "$REL/bin/throng" ] || { echo "build the release first: make release" >&2; exit 1; }
. "$ROOT/bench/fresh_release.sh"
fresh_release "$ROOT" "$REL" || exit 1
WORK=$(mktemp -d /tmp/throng-membench.XXXXXX)
PORT=25222
export THRONG_NODE=throngmem@127.0.0.1 THRONG_RUN_DIR="$WORK" THRONG_CONFIG="$WORK/throng.yml"
cat > "$THRONG_CONFIG" <<YML
hosts: [localhost]
data_dir: "$WORK/data"
loglevel: warning
listen:
  - port: $PORT
    starttls: $( [ "${TLS:-}" = starttls ] && echo required || echo disabled )
${LISTEN_EXTRA:-}
stats:
  port: 0
${EXTRA_CONFIG:-}
YML
cleanup() { "$REL/bin/throng" stop >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT INT TERM
"$REL/bin/throng" start
"$REL/bin/throng" bulk-register localhost "$N" password user 18 "${ITERATIONS:-4096}"
if [ "${RESTART:-1}" = 1 ]; then
    # The baseline is a server that boots with its N accounts, as a
    # production server does: registering them in the running node leaves
    # its allocators holding (or having returned) memory that the sessions
    # then reuse or not, which moved the figure by up to 1.5 KB per session
    # between runs of one build. RESTART=0 measures without the restart.
    "$REL/bin/throng" stop >/dev/null
    "$REL/bin/throng" start
fi
PID=$(cat "$WORK/throng.pid")
# The load runs in its own BEAM so that its memory is not counted.
BEAM_PID=$(pgrep -P "$PID" beam.smp || echo "$PID")
erlc -o "$WORK" "$ROOT/bench/membench.erl"
# membench reads /proc with throng_lib's throng_proc_sample.
# (This checkout's build first: the release measured may be older than throng_lib.)
LIB=$(ls -d "$ROOT"/_build/default/lib/throng_lib/ebin "$REL"/lib/throng_lib-*/ebin 2>/dev/null | head -n 1)
MEMBENCH_TLS="${TLS:-}" erl -noshell -name membench@127.0.0.1 -setcookie "$(cat "$WORK/cookie")" -pa "$WORK" -pa "$LIB" \
    -eval "membench:main([\"$THRONG_NODE\", \"$BEAM_PID\", \"$N\", \"$PORT\", \"$SETTLE\"])"
