"""A minimal XMPP client over a raw socket, for end-to-end tests that need
what client libraries hide: XEP-0198 acknowledgements sent (or withheld) at
will, and a connection dropped with a TCP reset.

Plain TCP, SASL PLAIN, resource binding; stanzas are xml.etree elements
with the jabber:client namespace stripped from their tags.
"""
import base64
import socket
import struct
import xml.etree.ElementTree as ET

SM = 'urn:xmpp:sm:3'
TIMEOUT = 30


def local(tag):
    return tag.rsplit('}', 1)[-1]


class Client:
    def __init__(self, host, port, user, password, resource, domain='localhost'):
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT)
        self.domain = domain
        self.received = 0   # stanzas received (what an <a h=''/> counts)
        self._open()
        self._features()
        auth = base64.b64encode(b'\0' + user.encode() + b'\0' + password.encode()).decode()
        self.send("<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>%s</auth>" % auth)
        reply = self.recv()
        if local(reply.tag) != 'success':
            raise AssertionError('authentication failed for %s: %s' % (user, local(reply.tag)))
        self._open()
        self._features()
        self.send("<iq type='set' id='bind'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'>"
                  "<resource>%s</resource></bind></iq>" % resource)
        self.recv_until(lambda e: e.get('id') == 'bind')
        self.received = 0

    def _open(self):
        self.parser = ET.XMLPullParser(events=('start', 'end'))
        self.depth = 0
        self.ready = []
        self.send("<?xml version='1.0'?><stream:stream xmlns='jabber:client' "
                  "xmlns:stream='http://etherx.jabber.org/streams' to='%s' version='1.0'>"
                  % self.domain)

    def _features(self):
        f = self.recv()
        assert local(f.tag) == 'features', f.tag

    def send(self, data):
        self.sock.sendall(data.encode())

    def recv(self):
        """The next top-level element of the stream."""
        while not self.ready:
            data = self.sock.recv(65536)
            if not data:
                raise AssertionError('the server closed the stream')
            self.parser.feed(data)
            for event, el in self.parser.read_events():
                if event == 'start':
                    self.depth += 1
                else:
                    self.depth -= 1
                    if self.depth == 1:
                        self.ready.append(el)
        el = self.ready.pop(0)
        for e in el.iter():
            e.tag = e.tag.replace('{jabber:client}', '')
        if el.tag in ('message', 'presence', 'iq'):
            self.received += 1
        return el

    def recv_until(self, pred):
        while True:
            el = self.recv()
            if pred(el):
                return el

    def enable(self):
        """XEP-0198 with resumption; returns the resumption id."""
        self.send("<enable xmlns='%s' resume='true'/>" % SM)
        return self.recv_until(lambda e: e.tag == '{%s}enabled' % SM).get('id')

    def acked(self):
        """Asks the server for its count of handled stanzas and returns it."""
        self.send("<r xmlns='%s'/>" % SM)
        return int(self.recv_until(lambda e: e.tag == '{%s}a' % SM).get('h'))

    def answer_requests(self, el):
        if el.tag == '{%s}r' % SM:
            self.send("<a xmlns='%s' h='%d'/>" % (SM, self.received))

    def message(self, to, body):
        self.send("<message to='%s' type='chat'><body>%s</body></message>" % (to, body))

    def messages(self, n, ack=True):
        """Receives n message bodies (answering <r/> only if ack)."""
        bodies = []
        while len(bodies) < n:
            el = self.recv()
            if el.tag == 'message':
                b = el.find('body')
                bodies.append(b.text if b is not None else None)
            elif ack:
                self.answer_requests(el)
        return bodies

    def reset(self):
        """Drops the connection with a TCP reset, as a lost network does."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
        self.sock.close()

    def close(self):
        self.send('</stream:stream>')
        self.sock.close()
