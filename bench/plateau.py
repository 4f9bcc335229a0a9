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

When the directory has probe.jsonl (bench/cluster.sh's two snapshots of
bench/probe.py, 10 s into the plateau and 10 s before its end), a second
line gives the same window from outside the nodes: the servers' CPU, the
load generator's (throng-bench and its VMs), the database server's when the
run had one (a tree named `database': PostgreSQL with STORAGE=pgsql), the
rest of the machine's busy
time (kernel work not charged to a process, other programs) and the steal
time (CPU the hypervisor gave to others: a noisy-neighbour gauge), each in
per cent of one core; then counts that do not vary with the machine's
load, per message sent: distribution segments sent by all nodes (each one
wakes a node) and context switches of the servers.

When it also has probe_logins.jsonl (two snapshots around the arrivals), a
third line gives the servers' CPU, context switches and distribution
segments per login, gross and net of what the users already online spent
meanwhile (at the plateau's rate per session and second).
"""
import json
import collections
import csv
import re
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
    try:
        for r in csv.DictReader(open(d + '/nodes.csv')):
            if t0 <= float(r['t']) <= t1:
                per[r['node']].append(float(r['server_cpu_pct']))
    except FileNotFoundError:   # one node: its CPU is the server's
        per['1'] = [value(r, 'server_cpu_pct') for r in window]
    nodes = {n: sum(v) / len(v) for n, v in sorted(per.items())}
    total = sum(nodes.values())
    line = ('%s peak %d, %d samples, msgs/s %.1f, cpu %.1f%%: %.2f us/session.s, '
            '%.0f us/msg | %s' % (
                d, peak, len(window), msgs, total, total * 1e4 / peak,
                total * 1e4 / msgs if msgs else 0,
                ' '.join('%s:%.1f' % kv for kv in nodes.items())))
    try:
        snaps = [json.loads(x) for x in open(d + '/probe.jsonl') if x.strip()]
    except OSError:
        snaps = []
    if len(snaps) == 2:
        line += '\n' + probe(snaps, msgs, peak)
        try:
            logins = [json.loads(x) for x in open(d + '/probe_logins.jsonl') if x.strip()]
        except OSError:
            logins = []
        if len(logins) == 2:
            line += '\n' + per_login(logins, snaps, peak, rate(d))
    return line


def rate(d):
    """The arrival rate of the run (settings.txt's RATE=)."""
    try:
        m = re.search(r'RATE=(\d+)', open(d + '/settings.txt').read())
        return float(m.group(1)) if m else 100.0
    except OSError:
        return 100.0


def server_sums(a, b):
    """The servers' CPU seconds, context switches and distribution segments
    sent between two snapshots, and the seconds between them."""
    both = [n for n in a['nodes'] if n in b['nodes'] and 'dist_segs_out' in a['nodes'][n]]
    d = lambda k: sum(b['nodes'][n][k] - a['nodes'][n][k] for n in both)
    return d('cpu_ticks') / a['hz'], d('ctxsw'), d('dist_segs_out'), b['t'] - a['t']


def per_login(logins, plateau, peak, arrival_rate):
    """Per login over the arrivals (probe_logins.jsonl: from before the first
    to 5 s after the last): the servers' CPU, context switches and
    distribution segments, gross and net of what the users online meanwhile
    spent at the plateau's rate per session and second. The session-seconds
    are taken as if the first user came at the first snapshot (every user
    online from its arrival, which is linear): a little more than there
    were, so the net figures are if anything low."""
    cpu, sw, segs, dt = server_sums(*logins)
    pcpu, psw, psegs, pdt = server_sums(*plateau)
    arrivals = peak / arrival_rate
    session_s = peak * max(0.0, dt - arrivals / 2)
    net = lambda x, px: (x - px / pdt / peak * session_s) / peak
    return ('  logins %.0f s (%d users): per login %.2f ms CPU (net %.2f), %.1f context '
            'switches (net %.1f), %.1f dist segments (net %.1f)' % (
                dt, peak, cpu * 1e3 / peak, net(cpu, pcpu) * 1e3, sw / peak, net(sw, psw),
                segs / peak, net(segs, psegs)))


def probe(snaps, msgs, peak):
    a, b = snaps
    dt, hz = b['t'] - a['t'], a['hz']
    pct = lambda ticks: 100.0 * ticks / hz / dt
    cpu = [y - x for x, y in zip(a['cpu'], b['cpu'])]
    busy = pct(cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6])
    steal = pct(cpu[7])
    both = [n for n in a['nodes'] if n in b['nodes']]
    dif = {n: {k: b['nodes'][n][k] - a['nodes'][n][k] for k in a['nodes'][n]} for n in both}
    servers = [n for n in both if 'dist_segs_out' in dif[n]]
    srv = sum(pct(dif[n]['cpu_ticks']) for n in servers)
    db = pct(dif['database']['cpu_ticks']) if 'database' in dif else 0
    gen = sum(pct(dif[n]['cpu_ticks']) for n in both
              if n not in servers and n != 'database')
    segs = sum(dif[n]['dist_segs_out'] for n in servers) / dt
    sw = sum(dif[n]['ctxsw'] for n in servers) / dt
    per = lambda x: x / msgs if msgs else 0
    dbs = ', database %.1f%%' % db if 'database' in dif else ''
    return ('  probe %.0f s: servers %.1f%%, load generator %.1f%%%s, rest %.1f%%, steal %.1f%% '
            '(machine busy %.1f%% of %d); servers %.2f us/session.s; per message sent: '
            '%.1f dist segments, %.1f context switches | %s' % (
                dt, srv, gen, dbs, busy - srv - gen - db, steal, busy, 100 * a.get('cpus', 2),
                srv * 1e4 / peak,
                per(segs), per(sw),
                ' '.join('%s:%.1f%%,%.0fsw/s,%.0fseg/s' % (
                    n, pct(dif[n]['cpu_ticks']), dif[n]['ctxsw'] / dt,
                    dif[n]['dist_segs_out'] / dt) for n in servers)))


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for d in sys.argv[1:]:
        print(plateau(d.rstrip('/')))
