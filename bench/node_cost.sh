#!/bin/bash
# What one lightly loaded node costs, counted by the kernel: runs
# `bench/cluster.sh 1 USERS` (one node that keeps its tables, the paper
# scenario, HOLD=90 seconds with every user online) and, 8 seconds after
# the last arrival, `perf stat` of the node's process for SECONDS seconds:
# task-clock (CPU time), context switches and the system calls that show
# where it goes (fsync, write, futex, epoll_wait, read). Then the plateau
# of the bench's own per-second samples (server CPU, messages per second,
# µs per online session and second).
#
#   bench/node_cost.sh OUT [USERS] [SECONDS]     (defaults 3000 and 40)
#
# OUT gets run/ (bench/cluster.sh's results), run.log, stat.txt (perf's
# output) and summary.txt (the plateau and the counters, one per line).
# Every variable of bench/cluster.sh passes through (THRONG_REL for another
# release, NODE_CONFIG, LISTEN_CONFIG, BENCH_OPTS, NODE_FLAGS). Runs of one
# build differ by about ±7 % here: compare two builds with two runs each,
# interleaved.
set -euo pipefail

[ $# -ge 1 ] && [ $# -le 3 ] || { echo "usage: $0 OUT [USERS] [SECONDS]" >&2; exit 2; }
out=$1; users=${2:-3000}; secs=${3:-40}
command -v perf >/dev/null || { echo "perf is needed: apt-get install linux-perf" >&2; exit 1; }
cd "$(dirname "$0")/.."
rm -rf "$out"; mkdir -p "$out"
out=$(cd "$out" && pwd)

HOLD=${HOLD:-90} DB_NODE=shared OUT="$out/run" bench/cluster.sh 1 "$users" > "$out/run.log" 2>&1 &
bench=$!
trap 'kill $bench 2>/dev/null || true' INT TERM

# The last arrival, then 8 s for the logins' work to settle.
for _ in $(seq 1 1800); do
    grep -q "launched $users/$users" "$out/run.log" 2>/dev/null && break
    kill -0 $bench 2>/dev/null || { echo "bench/cluster.sh ended early: $out/run.log" >&2; exit 1; }
    sleep 1
done
grep -q "launched $users/$users" "$out/run.log" || { echo "no full arrival in 30 min" >&2; exit 1; }
sleep 8
pid=$(pgrep -f 'beam.smp.*throng1@127.0.0.1' | head -n 1)
[ -n "$pid" ] || { echo "the node's process is not running" >&2; exit 1; }
events=task-clock,context-switches
for s in fsync fdatasync write writev futex epoll_wait read; do
    events="$events,syscalls:sys_enter_$s"
done
echo "perf stat of throng1 (pid $pid) for $secs s"
perf stat -e "$events" -p "$pid" -o "$out/stat.txt" -- sleep "$secs"
wait $bench

python3 - "$out" <<'EOF'
import csv, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(out + '/run/timeseries.csv')))
num = lambda r, k: float(r[k] or 0)
peak = max(num(r, 'sessions') for r in rows)
# The plateau: every second with all users online, less 5 at each end.
w = [r for r in rows if num(r, 'sessions') >= peak * 0.995]
w = w[5:-5] if len(w) > 20 else w
avg = lambda k: sum(num(r, k) for r in w) / len(w)
cpu, msgs = avg('server_cpu_pct'), avg('msgs_sent_s')
lines = ['sessions %d' % peak,
         'plateau %s..%s s (%d samples)' % (w[0]['t'], w[-1]['t'], len(w)),
         'server cpu %.2f %% of a core' % cpu,
         'messages/s %.1f' % msgs,
         'us per online session and second %.2f' % (cpu * 1e4 / peak)]
for line in open(out + '/stat.txt'):
    parts = line.split()
    if len(parts) >= 2 and not line.startswith('#'):
        if parts[1] == 'msec':
            lines.append('task-clock %s ms' % parts[0])
        elif parts[1] in ('context-switches',) or parts[1].startswith('syscalls:'):
            lines.append('%s %s' % (parts[1].replace('syscalls:sys_enter_', ''), parts[0]))
open(out + '/summary.txt', 'w').write('\n'.join(lines) + '\n')
print('\n'.join(lines))
EOF
