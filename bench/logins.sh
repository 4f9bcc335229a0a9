#!/bin/sh
# Login throughput and server CPU per login (SASL PLAIN, no TLS): USERS users
# arrive at RATE per second, log in and stay; then the same with initial
# presence to 18-contact rosters (the fan-out of presence to online contacts
# and their answers). The load generator runs on the same machine.
#
#   bench/logins.sh [USERS] [RATE] [ITERATIONS]     (defaults 15000 4000 1)
#
# ITERATIONS is the PBKDF2 count of the test accounts' SCRAM keys: a PLAIN
# login derives them once per user (then the login cache answers); 1 measures
# the server, 4096 (the default for real accounts) adds ~1.3 ms per first login.
# SERVER_CPUS / LOAD_CPUS (taskset CPU lists, e.g. 0 and 1) pin the server
# and the load generator to separate cores: the server's capacity per core
# without the load generator competing for it.
set -eu
pin_server=${SERVER_CPUS:+taskset -c $SERVER_CPUS}
pin_load=${LOAD_CPUS:+taskset -c $LOAD_CPUS}
root=$(cd "$(dirname "$0")/.." && pwd)
users=${1:-15000}; rate=${2:-4000}; iterations=${3:-1}
work=$(mktemp -d /tmp/throng-logins.XXXXXX)
trap '"$root/bench/bench_throng.sh" stop "$work/server" >/dev/null 2>&1; rm -rf "$work"' EXIT INT TERM
for variant in login idle; do
    scenario="$root/bench/bench_$variant.yml"
    pid=$($pin_server "$root/bench/bench_throng.sh" start "$work/server" 15222 "$users" 18 "$iterations" 2>"$work/start.log" | tail -n 1) || { cat "$work/start.log" >&2; exit 1; }
    status=0
    $pin_load "$root/bin/throng-bench" xmpp --scenario "$scenario" --port 15222 --users "$users" --rate "$rate" \
        --length 20s --password password --server-pid "$pid" --out "$work/$variant" --no-progress >/dev/null || status=$?
    echo "== $variant ($( [ $variant = login ] && echo 'login only' || echo 'login + initial presence to 18 contacts'))"
    /usr/bin/python3 - "$work/$variant/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
r, l, e = s['rates']['logins_per_s'], s['latency_ms']['login'], s['errors']
print('users logged in %d, errors %d; logins/s mean %.0f, best second %.0f; login p50 %.1f ms, p99 %.1f ms'
      % (s['users']['logged_in'], e['total'], r['mean_while_active'], r['max'], l['p50'], l['p99']))
if e['total']:
    print('errors by type: %s; other: %s'
          % (', '.join('%s %d' % kv for kv in sorted(e['by_type'].items()) if kv[1]), e['other_reasons']))
PY
    # A run with errors measured something else (say so, and fail).
    [ "$status" -eq 0 ] || { echo "throng-bench failed (exit $status): errors above" >&2; exit "$status"; }
    awk -v col=logins_s -v from=connects_s -f "$root/bench/per_unit.awk" "$work/$variant/timeseries.csv"
    "$root/bench/bench_throng.sh" stop "$work/server" >/dev/null 2>&1
done
