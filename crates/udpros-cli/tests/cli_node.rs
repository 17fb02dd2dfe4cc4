//! `udpros node` beside `rosnode`, against a stock rosmaster.

use udpros_testkit as common;

use std::process::Command;
use std::time::Duration;
use udpros::msgs::std_msgs;

fn udpros(uri: &str, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.args(args);
    common::ros_env(&mut cmd, uri);
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_info_ping_kill_and_cleanup_as_rosnode_does() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let python = common::ros_python().unwrap();
    let talker = common::node(&uri, "talker").await;
    let _chatter = talker
        .advertise::<std_msgs::String>("/chatter", Default::default())
        .await
        .unwrap();
    let _sub = talker
        .subscribe::<std_msgs::Int32>("/numbers", Default::default())
        .await
        .unwrap();
    // A node that died without unregistering.
    let ghost = udpros::api::MasterClient::new(&uri, "/ghost", Default::default());
    ghost
        .register_publisher("/haunted", "std_msgs/Empty", "http://127.0.0.1:1/")
        .await
        .unwrap();

    let uri2 = uri.clone();
    let ours = tokio::task::spawn_blocking(move || udpros(&uri2, &["node", "list"]))
        .await
        .unwrap();
    let theirs = common::ros_tool(&python, "rosnode", &uri)
        .arg("list")
        .output()
        .unwrap();
    assert!(ours.0);
    assert_eq!(ours.1, String::from_utf8_lossy(&theirs.stdout), "node list");

    let uri2 = uri.clone();
    let (ok, info) =
        tokio::task::spawn_blocking(move || udpros(&uri2, &["node", "info", "/talker"]))
            .await
            .unwrap();
    assert!(ok, "{info}");
    for line in [
        "Node [/talker]",
        " * /chatter [std_msgs/String]",
        "Subscriptions: ",
        " * /numbers [std_msgs/Int32]",
        &format!("Pid: {}", std::process::id()),
    ] {
        assert!(info.lines().any(|l| l == line), "{line:?} in {info}");
    }

    let uri2 = uri.clone();
    let (ok, ping) =
        tokio::task::spawn_blocking(move || udpros(&uri2, &["node", "ping", "-c", "2", "talker"]))
            .await
            .unwrap();
    assert!(ok, "{ping}");
    assert_eq!(ping.matches("xmlrpc reply from").count(), 2, "{ping}");

    let uri2 = uri.clone();
    let (ok, cleanup) =
        tokio::task::spawn_blocking(move || udpros(&uri2, &["node", "cleanup", "--yes"]))
            .await
            .unwrap();
    assert!(ok && cleanup.contains(" * /ghost"), "{cleanup}");
    let state = talker.master().get_system_state().await.unwrap();
    assert!(
        !state.publishers.iter().any(|(t, _)| t == "/haunted"),
        "the ghost's registration is gone"
    );

    let uri2 = uri.clone();
    let (ok, kill) =
        tokio::task::spawn_blocking(move || udpros(&uri2, &["node", "kill", "/talker"]))
            .await
            .unwrap();
    assert!(ok && kill.contains("killed"), "{kill}");
    let reason = tokio::time::timeout(Duration::from_secs(5), talker.shutdown_requested())
        .await
        .expect("the node is asked to shut down");
    assert!(reason.contains("user request"), "{reason}");

    let uri2 = uri.clone();
    let (ok, unknown) =
        tokio::task::spawn_blocking(move || udpros(&uri2, &["node", "info", "/nobody"]))
            .await
            .unwrap();
    assert!(
        !ok && unknown.trim() == "udpros: Unknown node /nobody",
        "{unknown}"
    );
}
