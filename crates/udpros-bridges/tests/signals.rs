//! Signals end a bridge only after it has left the graph: GNU `timeout` (which signals the
//! process and then its group, two signals at once), SIGTERM twice, SIGINT then SIGTERM.
//! Each ends the process, and the master no longer knows the node.

use udpros_testkit as common;

use common::registered;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use udpros::master::Master;

fn ping_sonar(master: &str, name: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ping_sonar"));
    cmd.args(["_device:=sim:ping1d", &format!("__name:={name}")])
        .env("ROS_MASTER_URI", master)
        .env("ROS_IP", "127.0.0.1")
        .env_remove("ROS_HOSTNAME")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Waits until `node` is up: known to the master, and publishing its device's topics
/// (they come once the device answered), so that the signals find everything registered.
async fn wait_registered(master: &str, node: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(registered(master, node).await && publishes_device_topics(master, node).await) {
        assert!(
            Instant::now() < deadline,
            "{node} never registered its topics"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `node` publishes a topic of its own (one under its name), as the master says.
async fn publishes_device_topics(master: &str, node: &str) -> bool {
    let client = udpros::api::MasterClient::new(
        master,
        "/signals_test",
        udpros::xmlrpc::XmlRpcClient::default(),
    );
    let Ok(state) = client.get_system_state().await else {
        return false;
    };
    let own = format!("{node}/");
    state
        .publishers
        .iter()
        .any(|(topic, nodes)| topic.starts_with(&own) && nodes.iter().any(|n| n == node))
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

async fn exited(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "still running 10 s after the signals"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_signals_at_once_still_leave_the_graph_first() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    for round in 0..3 {
        // GNU timeout, as a user runs it: it signals the bridge, then its own group.
        let name = format!("sonar_timeout_{round}");
        let mut timeout = Command::new("timeout");
        timeout
            .args(["-s", "TERM", "3", env!("CARGO_BIN_EXE_ping_sonar")])
            .args(["_device:=sim:ping1d", &format!("__name:={name}")])
            .env("ROS_MASTER_URI", &uri)
            .env("ROS_IP", "127.0.0.1")
            .env_remove("ROS_HOSTNAME")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = common::Child(timeout.spawn().unwrap());
        wait_registered(&uri, &format!("/{name}")).await;
        exited(&mut child.0).await;
        assert!(
            !registered(&uri, &format!("/{name}")).await,
            "round {round}: /{name} stayed registered after timeout"
        );
        for (label, first, second) in [
            ("SIGTERM twice", libc::SIGTERM, libc::SIGTERM),
            ("SIGINT then SIGTERM", libc::SIGINT, libc::SIGTERM),
        ] {
            let name = format!("sonar_{first}_{second}_{round}");
            let mut child = common::Child(ping_sonar(&uri, &name).spawn().unwrap());
            wait_registered(&uri, &format!("/{name}")).await;
            signal(child.0.id(), first);
            signal(child.0.id(), second);
            let status = exited(&mut child.0).await;
            assert!(
                !registered(&uri, &format!("/{name}")).await,
                "round {round}, {label}: /{name} stayed registered ({status})"
            );
        }
    }
}
