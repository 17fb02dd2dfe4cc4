"""The udpros wheel against Debian's ROS: a rosmaster, rospy's rostopic and genpy's
message classes, in a virtual environment that sees Debian's python3 packages."""

import struct
import subprocess
import sys
import time

import pytest

import udpros
from conftest import REPO, node_args, node_script, read_line, ros_env, wait_until

from std_msgs import msg as std_msgs


def test_a_talker_and_a_listener_speak_udpros_with_genpy_messages(rosmaster):
    with udpros.Node("talker", node_args(rosmaster)) as talker, udpros.Node("listener", node_args(rosmaster)) as listener:
        pub = talker.advertise("/chatter", std_msgs.String)
        sub = listener.subscribe("/chatter", std_msgs.String, transports=("udp",))
        wait_until(lambda: pub.num_subscribers() == 1)
        sent = [f"hello {i}" for i in range(20)]
        for text in sent:
            pub.publish(std_msgs.String(data=text))
            time.sleep(0.01)
        got = []
        while len(got) < len(sent):
            msg = sub.recv(timeout=10)
            assert msg is not None, f"after {got}"
            got.append(msg.data)
        assert got == sent
        [(uri, transport, connected)] = sub.links()
        assert (uri, transport, connected) == (talker.uri, "UDPROS", True)


