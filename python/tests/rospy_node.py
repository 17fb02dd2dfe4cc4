"""A rospy node for the tests, with `import udpros.rospy` unless `--plain`.

    rospy_node.py sub TOPIC [--hints udp,tcp] [--count N] [--seconds S] [--linger S] [--plain]
    rospy_node.py pub TOPIC [--rate HZ] [--count N] [--latch] [--plain]

`sub` prints "RECV <data>" per message and, once it has `--count`, "BUS <json>" (its
getBusInfo), then "LINKS <json>" (the same) every 0.2 s for `--linger` seconds, and ends. `pub` publishes "msg <n>" and prints "BUS <json>" after every tenth
message, and "SENT" after the last. Both take std_msgs/String; `sub --many-empty` takes
`udpros_test/ManyEmpty` (`std_msgs/Empty[] many`) instead and prints "RECV <n> empty".
"""

import argparse
import json
import sys
import threading
import time
import xmlrpc.client

parser = argparse.ArgumentParser()
parser.add_argument("mode", choices=["sub", "pub"])
parser.add_argument("topic")
parser.add_argument("--hints", default=None)
parser.add_argument("--count", type=int, default=10)
parser.add_argument("--rate", type=float, default=20.0)
parser.add_argument("--seconds", type=float, default=60.0)
parser.add_argument("--latch", action="store_true")
parser.add_argument("--plain", action="store_true")
parser.add_argument("--linger", type=float, default=0.0)
parser.add_argument("--many-empty", action="store_true")
# rospy's own delivery (receive_callback) raises for the first message: a fault of rospy's
# machinery, not of a callback (rospy traps those itself).
parser.add_argument("--break-first-delivery", action="store_true")
args, ros_args = parser.parse_known_args()

import rospy  # noqa: E402
from std_msgs.msg import String  # noqa: E402

if not args.plain:
    import udpros.rospy  # noqa: E402

rospy.init_node("rospy_" + args.mode, anonymous=True, argv=[sys.argv[0], *ros_args], disable_signals=True)


def bus():
    return xmlrpc.client.ServerProxy(rospy.core.get_node_uri()).getBusInfo("/test")[2]


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


MANY_EMPTY = "udpros_test/ManyEmpty"
MANY_EMPTY_TEXT = "std_msgs/Empty[] many\n" + "=" * 80 + "\nMSG: std_msgs/Empty\n"

if args.mode == "sub":
    got = []
    done = threading.Event()
    if args.many_empty:
        from genpy.dynamic import generate_dynamic

        MessageClass = generate_dynamic(MANY_EMPTY, MANY_EMPTY_TEXT)[MANY_EMPTY]

        def text_of(msg):
            return "%d empty" % len(msg.many)

    else:
        MessageClass = String

        def text_of(msg):
            return msg.data

    if args.break_first_delivery:
        import rospy.topics

        deliver = rospy.topics._SubscriberImpl.receive_callback
        broken = []

        def receive_callback(self, msgs, connection):
            if not broken:
                broken.append(msgs)
                raise RuntimeError("rospy's delivery broke")
            return deliver(self, msgs, connection)

        rospy.topics._SubscriberImpl.receive_callback = receive_callback

    def heard(msg):
        got.append(msg)
        say("RECV " + text_of(msg))
        if len(got) >= args.count:
            done.set()

    if args.hints and not args.plain:
        hints = udpros.rospy.TransportHints()
        for one in args.hints.split(","):
            hints = hints.unreliable() if one == "udp" else hints.reliable()
        udpros.rospy.Subscriber(args.topic, MessageClass, heard, transport_hints=hints)
    else:
        rospy.Subscriber(args.topic, MessageClass, heard)
    say("URI " + rospy.core.get_node_uri())
    say("READY")
    done.wait(args.seconds)
    say("BUS " + json.dumps(bus()))
    say("INFO " + json.dumps(xmlrpc.client.ServerProxy(rospy.core.get_node_uri()).getBusInfo("/test")[2]))
    say("STATS " + json.dumps(xmlrpc.client.ServerProxy(rospy.core.get_node_uri()).getBusStats("/test")[2]))
    # With --linger S: the bus info again every 0.2 s, for S seconds.
    until = time.monotonic() + args.linger
    while time.monotonic() < until:
        time.sleep(0.2)
        say("LINKS " + json.dumps(bus()))
else:
    pub = rospy.Publisher(args.topic, String, queue_size=10, latch=args.latch)
    say("READY")
    for n in range(args.count):
        pub.publish(String(data="msg %d" % n))
        if n % 10 == 9:
            say("BUS " + json.dumps(bus()))
        time.sleep(1.0 / args.rate)
    say("SENT")
    if args.latch:
        time.sleep(args.seconds)
rospy.signal_shutdown("done")
