//! `udpros action` on Debian's rosmaster: the actions of a rospy server and a udpros
//! server listed, and goals sent to each with their feedback, results, failures and a
//! cancel when the goal takes too long. Types come from the master and the definitions
//! installed here (actionlib's `.action` files), results and feedback from their
//! publishers' headers.

use udpros_testkit as common;

use common::Ran;

use std::process::Command;
use std::time::Duration;
use udpros::action::{ActionServerOptions, SimpleActionServer};
use udpros::msgs::actionlib::TestAction;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn action_list_and_send_against_rospy_and_udpros_servers() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let mut peer = Command::new(&python);
    peer.arg(common::peer_script("rospy_action_peer.py"))
        .args(["serve", "/py_count"]);
    common::ros_env(&mut peer, &uri);
    let (_peer, mut lines) = common::spawn_lines(peer);
    assert!(lines
        .wait_for(Duration::from_secs(30), |l| l == "READY")
        .is_some());
    let node = common::node(&uri, "udpros_counter").await;
    let server =
        SimpleActionServer::<TestAction>::new(&node, "/u_count", ActionServerOptions::default())
            .await
            .unwrap();
    let _work = common::counting_action_server(server);

    let action = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
        cmd.arg("action").args(args);
        common::ros_env(&mut cmd, &uri);
        common::run_tool(&mut cmd)
    };
    let Ran {
        ok,
        stdout: out,
        stderr: err,
        ..
    } = action(&["list"]);
    assert!(ok, "{err}");
    assert!(
        out.lines().any(|l| l == "/py_count actionlib/Test"),
        "{out}"
    );
    assert!(out.lines().any(|l| l == "/u_count actionlib/Test"), "{out}");

    for ns in ["/py_count", "/u_count"] {
        let Ran {
            ok,
            stdout: out,
            stderr: err,
            ..
        } = action(&["send", ns, "goal: 3"]);
        assert!(ok, "{ns}: {out} {err}");
        assert!(out.starts_with("goal id: /udpros_action"), "{out}");
        assert!(out.contains("feedback:\n  feedback: 1\n---\n"), "{out}");
        assert!(out.contains("result:\n  result: 3\n"), "{out}");
        assert!(out.ends_with("state: SUCCEEDED \"counted\"\n"), "{out}");

        let Ran {
            ok,
            stdout: out,
            stderr: err,
            ..
        } = action(&["send", ns, "{goal: -1}"]);
        assert!(!ok, "{ns}: {out}");
        assert!(out.contains("state: ABORTED \"below zero\""), "{out}");
        assert!(err.contains("the goal ended ABORTED"), "{err}");

        let Ran {
            ok, stdout: out, ..
        } = action(&["send", ns, "goal: 100000", "--timeout", "0.5"]);
        assert!(!ok);
        assert!(out.contains("state: ACTIVE\n"), "{out}");
        assert!(out.contains("timed out: cancelling"), "{out}");
        assert!(out.contains("state: PREEMPTED \"preempted\""), "{out}");
    }

    // Ctrl-C cancels the goal and waits for its end.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.args(["action", "send", "/u_count", "goal: 100000"]);
    common::ros_env(&mut cmd, &uri);
    let (mut child, mut out) = common::spawn_lines(cmd);
    let active = tokio::task::block_in_place(|| {
        out.wait_for(Duration::from_secs(30), |l| l == "state: ACTIVE")
    });
    assert!(active.is_some(), "{:?}", out.seen);
    let sent = Command::new("kill")
        .args(["-INT", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let ended = tokio::task::block_in_place(|| {
        out.wait_for(Duration::from_secs(30), |l| {
            l.starts_with("state: PREEMPTED")
        })
    });
    assert!(ended.is_some(), "{:?}", out.seen);
    assert!(out
        .seen
        .iter()
        .any(|l| l.starts_with("interrupted: cancelling")));
    let status = tokio::task::block_in_place(|| child.0.wait()).unwrap();
    assert_eq!(status.code(), Some(1), "not SUCCEEDED");

    // A goal of one field may be given as its value, as a service request may.
    let Ran {
        ok,
        stdout: out,
        stderr: err,
        ..
    } = action(&["send", "/u_count", "2"]);
    assert!(ok, "{out} {err}");
    assert!(out.contains("result:\n  result: 2\n"), "{out}");

    // Bad input: one line on stderr, exit 1, no panic.
    let udpros = env!("CARGO_BIN_EXE_udpros");
    let cases: Vec<common::BadCase> = vec![
        (
            udpros,
            vec!["action", "send", "/nowhere", "goal: 1"],
            "no action at /nowhere",
        ),
        (
            udpros,
            vec!["action", "send", "/u_count", "goal: [1, 2]"],
            "does not fit actionlib/TestGoal",
        ),
        (
            udpros,
            vec!["action", "send", "/u_count", "goal: 1", "--wait", "inf"],
            "--wait inf",
        ),
        (
            udpros,
            vec!["action", "send", "/u_count", "goal: 1", "--timeout", "-1"],
            "--timeout -1",
        ),
        (
            udpros,
            vec!["action", "send", "/u_count", "goal: 1", "--timeout", "NaN"],
            "--timeout NaN",
        ),
        (
            udpros,
            vec!["action", "send", "/u_count", "1", "2"],
            "2 arguments for a goal of 1 fields (goal)",
        ),
        (
            udpros,
            vec!["action", "send", "/u_count", "{goal: 1"],
            "YAML",
        ),
    ];
    tokio::task::spawn_blocking(move || common::assert_each_fails_in_one_line(&uri, cases))
        .await
        .unwrap();
}
