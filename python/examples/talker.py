"""Publishes std_msgs/String on /chatter ten times a second: over UDPROS to subscribers
that speak it, TCPROS to the others. ROS remappings on the command line (__master:=URI,
__ip:=ADDRESS) are taken as rospy takes them."""

import time

import udpros
from std_msgs.msg import String

node = udpros.Node("talker")
chatter = node.advertise("/chatter", String)
count = 0
try:
    while True:
        chatter.publish(String(data=f"hello world {count}"))
        count += 1
        time.sleep(0.1)
except KeyboardInterrupt:
    node.shutdown()
