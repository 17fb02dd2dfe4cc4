"""What the tests share: free ports, a master (Debian's rosmaster, or `udpros master` where
ROS is not installed) and ROS's environment for the processes they start."""

import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# A run started in the background by a script (`cmd &`, no job control) inherits SIGINT
# ignored, and so would every process the tests start: a Python that starts with SIGINT
# ignored installs no KeyboardInterrupt handler, and the Ctrl-C tests' nodes would wait
# on forever. A handler here is reset to the default in each child when it starts.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


def node_script(script, uri):
    """`script` (Python source) run by this interpreter with the remappings that put its
    node on `uri`, in `sys.argv[1:]`; its stdout and stderr piped, as text."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *node_args(uri)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_line(proc, seconds=30):
    """The next line `proc` prints, stripped; after `seconds` without one, `proc` is killed
    and the test fails, so that a child that hangs cannot hang the suite."""
    line = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    if reader.is_alive():
        proc.kill()
        reader.join(10)
        raise AssertionError(f"no line from {proc.args} in {seconds} s")
    return line[0].strip()


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


class Running:
    """A process the test started, its output read line by line on a thread."""

    def __init__(self, command, env):
        import queue
        import threading

        self.command = command
        self.proc = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.lines = queue.Queue()
        self.seen = []

        def read():
            for line in self.proc.stdout:
                self.lines.put(line.rstrip("\n"))
            self.lines.put(None)

        threading.Thread(target=read, daemon=True).start()

    def expect(self, prefix, seconds=30):
        """The next line that starts with `prefix` (the ones before it are kept in `seen`)."""
        import queue

        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"{self.command[:3]}: no {prefix!r} line in {seconds} s; saw {self.seen[-5:]}"
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, f"{self.command[:3]} ended without a {prefix!r} line; saw {self.seen[-5:]}"
            self.seen.append(line)
            if line.startswith(prefix):
                return line

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def run():
    """Starts processes (`run(command, env)`) and stops them after the test."""
    started = []

    def start(command, env):
        running = Running(command, env)
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()


@pytest.fixture(scope="session")
def roscpp_peer():
    """The roscpp test peer (crates/udpros-testkit/peers/roscpp_peer.cpp), built with g++ and
    pkg-config as the Rust tests build it, unless a build newer than its source is there."""
    source = REPO / "crates" / "udpros-testkit" / "peers" / "roscpp_peer.cpp"
    out = REPO / "target" / "py-peers"
    binary = out / "roscpp_peer"
    if binary.exists() and binary.stat().st_mtime >= source.stat().st_mtime:
        return binary
    out.mkdir(parents=True, exist_ok=True)
    packages = ["roscpp", "std_msgs"]
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", *packages], check=True, capture_output=True, text=True)
    partial = out / f"roscpp_peer.partial.{os.getpid()}"
    subprocess.run(["g++", "-O2", "-std=c++17", "-o", str(partial), str(source), *flags.stdout.split()], check=True)
    partial.rename(binary)
    return binary
