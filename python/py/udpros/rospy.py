"""UDPROS for rospy, with one import.

rospy speaks only TCPROS: its ``udpros.py`` was never finished. Importing this module
teaches a rospy node UDPROS, with forward error correction toward udpros peers::

    import rospy
    import udpros.rospy   # before rospy.init_node
    from sensor_msgs.msg import Image

    rospy.init_node("viewer")
    rospy.Subscriber("/camera/image", Image, show)   # now UDPROS, TCPROS where refused
    rospy.spin()

What changes:

- **Subscribers** link to each publisher through udpros: UDPROS first, TCPROS where the
  publisher has no UDPROS (rospy's own publishers) or refuses it; messages are reassembled,
  repaired by FEC from udpros publishers, and handed to the callbacks as the genpy classes
  rospy uses, with ``_connection_header`` set. A late message never holds up a newer one.
- **Publishers** answer a subscriber that asks for UDPROS (roscpp's
  ``TransportHints().unreliable()``, udpros, goroslib) with a UDPROS link instead of
  refusing it; TCPROS subscribers are served by rospy as before.
- ``getBusInfo`` (``rosnode info``) shows each link's transport.

Which transport a subscriber asks for follows roscpp's ``ros::TransportHints``: every
rospy subscriber asks for UDPROS then TCPROS once this module is imported; per topic, give
:class:`TransportHints` to :func:`Subscriber` (or :func:`set_transport_hints`)::

    udpros.rospy.Subscriber("/map", OccupancyGrid, cb,
                            transport_hints=udpros.rospy.TransportHints().reliable())

and for every topic without hints of its own, :func:`set_default_transport_hints`. Hints
that name only TCPROS leave the topic to rospy's own TCPROS.
"""

import logging
import threading
import weakref
import xmlrpc.client

import rosgraph.network
import rospy
from rospy.exceptions import TransportTerminated
from rospy.impl.masterslave import ROSHandler
from rospy.impl.registration import RegManager, get_registration_listeners, get_topic_manager
from rospy.impl.transport import INBOUND, OUTBOUND, ProtocolHandler, Transport

from . import _callback_owners, _genpy_decoder
from ._udpros import MAX_PUBLISHER_LINKS, Guest

__all__ = [
    "TransportHints",
    "Subscriber",
    "set_transport_hints",
    "set_default_transport_hints",
    "UDPROSHandler",
]

UDPROS = "UDPROS"
TCPROS = "TCPROS"

_log = logging.getLogger("udpros.rospy")

class TransportHints:
    """The transports a subscriber asks for, most wanted first, as roscpp's
    ``ros::TransportHints``: ``TransportHints().unreliable().reliable()`` asks for UDPROS,
    then TCPROS. No transport at all means TCPROS, as in roscpp. ``fec(False)`` asks udpros
    publishers for no forward error correction."""

    def __init__(self):
        self._transports = []
        self._fec = True

    def unreliable(self):
        """Adds UDPROS."""
        return self._add("udp")

    def reliable(self):
        """Adds TCPROS."""
        return self._add("tcp")

    udp = unreliable
    tcp = reliable

    def fec(self, on=True):
        """Whether UDPROS links ask udpros publishers for FEC (default: yes)."""
        self._fec = bool(on)
        return self

    @property
    def transports(self):
        """``"udp"`` and ``"tcp"`` in order of preference."""
        return list(self._transports) or ["tcp"]

    @property
    def wants_udp(self):
        return "udp" in self.transports

    def _add(self, transport):
        if transport not in self._transports:
            self._transports.append(transport)
        return self

    def __repr__(self):
        return "TransportHints(%s, fec=%s)" % ("+".join(self.transports), self._fec)


_hints_lock = threading.Lock()
_default_hints = TransportHints().unreliable().reliable()
_topic_hints = {}


def set_default_transport_hints(hints):
    """The transports every subscriber without hints of its own asks for (after the import:
    UDPROS, then TCPROS)."""
    global _default_hints
    with _hints_lock:
        _default_hints = hints


def set_transport_hints(topic, hints):
    """The transports subscribers of ``topic`` (resolved as rospy resolves it) ask for,
    from their next link on."""
    with _hints_lock:
        _topic_hints[rospy.names.resolve_name(topic)] = hints


def _hints_for(resolved_topic):
    with _hints_lock:
        return _topic_hints.get(resolved_topic, _default_hints)


