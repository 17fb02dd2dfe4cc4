"""listener.py in rospy's shape: a callback for each message, then spin() until Ctrl-C or
`rosnode kill`. `callback_listener.py N` shuts down after N messages."""

import sys

import udpros
from std_msgs.msg import String

limit = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else None
node = udpros.Node("callback_listener")
heard = 0


def callback(msg):
    global heard
    heard += 1
    print(msg.data, flush=True)
    if heard == limit:
        node.shutdown()


node.subscribe("/chatter", String, callback)
node.spin()
