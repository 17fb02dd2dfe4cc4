#!/usr/bin/env python3
"""dynamic_reconfigure peers for udpros's interop tests (run with the python that has ROS).

  reconfigure_peer.py server
      Debian's reference Python server of dynamic_reconfigure's own Test.cfg
      (dynamic_reconfigure.cfg.TestConfig) under ~; prints "READY", then
      "CALLBACK level=<level> int_=<v> double_=<v> str_=<v> bool_=<v>" per change.
  reconfigure_peer.py client NODE [KEY...]
      a dynamic_reconfigure.client.Client with a config callback; prints
      "CONFIG <key>=<v> ..." for every config it sees (keys: int_ double_ str_ bool_
      unless given).
  reconfigure_peer.py describe NS
      the latched parameter_descriptions of NS as one canonical JSON line: every message
      field, with each edit_method evaluated as clients evaluate it and its source lines
      dropped (they say where a .cfg file defined a constant, which a Rust program has not).
"""
import json
import sys

import rospy


def summary(config, keys=('int_', 'double_', 'str_', 'bool_')):
    return ' '.join('%s=%s' % (k, config.get(k)) for k in keys)


def canonical(value):
    if hasattr(value, '__slots__'):
        out = {}
        for slot in value.__slots__:
            field = getattr(value, slot)
            if slot == 'edit_method' and field:
                method = eval(field)
                for const in method['enum']:
                    const.pop('srcline', None)
                    const.pop('srcfile', None)
                field = method
            out[slot] = canonical(field)
        return out
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, float) and value in (float('inf'), float('-inf')):
        return repr(value)
    return value


def main():
    mode = sys.argv[1]
    if mode == 'server':
        from dynamic_reconfigure.server import Server
        from dynamic_reconfigure.cfg import TestConfig
        rospy.init_node('reconfigure_peer')

        def callback(config, level):
            print('CALLBACK level=%d %s' % (level, summary(config)), flush=True)
            return config

        Server(TestConfig, callback)
        print('READY', flush=True)
        rospy.spin()
    elif mode == 'client':
        from dynamic_reconfigure.client import Client
        rospy.init_node('reconfigure_client', anonymous=True)

        keys = sys.argv[3:] or ('int_', 'double_', 'str_', 'bool_')

        def callback(config):
            print('CONFIG %s' % summary(config, keys), flush=True)

        Client(sys.argv[2], timeout=30, config_callback=callback)
        print('READY', flush=True)
        rospy.spin()
    elif mode == 'describe':
        from dynamic_reconfigure.msg import ConfigDescription
        rospy.init_node('reconfigure_describe', anonymous=True)
        ns = sys.argv[2].rstrip('/')
        msg = rospy.wait_for_message(ns + '/parameter_descriptions', ConfigDescription, timeout=30)
        print(json.dumps(canonical(msg), sort_keys=True), flush=True)
    else:
        sys.exit('unknown mode ' + mode)


if __name__ == '__main__':
    main()
