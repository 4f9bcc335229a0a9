#!/bin/sh
# The per-event floor on this machine: CPU to wake an idle Erlang process
# for one small packet, with nothing else done (bench/wake_floor.erl).
#
#   bench/wake_floor.sh [CONNECTIONS] [RATE] [SECONDS]   (default 9000 300 60)
#
# One server VM holds CONNECTIONS sockets, each owned by a process that
# hibernates after every event; one client VM sends RATE one-byte packets a
# second over them (exponential gaps per connection) for SECONDS. Both VMs
# run with the release's emulator flags (the + lines of config/vm.args:
# +sbwt none and the rest). Prints each VM's CPU over the SECONDS and per
# packet, and the context switches of each per packet. The two VMs are
# what a Throng node and a throng-bench VM at least pay for an event at
# this load: the paper mix's keepalive is exactly such a packet.
set -eu
n=${1:-9000}; rate=${2:-300}; secs=${3:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
port=${PORT:-17007}
work=$(mktemp -d /tmp/wake-floor.XXXXXX)
# the emulator flags of the release (config/vm.args), for both VMs
flags=$(grep '^+' "$root/config/vm.args" | tr '\n' ' ')
erlc -o "$work" "$root/bench/wake_floor.erl"
cd "$work"    # where a crash dump would go
spid=
cleanup() { [ -z "$spid" ] || kill "$spid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM
erl $flags -noshell -pa "$work" -run wake_floor main server "$port" > "$work/server.log" 2>&1 &
spid=$!
for _ in $(seq 1 100); do grep -q listening "$work/server.log" 2>/dev/null && break; sleep 0.1; done
grep -q listening "$work/server.log" ||
    { echo "$0: the server VM did not listen on $port:" >&2; cat "$work/server.log" >&2; exit 1; }
erl $flags -noshell -pa "$work" -run wake_floor main clients 127.0.0.1 "$port" "$n" "$rate.0" \
    "$secs" > "$work/client.log" 2>&1 &
cpid=$!
while ! grep -q connected "$work/client.log" 2>/dev/null; do
    kill -0 "$cpid" 2>/dev/null || { cat "$work/client.log" >&2; exit 1; }
    sleep 0.5
done
# The sends start once every connection is up; skip their first seconds.
sleep 5
# Both VMs' CPU ticks and context switches, read by bench/probe.py.
"$root/bench/probe.py" "server=$spid" "client=$cpid" > "$work/probe.jsonl"
sleep $((secs - 10))
"$root/bench/probe.py" "server=$spid" "client=$cpid" >> "$work/probe.jsonl"
wait "$cpid"
python3 - "$work/probe.jsonl" "$n" "$rate" <<'PY'
import json, sys
a, b = [json.loads(x) for x in open(sys.argv[1])]
n, rate = int(sys.argv[2]), int(sys.argv[3])
dt, hz = b['t'] - a['t'], a['hz']
pkts = rate * dt
print('%d connections, %d packets/s, %.0f s measured (bench/wake_floor.sh)' % (n, rate, dt))
for vm in ('server', 'client'):
    ticks = b['nodes'][vm]['cpu_ticks'] - a['nodes'][vm]['cpu_ticks']
    sw = b['nodes'][vm]['ctxsw'] - a['nodes'][vm]['ctxsw']
    print('%s VM: %.2f %% of a core, %.1f us per packet, %.1f context switches per packet'
          % (vm, 100.0 * ticks / hz / dt, 1e6 * ticks / hz / pkts, sw / pkts))
PY
grep sent "$work/client.log" || true
