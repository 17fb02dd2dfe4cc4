//! udpros's test kit, shared by the workspace's integration tests and the bench: the real
//! ROS peers (the roscpp programs built on demand, the rospy, genpy, brping and pymavlink
//! scripts in `peers/`), free ports, a stock `rosmaster`, child processes that die with the
//! test, lines read with deadlines, and random messages. Not published.

#![warn(missing_docs, unreachable_pub)]

pub mod cpp_peer;
pub mod netns;
mod nodes;
mod process;
pub mod random;
mod ros;
pub mod spoof;

pub use nodes::*;
pub use process::*;
pub use ros::*;

use std::path::{Path, PathBuf};
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

/// Fails when interop is required; otherwise says what was skipped, where cargo shows it
/// even for a passing test, and records it for the summary that ends `cargo test`
/// ([`skipped_this_run`]).
pub fn skip_or_fail(what: &str) {
    if std::env::var_os(REQUIRE_INTEROP).is_some_and(|v| v == "1") {
        panic!("{what} not found, and {REQUIRE_INTEROP}=1: install them (see .ci/run)");
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let binary = std::env::args()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        // Cargo names test binaries `<target>-<hash>`.
        .map(|name| match name.rsplit_once('-') {
            Some((target, hash)) if hash.len() == 16 => target.to_string(),
            _ => name,
        })
        .unwrap_or_default();
    // Written to the descriptor, not through eprintln!, which the test harness captures and
    // shows only for failing tests.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {what} not found (set {REQUIRE_INTEROP}=1 to make this a failure)"
    );
    let dir = skips_dir();
    if std::fs::create_dir_all(&dir).is_ok() {
        let file = dir.join(format!("{}.txt", std::process::id()));
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
        {
            // One write per line: tests on other threads append to the same file.
            let _ = f.write_all(format!("{binary} {test}: {what} not found\n").as_bytes());
        }
    }
}

/// Where skipped tests are recorded until the summary reads them.
fn skips_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
        .join("udpros-skipped")
}

/// The repository's root (the workspace this kit belongs to).
fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The tests skipped since the last summary, one line each (test binary, test, what was
/// missing); reading them clears the record, so each run's summary shows that run.
pub fn skipped_this_run() -> Vec<String> {
    let dir = skips_dir();
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            lines.extend(text.lines().map(str::to_string));
        }
        let _ = std::fs::remove_file(entry.path());
    }
    lines.sort();
    lines
}

/// A file under the test kit's `peers/`.
pub fn peer_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("peers")
        .join(name)
}

/// Lower-case hex, two digits a byte (the peers' scripts exchange bytes so).
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lower- or upper-case hex (a test's own data; panics on bad hex).
pub fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// A port that was free a moment ago, on every address, for a test to hand to a server
/// it starts (a rosmaster, a node's fixed port).
///
/// Taken below the kernel's ephemeral range (32768 and up on Linux), from a counter that
/// starts at a place derived from this process: a port the kernel chose (`bind(0)`, the
/// local end of an outgoing connection) can be handed out again to anyone the moment it is
/// released, so a server started on one sometimes found it taken by a parallel test's
/// node and the test talked to the wrong process.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7919) % SPAN,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..SPAN {
        let port = (FIRST + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        let tcp = std::net::TcpListener::bind(("0.0.0.0", port)).is_ok();
        if tcp && std::net::UdpSocket::bind(("0.0.0.0", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {FIRST}..{}", FIRST + SPAN)
}

/// The folder the workspace's programs are built into (`target/debug` or
/// `target/release`), with all of them current: its binaries (`udpros`, the custom-message
/// package's talker and action programs) and its `examples/`.
///
/// Built once per test process by `cargo build --all-targets` at the workspace's root: the
/// same packages and targets `cargo test --all-targets` selects, so the same features, and
/// every library it compiled is reused; only binaries are linked. (A `cargo build -p`
/// of one package resolves features for that package alone and compiles the workspace's
/// libraries again: four such builds were five minutes of CI inside the examples' tests.)
/// Built every time rather than when missing: binaries left from an older tree would test
/// old code.
pub fn workspace_programs() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let deps = std::env::current_exe().expect("test binary");
            let profile = deps
                .parent()
                .and_then(|d| d.parent())
                .expect("target/<profile>")
                .to_path_buf();
            let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
            let mut build = Command::new(env!("CARGO"));
            build
                .args(["build", "--all-targets", "--manifest-path"])
                .arg(manifest);
            // Without what cargo set for this test's run (the package's `CARGO_PKG_*`,
            // `OUT_DIR`, ...): build scripts that watch those (ring's does) would see them
            // changed since `cargo test` ran them, and compile their crates again.
            for (name, _) in std::env::vars_os() {
                let name = name.to_string_lossy();
                if name.starts_with("CARGO_PKG_")
                    || name.starts_with("CARGO_MANIFEST_")
                    || [
                        "OUT_DIR",
                        "CARGO_CRATE_NAME",
                        "CARGO_BIN_NAME",
                        "CARGO_PRIMARY_PACKAGE",
                        "CARGO_TARGET_TMPDIR",
                        "CARGO_RUSTC_CURRENT_DIR",
                    ]
                    .contains(&name.as_ref())
                {
                    build.env_remove(name.as_ref());
                }
            }
            if profile.file_name().is_some_and(|name| name == "release") {
                build.arg("--release");
            }
            let built = build.status().is_ok_and(|s| s.success());
            assert!(built, "cargo build --all-targets");
            profile
        })
        .clone()
}

/// A program of the workspace's `examples/`, current ([`workspace_programs`]).
pub fn example(name: &str) -> PathBuf {
    workspace_programs().join("examples").join(name)
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

/// The Python of the project's venv with PyPI test peers (`bluerobotics-ping==0.1.5`, ...):
/// `UDPROS_VENV_PYTHON`, else `.venv/bin/python` at the repository's root (where the README
/// and `.ci/run` make it).
pub fn venv_python(module: &str) -> Option<PathBuf> {
    let python = std::env::var_os("UDPROS_VENV_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    let works = Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        Some(python)
    } else {
        skip_or_fail(&format!(
            "the Python module {module} (in .venv, see .ci/run)"
        ));
        None
    }
}
