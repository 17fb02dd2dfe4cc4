"""The udpros wheel in a virtual environment with nothing of ROS: `udpros master`, two
nodes and bytes over UDPROS."""

import importlib.util
import signal
import subprocess
import sys
import threading
import time

import pytest

import udpros
from conftest import node_args, node_script, read_line, wait_until


def test_no_ros_is_installed_here():
    assert importlib.util.find_spec("genpy") is None
    assert importlib.util.find_spec("rospy") is None


def test_the_native_module_can_ask_whether_the_interpreter_finalizes():
    # Its threads (asyncio wakes, service handlers) stay out of a finalizing interpreter
    # by asking it; None would mean the interpreter's function was not found.
    from udpros import _udpros

    assert _udpros._finalizing() is False


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
    waiter = node_script(script, udpros_master)
    assert read_line(waiter) == "waiting"
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


def _thread_wakes():
    """How many times the calling thread has gone to sleep and woken (Linux)."""
    with open("/proc/thread-self/status") as status:
        for line in status:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc/thread-self/status")


def test_a_wait_off_the_main_thread_sleeps_in_one_piece(udpros_master):
    # Signal handlers run on the main thread only: elsewhere a wait cut into slices to
    # let them run only wakes its thread (ten times a second, for each subscriber).
    with udpros.Node("sleeper", node_args(udpros_master)) as node:
        sub = node.subscribe("/silent")
        woke = []

        def wait():
            before = _thread_wakes()
            assert sub.recv(timeout=2) is None
            woke.append(_thread_wakes() - before)

        waiting = threading.Thread(target=wait)
        waiting.start()
        waiting.join(timeout=30)
        assert woke, "the wait did not end"
        assert woke[0] < 8, "%d wakes in a 2 s wait (slices of 100 ms: 20)" % woke[0]


UINT8 = ("std_msgs/UInt8", "7c8164229e7d2c17eb95e9231617fdee", "uint8 data\n")


def test_a_callback_gets_every_message_in_order_and_outlives_one_that_raises(udpros_master, caplog):
    with udpros.Node("cb_sender", node_args(udpros_master)) as sender:
        with udpros.Node("cb_receiver", node_args(udpros_master)) as receiver:
            pub = sender.advertise_raw("/calls", *UINT8)
            got, threads = [], set()
            done = threading.Event()

            def heard(data, tag):
                threads.add(threading.current_thread().name)
                got.append((tag, data[0]))
                if data[0] == 3:
                    raise ValueError("a callback's bug")
                if data[0] == 99:
                    done.set()

            sub = receiver.subscribe("/calls", None, heard, "tagged", transports=("udp",))
            wait_until(lambda: pub.num_subscribers() == 1)
            for value in [*range(10), 99]:
                pub.publish(bytes([value]))
            assert done.wait(20), got
            assert got == [("tagged", v) for v in [*range(10), 99]]
            assert sub.callback_errors == 1
            logged = [r for r in caplog.records if "the callback raised" in r.getMessage()]
            assert len(logged) == 1 and logged[0].exc_info[0] is ValueError, "logged with its traceback"
            assert threads == {"udpros-callback /calls"}, "one thread of the subscriber's own"
            # The callback has the messages: a second reader would take some from it.
            with pytest.raises(RuntimeError):
                sub.recv(timeout=0.1)
            with pytest.raises(RuntimeError):
                next(iter(sub))


