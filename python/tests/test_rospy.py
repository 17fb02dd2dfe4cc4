"""`import udpros.rospy` in Debian's rospy nodes, against roscpp, udpros and stock rospy
peers: which transport each link took is read from the nodes' getBusInfo, as `rosnode
info` reads it."""

import json
import os
import random
import signal
import struct
import sys
import time
import xmlrpc.client

import udpros
from conftest import REPO, node_args, ros_env, wait_until
from std_msgs import msg as std_msgs

NODE = str(REPO / "python" / "tests" / "rospy_node.py")
UDPROS = os.environ.get("UDPROS_BIN") or str(REPO / "target" / "debug" / "udpros")


def rospy_node(run, master, *args):
    return run([sys.executable, NODE, *args, *node_args(master)], ros_env(master))


def bus(line):
    """getBusInfo's rows from a "BUS <json>" or "LINKS <json>" line: (peer, direction,
    transport, topic)."""
    return [(row[1], row[2], row[3], row[4]) for row in json.loads(line.split(" ", 1)[1])]


def received(node, count):
    return [node.expect("RECV ")[len("RECV ") :] for _ in range(count)]


def test_a_rospy_subscriber_hears_a_roscpp_publisher_over_udpros(rosmaster, run, roscpp_peer):
    run([str(roscpp_peer), "pub", "/chatter", "--rate", "20", *node_args(rosmaster)], ros_env(rosmaster))
    sub = rospy_node(run, rosmaster, "sub", "/chatter", "--count", "10")
    got = received(sub, 10)
    assert all(text.startswith("hello ") for text in got), got
    numbers = [int(text.split()[1]) for text in got]
    assert numbers == sorted(numbers), "in order"
    [(_, direction, transport, topic)] = bus(sub.expect("BUS "))
    assert (direction, transport, topic) == ("i", "UDPROS", "/chatter")


def test_a_rospy_subscriber_hears_a_udpros_publisher_over_udpros(rosmaster, run):
    run(
        [UDPROS, "topic", "pub", "-r", "20", "/udp_chatter", "std_msgs/String", "data: from udpros", *node_args(rosmaster)],
        ros_env(rosmaster),
    )
    sub = rospy_node(run, rosmaster, "sub", "/udp_chatter", "--count", "5")
    assert received(sub, 5) == ["from udpros"] * 5
    [(_, direction, transport, _)] = bus(sub.expect("BUS "))
    assert (direction, transport) == ("i", "UDPROS")
    # Between udpros ends the link carries FEC.
    [row] = json.loads(sub.expect("INFO ")[len("INFO ") :])
    assert "; FEC: " in row[6], row
    # getBusStats counts what the link received: at least the five messages, each 15
    # bytes on the wire (a length and "from udpros").
    [_, [[topic, [(_, byte_count, count, _, connected)]]], _] = json.loads(sub.expect("STATS ")[len("STATS ") :])
    assert (topic, connected) == ("/udp_chatter", True)
    assert count >= 5 and byte_count == 15 * count, (count, byte_count)


def test_a_rospy_subscriber_follows_a_publisher_that_dies_and_comes_back(rosmaster, run, roscpp_peer):
    first = run([str(roscpp_peer), "pub", "/phoenix", "--rate", "20", *node_args(rosmaster)], ros_env(rosmaster))
    sub = rospy_node(run, rosmaster, "sub", "/phoenix", "--count", "1000000", "--seconds", "120")
    def number():
        return int(sub.expect("RECV ")[len("RECV ") :].split()[1])

    while number() < 40:
        pass
    first.proc.kill()
    first.proc.wait()
    # Killed, the publisher never unregistered: its link retries quietly. The next one
    # is heard as soon as the master lists it: it counts from zero again.
    run([str(roscpp_peer), "pub", "/phoenix", "--rate", "20", *node_args(rosmaster)], ros_env(rosmaster))
    while number() >= 40:
        pass


def test_a_rospy_publisher_serves_a_roscpp_subscriber_that_asks_for_udp_only(rosmaster, run, roscpp_peer):
    pub = rospy_node(run, rosmaster, "pub", "/to_roscpp", "--count", "400", "--rate", "20")
    cpp = run(
        [str(roscpp_peer), "sub", "/to_roscpp", "--hints", "udp", "--count", "10", *node_args(rosmaster)],
        ros_env(rosmaster),
    )
    got = [cpp.expect("RECV ").split()[1:3] for _ in range(10)]
    assert all(word == "msg" for word, _ in got), got
    # The publisher's own getBusInfo: an outbound UDPROS link.
    while True:
        rows = bus(pub.expect("BUS "))
        if rows:
            break
    [(_, direction, transport, topic)] = rows
    assert (direction, transport, topic) == ("o", "UDPROS", "/to_roscpp")


