//! What udpros programs listen on, read from the kernel (`ss`): rospy's rule, loopback only
//! when `ROS_IP` or `ROS_HOSTNAME` names loopback (`localhost`, `127.x`; IPv6 `::1` under
//! `ROS_IPV6=on`), every interface otherwise, and never wider.

use udpros_testkit as common;

use common::{free_port, wait_for, Child};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The local addresses (without ports) of every TCP listener and bound UDP socket of `pid`.
fn listening(pid: u32) -> Vec<String> {
    let out = Command::new("ss").args(["-H", "-ltunp"]).output().unwrap();
    let marker = format!("pid={pid},");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&marker))
        .filter_map(|l| l.split_whitespace().nth(4))
        .map(|local| {
            local
                .rsplit_once(':')
                .map_or(local, |(ip, _)| ip)
                .to_string()
        })
        .collect()
}

/// A master and a subscriber run with `env`; every address each listens on.
fn addresses(env: &[(&str, &str)], master_host: &str) -> (Vec<String>, Vec<String>) {
    let port = free_port();
    let uri = format!("http://{master_host}:{port}/");
    let command = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
        cmd.args(args)
            .env("ROS_MASTER_URI", &uri)
            .env_remove("ROS_IP")
            .env_remove("ROS_HOSTNAME")
            .env_remove("ROS_IPV6")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        cmd
    };
    let master = Child(
        command(&["master", "--port", &port.to_string()])
            .spawn()
            .unwrap(),
    );
    let master_up = wait_for(Duration::from_secs(20), || {
        listening(master.0.id()).len() >= 3
    });
    assert!(master_up, "{env:?}: the master listens");
    let echo = Child(command(&["topic", "echo", "/bound"]).spawn().unwrap());
    // The echo's node has its slave API and TCPROS server up once it is registered.
    let up = wait_for(Duration::from_secs(20), || {
        listening(echo.0.id()).len() >= 2
    });
    assert!(
        up,
        "{env:?}: pid {} listens on {:?}",
        echo.0.id(),
        listening(echo.0.id())
    );
    std::thread::sleep(Duration::from_millis(300));
    (listening(master.0.id()), listening(echo.0.id()))
}

#[test]
fn programs_listen_no_wider_than_the_ros_rule() {
    // (environment, the master's host in ROS_MASTER_URI, the one address allowed)
    type Case = (
        &'static [(&'static str, &'static str)],
        &'static str,
        &'static str,
    );
    let cases: [Case; 4] = [
        (&[("ROS_IP", "127.0.0.1")], "127.0.0.1", "127.0.0.1"),
        (&[("ROS_HOSTNAME", "localhost")], "localhost", "127.0.0.1"),
        (&[("ROS_IPV6", "on"), ("ROS_IP", "::1")], "[::1]", "[::1]"),
        // A loopback address as the host name: loopback, as rospy binds (issue 33).
        (&[("ROS_HOSTNAME", "127.0.0.1")], "127.0.0.1", "127.0.0.1"),
    ];
    for (env, master_host, want) in cases {
        let (master, node) = addresses(env, master_host);
        assert!(!master.is_empty() && !node.is_empty(), "{env:?}");
        for (who, addrs) in [("udpros master", &master), ("udpros topic echo", &node)] {
            assert!(
                addrs.iter().all(|a| a == want),
                "{who} with {env:?} listens on {addrs:?}, not only {want}"
            );
        }
    }
}
