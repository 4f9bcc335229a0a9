#!/usr/bin/python3
"""Zero loss across kill -9 of the node, for messages the server acknowledged
(XEP-0198 <a h=''/>) to their sender, in the three places a message can be
when the node dies (docs/architecture.md, "What survives kill -9"):

  offline    N messages to fay, who is offline;
  detached   N messages to bob, whose connection was reset while his
             session waits for a resumption;
  popped     M messages stored for erin, delivered at her login, never
             acknowledged by her client, whose connection is then reset.

  kill9_e2e.py before HOST PORT [N M]  -- sends, checks the sender's ack
  kill9_e2e.py after HOST PORT [N M]   -- after kill -9 and a restart: each
                                          user logs in and must get every
                                          message (a duplicate is allowed
                                          and reported; a loss fails)
"""
import socket
import sys
import time

from rawxmpp import Client


def before(host, port, n, m):
    alice = Client(host, port, 'alice', 'secret', 'kill9')
    alice.enable()
    for i in range(n):
        alice.message('fay@localhost', 'offline %d' % i)
    assert alice.acked() == n, 'the server did not acknowledge every offline message'
    print('ok - %d messages to offline fay acknowledged' % n, flush=True)

    bob = Client(host, port, 'bob', 'secret', 'phone')
    bob.enable()
    bob.send('<presence/>')
    bob.recv_until(lambda e: e.tag == 'presence')
    bob.reset()
    time.sleep(1)
    for i in range(n):
        alice.message('bob@localhost', 'detached %d' % i)
    assert alice.acked() == 2 * n, 'the server did not acknowledge every message to bob'
    print('ok - %d messages to bob\'s detached session acknowledged' % n, flush=True)

    for i in range(m):
        alice.message('erin@localhost', 'popped %d' % i)
    assert alice.acked() == 2 * n + m
    erin = Client(host, port, 'erin', 'secret', 'phone')
    erin.enable()
    erin.send('<presence/>')
    got = erin.messages(m, ack=False)
    assert len(got) == m
    erin.reset()
    print('ok - erin received her %d stored messages and never acknowledged them' % m, flush=True)


def collect(host, port, user, prefix, count):
    c = Client(host, port, user, 'secret', 'after')
    c.send('<presence/>')
    seen, dups = set(), 0
    deadline = time.time() + 60
    while len(seen) < count and time.time() < deadline:
        try:
            el = c.recv()
        except socket.timeout:
            break
        body = el.find('body') if el.tag == 'message' else None
        if body is not None and body.text and body.text.startswith(prefix):
            dups += body.text in seen
            seen.add(body.text)
    c.close()
    if len(seen) < count:
        raise AssertionError('%s got %d of %d messages: %d lost'
                             % (user, len(seen), count, count - len(seen)))
    print('ok - %s got all %d messages after kill -9 (%d delivered twice)'
          % (user, count, dups), flush=True)


def after(host, port, n, m):
    collect(host, port, 'fay', 'offline ', n)
    collect(host, port, 'bob', 'detached ', n)
    collect(host, port, 'erin', 'popped ', m)


if __name__ == '__main__':
    phase, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
    m = int(sys.argv[5]) if len(sys.argv) > 5 else 100
    try:
        {'before': before, 'after': after}[phase](host, port, n, m)
    except (AssertionError, OSError) as e:
        print('not ok - %s: %s' % (phase, e), flush=True)
        sys.exit(1)
