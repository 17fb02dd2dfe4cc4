"""Messages where genpy is missing: what :class:`udpros.MessageType` decodes into.

A :class:`Message` has its fields as attributes, in definition order (nested messages are
``Message`` too, arrays lists, ``uint8[]`` bytes); ``time`` and ``duration`` fields are
:class:`Time` and :class:`Duration`, with rospy's ``secs``, ``nsecs``, ``to_sec()`` and
``to_nsec()``.
"""

import types


class Message(types.SimpleNamespace):
    """A decoded message: its fields as attributes."""

    def fields(self):
        """The field names, in definition order."""
        return list(vars(self))


class _Stamp:
    __slots__ = ("secs", "nsecs")

    def __init__(self, secs=0, nsecs=0):
        self.secs = secs
        self.nsecs = nsecs

    def to_sec(self):
        return self.secs + self.nsecs / 1e9

    def to_nsec(self):
        return self.secs * 1_000_000_000 + self.nsecs

    def __eq__(self, other):
        return type(self) is type(other) and (self.secs, self.nsecs) == (other.secs, other.nsecs)

    def __hash__(self):
        return hash((type(self).__name__, self.secs, self.nsecs))

    def __repr__(self):
        return "%s(secs=%d, nsecs=%d)" % (type(self).__name__, self.secs, self.nsecs)


class Time(_Stamp):
    """A ``time`` field: seconds and nanoseconds since the epoch (or since the sim clock
    started)."""


class Duration(_Stamp):
    """A ``duration`` field: signed seconds and nanoseconds."""
