#!/bin/sh
# The per-event floor on this machine: CPU to wake an idle Erlang process
# for one small packet, with nothing else done (bench/wake_floor.erl).
#
#   bench/wake_floor.sh [CONNECTIONS] [RATE] [SECONDS]   (default 9000 300 60)
#
# SECONDS is at least 11: its first and last 5 seconds are not measured.
#
# One server VM holds CONNECTIONS sockets, each owned by a process that
# hibernates after every event; one client VM sends RATE one-byte packets a
# second over them (exponential gaps per connection) for SECONDS. Both VMs
# run with the release's emulator flags (the + lines of config/vm.args:
# +sbwt none and the rest). Prints each VM's CPU over the SECONDS and per
# packet, and the context switches of each per packet. The two VMs are
# what a Throng node and a throng-bench VM at least pay for an event at
# this load: the paper mix's keepalive is exactly such a packet.
#
# SERVER=c and CLIENT=c run that half as bench/wake_floor.c instead (one
# process, an epoll loop): what the same packets cost outside Erlang, the
# floor of the machine itself. TICK_MS=T (with CLIENT=c) wakes the client's
# loop only every T ms and sends what is then due.
set -eu
server=${SERVER:-erlang}; client=${CLIENT:-erlang}; tick=${TICK_MS:-0}
for half in "SERVER $server" "CLIENT $client"; do
    case ${half#* } in
        erlang|c) ;;
        *) echo "$0: ${half% *} is erlang or c, not ${half#* }" >&2; exit 2 ;;
    esac
done
n=${1:-9000}; rate=${2:-300}; secs=${3:-60}
for v in "CONNECTIONS $n" "RATE $rate" "SECONDS $secs"; do
    case ${v#* } in ''|*[!0-9]*) echo "$0: ${v% *} is a whole number, not ${v#* }" >&2; exit 2 ;; esac
done
# the first 5 s and the last 5 s are not measured
[ "$secs" -ge 11 ] || { echo "$0: SECONDS is at least 11 (5 s of start, 5 s of end, 1 s measured), not $secs" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
port=${PORT:-17007}
work=$(mktemp -d /tmp/wake-floor.XXXXXX)
# the emulator flags of the release (config/vm.args), for both VMs
flags=$(grep '^+' "$root/config/vm.args" | tr '\n' ' ')
erlc -o "$work" "$root/bench/wake_floor.erl"
if [ "$server" = c ] || [ "$client" = c ]; then
    cc -O2 -Wall -o "$work/wake_floor" "$root/bench/wake_floor.c" -lm
fi
cd "$work"    # where a crash dump would go
spid=
cleanup() {
    # wait for the server VM to exit: the next run listens on the same port
    [ -z "$spid" ] || { kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null; } || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM
case $server in
    erlang) erl $flags -noshell -pa "$work" -run wake_floor main server "$port" \
                > "$work/server.log" 2>&1 & ;;
    c) "$work/wake_floor" server "$port" > "$work/server.log" 2>&1 & ;;
esac
spid=$!
for _ in $(seq 1 100); do grep -q listening "$work/server.log" 2>/dev/null && break; sleep 0.1; done
grep -q listening "$work/server.log" ||
    { echo "$0: the server VM did not listen on $port:" >&2; cat "$work/server.log" >&2; exit 1; }
case $client in
    erlang)
        erl $flags -noshell -pa "$work" -run wake_floor main clients 127.0.0.1 "$port" "$n" \
            "$rate.0" "$secs" > "$work/client.log" 2>&1 & ;;
    c)
        "$work/wake_floor" clients 127.0.0.1 "$port" "$n" "$rate" "$secs" "$tick" \
            > "$work/client.log" 2>&1 & ;;
esac
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
label="server $server, client $client"; [ "$client" = c ] && label="$label, TICK_MS=$tick"
python3 - "$work/probe.jsonl" "$n" "$rate" "$label" <<'PY'
import json, sys
a, b = [json.loads(x) for x in open(sys.argv[1])]
n, rate = int(sys.argv[2]), int(sys.argv[3])
dt, hz = b['t'] - a['t'], a['hz']
pkts = rate * dt
print('%d connections, %d packets/s, %.0f s measured (bench/wake_floor.sh, %s)'
      % (n, rate, dt, sys.argv[4]))
for vm in ('server', 'client'):
    ticks = b['nodes'][vm]['cpu_ticks'] - a['nodes'][vm]['cpu_ticks']
    sw = b['nodes'][vm]['ctxsw'] - a['nodes'][vm]['ctxsw']
    print('%s VM: %.2f %% of a core, %.1f us per packet, %.1f context switches per packet'
          % (vm, 100.0 * ticks / hz / dt, 1e6 * ticks / hz / pkts, sw / pkts))
PY
grep sent "$work/client.log" || true
