//! Bad values from a user: one clear line on stderr and exit status 1 within 5 s, never a
//! panic or a silent hang; and a device that never answers is said once, not forever.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use udpros::master::Master;

/// Runs `program args` against `master` with a 5 s limit; its output and how long it took.
fn run_briefly(program: &str, master: &str, args: &[String]) -> (Output, Duration) {
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .env("ROS_MASTER_URI", master)
        .env("ROS_IP", "127.0.0.1")
        .env_remove("ROS_HOSTNAME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    while started.elapsed() < Duration::from_secs(5) {
        if child.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    (child.wait_with_output().expect("output"), started.elapsed())
}

fn assert_one_line_failure(program: &str, master: &str, args: &[String], mentions: &str) {
    let (out, took) = run_briefly(program, master, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    println!("{args:?} -> {:?} in {took:?}: {stderr}", out.status.code());
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(lines.len(), 1, "{args:?}: one line, got {stderr}");
    assert!(lines[0].contains(mentions), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_rates_and_parameters_are_one_line_and_exit_1() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            env!("CARGO_BIN_EXE_udpros"),
            vec!["topic", "pub", "-r", "inf", "/x", "std_msgs/String"],
            "--rate",
        ),
        (
            env!("CARGO_BIN_EXE_udpros"),
            vec!["topic", "pub", "-r", "1e12", "/x", "std_msgs/String"],
            "--rate",
        ),
        (
            env!("CARGO_BIN_EXE_udpros"),
            vec![
                "topic",
                "pub",
                "-r",
                "0",
                "-n",
                "3",
                "/x",
                "std_msgs/String",
            ],
            "--rate",
        ),
        (
            env!("CARGO_BIN_EXE_udpros"),
            vec![
                "topic",
                "pub",
                "-r",
                "nan",
                "-n",
                "3",
                "/x",
                "std_msgs/String",
            ],
            "--rate",
        ),
        (
            env!("CARGO_BIN_EXE_udpros"),
            vec!["topic", "pub", "-r", "-5", "/x", "std_msgs/String"],
            "--rate",
        ),
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_speed_of_sound:=0"],
            "~speed_of_sound",
        ),
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_range:=-1"],
            "~range",
        ),
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_min_confidence:=5"],
            "~min_confidence",
        ),
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_ping_interval:=0"],
            "~ping_interval",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_timeout:=0"],
            "~timeout",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_fit/quantile:=5"],
            "~fit/quantile",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_timesync_rate:=-1"],
            "~timesync_rate",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_sim/jitter:=.nan"],
            "~sim/jitter",
        ),
    ];
    for (i, (program, mut args, mentions)) in cases.into_iter().enumerate() {
        // Private parameters stay on the master: each run is its own node.
        let name = format!("__name:=bad_input_{i}");
        args.push(&name);
        let (uri, args): (String, Vec<String>) =
            (uri.clone(), args.iter().map(|a| a.to_string()).collect());
        tokio::task::spawn_blocking(move || {
            assert_one_line_failure(program, &uri, &args, mentions)
        })
        .await
        .unwrap();
    }
}

/// `__name:=` and other ROS arguments are the tool's node's, not clap's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_pub_takes_ros_arguments() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let mut child = common::Child(
        Command::new(env!("CARGO_BIN_EXE_udpros"))
            .args([
                "topic",
                "pub",
                "-r",
                "2",
                "chatter",
                "std_msgs/String",
                "data: hi",
                "__name:=named_pub",
                "chatter:=/renamed",
            ])
            .env("ROS_MASTER_URI", &uri)
            .env("ROS_IP", "127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let client = udpros::xmlrpc::XmlRpcClient::new(Duration::from_secs(2), Duration::from_secs(2));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut state = String::new();
    while Instant::now() < deadline {
        let reply = client
            .call(
                &uri,
                "getSystemState",
                vec![udpros::xmlrpc::Value::from("/t")],
            )
            .await
            .unwrap();
        state = format!("{reply:?}");
        if state.contains("/named_pub") && state.contains("/renamed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(child.0.try_wait().unwrap().is_none(), "still publishing");
    assert!(
        state.contains("/named_pub") && state.contains("/renamed"),
        "{state}"
    );
}

/// A serial device that does not exist: diagnostics say so every second, and the console
/// hears of it once, not four times a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_device_is_said_once_and_shown_in_diagnostics() {
    use udpros::msgs::diagnostic_msgs::DiagnosticArray;
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let listener = common::node(&uri, "diag_listener").await;
    let mut diagnostics = listener
        .subscribe::<DiagnosticArray>("/diagnostics", Default::default())
        .await
        .unwrap();
    for device in [
        "serial:/dev/udpros-no-such-device:115200",
        "udp:127.0.0.1:9",
    ] {
        let mut sonar = common::Child(
            Command::new(env!("CARGO_BIN_EXE_ping_sonar"))
                .arg(format!("_device:={device}"))
                .env("ROS_MASTER_URI", &uri)
                .env("ROS_IP", "127.0.0.1")
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let got = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let array = diagnostics.recv().await?;
                let values: Vec<(String, String)> = array
                    .status
                    .iter()
                    .flat_map(|s| s.values.iter().map(|kv| (kv.key.clone(), kv.value.clone())))
                    .collect();
                if values.iter().any(|(_, v)| v == device) {
                    return Some(values);
                }
            }
        })
        .await
        .ok()
        .flatten()
        .expect("diagnostics while the device is missing");
        assert!(
            got.contains(&("connected".into(), "false".into())),
            "{got:?}"
        );
        assert!(
            got.contains(&("device type".into(), "not identified".into())),
            "{got:?}"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        let _ = sonar.0.kill();
        let out = std::mem::replace(&mut sonar.0, Command::new("true").spawn().unwrap())
            .wait_with_output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let warnings = stderr.lines().filter(|l| l.contains("WARN")).count();
        println!("{device}: {warnings} warnings in about 4 s:\n{stderr}");
        assert!((1..=2).contains(&warnings), "{device}: {stderr}");
    }
    listener.shutdown().await;
}