def test_tcpros_is_untouched_for_roscpp_and_stock_rospy_subscribers(rosmaster, run, roscpp_peer):
    rospy_node(run, rosmaster, "pub", "/both", "--count", "400", "--rate", "20")
    cpp = run(
        [str(roscpp_peer), "sub", "/both", "--hints", "tcp", "--count", "5", *node_args(rosmaster)],
        ros_env(rosmaster),
    )
    stock = rospy_node(run, rosmaster, "sub", "/both", "--count", "5", "--plain")
    assert len([cpp.expect("RECV ") for _ in range(5)]) == 5
    assert len(received(stock, 5)) == 5
    [(_, _, transport, _)] = bus(stock.expect("BUS "))
    assert transport == "TCPROS"


def test_transport_hints_choose_tcpros_per_topic(rosmaster, run, roscpp_peer):
    run([str(roscpp_peer), "pub", "/hinted", "--rate", "20", *node_args(rosmaster)], ros_env(rosmaster))
    sub = rospy_node(run, rosmaster, "sub", "/hinted", "--count", "3", "--hints", "tcp")
    assert len(received(sub, 3)) == 3
    [(_, _, transport, _)] = bus(sub.expect("BUS "))
    assert transport == "TCPROS"


def test_two_rospy_nodes_with_the_import_speak_udpros(rosmaster, run):
    rospy_node(run, rosmaster, "pub", "/among_rospy", "--count", "400", "--rate", "20")
    sub = rospy_node(run, rosmaster, "sub", "/among_rospy", "--count", "5")
    got = received(sub, 5)
    assert all(text.startswith("msg ") for text in got)
    [(_, _, transport, _)] = bus(sub.expect("BUS "))
    assert transport == "UDPROS"


def test_a_latched_message_reaches_a_late_udp_subscriber_and_from_roscpp(rosmaster, run, roscpp_peer):
    pub = rospy_node(run, rosmaster, "pub", "/latched", "--count", "1", "--latch", "--seconds", "60")
    pub.expect("SENT")
    cpp = run(
        [str(roscpp_peer), "sub", "/latched", "--hints", "udp", "--count", "1", *node_args(rosmaster)],
        ros_env(rosmaster),
    )
    assert cpp.expect("RECV ").split()[1:3] == ["msg", "0"]
    run(
        [str(roscpp_peer), "pub", "/latched_cpp", "--count", "1", "--latch", *node_args(rosmaster)],
        ros_env(rosmaster),
    )
    sub = rospy_node(run, rosmaster, "sub", "/latched_cpp", "--count", "1")
    assert received(sub, 1) == ["hello 0"]
    [(_, _, transport, _)] = bus(sub.expect("BUS "))
    assert transport == "UDPROS"


def test_the_rospy_listener_example_hears_the_udpros_talker(rosmaster, run):
    examples = REPO / "python" / "examples"
    run([sys.executable, str(examples / "talker.py"), *node_args(rosmaster)], ros_env(rosmaster))
    listener = run([sys.executable, str(examples / "rospy_listener.py"), "5", *node_args(rosmaster)], ros_env(rosmaster))
    lines = [listener.expect("hello world ") for _ in range(5)]
    numbers = [int(line.removeprefix("hello world ")) for line in lines]
    assert numbers == list(range(numbers[0], numbers[0] + 5)), lines
    assert listener.proc.wait(timeout=30) == 0


def test_a_fault_in_rospys_delivery_is_logged_and_the_link_goes_on(rosmaster, run):
    # It used to end the link's thread: no message came after it.
    run(
        [UDPROS, "topic", "pub", "-r", "20", "/faulty", "std_msgs/String", "data: after", *node_args(rosmaster)],
        ros_env(rosmaster),
    )
    sub = rospy_node(run, rosmaster, "sub", "/faulty", "--count", "3", "--break-first-delivery", "--hints", "udp")
    assert received(sub, 3) == ["after"] * 3
    [(_, direction, transport, _)] = bus(sub.expect("BUS "))
    assert (direction, transport) == ("i", "UDPROS")


