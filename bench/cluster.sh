#!/bin/bash
# A local Throng cluster under the paper scenario: starts NODES release nodes
# on this host (throng1@127.0.0.1 ... throngN@127.0.0.1, each with its own
# run dir, data dir, config and client port 15300+I, all with one cookie),
# registers USERS load-test accounts, runs `throng-bench xmpp --scenario
# paper` across the nodes (user N connects to node N mod NODES + 1) and
# writes the results to bench/results/cluster-NODES-USERS/: summary.json,
# report.html (per-node table and charts), timeseries.csv, nodes.csv (per
# node and second), cluster.txt (the per-node and cluster-wide table,
# printed at the end), summary.txt (its last line: the offline messages kept
# at the end, where what the bench counts as lost waits), status.txt (each
# node's own `status` at the plateau), logs/ (each node's console log).
# Every node is stopped at the end, on Ctrl-C and on error.
#
#   bench/cluster.sh NODES USERS [CONTACTS] [ITERATIONS]
#
#   CONTACTS    roster size (default 18, the paper's)
#   ITERATIONS  PBKDF2 count of the load-test accounts' SCRAM keys (default 64:
#               a PLAIN login derives them; real accounts use 4096)
#
# Environment:
#   RATE=100        arrivals per second (Poisson)
#   LENGTH=auto     session length in seconds; auto = USERS/RATE + HOLD, so
#                   that every user is online at once for HOLD seconds
#   HOLD=60         seconds every user is online together (LENGTH=auto)
#   USERS_PER_VM    users per load-generator VM (default 18000, below the
#                   20,000 open files a process may hold here)
#   OUT             results directory (default bench/results/cluster-NODES-USERS)
#   WORK            nodes' directories (default /tmp/throng-cluster-NODES; removed
#                   at the end unless KEEP=1)
#   THRONG_COOKIE   the cluster's cookie (default: a random one)
#   THRONG_REL      another release (default _build/default/rel/throng)
#   CLUSTER_JOIN    1 (default): write the `cluster:' section (seeds and
#                   db_nodes: node 1) and register the accounts on node 1
#                   only. 0: the nodes are NOT clustered: each has its own
#                   database (the accounts are registered on every node) and
#                   a message to a user on another node cannot reach it
#   DB_NODE=shared  (default) node 1 keeps the Mnesia tables and serves its
#                   share of the users. own: one more node, throng0@127.0.0.1
#                   (port 15300), keeps the tables and serves no users (it
#                   is a member: it holds its share of the session
#                   directory); its memory and CPU count in the cluster-wide
#                   figures (the last row of the per-node table)
#   CLUSTER_SHARED_PORT=1  also listen on the shared port 15222 with
#                   reuse_port (SO_REUSEPORT) on every node
#   NODE_CONFIG     extra YAML appended to every node's throng.yml, e.g.
#                   NODE_CONFIG=$'modules: {adhoc: {}, blocking: {}, carbons: {}, ...}'
#                   (a modules key names every module that runs)
#   LISTEN_CONFIG   extra keys of every node's client listener, one per line
#                   (indented for it), e.g. LISTEN_CONFIG='hibernate_after: 2000'
#   CLUSTER_CONFIG  extra keys of every node's cluster section, one per line
#                   (indented for it), e.g. CLUSTER_CONFIG='route_at_home: false'
#   CLUSTER_HOME=1  clients on their home node: every node's client listener
#                   has redirect_to_home, and every serving node has
#                   cluster.node_address 127.0.0.1:<its port>, so a user is
#                   sent (see-other-host) to its account's home and logs in
#                   there (the db node of DB_NODE=own has no address: its
#                   users stay where they arrive). Per node, the bench then
#                   counts messages by each user's first node
#   BENCH_OPTS      extra throng-bench xmpp options (split on spaces), e.g.
#                   BENCH_OPTS='--keepalive none'
#   NODE_FLAGS      extra emulator flags for the server nodes only (not the
#                   load generator), e.g. NODE_FLAGS='+S 1' (passed in
#                   ERL_ZFLAGS, after the release's vm.args)
#   STORAGE=mnesia  (default) the nodes' Mnesia tables (on the db node).
#                   pgsql: a PostgreSQL server of its own for the run (Debian's
#                   postgresql: initdb into WORK/pg, port PG_PORT, default
#                   15299, trust authentication on 127.0.0.1, stopped and
#                   removed at the end) keeps accounts, rosters, offline
#                   messages and the archive; every node uses it
#                   (storage.backend: pgsql) and none is a db node (DB_NODE
#                   must stay shared: node 1 is only the seed). The probe
#                   counts the server's CPU apart (`database'), postgres.txt
#                   has its memory (PSS of all its processes) before the run
#                   and at the plateau, logs/postgresql.log its log
set -euo pipefail

