"""The udpros wheel in a virtual environment with nothing of ROS: `udpros master`, two
nodes and bytes over UDPROS."""

import importlib.util
import signal
import subprocess
import sys
import threading
import time

import udpros
from conftest import node_args, wait_until


def test_no_ros_is_installed_here():
    assert importlib.util.find_spec("genpy") is None
    assert importlib.util.find_spec("rospy") is None


def test_bytes_go_over_udpros_against_udpros_master(udpros_master):
    with udpros.Node("sender", node_args(udpros_master)) as sender:
        with udpros.Node("receiver", node_args(udpros_master)) as receiver:
            # A raw publisher still names its type, as ROS wants: std_msgs/UInt8's.
            pub = sender.advertise_raw(
                "/counter", "std_msgs/UInt8", "7c8164229e7d2c17eb95e9231617fdee", "uint8 data\n"
            )
            sub = receiver.subscribe("/counter", transports=("udp",))
            wait_until(lambda: pub.num_subscribers() == 1)
            for value in range(10):
                pub.publish(bytes([value]))
            got = [sub.recv(timeout=10) for _ in range(10)]
            assert got == [bytes([v]) for v in range(10)]
            assert [t for (_, t, _) in sub.links()] == ["UDPROS"]


def test_ctrl_c_ends_a_wait_with_keyboard_interrupt(udpros_master):
    script = (
        "import sys, udpros\n"
        "node = udpros.Node('waiter', sys.argv[1:])\n"
        "sub = node.subscribe('/never')\n"
        "print('waiting', flush=True)\n"
        "sub.recv()\n"
    )
    waiter = subprocess.Popen(
        [sys.executable, "-c", script, *node_args(udpros_master)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert waiter.stdout.readline().strip() == "waiting"
    time.sleep(0.3)
    waiter.send_signal(signal.SIGINT)
    _, stderr = waiter.communicate(timeout=10)
    assert waiter.returncode != 0
    assert "KeyboardInterrupt" in stderr, stderr


def test_a_subscriber_answers_while_another_thread_waits_on_it(udpros_master):
    with udpros.Node("shared", node_args(udpros_master)) as node:
        sub = node.subscribe("/quiet")
        waiting = threading.Thread(target=sub.recv, kwargs={"timeout": 3}, daemon=True)
        waiting.start()
        time.sleep(0.2)
        started = time.monotonic()
        assert sub.topic == "/quiet" and sub.links() == []
        assert time.monotonic() - started < 1, "blocked behind the waiting thread"
        waiting.join()


def test_asyncio_receives_and_a_cancelled_wait_loses_no_message(udpros_master):
    import asyncio

    async def main(sender, receiver):
        pub = sender.advertise_raw("/async", "std_msgs/UInt8", "7c8164229e7d2c17eb95e9231617fdee", "uint8 data\n")
        sub = receiver.subscribe("/async", transports=("udp",))
        wait_until(lambda: pub.num_subscribers() == 1)
        assert await sub.recv_async(timeout=0.2) is None
        # Waits cancelled over and over while messages arrive: none goes missing or comes
        # twice, and those received later come in the order they were sent (a wait that
        # finished before its cancel keeps its message).
        got_early = []
        for value in range(50):
            pub.publish(bytes([value]))
            waiting = asyncio.ensure_future(sub.recv_async())
            await asyncio.sleep(0)
            waiting.cancel()
            try:
                await waiting
            except asyncio.CancelledError:
                pass
            else:
                got_early.append(waiting.result()[0])
        got = []
        async for data in sub:
            got.append(data[0])
            if len(got) + len(got_early) == 50:
                break
        assert got == sorted(got), "in the order they were sent"
        return sorted(got_early + got)

    with udpros.Node("async_sender", node_args(udpros_master)) as sender:
        with udpros.Node("async_receiver", node_args(udpros_master)) as receiver:
            assert asyncio.run(main(sender, receiver)) == list(range(50))
