"""Prints what /chatter carries, received over UDPROS where the publisher has it (with
forward error correction from udpros publishers), else TCPROS. `listener.py N` stops
after N messages."""

import sys

import udpros
from std_msgs.msg import String

limit = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else None
node = udpros.Node("listener")
for received, msg in enumerate(node.subscribe("/chatter", String), start=1):
    print(msg.data, flush=True)
    if received == limit:
        break
node.shutdown()
