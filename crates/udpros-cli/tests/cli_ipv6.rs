//! IPv6 on `::1`, as ROS users set it up (`ROS_IPV6=on ROS_IP=::1`, a master at
//! `http://[::1]:PORT/`): a stock rosmaster with udpros and rospy programs both ways, and
//! `udpros master` serving rosparam over IPv6.

use udpros_testkit as common;

use common::{free_port, wait_for, Child};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The IPv6 loopback ROS environment, for any program.
fn v6_env(cmd: &mut Command, master_uri: &str) {
    let home = std::env::temp_dir().join(format!("udpros-test-home-{}", std::process::id()));
    cmd.env("ROS_MASTER_URI", master_uri)
        .env("ROS_IPV6", "on")
        .env("ROS_IP", "::1")
        .env_remove("ROS_HOSTNAME")
        .env_remove("ROS_NAMESPACE")
        .env("ROS_HOME", home)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null());
}

fn udpros(uri: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.args(args);
    v6_env(&mut cmd, uri);
    cmd
}

fn ros(python: &std::path::Path, uri: &str, tool: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(python);
    cmd.arg(format!("/usr/bin/{tool}")).args(args);
    v6_env(&mut cmd, uri);
    cmd
}

fn listening_v6(port: u16) -> bool {
    wait_for(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("::1", port)).is_ok()
    })
}

/// Runs `cmd` to its end (60 s at most); its standard output.
fn output(mut cmd: Command) -> String {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Child(child);
    let started = std::time::Instant::now();
    while child.0.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.0.kill();
    let mut out = String::new();
    use std::io::Read;
    if let Some(mut stdout) = child.0.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    out
}

#[test]
fn udpros_and_rospy_talk_over_ipv6_loopback() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let port = free_port();
    let uri = format!("http://[::1]:{port}/");
    let mut master = ros(
        &python,
        &uri,
        "rosmaster",
        &["--core", "-p", &port.to_string()],
    );
    let _master = Child(
        master
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(listening_v6(port), "rosmaster on [::1]");

    // udpros publishes, rostopic hears it.
    let mut talker = udpros(
        &uri,
        &[
            "topic",
            "pub",
            "-r",
            "10",
            "/v6",
            "std_msgs/String",
            "data: from udpros",
        ],
    );
    let _talker = Child(talker.stdout(Stdio::null()).spawn().unwrap());
    let heard = output(ros(
        &python,
        &uri,
        "rostopic",
        &["echo", "-n", "1", "/v6/data"],
    ));
    assert_eq!(heard, "\"from udpros\"\n---\n");

    // rospy publishes, udpros hears it.
    let mut rospy = ros(
        &python,
        &uri,
        "rostopic",
        &[
            "pub",
            "-r",
            "10",
            "/v6r",
            "std_msgs/String",
            "data: from rospy",
        ],
    );
    let _rospy = Child(rospy.stdout(Stdio::null()).spawn().unwrap());
    let heard = output(udpros(&uri, &["topic", "echo", "-n", "1", "/v6r"]));
    assert_eq!(heard, "data: \"from rospy\"\n---\n");
}

#[test]
fn udpros_master_serves_ros_tools_over_ipv6() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let port = free_port();
    let uri = format!("http://[::1]:{port}/");
    let mut master = udpros(&uri, &["master", "--port", &port.to_string()]);
    let _master = Child(master.stdout(Stdio::null()).spawn().unwrap());
    assert!(listening_v6(port), "udpros master on [::1]");
    let got = output(ros(&python, &uri, "rosparam", &["get", "/rosdistro"]));
    assert_eq!(got.trim(), "'noetic\n\n  '");
    let nodes = output(ros(&python, &uri, "rosnode", &["list"]));
    assert!(nodes.lines().any(|l| l == "/rosout"), "{nodes}");
}

#[test]
fn udpros_peers_use_udpros_over_ipv6() {
    let port = free_port();
    let uri = format!("http://[::1]:{port}/");
    let mut master = udpros(&uri, &["master", "--port", &port.to_string()]);
    let _master = Child(master.stdout(Stdio::null()).spawn().unwrap());
    assert!(listening_v6(port), "udpros master on [::1]");
    let mut talker = udpros(
        &uri,
        &[
            "topic",
            "pub",
            "-r",
            "20",
            "/v6u",
            "std_msgs/String",
            "data: over UDPROS",
        ],
    );
    let _talker = Child(talker.stdout(Stdio::null()).spawn().unwrap());
    // UDP only: nothing arrives unless the UDPROS link works over IPv6.
    let heard = output(udpros(
        &uri,
        &["topic", "echo", "--transport", "udp", "-n", "1", "/v6u"],
    ));
    assert_eq!(heard, "data: \"over UDPROS\"\n---\n");
}
