#!/bin/sh
# Before/after pairs in one sitting: memory per idle session (memory.sh),
# server CPU per login (logins.sh) and per routed message (routing.sh) for
# two builds of Throng, run alternately (before, after, before, after, ...)
# so that both see the same machine. The load generator and the scripts are
# this checkout's; only the server release differs.
#
#   bench/pair.sh BEFORE_REL AFTER_REL [ROUNDS] [USERS]
#     BEFORE_REL, AFTER_REL: release directories (e.g. another checkout's
#       _build/default/rel/throng, built with make release)
#     ROUNDS: pairs of each benchmark (default 2); USERS: sessions for the
#       memory and login runs (default 15000); routing uses 2000 users;
#       LOGIN_RATE: arrivals per second of the login runs (default 2000);
#       BENCHES: which of "memory login routing" to run (default all).
# A run that fails (e.g. login errors on a busy machine) is reported as
# FAILED and left out of the medians; its log is kept.
#
# Prints one line per run and a table of the medians at the end.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
before=$1; after=$2; rounds=${3:-2}; users=${4:-15000}; login_rate=${LOGIN_RATE:-2000}
out=$(mktemp -d /tmp/throng-pair.XXXXXX)
for rel in "$before" "$after"; do
    [ -x "$rel/bin/throng" ] || { echo "no release in $rel (make release)" >&2; exit 1; }
done
run() { # name build rel
    name=$1; build=$2; rel=$3; f="$out/$name.$build.$i"
    case $name in
        memory) THRONG_REL="$rel" "$root/bench/memory.sh" "$users" > "$f" 2>&1 || true
                v=$(sed -n 's/^RESULT rss_per_session_bytes=\([0-9.]*\).*/\1/p' "$f") ;;
        login)  THRONG_REL="$rel" "$root/bench/logins.sh" "$users" "$login_rate" > "$f" 2>&1 || true
                v=$(awk '/^== login/{l=1} l && /^logins_s:/{sub(/.*= /,""); print $1; exit}' "$f") ;;
        routing) THRONG_REL="$rel" "$root/bench/routing.sh" 2000 > "$f" 2>&1 || true
                 v=$(sed -n 's/^msgs_received_s:.*= \([0-9.]*\) us per unit.*/\1/p' "$f") ;;
    esac
    echo "$name $build ${v:-FAILED} (round $i, log $f)"
    echo "$name $build ${v:-NaN}" >> "$out/results"
}
i=1
while [ "$i" -le "$rounds" ]; do
    for name in ${BENCHES:-memory login routing}; do
        run "$name" before "$before"
        run "$name" after "$after"
    done
    i=$((i + 1))
done
echo
echo "medians over $rounds rounds (memory: RSS bytes per idle session; login: server CPU us"
echo "per login; routing: server CPU us per routed message):"
/usr/bin/python3 - "$out/results" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1])]
for name in ('memory', 'login', 'routing'):
    b = [float(v) for n, w, v in rows if n == name and w == 'before' and v != 'NaN']
    a = [float(v) for n, w, v in rows if n == name and w == 'after' and v != 'NaN']
    if a and b:
        mb, ma = statistics.median(b), statistics.median(a)
        print('%-8s before %10.1f  after %10.1f  after/before %.3f   (runs: before %s, after %s)'
              % (name, mb, ma, ma / mb, b, a))
PY
