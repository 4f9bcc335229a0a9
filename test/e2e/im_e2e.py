#!/usr/bin/python3
"""End-to-end test of the IM extensions with a real third-party client,
Debian's python3-slixmpp, and its own plugins: XEP-0280 carbons (xep_0280),
XEP-0163 PEP with XEP-0115 capabilities (xep_0163, xep_0115, xep_0084
avatars), XEP-0060 explicit subscriptions to a PEP node (xep_0060), XEP-0191 blocking (xep_0191) and XEP-0352 client state
indication (xep_0352).

Two accounts A and B (password 'secret', as slixmpp_e2e.py's) become
mutual contacts. A logs in twice (two resources with carbons on); B
messages one of them and the other gets a received carbon; A's resource
answers and the other gets a sent carbon. B's client declares interest in
avatars (+notify through its capabilities); A publishes avatar metadata and
B's client gets the event. B subscribes explicitly to A's microblog node,
gets its posts, lists its subscriptions and unsubscribes. A's second resource says it is inactive; B's
presence change waits until it is active again. A blocks B: B's message
bounces and the blocklist lists B; then A unblocks B.

  /usr/bin/python3 test/e2e/im_e2e.py HOST PORT CA_CERT A_JID B_JID

Exits 0 when every step happened, 1 (with the failed step) otherwise.
"""
import asyncio
import sys
import xml.etree.ElementTree as ET

import slixmpp_e2e as base
from slixmpp.exceptions import IqError

STEP = base.STEP_TIMEOUT


async def login(jid, host, port, ca, interest=None):
    u = base.User(jid, 'secret', ca)
    for p in ('xep_0115', 'xep_0163', 'xep_0060', 'xep_0084', 'xep_0280', 'xep_0191', 'xep_0352'):
        u.register_plugin(p)
    u.carbons = asyncio.Queue()
    u.avatars = asyncio.Queue()
    u.presences = asyncio.Queue()
    u.add_event_handler('carbon_received', lambda m: u.carbons.put_nowait(('received', m)))
    u.add_event_handler('carbon_sent', lambda m: u.carbons.put_nowait(('sent', m)))
    u.add_event_handler('avatar_metadata_publish', lambda m: u.avatars.put_nowait(m))
    u.add_event_handler('presence', lambda p: u.presences.put_nowait(p))
    if interest:
        # The +notify feature goes into the client's capabilities.
        u['xep_0163'].add_interest(interest)
    u.connect((host, port), use_ssl=False, force_starttls=True, disable_starttls=False)
    await u.wait('session')
    return u


async def mutual(a, b):
    if a.client_roster[b.boundjid.bare]['subscription'] == 'both':
        return
    a.send_presence(pto=b.boundjid.bare, ptype='subscribe')
    await b.wait('subscribe', lambda p: p['from'].bare == a.boundjid.bare)
    await a.wait('subscribed', lambda p: p['from'].bare == b.boundjid.bare)
    await b.wait('subscribed', lambda p: p['from'].bare == a.boundjid.bare)


async def next_of(queue, pred, timeout=STEP):
    while True:
        x = await asyncio.wait_for(queue.get(), timeout)
        if pred(x):
            return x


async def nothing_from(queue, pred, seconds):
    try:
        await next_of(queue, pred, seconds)
        return False
    except asyncio.TimeoutError:
        return True


