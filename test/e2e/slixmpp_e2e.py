#!/usr/bin/python3
"""End-to-end test with a real third-party client, Debian's python3-slixmpp.

Two users log in with SCRAM-SHA-256-PLUS (channel binding: slixmpp binds
to tls-unique) over STARTTLS (the server's certificate
is trusted as a CA, so the TLS handshake is verified for 'localhost'),
subscribe to each other, exchange messages and presence; one goes offline
and, at its next login, gets the message stored meanwhile, with a XEP-0203
delay stamp.

Then, with DIRECT_PORT, a third login over direct TLS (XEP-0368: TLS from
the first byte, the certificate verified the same way) sends bob a message.

  /usr/bin/python3 test/e2e/slixmpp_e2e.py HOST PORT CA_CERT [DIRECT_PORT]

Exits 0 when every step happened, 1 (with the failed step) otherwise.
Note: Debian's python3-* packages are for /usr/bin/python3.
"""
import asyncio
import logging
import ssl
import sys

import slixmpp

STEP_TIMEOUT = 20


class User(slixmpp.ClientXMPP):
    def __init__(self, jid, password, ca):
        super().__init__(jid, password)
        self.ca_certs = ca
        self.register_plugin('feature_mechanisms', pconfig={'use_mech': 'SCRAM-SHA-256-PLUS'})
        for p in ('xep_0030', 'xep_0199', 'xep_0203'):
            self.register_plugin(p)
        self.events = asyncio.Queue()
        self.tls_done = False
        self.mech = None
        self.add_event_handler('session_start', self.on_start)
        self.add_event_handler('message', lambda m: self.events.put_nowait(('message', m)))
        self.add_event_handler('presence_available',
                               lambda p: self.events.put_nowait(('available', p)))
        self.add_event_handler('presence_subscribe', self.on_subscribe)
        self.add_event_handler('presence_subscribed',
                               lambda p: self.events.put_nowait(('subscribed', p)))
        self.add_event_handler('ssl_cert', lambda _c: setattr(self, 'tls_done', True))
        self.add_event_handler('auth_success', self.on_auth)
        self.add_event_handler('failed_auth', lambda _e: self.events.put_nowait(('auth_failed', None)))

    def on_auth(self, _stanza):
        self.mech = self['feature_mechanisms'].mech.name if self['feature_mechanisms'].mech else None

    async def on_start(self, _event):
        await self.get_roster()
        self.send_presence()
        self.events.put_nowait(('session', None))

    def on_subscribe(self, pres):
        # Approve, and ask back: the subscription becomes mutual.
        self.send_presence(pto=pres['from'].bare, ptype='subscribed')
        self.send_presence(pto=pres['from'].bare, ptype='subscribe')
        self.events.put_nowait(('subscribe', pres))

    async def wait(self, kind, pred=lambda _x: True):
        while True:
            k, x = await asyncio.wait_for(self.events.get(), STEP_TIMEOUT)
            if k == 'auth_failed':
                raise AssertionError(f'{self.boundjid.bare}: authentication failed')
            if k == kind and pred(x):
                return x


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f'ok - {what}', flush=True)


async def login(jid, host, port, ca, direct=False, cls=None):
    u = (cls or User)(jid, 'secret', ca)
    if direct:
        u.connect((host, port), use_ssl=True)
    else:
        u.connect((host, port), use_ssl=False, force_starttls=True, disable_starttls=False)
    await u.wait('session')
    if direct:
        # Direct TLS: slixmpp verifies in the connection's SSL context (no
        # ssl_cert event); a verified peer certificate shows in getpeercert().
        tls = u.transport.get_extra_info('ssl_object')
        verified = (tls is not None and u.ssl_context.verify_mode == ssl.CERT_REQUIRED
                    and bool(tls.getpeercert()))
        check(verified, f'{jid}: direct TLS ({tls.version() if tls else "none"}) negotiated '
                        'and the certificate verified')
    else:
        check(u.tls_done, f'{jid}: STARTTLS negotiated and the certificate verified')
    check(u.mech == 'SCRAM-SHA-256-PLUS',
          f'{jid}: authenticated with SCRAM-SHA-256-PLUS, channel binding tls-unique (got {u.mech})')
    return u


async def main(host, port, ca, direct_port):
    alice = await login('alice@localhost/laptop', host, port, ca)
    bob = await login('bob@localhost/phone', host, port, ca)

    # Subscriptions both ways: alice asks, bob approves and asks back,
    # alice's client approves automatically too.
    alice.send_presence(pto='bob@localhost', ptype='subscribe')
    await bob.wait('subscribe', lambda p: p['from'].bare == 'alice@localhost')
    await alice.wait('subscribed', lambda p: p['from'].bare == 'bob@localhost')
    await bob.wait('subscribed', lambda p: p['from'].bare == 'alice@localhost')
    await asyncio.sleep(0.5)
    check(alice.client_roster['bob@localhost']['subscription'] == 'both',
          'alice has a mutual subscription with bob')
    check(bob.client_roster['alice@localhost']['subscription'] == 'both',
          'bob has a mutual subscription with alice')

    # Presence flows once subscribed.
    alice.send_presence(pstatus='at work')
    p = await bob.wait('available', lambda p: p['from'] == 'alice@localhost/laptop'
                       and p['status'] == 'at work')
    check(p is not None, 'bob sees alice\'s presence update')

    # Messages both ways.
    alice.send_message(mto='bob@localhost', mbody='hello bob', mtype='chat')
    m = await bob.wait('message', lambda m: m['body'] == 'hello bob')
    check(str(m['from']) == 'alice@localhost/laptop', 'bob got alice\'s message from her full JID')
    bob.send_message(mto=m['from'], mbody='hi alice', mtype='chat')
    await alice.wait('message', lambda m: m['body'] == 'hi alice')
    check(True, 'alice got bob\'s reply')

    # Bob goes offline; a message for him is stored and delivered at his
    # next login with a delay stamp.
    bob.disconnect()
    await asyncio.sleep(1)
    alice.send_message(mto='bob@localhost', mbody='while you were away', mtype='chat')
    await asyncio.sleep(1)
    bob2 = await login('bob@localhost/tablet', host, port, ca)
    m = await bob2.wait('message', lambda m: m['body'] == 'while you were away')
    check(m['delay']['stamp'] is not None, 'the stored message arrived with a XEP-0203 delay stamp')
    check(m['from'].bare == 'alice@localhost', 'the stored message is from alice')

    if direct_port:
        direct = await login('alice@localhost/direct', host, direct_port, ca, direct=True)
        direct.send_message(mto='bob@localhost/tablet', mbody='over direct TLS', mtype='chat')
        m = await bob2.wait('message', lambda m: m['body'] == 'over direct TLS')
        check(str(m['from']) == 'alice@localhost/direct',
              'bob got a message from alice\'s direct TLS session')
        direct.disconnect()

    alice.disconnect()
    bob2.disconnect()
    await asyncio.sleep(0.5)


if __name__ == '__main__':
    logging.basicConfig(level=logging.ERROR)
    host, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    direct_port = int(sys.argv[4]) if len(sys.argv) > 4 else None
    try:
        asyncio.get_event_loop().run_until_complete(main(host, port, ca, direct_port))
    except (AssertionError, asyncio.TimeoutError) as e:
        print(f'not ok - {e or "timed out"}', flush=True)
        sys.exit(1)
    print('slixmpp end-to-end: all steps passed')
