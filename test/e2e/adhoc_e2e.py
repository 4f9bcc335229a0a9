#!/usr/bin/python3
"""End-to-end test of XEP-0050 ad-hoc commands and XEP-0133 administration
with a real third-party client: Debian's python3-slixmpp and its xep_0050
plugin.

An administrator (ADMIN, named in the server's `admins`) logs in over
STARTTLS, gets the server's command list, runs add-user through the
plugin's command workflow (start_command, then complete_command with the
form filled in), and the new account logs in; get-online-users-num counts
it; delete-user removes it again, and it can no longer log in. A user who
is not an administrator sees no admin command and is refused one.

  /usr/bin/python3 test/e2e/adhoc_e2e.py HOST PORT CA_CERT ADMIN NON_ADMIN

Every account's password is 'secret' (as slixmpp_e2e.py's). Exits 0 when
every step happened, 1 (with the failed step) otherwise.
"""
import asyncio
import sys

import slixmpp_e2e as base
from slixmpp.exceptions import IqError

ADMIN = 'http://jabber.org/protocol/admin#'
NEW = 'adhoc-e2e@localhost'


async def login(jid, host, port, ca):
    u = await base.login(jid, host, port, ca)
    u.register_plugin('xep_0004')
    u.register_plugin('xep_0050')
    return u


async def commands(u):
    items = await u['xep_0050'].get_commands(jid='localhost')
    return {node for (_jid, node, _name) in items['disco_items']['items']}


async def run_with_form(u, node, values):
    """The plugin's workflow: execute, fill the form it shows, complete.
    Returns the completed command's Iq."""
    done = asyncio.get_running_loop().create_future()

    def on_form(iq, session):
        form = iq['command']['form']
        form['type'] = 'submit'
        form.set_values(values)
        session['payload'] = form
        session['next'] = lambda iq2, _s: done.set_result(iq2)
        u['xep_0050'].complete_command(session)

    session = {'next': on_form, 'error': lambda iq, _s: done.set_exception(IqError(iq))}
    u['xep_0050'].start_command('localhost', ADMIN + node, session)
    return await asyncio.wait_for(done, base.STEP_TIMEOUT)


async def cannot_login(jid, host, port, ca):
    try:
        await base.login(jid, host, port, ca)
    except (AssertionError, asyncio.TimeoutError):
        return True
    return False


async def main(host, port, ca, admin_jid, user_jid):
    admin = await login(admin_jid + '/admin', host, port, ca)
    nodes = await commands(admin)
    expected = {ADMIN + n for n in ('add-user', 'delete-user', 'change-user-password',
                                    'end-user-session', 'get-registered-users-num',
                                    'get-online-users-num', 'get-online-users-list',
                                    'announce')}
    base.check(expected <= nodes, f'the admin\'s command list has the XEP-0133 commands ({len(nodes)})')

    iq = await run_with_form(admin, 'add-user', {'accountjid': NEW, 'password': 'secret',
                                                 'password-verify': 'secret'})
    base.check(iq['command']['status'] == 'completed',
               f'add-user completed: {iq["command"]["notes"]}')
    new = await login(NEW + '/fresh', host, port, ca)
    base.check(new.boundjid.bare == NEW, 'the account added by the admin logs in')

    res = await admin['xep_0050'].send_command('localhost', ADMIN + 'get-online-users-num')
    num = int(res['command']['form'].get_values()['onlineusersnum'])
    base.check(res['command']['status'] == 'completed' and num >= 2,
               f'get-online-users-num answers at once: {num}')

    iq = await run_with_form(admin, 'delete-user', {'accountjids': [NEW]})
    base.check(iq['command']['status'] == 'completed', 'delete-user completed')
    base.check(await cannot_login(NEW + '/again', host, port, ca),
               'the deleted account can no longer log in')

    user = await login(user_jid + '/plain', host, port, ca)
    base.check(not (await commands(user)) & expected, 'a user who is not an admin lists no admin command')
    try:
        await user['xep_0050'].send_command('localhost', ADMIN + 'add-user')
        base.check(False, 'a non-admin is refused add-user')
    except IqError as e:
        base.check(e.condition == 'forbidden', f'a non-admin is refused add-user ({e.condition})')
    for c in (admin, new, user):
        c.disconnect()


if __name__ == '__main__':
    try:
        asyncio.get_event_loop().run_until_complete(
            main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]))
    except Exception as e:  # noqa: BLE001 - report any failure as the failed step
        print(f'not ok - {type(e).__name__}: {e}', flush=True)
        sys.exit(1)
