//! Bad values from a user: one clear line on stderr and exit status 1 within 5 s, never a
//! panic or a silent hang; and a device that never answers is said once, not forever.

use udpros_testkit as common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use udpros::master::Master;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_rates_are_one_line_and_exit_1() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let cases: Vec<common::BadCase> = vec![
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
            env!("CARGO_BIN_EXE_udpros"),
            vec!["topic", "pub", "--max-rate", "5", "/x", "std_msgs/String"],
            "--max-rate",
        ),
        (
            env!("CARGO_BIN_EXE_udpros"),
            vec!["topic", "pub", "--max-rate=-1e3", "/x", "std_msgs/String"],
            "--max-rate",
        ),
        (
            env!("CARGO_BIN_EXE_udpros"),
            vec!["topic", "pub", "--max-rate", "NaN", "/x", "std_msgs/String"],
            "--max-rate",
        ),
        (
            env!("CARGO_BIN_EXE_udpros"),
            vec![
                "topic",
                "pub",
                "--max-rate-per-host",
                "5",
                "/x",
                "std_msgs/String",
            ],
            "--max-rate-per-host",
        ),
        (
            env!("CARGO_BIN_EXE_udpros"),
            vec![
                "topic",
                "pub",
                "--max-rate-per-host=inf",
                "/x",
                "std_msgs/String",
            ],
            "--max-rate-per-host",
        ),
    ];
    tokio::task::spawn_blocking(move || common::assert_each_fails_in_one_line(&uri, cases))
        .await
        .unwrap();
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
