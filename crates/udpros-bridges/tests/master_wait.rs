//! A bridge started before its master waits for it, as roscpp and rospy nodes do (a
//! companion computer's services start in any order): it says so in a line, and comes
//! up when the master does. With `UDPROS_MASTER_WAIT` it gives up after that long, in one
//! line, exit status 1.

use udpros_testkit as common;

use common::registered;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use udpros::master::Master;

fn ping_sonar(master: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ping_sonar"));
    cmd.args(["_device:=sim:ping1d", "__name:=early_sonar"])
        .env("ROS_MASTER_URI", master)
        .env("ROS_IP", "127.0.0.1")
        .env_remove("ROS_HOSTNAME")
        .env_remove("UDPROS_MASTER_WAIT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_started_before_its_master_waits_and_comes_up_with_it() {
    let port = common::free_port();
    let uri = format!("http://127.0.0.1:{port}/");
    let mut sonar = common::Child(ping_sonar(&uri).spawn().unwrap());
    // Two seconds with no master: the bridge is still there, waiting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        sonar.0.try_wait().unwrap().is_none(),
        "the bridge did not wait for its master"
    );
    let master = Master::start(format!("127.0.0.1:{port}").parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !registered(master.uri(), "/early_sonar").await {
        assert!(Instant::now() < deadline, "the bridge never came up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = sonar.0.kill();
    let mut stderr = String::new();
    sonar
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let waiting: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("waiting for it"))
        .collect();
    assert_eq!(waiting.len(), 1, "said once, not per retry: {stderr}");
    assert!(waiting[0].contains(&uri), "{stderr}");
    assert!(stderr.contains("answered after"), "{stderr}");
}

#[test]
fn with_a_limit_a_bridge_gives_up_in_one_line() {
    let port = common::free_port();
    let uri = format!("http://127.0.0.1:{port}/");
    let started = Instant::now();
    let out = ping_sonar(&uri)
        .env("UDPROS_MASTER_WAIT", "1.5")
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        took >= Duration::from_millis(1500),
        "gave up after {took:?}"
    );
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.contains("cannot reach the master"), "{stderr}");

    let out = ping_sonar(&uri)
        .env("UDPROS_MASTER_WAIT", "soon")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("UDPROS_MASTER_WAIT=\"soon\""), "{stderr}");
}
