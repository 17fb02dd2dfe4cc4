#!/usr/bin/env python3
"""genpy as a test oracle for udpros's message layer (run with the python that has ROS).

  genpy_peer.py info TYPE...        JSON {type: {"md5": .., "full_text": ..} | null}
  genpy_peer.py roundtrip           stdin lines "TYPE HEX": genpy deserializes and
                                    re-serializes; prints JSON lines {"hex": .., "yaml": ..}
                                    (yaml as `rostopic echo` prints it) or {"error": ..}
  genpy_peer.py random TYPE N SEED  N random messages serialized by genpy, one hex per line
"""
import importlib
import io
import json
import random
import sys

import genpy.message
from genmsg.msgs import parse_type


def message_class(type_name):
    """The class of a message, or of a service's request or response half."""
    package, name = type_name.split('/')
    for module in ('.msg', '.srv'):
        try:
            return getattr(importlib.import_module(package + module), name)
        except (ImportError, AttributeError):
            pass
    return None


def info(types):
    out = {}
    for t in types:
        cls = message_class(t)
        out[t] = None if cls is None else {'md5': cls._md5sum, 'full_text': cls._full_text}
    print(json.dumps(out))


def roundtrip():
    for line in sys.stdin:
        type_name, hexdata = line.rstrip('\n').split(' ')
        try:
            msg = message_class(type_name)()
            msg.deserialize(bytes.fromhex(hexdata))
            buf = io.BytesIO()
            msg.serialize(buf)
            yaml = genpy.message.strify_message(msg)
            print(json.dumps({'hex': buf.getvalue().hex(), 'yaml': yaml}), flush=True)
        except Exception as e:  # the Rust side reports which message failed
            print(json.dumps({'error': '%s: %s' % (type(e).__name__, e)}), flush=True)


INT_RANGES = {
    'int8': (-2**7, 2**7 - 1), 'byte': (-2**7, 2**7 - 1), 'int16': (-2**15, 2**15 - 1),
    'int32': (-2**31, 2**31 - 1), 'int64': (-2**63, 2**63 - 1), 'uint8': (0, 255),
    'char': (0, 255), 'uint16': (0, 2**16 - 1), 'uint32': (0, 2**32 - 1), 'uint64': (0, 2**64 - 1),
}


def random_scalar(rng, t):
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return rng.choice([lo, hi, 0, rng.randint(lo, hi)])
    if t == 'bool':
        return rng.random() < 0.5
    if t in ('float32', 'float64'):
        v = rng.choice([0.0, -1.5, 1e-7, rng.uniform(-1e6, 1e6), float('inf')])
        return v
    if t == 'string':
        alphabet = 'abc xyz_/"\'\\:#-\n\u00e9\u4e2d'
        return ''.join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 5, 90])))
    if t == 'time':
        return genpy.Time(rng.randint(0, 2**32 - 1), rng.randint(0, 999999999))
    if t == 'duration':
        return genpy.Duration(rng.randint(-2**31, 2**31 - 1), rng.randint(0, 999999999))
    raise ValueError(t)


def random_field(rng, t):
    base, is_array, length = parse_type(t)
    if is_array:
        n = length if length is not None else rng.choice([0, 1, 3])
        if base in ('uint8', 'char'):
            return bytes(rng.randint(0, 255) for _ in range(n))
        return [random_field(rng, base) for _ in range(n)]
    cls = None if base in INT_RANGES or base in ('bool', 'float32', 'float64', 'string', 'time', 'duration') \
        else message_class('std_msgs/Header' if base == 'Header' else base)
    if cls is None:
        return random_scalar(rng, base)
    msg = cls()
    for name, slot_type in zip(msg.__slots__, msg._slot_types):
        setattr(msg, name, random_field(rng, slot_type))
    return msg


def random_messages(type_name, n, seed):
    rng = random.Random(seed)
    for _ in range(n):
        msg = random_field(rng, type_name)
        buf = io.BytesIO()
        msg.serialize(buf)
        print(buf.getvalue().hex())


if __name__ == '__main__':
    cmd = sys.argv[1]
    if cmd == 'info':
        info(sys.argv[2:])
    elif cmd == 'roundtrip':
        roundtrip()
    elif cmd == 'random':
        random_messages(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit('unknown command ' + cmd)