def Subscriber(name, data_class, callback=None, callback_args=None, transport_hints=None, **kwargs):
    """``rospy.Subscriber`` with roscpp's transport hints: ``transport_hints`` (a
    :class:`TransportHints`) sets what this topic's links ask for; the other arguments are
    rospy's."""
    if transport_hints is not None:
        set_transport_hints(name, transport_hints)
    return rospy.Subscriber(name, data_class, callback, callback_args, **kwargs)


class _Link(Transport):
    """A connection rospy holds whose link udpros runs (``native``): no file descriptor
    for rospy's poll, and closed once, whoever closes it first (rospy's cleanup closes a
    connection again as it removes it)."""

    def __init__(self, direction, topic, native):
        super().__init__(direction, topic)
        self._native = native
        self._lock = threading.Lock()

    def fileno(self):
        return None

    def close(self):
        with self._lock:
            if self.done:
                return
            self.done = True
        self._native.close()
        if self.cleanup_cb:
            self.cleanup_cb(self)


def _native_count(index):
    """A link attribute that reads the native link's ``(messages, bytes)`` at ``index``;
    what rospy writes to it (its Transport's zero) is let go."""
    return property(lambda link: link._native.received()[index], lambda link, _: None)


class _SubscriberLink(_Link):
    """A rospy subscriber's link to one publisher, run by udpros: its thread hands each
    message to the subscriber's callbacks."""

    def __init__(self, sub, pub_uri, native, preferred):
        super().__init__(INBOUND, sub.resolved_name, native)
        self.endpoint_id = pub_uri
        self.callerid_pub = ""
        self.latch = None
        self.header = {}
        self.undecodable = 0
        self.delivery_errors = 0
        self._sub = sub
        self._preferred = preferred
        self._callback_thread = threading.Thread(
            target=self._receive, name="udpros:" + sub.resolved_name, daemon=True
        )

    @property
    def transport_type(self):
        """UDPROS or TCPROS, as negotiated (the first asked for, before)."""
        info = self._info()
        return (info and info["transport"]) or self._preferred

    def _info(self):
        try:
            links = self._native.link_info()
        except Exception:
            return None
        return links[0] if links else None

    def start(self):
        # Closed and waited for at the interpreter's exit, as udpros.Node's callbacks are.
        _callback_owners.add(self)
        self._callback_thread.start()

    # rospy's Transport zeroes and its TCPROS links add to these; here they are the native
    # link's own counts, read when asked (getBusStats, rospy's statistics).
    stat_num_msg = _native_count(0)
    stat_bytes = _native_count(1)

    def _receive(self):
        # The loop is native (``dispatch``): each message, built in Rust where its class
        # allows it (udpros.GenpyDecoder) and else by ``_from_bytes``, goes straight to
        # ``_deliver``. It ends once the link is closed (rospy's shutdown closes every
        # topic's links) or gave up for good.
        try:
            self._native.dispatch(
                _genpy_decoder(self._sub.data_class),
                self._deliver,
                (),
                self._from_bytes,
                self._undecodable,
                self._raised,
            )
            info = self._info()
            if not self.done and info is not None and info["ended"]:
                _log.warning("%s: the link to %s ended", self._sub.resolved_name, self.endpoint_id)
        finally:
            self.close()

    def _from_bytes(self, data):
        """Deserializes a message the decoder left to genpy; ``None`` (counted) when it
        does not decode."""
        msg = self._sub.data_class()
        try:
            msg.deserialize(data)
        except Exception as error:
            self._undecodable(error)
            return None
        return msg

    def _deliver(self, msg):
        """Hands one message to the subscriber's callbacks, as rospy's TCPROS link does."""
        if not self.header:
            info = self._info()
            if info is not None:
                self.header = info["header"]
                self.callerid_pub = self.header.get("callerid", "")
        msg._connection_header = self.header
        if self.header.get("latching") == "1":
            self.latch = msg
        self._sub.receive_callback([msg], self)

    def _raised(self, error):
        """rospy's callbacks trap their own exceptions; one from rospy's machinery is
        counted and the link goes on; the first and every thousandth is logged with its
        traceback."""
        self.delivery_errors += 1
        if self.delivery_errors == 1 or self.delivery_errors % 1000 == 0:
            _log.error(
                "%s: delivering message(s) raised (%d so far)",
                self._sub.resolved_name,
                self.delivery_errors,
                exc_info=error,
            )

    def _undecodable(self, error):
        """A message that does not decode as the subscriber's type is counted and dropped
        (the link goes on); the first and every thousandth is logged."""
        self.undecodable += 1
        if self.undecodable == 1 or self.undecodable % 1000 == 0:
            _log.warning(
                "%s: %d message(s) from %s did not decode as %s: %s",
                self._sub.resolved_name,
                self.undecodable,
                self.endpoint_id,
                self._sub.data_class._type,
                error,
            )

    def get_transport_info(self):
        info = self._info() or {}
        fec = ""
        if info.get("transport") == UDPROS and info.get("header", {}).get("udpros_fec") == "1":
            fec = "; FEC: %d messages rebuilt" % info.get("rebuilt", 0)
        return "%s connection on port %s to [%s]%s" % (
            self.transport_type,
            info.get("local_port", 0),
            info.get("peer") or self.endpoint_id,
            fec,
        )