async def main(host, port, ca, a_jid, b_jid):
    a1 = await login(a_jid + '/one', host, port, ca)
    b = await login(b_jid + '/phone', host, port, ca, interest='urn:xmpp:avatar:metadata')
    await mutual(a1, b)
    a2 = await login(a_jid + '/two', host, port, ca)
    await a1['xep_0280'].enable()
    await a2['xep_0280'].enable()
    base.check(True, 'xep_0280: both of A\'s resources enabled carbons')

    # XEP-0280: a received carbon on the other resource, then a sent one.
    b.send_message(mto=a_jid + '/one', mbody='carbon me', mtype='chat')
    m = await a1.wait('message', lambda m: m['body'] == 'carbon me')
    kind, c = await next_of(a2.carbons, lambda x: True)
    fwd = c['carbon_received'] if kind == 'received' else c['carbon_sent']
    base.check(kind == 'received' and fwd['body'] == 'carbon me' and fwd['from'].bare == b_jid,
               'xep_0280: the other resource got a received carbon of B\'s message')
    a1.send_message(mto=b_jid, mbody='answer', mtype='chat')
    await b.wait('message', lambda m: m['body'] == 'answer')
    kind, c = await next_of(a2.carbons, lambda x: True)
    base.check(kind == 'sent' and c['carbon_sent']['body'] == 'answer',
               'xep_0280: the other resource got a sent carbon of the answer')

    # XEP-0163 + XEP-0115 + XEP-0084: B's client is interested in avatar
    # metadata (its caps say urn:xmpp:avatar:metadata+notify).
    await a1['xep_0084'].publish_avatar_metadata(
        items=[{'id': '0123456789abcdef0123456789abcdef01234567', 'type': 'image/png',
                'bytes': '1234', 'width': '64', 'height': '64'}])
    ev = await next_of(b.avatars, lambda m: m['from'].bare == a_jid)
    base.check(ev is not None, 'xep_0163/xep_0084: B got A\'s avatar metadata event '
                               '(filtered by B\'s capabilities)')
    items = await b['xep_0060'].get_items(a_jid, 'urn:xmpp:avatar:metadata')
    base.check(len(items['pubsub']['items']) == 1, 'xep_0060: B reads A\'s avatar metadata item')

    # XEP-0060 explicit subscription (what a microblog reader does): B's
    # capabilities do not ask for the node, so B subscribes; it gets the
    # last post at once, then each new one, until it unsubscribes.
    blog = 'urn:xmpp:microblog:0'
    posts = asyncio.Queue()
    b.add_event_handler('pubsub_publish',
                        lambda m: posts.put_nowait(m['pubsub_event']['items']['item']['id'])
                        if m['pubsub_event']['items']['node'] == blog else None)

    def post(title):
        return ET.fromstring(f'<entry xmlns="http://www.w3.org/2005/Atom"><title>{title}</title></entry>')
    await a1['xep_0060'].publish(a_jid, blog, id='post1', payload=post('first'))
    r = await b['xep_0060'].subscribe(a_jid, blog)
    base.check(r['pubsub']['subscription']['subscription'] == 'subscribed',
               'xep_0060: B subscribed to A\'s microblog node')
    base.check(await next_of(posts, lambda i: i == 'post1') == 'post1',
               'xep_0060: B got the last post when it subscribed')
    await a1['xep_0060'].publish(a_jid, blog, id='post2', payload=post('second'))
    base.check(await next_of(posts, lambda i: i == 'post2') == 'post2',
               'xep_0060: B got the next post')
    subs = await b['xep_0060'].get_subscriptions(a_jid)
    base.check([s['node'] for s in subs['pubsub']['subscriptions']] == [blog],
               'xep_0060: B\'s subscriptions list the node')
    await b['xep_0060'].unsubscribe(a_jid, blog)
    await a1['xep_0060'].publish(a_jid, blog, id='post3', payload=post('third'))
    base.check(await nothing_from(posts, lambda i: i == 'post3', 2),
               'xep_0060: after unsubscribing B gets no more posts')

    # XEP-0352: A's second resource is inactive; B's presence change waits.
    base.check(a2['xep_0352'].enabled,
               'xep_0352: the server offered client state indication (the plugin saw the feature)')
    a2['xep_0352'].send_inactive()
    await asyncio.sleep(0.5)
    b.send_presence(pshow='away')
    held = await nothing_from(a2.presences, lambda p: p['from'] == b.boundjid and p['show'] == 'away', 2)
    base.check(held, 'xep_0352: an inactive resource does not get the presence update')
    a2['xep_0352'].send_active()
    p = await next_of(a2.presences, lambda p: p['from'] == b.boundjid and p['show'] == 'away')
    base.check(p is not None, 'xep_0352: it gets it when it is active again')

    # XEP-0191: A blocks B.
    await a1['xep_0191'].block(b_jid)
    blocked = await a1['xep_0191'].get_blocked()
    base.check(b_jid in {str(j) for j in blocked['blocklist']['items']},
               'xep_0191: A\'s blocklist lists B')
    b.send_message(mto=a_jid + '/one', mbody='let me in', mtype='chat')
    err = await b.wait('message', lambda m: m['type'] == 'error')
    base.check(err['error']['condition'] == 'service-unavailable',
               'xep_0191: B\'s message to A bounces with service-unavailable')
    await a1['xep_0191'].unblock(b_jid)
    blocked = await a1['xep_0191'].get_blocked()
    base.check(len(blocked['blocklist']['items']) == 0, 'xep_0191: A unblocked B')

    for u in (a1, a2, b):
        u.disconnect()


if __name__ == '__main__':
    try:
        asyncio.get_event_loop().run_until_complete(main(*sys.argv[1:6]))
    except (AssertionError, asyncio.TimeoutError, IqError) as e:
        print(f'not ok - {type(e).__name__}: {e}', flush=True)
        sys.exit(1)