def test_a_callback_node_spins_on_rostopic_messages_until_rosnode_kill(rosmaster):
    # rospy's shape without rospy: a callback with genpy messages, spin(), and the
    # slave API's shutdown (`rosnode kill`) ending the spin.
    script = (
        "import sys, udpros\n"
        "from std_msgs.msg import Float64\n"
        "node = udpros.Node('depth_listener', sys.argv[1:])\n"
        "node.subscribe('/depth', Float64, lambda msg: print(type(msg).__name__, msg.data, flush=True))\n"
        "node.spin()\n"
        "print('shut down', flush=True)\n"
    )
    listener = node_script(script, rosmaster)
    rostopic = subprocess.Popen(
        [sys.executable, "/usr/bin/rostopic", "pub", "-r", "20", "/depth", "std_msgs/Float64", "data: 2.5"],
        env=ros_env(rosmaster),
        stdout=subprocess.DEVNULL,
    )
    try:
        assert read_line(listener) == "Float64 2.5"
        killed = subprocess.run(
            [sys.executable, "/usr/bin/rosnode", "kill", "/depth_listener"],
            env=ros_env(rosmaster),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert killed.returncode == 0, killed.stderr
        out, err = listener.communicate(timeout=20)
        assert listener.returncode == 0, err
        assert out.splitlines()[-1] == "shut down"
    finally:
        listener.kill()
        rostopic.terminate()
        rostopic.wait(timeout=10)


def test_a_rospy_publisher_is_heard_over_tcpros(rosmaster):
    rostopic = subprocess.Popen(
        [sys.executable, "/usr/bin/rostopic", "pub", "-r", "20", "/depth", "std_msgs/Float64", "data: 12.5"],
        env=ros_env(rosmaster),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with udpros.Node("depth_listener", node_args(rosmaster)) as node:
            sub = node.subscribe("/depth", std_msgs.Float64)
            msg = sub.recv(timeout=30)
            assert msg is not None and msg.data == 12.5
            # rospy has no UDPROS: the link fell back to TCPROS.
            assert [t for (_, t, _) in sub.links()] == ["TCPROS"]
    finally:
        rostopic.terminate()
        rostopic.wait(timeout=10)


def test_bytes_in_bytes_out_and_a_wait_that_times_out(rosmaster):
    with udpros.Node("raw", node_args(rosmaster)) as node:
        sub = node.subscribe("/nothing")
        started = time.monotonic()
        assert sub.recv(timeout=0.3) is None
        assert time.monotonic() - started >= 0.25
        pub = node.advertise("/raw", std_msgs.UInt8)
        sub = node.subscribe("/raw")
        wait_until(lambda: pub.num_subscribers() == 1)
        pub.publish(b"\x2a")
        assert sub.recv(timeout=10) == b"\x2a"


def test_bad_arguments_are_python_exceptions(rosmaster):
    with udpros.Node("strict", node_args(rosmaster)) as node:
        with pytest.raises(ValueError):
            node.subscribe("/x", transports=("carrier pigeon",))
        with pytest.raises(ValueError):
            node.subscribe("/x").recv(timeout=-1)


def test_the_examples_talk_to_each_other(rosmaster):
    examples = REPO / "python" / "examples"
    remap = node_args(rosmaster)
    talker = subprocess.Popen(
        [sys.executable, str(examples / "talker.py"), *remap],
        env=ros_env(rosmaster),
        stdout=subprocess.DEVNULL,
    )
    try:
        # The iterating listener, and the one in rospy's shape (a callback, then spin).
        for example in ("listener.py", "callback_listener.py"):
            listener = subprocess.run(
                [sys.executable, str(examples / example), "5", *remap],
                env=ros_env(rosmaster),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert listener.returncode == 0, (example, listener.stderr)
            lines = listener.stdout.splitlines()
            assert len(lines) == 5, (example, lines)
            numbers = [int(line.removeprefix("hello world ")) for line in lines]
            assert numbers == list(range(numbers[0], numbers[0] + 5)), (example, lines)
    finally:
        talker.terminate()
        talker.wait(timeout=10)


def test_a_message_that_does_not_deserialize_is_skipped_and_counted(rosmaster):
    with udpros.Node("liar", node_args(rosmaster)) as liar, udpros.Node("reader", node_args(rosmaster)) as reader:
        String = std_msgs.String
        pub = liar.advertise_raw("/said", String._type, String._md5sum, String._full_text)
        sub = reader.subscribe("/said", String)
        wait_until(lambda: pub.num_subscribers() == 1)
        pub.publish(b"\x01\x00")  # two bytes, where a string starts with a 4-byte length
        good = std_msgs.String(data="fine")
        pub.publish(good)
        assert sub.recv(timeout=10) == good
        assert sub.undecodable == 1


def test_a_message_claiming_billions_of_empty_elements_is_refused_and_counted(rosmaster):
    # genpy would build every one of them; the subscriber refuses it at once and goes on.
    from genpy.dynamic import generate_dynamic

    name = "udpros_test/ManyEmpty"
    text = "std_msgs/Empty[] many\n" + "=" * 80 + "\nMSG: std_msgs/Empty\n"
    ManyEmpty = generate_dynamic(name, text)[name]
    with udpros.Node("liar", node_args(rosmaster)) as liar, udpros.Node("reader", node_args(rosmaster)) as reader:
        pub = liar.advertise_raw("/many", ManyEmpty._type, ManyEmpty._md5sum, ManyEmpty._full_text)
        sub = reader.subscribe("/many", ManyEmpty)
        wait_until(lambda: pub.num_subscribers() == 1)
        pub.publish(struct.pack("<I", 2**32 - 1))
        pub.publish(struct.pack("<I", 2))
        message = sub.recv(timeout=10)
        assert message is not None and len(message.many) == 2
        assert sub.undecodable == 1


def test_a_service_answers_udpros_and_rospy_clients(rosmaster):
    from std_srvs.srv import SetBool, SetBoolResponse

    def toggle(request):
        if request.data and toggle.refuse:
            raise ValueError("not now")
        return SetBoolResponse(success=request.data, message=f"set to {request.data}")

    toggle.refuse = False
    with udpros.Node("switch", node_args(rosmaster)) as server, udpros.Node("pilot", node_args(rosmaster)) as client:
        served = server.advertise_service("/toggle", SetBool, toggle)
        call = client.service_proxy("/toggle", SetBool, timeout=10)
        assert call(True).message == "set to True"
        assert call(data=False).success is False
        rosservice = subprocess.run(
            [sys.executable, "/usr/bin/rosservice", "call", "/toggle", "data: true"],
            env=ros_env(rosmaster),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert rosservice.returncode == 0, rosservice.stderr
        assert "set to True" in rosservice.stdout
        toggle.refuse = True
        with pytest.raises(udpros.ServiceError, match="not now"):
            call(True)
        assert served.calls() == 4
        with pytest.raises(udpros.ServiceError):
            client.service_proxy("/nobody", SetBool, timeout=5)(True)


def test_service_calls_are_awaitable(rosmaster):
    import asyncio
    import threading

    from std_srvs.srv import SetBool, SetBoolResponse

    release = threading.Event()

    def slow_or_fast(request):
        if not request.data:
            release.wait(20)  # the call asyncio abandons below
        return SetBoolResponse(success=request.data, message="answered")

    async def calls(proxy, missing):
        # Ten at once, answered while the event loop keeps running.
        answers = await asyncio.gather(*(proxy.call_async(True) for _ in range(10)))
        assert [a.success for a in answers] == [True] * 10
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(proxy.call_async(data=False), 0.5)
        release.set()
        # The abandoned call left the proxy usable.
        assert (await proxy.call_async(True)).message == "answered"
        with pytest.raises(udpros.ServiceError):
            await missing.call_async(True)

    with udpros.Node("async_server", node_args(rosmaster)) as server, udpros.Node("async_client", node_args(rosmaster)) as client:
        served = server.advertise_service("/slow_or_fast", SetBool, slow_or_fast)
        proxy = client.service_proxy("/slow_or_fast", SetBool, timeout=30)
        missing = client.service_proxy("/nobody_async", SetBool, timeout=5)
        asyncio.run(calls(proxy, missing))
        assert served.calls() >= 11


def test_parameters_round_trip_and_meet_rosparam(rosmaster):
    with udpros.Node("tuner", node_args(rosmaster)) as node:
        value = {"gain": 2, "range": 20.5, "on": True, "name": "ping360", "steps": [1, 2, 3], "blob": b"\x00\x01"}
        node.set_param("~sonar", value)
        assert node.get_param("~sonar") == value
        assert node.get_param("/nothing/here", 7) == 7
        with pytest.raises(KeyError):
            node.get_param("/nothing/here")
        rosparam = subprocess.run(
            [sys.executable, "/usr/bin/rosparam", "get", "/tuner/sonar/range"],
            env=ros_env(rosmaster), capture_output=True, text=True, timeout=60,
        )
        assert rosparam.stdout.strip() == "20.5", rosparam.stderr
        subprocess.run(
            [sys.executable, "/usr/bin/rosparam", "set", "/depth_limit", "[1.5, 2.5]"],
            env=ros_env(rosmaster), check=True, timeout=60,
        )
        assert node.get_param("/depth_limit") == [1.5, 2.5]
        with pytest.raises(OverflowError):
            node.set_param("/big", 2**40)
        with pytest.raises(TypeError):
            node.set_param("/odd", object())
        looped = []
        looped.append(looped)
        with pytest.raises(ValueError):
            node.set_param("/looped", looped)