class _PublisherLink(_Link):
    """A UDPROS link from a rospy publisher to one subscriber; rospy's publisher writes
    each serialized message to it as to a TCPROS connection."""

    transport_type = UDPROS

    def __init__(self, topic, native):
        super().__init__(OUTBOUND, topic, native)
        self.endpoint_id = native.caller_id
        host, _, port = native.peer.rpartition(":")
        self.remote_endpoint = (host.strip("[]"), int(port or 0))
        self.local_endpoint = ("", native.local_port)

    def write_data(self, data):
        if not self._native.send(data):
            raise TransportTerminated("the UDPROS link to %s closed" % self.endpoint_id)
        self.stat_bytes += len(data)
        self.stat_num_msg += 1
        return True

    def get_transport_info(self):
        return "UDPROS connection on port %d to [%s:%d on socket %d]%s" % (
            self.local_endpoint[1],
            self.remote_endpoint[0],
            self.remote_endpoint[1],
            self._native.id,
            " with FEC" if self._native.fec else "",
        )


def _from_xmlrpc(value):
    return value.data if isinstance(value, xmlrpc.client.Binary) else value


def _to_xmlrpc(value):
    return xmlrpc.client.Binary(value) if isinstance(value, bytes) else value


class UDPROSHandler(ProtocolHandler):
    """rospy's protocol handler for UDPROS: answers subscribers' UDPROS offers for this
    node's publishers (``requestTopic``) and links this node's subscribers to publishers
    (in place of rospy's ``_connect_topic`` for topics whose hints ask for UDPROS)."""

    def __init__(self):
        self._guest = None
        self._lock = threading.Lock()
        self._publisher_links = weakref.WeakSet()
        self._closed = False

    def _the_guest(self):
        with self._lock:
            if self._guest is None:
                self._guest = Guest(rospy.names.get_caller_id(), rosgraph.network.get_host_name())
            return self._guest

    def supports(self, protocol):
        return protocol == UDPROS

    def get_supported(self):
        # A subscriber's offers are made per topic, by `connect`.
        return []

    def create_transport(self, resolved_name, pub_uri, protocol_params):
        return 0, "UDPROS links are made by udpros.rospy's connect", 0

    def init_publisher(self, resolved_name, protocol):
        """Answers a subscriber's UDPROS offer for ``resolved_name``."""
        pub = get_topic_manager().get_publisher_impl(resolved_name)
        if pub is None or pub.closed or pub.data_class is None:
            return -1, "Not a publisher of [%s]" % resolved_name, []
        if self._closed:
            return 0, "Node is shutting down", []
        data_class = pub.data_class
        offer = [_from_xmlrpc(p) for p in protocol]
        try:
            answer, native = self._the_guest().answer_udpros(
                resolved_name,
                data_class._type,
                data_class._md5sum,
                data_class._full_text,
                bool(pub.is_latch),
                offer,
            )
        except (ValueError, TypeError, OverflowError) as error:
            _log.info("UDPROS offer for %s refused: %s", resolved_name, error)
            return 0, str(error), []
        link = _PublisherLink(resolved_name, native)
        self._publisher_links.add(link)
        # rospy sends a latched message through the new connection here; the subscriber's
        # socket is open, so it waits there for the answer.
        pub.add_connection(link)
        return 1, "ready on %s" % native.peer, [_to_xmlrpc(p) for p in answer]

    def connect(self, resolved_name, pub_uri, hints):
        """Links this node's subscriber of ``resolved_name`` to the publisher at
        ``pub_uri`` through udpros, as ``_connect_topic`` answers."""
        sub = get_topic_manager().get_subscriber_impl(resolved_name)
        if not sub:
            return -1, "No subscriber for topic [%s]" % resolved_name, 0
        if sub.has_connection(pub_uri):
            return 1, "_connect_topic[%s]: subscriber already connected to publisher [%s]" % (
                resolved_name,
                pub_uri,
            ), 0
        data_class = sub.data_class
        queue_size = sub.queue_size if sub.queue_size and sub.queue_size > 0 else 100
        native = self._the_guest().link_to_publisher(
            pub_uri,
            resolved_name,
            data_class._type,
            data_class._md5sum,
            data_class._full_text,
            transports=hints.transports,
            fec=hints._fec,
            queue_size=queue_size,
        )
        preferred = UDPROS if hints.transports[0] == "udp" else TCPROS
        link = _SubscriberLink(sub, pub_uri, native, preferred)
        if sub.add_connection(link):
            link.start()
            return 1, "Connected topic[%s]. Transport impl[%s]" % (
                resolved_name,
                type(link).__name__,
            ), 0
        link.close()
        return 0, "ERROR: Race condition failure creating topic subscriber [%s]" % resolved_name, 0

    def forget_publishers(self, resolved_name, uris):
        """Closes this node's udpros links of ``resolved_name`` to publishers the master no
        longer lists (roscpp does; rospy's own TCPROS links end when the socket does)."""
        sub = get_topic_manager().get_subscriber_impl(resolved_name)
        if not sub:
            return
        for link in list(sub.connections):
            if isinstance(link, _SubscriberLink) and link.endpoint_id not in uris:
                link.close()

    def shutdown(self):
        self._closed = True
        for link in list(self._publisher_links):
            link.close()


