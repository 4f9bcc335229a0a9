#!/usr/bin/env python3
"""One snapshot of what the nodes of a local cluster have done so far, for
the plateau figures of bench/cluster.sh (two snapshots, at the start and the
end of the plateau; bench/plateau.py reads the difference).

    bench/probe.py NAME=PID... [NAME=tree:PID]

NAME=PID is a node (NAME its epmd name, e.g. throng1); NAME=tree:PID is a
process and all its descendants (the load generator: throng-bench and its
VMs; the database server), counted for CPU and context switches only,
without the nodes and the other trees named beside it.

Prints one JSON line:
  t            seconds (CLOCK_MONOTONIC)
  cpu          the machine's /proc/stat "cpu" line in clock ticks: user, nice,
               system, idle, iowait, irq, softirq, steal
  cpus         the machine's CPU count
  hz           clock ticks per second
  nodes        per NAME: cpu_ticks (utime + stime of the OS process),
               ctxsw (voluntary + involuntary context switches of all its
               threads), dist_segs_out / dist_segs_in (TCP data segments the
               process sent and received on its distribution connections,
               from `ss -tin`: each is a write or a read of one or more
               distribution messages, the unit that wakes the other node)

Nothing here runs inside a node, so a snapshot costs the nodes nothing.
"""
import json
import os
import re
import subprocess
import sys
import time


def proc_cpu(pid):
    with open('/proc/%s/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return int(fields[11]) + int(fields[12])


def ctxsw(pid):
    n = 0
    for tid in os.listdir('/proc/%s/task' % pid):
        try:
            with open('/proc/%s/task/%s/status' % (pid, tid)) as f:
                for line in f:
                    if line.startswith(('voluntary_ctxt_switches', 'nonvoluntary_ctxt_switches')):
                        n += int(line.split()[1])
        except OSError:
            pass    # a thread that ended
    return n


def quiet(f, pid):
    """f(pid), or 0 for a process that ended meanwhile."""
    try:
        return f(pid)
    except OSError:
        return 0


def tree(pid, skip):
    """pid and its descendants, from /proc/*/stat's parent pids, without the
    processes in skip (the nodes) and theirs."""
    children = {}
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                with open('/proc/%s/stat' % d) as f:
                    ppid = f.read().rsplit(')', 1)[1].split()[1]
            except OSError:
                continue
            children.setdefault(ppid, []).append(d)
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p in skip:
            continue
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def dist_ports():
    out = subprocess.run(['epmd', '-names'], capture_output=True, text=True).stdout
    return {int(p) for p in re.findall(r'^name \S+ at port (\d+)', out, re.M)}


def dist_segments(pids):
    ports = dist_ports()
    segs = {pid: [0, 0] for pid in pids}
    if not ports:
        return segs
    expr = ' or '.join('sport = :%d or dport = :%d' % (p, p) for p in sorted(ports))
    out = subprocess.run(['ss', '-tinpH', 'state', 'established', '( %s )' % expr],
                         capture_output=True, text=True).stdout
    owner = None
    for line in out.splitlines():
        m = re.search(r'pid=(\d+)', line)
        if m:
            owner = m.group(1)
            continue
        if owner in segs:
            o = re.search(r'\bdata_segs_out:(\d+)', line)
            i = re.search(r'\bdata_segs_in:(\d+)', line)
            segs[owner][0] += int(o.group(1)) if o else 0
            segs[owner][1] += int(i.group(1)) if i else 0
    return segs


def main(args):
    named = dict(a.split('=', 1) for a in args)
    with open('/proc/stat') as f:
        cpu = [int(x) for x in f.readline().split()[1:9]]
    segs = dist_segments({p for p in named.values() if not p.startswith('tree:')})
    nodes = {}
    for name, pid in named.items():
        try:
            if pid.startswith('tree:'):
                # Without the nodes and the other trees (the database server
                # is not the load generator's, wherever its parent is).
                skip = {p[5:] if p.startswith('tree:') else p
                        for n, p in named.items() if n != name}
                pids = tree(pid[5:], skip)
                nodes[name] = {'cpu_ticks': sum(quiet(proc_cpu, p) for p in pids),
                               'ctxsw': sum(quiet(ctxsw, p) for p in pids),
                               'processes': len(pids)}
                continue
            nodes[name] = {'cpu_ticks': proc_cpu(pid), 'ctxsw': ctxsw(pid),
                           'dist_segs_out': segs[pid][0], 'dist_segs_in': segs[pid][1]}
        except OSError:
            pass    # a node that is gone
    print(json.dumps({'t': time.monotonic(), 'cpu': cpu, 'cpus': os.cpu_count(),
                      'hz': os.sysconf('SC_CLK_TCK'), 'nodes': nodes}))


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
