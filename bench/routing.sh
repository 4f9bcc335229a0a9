#!/bin/sh
# Routed chat messages: USERS users (18-contact mutual rosters, all online)
# each send a 64-byte message to an online contact every 100 ms; reports the
# rate, delivery latency, the server's CPU per routed message, and checks that
# every message is accounted for (received, or stored offline when its
# recipient had already left at the end). Load generator on the same machine.
#
#   bench/routing.sh [USERS]          (default 2000: ~20,000 messages/s offered)
#   SIZE=400 THINK=250ms              another body size (bytes, default 64) and
#                                     time between a user's messages (default 100ms)
#   THRONG_LISTEN_EXTRA="    recv_buffer: 1024"   more listener settings
#                                     (bench/bench_throng.sh)
# SERVER_CPUS / LOAD_CPUS (taskset CPU lists, e.g. 0 and 1) pin the server
# and the load generator to separate cores: the server's capacity per core
# without the load generator competing for it.
set -eu
pin_server=${SERVER_CPUS:+taskset -c $SERVER_CPUS}
pin_load=${LOAD_CPUS:+taskset -c $LOAD_CPUS}
root=$(cd "$(dirname "$0")/.." && pwd)
users=${1:-2000}
work=$(mktemp -d /tmp/throng-routing.XXXXXX)
trap '"$root/bench/bench_throng.sh" stop "$work/server" >/dev/null 2>&1; rm -rf "$work"' EXIT INT TERM
pid=$($pin_server "$root/bench/bench_throng.sh" start "$work/server" 15222 "$users" 18 1 2>/dev/null | tail -n 1)
scenario="$root/bench/bench_chat.yml"
if [ -n "${SIZE:-}${THINK:-}" ]; then
    sed -e "s/size: 64\$/size: ${SIZE:-64}/" -e "s/think: {constant: 100ms}/think: {constant: ${THINK:-100ms}}/" \
        "$scenario" > "$work/chat.yml"
    scenario="$work/chat.yml"
fi
$pin_load "$root/bin/throng-bench" xmpp --scenario "$scenario" --users "$users" --rate 1000 \
    --server-pid "$pid" --out "$work/out" --no-progress >/dev/null
/usr/bin/python3 - "$work/out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); m = s['messages']; d = s['latency_ms']['delivery']
print('messages sent %d, received %d, not received %d; delivery p50 %.2f ms, p99 %.2f ms; errors %d'
      % (m['sent'], m['received'], m['lost'], d['p50'], d['p99'], s['errors']['total']))
PY
awk -v col=msgs_received_s -f "$root/bench/per_unit.awk" "$work/out/timeseries.csv"
# Where the messages went, by the server's own counters: routed to a session,
# or stored offline (a recipient that had left when the run ended).
"$root/bench/bench_throng.sh" counters "$work/server" |
    awk '/^stanzas_in_message /{i=$2} /^messages_routed /{r=$2} /^offline_stored /{o=$2}
         END {printf "server: %d messages received from clients = %d routed to sessions + %d stored offline%s\n",
              i, r, o, (i == r + o) ? "" : "  (MISMATCH)"}'
