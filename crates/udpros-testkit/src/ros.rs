//! The stock ROS peers: `rosmaster`, the Python tools, bags, `dynparam`, the roscpp
//! programs built on demand and genpy's service classes.

use super::{
    cpp_peer, free_port, peer_script, ros_python, skip_or_fail, spawn_lines, wait_for, Child, Lines,
};
use std::path::{Path, PathBuf};
use std::process::Command;

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
        .stderr(std::process::Stdio::piped());
    ros_env(&mut cmd, &uri);
    let mut child = Child(cmd.spawn().expect("start rosmaster"));
    if let Some(stderr) = child.0.stderr.take() {
        let _ = keep_last_words(format!("rosmaster on port {port}"), stderr);
    }
    // Listening on the port is not enough: the master must still run (a rosmaster that
    // could not bind exits, while someone else may answer on that port).
    let listening = wait_for(std::time::Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let running = matches!(child.0.try_wait(), Ok(None));
    assert!(
        listening && running,
        "rosmaster did not start on port {port}"
    );
    Some((child, uri))
}

/// Reads what `who` writes to `stderr` (a quiet process writes nothing there) and, when it
/// ends, prints the last of it into the test's output: a master that dies mid-test says
/// why beside the failure it causes. Keeps at most [`LAST_WORDS`] lines, which the
/// returned thread gives back.
fn keep_last_words(
    who: String,
    stderr: impl std::io::Read + Send + 'static,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut last = std::collections::VecDeque::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if last.len() == LAST_WORDS {
                last.pop_front();
            }
            last.push_back(line);
        }
        let words: Vec<String> = last.into();
        if !words.is_empty() {
            eprintln!(
                "{who} wrote to stderr before it ended:\n{}",
                words.join("\n")
            );
        }
        words
    })
}

/// Lines of a peer's stderr [`keep_last_words`] keeps.
const LAST_WORDS: usize = 40;

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

/// The roscpp actionlib peer (`peers/roscpp_action_peer.cpp`: a simple server and a simple
/// client of actionlib's Test action), built as [`roscpp_peer`] is.
pub fn roscpp_action_peer() -> Option<PathBuf> {
    let packages = ["roscpp", "actionlib"];
    let source = peer_script("roscpp_action_peer.cpp");
    let built = cpp_peer::build_once(&source, "roscpp_action_peer", &packages);
    built
        .map_err(|e| skip_cpp_peer("roscpp_action_peer", &packages, e))
        .ok()
}

/// Generates the Python classes of the services `srvs` (`(name, .srv text)`) of
/// `package` with genpy into `root`, as catkin would; put `root` on `PYTHONPATH`.
pub fn genpy_services(python: &Path, root: &Path, package: &str, srvs: &[(&str, &str)]) {
    genpy_generate(python, root, package, "srv", srvs);
}

/// Generates the Python classes of the messages `msgs` (`(name, .msg text)`) of `package`
/// with genpy into `root`, as catkin would; put `root` on `PYTHONPATH`.
pub fn genpy_messages(python: &Path, root: &Path, package: &str, msgs: &[(&str, &str)]) {
    genpy_generate(python, root, package, "msg", msgs);
}

fn genpy_generate(python: &Path, root: &Path, package: &str, kind: &str, items: &[(&str, &str)]) {
    let sources = root.join(format!("{kind}-sources"));
    std::fs::create_dir_all(&sources).expect("source folder");
    let mut cmd = Command::new(python);
    cmd.arg(peer_script("genpy_gen.py")).arg(root).arg(package);
    for (name, text) in items {
        let file = sources.join(format!("{name}.{kind}"));
        std::fs::write(&file, text).expect("write the definition");
        cmd.arg(file);
    }
    let out = cmd.output().expect("run genpy_gen.py");
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

/// A ROS package folder `dir/name` holding `binaries` (`(node type, executable)`, linked),
/// as roslaunch and rosrun find nodes; put `dir` on `ROS_PACKAGE_PATH`.
pub fn ros_package(dir: &Path, name: &str, binaries: &[(&str, &str)]) -> PathBuf {
    let pkg = dir.join(name);
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.xml"),
        format!(
            r#"<?xml version="1.0"?>
<package format="2">
  <name>{name}</name>
  <version>0.1.0</version>
  <description>udpros nodes (test package)</description>
  <maintainer email="dev@example.com">udpros</maintainer>
  <license>MIT</license>
  <buildtool_depend>catkin</buildtool_depend>
</package>
"#
        ),
    )
    .unwrap();
    for (node_type, path) in binaries {
        let link = pkg.join(node_type);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(path, link).unwrap();
    }
    pkg
}

/// roslaunch, stopped with SIGINT so it stops its nodes (a kill would orphan them), also
/// when a test fails.
pub struct Launched(pub Child);

impl Launched {
    /// Stops roslaunch (and so its nodes); whether it ended within 20 s.
    pub fn stop(&mut self) -> bool {
        let child = &mut self.0 .0;
        if child.try_wait().ok().flatten().is_some() {
            return true;
        }
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        crate::wait_for(std::time::Duration::from_secs(20), || {
            child.try_wait().ok().flatten().is_some()
        })
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that fails says why, and only its last lines are kept.
    #[test]
    fn a_peer_that_dies_leaves_its_last_words() {
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "for i in $(seq 1 100); do echo line $i >&2; done; exit 3",
            ])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let words = keep_last_words("sh".into(), child.stderr.take().unwrap());
        assert!(!child.wait().unwrap().success());
        let words = words.join().unwrap();
        assert_eq!(words.len(), LAST_WORDS);
        assert_eq!(words.last().map(String::as_str), Some("line 100"));
    }
}