usage() { echo "usage: $0 NODES USERS [CONTACTS] [ITERATIONS]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 4 ] || usage
nodes=$1; users=$2; contacts=${3:-18}; iterations=${4:-64}
for v in "$nodes" "$users" "$contacts" "$iterations"; do
    case $v in ''|*[!0-9]*) usage ;; esac
done
[ "$nodes" -ge 1 ] && [ "$users" -ge 1 ] && [ "$iterations" -ge 1 ] || usage
[ $((contacts % 2)) -eq 0 ] || { echo "$0: CONTACTS must be even" >&2; exit 2; }
[ "$nodes" -le 200 ] || { echo "$0: at most 200 nodes (ports 15301..15500)" >&2; exit 2; }

# One node holds one socket per session, and a process may open 20,000
# files here (ulimit -n, hard): leave ~1,000 for the node's own files.
fd_limit=$(ulimit -n)
per_node=$(( (users + nodes - 1) / nodes ))
max_per_node=19000
[ "$fd_limit" != unlimited ] && [ "$fd_limit" -lt 20000 ] && max_per_node=$((fd_limit - 1000))
if [ "$per_node" -gt "$max_per_node" ]; then
    echo "$0: $users users on $nodes node(s) is $per_node sessions per node, more than" \
         "$max_per_node (a process may open $fd_limit files here): use at least" \
         "$(( (users + max_per_node - 1) / max_per_node )) nodes" >&2
    exit 2
fi

root=$(cd "$(dirname "$0")/.." && pwd -P)
rel="${THRONG_REL:-$root/_build/default/rel/throng}/bin/throng"
[ -x "$rel" ] || { echo "$0: build the release first (make release)" >&2; exit 2; }
. "$root/bench/fresh_release.sh"
fresh_release "$root" "$(dirname "$(dirname "$rel")")" || exit 2
[ -f "$root/_build/default/lib/throng_bench/ebin/throng_bench_cli.beam" ] ||
    { echo "$0: build throng-bench first (make)" >&2; exit 2; }

storage=${STORAGE:-mnesia}
case $storage in
    mnesia) ;;
    pgsql) [ "${DB_NODE:-shared}" = shared ] ||
               { echo "$0: STORAGE=pgsql has no db node: leave DB_NODE unset" >&2; exit 2; }
           pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
           [ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ] ||
               { echo "$0: STORAGE=pgsql needs PostgreSQL's server (apt install postgresql)" >&2
                 exit 2; } ;;
    *) echo "$0: STORAGE is mnesia or pgsql" >&2; exit 2 ;;
esac
pg_port=${PG_PORT:-15299}
pg_dir=
# PostgreSQL refuses to run as root: its programs run as postgres then.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
# Proportional memory (PSS, KiB) of the PostgreSQL server and its backends.
pg_pss() {
    local pm
    pm=$(head -n 1 "$pg_dir/data/postmaster.pid" 2>/dev/null) || { echo -; return; }
    { echo "$pm"; pgrep -P "$pm"; } | while read -r p; do
        awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null; done |
        awk '{s += $1} END {print s + 0}'
}

case ${DB_NODE:-shared} in
    shared) db=1; first=1 ;;
    own) db=0; first=0
         [ "${CLUSTER_JOIN:-1}" = 1 ] ||
             { echo "$0: DB_NODE=own needs a cluster (CLUSTER_JOIN=1)" >&2; exit 2; } ;;
    *) echo "$0: DB_NODE is shared or own" >&2; exit 2 ;;
