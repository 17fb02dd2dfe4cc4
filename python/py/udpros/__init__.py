"""udpros for Python: a ROS1 node whose topics speak UDPROS, with forward error correction
toward udpros peers, and TCPROS where a peer has no UDPROS.

Messages are genpy classes (``std_msgs.msg.String``, the classes ``udpros msg export``
writes) where one is given, else the bytes their publisher serialized::

    import udpros
    from std_msgs.msg import String

    node = udpros.Node("listener")
    sub = node.subscribe("/chatter", String)
    for msg in sub:
        print(msg.data)

Waits release the GIL and end with ``KeyboardInterrupt`` on Ctrl-C.
"""

import asyncio
import atexit
import io
import logging
import sys
import threading
import time
import weakref

from ._udpros import GenpyDecoder, MessageType
from ._udpros import Node as _NativeNode
from ._udpros import ServiceError, UndecodableMessage

__all__ = [
    "Node",
    "Subscriber",
    "Publisher",
    "ServiceProxy",
    "ServiceError",
    "MessageType",
    "GenpyDecoder",
    "UndecodableMessage",
]

_log = logging.getLogger("udpros")
_MISSING = object()


#: Subscribers and links whose thread runs callbacks from udpros's native loop: each
#: has ``close()`` and ``_callback_thread``.
_callback_owners = weakref.WeakSet()

#: How long the interpreter's exit waits for callbacks in progress to return.
_EXIT_WAIT = 5.0


def _end_callback_threads():
    """At the interpreter's exit, before it finalizes: closes every subscription whose
    callbacks run on a thread of its own and waits up to five seconds for the callback in
    progress to return. Python before 3.14 ends a thread that is still running when it
    finalizes with ``pthread_exit``, whose unwind through the native loop under the
    callback aborted the process (SIGABRT) where it should have exited."""
    owners = list(_callback_owners)
    for owner in owners:
        try:
            owner.close()
        except Exception:
            # One that cannot close (rospy half shut down) must not leave the rest open.
            _log.exception("closing a subscription at exit")
    deadline = time.monotonic() + _EXIT_WAIT
    me = threading.current_thread()
    for owner in owners:
        thread = owner._callback_thread
        if thread is not me and thread.is_alive():
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                _log.warning("%s: a callback was still running when the interpreter exited", thread.name)


# At exit, once the main thread and every non-daemon thread have ended (callbacks go on
# while they run), before the interpreter finalizes.
atexit.register(_end_callback_threads)


def _wake(future):
    # On the event loop's thread, when a receive's message came.
    if not future.done():
        future.set_result(None)


def _ros_args(argv):
    """The ROS remappings (``name:=value``) among ``argv``, as rospy takes them."""
    return [a for a in argv if ":=" in a]


class _Dynamic:
    """A :class:`MessageType` in a genpy class's place: messages decoded in Rust into
    :class:`udpros.message.Message` objects, where genpy is missing."""

    def __init__(self, message_type):
        self._type = message_type.type_name
        self._md5sum = message_type.md5sum
        self._full_text = message_type.definition
        self.decode = message_type.decode
        self.encode = message_type.encode


def _genpy_decoder(msg_class):
    """A :class:`GenpyDecoder` that builds ``msg_class``'s messages in Rust, or ``None``
    where genpy's ``deserialize`` must (a class of another layout, ``rospy.numpy_msg``)."""
    if msg_class is None or isinstance(msg_class, _Dynamic):
        return None
    try:
        return GenpyDecoder(msg_class)
    except Exception:  # not a genpy class as genpy generates them
        return None


def _message_class(msg_class):
    """A genpy class as it is; a type's name (``"sensor_msgs/Range"``) or a
    :class:`MessageType` as a :class:`_Dynamic`."""
    if isinstance(msg_class, str):
        return _Dynamic(MessageType(msg_class))
    if isinstance(msg_class, MessageType):
        return _Dynamic(msg_class)
    return msg_class


