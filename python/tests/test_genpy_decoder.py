"""udpros.GenpyDecoder builds exactly what genpy's own deserialize builds.

The oracle is genpy: every message class of the ROS packages installed beside it, filled
with random values (every field kind: numbers at their limits, text beyond ASCII, times,
fixed and variable arrays, nested messages), serialized by genpy, then decoded both ways
and compared field by field, the Python type of every value included. Where the decoder
must leave a message to genpy (bytes genpy reads its own lenient way, text that is not
UTF-8, a class genpy did not generate), it says so with None and never builds something
else."""

import importlib
import random
import struct

import genmsg.msgs
import genpy
import pytest

from udpros import GenpyDecoder

PACKAGES = [
    "std_msgs",
    "sensor_msgs",
    "geometry_msgs",
    "diagnostic_msgs",
    "rosgraph_msgs",
    "actionlib_msgs",
    "roscpp",
]

INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "byte": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "char": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


def classes():
    found = []
    for package in PACKAGES:
        try:
            module = importlib.import_module(package + ".msg")
        except ImportError:
            continue
        for name in sorted(dir(module)):
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, genpy.Message) and cls is not genpy.Message:
                found.append(cls)
    return found


def nested_class(base, owner):
    package, _, name = base.rpartition("/")
    if base == "Header":
        package, name = "std_msgs", "Header"
    elif not package:
        package = owner._type.split("/")[0]
    return getattr(importlib.import_module(package + ".msg"), name)


def random_scalar(rng, base, owner, depth):
    if base in INTS:
        low, high = INTS[base]
        return rng.choice([low, high, 0, rng.randint(low, high)])
    if base == "bool":
        return rng.random() < 0.5
    if base == "float32":
        return struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0]
    if base == "float64":
        return rng.choice([0.0, -1.5e300, rng.uniform(-1e9, 1e9)])
    if base == "string":
        return "".join(rng.choice("aZ09 _/é€漢🙂\n") for _ in range(rng.randint(0, 12)))
    if base == "time":
        return genpy.Time(rng.randint(0, 2**32 - 1), rng.randint(0, 999_999_999))
    if base == "duration":
        return genpy.Duration(rng.randint(-(2**31), 2**31 - 2), rng.randint(0, 999_999_999))
    return random_message(rng, nested_class(base, owner), depth + 1)


def random_message(rng, cls, depth=0):
    message = cls()
    for slot, slot_type in zip(cls.__slots__, cls._slot_types):
        base, is_array, length = genmsg.msgs.parse_type(slot_type)
        if not is_array:
            value = random_scalar(rng, base, cls, depth)
        else:
            count = length if length is not None else rng.randint(0, 0 if depth > 2 else 4)
            if base in ("uint8", "char"):
                value = bytes(rng.randrange(256) for _ in range(count))
            else:
                value = [random_scalar(rng, base, cls, depth) for _ in range(count)]
        setattr(message, slot, value)
    return message


def serialized(message):
    import io

    buffer = io.BytesIO()
    message.serialize(buffer)
    return buffer.getvalue()


def assert_same(ours, theirs, path="msg"):
    assert type(ours) is type(theirs), "%s: %r is not %r" % (path, type(ours), type(theirs))
    if isinstance(theirs, genpy.Message):
        for slot in theirs.__slots__:
            assert_same(getattr(ours, slot), getattr(theirs, slot), path + "." + slot)
        assert not hasattr(ours, "_connection_header")
    elif isinstance(theirs, (genpy.Time, genpy.Duration)):
        assert (type(ours.secs), ours.secs, type(ours.nsecs), ours.nsecs) == (
            type(theirs.secs),
            theirs.secs,
            type(theirs.nsecs),
            theirs.nsecs,
        ), path
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, "%s[%d]" % (path, i))
    else:
        assert ours == theirs, "%s: %r != %r" % (path, ours, theirs)


ALL = classes()


def test_the_installed_packages_give_enough_classes_to_compare():
    assert len(ALL) > 90, [c._type for c in ALL]


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c._type)
def test_random_messages_decode_as_genpy_decodes_them(cls):
    rng = random.Random(cls._type)
    decoder = GenpyDecoder(cls)
    for _ in range(20):
        data = serialized(random_message(rng, cls))
        ours = decoder.decode(data)
        assert ours is not None, "declined a well-formed %s" % cls._type
        assert_same(ours, cls().deserialize(data))


