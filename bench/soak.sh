#!/bin/sh
# Soak test: the Erlang'07 client mix (throng-bench's paper scenario: 20%
# inactive, 60% idle, 20% active users, Poisson arrivals at 50/s) with USERS
# users that all stay online for MINUTES, against a release node started
# here (bench/bench_throng.sh: its own config, data, node name and port).
#
#   bench/soak.sh [USERS] [MINUTES]          (default 15000 users, 60 minutes)
#     OUT: results directory (default /tmp/throng-soak.XXXXXX); PORT (25422);
#     STATS_PORT (25481); SEED (default from the clock)
#
# Then every user logs in once more for a few seconds (the drain run) to
# collect the messages stored offline for it (sent to a contact that had
# just left). Every message sent is accounted for: received online, received
# from offline storage in the drain run, bounced, or still held offline;
# the rest is lost. The server's RSS, BEAM memory, processes, sessions and
# offline messages are sampled every 5 s (samples.csv).
#
# Output in OUT: soak.json (the summary), rss.svg (memory over time),
# samples.csv, main/ and drain/ (throng-bench's results of both runs), and
# one line: "soak pass|fail: rss drift ...". Pass: RSS and BEAM memory drift
# (10 minutes in, or the middle of a shorter steady part, against the last
# sample before users leave) under 2%, 0 errors, 0 lost. Exit status 0 pass.
# The users need one descriptor each in the server and in the load
# generator; throng-bench puts at most 10,000 users in one worker VM here.
set -eu
USERS=${1:-15000}
MINUTES=${2:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
OUT=${OUT:-$(mktemp -d /tmp/throng-soak.XXXXXX)}
PORT=${PORT:-25422}
STATS_PORT=${STATS_PORT:-25481}
SEED=${SEED:-$(date +%s)}
RATE=50
mkdir -p "$OUT"
SRV="$OUT/server"
export THRONG_LISTEN_EXTRA=""
cleanup() {
    [ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2>/dev/null || true
    "$ROOT/bench/bench_throng.sh" stop "$SRV" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM
PID=$("$ROOT/bench/bench_throng.sh" start "$SRV" "$PORT" "$USERS" 18 | tail -n 1)
# bench_throng.sh runs the statistics endpoint on a free port; the soak
# needs a known one: restart with it.
sed -i "s/^  port: 0$/  port: $STATS_PORT/" "$SRV/throng.yml"
THRONG_NODE=throngbench@127.0.0.1 THRONG_RUN_DIR="$SRV" THRONG_CONFIG="$SRV/throng.yml" \
    "${THRONG_REL:-$ROOT/_build/default/rel/throng}/bin/throng" stop >&2
THRONG_NODE=throngbench@127.0.0.1 THRONG_RUN_DIR="$SRV" THRONG_CONFIG="$SRV/throng.yml" \
    "${THRONG_REL:-$ROOT/_build/default/rel/throng}/bin/throng" start >&2
PID=$(cat "$SRV/throng.pid")
BEAM=$(pgrep -P "$PID" beam.smp || echo "$PID")
# The sampler: every 5 s, t_s,rss_bytes,beam_bytes,processes,sessions,offline.
/usr/bin/python3 - "$BEAM" "$STATS_PORT" "$OUT/samples.csv" <<'PY' &
import sys, time, re, urllib.request
pid, port, out = sys.argv[1], sys.argv[2], sys.argv[3]
pat = {k: re.compile(r'^' + v + r' ([0-9.e+]+)$', re.M) for k, v in {
    'beam': r'throng_beam_memory_bytes\{kind="total"\}', 'processes': 'throng_beam_processes',
    'sessions': 'throng_sessions', 'offline': 'throng_offline_messages'}.items()}
t0 = time.time()
with open(out, 'w') as f:
    f.write('t_s,rss_bytes,beam_bytes,processes,sessions,offline\n')
    while True:
        try:
            rss = int(re.search(r'VmRSS:\s+(\d+)', open('/proc/%s/status' % pid).read()).group(1)) * 1024
            body = urllib.request.urlopen('http://127.0.0.1:%s/metrics' % port, timeout=10).read().decode()
            v = {k: (lambda m: str(int(float(m.group(1)))) if m else '')(p.search(body)) for k, p in pat.items()}
            f.write('%.1f,%d,%s,%s,%s,%s\n' % (time.time() - t0, rss, v['beam'], v['processes'], v['sessions'], v['offline']))
            f.flush()
        except Exception as e:
            print('sampler:', e, file=sys.stderr)
        time.sleep(5)
PY
SAMPLER=$!
"$ROOT/bin/throng-bench" xmpp --scenario paper --port "$PORT" --users "$USERS" --rate "$RATE" \
    --length "${MINUTES}m" --users-per-vm 10000 --seed "$SEED" --server-pid "$BEAM" \
    --out "$OUT/main" --no-progress >&2 || true
cat > "$OUT/drain.yml" <<YML
name: soak-drain
server: {host: 127.0.0.1, port: $PORT, domain: localhost}
users: {count: $USERS}
arrival:
  - rate: 500
    max_users: $USERS
length: 3s
keepalive: none
sessions:
  - name: collect
    probability: 1
    presence: true
YML
"$ROOT/bin/throng-bench" xmpp --scenario "$OUT/drain.yml" --users-per-vm 10000 --seed "$SEED" \
    --out "$OUT/drain" --no-progress >&2 || true
sleep 6
kill "$SAMPLER" 2>/dev/null || true; SAMPLER=
STEADY_FROM=$((USERS / RATE + 10))
STEADY_TO=$((MINUTES * 60))
"$ROOT/bin/throng-bench" soak-report --dir "$OUT" --steady-from "$STEADY_FROM" --steady-to "$STEADY_TO" \
    && status=0 || status=$?
echo "results: $OUT/soak.json, $OUT/rss.svg"
exit $status
