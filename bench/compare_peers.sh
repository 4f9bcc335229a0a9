#!/bin/sh
# Throng next to Debian's ejabberd and Prosody under the same throng-bench
# scenario, one server after another on this machine, and one table of the
# results (docs/bench.md, "compare"). Run by hand, as root; never in CI.
#
#   bench/compare_peers.sh [USERS] [RATE]
#
# Environment (defaults in brackets):
#   SCENARIO   scenario name or file [paper]
#   LENGTH     session length [120s]
#   PORT       client port every server listens on, one at a time [15222]
#   CONTACTS   roster size [18]
#   WORK       servers' private directories [/tmp/throng-compare]
#   OUT        results [bench/results/compare-DATE]
#   SERVERS    which servers to run, in order [throng prosody ejabberd]
#              (throng: the release of this repository, bench/bench_throng.sh;
#              build it first with make release)
#   ITERATIONS PBKDF2 iterations of Throng's test accounts [4096]
#   TLS        none or starttls: every server's users negotiate STARTTLS
#              (each server has its own self-signed certificate) [none]
#
# Installs prosody and ejabberd with apt if they are missing, with a
# policy-rc.d that keeps apt from starting their system services. The
# servers run with private configs, data and ports: nothing under /etc is
# changed.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd -P)
users=${1:-10000}
rate=${2:-100}
scenario=${SCENARIO:-paper}
length=${LENGTH:-120s}
port=${PORT:-15222}
contacts=${CONTACTS:-18}
work=${WORK:-/tmp/throng-compare}
out=${OUT:-$root/bench/results/compare-$(date +%Y%m%d-%H%M%S)}
servers=${SERVERS:-throng prosody ejabberd}
iterations=${ITERATIONS:-4096}

[ "$(id -u)" -eq 0 ] || { echo "$0: run as root (the servers run as their own users)" >&2; exit 2; }
[ -x "$root/bin/throng-bench" ] || { echo "$0: $root/bin/throng-bench is missing" >&2; exit 2; }

missing=""
command -v prosody >/dev/null 2>&1 || missing="$missing prosody"
ls -d /usr/lib/*/ejabberd-* >/dev/null 2>&1 || missing="$missing ejabberd"
if [ -n "$missing" ]; then
    echo "installing$missing (their services stay stopped)"
    added_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        added_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq $missing >/dev/null
    [ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
fi

# Room for many connections through loopback (both work on these machines).
sysctl -qw net.core.somaxconn=65535 2>/dev/null || true
sysctl -qw net.ipv4.ip_local_port_range="1024 65535" 2>/dev/null || true

set --
for s in $servers; do
    case "$s" in
    throng)
        set -- "$@" --server "throng=$root/bench/bench_throng.sh start $work/throng $port $users $contacts $iterations" \
                    --stop "throng=$root/bench/bench_throng.sh stop $work/throng" ;;
    prosody|ejabberd)
        set -- "$@" --server "$s=$root/bench/bench_$s.sh start $work/$s $port $users $contacts" \
                    --stop "$s=$root/bench/bench_$s.sh stop $work/$s" ;;
    *) echo "$0: unknown server $s (throng, prosody, ejabberd)" >&2; exit 2 ;;
    esac
done

mkdir -p "$out"
echo "comparing on port $port: $users users at $rate/s, scenario $scenario, sessions of $length"
[ -n "${TLS:-}" ] && set -- "$@" --tls "$TLS"
exec "$root/bin/throng-bench" compare --scenario "$scenario" --users "$users" --rate "$rate" \
    --length "$length" --port "$port" --contacts "$contacts" --ready-timeout 600s \
    --out "$out" "$@"
