//! Shared by the integration tests: finding the real ROS peers, and random messages.
#![allow(dead_code)]

pub mod random;

use std::path::PathBuf;
use std::process::Command;

/// Set by CI (`.ci/run`): a missing ROS peer is then a failure, never a skip.
pub const REQUIRE_INTEROP: &str = "UDPROS_REQUIRE_INTEROP";

/// The Python that has Debian's ROS packages (`UDPROS_ROS_PYTHON`, else `/usr/bin/python3`),
/// or `None` (after failing the test if interop is required) when genpy is missing.
pub fn ros_python() -> Option<PathBuf> {
    let python = std::env::var_os("UDPROS_ROS_PYTHON")
        .map_or_else(|| PathBuf::from("/usr/bin/python3"), PathBuf::from);
    let works = Command::new(&python)
        .args(["-c", "import genpy, rospy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        Some(python)
    } else {
        skip_or_fail("ROS Noetic's Python packages (genpy, rospy)");
        None
    }
}

/// Fails when interop is required; otherwise says what was skipped.
pub fn skip_or_fail(what: &str) {
    if std::env::var_os(REQUIRE_INTEROP).is_some_and(|v| v == "1") {
        panic!("{what} not found, and {REQUIRE_INTEROP}=1: install them (see .ci/run)");
    }
    eprintln!("SKIPPED: {what} not found (set {REQUIRE_INTEROP}=1 to make this a failure)");
}

/// A file under `tests/peers/`.
pub fn peer_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(name)
}

pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// A port that was free a moment ago, on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A child process killed (and reaped) when dropped, so no test leaves one behind.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Environment for ROS tools run by a test: its master, loopback only, and a private
/// ROS_HOME so parallel tests do not share log folders.
pub fn ros_env(cmd: &mut Command, master_uri: &str) {
    let home = std::env::temp_dir().join(format!("udpros-test-home-{}", std::process::id()));
    cmd.env("ROS_MASTER_URI", master_uri)
        .env("ROS_IP", "127.0.0.1")
        .env_remove("ROS_HOSTNAME")
        .env_remove("ROS_NAMESPACE")
        .env("ROS_HOME", home)
        .env("PYTHONUNBUFFERED", "1");
}

/// Starts Debian's `rosmaster` on a free port; `None` (or a failure when interop is
/// required) when ROS is not installed.
pub fn start_rosmaster() -> Option<(Child, String)> {
    let python = ros_python()?;
    let port = free_port();
    let uri = format!("http://127.0.0.1:{port}/");
    let mut cmd = Command::new(python);
    cmd.args(["/usr/bin/rosmaster", "--core", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    ros_env(&mut cmd, &uri);
    let child = Child(cmd.spawn().expect("start rosmaster"));
    wait_for(std::time::Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .then_some(())
    .expect("rosmaster did not start listening");
    Some((child, uri))
}

/// Polls `ready` until it holds or `limit` passes; returns whether it held.
pub fn wait_for(limit: std::time::Duration, mut ready: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if ready() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    ready()
}
