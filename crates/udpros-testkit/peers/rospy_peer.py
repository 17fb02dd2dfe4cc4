#!/usr/bin/env python3
"""A rospy node for udpros's interop tests.

  rospy_peer.py sub TOPIC [--type string|bytes] [--count N]
      prints "READY", then "RECV <data or number> <size> <ok|corrupt>" per message
  rospy_peer.py pub TOPIC [--type string|bytes] [--rate HZ] [--size N] [--count N] [--latch]
      the same payloads as roscpp_peer.cpp
"""
import argparse
import struct
import sys

import rospy
from std_msgs.msg import String, UInt8MultiArray


def pattern(n, i):
    return (n * 31 + i * 7) & 0xff


def main():
    p = argparse.ArgumentParser()
    p.add_argument('mode')
    p.add_argument('topic')
    p.add_argument('--type', default='string')
    p.add_argument('--count', type=int, default=-1)
    p.add_argument('--rate', type=float, default=10)
    p.add_argument('--size', type=int, default=64)
    p.add_argument('--latch', action='store_true')
    args = p.parse_args(rospy.myargv()[1:])
    rospy.init_node('rospy_peer', anonymous=True, disable_signals=False)
    cls = UInt8MultiArray if args.type == 'bytes' else String
    received = [0]

    def callback(m):
        if args.type == 'bytes':
            data = bytes(m.data)
            n = struct.unpack('<I', data[:4])[0] if len(data) >= 4 else 0
            ok = len(data) >= 4 and all(data[i] == pattern(n, i) for i in range(4, len(data)))
            print('RECV %d %d %s' % (n, len(data), 'ok' if ok else 'corrupt'), flush=True)
        else:
            print('RECV %s %d ok' % (m.data, len(m.data)), flush=True)
        received[0] += 1
        if 0 < args.count <= received[0]:
            rospy.signal_shutdown('count reached')

    if args.mode == 'sub':
        rospy.Subscriber(args.topic, cls, callback)
        print('READY', flush=True)
        rospy.spin()
        return
    pub = rospy.Publisher(args.topic, cls, queue_size=100, latch=args.latch)
    rate = rospy.Rate(args.rate)
    n = 0
    while not rospy.is_shutdown() and (args.count < 0 or n < args.count):
        if args.type == 'bytes':
            size = max(4, args.size)
            data = bytearray(size)
            data[:4] = struct.pack('<I', n)
            for i in range(4, size):
                data[i] = pattern(n, i)
            pub.publish(UInt8MultiArray(data=bytes(data)))
        else:
            pub.publish(String(data='hello %d' % n))
        n += 1
        rate.sleep()
    if args.latch:
        rospy.spin()


if __name__ == '__main__':
    main()