esac

rate=${RATE:-100}
hold=${HOLD:-60}
for v in "$rate" "$hold"; do
    case $v in ''|0|*[!0-9]*) echo "$0: RATE and HOLD are whole numbers > 0" >&2; exit 2 ;; esac
done
if [ "${LENGTH:-auto}" = auto ]; then
    length_s=$(( (users + rate - 1) / rate + hold ))
else
    case $LENGTH in ''|0|*[!0-9]*) echo "$0: LENGTH is a number of seconds" >&2; exit 2 ;; esac
    length_s=$LENGTH
fi
length=${length_s}s
out=${OUT:-$root/bench/results/cluster-$nodes-$users}
work=${WORK:-/tmp/throng-cluster-$nodes}
cookie=${THRONG_COOKIE:-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}
export THRONG_COOKIE=$cookie

node_name() { echo "throng$1@127.0.0.1"; }
node_port() { echo $((15300 + $1)); }
# Runs bin/throng for node I: node_cmd I ARGS...
node_cmd() {
    local i=$1; shift
    env THRONG_NODE="$(node_name "$i")" THRONG_RUN_DIR="$work/node$i" \
        THRONG_CONFIG="$work/node$i/throng.yml" \
        ERL_ZFLAGS="${ERL_ZFLAGS:-} ${NODE_FLAGS:-}" "$rel" "$@"
}

