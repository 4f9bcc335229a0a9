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
# THRONG_BENCH_SETTLE: seconds `start' waits after the registration before it
# prints the pids (default 5: the starting RSS a run samples has settled;
# the e2e test's study, which asserts no memory figure, uses 1).
# THRONG_BENCH_NODES=N (default 1): a cluster of N nodes on ports PORT ..
# PORT+N-1, node 1 as above (DIR), node I named NAMEnI@HOST in DIR/nodeI,
# all with one cookie, seeds and database on node 1 (docs/clustering.md);
# the users are registered once; `start' prints the N pids, one a line, and
# `stop DIR' stops every node of the cluster started in DIR.
set -eu
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR [PORT] [USERS] [CONTACTS] [ITERATIONS]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd -P)
rel="${THRONG_REL:-$root/_build/default/rel/throng}/bin/throng"   # THRONG_REL: another release (bench/pair.sh)
[ -x "$rel" ] || { echo "$0: build the release first (make release)" >&2; exit 2; }
. "$root/bench/fresh_release.sh"
[ "$cmd" = stop ] || fresh_release "$root" "$(dirname "$(dirname "$rel")")" || exit 2
base="${THRONG_BENCH_NODE:-throngbench@127.0.0.1}"
# node I's name and directory (node 1: the name given, DIR)
node_name() { if [ "$1" = 1 ]; then echo "$base"; else echo "${base%@*}n$1@${base#*@}"; fi; }
node_dir() { if [ "$1" = 1 ]; then echo "$dir"; else echo "$dir/node$1"; fi; }
# bin/throng for node I: on I ARGS...
on() {
    local i=$1; shift
    THRONG_NODE="$(node_name "$i")" THRONG_RUN_DIR="$(node_dir "$i")" \
        THRONG_CONFIG="$(node_dir "$i")/throng.yml" "$rel" "$@"
}
case "$cmd" in
start)
    port=${3:-15222}; users=${4:-1000}; contacts=${5:-18}; iterations=${6:-4096}
    nodes=${THRONG_BENCH_NODES:-1}
    case $nodes in ''|0|*[!0-9]*) echo "$0: THRONG_BENCH_NODES is a number of nodes" >&2; exit 2 ;; esac
    for i in $(seq 1 "$nodes"); do on "$i" stop >/dev/null 2>&1 || true; done
    rm -rf "$dir"; mkdir -p "$dir"
    echo "$nodes" > "$dir/nodes"
    cookie=
    [ "$nodes" = 1 ] || cookie=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    for i in $(seq 1 "$nodes"); do
        d=$(node_dir "$i")
        mkdir -p "$d"
        # the cookie in each node's run directory: bin/throng reads it there
        [ -z "$cookie" ] || (umask 077; printf '%s' "$cookie" > "$d/cookie")
        cat > "$d/throng.yml" <<YML
hosts: [localhost]
data_dir: "$d/data"
loglevel: warning
listen:
  - port: $((port + i - 1))
    starttls: optional
${THRONG_LISTEN_EXTRA:-}
stats:
  port: 0
${THRONG_CONFIG_EXTRA:-}
YML
        [ "$nodes" = 1 ] || printf 'cluster:\n  seeds: [%s]\n  db_nodes: [%s]\n' \
            "$(node_name 1)" "$(node_name 1)" >> "$d/throng.yml"
    done
    for i in $(seq 1 "$nodes"); do on "$i" start >&2; done
    on 1 bulk-register localhost "$users" password user "$contacts" "$iterations" >&2
    # Settle before the run samples the starting RSS: the bulk registration's
    # transaction log goes into the tables, garbage is collected.
    for i in $(seq 1 "$nodes"); do on "$i" gc >&2; done
    sleep "${THRONG_BENCH_SETTLE:-5}"
    # one pid a line, the last line the last node's (callers take `tail -n 1`)
    for i in $(seq 1 "$nodes"); do printf '%s\n' "$(cat "$(node_dir "$i")/throng.pid")"; done
    ;;
stop)
    nodes=$(cat "$dir/nodes" 2>/dev/null || echo 1)
    rc=0
    for i in $(seq "$nodes" -1 1); do on "$i" stop >&2 || rc=$?; done
    exit $rc
    ;;
counters)
    on 1 counters
    ;;
*)
    echo "usage: $0 start|stop DIR ..." >&2; exit 2 ;;
esac