def test_closing_a_subscriber_ends_its_callback_thread_and_its_registration(udpros_master):
    import xmlrpc.client

    master = xmlrpc.client.ServerProxy(udpros_master)

    def subscribers_of(topic):
        _, _, (_, subscribers, _) = master.getSystemState("/test")
        return [nodes for name, nodes in subscribers if name == topic]

    with udpros.Node("cb_closer", node_args(udpros_master)) as node:
        sub = node.subscribe("/closing", None, lambda data: None)
        assert subscribers_of("/closing") == [["/cb_closer"]]
        assert sub._callback_thread.is_alive()
        sub.unregister()
        sub._callback_thread.join(timeout=10)
        assert not sub._callback_thread.is_alive()
        wait_until(lambda: subscribers_of("/closing") == [])
        # Shutdown ends another one's thread the same way.
        other = node.subscribe("/other", None, lambda data: None)
    other._callback_thread.join(timeout=10)
    assert not other._callback_thread.is_alive()
    with pytest.raises(TypeError):
        udpros.Node("cb_bad", node_args(udpros_master)).subscribe("/x", None, "not callable")


def test_spin_serves_callbacks_until_ctrl_c_shuts_the_node_down(udpros_master):
    script = (
        "import sys, udpros\n"
        "node = udpros.Node('spinner', sys.argv[1:])\n"
        "node.subscribe('/spun', None, lambda data: print('heard', data[0], flush=True))\n"
        "print('spinning', flush=True)\n"
        "node.spin()\n"
        "print('shut down', node.is_shutdown(), flush=True)\n"
    )
    spinner = node_script(script, udpros_master)
    try:
        assert read_line(spinner) == "spinning"
        with udpros.Node("spin_sender", node_args(udpros_master)) as sender:
            pub = sender.advertise_raw("/spun", *UINT8)
            wait_until(lambda: pub.num_subscribers() == 1)
            pub.publish(bytes([7]))
            assert read_line(spinner) == "heard 7"
            spinner.send_signal(signal.SIGINT)
            out, err = spinner.communicate(timeout=20)
            assert spinner.returncode == 0, err
            assert out.strip() == "shut down True"
            wait_until(lambda: pub.num_subscribers() == 0)
    finally:
        spinner.kill()


def _exit_of_a_subscribing_script(master, script, first_line, topic, publish):
    """Runs ``script`` (a node subscribed to ``topic`` of std_msgs/UInt8, which prints
    ``first_line`` once subscribed), then ``publish(pub, script_process)`` from a node of
    the test's; the script's exit code, standard output and error."""
    script_process = node_script(script, master)
    try:
        assert read_line(script_process) == first_line
        with udpros.Node("exit_sender", node_args(master)) as sender:
            pub = sender.advertise_raw(topic, *UINT8)
            wait_until(lambda: pub.num_subscribers() == 1)
            publish(pub, script_process)
            out, err = script_process.communicate(timeout=30)
        return script_process.returncode, out.strip(), err
    finally:
        script_process.kill()


def test_a_script_that_ends_while_its_callback_runs_exits_cleanly(udpros_master):
    # The main thread returns while the callback thread is inside a callback that keeps
    # letting go of the interpreter (sleeps, I/O). A finalizing interpreter used to end that
    # thread by unwinding through the native loop under the callback: the process aborted
    # (SIGABRT) every time. Now the exit closes the subscription and waits for the callback.
    script = (
        "import sys, threading, time, udpros\n"
        "node = udpros.Node('leaver', sys.argv[1:])\n"
        "heard = threading.Event()\n"
        "def callback(data):\n"
        "    heard.set()\n"
        "    for _ in range(200):\n"
        "        time.sleep(0.0005)\n"
        "node.subscribe('/busy', None, callback)\n"
        "print('subscribed', flush=True)\n"
        "heard.wait(20)\n"
        "print('leaving', flush=True)\n"
    )

    def until_it_leaves(pub, leaver):
        for value in range(400):
            if leaver.poll() is not None:
                break
            pub.publish(bytes([value % 256]))
            time.sleep(0.005)

    code, out, err = _exit_of_a_subscribing_script(udpros_master, script, "subscribed", "/busy", until_it_leaves)
    assert code == 0, (code, err)
    assert out == "leaving"


