#!/usr/bin/env python3
"""The plateau of bench/cluster.sh runs: what every node spends while every
user is online.

    bench/plateau.py RESULTS_DIR...

For each results directory (OUT of bench/cluster.sh): the seconds of
timeseries.csv with at least 99.5 % of the peak's sessions online, 5 cut at
each end (when more than 20 remain); over those seconds, the mean of each
node's server_cpu_pct in nodes.csv, their sum (per cent of one core), the
messages sent per second, and the sum over the sessions (microseconds of
CPU per online session and second) and over the messages (microseconds of
the whole cluster's CPU per message sent, keepalives and the rest included).
One line per directory; the last node of the list is the db node when the
run had DB_NODE=own (node 5 of a 4-node run).
"""
import collections
import csv
import sys


def value(row, key):
    return float(row[key] or 0)


def plateau(d):
    rows = list(csv.DictReader(open(d + '/timeseries.csv')))
    peak = max(value(r, 'sessions') for r in rows)
    window = [r for r in rows if value(r, 'sessions') >= peak * 0.995]
    window = window[5:-5] if len(window) > 20 else window
    t0, t1 = float(window[0]['t']), float(window[-1]['t'])
    msgs = sum(value(r, 'msgs_sent_s') for r in window) / len(window)
    per = collections.defaultdict(list)
    for r in csv.DictReader(open(d + '/nodes.csv')):
        if t0 <= float(r['t']) <= t1:
            per[r['node']].append(float(r['server_cpu_pct']))
    nodes = {n: sum(v) / len(v) for n, v in sorted(per.items())}
    total = sum(nodes.values())
    return ('%s peak %d, %d samples, msgs/s %.1f, cpu %.1f%%: %.2f us/session.s, '
            '%.0f us/msg | %s' % (
                d, peak, len(window), msgs, total, total * 1e4 / peak,
                total * 1e4 / msgs if msgs else 0,
                ' '.join('%s:%.1f' % kv for kv in nodes.items())))


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for d in sys.argv[1:]:
        print(plateau(d.rstrip('/')))
