#!/usr/bin/python3
"""End-to-end test of XEP-0045 multi-user chat with a real third-party
client: Debian's python3-slixmpp and its xep_0045 plugin, and of the
room's archive (XEP-0313 on the room's JID) with its xep_0313, xep_0359
and xep_0059 plugins.

A creates a room on the MUC service (locked, status 201), accepts the
default configuration (an instant room), and B joins; they exchange
groupchat messages through the room; B leaves and joins again asking for
history, and gets the messages it had seen; the service's disco#items
lists the room. The room announces its archive; each groupchat message
came with the room's stanza id; B reads the room's archive back (paged by
slixmpp's RSM iterator) with the same ids. Accounts A and B have the password 'secret' (as
slixmpp_e2e.py's).

  /usr/bin/python3 test/e2e/muc_e2e.py HOST PORT CA_CERT A_JID B_JID SERVICE

Exits 0 when every step happened, 1 (with the failed step) otherwise.
"""
import asyncio
import sys

import slixmpp_e2e as base
from slixmpp import JID
from slixmpp.exceptions import IqError, PresenceError

STEP = base.STEP_TIMEOUT


async def login(jid, host, port, ca):
    u = base.User(jid, 'secret', ca)
    for p in ('xep_0045', 'xep_0004', 'xep_0059', 'xep_0313', 'xep_0359'):
        u.register_plugin(p)
    u.room_messages = asyncio.Queue()
    u.add_event_handler('groupchat_message', lambda m: u.room_messages.put_nowait(m))
    u.connect((host, port), use_ssl=False, force_starttls=True, disable_starttls=False)
    await u.wait('session')
    return u


async def message(u, body):
    while True:
        m = await asyncio.wait_for(u.room_messages.get(), STEP)
        if m['body'] == body:
            return m


async def main(host, port, ca, a_jid, b_jid, service):
    room = JID(f'e2e-room@{service}')
    a = await login(a_jid + '/muc', host, port, ca)
    b = await login(b_jid + '/muc', host, port, ca)

    own, _subject, _occupants, _history = await a['xep_0045'].join_muc_wait(room, 'alpha', timeout=STEP)
    codes = own['muc']['status_codes']
    base.check(201 in codes and 110 in codes,
               f'xep_0045: A created the room (status 201, self-presence 110; got {sorted(codes)})')
    form = await a['xep_0045'].get_room_config(room)
    form['type'] = 'submit'
    await a['xep_0045'].set_room_config(room, form)
    base.check(True, 'xep_0045: A accepted the default configuration (the room is unlocked)')

    _own, _s, occupants, _h = await b['xep_0045'].join_muc_wait(room, 'beta', timeout=STEP)
    base.check('alpha' in {str(o['from'].resource) for o in occupants},
               'xep_0045: B joined and saw A among the occupants')

    a.send_message(mto=room, mbody='hello room', mtype='groupchat')
    m = await message(b, 'hello room')
    base.check(m['from'] == JID(f'{room}/alpha'), 'xep_0045: B got A\'s groupchat message from alpha')
    b.send_message(mto=room, mbody='hello alpha', mtype='groupchat')
    m2 = await message(a, 'hello alpha')
    base.check(True, 'xep_0045: A got B\'s answer')

    info = await b['xep_0030'].get_info(jid=room.bare)
    base.check('urn:xmpp:mam:2' in info['disco_info']['features'],
               'xep_0313: the room announces its archive (urn:xmpp:mam:2)')
    live = [m['stanza_id']['id'], m2['stanza_id']['id']]
    base.check(m['stanza_id']['by'] == room.bare and all(live),
               'xep_0359: groupchat messages carry the room\'s stanza id (by the room)')
    results = [r async for r in b['xep_0313'].iterate(jid=JID(room.bare), rsm={'max': 1})]
    bodies = [r['mam_result']['forwarded']['stanza']['body'] for r in results]
    senders = [r['mam_result']['forwarded']['stanza']['from'] for r in results]
    base.check(bodies == ['hello room', 'hello alpha']
               and senders == [JID(f'{room}/alpha'), JID(f'{room}/beta')],
               f'xep_0313: the room\'s archive, a page at a time, holds both messages from their nicks ({bodies})')
    base.check([r['mam_result']['id'] for r in results] == live,
               'xep_0313: the archive\'s ids are the stanza ids received live')

    b['xep_0045'].leave_muc(room, 'beta')
    await asyncio.sleep(0.5)
    _own, _s, _o, history = await b['xep_0045'].join_muc_wait(room, 'beta', maxstanzas=10, timeout=STEP)
    bodies = [h['body'] for h in history]
    base.check('hello room' in bodies and 'hello alpha' in bodies,
               f'xep_0045: B joined again and got the history ({len(bodies)} messages)')

    items = await a['xep_0030'].get_items(jid=service)
    base.check(room.bare in {str(i[0]) for i in items['disco_items']['items']},
               'xep_0030: the MUC service lists the room')
    for u in (a, b):
        u.disconnect()


if __name__ == '__main__':
    try:
        asyncio.get_event_loop().run_until_complete(main(*sys.argv[1:7]))
    except (AssertionError, asyncio.TimeoutError, IqError, PresenceError) as e:
        print(f'not ok - {type(e).__name__}: {e}', flush=True)
        sys.exit(1)