class Node:
    """A ROS node, registered with the master ``ROS_MASTER_URI`` names.

    ``argv`` (default: ``sys.argv``) may carry ROS remappings: ``__master:=URI``,
    ``__ip:=ADDRESS``, ``__name:=NAME``, ``topic:=other``. The node waits for its master
    as rospy does (``UDPROS_MASTER_WAIT=SECONDS`` sets a limit).
    """

    def __init__(self, name, argv=None):
        args = _ros_args(sys.argv if argv is None else argv)
        self._native = _NativeNode(name, args)

    @property
    def name(self):
        """The node's resolved name."""
        return self._native.name

    @property
    def uri(self):
        """The node's slave API URI."""
        return self._native.uri

    def subscribe(
        self,
        topic,
        msg_class=None,
        callback=None,
        callback_args=None,
        transports=("udp", "tcp"),
        fec=True,
        queue_size=100,
    ):
        """Subscribes to ``topic``: messages as ``msg_class`` (a genpy class), as
        :class:`udpros.message.Message` objects for a type's name (``"sensor_msgs/Range"``,
        no genpy needed), or as bytes without either. ``transports`` in order of preference
        (``"udp"``, ``"tcp"``).

        With a ``callback``, as ``rospy.Subscriber``: a thread of the subscriber's own
        calls ``callback(msg)`` (``callback(msg, callback_args)`` when those are given) for
        each message, in order, until the subscription ends; see :meth:`spin`. Without
        one, the subscriber is read with ``recv()``, by iterating, or with ``async for``."""
        msg_class = _message_class(msg_class)
        if msg_class is None:
            native = self._native.subscribe(
                topic, transports=list(transports), fec=fec, queue_size=queue_size
            )
        else:
            native = self._native.subscribe(
                topic,
                msg_class._type,
                msg_class._md5sum,
                msg_class._full_text,
                transports=list(transports),
                fec=fec,
                queue_size=queue_size,
            )
        return Subscriber(native, msg_class, callback, callback_args)

    def advertise(self, topic, msg_class, latch=False):
        """Advertises ``topic`` of the genpy class ``msg_class`` (or a type's name or a
        :class:`MessageType`, whose messages are then published as
        :class:`udpros.message.Message` objects, dicts of fields, or bytes)."""
        msg_class = _message_class(msg_class)
        native = self._native.advertise(
            topic, msg_class._type, msg_class._md5sum, msg_class._full_text, latch=latch
        )
        return Publisher(native, msg_class)

    def advertise_raw(self, topic, msg_type, md5sum, definition, latch=False):
        """Advertises ``topic`` for messages published as bytes, of ``msg_type`` with its
        ``md5sum`` and full ``definition`` (what a genpy class carries in ``_type``,
        ``_md5sum`` and ``_full_text``), for a program with no genpy classes."""
        return Publisher(self._native.advertise(topic, msg_type, md5sum, definition, latch=latch))

    def service_proxy(self, name, srv_class, timeout=None):
        """A client of the service ``name`` of the genpy service class ``srv_class``
        (``std_srvs.srv.SetBool``); ``timeout`` bounds each call, in seconds."""
        return ServiceProxy(self._native.service_client(name, srv_class._md5sum, timeout), srv_class)

    def advertise_service(self, name, srv_class, handler):
        """Serves ``name``: ``handler`` takes a request of ``srv_class`` and returns its
        response. An exception it raises fails that call with its text, as in rospy. Keep
        the returned handle: the service is served while it lives."""

        def serve(data):
            request = srv_class._request_class().deserialize(data)
            buffer = io.BytesIO()
            handler(request).serialize(buffer)
            return buffer.getvalue()

        return self._native.advertise_service(name, srv_class._type, srv_class._md5sum, serve)

    def get_param(self, key, default=_MISSING):
        """The parameter ``key`` (``~x``: this node's own) as Python values; ``default``
        when the server has none, or ``KeyError`` without a default, as rospy has it."""
        value = self._native.get_param(key)
        if value is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        return value

    def set_param(self, key, value):
        """Sets the parameter ``key``: bools, 32-bit ints, floats, str, bytes, and lists
        and dicts of them."""
        self._native.set_param(key, value)

    def shutdown(self):
        """Unregisters the node's topics and services and stops it. Subscribers' callback
        threads end once their callback in progress returns."""
        self._native.shutdown()

    def is_shutdown(self):
        """Whether the node shut down: by :meth:`shutdown`, or asked by the master or
        ``rosnode kill``. rospy's ``rospy.is_shutdown()``."""
        return self._native.is_shutdown

    def spin(self):
        """Waits until the node shuts down (:meth:`shutdown` from another thread, ``rosnode
        kill``), while subscribers' callbacks and services run on their own threads;
        Ctrl-C shuts the node down and returns. rospy's ``rospy.spin()``."""
        try:
            self._native.wait_for_shutdown()
        except KeyboardInterrupt:
            pass
        self.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.shutdown()


