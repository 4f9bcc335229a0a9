#!/usr/bin/python3
"""End-to-end test of the message archive (XEP-0313) with a real
third-party client: Debian's python3-slixmpp and its xep_0313 (MAM),
xep_0359 (stanza ids), xep_0059 (RSM) and xep_0441 (preferences) plugins.

Two users who have never talked log in over STARTTLS; the archive is
advertised on the account; one sends the other 25 messages, each received
with the recipient archive's stanza id; the recipient pages through its
archive with slixmpp's RSM iterator (pages of 10) and finds the 25 in
order under the same ids; the 'with' filter, the last page and the
sender's own archive; then the recipient goes offline, 3 more messages
come, and at its next login it catches up from the archive after the last
id it knew (as mobile clients do), the offline copies carrying the same
ids.

  /usr/bin/python3 test/e2e/mam_e2e.py HOST PORT CA_CERT USER1 USER2

USER1 and USER2 (password 'secret') must exist with empty archives.
Exits 0 when every step happened, 1 (with the failed step) otherwise.
"""
import asyncio
import logging
import sys

import slixmpp

STEP_TIMEOUT = 20
N = 25


class User(slixmpp.ClientXMPP):
    def __init__(self, jid, password, ca):
        super().__init__(jid, password)
        self.ca_certs = ca
        for p in ('xep_0030', 'xep_0059', 'xep_0313', 'xep_0359', 'xep_0441'):
            self.register_plugin(p)
        self.messages = asyncio.Queue()
        self.started = asyncio.Event()
        self.add_event_handler('session_start', self.on_start)
        # Live and offline messages; archive results are collected by the
        # plugin and have no body of their own.
        self.add_event_handler('message', lambda m: m['body'] and self.messages.put_nowait(m))

    async def on_start(self, _event):
        self.send_presence()
        self.started.set()

    async def next_message(self):
        return await asyncio.wait_for(self.messages.get(), STEP_TIMEOUT)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f'ok - {what}', flush=True)


async def login(jid, host, port, ca):
    u = User(jid, 'secret', ca)
    u.connect((host, port), use_ssl=False, force_starttls=True, disable_starttls=False)
    await asyncio.wait_for(u.started.wait(), STEP_TIMEOUT)
    return u


def result_id(msg):
    return msg['mam_result']['id']


def forwarded_body(msg):
    return msg['mam_result']['forwarded']['stanza']['body']


async def archive(user, **kwargs):
    """Every message of the user's archive, through slixmpp's RSM iterator."""
    return [m async for m in user['xep_0313'].iterate(**kwargs)]


async def main(host, port, ca, u1, u2):
    a = await login(f'{u1}@localhost/phone', host, port, ca)
    b = await login(f'{u2}@localhost/laptop', host, port, ca)

    info = await b['xep_0030'].get_info(jid=f'{u2}@localhost')
    features = info['disco_info']['features']
    check('urn:xmpp:mam:2' in features and 'urn:xmpp:mam:2#extended' in features,
          'the account advertises urn:xmpp:mam:2 and #extended')
    default, always, never = await b['xep_0441'].get_preferences()
    check((default, list(always), list(never)) == ('always', [], []),
          'preferences (XEP-0441): default always, no lists')

    live = []
    for i in range(N):
        a.send_message(mto=f'{u2}@localhost', mbody=f'msg {i}', mtype='chat')
        m = await b.next_message()
        live.append(m)
    check([m['body'] for m in live] == [f'msg {i}' for i in range(N)],
          f'{N} messages received live, in order')
    check(all(m['stanza_id']['by'] == f'{u2}@localhost' and m['stanza_id']['id'] for m in live),
          'each carries a stanza-id of the recipient\'s archive')

    results = await archive(b, rsm={'max': 10})
    check([forwarded_body(r) for r in results] == [f'msg {i}' for i in range(N)],
          f'the archive, paged by slixmpp\'s RSM iterator (max 10), holds the {N} in order')
    check([result_id(r) for r in results] == [m['stanza_id']['id'] for m in live],
          'the archive\'s ids are the stanza ids received live')
    check(all(r['mam_result']['forwarded']['delay']['stamp'] is not None for r in results),
          'every result has a delay stamp')

    with_a = await archive(b, with_jid=slixmpp.JID(f'{u1}@localhost'), rsm={'max': 50})
    check(len(with_a) == N, f'with={u1}@localhost: {len(with_a)} messages')
    with_nobody = await archive(b, with_jid=slixmpp.JID('nobody@localhost'), rsm={'max': 50})
    check(with_nobody == [], 'with someone else: none')

    newest = [m async for m in b['xep_0313'].iterate(reverse=True, rsm={'max': 5}, total=5)]
    check([forwarded_body(r) for r in newest] == [f'msg {i}' for i in reversed(range(N - 5, N))],
          'read backwards from an empty <before/>: the newest 5, newest first')

    sent = await archive(a, rsm={'max': 50})
    check([forwarded_body(r) for r in sent] == [f'msg {i}' for i in range(N)],
          'the sender\'s archive holds what it sent')

    meta = await b['xep_0313'].get_archive_metadata()
    check(meta['mam_metadata']['end']['id'] == live[-1]['stanza_id']['id'],
          'metadata: the archive ends with the last message')

    # Offline, then catching up from the archive after the last known id.
    known = live[-1]['stanza_id']['id']
    b.disconnect()
    await asyncio.sleep(1)
    for i in range(N, N + 3):
        a.send_message(mto=f'{u2}@localhost', mbody=f'msg {i}', mtype='chat')
    await asyncio.sleep(1)
    b2 = await login(f'{u2}@localhost/tablet', host, port, ca)
    offline = [await b2.next_message() for _ in range(3)]
    caught = await archive(b2, rsm={'max': 50, 'after': known})
    check([forwarded_body(r) for r in caught] == [f'msg {i}' for i in range(N, N + 3)],
          'at the next login, the archive after the last known id holds the 3 new messages')
    check([result_id(r) for r in caught] == [m['stanza_id']['id'] for m in offline],
          'the offline copies carry the same stanza ids as the archive')

    a.disconnect()
    b2.disconnect()
    await asyncio.sleep(0.5)


if __name__ == '__main__':
    logging.basicConfig(level=logging.ERROR)
    host, port, ca, u1, u2 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    try:
        asyncio.get_event_loop().run_until_complete(main(host, port, ca, u1, u2))
    except (AssertionError, asyncio.TimeoutError) as e:
        print(f'not ok - {e or "timed out"}', flush=True)
        sys.exit(1)
    print('slixmpp MAM end-to-end: all steps passed')
