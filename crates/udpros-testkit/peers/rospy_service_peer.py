#!/usr/bin/env python3
"""A rospy service peer for udpros's interop tests (run with the python that has ROS).

  rospy_service_peer.py serve NAME setbool|blob [--sleep-ms N]
      setbool: data=true -> (true, "on"); data=false -> ServiceException("refusing")
      blob: echoes the string; prints "READY" once advertised
  rospy_service_peer.py call NAME setbool|blob [--persistent] [--count N] [--size N]
      prints "OK <success> <message>" / "OK <size> <same|different>" per call, or
      "ERR <exception>"

blob is udpros_test/Blob ("string data --- string data"); its Python class must be on
PYTHONPATH (the tests generate it with genpy_gen.py).
"""
import argparse
import time

import rospy
from std_srvs.srv import SetBool, SetBoolResponse


def blob_class():
    from udpros_test.srv import Blob
    return Blob


def blob_of(size):
    return ''.join(chr(ord('a') + i % 26) for i in range(size))


def main():
    p = argparse.ArgumentParser()
    p.add_argument('mode')
    p.add_argument('name')
    p.add_argument('type')
    p.add_argument('--sleep-ms', type=int, default=0)
    p.add_argument('--count', type=int, default=1)
    p.add_argument('--size', type=int, default=16)
    p.add_argument('--persistent', action='store_true')
    args = p.parse_args(rospy.myargv()[1:])
    rospy.init_node('rospy_service_peer', anonymous=True)
    cls = blob_class() if args.type == 'blob' else SetBool
    if args.mode == 'serve':
        def handle(req):
            if args.sleep_ms:
                time.sleep(args.sleep_ms / 1000.0)
            if args.type == 'blob':
                return cls._response_class(data=req.data)
            if not req.data:
                raise rospy.ServiceException('refusing')
            return SetBoolResponse(success=True, message='on')
        rospy.Service(args.name, cls, handle)
        print('READY', flush=True)
        rospy.spin()
        return
    proxy = rospy.ServiceProxy(args.name, cls, persistent=args.persistent)
    for i in range(args.count):
        try:
            if args.type == 'blob':
                data = blob_of(args.size)
                res = proxy(data)
                print('OK %d %s' % (len(res.data), 'same' if res.data == data else 'different'),
                      flush=True)
            else:
                res = proxy(i % 2 == 0)
                print('OK %d %s' % (1 if res.success else 0, res.message), flush=True)
        except Exception as e:  # the Rust side checks the text
            print('ERR %s' % str(e).replace('\n', ' '), flush=True)


if __name__ == '__main__':
    main()
