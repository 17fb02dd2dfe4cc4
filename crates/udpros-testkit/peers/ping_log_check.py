#!/usr/bin/env python3
"""Reads a Ping Viewer sensor log (.bin) from the format's facts alone, independently of
udpros's reader, and decodes every record's frame with brping 0.1.5.

  ping_log_check.py FILE

Format: big-endian; a string is a u32 byte length and its bytes. Header: the string
"PingViewer sensor log file", an i32 version, five strings (commit, build date, tag, OS
name, OS version), an i32 sensor family and an i32 sensor type. Then records: a timestamp
string "hh:mm:ss.zzz", a u32 length and one Ping frame of that many bytes.

Prints one JSON line for the header ({"header": ..., "version", "family", "type",
"build"}), one per record ({"at_ms", "id", "angle", "samples"}: angle and the sample
count for Ping360 device_data and auto_device_data, else null), and a last line
{"records": N, "decoded": N} -- a frame brping cannot parse whole is {"error": ...} and
not counted as decoded.
"""
import json
import struct
import sys

from brping.pingmessage import PingParser


def main(path):
    data = open(path, "rb").read()
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(data):
            raise EOFError(f"needs {n} bytes at {pos}, {len(data) - pos} left")
        chunk = data[pos:pos + n]
        pos += n
        return chunk

    def u32():
        return struct.unpack(">I", take(4))[0]

    def i32():
        return struct.unpack(">i", take(4))[0]

    def string():
        return take(u32()).decode("utf-8")

    header = string()
    version = i32()
    build = [string() for _ in range(5)]
    family, sensor_type = i32(), i32()
    print(json.dumps({"header": header, "version": version, "family": family,
                      "type": sensor_type, "build": build}), flush=True)
    records = decoded = 0
    while pos < len(data):
        stamp = string()
        h, m, rest = stamp.split(":")
        s, ms = rest.split(".")
        at_ms = ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000 + int(ms)
        frame = take(u32())
        records += 1
        parser = PingParser()
        result = None
        for byte in frame:
            result = parser.parse_byte(byte)
        if result != PingParser.NEW_MESSAGE:
            print(json.dumps({"at_ms": at_ms, "error": f"brping state {result}"}), flush=True)
            continue
        msg = parser.rx_msg
        angle = samples = None
        if msg.message_id in (2300, 2301):
            if not hasattr(msg, "angle"):
                # brping 0.1.5 fails to unpack auto_device_data (2301) whole.
                print(json.dumps({"at_ms": at_ms, "error": f"brping cannot unpack {msg.message_id}"}),
                      flush=True)
                continue
            angle, samples = msg.angle, len(msg.data)
        decoded += 1
        print(json.dumps({"at_ms": at_ms, "id": msg.message_id, "angle": angle,
                          "samples": samples}), flush=True)
    print(json.dumps({"records": records, "decoded": decoded}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