def test_messages_that_do_not_decode_are_dropped_and_the_link_goes_on(rosmaster, run):
    rng = random.Random(52)
    with udpros.Node("garbler", node_args(rosmaster)) as node:
        pub = node.advertise("/garbled", std_msgs.String)
        sub = rospy_node(run, rosmaster, "sub", "/garbled", "--count", "1000")
        sub.expect("READY")
        wait_until(lambda: pub.num_subscribers() == 1)
        for i in range(20):
            # A string that claims 2 GB, then random bytes up to 64 kB, then a good one.
            pub.publish(b"\xff\xff\xff\x7f" + b"x" * 10)
            pub.publish(rng.randbytes(rng.randrange(0, 65536)))
            pub.publish(std_msgs.String(data="good %d" % i))
            time.sleep(0.02)
        # genpy decodes what it can (a string shorter than it claims, random bytes that
        # happen to parse); what it cannot is dropped. The good ones all come, in order.
        goods = []
        while "good 19" not in goods:
            text = sub.expect("RECV ")[len("RECV ") :]
            if text.startswith("good "):
                goods.append(text)
    assert goods == ["good %d" % i for i in range(20)]


def test_a_message_claiming_billions_of_empty_elements_is_refused_and_the_link_goes_on(rosmaster, run, tmp_path):
    # Four bytes that genpy's deserialize would take for four billion messages to build.
    from genpy.dynamic import generate_dynamic

    name = "udpros_test/ManyEmpty"
    text = "std_msgs/Empty[] many\n" + "=" * 80 + "\nMSG: std_msgs/Empty\n"
    ManyEmpty = generate_dynamic(name, text)[name]
    with udpros.Node("bomber", node_args(rosmaster)) as node:
        pub = node.advertise_raw("/many", ManyEmpty._type, ManyEmpty._md5sum, ManyEmpty._full_text)
        # genpy writes the node's class under TMPDIR, and the node is killed at the end,
        # before its own clean-up could remove it.
        env = dict(ros_env(rosmaster), TMPDIR=str(tmp_path))
        sub = run([sys.executable, NODE, "sub", "/many", "--many-empty", "--count", "1", *node_args(rosmaster)], env)
        sub.expect("READY")
        wait_until(lambda: pub.num_subscribers() == 1)
        pub.publish(struct.pack("<I", 2**32 - 1))
        pub.publish(struct.pack("<I", 2))
        assert sub.expect("RECV ") == "RECV 2 empty"


def test_a_publisher_that_leaves_takes_its_udpros_link_with_it(rosmaster, run, roscpp_peer):
    publisher = run([str(roscpp_peer), "pub", "/leaving", "--rate", "20", *node_args(rosmaster)], ros_env(rosmaster))
    sub = rospy_node(run, rosmaster, "sub", "/leaving", "--count", "3", "--seconds", "120", "--linger", "30")
    received(sub, 3)
    [(_, _, transport, _)] = bus(sub.expect("BUS "))
    assert transport == "UDPROS"
    # roscpp unregisters as Ctrl-C stops it: the master's publisherUpdate (an empty list)
    # ends the link, as roscpp's subscribers end theirs.
    publisher.proc.send_signal(signal.SIGINT)
    publisher.proc.wait(timeout=30)
    while bus(sub.expect("LINKS ")):
        pass


def test_a_forged_publisher_list_links_to_at_most_the_cap_and_the_node_answers(rosmaster, run):
    import udpros.rospy

    sub = rospy_node(run, rosmaster, "sub", "/flooded", "--count", "1", "--seconds", "120")
    node = xmlrpc.client.ServerProxy(sub.expect("URI ")[len("URI ") :])
    sub.expect("READY")
    # Nobody listens on port 1: each link is made, and retries in vain.
    forged = ["http://127.0.0.1:1/forged/%d" % i for i in range(20000)]
    code, _, _ = node.publisherUpdate("/master", "/flooded", forged)
    assert code == 1

    def links():
        return [row for row in node.getBusInfo("/test")[2] if row[4] == "/flooded"]

    cap = udpros.rospy.MAX_PUBLISHER_LINKS
    wait_until(lambda: len(links()) == cap, seconds=120)
    time.sleep(1.0)  # no more come
    assert len(links()) == cap
    assert {row[1] for row in links()} == set(forged[:cap])
    assert node.getPid("/test")[0] == 1
    # An honest list replaces it: the forged links close.
    node.publisherUpdate("/master", "/flooded", [])
    wait_until(lambda: not links(), seconds=60)
