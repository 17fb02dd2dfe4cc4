//! Stock ROS nodes and tools against udpros's embedded master: rostopic, rosparam, rosnode,
//! and a roscpp talker with a rospy listener, all behaving as with rosmaster.

use udpros_testkit as common;

use common::{ros_tool, spawn_lines};
use std::process::Command;
use std::time::Duration;
use udpros::master::Master;

struct Graph {
    _runtime: tokio::runtime::Runtime,
    master: Master,
}

fn embedded_master() -> Graph {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let master = runtime
        .block_on(Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1"))
        .expect("master");
    Graph {
        _runtime: runtime,
        master,
    }
}

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn rostopic_pub_reaches_rostopic_echo() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let g = embedded_master();
    let uri = g.master.uri();
    // Started in either order, `rostopic echo` subscribes only once the topic is published
    // (it asks the master's getPublishedTopics for its type until it is), so nothing
    // here waits for the other: the echo finds the publisher through the master.
    let mut echo = ros_tool(&python, "rostopic", uri);
    echo.args(["echo", "-n", "3", "/chatter"]);
    let (_echo, mut lines) = spawn_lines(echo);
    let mut publish = ros_tool(&python, "rostopic", uri);
    publish.args(["pub", "-r", "10", "/chatter", "std_msgs/String", "data: hi"]);
    let (_pub, _) = spawn_lines(publish);
    assert_eq!(
        lines.count(3, WAIT, |l| l == "data: \"hi\""),
        3,
        "echo printed: {:?}",
        lines.seen
    );
    assert!(lines.seen.iter().any(|l| l == "---"));
}

#[test]
fn roscpp_talker_reaches_rospy_listener() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some(roscpp) = common::roscpp_peer() else {
        return;
    };
    let g = embedded_master();
    let uri = g.master.uri();
    let mut talker = Command::new(roscpp);
    talker.args(["pub", "/chatter", "--rate", "20"]);
    common::ros_env(&mut talker, uri);
    let (_talker, _) = spawn_lines(talker);
    let mut listener = Command::new(&python);
    listener
        .arg(common::peer_script("rospy_peer.py"))
        .args(["sub", "/chatter"]);
    common::ros_env(&mut listener, uri);
    let (_listener, mut lines) = spawn_lines(listener);
    assert_eq!(
        lines.count(5, WAIT, |l| l.starts_with("RECV hello ")),
        5,
        "listener printed: {:?}",
        lines.seen
    );
}

fn output(mut cmd: Command) -> String {
    let out = cmd.output().expect("run tool");
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn rosparam_set_get_list_delete() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let g = embedded_master();
    let uri = g.master.uri();
    let rosparam = |args: &[&str]| {
        let mut cmd = ros_tool(&python, "rosparam", uri);
        cmd.args(args);
        cmd
    };
    output(rosparam(&["set", "/robot/speed", "2.5"]));
    output(rosparam(&["set", "/robot/name", "r2"]));
    output(rosparam(&["set", "/robot/gains", "[1, 2, 3]"]));
    assert_eq!(output(rosparam(&["get", "/robot/speed"])).trim(), "2.5");
    assert_eq!(output(rosparam(&["get", "/robot/name"])).trim(), "r2");
    assert_eq!(
        output(rosparam(&["get", "/robot/gains"])).trim(),
        "- 1\n- 2\n- 3"
    );
    let listed = output(rosparam(&["list", "/robot"]));
    assert_eq!(
        listed.lines().collect::<Vec<_>>(),
        ["/robot/gains", "/robot/name", "/robot/speed"]
    );
    output(rosparam(&["delete", "/robot/name"]));
    assert!(!output(rosparam(&["list"])).contains("/robot/name"));
    let missing = rosparam(&["get", "/robot/name"]).output().expect("run");
    assert!(!missing.status.success());
}

#[test]
fn rosnode_list_info_and_kill() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let g = embedded_master();
    let uri = g.master.uri();
    let mut listener = Command::new(&python);
    listener
        .arg(common::peer_script("rospy_peer.py"))
        .args(["sub", "/chatter", "__name:=victim"]);
    common::ros_env(&mut listener, uri);
    let (mut node, mut lines) = spawn_lines(listener);
    assert!(lines.wait_for(WAIT, |l| l == "READY").is_some());
    let rosnode = |args: &[&str]| {
        let mut cmd = ros_tool(&python, "rosnode", uri);
        cmd.args(args);
        cmd
    };
    assert!(common::wait_for(WAIT, || output(rosnode(&["list"]))
        .lines()
        .any(|l| l == "/victim")));
    let info = output(rosnode(&["info", "/victim"]));
    assert!(info.contains("Node [/victim]"), "{info}");
    // Types come from getPublishedTopics, which knows only published topics (as with rosmaster).
    assert!(
        info.contains("Subscriptions: \n * /chatter [unknown type]"),
        "{info}"
    );
    assert!(info.contains("Pid:"), "{info}");
    output(rosnode(&["kill", "/victim"]));
    assert!(
        common::wait_for(WAIT, || matches!(node.0.try_wait(), Ok(Some(_)))),
        "rosnode kill did not stop the node"
    );
}

/// A dropped master has stopped listening when the drop returns: one started again on
/// its port at once gets it, even before the runtime has run the aborted accept task
/// (a current-thread runtime that is not yielded to in between). Before, this failed
/// with "address in use", as the master-restart tests did now and then on a loaded
/// machine.
#[tokio::test(flavor = "current_thread")]
async fn a_dropped_master_frees_its_port_at_once() {
    let first = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let addr = format!("127.0.0.1:{}", first.uri().rsplit(':').next().unwrap())
        .trim_end_matches('/')
        .parse()
        .unwrap();
    drop(first);
    let again = Master::start(addr, "127.0.0.1").await;
    assert!(again.is_ok(), "{:?}", again.err());
}
