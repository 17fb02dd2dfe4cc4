//! udpros's test kit, shared by the workspace's integration tests and the bench: the real
//! ROS peers (the roscpp programs built on demand, the rospy, genpy, brping and pymavlink
//! scripts in `peers/`), free ports, a stock `rosmaster`, child processes that die with the
//! test, lines read with deadlines, and random messages. Not published.

#![warn(missing_docs, unreachable_pub)]

pub mod cpp_peer;
pub mod netns;
pub mod random;

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

/// A program of the workspace's `examples/`, built by `cargo test --all-targets` (or here,
/// when missing), beside the test binary that asks.
pub fn example(name: &str) -> PathBuf {
    let deps = std::env::current_exe().expect("test binary");
    let profile = deps
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    let binary = profile.join("examples").join(name);
    if !binary.exists() {
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
        let built = Command::new(env!("CARGO"))
            .args(["build", "--examples", "--manifest-path"])
            .arg(manifest)
            .status()
            .is_ok_and(|s| s.success());
        assert!(built, "cargo build --examples");
    }
    binary
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

/// The roscpp test peer (`peers/roscpp_peer.cpp`), compiled once into the target folder
/// with g++ and pkg-config; `None` (or a failure when interop is required) when roscpp's
/// headers are missing.
pub fn roscpp_peer() -> Option<PathBuf> {
    let packages = ["roscpp", "std_msgs"];
    let built = cpp_peer::build_once(&peer_script("roscpp_peer.cpp"), "roscpp_peer", &packages);
    built
        .map_err(|e| skip_cpp_peer("roscpp_peer", &packages, e))
        .ok()
}

/// The bench's roscpp peer (`peers/roscpp_bench.cpp`: sensor_msgs/CompressedImage of any
/// size, `SUB received=..` when done), built as [`roscpp_peer`] is.
pub fn roscpp_bench_peer() -> Option<PathBuf> {
    let packages = ["roscpp", "sensor_msgs"];
    let built = cpp_peer::build_once(&peer_script("roscpp_bench.cpp"), "roscpp_bench", &packages);
    built
        .map_err(|e| skip_cpp_peer("roscpp_bench", &packages, e))
        .ok()
}

/// The roscpp service peer (`peers/roscpp_service_peer.cpp`: std_srvs/SetBool and
/// udpros_test/Blob servers and clients), built as [`roscpp_peer`] is.
pub fn roscpp_service_peer() -> Option<PathBuf> {
    let packages = ["roscpp", "std_msgs", "std_srvs"];
    let source = peer_script("roscpp_service_peer.cpp");
    let built = cpp_peer::build_once(&source, "roscpp_service_peer", &packages);
    built
        .map_err(|e| skip_cpp_peer("roscpp_service_peer", &packages, e))
        .ok()
}

/// Generates the Python classes of the services `srvs` (`(name, .srv text)`) of
/// `package` with genpy into `root`, as catkin would; put `root` on `PYTHONPATH`.
pub fn genpy_services(python: &Path, root: &Path, package: &str, srvs: &[(&str, &str)]) {
    let sources = root.join("srv-sources");
    std::fs::create_dir_all(&sources).expect("srv source folder");
    let mut cmd = Command::new(python);
    cmd.arg(peer_script("genpy_srv.py")).arg(root).arg(package);
    for (name, text) in srvs {
        let file = sources.join(format!("{name}.srv"));
        std::fs::write(&file, text).expect("write .srv");
        cmd.arg(file);
    }
    let out = cmd.output().expect("run genpy_srv.py");
    assert!(
        out.status.success(),
        "genpy could not generate {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn skip_cpp_peer(name: &str, packages: &[&str], error: String) {
    eprintln!("{name}: {error}");
    skip_or_fail(&format!(
        "roscpp development files for {name} ({}) and g++",
        packages.join(", ")
    ));
}

/// A ROS command-line tool (`rostopic`, `rosnode`, `rosparam`, ...) run with the ROS Python
/// against `master_uri`.
pub fn ros_tool(python: &std::path::Path, tool: &str, master_uri: &str) -> Command {
    let mut cmd = Command::new(python);
    cmd.arg(format!("/usr/bin/{tool}"));
    ros_env(&mut cmd, master_uri);
    cmd
}

/// Lines a child prints, read on a thread so a test can wait for them with a deadline.
pub struct Lines {
    rx: std::sync::mpsc::Receiver<(String, std::time::Instant)>,
    /// Every line read so far, in order.
    pub seen: Vec<String>,
    /// When each line of `seen` was read, as the reading thread saw it.
    pub arrived: Vec<std::time::Instant>,
}

impl Lines {
    /// Starts reading `out` (a child's stdout or stderr) on a thread.
    pub fn new(out: impl std::io::Read + Send + 'static) -> Lines {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send((line, std::time::Instant::now())).is_err() {
                    break;
                }
            }
        });
        Lines {
            rx,
            seen: Vec::new(),
            arrived: Vec::new(),
        }
    }

    /// Waits until a line matches, up to `limit`; returns it.
    pub fn wait_for(
        &mut self,
        limit: std::time::Duration,
        matches: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((line, at)) => {
                    self.seen.push(line.clone());
                    self.arrived.push(at);
                    if matches(&line) {
                        return Some(line);
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Waits for `n` matching lines in all; returns how many were seen.
    pub fn count(
        &mut self,
        n: usize,
        limit: std::time::Duration,
        matches: impl Fn(&str) -> bool,
    ) -> usize {
        let deadline = std::time::Instant::now() + limit;
        let mut found = self.seen.iter().filter(|l| matches(l)).count();
        while found < n {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if self.wait_for(left, &matches).is_none() {
                break;
            }
            found += 1;
        }
        found
    }

    /// Everything the child printed until it exits (or `limit` passes).
    pub fn rest(&mut self, limit: std::time::Duration) -> String {
        let deadline = std::time::Instant::now() + limit;
        while let Ok((line, at)) = self
            .rx
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
        {
            self.seen.push(line);
            self.arrived.push(at);
        }
        self.seen.join("\n")
    }
}

/// Spawns `cmd` with stdout piped into [`Lines`], stderr inherited (shown on failure).
pub fn spawn_lines(mut cmd: Command) -> (Child, Lines) {
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn");
    let out = child.stdout.take().expect("stdout");
    (Child(child), Lines::new(out))
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

/// A udpros node named `name` on `master`, on loopback.
pub async fn node(master: &str, name: &str) -> udpros::node::Node {
    let args = [
        format!("__master:={master}"),
        "__ip:=127.0.0.1".to_string(),
        format!("__name:={name}"),
    ];
    udpros::node::Node::new(name, args)
        .await
        .expect("node starts")
}

/// Publishes `message` every `period` on the current runtime until the returned task is
/// aborted or the node shuts down: what a test runs while a ROS tool or peer listens.
pub fn publish_every<M: udpros::msg::Message + Send + Sync + 'static>(
    publisher: udpros::node::Publisher<M>,
    message: M,
    period: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while publisher.publish(&message).is_ok() {
            tokio::time::sleep(period).await;
        }
    })
}