def test_callbacks_go_on_while_a_non_daemon_thread_outlives_the_main_one(udpros_master):
    # The exit's closing of subscriptions waits for the program's own threads: a main
    # thread that returns early does not stop the callbacks a worker still waits for.
    script = (
        "import sys, threading, udpros\n"
        "node = udpros.Node('outliver', sys.argv[1:])\n"
        "heard = []\n"
        "enough = threading.Event()\n"
        "def callback(data):\n"
        "    heard.append(data[0])\n"
        "    if len(heard) == 5:\n"
        "        enough.set()\n"
        "node.subscribe('/later', None, callback)\n"
        "def worker():\n"
        "    print('heard', len(heard) if enough.wait(20) else 'too few', flush=True)\n"
        "threading.Thread(target=worker).start()\n"
        "print('main returns', flush=True)\n"
    )

    def five(pub, _):
        for value in range(5):
            pub.publish(bytes([value]))

    code, out, err = _exit_of_a_subscribing_script(udpros_master, script, "main returns", "/later", five)
    assert code == 0, err
    assert out == "heard 5"


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


def test_message_types_decode_without_genpy():
    import struct

    from udpros.message import Message, Time

    rng = udpros.MessageType("sensor_msgs/Range")
    assert rng.md5sum == "c005c34273dc426c67a020a87bc24148"
    assert rng.definition.startswith("# Single range reading")
    body = struct.pack("<III", 7, 12, 500) + struct.pack("<I", 6) + b"sonar1" + struct.pack("<Bffff", 1, 0.5, 0.3, 50.0, 12.25)
    msg = rng.decode(body)
    assert isinstance(msg, Message) and msg.fields() == ["header", "radiation_type", "field_of_view", "min_range", "max_range", "range"]
    assert (msg.header.seq, msg.header.stamp, msg.header.frame_id) == (7, Time(12, 500), "sonar1")
    assert msg.range == 12.25 and msg.radiation_type == 1
    # A type given by its definition, as a publisher's connection header carries it.
    point = udpros.MessageType("my_pkg/Ping", "uint32 id\nfloat64[] samples\nstring note\n")
    decoded = point.decode(struct.pack("<II2d", 3, 2, 1.5, -2.0) + struct.pack("<I", 2) + b"ok")
    assert (decoded.id, decoded.samples, decoded.note) == (3, [1.5, -2.0], "ok")
    # Bytes that are no such message: a ValueError, at once, whatever length they claim.
    for bad in [b"", body[:-1], body + b"\x00", struct.pack("<II", 3, 0x7FFFFFFF) + b"\x00" * 64]:
        with pytest.raises(ValueError):
            point.decode(bad) if bad[:4] == struct.pack("<I", 3) else rng.decode(bad)
    started = time.monotonic()
    with pytest.raises(ValueError):
        point.decode(struct.pack("<II", 1, 0xFFFFFFFF) + b"\x00" * (1 << 20))
    assert time.monotonic() - started < 5
    for unknown in ["no_such_pkg/Nothing", "not a type", ""]:
        with pytest.raises(ValueError):
            udpros.MessageType(unknown)


