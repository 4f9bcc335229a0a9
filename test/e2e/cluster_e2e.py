#!/usr/bin/python3
"""End-to-end test of a two-node Throng cluster with a real client
(Debian's python3-slixmpp): one user on each node.

  /usr/bin/python3 test/e2e/cluster_e2e.py HOST PORT_A PORT_B CA_A CA_B PHASE

PHASE 'chat': dave logs in on node A, gina on node B (SCRAM-SHA-256 over
STARTTLS); they subscribe to each other, see each other's presence, and
exchange messages both ways; hana logs in twice, through node A's and
node B's redirecting listeners (port + 2, redirect_to_home): both sessions
end on her home node, one of them sent there with see-other-host, and a
message from dave reaches her; then dave stays online and the script prints
'ready' and waits: the caller kills node B with kill -9, and dave must get
gina's unavailable presence (sent by node A on behalf of the dead node)
within 20 s. Exits 0 when every step happened.
Note: Debian's python3-* packages are for /usr/bin/python3.
"""
import asyncio
import sys

import slixmpp

STEP_TIMEOUT = 20


class User(slixmpp.ClientXMPP):
    def __init__(self, jid, ca):
        super().__init__(jid, 'secret')
        self.ca_certs = ca
        self.register_plugin('feature_mechanisms', pconfig={'use_mech': 'SCRAM-SHA-256'})
        self.events = asyncio.Queue()
        self.add_event_handler('session_start', self.on_start)
        self.add_event_handler('message', lambda m: self.events.put_nowait(('message', m)))
        self.add_event_handler('presence_available',
                               lambda p: self.events.put_nowait(('available', p)))
        self.add_event_handler('presence_unavailable',
                               lambda p: self.events.put_nowait(('unavailable', p)))
        self.add_event_handler('presence_subscribe', self.on_subscribe)
        self.add_event_handler('presence_subscribed',
                               lambda p: self.events.put_nowait(('subscribed', p)))
        self.add_event_handler('failed_auth', lambda _e: self.events.put_nowait(('auth_failed', None)))

    async def on_start(self, _event):
        await self.get_roster()
        self.send_presence()
        self.events.put_nowait(('session', None))

    def on_subscribe(self, pres):
        self.send_presence(pto=pres['from'].bare, ptype='subscribed')
        self.send_presence(pto=pres['from'].bare, ptype='subscribe')

    async def wait(self, kind, pred=lambda _x: True, timeout=STEP_TIMEOUT):
        while True:
            k, x = await asyncio.wait_for(self.events.get(), timeout)
            if k == 'auth_failed':
                raise AssertionError(f'{self.boundjid.bare}: authentication failed')
            if k == kind and pred(x):
                return x


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f'ok - {what}', flush=True)


async def login(jid, host, port, ca):
    u = User(jid, ca)
    u.connect((host, port), use_ssl=False, force_starttls=True, disable_starttls=False)
    await u.wait('session')
    check(True, f'{jid} logged in on port {port}')
    return u


class Redirectable(User):
    """A user that follows see-other-host (RFC 6120 4.9.3.19) to the address
    given. slixmpp 1.8.3 (Debian 12) reads the address but its reconnect()
    then connects to the JID's domain on port 5222 instead; this override
    connects where the server said. Without TLS: slixmpp would check the new
    host's certificate against its address rather than the domain (RFC 6120
    says the domain), and the test certificate names only the domain."""

    def _handle_stream_error(self, error):
        self.event('stream_error', error)
        if error['condition'] == 'see-other-host':
            host, port = error['see_other_host'].rsplit(':', 1)

            async def again(_event):
                self.connect((host, int(port)), use_ssl=False, force_starttls=False,
                             disable_starttls=True)
            self.add_event_handler('disconnected', again, disposable=True)
            self.disconnect()


async def login_plain(jid, host, port):
    u = Redirectable(jid, None)
    u.connect((host, port), use_ssl=False, force_starttls=False, disable_starttls=True)
    await u.wait('session')
    return u


def from_bare(bare):
    return lambda x: x['from'].bare == bare


async def main(host, port_a, port_b, ca_a, ca_b):
    dave = await login('dave@localhost/a', host, port_a, ca_a)
    gina = await login('gina@localhost/b', host, port_b, ca_b)
    dave.send_presence(pto='gina@localhost', ptype='subscribe')
    await dave.wait('subscribed', from_bare('gina@localhost'))
    check(True, 'subscription request and approval crossed the nodes')
    await dave.wait('available', from_bare('gina@localhost'))
    await gina.wait('available', from_bare('dave@localhost'))
    check(True, 'each sees the other available across the nodes')
    dave.send_message(mto='gina@localhost', mbody='from node A', mtype='chat')
    m = await gina.wait('message', lambda m: m['body'] == 'from node A')
    check(m['from'] == 'dave@localhost/a', 'a message from node A reached node B')
    gina.send_message(mto='dave@localhost/a', mbody='from node B', mtype='chat')
    await dave.wait('message', lambda m: m['body'] == 'from node B')
    check(True, 'a message from node B reached node A (full JID)')
    node_of = {port_a: 'A', port_a + 2: 'A', port_b: 'B', port_b + 2: 'B'}
    h1 = await login_plain('hana@localhost/1', host, port_a + 2)
    h2 = await login_plain('hana@localhost/2', host, port_b + 2)
    ends = [node_of.get(h.address[1]) for h in (h1, h2)]
    check(ends[0] == ends[1] and ends[0] is not None,
          f"hana logged in through node A and node B: both sessions on node {ends[0]}, her home")
    check(h1.address[1] != port_a + 2 or h2.address[1] != port_b + 2,
          'one of them was sent there (see-other-host)')
    dave.send_message(mto='hana@localhost/2', mbody='to her home', mtype='chat')
    await h2.wait('message', lambda m: m['body'] == 'to her home')
    check(True, 'a message from dave reached hana on her home node')
    h1.disconnect()
    h2.disconnect()
    print('ready', flush=True)
    # The caller kills node B now.
    p = await dave.wait('unavailable', lambda p: p['from'] == 'gina@localhost/b', timeout=30)
    check(p is not None, "node B killed: node A sent gina's unavailable presence to dave")
    dave.disconnect()


if __name__ == '__main__':
    try:
        asyncio.get_event_loop().run_until_complete(main(sys.argv[1], int(sys.argv[2]),
                                                         int(sys.argv[3]), sys.argv[4], sys.argv[5]))
    except (AssertionError, asyncio.TimeoutError) as e:
        print(f'not ok - {e!r}', flush=True)
        sys.exit(1)
