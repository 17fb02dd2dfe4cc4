//! Debian's ROS tools beside udpros nodes that hold the graph key. Under `prefer` they work
//! as they do without one: `rostopic echo` and `rostopic pub`, `rosnode info` and `rosnode
//! ping`, and `roslaunch` starting a node that a udpros node hears. Under `require`
//! `rostopic` is refused, on a last line that says why.

use udpros_testkit as common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, Node, NodeOptions, SubscribeOptions};
use udpros::secure::{GraphKey, Mode, Policy, Security};

const KEY: [u8; 32] = [33; 32];
const WAIT: Duration = Duration::from_secs(30);

fn security(policy: Policy) -> Security {
    Security {
        policy,
        mode: Mode::Encrypt,
        key: Some(Arc::new(GraphKey::from_bytes(KEY))),
        cipher: None,
    }
}

async fn master(policy: Policy) -> udpros::master::Master {
    udpros::master::Master::start_with(
        "127.0.0.1:0".parse().unwrap(),
        "127.0.0.1",
        &security(policy),
    )
    .await
    .unwrap()
}

async fn node(master: &str, name: &str, policy: Policy) -> Node {
    let options = NodeOptions {
        security: Some(security(policy)),
        ..NodeOptions::default()
    };
    common::node_with(master, name, options).await
}

/// A udpros node under `policy` publishing `/chatter` every 50 ms while the test runs.
async fn talker(master: &str, policy: Policy) -> (Node, tokio::task::JoinHandle<()>) {
    let node = node(master, "talker", policy).await;
    let publisher = node
        .advertise::<std_msgs::String>("/chatter", AdvertiseOptions::default())
        .await
        .unwrap();
    let sending = tokio::spawn(async move {
        let hello = std_msgs::String {
            data: "hello from udpros".into(),
        };
        while publisher.publish(&hello).is_ok() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (node, sending)
}

/// Debian's `tool` with `args` against `uri`, ended by `timeout` after 30 s if it hangs.
fn tool(python: &std::path::Path, uri: &str, tool: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.arg("30").arg(python).arg(format!("/usr/bin/{tool}"));
    cmd.args(args);
    common::ros_env(&mut cmd, uri);
    cmd
}

/// What a udpros node under `prefer` hears first on `topic` within [`WAIT`].
async fn first_heard(uri: &str, name: &str, topic: &str) -> Option<String> {
    let listener = node(uri, name, Policy::Prefer).await;
    let mut sub = listener
        .subscribe::<std_msgs::String>(topic, SubscribeOptions::default())
        .await
        .unwrap();
    let heard = tokio::time::timeout(WAIT, sub.recv()).await;
    heard.ok().flatten().map(|m| m.data)
}

const LAUNCH: &str = r#"<launch>
  <node pkg="rostopic" type="rostopic" name="launched_talker"
        args="pub -r 10 /launched std_msgs/String 'data: from roslaunch'"/>
</launch>
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stock_tools_work_beside_nodes_with_the_key_under_prefer() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let master = master(Policy::Prefer).await;
    let uri = master.uri().to_string();
    let (talker_node, sending) = talker(&uri, Policy::Prefer).await;

    // rostopic echo: a rospy subscriber, served plainly by a publisher under prefer.
    let echo = common::run_tool(&mut tool(
        &python,
        &uri,
        "rostopic",
        &["echo", "-n", "1", "/chatter"],
    ));
    assert!(
        echo.ok && echo.stdout.contains("hello from udpros"),
        "{echo:?}"
    );

    // rosnode: the slave API of a node that signs its calls, called without a proof.
    let info = common::run_tool(&mut tool(&python, &uri, "rosnode", &["info", "/talker"]));
    assert!(info.ok && info.stdout.contains("/chatter"), "{info:?}");
    let ping = common::run_tool(&mut tool(
        &python,
        &uri,
        "rosnode",
        &["ping", "-c", "2", "/talker"],
    ));
    assert!(ping.ok && ping.stdout.contains("reply from"), "{ping:?}");

    // rostopic pub: a rospy publisher that a udpros subscriber under prefer hears. Run
    // as itself, not under `timeout` as the one-shot tools are: killing the `timeout`
    // wrapper as the test ends left rostopic publishing, orphaned, for as long as the
    // machine ran.
    let mut publishing = common::ros_tool(&python, "rostopic", &uri);
    publishing.args([
        "pub",
        "-r",
        "10",
        "/from_tool",
        "std_msgs/String",
        "data: from rostopic",
    ]);
    publishing.stdout(Stdio::null()).stderr(Stdio::null());
    let _publishing = common::Child(publishing.spawn().unwrap());
    let heard = first_heard(&uri, "tool_listener", "/from_tool").await;
    assert_eq!(heard.as_deref(), Some("from rostopic"));
    // The master names the rospy publisher, which registered without a proof, as
    // unauthenticated (`udpros node list` prints the names); the udpros talker proved the
    // key and is not named.
    let unproven = talker_node.master().unauthenticated_nodes().await.unwrap();
    assert!(
        unproven.iter().any(|n| n.starts_with("/rostopic_")),
        "{unproven:?}"
    );
    assert!(!unproven.iter().any(|n| n == "/talker"), "{unproven:?}");

    // roslaunch: a node it starts against the master with the key, heard by udpros.
    let dir = std::env::temp_dir().join(format!("udpros-secure-launch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let launch = dir.join("talker.launch");
    std::fs::write(&launch, LAUNCH).unwrap();
    let mut cmd = common::ros_tool(&python, "roslaunch", &uri);
    // The nodes it starts run by their `#!/usr/bin/env python3`: ROS's Python first on
    // PATH, whatever a virtualenv put there.
    let ros_bin = python.parent().unwrap_or(std::path::Path::new("/"));
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        std::iter::once(ros_bin.to_path_buf()).chain(std::env::split_paths(&path)),
    )
    .unwrap();
    cmd.arg(&launch)
        .env("PATH", path)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut launched = common::Launched(common::Child(cmd.spawn().unwrap()));
    let heard = first_heard(&uri, "launch_listener", "/launched").await;
    let stopped = launched.stop();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(heard.as_deref(), Some("from roslaunch"));
    assert!(stopped, "roslaunch stops with its node");
    sending.abort();
}

/// Under `require` the master takes no call without a proof of the key: `rostopic echo`
/// and `rostopic pub` fail, and the line each ends on says the call was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rostopic_is_refused_on_one_line_under_require() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let master = master(Policy::Require).await;
    let uri = master.uri().to_string();
    let (_talker, sending) = talker(&uri, Policy::Require).await;
    for args in [
        vec!["echo", "-n", "1", "/chatter"],
        vec!["pub", "-1", "/chatter", "std_msgs/String", "data: injected"],
    ] {
        let ran = common::run_tool(&mut tool(&python, &uri, "rostopic", &args));
        let last = ran.stderr.lines().rev().find(|l| !l.trim().is_empty());
        assert!(!ran.ok, "rostopic {args:?} was taken: {ran:?}");
        assert!(
            last.is_some_and(|l| l.contains("call refused: the call carries no proof")),
            "rostopic {args:?}: {ran:?}"
        );
    }
    sending.abort();
}
