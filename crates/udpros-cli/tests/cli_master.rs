//! `udpros master` as a roscore, with only udpros programs running: the parameters roscore
//! sets (`rosparam get /rosdistro`), and `/rosout` aggregated into `/rosout_agg`
//! (`rostopic echo /rosout_agg`, what rqt_console listens to); `--no-rosout` leaves that to
//! a stock rosout node.

use udpros_testkit as common;

use common::{free_port, ros_tool, wait_for, Child};
use std::process::{Command, Stdio};
use std::time::Duration;

fn udpros(uri: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.args(args)
        .env("ROS_MASTER_URI", uri)
        .env("ROS_IP", "127.0.0.1")
        .env_remove("ROS_HOSTNAME")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    cmd
}

/// `udpros master` on a free port, and its URI.
fn master(extra: &[&str]) -> (Child, String) {
    let port = free_port();
    let uri = format!("http://127.0.0.1:{port}/");
    let mut args = vec!["master", "--host", "127.0.0.1", "--port"];
    let port_text = port.to_string();
    args.push(&port_text);
    args.extend_from_slice(extra);
    let child = Child(udpros(&uri, &args).spawn().unwrap());
    assert!(wait_for(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    }));
    (child, uri)
}

fn tool(python: &std::path::Path, uri: &str, tool: &str, args: &[&str]) -> String {
    let out = ros_tool(python, tool, uri)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{tool} {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn udpros_master_is_a_roscore_with_rosdistro_and_rosout_agg() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let (_master, uri) = master(&[]);
    // roscore's parameters, as rosparam prints them (roslaunch ends both with a newline,
    // which PyYAML quotes so).
    assert_eq!(
        tool(&python, &uri, "rosparam", &["get", "/rosdistro"]).trim(),
        "'noetic\n\n  '"
    );
    assert_eq!(
        tool(&python, &uri, "rosparam", &["get", "/rosversion"]).trim(),
        "'1.15.15\n\n  '"
    );
    let run_id = tool(&python, &uri, "rosparam", &["get", "/run_id"]);
    assert_eq!(run_id.trim().len(), 36, "{run_id}");
    // The /rosout node is there, as under roscore.
    assert!(wait_for(Duration::from_secs(10), || tool(
        &python,
        &uri,
        "rosnode",
        &["list"]
    )
    .lines()
    .any(|l| l == "/rosout")));
    // A udpros program logs on /rosout; rostopic hears it on /rosout_agg.
    let _logger = Child(
        udpros(
            &uri,
            &[
                "topic",
                "pub",
                "-r",
                "10",
                "/rosout",
                "rosgraph_msgs/Log",
                "{level: 2, name: /logger, msg: hello from udpros}",
            ],
        )
        .spawn()
        .unwrap(),
    );
    let heard = tool(
        &python,
        &uri,
        "rostopic",
        &["echo", "-n", "1", "/rosout_agg/msg"],
    );
    assert_eq!(heard, "\"hello from udpros\"\n---\n");
}

#[test]
fn no_rosout_leaves_aggregation_to_a_stock_rosout_node() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let (_master, uri) = master(&["--no-rosout"]);
    let params = tool(&python, &uri, "rosparam", &["list"]);
    assert!(
        params.contains("/rosdistro") && params.contains("/run_id"),
        "{params}"
    );
    let nodes = tool(&python, &uri, "rosnode", &["list"]);
    assert!(!nodes.lines().any(|l| l == "/rosout"), "{nodes}");
    let topics = tool(&python, &uri, "rostopic", &["list"]);
    assert!(!topics.contains("/rosout_agg"), "{topics}");
}

/// A fresh key file in a folder of this test's own (`udpros key new`).
fn new_key(test: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("udpros-cli-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("graph.key");
    let made = Command::new(env!("CARGO_BIN_EXE_udpros"))
        .args(["key", "new", key.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    (dir, key)
}

/// `udpros master __key_file:=F __security:=require`: `udpros param` with the same file
/// sets and reads; without it, it fails in one line that names the refusal, and sets nothing.
#[test]
fn a_master_under_require_serves_udpros_tools_holding_the_key_only() {
    let (dir, key) = new_key("master-key");
    let secured = |cmd: &mut Command| {
        cmd.env("UDPROS_KEY_FILE", &key)
            .env("UDPROS_SECURITY", "require");
    };
    // The master takes its key from its command line as a node does; the tools from the
    // environment.
    let key_arg = format!("__key_file:={}", key.display());
    let (_master, uri) = master(&[&key_arg, "__security:=require"]);
    let run = |args: &[&str], with_key: bool| {
        let mut cmd = udpros(&uri, args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        if with_key {
            secured(&mut cmd);
        }
        common::run_tool(&mut cmd)
    };
    let mut set = run(&["param", "set", "/secured", "5"], true);
    // The master's /rosout node may still be registering: a moment's retry.
    for _ in 0..20 {
        if set.ok {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
        set = run(&["param", "set", "/secured", "5"], true);
    }
    assert!(set.ok, "{set:?}");
    let got = run(&["param", "get", "/secured"], true);
    assert!(got.ok && got.stdout.trim() == "5", "{got:?}");
    let keyless = run(&["param", "set", "/secured", "6"], false);
    assert!(!keyless.ok, "{keyless:?}");
    let lines: Vec<&str> = keyless
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "{keyless:?}");
    assert!(lines[0].contains("call refused"), "{keyless:?}");
    let got = run(&["param", "get", "/secured"], true);
    assert_eq!(got.stdout.trim(), "5", "{got:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under `prefer`, `udpros node list` prints the node names as `rosnode list` does, and
/// says on standard error which of them registered without the graph key.
#[test]
fn node_list_names_the_nodes_without_the_key_under_prefer() {
    let (dir, key) = new_key("node-list");
    let key_arg = format!("__key_file:={}", key.display());
    let (_master, uri) = master(&[&key_arg, "__security:=prefer"]);
    // A keyless publisher, registered unauthenticated.
    let mut publishing = udpros(
        &uri,
        &[
            "topic",
            "pub",
            "-r",
            "5",
            "/plain",
            "std_msgs/String",
            "data: hi",
        ],
    );
    publishing.stderr(Stdio::null());
    let _publishing = Child(publishing.spawn().unwrap());
    let list = |with_key: bool| {
        let mut cmd = udpros(&uri, &["node", "list"]);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        if with_key {
            cmd.env("UDPROS_KEY_FILE", &key);
        }
        common::run_tool(&mut cmd)
    };
    let mut listed = list(true);
    for _ in 0..40 {
        if listed.stdout.lines().count() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
        listed = list(true);
    }
    assert!(listed.ok, "{listed:?}");
    let names: Vec<&str> = listed.stdout.lines().collect();
    let publisher = names.iter().find(|n| **n != "/rosout");
    let publisher = publisher.unwrap_or_else(|| panic!("{listed:?}"));
    let said = listed.stderr.trim();
    assert!(
        said.starts_with("registered without proof of the graph key")
            && said.split_whitespace().any(|w| w == *publisher)
            && !said.contains("/rosout"),
        "{listed:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
