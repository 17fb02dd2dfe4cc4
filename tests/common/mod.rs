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
