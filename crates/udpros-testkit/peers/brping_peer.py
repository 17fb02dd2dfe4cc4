#!/usr/bin/env python3
"""brping 0.1.5 (bluerobotics-ping on PyPI) as a test oracle for udpros's Ping codec.

  brping_peer.py random N SEED   N random messages of every id brping can build, one JSON
                                 line each: {"id", "hex" (the whole frame), "fields"}
  brping_peer.py decode          stdin: one frame in hex per line; stdout: one JSON line
                                 each, {"id", "fields"} as brping parses it, or {"error"}
Vector counts (`<vector>_length`) are left out: they are derived from the data.
"""
import json
import random
import sys

from brping import definitions
from brping.pingmessage import PingMessage, PingParser, variable_msgs

RANGES = {'B': 0xff, 'H': 0xffff, 'I': 0xffffffff}


def fields_of(msg):
    out = {}
    names = definitions.payload_dict_all[msg.message_id]['field_names']
    for name in names:
        if name.endswith('_length') and name[:-len('_length')] in names:
            continue  # a vector's count
        value = getattr(msg, name)
        if isinstance(value, (bytes, bytearray)):
            if msg.message_id in (2, 3):
                value = bytes(value).decode('utf-8', 'replace')
            else:
                value = list(value)
        out[name] = value
    return out


def random_messages(n, seed):
    rng = random.Random(seed)
    for _ in range(n):
        for msg_id, spec in sorted(definitions.payload_dict_all.items()):
            # brping 0.1.5 cannot build nack/ascii_text from scratch, and does not know that
            # auto_device_data (2301) ends in a vector.
            if msg_id in (0, 2, 3, 2301):
                continue
            msg = PingMessage(msg_id)
            names = spec['field_names']
            for name, fmt in zip(names, spec['format']):
                setattr(msg, name, rng.choice([0, RANGES[fmt], rng.randint(0, RANGES[fmt])]))
            if msg_id in variable_msgs:
                data = bytearray(rng.randint(0, 255) for _ in range(rng.choice([1, 200, 1200])))  # brping cannot pack an empty vector
                setattr(msg, names[-1], data)
                setattr(msg, names[-2], len(data))
            frame = msg.pack_msg_data()
            print(json.dumps({'id': msg_id, 'hex': bytes(frame).hex(), 'fields': fields_of(msg)}))


def decode():
    for line in sys.stdin:
        parser = PingParser()
        result = None
        for b in bytes.fromhex(line.strip()):
            if parser.parse_byte(b) == PingParser.NEW_MESSAGE:
                result = {'id': parser.rx_msg.message_id, 'fields': fields_of(parser.rx_msg)}
        print(json.dumps(result or {'error': 'no message'}), flush=True)


if __name__ == '__main__':
    if sys.argv[1] == 'random':
        random_messages(int(sys.argv[2]), int(sys.argv[3]))
    else:
        decode()
