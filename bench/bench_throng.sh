#!/bin/sh
# Runs Throng from the release (make release) privately for throng-bench,
# like bench_prosody.sh and bench_ejabberd.sh: its own config, data, node
# name and port, with users user1..userN (password "password") whose rosters
# follow throng-bench's `neighbours' rule (bin/throng bulk-register).
#
#   bench/bench_throng.sh start DIR [PORT] [USERS] [CONTACTS] [ITERATIONS]  -> prints the pid
#   bench/bench_throng.sh stop DIR
#   bench/bench_throng.sh counters DIR   -> the server's counters (name value)
#
# Defaults: port 15222, 1000 users, 18 contacts, 4096 PBKDF2 iterations
# (auth.scram_iterations' default; the SCRAM keys a PLAIN login must derive).
# THRONG_LISTEN_EXTRA: more YAML lines for the listener (4-space indented),
# e.g. "    recv_buffer: 1024". THRONG_CONFIG_EXTRA: more top-level YAML
# lines, e.g. a `modules:' map. THRONG_BENCH_NODE: the node's name (default
# throngbench@127.0.0.1; `start' first stops a node of that name).
set -eu
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR [PORT] [USERS] [CONTACTS] [ITERATIONS]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd -P)
rel="${THRONG_REL:-$root/_build/default/rel/throng}/bin/throng"   # THRONG_REL: another release (bench/pair.sh)
[ -x "$rel" ] || { echo "$0: build the release first (make release)" >&2; exit 2; }
export THRONG_NODE="${THRONG_BENCH_NODE:-throngbench@127.0.0.1}" THRONG_RUN_DIR="$dir" THRONG_CONFIG="$dir/throng.yml"
case "$cmd" in
start)
    port=${3:-15222}; users=${4:-1000}; contacts=${5:-18}; iterations=${6:-4096}
    "$rel" stop >/dev/null 2>&1 || true
    rm -rf "$dir"; mkdir -p "$dir"
    cat > "$THRONG_CONFIG" <<YML
hosts: [localhost]
data_dir: "$dir/data"
loglevel: warning
listen:
  - port: $port
    starttls: optional
${THRONG_LISTEN_EXTRA:-}
stats:
  port: 0
${THRONG_CONFIG_EXTRA:-}
YML
    "$rel" start >&2
    "$rel" bulk-register localhost "$users" password user "$contacts" "$iterations" >&2
    # Settle before the run samples the starting RSS: the bulk registration's
    # transaction log goes into the tables, garbage is collected.
    "$rel" gc >&2
    sleep 5
    cat "$dir/throng.pid"
    ;;
stop)
    "$rel" stop >&2
    ;;
counters)
    "$rel" counters
    ;;
*)
    echo "usage: $0 start|stop DIR ..." >&2; exit 2 ;;
esac
