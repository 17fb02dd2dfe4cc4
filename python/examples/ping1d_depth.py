"""Plots the depth a Ping1D sonar measures, in the terminal, on a topside laptop with
nothing of ROS installed: `pip install udpros`, then this script. The sonar's bridge
(`ping_sonar`, or `udpros demo`) publishes /ping1d/range as sensor_msgs/Range, which
udpros decodes without genpy. `ping1d_depth.py N` stops after N readings."""

import sys

import udpros

WIDTH = 50
limit = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else None
node = udpros.Node("topside_depth")
for count, msg in enumerate(node.subscribe("/ping1d/range", "sensor_msgs/Range"), start=1):
    span = (msg.max_range - msg.min_range) or 1.0
    share = min(max((msg.range - msg.min_range) / span, 0.0), 1.0)
    bar = "#" * round(WIDTH * share)
    print(f"{msg.header.stamp.to_sec():14.3f} {msg.range:7.2f} m |{bar:<{WIDTH}}|", flush=True)
    if count == limit:
        break
node.shutdown()
