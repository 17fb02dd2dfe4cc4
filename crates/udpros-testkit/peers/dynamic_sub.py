"""A rospy subscriber that knows no message package: like `rostopic echo`, it subscribes
with AnyMsg, builds the message class from the publisher's connection header with genpy's
dynamic generation, and prints what it decodes (one JSON line per message)."""

import json
import sys

import genpy.dynamic
import rospy


def main():
    topic, count = sys.argv[1], int(sys.argv[2])
    rospy.init_node("dynamic_sub", anonymous=True, disable_signals=True)
    seen = []
    done = []

    def callback(raw):
        if len(seen) >= count:
            return  # rospy may deliver a few more before the main loop sees `done`
        header = raw._connection_header
        name = header["type"]
        cls = genpy.dynamic.generate_dynamic(name, header["message_definition"])[name]
        msg = cls()
        msg.deserialize(raw._buff)
        fields = {f: getattr(msg, f) for f in msg.__slots__ if f != "header"}
        print(json.dumps({"type": name, "md5": header["md5sum"], "class_md5": cls._md5sum,
                          "fields": {k: v for k, v in fields.items()
                                     if isinstance(v, (int, float, str, bool))}}), flush=True)
        seen.append(1)
        if len(seen) >= count:
            done.append(1)

    rospy.Subscriber(topic, rospy.AnyMsg, callback)
    deadline = rospy.Time.now() + rospy.Duration(30)
    while not done and not rospy.is_shutdown() and rospy.Time.now() < deadline:
        rospy.sleep(0.05)
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
