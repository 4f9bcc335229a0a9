#!/usr/bin/python3
"""End-to-end test of private XML storage (XEP-0049) and vCards (XEP-0054,
XEP-0153) with a real third-party client, Debian's python3-slixmpp and its
plugins xep_0048/xep_0049 (bookmarks kept in private storage) and xep_0054.

Two users (STARTTLS, the server's certificate trusted as a CA): erin stores
bookmarks in private storage and reads them back, which fay may not do;
erin publishes a vCard with a photo and reads it back; fay reads it at
erin's bare JID; fay, subscribed to erin, gets erin's presence with the
server-added avatar hash (erin's client does not run xep_0153), and after
erin publishes a vCard without the photo, an empty <photo/>.

  /usr/bin/python3 test/e2e/vcard_e2e.py HOST PORT CA_CERT

Exits 0 when every step happened, 1 (with the failed step) otherwise.
"""
import asyncio
import hashlib
import logging
import sys

from slixmpp.exceptions import IqError

import slixmpp_e2e
from slixmpp_e2e import check

NS_UPDATE = '{vcard-temp:x:update}'


class User(slixmpp_e2e.User):
    """slixmpp_e2e's user (SCRAM-SHA-256-PLUS over STARTTLS, initial
    presence at session start, subscriptions approved and returned) with
    the private storage, bookmarks and vCard plugins."""
    def __init__(self, jid, password, ca):
        super().__init__(jid, password, ca)
        for p in ('xep_0049', 'xep_0048', 'xep_0054'):
            self.register_plugin(p)


async def login(jid, host, port, ca):
    return await slixmpp_e2e.login(jid, host, port, ca, cls=User)


def photo_of(pres):
    """What a presence says of the avatar: None (no update element), or the
    text of its <photo/> ('' when empty)."""
    x = pres.xml.find(NS_UPDATE + 'x')
    if x is None:
        return None
    photo = x.find(NS_UPDATE + 'photo')
    return None if photo is None else (photo.text or '')


async def main(host, port, ca):
    erin = await login('erin@localhost/desk', host, port, ca)
    fay = await login('fay@localhost/phone', host, port, ca)

    # XEP-0049, through slixmpp's XEP-0048 bookmarks kept in private storage.
    marks = erin['xep_0048'].stanza.Bookmarks()
    marks.add_conference('lounge@conference.localhost', 'erin', name='Lounge', autojoin=True)
    await erin['xep_0048'].set_bookmarks(marks, method='xep_0049')
    got = await erin['xep_0048'].get_bookmarks(method='xep_0049')
    confs = got['private']['bookmarks']['conferences']
    check([(c['jid'], c['nick'], c['autojoin']) for c in confs]
          == [('lounge@conference.localhost', 'erin', True)],
          'xep_0049/xep_0048: erin stores bookmarks in private storage and reads them back')
    try:
        iq = fay.make_iq_get(ito='erin@localhost')
        iq['private'].enable('bookmarks')
        await iq.send()
        check(False, 'fay may not read erin\'s private storage')
    except IqError as e:
        check(e.condition == 'forbidden',
              f'xep_0049: fay asking for erin\'s private data gets forbidden (got {e.condition})')

    # XEP-0054: erin's vCard with a photo.
    image = hashlib.sha512(b'erin avatar').digest() * 3
    vcard = erin['xep_0054'].make_vcard()
    vcard['FN'] = 'Erin Example'
    vcard['NICKNAME'] = 'erin'
    vcard['PHOTO']['TYPE'] = 'image/png'
    vcard['PHOTO']['BINVAL'] = image
    await erin['xep_0054'].publish_vcard(vcard)
    own = await erin['xep_0054'].get_vcard('erin@localhost')
    check(own['vcard_temp']['FN'] == 'Erin Example' and own['vcard_temp']['PHOTO']['BINVAL'] == image,
          'xep_0054: erin publishes her vCard and gets it back')
    theirs = await fay['xep_0054'].get_vcard('erin@localhost')
    check(str(theirs['from']) == 'erin@localhost' and theirs['vcard_temp']['FN'] == 'Erin Example'
          and theirs['vcard_temp']['PHOTO']['BINVAL'] == image,
          'xep_0054: fay gets erin\'s vCard at her bare JID, from the server')
    try:
        await fay['xep_0054'].get_vcard('nobody@localhost')
        check(False, 'a vCard of an account that does not exist')
    except IqError as e:
        check(e.condition == 'service-unavailable',
              f'xep_0054: no such account: service-unavailable (got {e.condition})')

    # XEP-0153: fay subscribes to erin (erin's client approves by itself);
    # erin's plain presence reaches fay with the hash the server added.
    fay.send_presence(pto='erin@localhost', ptype='subscribe')
    await fay.wait('subscribed', lambda p: p['from'].bare == 'erin@localhost')
    erin.send_presence(pstatus='with avatar')
    p = await fay.wait('available', lambda p: p['from'] == 'erin@localhost/desk'
                       and p['status'] == 'with avatar')
    check(photo_of(p) == hashlib.sha1(image).hexdigest(),
          f'xep_0153: erin\'s presence carries the SHA-1 of her photo (got {photo_of(p)})')

    # A vCard without the photo: presence says "no avatar".
    vcard = erin['xep_0054'].make_vcard()
    vcard['FN'] = 'Erin Example'
    await erin['xep_0054'].publish_vcard(vcard)
    erin.send_presence(pstatus='no avatar')
    p = await fay.wait('available', lambda p: p['from'] == 'erin@localhost/desk'
                       and p['status'] == 'no avatar')
    check(photo_of(p) == '', f'xep_0153: after the photo is removed, an empty <photo/> (got {photo_of(p)!r})')

    erin.disconnect()
    fay.disconnect()
    await asyncio.sleep(0.5)


if __name__ == '__main__':
    logging.basicConfig(level=logging.ERROR)
    host, port, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    try:
        asyncio.get_event_loop().run_until_complete(main(host, port, ca))
    except (AssertionError, asyncio.TimeoutError) as e:
        print(f'not ok - {e or "timed out"}', flush=True)
        sys.exit(1)
    print('vcard end-to-end: all steps passed')
