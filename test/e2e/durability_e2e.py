#!/usr/bin/python3
"""Durability across kill -9, with a real client (python3-slixmpp).

  durability_e2e.py before HOST PORT CA   -- alice adds dave to her roster and
                                            sends carol (offline) a message;
                                            each is confirmed by the server
  durability_e2e.py after HOST PORT CA    -- after the node was killed with
                                            SIGKILL and restarted: dave is still
                                            in alice's roster and carol gets
                                            the message

The server answers a client's stanzas in order, and commits a roster change
or an offline message before it goes on; so when a later ping is answered,
what came before it was committed.
"""
import asyncio
import sys

import slixmpp

TIMEOUT = 20


class Client(slixmpp.ClientXMPP):
    def __init__(self, jid, ca):
        super().__init__(jid, 'secret')
        self.ca_certs = ca
        self.register_plugin('xep_0199')
        self.register_plugin('xep_0203')
        self.ready = asyncio.Event()
        self.inbox = asyncio.Queue()
        self.add_event_handler('session_start', self.start)
        self.add_event_handler('message', self.inbox.put_nowait)

    async def start(self, _e):
        await self.get_roster()
        self.send_presence()
        self.ready.set()


async def session(jid, host, port, ca):
    c = Client(jid, ca)
    c.connect((host, port))
    await asyncio.wait_for(c.ready.wait(), TIMEOUT)
    return c


async def before(host, port, ca):
    alice = await session('alice@localhost/d', host, port, ca)
    await alice.update_roster('dave@localhost', name='Dave', groups=['Friends'])
    alice.send_message(mto='carol@localhost', mbody='survives kill -9', mtype='chat')
    await alice['xep_0199'].ping(jid='localhost', timeout=TIMEOUT)
    print('ok - roster change and offline message confirmed before the kill', flush=True)


async def after(host, port, ca):
    alice = await session('alice@localhost/d', host, port, ca)
    item = alice.client_roster['dave@localhost']
    assert item['name'] == 'Dave', 'dave is no longer in alice\'s roster'
    print('ok - alice\'s roster still has dave after kill -9', flush=True)
    carol = await session('carol@localhost/d', host, port, ca)
    while True:
        m = await asyncio.wait_for(carol.inbox.get(), TIMEOUT)
        if m['body'] == 'survives kill -9':
            break
    assert m['delay']['stamp'] is not None
    print('ok - carol got the offline message stored before kill -9', flush=True)


if __name__ == '__main__':
    phase, host, port, ca = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    try:
        asyncio.get_event_loop().run_until_complete(
            {'before': before, 'after': after}[phase](host, port, ca))
    except (AssertionError, asyncio.TimeoutError) as e:
        print(f'not ok - {phase}: {e or "timed out"}', flush=True)
        sys.exit(1)
