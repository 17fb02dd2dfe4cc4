"""A Python subscriber for `udpros bench`, with the bench peers' arguments and output:

    python_peer.py IMPL sub TOPIC --count N --transport udp|tcp [--idle S] [--dump FILE] [--fec off|...]

IMPL is `rospy` (stock rospy: TCPROS), `rospy+udpros` (rospy with `import udpros.rospy`) or
`python` (the `udpros` package's own node, no rospy). It prints READY once subscribed, then
`SUB received=.. lost=.. seconds=.. p50_us=.. p99_us=.. max_us=.. user=.. sys=.. rss_kb=..`
(CPU since READY) when it has `--count` messages or none came for `--idle` seconds after the first; `--dump`
gets `seq age_us` per message. Ages are from each message's header stamp (the bench's hosts
share one clock). The harness writes this file out of the `udpros` binary, which carries it.
"""

import argparse
import os
import resource
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("impl", choices=["rospy", "rospy+udpros", "python"])
parser.add_argument("role", choices=["sub"])
parser.add_argument("topic")
parser.add_argument("--count", type=int, required=True)
parser.add_argument("--transport", default="udp")
parser.add_argument("--idle", type=float, default=3.0)
parser.add_argument("--dump", default=None)
parser.add_argument("--fec", default="adaptive")
args, _ = parser.parse_known_args()

from sensor_msgs.msg import CompressedImage  # noqa: E402

ages_us = []
seqs = []
lock = threading.Lock()
done = threading.Event()
first = [None]
last = [time.monotonic()]


def heard(msg):
    now_ns = time.time_ns()
    with lock:
        ages_us.append((now_ns - msg.header.stamp.to_nsec()) / 1e3)
        seqs.append(msg.header.seq)
        last[0] = time.monotonic()
        if first[0] is None:
            first[0] = last[0]
        if len(seqs) >= args.count:
            done.set()


fec = args.fec != "off"
if args.impl == "python":
    import udpros

    node = udpros.Node("python_bench_%d" % os.getpid(), argv=[])
    # A callback, as the rospy subscribers below have: the subscriber's own thread waits
    # for each message with no timer of its own.
    node.subscribe(args.topic, CompressedImage, heard, transports=(args.transport,), fec=fec, queue_size=1000)
else:
    import rospy

    rospy.init_node("rospy_bench_%d" % os.getpid(), argv=[sys.argv[0]], disable_signals=True)
    if args.impl == "rospy+udpros":
        import udpros.rospy

        hints = udpros.rospy.TransportHints().fec(fec)
        hints = hints.unreliable() if args.transport == "udp" else hints.reliable()
        udpros.rospy.Subscriber(args.topic, CompressedImage, heard, queue_size=1000, transport_hints=hints)
    else:
        rospy.Subscriber(args.topic, CompressedImage, heard, queue_size=1000, tcp_nodelay=True)

# CPU is counted from here: the interpreter's start and rospy's imports cost a Python
# subscriber a second of CPU that a run of a few messages would otherwise spread over them.
at_ready = resource.getrusage(resource.RUSAGE_SELF)
print("READY", flush=True)
started = time.monotonic()
# Two looks a second: each wake of this thread is CPU counted against the subscriber (at
# ten a second it was about 20 µs per message at 100 Hz on a slow VM, every row alike).
while not done.wait(0.5):
    with lock:
        quiet_since = last[0] if first[0] is not None else None
    now = time.monotonic()
    if quiet_since is None and now - started > 60:
        break
    if quiet_since is not None and now - quiet_since >= args.idle:
        break

with lock:
    seqs_now, ages_now = list(seqs), list(ages_us)
received = len(seqs_now)
lost, top = 0, None
for seq in seqs_now:
    if top is not None and seq > top + 1:
        lost += seq - top - 1
    top = seq if top is None else max(top, seq)
if top is not None:
    lost += max(0, args.count - (top + 1))
if args.dump:
    with open(args.dump, "w") as out:
        out.writelines("%d %.1f\n" % (s, a) for s, a in zip(seqs_now, ages_now))
ages_now.sort()


def percentile(p):
    return ages_now[min(len(ages_now) - 1, int(p * len(ages_now)))] if ages_now else 0.0


usage = resource.getrusage(resource.RUSAGE_SELF)
rss_kb = 0
with open("/proc/self/status") as status:
    for line in status:
        if line.startswith("VmHWM:"):
            rss_kb = int(line.split()[1])
seconds = (last[0] - first[0]) if first[0] is not None else 0.0
print(
    "SUB received=%d lost=%d seconds=%.3f p50_us=%.1f p99_us=%.1f max_us=%.1f user=%.6f sys=%.6f rss_kb=%d"
    % (
        received,
        lost,
        seconds,
        percentile(0.5),
        percentile(0.99),
        ages_now[-1] if ages_now else 0.0,
        usage.ru_utime - at_ready.ru_utime,
        usage.ru_stime - at_ready.ru_stime,
        rss_kb,
    ),
    flush=True,
)
os._exit(0)
