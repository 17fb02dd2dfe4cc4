"""A stock rospy listener, plus one line: `import udpros.rospy`. Its subscriber now links
to publishers over UDPROS (with forward error correction from udpros publishers), TCPROS
where a publisher has no UDPROS. `rospy_listener.py N` stops after N messages."""

import sys

import rospy
import udpros.rospy  # noqa: F401  (the one line: rospy's subscribers and publishers speak UDPROS)
from std_msgs.msg import String

limit = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else None
heard = 0


def callback(msg):
    global heard
    heard += 1
    print(msg.data, flush=True)
    if heard == limit:
        rospy.signal_shutdown("heard enough")


rospy.init_node("listener", anonymous=True)
rospy.Subscriber("/chatter", String, callback)
rospy.spin()
