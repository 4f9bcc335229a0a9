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
# ticks of a process and its threads' context switches
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
sw() { cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s}'; }
erl $flags -noshell -pa "$work" -run wake_floor main clients 127.0.0.1 "$port" "$n" "$rate.0" \
    "$secs" > "$work/client.log" 2>&1 &
cpid=$!
while ! grep -q connected "$work/client.log" 2>/dev/null; do
    kill -0 "$cpid" 2>/dev/null || { cat "$work/client.log" >&2; exit 1; }
    sleep 0.5
done
# The sends start once every connection is up; skip their first seconds.
sleep 5
s0=$(cpu "$spid"); c0=$(cpu "$cpid"); sw_s0=$(sw "$spid"); sw_c0=$(sw "$cpid"); t0=$(date +%s.%N)
sleep $((secs - 10))
s1=$(cpu "$spid"); c1=$(cpu "$cpid"); sw_s1=$(sw "$spid"); sw_c1=$(sw "$cpid"); t1=$(date +%s.%N)
wait "$cpid"
hz=$(getconf CLK_TCK)
awk -v s="$((s1 - s0))" -v c="$((c1 - c0))" -v ss="$((sw_s1 - sw_s0))" -v cs="$((sw_c1 - sw_c0))" \
    -v t0="$t0" -v t1="$t1" -v hz="$hz" -v rate="$rate" -v n="$n" 'BEGIN {
    dt = t1 - t0; pkts = rate * dt
    printf "%d connections, %d packets/s, %.0f s measured (%s)\n", n, rate, dt, "bench/wake_floor.sh"
    printf "server VM: %.2f %% of a core, %.1f us per packet, %.1f context switches per packet\n",
           100 * s / hz / dt, 1e6 * s / hz / pkts, ss / pkts
    printf "client VM: %.2f %% of a core, %.1f us per packet, %.1f context switches per packet\n",
           100 * c / hz / dt, 1e6 * c / hz / pkts, cs / pkts
}'
grep sent "$work/client.log" || true