_handler = UDPROSHandler()


def _add_handler(ros_handler):
    handlers = getattr(ros_handler, "protocol_handlers", None)
    if handlers is not None and _handler not in handlers:
        handlers.append(_handler)


def _install():
    if getattr(ROSHandler, "_udpros_installed", False):
        return
    ROSHandler._udpros_installed = True

    original_init = ROSHandler.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        _add_handler(self)

    ROSHandler.__init__ = __init__

    original_connect = ROSHandler._connect_topic

    def _connect_topic(self, topic, pub_uri):
        hints = _hints_for(topic)
        if not hints.wants_udp:
            return original_connect(self, topic, pub_uri)
        return _handler.connect(topic, pub_uri, hints)

    ROSHandler._connect_topic = _connect_topic

    original_request = ROSHandler.requestTopic

    def requestTopic(self, *args):
        # rospy answers with the first offered protocol a handler supports, even when that
        # handler refuses: a UDPROS offer we could not take falls through to the offers
        # after it (TCPROS, usually), as roscpp and udpros publishers do. (Any arity goes
        # to rospy's own checks.)
        code, msg, chosen = original_request(self, *args)
        protocols = args[2] if len(args) == 3 else None
        if code == 0 and isinstance(protocols, (list, tuple)):
            for i, protocol in enumerate(protocols):
                if isinstance(protocol, (list, tuple)) and protocol and protocol[0] == UDPROS:
                    rest = list(protocols[i + 1 :])
                    if rest:
                        return original_request(self, args[0], args[1], rest)
                    break
        return code, msg, chosen

    ROSHandler.requestTopic = requestTopic

    original_update = ROSHandler.publisherUpdate

    def publisherUpdate(self, *args):
        # Cut at a udpros subscription's cap (MAX_PUBLISHER_LINKS): a forged list may name
        # hundreds of thousands, and rospy starts a thread for each new one, udpros a link.
        if len(args) == 3 and isinstance(args[2], (list, tuple)) and len(args[2]) > MAX_PUBLISHER_LINKS:
            _log.warning(
                "publisherUpdate for %r lists %d publishers: linking to the first %d",
                args[1],
                len(args[2]),
                MAX_PUBLISHER_LINKS,
            )
            args = (args[0], args[1], list(args[2][:MAX_PUBLISHER_LINKS]))
        # Wrapped here rather than in RegManager: rospy hands the list on once per
        # publisher in it, so an empty list (the last publisher left) never reaches it.
        answer = original_update(self, *args)
        if len(args) == 3 and isinstance(args[2], (list, tuple)) and isinstance(args[1], str):
            _handler.forget_publishers(rospy.names.resolve_name(args[1]), args[2])
        return answer

    ROSHandler.publisherUpdate = publisherUpdate

    # A node started before the import.
    for listener in list(get_registration_listeners().listeners):
        if isinstance(listener, RegManager):
            _add_handler(listener.handler)


_install()
