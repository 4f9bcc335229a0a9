#!/bin/sh
# Group chat fan-out: USERS users in ROOMS rooms (default: 1,000 users in
# one room of 1,000 occupants), 1% of them talking (bench/bench_muc.yml),
# against a fresh Throng node with every module on and rooms allowed
# USERS occupants. Reports joins, messages sent and copies delivered, and
# the fan-out latency (p50/p99 of every copy). The load generator runs on
# the same machine: the latency includes its own scheduling.
#
#   bench/muc.sh [USERS] [ROOMS]
# SERVER_CPUS / LOAD_CPUS (taskset CPU lists, e.g. 0 and 1) pin the server
# and the load generator to separate cores, so that the latency is not the
# load generator's own queue behind the server's work.
set -eu
pin_server=${SERVER_CPUS:+taskset -c $SERVER_CPUS}
pin_load=${LOAD_CPUS:+taskset -c $LOAD_CPUS}
root=$(cd "$(dirname "$0")/.." && pwd)
users=${1:-1000}
rooms=${2:-1}
work=$(mktemp -d /tmp/throng-muc.XXXXXX)
trap '"$root/bench/bench_throng.sh" stop "$work/server" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT INT TERM
sed -e "s/USERS/$users/" -e "s/ROOMS/$rooms/" "$root/bench/bench_muc.yml" > "$work/muc.yml"
# Every shipped module with its defaults, rooms as large as the run needs.
export THRONG_LISTEN_EXTRA="modules:
  adhoc: {}
  blocking: {}
  carbons: {}
  csi: {}
  disco: {}
  last: {}
  muc: {max_users: $users}
  offline: {}
  pep: {}
  ping: {}
  private: {}
  register: {}
  roster_versioning: {}
  vcard: {}
  version: {}"
pid=$($pin_server "$root/bench/bench_throng.sh" start "$work/server" 15222 "$users" 18 1 2>/dev/null | tail -n 1)
$pin_load "$root/bin/throng-bench" xmpp --scenario "$work/muc.yml" --users "$users" \
    --server-pid "$pid" --out "$work/out" --no-progress >/dev/null
/usr/bin/python3 - "$work/out/summary.json" "$users" "$rooms" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); m = s['muc']; d = s['latency_ms']['delivery_muc']
print('%s users in %s room(s): %d joins, %d join errors; %d groupchat messages sent, %d copies delivered'
      % (sys.argv[2], sys.argv[3], m['joined'], m['join_errors'], m['sent'], m['received']))
print('fan-out latency per copy: p50 %.2f ms, p99 %.2f ms, max %.2f ms; errors %d'
      % (d['p50'], d['p99'], d['max'], s['errors']['total']))
PY