class Subscriber:
    """Messages of one topic: handed to a callback on a thread of the subscriber's own, or
    read by ``recv()``, by iterating, or with ``async for``."""

    def __init__(self, native, msg_class, callback=None, callback_args=None):
        self._native = native
        self._msg_class = msg_class
        self._decoder = _genpy_decoder(msg_class)
        #: Messages that did not deserialize as ``msg_class`` (skipped, each logged).
        self.undecodable = 0
        #: Calls of the callback that raised (each logged with its traceback; the next
        #: message is still delivered, as rospy goes on after a bad callback).
        self.callback_errors = 0
        self._callback = callback
        if callback is not None:
            if not callable(callback):
                native.close()
                raise TypeError("callback must be callable")
            args = () if callback_args is None else (callback_args,)
            self._callback_thread = threading.Thread(
                target=self._dispatch,
                args=(callback, args),
                name="udpros-callback %s" % native.topic,
                daemon=True,
            )
            _callback_owners.add(self)
            self._callback_thread.start()

    def _dispatch(self, callback, args):
        """The callback thread: each message to ``callback``, until the subscription ends.
        It waits off the main thread, in one piece (no wake until a message comes); the
        loop is native (``dispatch``), calling the callback straight after the wait."""
        self._native.dispatch(
            self._decoder, callback, args, self._from_bytes, self._undecodable, self._callback_raised
        )

    def _from_bytes(self, data):
        """A message's bytes as the subscriber hands them on: as they are with no class,
        else deserialized (``None``: they did not, counted)."""
        return data if self._msg_class is None else self._decode(data)

    def _callback_raised(self, error):
        """Counts and logs, with its traceback, an exception the callback raised; the next
        message is still delivered, as rospy goes on after a bad callback."""
        self.callback_errors += 1
        _log.error("%s: the callback raised", self.topic, exc_info=error)

    def _no_callback(self):
        if self._callback is not None:
            raise RuntimeError(
                "%s: this subscriber hands its messages to its callback; subscribe again without one to read them" % self.topic
            )

    def close(self):
        """Ends the subscription: unregistered when it was the topic's last, its links
        closed, its callback thread ended after the callback in progress. ``recv()`` raises
        ``EOFError`` from here on. rospy's ``unregister()``, which is also its name here."""
        self._native.close()

    unregister = close

    @property
    def topic(self):
        """The resolved topic name."""
        return self._native.topic

    def recv(self, timeout=None):
        """The next message, waiting up to ``timeout`` seconds (``None``: until one
        comes); ``None`` when the time passed. A message that does not deserialize as the
        subscriber's class (a publisher's bug, or a hostile one) is skipped, logged and
        counted in ``undecodable``, as roscpp and rospy skip one. Raises ``EOFError`` once
        the subscription ended, ``RuntimeError`` on a subscriber with a callback."""
        self._no_callback()
        return self._receive(timeout)

    def _receive(self, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        left = timeout
        while True:
            if self._decoder is None:
                data = self._native.recv(left)
                if data is None or self._msg_class is None:
                    return data
                message = self._decode(data)
            else:
                try:
                    received = self._native.recv_message(self._decoder, left)
                except UndecodableMessage as error:
                    received = (self._undecodable(error), 0)
                if received is None:
                    return None
                message = received[0]
                if type(message) is bytes:  # the decoder left it to genpy
                    message = self._decode(message)
            if message is not None:
                return message
            if deadline is not None:
                left = max(0.0, deadline - time.monotonic())

    def _decode(self, data):
        """``data`` as the subscriber's class; ``None`` (logged and counted) when it does
        not deserialize."""
        try:
            if isinstance(self._msg_class, _Dynamic):
                return self._msg_class.decode(data)
            if self._decoder is not None:
                message = self._decoder.decode(data)
                if message is not None:
                    return message
            return self._msg_class().deserialize(data)
        except Exception as error:  # genpy raises DeserializationError, struct.error, ...
            return self._undecodable(error)

    def _undecodable(self, error):
        """Counts a message that did not deserialize, and logs the first and every
        thousandth (a flood of them from a hostile publisher is one line a thousand);
        ``None``, its stand-in."""
        self.undecodable += 1
        if self.undecodable == 1 or self.undecodable % 1000 == 0:
            _log.warning(
                "%s: %d message(s) did not decode as %s: %s",
                self.topic,
                self.undecodable,
                self._msg_class._type,
                error,
            )
        return None

    async def recv_async(self, timeout=None):
        """``recv`` for asyncio: awaits the next message without holding a thread (the
        node's runtime wakes the event loop), ``None`` once ``timeout`` seconds passed.
        Cancelling it loses no message: one already on its way goes to the next receive."""
        self._no_callback()
        deadline = None if timeout is None else time.monotonic() + timeout
        left = timeout
        while True:
            data = await self._next_bytes(left)
            if data is None or self._msg_class is None:
                return data
            message = self._decode(data)
            if message is not None:
                return message
            if deadline is not None:
                left = max(0.0, deadline - time.monotonic())

    async def _next_bytes(self, timeout):
        loop = asyncio.get_running_loop()
        woken = loop.create_future()
        receive = self._native.recv_async(loop, woken, _wake)
        try:
            if timeout is None:
                await woken
            else:
                await asyncio.wait_for(woken, timeout)
        except asyncio.TimeoutError:
            receive.cancel()
            return None
        except BaseException:
            receive.cancel()  # a message that came and was not taken goes back in its place
            raise
        data = receive.take()
        if data is None:
            raise EOFError("the subscription ended")
        return data

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await self.recv_async()
        except EOFError:
            raise StopAsyncIteration

    def links(self):
        """Each publisher link: ``(publisher URI, "UDPROS"/"TCPROS", connected)``."""
        return self._native.links()

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return self.recv()
        except EOFError:
            raise StopIteration


class Publisher:
    """Publishes messages of one topic: genpy messages, or bytes already serialized."""

    def __init__(self, native, msg_class=None):
        self._native = native
        self._msg_class = msg_class
        self._decoder = _genpy_decoder(msg_class)

    def publish(self, msg):
        """Publishes a genpy message, or bytes already serialized; on a topic advertised
        by a type's name, also a :class:`udpros.message.Message` or a dict of its fields
        (missing ones take their defaults; a wrong one is a ``ValueError``)."""
        if isinstance(msg, (bytes, bytearray, memoryview)):
            self._native.publish(bytes(msg))
            return
        if isinstance(self._msg_class, _Dynamic) and not hasattr(msg, "serialize"):
            self._native.publish(self._msg_class.encode(msg))
            return
        if not hasattr(msg, "serialize"):
            raise TypeError("publish takes a genpy message or serialized bytes, not %s" % type(msg).__name__)
        buffer = io.BytesIO()
        msg.serialize(buffer)
        self._native.publish(buffer.getvalue())

    def num_subscribers(self):
        """Subscribers linked now."""
        return self._native.num_subscribers()


class ServiceProxy:
    """A client of one service, called as rospy's ``ServiceProxy`` is: with a request, or
    with the request's fields. Raises ``ServiceError`` when the call does not succeed."""

    def __init__(self, native, srv_class):
        self._native = native
        self._srv = srv_class

    @property
    def service(self):
        """The resolved service name."""
        return self._native.service

    def _request_bytes(self, args, kwargs):
        request_class = self._srv._request_class
        if len(args) == 1 and not kwargs and isinstance(args[0], request_class):
            request = args[0]
        else:
            request = request_class(*args, **kwargs)
        buffer = io.BytesIO()
        request.serialize(buffer)
        return buffer.getvalue()

    def __call__(self, *args, **kwargs):
        request = self._request_bytes(args, kwargs)
        return self._srv._response_class().deserialize(self._native.call(request))

    async def call_async(self, *args, **kwargs):
        """The call for asyncio: ``await proxy.call_async(request)`` (or the request's
        fields) waits without holding a thread; the node's runtime wakes the event loop.
        Cancelling it abandons the call."""
        request = self._request_bytes(args, kwargs)
        loop = asyncio.get_running_loop()
        woken = loop.create_future()
        call = self._native.call_async(request, loop, woken, _wake)
        try:
            await woken
        except BaseException:
            call.cancel()
            raise
        return self._srv._response_class().deserialize(call.take())
