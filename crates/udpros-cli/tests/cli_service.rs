//! `udpros service` beside `rosservice` on the same rosmaster, against a rospy server and
//! udpros servers: the same text for list, info, type, args, uri, find and call.

use udpros_testkit as common;

use std::process::Command;
use std::time::Duration;
use udpros::msgs::std_srvs::{SetBool, SetBoolResponse, Trigger, TriggerResponse};

fn run(mut cmd: Command) -> (bool, String, String) {
    let out = tokio::task::block_in_place(|| cmd.output()).unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_commands_print_what_rosservice_prints() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let mut peer = Command::new(&python);
    peer.arg(common::peer_script("rospy_service_peer.py"))
        .args(["serve", "/py/set_bool", "setbool"]);
    common::ros_env(&mut peer, &uri);
    let (_peer, mut lines) = common::spawn_lines(peer);
    assert!(lines
        .wait_for(Duration::from_secs(30), |l| l == "READY")
        .is_some());
    let server = common::node(&uri, "udpros_srv").await;
    let _set_bool = server
        .advertise_service::<SetBool, _, _>("~set_bool", |req| async move {
            Ok(SetBoolResponse {
                success: req.data,
                message: format!("data was {}", req.data),
            })
        })
        .await
        .unwrap();
    let _trigger = server
        .advertise_service::<Trigger, _, _>("~trigger", |_| async {
            Ok(TriggerResponse {
                success: true,
                message: "multi\nline".into(),
            })
        })
        .await
        .unwrap();

    let ours = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
        cmd.arg("service").args(args);
        common::ros_env(&mut cmd, &uri);
        run(cmd)
    };
    let theirs = |args: &[&str]| {
        let mut cmd = common::ros_tool(&python, "rosservice", &uri);
        cmd.args(args);
        run(cmd)
    };
    let same = |args: &[&str]| {
        let (ok, out, err) = ours(args);
        assert!(ok, "udpros service {args:?}: {err}");
        let (their_ok, their_out, their_err) = theirs(args);
        assert!(their_ok, "rosservice {args:?}: {their_err}");
        assert_eq!(out, their_out, "{args:?}");
        out
    };
    let listed = same(&["list"]);
    assert!(listed.contains("/py/set_bool\n") && listed.contains("/udpros_srv/trigger\n"));
    same(&["list", "-n"]);
    for service in [
        "/py/set_bool",
        "/udpros_srv/set_bool",
        "/udpros_srv/trigger",
    ] {
        for command in ["info", "type", "args", "uri"] {
            same(&[command, service]);
        }
    }
    assert_eq!(
        same(&["find", "std_srvs/SetBool"]),
        "/py/set_bool\n/udpros_srv/set_bool\n"
    );
    for (service, args) in [
        ("/py/set_bool", vec!["data: true"]),
        ("/py/set_bool", vec!["{data: true}"]),
        ("/py/set_bool", vec!["true"]),
        ("/udpros_srv/set_bool", vec!["data: false"]),
        ("/udpros_srv/trigger", vec![]),
        ("/udpros_srv/get_loggers", vec![]),
    ] {
        let mut all = vec!["call", service];
        all.extend(args);
        // get_loggers lists what each node has logged so far; compare the shape only.
        if service.ends_with("get_loggers") {
            let (ok, out, err) = ours(&all);
            assert!(
                ok && out.starts_with("loggers: \n  - \n    name: "),
                "{out}{err}"
            );
        } else {
            same(&all);
        }
    }
    // Failures: a handler error and a missing service, each one line, exit 1.
    let (ok, _, err) = ours(&["call", "/py/set_bool", "data: false"]);
    assert!(
        !ok && err.contains("refusing") && err.lines().count() == 1,
        "{err}"
    );
    let (ok, _, err) = ours(&["call", "/nobody/here"]);
    assert!(
        !ok && err.contains("/nobody/here") && err.lines().count() == 1,
        "{err}"
    );
    let (ok, _, err) = ours(&["call", "/py/set_bool", "1", "2"]);
    assert!(!ok && err.contains("2 arguments"), "{err}");
}