def test_the_top_messages_own_times_are_canonicalized_as_genpy_does():
    from sensor_msgs.msg import TimeReference

    message = TimeReference()
    message.header.stamp.secs, message.header.stamp.nsecs = 7, 2_500_000_000
    message.time_ref.secs, message.time_ref.nsecs = 9, 3_000_000_001
    data = serialized(message)
    ours, theirs = GenpyDecoder(TimeReference).decode(data), TimeReference().deserialize(data)
    assert_same(ours, theirs)
    assert (ours.time_ref.secs, ours.time_ref.nsecs) == (12, 1)
    assert (ours.header.stamp.secs, ours.header.stamp.nsecs) == (7, 2_500_000_000), "nested: untouched"


def test_a_duration_with_negative_nanoseconds_is_canonicalized_as_genpy_does():
    from std_msgs.msg import Duration

    data = struct.pack("<ii", 5, -1)
    ours, theirs = GenpyDecoder(Duration).decode(data), Duration().deserialize(data)
    assert_same(ours, theirs)
    assert (ours.data.secs, ours.data.nsecs) == (4, 999_999_999)


def test_what_genpy_reads_its_own_way_is_left_to_genpy():
    from sensor_msgs.msg import CompressedImage
    from std_msgs.msg import String

    decoder = GenpyDecoder(CompressedImage)
    good = serialized(CompressedImage(format="jpeg", data=b"\x01\x02\x03"))
    assert decoder.decode(good) is not None
    assert decoder.decode(good + b"\x00") is None, "trailing bytes: genpy ignores them"
    assert decoder.decode(good[:-1]) is None, "a short last field: genpy truncates it"
    assert decoder.decode(b"") is None
    not_utf8 = struct.pack("<I", 2) + b"\xff\xfe"
    assert GenpyDecoder(String).decode(not_utf8) is None, "genpy's handler replaces and logs"
    assert String().deserialize(not_utf8).data == "\ufffd\ufffd"


def test_random_bytes_never_build_what_genpy_would_not():
    from sensor_msgs.msg import JointState

    rng = random.Random(52)
    decoder = GenpyDecoder(JointState)
    seed = serialized(random_message(rng, JointState))
    for _ in range(2000):
        data = bytearray(seed)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data[: rng.randint(0, len(data))] if rng.random() < 0.3 else data)
        ours = decoder.decode(data)
        if ours is not None:
            assert_same(ours, JointState().deserialize(data))


def test_classes_genpy_did_not_generate_are_refused():
    import rospy.numpy_msg
    from sensor_msgs.msg import Image

    with pytest.raises(ValueError):
        GenpyDecoder(rospy.numpy_msg.numpy_msg(Image))

    class Renamed(Image):
        _md5sum = "0" * 32

    with pytest.raises(ValueError):
        GenpyDecoder(Renamed)
    with pytest.raises(Exception):
        GenpyDecoder(int)


def test_a_class_with_a_new_of_its_own_is_left_to_genpy():
    # The decoder makes instances as object.__new__ does, with the class's allocator; a
    # class whose __new__ does more would not get it.
    from genpy.dynamic import generate_dynamic

    name = "udpros_test/Counted"
    Counted = generate_dynamic(name, "int32 x\n")[name]
    assert GenpyDecoder(Counted).decode(struct.pack("<i", 7)).x == 7
    made = []

    def counting_new(cls, *args, **kwargs):
        made.append(cls)
        return object.__new__(cls)

    Counted.__new__ = staticmethod(counting_new)
    with pytest.raises(ValueError, match="object.__new__"):
        GenpyDecoder(Counted)
    assert Counted().deserialize(struct.pack("<i", 7)).x == 7
    assert made == [Counted]


def test_a_message_of_megabytes_builds_with_one_copy_of_its_bytes():
    from sensor_msgs.msg import CompressedImage

    image = CompressedImage(format="jpeg", data=bytes(range(256)) * 32768)  # 8 MiB
    data = serialized(image)
    ours = GenpyDecoder(CompressedImage).decode(data)
    assert_same(ours, CompressedImage().deserialize(data))
    assert len(ours.data) == 8 * 1024 * 1024


def test_more_empty_messages_than_the_bytes_could_hold_are_refused_not_built():
    # Elements that take no bytes: a count in the billions would have genpy build that
    # many objects; the decoder builds what the bytes' budget allows and refuses the rest.
    from genpy.dynamic import generate_dynamic

    import udpros

    name = "udpros_test/ManyEmpty"
    text = "std_msgs/Empty[] many\n" + "=" * 80 + "\nMSG: std_msgs/Empty\n"
    ManyEmpty = generate_dynamic(name, text)[name]
    decoder = GenpyDecoder(ManyEmpty)
    few = struct.pack("<I", 3)
    ours = decoder.decode(few)
    assert ours is not None
    assert [m._type for m in ours.many] == [m._type for m in ManyEmpty().deserialize(few).many]
    assert len(ours.many) == 3
    with pytest.raises(udpros.UndecodableMessage):
        decoder.decode(struct.pack("<I", 2**32 - 1))
