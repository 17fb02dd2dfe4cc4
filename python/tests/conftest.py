"""What the tests share: free ports, a master (Debian's rosmaster, or `udpros master` where
ROS is not installed) and ROS's environment for the processes they start."""

import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ros_env(uri):
    env = dict(os.environ)
    env.update(
        ROS_MASTER_URI=uri,
        ROS_IP="127.0.0.1",
        ROS_HOME=tempfile.mkdtemp(prefix="udpros-py-"),
        PYTHONUNBUFFERED="1",
    )
    env.pop("ROS_HOSTNAME", None)
    return env


def node_args(uri):
    """The remappings that put a node on `uri`, on loopback."""
    return [f"__master:={uri}", "__ip:=127.0.0.1"]


def wait_until(condition, seconds=20):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _serve(command, port, uri):
    proc = subprocess.Popen(command, env=ros_env(uri), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up():
        assert proc.poll() is None, f"{command[0]} ended"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    wait_until(up)
    return proc


@pytest.fixture
def rosmaster():
    """Debian's rosmaster on a free port: its URI."""
    port = free_port()
    uri = f"http://127.0.0.1:{port}/"
    proc = _serve(["/usr/bin/python3", "/usr/bin/rosmaster", "--core", "-p", str(port)], port, uri)
    yield uri
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def udpros_master():
    """`udpros master` (the workspace's build, or UDPROS_BIN) on a free port: its URI."""
    binary = os.environ.get("UDPROS_BIN") or str(REPO / "target" / "debug" / "udpros")
    port = free_port()
    uri = f"http://127.0.0.1:{port}/"
    proc = _serve([binary, "master", "--host", "127.0.0.1", "--port", str(port)], port, uri)
    yield uri
    proc.terminate()
    proc.wait(timeout=10)
