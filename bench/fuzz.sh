#!/bin/sh
# Fuzzes Throng: N inputs in all (default 1,000,000), nine tenths through the
# XML stream parser in the load generator's VM and one tenth as whole client
# sessions over real sockets to a release node started here (its own config,
# data, node name and ports; users user1..user1000, password "password").
# Inputs are mutated client sessions (throng-bench fuzz, docs/bench.md).
#
#   bench/fuzz.sh [N] [SEED]
#     SOCKET_SHARE: the socket-level share in percent (default 10)
#     TIME_LIMIT:   stop after this long in all (default 30m)
#     OUT:          results directory (default /tmp/throng-fuzz.XXXXXX)
#     NICE:         nice level of the fuzzer and the node (default 10)
#     KNOWN:        failure kinds counted apart, not failing the run (e.g.
#                   "reset_silently": a server issue already reported)
#
# Failures: a parser crash, loop or malformed result; a connection the
# server ends without a stream error or a well-formed close; an error line
# in the server's log; processes left over at the end. Each is saved as a
# reproducer in OUT/reproducers (replay with
# bin/throng-bench fuzz --replay FILE [--port P]). Exit status 0: none found.
set -eu
N=${1:-1000000}
SEED=${2:-$(date +%s)}
SHARE=${SOCKET_SHARE:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
REL="${THRONG_REL:-$ROOT/_build/default/rel/throng}"
[ -x "$REL/bin/throng" ] || { echo "build the release first: make release" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d /tmp/throng-fuzz.XXXXXX)}
mkdir -p "$OUT"
WORK="$OUT/server"
PORT=${PORT:-25322}
STATS_PORT=${STATS_PORT:-25381}
SOCKET=$((N * SHARE / 100))
PARSER=$((N - SOCKET))
export THRONG_NODE=throngfuzz@127.0.0.1 THRONG_RUN_DIR="$WORK" THRONG_CONFIG="$WORK/throng.yml"
rm -rf "$WORK"; mkdir -p "$WORK"
# Cheap logins (16 PBKDF2 iterations), resumable sessions that go after 2 s
# (so the leak check can wait for every session to end), no delay after
# failed logins (every input comes from 127.0.0.1), info-level log (every
# stream error is logged; errors are what the fuzzer looks for).
cat > "$THRONG_CONFIG" <<YML
hosts: [localhost]
data_dir: "$WORK/data"
loglevel: info
listen:
  - port: $PORT
    starttls: optional
auth:
  max_failure_delay: 0
stream_management:
  resume_timeout: 2
stats:
  port: $STATS_PORT
YML
cleanup() { "$REL/bin/throng" stop >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM
nice -n "${NICE:-10}" "$REL/bin/throng" start >&2
"$REL/bin/throng" bulk-register localhost 1000 password user 18 16 >&2
nice -n "${NICE:-10}" "$ROOT/bin/throng-bench" fuzz --seed "$SEED" --parser "$PARSER" --socket "$SOCKET" \
    --port "$PORT" --users 1000 --stats-port "$STATS_PORT" --server-log "$WORK/data/log/throng.log" \
    --time-limit "${TIME_LIMIT:-30m}" --out "$OUT" \
    $(for k in ${KNOWN:-}; do printf ' --known %s' "$k"; done) && status=0 || status=$?
echo "results: $OUT/summary.json, reproducers: $OUT/reproducers, server log: $WORK/data/log/throng.log"
exit $status