def test_messages_encode_and_publish_without_genpy(udpros_master):
    import struct

    from udpros.message import Time

    rng = udpros.MessageType("sensor_msgs/Range")
    body = struct.pack("<III", 7, 12, 500) + struct.pack("<I", 6) + b"sonar1" + struct.pack("<Bffff", 1, 0.5, 0.3, 50.0, 12.25)
    # What decode gives encodes to the same bytes; a dict of fields as well, the missing
    # ones at their defaults.
    assert rng.encode(rng.decode(body)) == body
    given = {"header": {"seq": 7, "stamp": Time(12, 500), "frame_id": "sonar1"}, "radiation_type": 1,
             "field_of_view": 0.5, "min_range": 0.30000001192092896, "max_range": 50.0, "range": 12.25}
    assert rng.encode(given) == body
    assert rng.encode({"range": 2.5}) == struct.pack("<IIII", 0, 0, 0, 0) + struct.pack("<Bffff", 0, 0, 0, 0, 2.5)
    ping = udpros.MessageType("my_pkg/Ping", "uint32 id\nuint8[] data\nfloat64[] samples\n")
    blob = bytes(range(256)) * 4096  # 1 MiB
    assert ping.decode(ping.encode({"id": 3, "data": blob, "samples": (1.5, -2.0)})).data == blob
    assert ping.decode(ping.encode({"data": bytearray(blob)})).data == blob
    # Bytes are carried as bytes: encoding a 64 MiB image peaks at a few copies of it, not
    # at the 32 times its size a list of integers took (measured in a fresh interpreter).
    import subprocess
    import sys
    peak = subprocess.run([sys.executable, "-c", '''
import udpros
image = udpros.MessageType("sensor_msgs/CompressedImage")
def peak_kb():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
blob = bytes(64 << 20)
before = peak_kb()
body = image.encode({"format": "raw", "data": blob})
assert len(body) > len(blob)
print(peak_kb() - before)
'''], capture_output=True, text=True, timeout=120)
    assert peak.returncode == 0, peak.stderr
    assert int(peak.stdout) < 6 * (64 << 10), "encoding 64 MiB peaked %s kB higher" % peak.stdout
    # Wrong fields are exceptions, never a crash: an unknown field, a wrong kind, a value
    # out of range, a list that holds itself, an object of no message kind.
    looped = []
    looped.append(looped)
    for bad, error in [({"nope": 1}, ValueError), ({"range": "far"}, ValueError),
                       ({"radiation_type": 300}, ValueError), ({"header": looped}, ValueError),
                       ({"range": object()}, TypeError), (42, ValueError)]:
        with pytest.raises(error):
            rng.encode(bad)
    with pytest.raises(ValueError):
        ping.encode({"samples": looped})

    # End to end: a node with no genpy publishes messages by its type's name.
    with udpros.Node("range_sender", node_args(udpros_master)) as sender:
        with udpros.Node("range_receiver", node_args(udpros_master)) as receiver:
            sub = receiver.subscribe("/range", "sensor_msgs/Range")
            pub = sender.advertise("/range", "sensor_msgs/Range")
            deadline = time.monotonic() + 20
            got = None
            while got is None and time.monotonic() < deadline:
                pub.publish(rng.decode(body))
                got = sub.recv(timeout=0.2)
            assert got is not None and (got.header.frame_id, got.range) == ("sonar1", 12.25)
            pub.publish({"range": 3.0})
            while got.range != 3.0 and time.monotonic() < deadline:
                got = sub.recv(timeout=1.0) or got
            assert got.range == 3.0 and got.header.frame_id == ""
            with pytest.raises(ValueError):
                pub.publish({"range": "far"})


def test_the_topside_depth_example_plots_the_demo_sonar_without_genpy(tmp_path):
    import os
    import pathlib

    from conftest import REPO, free_port, ros_env

    binary = os.environ.get("UDPROS_BIN") or str(REPO / "target" / "debug" / "udpros")
    uri = f"http://127.0.0.1:{free_port()}/"
    demo = subprocess.Popen(
        [binary, "demo", "--plain", "--view-port", "0", "--duration", "90"],
        env=ros_env(uri),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        example = pathlib.Path(REPO) / "python" / "examples" / "ping1d_depth.py"
        plotted = subprocess.run(
            [sys.executable, str(example), "5"],
            env=ros_env(uri),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert plotted.returncode == 0, plotted.stderr
        lines = plotted.stdout.splitlines()
        assert len(lines) == 5, lines
        for line in lines:
            stamp, depth, unit, bar = line.split(maxsplit=3)
            assert float(stamp) > 0 and unit == "m" and bar.startswith("|") and bar.endswith("|")
            assert 0.0 < float(depth) < 100.0, line
    finally:
        demo.terminate()
        demo.wait(timeout=30)