started=()
own_work=0
bench_pid=
status_job=
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ -z "$status_job" ] || kill "$status_job" 2>/dev/null || true
    if [ -n "$bench_pid" ] && kill -0 "$bench_pid" 2>/dev/null; then
        # timeout passes the TERM on to throng-bench
        echo "== stopping the load generator" >&2
        kill -TERM "$bench_pid" 2>/dev/null || true
        for _ in $(seq 1 30); do kill -0 "$bench_pid" 2>/dev/null || break; sleep 1; done
        kill -KILL "$bench_pid" 2>/dev/null || true
    fi
    if [ "${#started[@]}" -gt 0 ]; then
        echo "== stopping ${#started[@]} node(s)" >&2
        mkdir -p "$out/logs"
        for ((k = ${#started[@]} - 1; k >= 0; k--)); do
            i=${started[$k]}
            cp "$work/node$i/console.log" "$out/logs/node$i.log" 2>/dev/null || true
            pid=$(cat "$work/node$i/throng.pid" 2>/dev/null || true)
            timeout 90 env THRONG_NODE="$(node_name "$i")" THRONG_RUN_DIR="$work/node$i" \
                THRONG_CONFIG="$work/node$i/throng.yml" "$rel" stop >/dev/null 2>&1 || true
            if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                echo "== node $i did not stop: killing pid $pid" >&2
                kill -KILL "$pid" 2>/dev/null || true
            fi
        done
    fi
    if [ -n "$pg_dir" ]; then
        echo "== stopping PostgreSQL" >&2
        as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
        mkdir -p "$out/logs"
        cp "$pg_dir/server.log" "$out/logs/postgresql.log" 2>/dev/null || true
    fi
    [ "${KEEP:-0}" = 1 ] || [ "$own_work" = 0 ] || rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Many connections on loopback: a long accept queue and every local port.
sysctl -qw net.core.somaxconn=65535 ||
    echo "== warning: could not raise net.core.somaxconn" >&2
sysctl -qw net.ipv4.ip_local_port_range="1024 65535" ||
    echo "== warning: could not widen net.ipv4.ip_local_port_range" >&2
# ... but never hand out the nodes' own ports as the source port of some
# other connection (a node then cannot listen: eaddrinuse).
sysctl -qw net.ipv4.ip_local_reserved_ports="15222,15299-15399" ||
    echo "== warning: could not reserve the nodes' ports (ip_local_reserved_ports)" >&2

# A cluster of this script already running (another run, or one still
# stopping) keeps its node names and its WORK: refuse rather than remove its
# directories or stop its nodes.
running=$(epmd -names 2>/dev/null | awk '/^name throng[0-9]+ /{print $2}' || true)
for i in $(seq "$first" "$nodes"); do
    if printf '%s\n' $running | grep -qx "throng$i"; then
        echo "$0: a node named $(node_name "$i") is already running (another" \
             "bench/cluster.sh, or one still stopping): stop it first" >&2
        exit 2
    fi
done

# Results of an earlier run of the same size are replaced; anything else
# in the way is left alone.
if [ -e "$out" ] && [ ! -f "$out/summary.json" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
    echo "$0: $out exists and does not hold results: choose another OUT" >&2; exit 2
fi
rm -rf "$work" "$out"
own_work=1
mkdir -p "$work" "$out"
if [ "$storage" = pgsql ]; then
    pg_dir=$work/pg
    mkdir -p "$pg_dir"
    [ "$(id -u)" != 0 ] || chown postgres: "$pg_dir"
    echo "== PostgreSQL ($pg_bin) on 127.0.0.1:$pg_port, data in $pg_dir" >&2
    as_pg "$pg_bin/initdb" -D "$pg_dir/data" -U postgres --auth-local=trust --auth-host=trust \
        -E UTF8 --locale=C --no-sync >/dev/null
    # Each node keeps pool_size (10) connections.
    as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
        -o "-p $pg_port -k $pg_dir -c listen_addresses=127.0.0.1 -c max_connections=$((10 * nodes + 50))" \
        start >/dev/null
    as_pg "$pg_bin/createdb" -h "$pg_dir" -p "$pg_port" -U postgres throng
fi
seeds="[$(node_name "$db")]"
for i in $(seq "$first" "$nodes"); do
    dir="$work/node$i"
    mkdir -p "$dir"
    {
        echo "hosts: [localhost]"
        echo "data_dir: \"$dir/data\""
        echo "loglevel: warning"
        echo "listen:"
        echo "  - port: $(node_port "$i")"
        echo "    starttls: optional"
        [ "${CLUSTER_HOME:-0}" = 1 ] && echo "    redirect_to_home: true"
        [ -z "${LISTEN_CONFIG:-}" ] || printf '%s\n' "$LISTEN_CONFIG" | sed 's/^/    /'
        if [ "${CLUSTER_SHARED_PORT:-0}" = 1 ]; then
            echo "  - port: 15222"
            echo "    starttls: optional"
            echo "    reuse_port: true"
        else
            echo "  # - port: 15222          (CLUSTER_SHARED_PORT=1)"
            echo "  #   reuse_port: true"
        fi
        echo "stats:"
        echo "  port: 0"
        if [ "$storage" = pgsql ]; then
            echo "storage:"
            echo "  backend: pgsql"
            echo "  pgsql: {host: \"127.0.0.1\", port: $pg_port, database: throng, user: postgres}"
        fi
        if [ "${CLUSTER_JOIN:-1}" = 1 ]; then
            echo "cluster:"
            echo "  seeds: $seeds"
            [ "$storage" = pgsql ] || echo "  db_nodes: $seeds"
            if [ "${CLUSTER_HOME:-0}" = 1 ] && [ "$i" != 0 ]; then
                echo "  node_address: \"127.0.0.1:$(node_port "$i")\""
            fi
            [ -z "${CLUSTER_CONFIG:-}" ] || printf '%s\n' "$CLUSTER_CONFIG" | sed 's/^/  /'
        else
            echo "# cluster: {seeds: $seeds, db_nodes: $seeds}   (CLUSTER_JOIN=1)"
        fi
        [ -z "${NODE_CONFIG:-}" ] || printf '%s\n' "$NODE_CONFIG"
    } > "$dir/throng.yml"
done

echo "== $nodes node(s), $users users ($per_node per node), $contacts-contact rosters," \
     "paper scenario at $rate/s, sessions of $length"
if [ "${CLUSTER_JOIN:-1}" = 1 ]; then
    if [ "$storage" = pgsql ]; then
        echo "== clustered: seed $(node_name "$db"); storage PostgreSQL on 127.0.0.1:$pg_port"
    else
        echo "== clustered: seeds and database on $(node_name "$db")" \
             "$([ "$db" = 0 ] && echo '(serves no users)')"
    fi
else
    echo "== NOT clustered (CLUSTER_JOIN unset): every node has its own database;" \
         "messages to users on another node cannot be delivered"
fi

# The database node first, then the others, one at a time; `bin/throng
# start' returns once the node is ready (60 s at most). pids: the VMs of
# nodes 1..NODES, then the database node's when it serves no users.
pids=()
db_pid=
probe_args=()
for i in $(seq "$first" "$nodes"); do
    echo "== starting $(node_name "$i") on port $(node_port "$i")" >&2
    started+=("$i")
    node_cmd "$i" start >&2
    node_cmd "$i" ping >/dev/null ||
        { echo "$0: $(node_name "$i") does not answer ping" >&2; exit 1; }
    shell_pid=$(cat "$work/node$i/throng.pid")
    # bin/throng's pid file holds the process that exec'ed the VM; if the
    # VM is a child of it instead, sample the child.
    beam=$(pgrep -P "$shell_pid" beam.smp || true)
    if [ "$i" = 0 ]; then db_pid=${beam:-$shell_pid}; else pids+=("${beam:-$shell_pid}"); fi
    probe_args+=("$i=${beam:-$shell_pid}")
done
[ -z "$db_pid" ] || pids+=("$db_pid")
[ -z "$pg_dir" ] || probe_args+=("database=tree:$(head -n 1 "$pg_dir/data/postmaster.pid")")

echo "== accounts: $users load-test users, PBKDF2 $iterations iterations" \
     "(low on purpose: a real account has 4096)"
if [ "${CLUSTER_JOIN:-1}" = 1 ]; then
    reg_first=$db; reg_last=$db
else
    reg_first=1; reg_last=$nodes
fi
for i in $(seq "$reg_first" "$reg_last"); do
    node_cmd "$i" bulk-register localhost "$users" password user "$contacts" "$iterations" >&2
done
# Settle before the run samples the starting RSS (bench_throng.sh does the same).
for i in "${started[@]}"; do node_cmd "$i" gc >/dev/null; done
sleep 5
[ -z "$pg_dir" ] || echo "postgres PSS before the run: $(pg_pss) KiB" > "$out/postgres.txt"

# How this run was made, beside its results.
{
    echo "command: bench/cluster.sh $nodes $users $contacts $iterations"
    echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "RATE=$rate HOLD=$hold LENGTH=$length DB_NODE=${DB_NODE:-shared}" \
         "CLUSTER_JOIN=${CLUSTER_JOIN:-1} STORAGE=$storage NODE_FLAGS='${NODE_FLAGS:-}'"
} > "$out/settings.txt"

# The plateau (every user online), in the background: two snapshots of
# bench/probe.py (every node's CPU, context switches and distribution
# segments, the load generator's CPU, the machine's /proc/stat) 10 s after
# the last arrival and 10 s before the first departure, into probe.jsonl
# for bench/plateau.py (and two around the arrivals, probe_logins.jsonl); then each node's own view (`status', `cluster':
# their bin/throng VMs run after the second snapshot, outside its window).
arrivals=$(( (users + rate - 1) / rate ))
probe_window=$(( hold - 20 ))
(
    if [ "$probe_window" -ge 10 ]; then
        # The logins: from before the first arrival to 5 s after the last,
        # into probe_logins.jsonl (bench/plateau.py: per login).
        "$root/bench/probe.py" "${probe_args[@]}" "loadgen=tree:$$" > "$out/probe_logins.jsonl" || true
        sleep $((arrivals + 5)) || exit 0
        "$root/bench/probe.py" "${probe_args[@]}" "loadgen=tree:$$" >> "$out/probe_logins.jsonl" || true
        sleep 5 || exit 0
        "$root/bench/probe.py" "${probe_args[@]}" "loadgen=tree:$$" > "$out/probe.jsonl" || true
        sleep "$probe_window" || exit 0
        "$root/bench/probe.py" "${probe_args[@]}" "loadgen=tree:$$" >> "$out/probe.jsonl" || true
        [ -z "$pg_dir" ] || echo "postgres PSS at the plateau: $(pg_pss) KiB" >> "$out/postgres.txt"
    else
        sleep $((arrivals + hold / 2)) || exit 0
    fi
    for i in "${started[@]}"; do
        echo "--- $(node_name "$i")"
        node_cmd "$i" status 2>&1 || true
    done
    if [ "${CLUSTER_JOIN:-1}" = 1 ]; then
        echo "--- bin/throng cluster"
        node_cmd "$db" cluster 2>&1 || true
    fi
) > "$out/status.txt" 2>&1 &
status_job=$!

server_pids=()
for p in "${pids[@]}"; do server_pids+=(--server-pid "$p"); done
targets="127.0.0.1:$(node_port 1)-$(node_port "$nodes")"
[ "$nodes" -eq 1 ] && targets="127.0.0.1:$(node_port 1)"
# The run ends by itself (throng-bench's deadline: arrivals + session + 17 s,
# then the grace period); timeout is the last resort. In the background, so
# that Ctrl-C reaches the trap at once (bash runs a trap only once the
# foreground command has finished).
limit=$(( arrivals + length_s + 300 ))
timeout --kill-after=30 "$limit" \
    "$root/bin/throng-bench" xmpp --scenario paper --users "$users" --rate "$rate" \
    --length "$length" --contacts "$contacts" --targets "$targets" "${server_pids[@]}" \
    --users-per-vm "${USERS_PER_VM:-18000}" --out "$out" ${BENCH_OPTS:-} > "$out/summary.txt" &
bench_pid=$!
set +e
wait "$bench_pid"
bench_rc=$?
set -e
bench_pid=
kill "$status_job" 2>/dev/null || true
wait "$status_job" 2>/dev/null || true

echo
if [ -f "$out/cluster.txt" ]; then
    cat "$out/cluster.txt"
else
    grep -E '^(sessions|users|errors.total|messages|server\.(bytes|cpu))' "$out/summary.txt" || true
fi
/usr/bin/python3 - "$out/summary.json" <<'PY' || true
import json, sys
s = json.load(open(sys.argv[1]))
m, lat = s.get('messages', {}), s.get('latency_ms', {})
def l(k):
    x = lat.get(k)
    return '-' if not x else 'mean %.2f / p50 %.2f / p99 %.2f ms (%d)' % (x['mean'], x['p50'], x['p99'], x['count'])
print('status %s; users logged in %d of %d; errors %d; messages sent %d, received %d, lost %d'
      % (s['status'], s['users']['logged_in'], s['users']['planned'], s['errors']['total'],
         m.get('sent', 0), m.get('received', 0), m.get('lost', 0)))
for k, name in (('same_node', 'same-node'), ('cross_node', 'cross-node')):
    if k in m:
        if 'sent' in m[k]:
            print('%-10s messages sent %d, received %d, lost %d; delivery %s'
                  % (name, m[k]['sent'], m[k]['received'], m[k]['lost'], l('delivery_' + k.split('_')[0])))
        else:   # users sent to their home: a sender cannot know the node
            print('%-10s messages received %d; delivery %s'
                  % (name, m[k]['received'], l('delivery_' + k.split('_')[0])))
print('users redirected to their home: %d' % s['users'].get('redirected', 0))
print('all delivery %s; login %s' % (l('delivery'), l('login')))
lg = s.get('loadgen', {})
print('load generator: %s VM(s), %s B of BEAM memory per session'
      % (lg.get('vms'), lg.get('beam_bytes_per_session_at_peak')))
PY
# What the bench counts as lost is sent and not received in the run: a
# message to a contact in the moment it leaves is kept in offline storage
# (the paper mix's end-of-run race), where the database node counts it.
offline=$(node_cmd "$db" status 2>/dev/null | awk '/^offline messages/ {print $3}')
echo "offline messages kept at the end (on $(node_name "$db")): ${offline:--}" |
    tee -a "$out/summary.txt"
echo "== results in $out (report.html, summary.json, nodes.csv, status.txt)"
exit "$bench_rc"
