#!/bin/sh
# XEP-0352 client state indication with a mobile-like mix: the paper's
# scenario where the 80% of users who are not chatting are phones that say
# <inactive/> after login (bench/bench_mobile.yml), run twice against a
# fresh server each time — without CSI, then with it — and compared: bytes
# and socket reads (a phone's wake-ups) the clients received, and the
# server's own CSI counters. Same users, same seed, same arrivals.
#
#   bench/csi.sh [USERS]          (default 2000)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
users=${1:-2000}
work=$(mktemp -d /tmp/throng-csi.XXXXXX)
trap '"$root/bench/bench_throng.sh" stop "$work/server" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT INT TERM
for csi in false true; do
    sed -e "s/CSI/$csi/" -e "s/USERS/$users/" "$root/bench/bench_mobile.yml" > "$work/mobile-$csi.yml"
    pid=$("$root/bench/bench_throng.sh" start "$work/server" 15222 "$users" 18 1 2>/dev/null | tail -n 1)
    "$root/bin/throng-bench" xmpp --scenario "$work/mobile-$csi.yml" --users "$users" --seed 7 \
        --server-pid "$pid" --out "$work/out-$csi" --no-progress >/dev/null
    "$root/bench/bench_throng.sh" counters "$work/server" > "$work/counters-$csi"
    "$root/bench/bench_throng.sh" stop "$work/server" >/dev/null 2>&1
done
/usr/bin/python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
def load(csi):
    s = json.load(open('%s/out-%s/summary.json' % (w, csi)))
    c = dict(l.split()[:2] for l in open('%s/counters-%s' % (w, csi)) if len(l.split()) >= 2)
    return s, c
(off, coff), (on, con) = load('false'), load('true')
def row(label, a, b):
    print('%-34s %14s %14s %8s' % (label, a, b, ('%.1f%%' % (100.0 * (b - a) / a)) if a else '-'))
print('%-34s %14s %14s %8s' % ('', 'without CSI', 'with CSI', 'change'))
row('users logged in', off['users']['logged_in'], on['users']['logged_in'])
row('stanzas received by clients', off['traffic']['stanzas_in'], on['traffic']['stanzas_in'])
row('bytes received by clients', off['traffic']['bytes_in'], on['traffic']['bytes_in'])
row('socket reads by clients (wake-ups)', off['traffic']['reads_in'], on['traffic']['reads_in'])
row('chat messages sent', off['messages']['sent'], on['messages']['sent'])
row('chat messages received', off['messages']['received'], on['messages']['received'])
print('delivery p99 (ms)                  %14.2f %14.2f' % (off['latency_ms']['delivery']['p99'],
                                                            on['latency_ms']['delivery']['p99']))
print('errors                             %14d %14d' % (off['errors']['total'], on['errors']['total']))
for k in ('csi_held', 'csi_dropped', 'csi_flushes'):
    print('server %-27s %14s %14s' % (k, coff.get(k, '0'), con.get(k, '0')))
PY