/// Runs `program args` against `master` with a 5 s limit; its output and how long it took.
pub fn run_briefly(
    program: &str,
    master: &str,
    args: &[String],
) -> (std::process::Output, std::time::Duration) {
    let started = std::time::Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .env("ROS_MASTER_URI", master)
        .env("ROS_IP", "127.0.0.1")
        .env_remove("ROS_HOSTNAME")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    while started.elapsed() < std::time::Duration::from_secs(5) {
        if child.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    (child.wait_with_output().expect("output"), started.elapsed())
}

/// Asserts that `program args` fails with status 1 and one line on stderr that mentions
/// `mentions`, within 5 s and without a panic.
pub fn assert_one_line_failure(program: &str, master: &str, args: &[String], mentions: &str) {
    let (out, took) = run_briefly(program, master, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    println!("{args:?} -> {:?} in {took:?}: {stderr}", out.status.code());
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(lines.len(), 1, "{args:?}: one line, got {stderr}");
    assert!(lines[0].contains(mentions), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

/// One bad invocation: the program, its arguments, and what its one line must mention.
pub type BadCase = (&'static str, Vec<&'static str>, &'static str);

/// [`assert_one_line_failure`] for each case against `master`, each run as a node of its
/// own name (private parameters stay on the master between runs). Blocking: call it from
/// `spawn_blocking` in async tests.
pub fn assert_each_fails_in_one_line(master: &str, cases: Vec<BadCase>) {
    for (i, (program, args, mentions)) in cases.into_iter().enumerate() {
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(format!("__name:=bad_input_{i}"));
        assert_one_line_failure(program, master, &args, mentions);
    }
}

/// Records `topics` into the bag `path` with Debian's `rosbag record`, which stops by itself
/// after `seconds` (its `--duration`); the caller publishes meanwhile. Panics if no bag was
/// written.
pub fn record_bag(python: &Path, master_uri: &str, path: &Path, topics: &[&str], seconds: u32) {
    let mut cmd = ros_tool(python, "rosbag", master_uri);
    cmd.args(["record", "-O"])
        .arg(path)
        .arg(format!("--duration={seconds}"))
        .args(topics)
        .stdout(std::process::Stdio::null());
    let status = cmd.status().expect("run rosbag record");
    assert!(status.success(), "rosbag record failed: {status}");
    assert!(path.exists(), "rosbag record wrote no {}", path.display());
}

/// `rosbag play --clock` of `bag` as the node `/player` (its `pause_playback` service is
/// `/player/pause_playback`), with `extra` options such as `--pause` or `-l`.
pub fn play_bag(python: &Path, master_uri: &str, bag: &Path, extra: &[&str]) -> Child {
    let mut cmd = ros_tool(python, "rosbag", master_uri);
    cmd.args(["play", "--clock", "--quiet"])
        .args(extra)
        .arg(bag)
        .arg("__name:=player")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    Child(cmd.spawn().expect("run rosbag play"))
}

/// `/clock` published from `node` as a simulator publishes it: `start` first, then at wall
/// speed, every 10 ms, until the task is aborted. Also gives the simulated time now.
pub async fn simulated_clock(
    node: &udpros::node::Node,
    start: udpros::msg::Time,
) -> (
    tokio::task::JoinHandle<()>,
    impl Fn() -> udpros::msg::Time + Clone + Send + 'static,
) {
    use udpros::msgs::rosgraph_msgs::Clock;
    let clock = node
        .advertise::<Clock>("/clock", Default::default())
        .await
        .expect("advertise /clock");
    let started = std::time::Instant::now();
    let now = move || start + started.elapsed().into();
    let ticking = tokio::spawn(async move {
        loop {
            let _ = clock.publish(&Clock { clock: now() });
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    });
    (ticking, now)
}

/// Debian's `dynparam`, which needs a `dynamic_reconfigure` package on ROS_PACKAGE_PATH
/// that Debian does not install, and which can spin after SIGTERM: killed after 60 s.
pub struct Dynparam {
    python: std::path::PathBuf,
    uri: String,
    stub: std::path::PathBuf,
}

impl Dynparam {
    /// `dynparam` against `uri`, with a stub package of its own named after `name`.
    pub fn new(python: &std::path::Path, uri: &str, name: &str) -> Dynparam {
        let stub =
            std::env::temp_dir().join(format!("udpros-dynparam-{}-{name}", std::process::id()));
        let pkg = stub.join("dynamic_reconfigure");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(
            pkg.join("package.xml"),
            "<package format=\"2\"><name>dynamic_reconfigure</name><version>1.7.3</version>\
             <description>stub</description><maintainer email=\"dev@example.com\">udpros</maintainer>\
             <license>BSD</license></package>\n",
        )
        .unwrap();
        Dynparam {
            python: python.to_path_buf(),
            uri: uri.to_string(),
            stub,
        }
    }

    /// Runs `dynparam ARGS`; panics with its output if it fails. Its standard output.
    pub fn run(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("timeout");
        cmd.args(["-s", "KILL", "60"])
            .arg(&self.python)
            .arg("/usr/lib/dynamic_reconfigure/dynparam")
            .args(args);
        ros_env(&mut cmd, &self.uri);
        cmd.env(
            "ROS_PACKAGE_PATH",
            format!("{}:/usr/share", self.stub.display()),
        );
        let out = cmd.stdin(std::process::Stdio::null()).output().unwrap();
        assert!(
            out.status.success(),
            "dynparam {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }
}

impl Drop for Dynparam {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.stub);
    }
}

/// `peers/reconfigure_peer.py ARGS` (a dynamic_reconfigure server, client or describer)
/// against `uri`, its lines read as they come.
pub fn reconfigure_peer(python: &Path, uri: &str, args: &[&str]) -> (Child, Lines) {
    let mut cmd = Command::new(python);
    cmd.arg(peer_script("reconfigure_peer.py")).args(args);
    ros_env(&mut cmd, uri);
    spawn_lines(cmd)
}
