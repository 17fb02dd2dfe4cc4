//! The programs in `examples/`, run as a user runs them, against a stock rosmaster and
//! roscpp and rospy peers; (tests/book.rs checks that the README and the book show them verbatim).

use udpros_testkit as common;

use common::{example, peer_script, ros_env, spawn_lines, Child};
use std::process::{Command, Stdio};
use std::time::Duration;

fn run_example(name: &str, master: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(example(name));
    cmd.args(args);
    ros_env(&mut cmd, master);
    cmd
}

fn roscpp(master: &str, args: &[&str]) -> Option<Command> {
    let mut cmd = Command::new(common::roscpp_peer()?);
    cmd.args(args);
    ros_env(&mut cmd, master);
    Some(cmd)
}

fn rospy(master: &str, args: &[&str]) -> Option<Command> {
    let mut cmd = Command::new(common::ros_python()?);
    cmd.arg(peer_script("rospy_peer.py")).args(args);
    ros_env(&mut cmd, master);
    Some(cmd)
}

/// Starts `peer` (quiet) and runs the example to its end; the example's output.
fn example_beside(peer: Command, example: Command, limit: Duration) -> String {
    let mut peer = peer;
    let _peer = Child(
        peer.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (mut child, mut lines) = spawn_lines(example);
    let out = lines.rest(limit);
    let _ = child.0.kill();
    out
}

#[test]
fn talker_reaches_roscpp_and_rospy_listeners() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    for (who, listener) in [
        (
            "roscpp",
            roscpp(
                &uri,
                &["sub", "chatter", "--hints", "udp,tcp", "--count", "5"],
            ),
        ),
        ("rospy", rospy(&uri, &["sub", "chatter", "--count", "5"])),
    ] {
        let Some(listener) = listener else { return };
        let (mut child, mut lines) = spawn_lines(listener);
        assert!(lines
            .wait_for(Duration::from_secs(30), |l| l == "READY")
            .is_some());
        let mut talker = run_example("talker", &uri, &["__name:=talker_for_listener"]);
        let _talker = Child(talker.stdout(Stdio::null()).spawn().unwrap());
        let heard = lines.count(5, Duration::from_secs(30), |l| {
            l.starts_with("RECV hello world ")
        });
        println!("{who} listener heard {heard} of 5 from the talker example");
        assert_eq!(heard, 5, "{who}: {:?}", lines.seen);
        let _ = child.0.kill();
    }
}

#[test]
fn listener_hears_roscpp_and_rospy_talkers() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    for (who, talker) in [
        ("roscpp", roscpp(&uri, &["pub", "chatter", "--rate", "10"])),
        ("rospy", rospy(&uri, &["pub", "chatter", "--rate", "10"])),
    ] {
        let Some(talker) = talker else { return };
        let listener = run_example(
            "listener",
            &uri,
            &["_count:=5", &format!("__name:=listener_{who}")],
        );
        let out = example_beside(talker, listener, Duration::from_secs(30));
        let heard = out
            .lines()
            .filter(|l| l.starts_with("I heard: [hello "))
            .count();
        println!("listener example heard {heard} of 5 from a {who} talker");
        assert_eq!(heard, 5, "{who}: {out}");
    }
}

/// UDP only: a roscpp talker is heard; a rospy one (no UDPROS) is refused, not served
/// over TCP.
#[test]
fn udp_only_listener_takes_roscpp_and_refuses_rospy() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let (Some(cpp), Some(py)) = (
        roscpp(&uri, &["pub", "chatter", "--rate", "10"]),
        rospy(&uri, &["pub", "/py_chatter", "--rate", "10"]),
    ) else {
        return;
    };
    let from_cpp = example_beside(
        cpp,
        run_example("listener_udp", &uri, &["_count:=3"]),
        Duration::from_secs(30),
    );
    assert_eq!(
        from_cpp
            .lines()
            .filter(|l| l.starts_with("I heard: [hello "))
            .count(),
        3,
        "{from_cpp}"
    );
    let from_py = example_beside(
        py,
        run_example(
            "listener_udp",
            &uri,
            &["_count:=3", "chatter:=/py_chatter", "__name:=udp_py"],
        ),
        Duration::from_secs(5),
    );
    assert!(
        !from_py.contains("I heard"),
        "rospy has no UDPROS: {from_py}"
    );
}

#[test]
fn echo_prints_a_topic_of_a_type_it_was_not_compiled_for() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let Some(talker) = roscpp(
        &uri,
        &[
            "pub", "/typed", "--type", "bytes", "--size", "8", "--rate", "10",
        ],
    ) else {
        return;
    };
    let echo = run_example("echo", &uri, &["_topic:=/typed", "_count:=2"]);
    let out = example_beside(talker, echo, Duration::from_secs(30));
    println!("{out}");
    // std_msgs/UInt8MultiArray as rostopic echo prints it.
    assert_eq!(out.matches("---").count(), 2, "{out}");
    assert!(out.contains("layout:") && out.contains("data: ["), "{out}");
}

/// The custom-message example (a workspace member of its own, built by its build script
/// with the code generator alone), heard by a rospy subscriber that knows no
/// `tutorial_msgs`: it builds the class from the definition in the connection header, as
/// `rostopic echo` does, so the md5sum, the definition and the bytes must all be genpy's.
#[test]
fn custom_messages_reach_rospy_which_learns_the_type_from_the_header() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let Some(python) = common::ros_python() else {
        return;
    };
    let mut talker = Command::new(common::workspace_programs().join("custom-messages"));
    ros_env(&mut talker, &uri);
    let _talker = Child(
        talker
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut sub = Command::new(&python);
    sub.arg(peer_script("dynamic_sub.py"))
        .args(["/reading", "3"]);
    ros_env(&mut sub, &uri);
    let (mut child, mut lines) = spawn_lines(sub);
    let out = lines.rest(Duration::from_secs(40));
    let _ = child.0.kill();
    println!("{out}");
    let decoded: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(decoded.len(), 3, "{out}");
    for m in &decoded {
        assert_eq!(m["type"], "tutorial_msgs/Reading");
        assert_eq!(m["md5"], m["class_md5"], "genpy's md5 of the definition");
        assert_eq!(m["fields"]["source"], 1);
        assert!(m["fields"]["label"]
            .as_str()
            .unwrap()
            .starts_with("reading "));
        let depth = m["fields"]["depth"].as_f64().unwrap();
        assert!((2.0..=4.25).contains(&depth), "{depth}");
    }
    // rospy calls the package's service with genpy's class of the same .srv; the readings
    // follow the offset it sets.
    let root = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("tutorial_srv");
    let srv = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/custom_messages/msg/tutorial_msgs/SetDepthOffset.srv"),
    )
    .unwrap();
    common::genpy_services(&python, &root, "tutorial_msgs", &[("SetDepthOffset", &srv)]);
    let script = "import rospy\nfrom tutorial_msgs.srv import SetDepthOffset\n\
        name = '/reading_talker/set_depth_offset'\nrospy.wait_for_service(name, 20)\n\
        r = rospy.ServiceProxy(name, SetDepthOffset)(10.0)\nprint(r.success, r.message)\n";
    let mut call = Command::new(&python);
    call.args(["-c", script]);
    ros_env(&mut call, &uri);
    call.env("PYTHONPATH", &root);
    let answer = call.output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        "True depths offset by 10 m\n",
        "{}",
        String::from_utf8_lossy(&answer.stderr)
    );
    let mut sub = Command::new(&python);
    sub.arg(peer_script("dynamic_sub.py"))
        .args(["/reading", "1"]);
    ros_env(&mut sub, &uri);
    let (mut child, mut lines) = spawn_lines(sub);
    let out = lines.rest(Duration::from_secs(40));
    let _ = child.0.kill();
    let depth = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|m| m["fields"]["depth"].as_f64())
        .unwrap_or_else(|| panic!("a reading after the offset: {out}"));
    assert!((12.0..=14.25).contains(&depth), "{depth}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_come_from_the_command_line_and_go_back_to_the_master() {
    let master = udpros::master::Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let out = tokio::task::spawn_blocking({
        let uri = uri.clone();
        move || {
            let mut cmd = run_example("parameters", &uri, &["_rate:=5", "_frame_id:=sonar_link"]);
            let out = cmd.stderr(Stdio::inherit()).output().expect("run");
            assert!(out.status.success());
            String::from_utf8_lossy(&out.stdout).to_string()
        }
    })
    .await
    .unwrap();
    println!("{out}");
    assert!(
        out.contains("rate: 5\n") && out.contains("frame_id: sonar_link\n"),
        "{out}"
    );
    let node = common::node(&uri, "param_check").await;
    let rate: f64 = node.param("/parameters/rate", 0.0).await.unwrap();
    assert_eq!(rate, 5.0);
    node.shutdown().await;
}

fn service_peer(master: &str, args: &[&str]) -> Option<Command> {
    let mut cmd = Command::new(common::ros_python()?);
    cmd.arg(peer_script("rospy_service_peer.py")).args(args);
    ros_env(&mut cmd, master);
    Some(cmd)
}

/// The service examples with rospy and roscpp on the other side: rospy and roscpp clients
/// call the server example; the client example calls rospy and roscpp servers.
#[test]
fn service_examples_serve_and_call_rospy_and_roscpp() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let Some(cpp) = common::roscpp_service_peer() else {
        return;
    };
    let mut server = run_example("service_server", &uri, &["__name:=example_server"]);
    server.stderr(Stdio::null());
    let (_server, mut lines) = spawn_lines(server);
    assert!(lines
        .wait_for(Duration::from_secs(30), |l| l == "serving /switch")
        .is_some());
    let Some(mut py) = service_peer(&uri, &["call", "/switch", "setbool", "--count", "2"]) else {
        return;
    };
    let out = py.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("OK 1 light on\nERR ") && text.contains("this light stays on"),
        "{text}"
    );
    let mut roscpp_client = Command::new(&cpp);
    roscpp_client.args(["call", "/switch", "setbool", "--count", "2"]);
    ros_env(&mut roscpp_client, &uri);
    let out = roscpp_client.output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "OK 1 light on\nFAIL\n"
    );
    drop(_server);

    // The client example against rospy's and roscpp's servers of the same name.
    for who in ["rospy", "roscpp"] {
        let server = match who {
            "rospy" => service_peer(&uri, &["serve", "/switch", "setbool"]).unwrap(),
            _ => {
                let mut cmd = Command::new(&cpp);
                cmd.args(["serve", "/switch", "setbool"]);
                ros_env(&mut cmd, &uri);
                cmd
            }
        };
        for (data, expected) in [
            ("true", "success: true, message: on"),
            ("false", "refused: "),
        ] {
            let client = run_example("service_client", &uri, &[&format!("_data:={data}")]);
            let out = example_beside(clone_command(&server), client, Duration::from_secs(30));
            println!("service_client example against {who} (data {data}): {out}");
            assert!(out.contains(expected), "{who}, data {data}: {out}");
        }
    }
}

/// A second run of the same program with the same arguments and environment.
fn clone_command(cmd: &Command) -> Command {
    let mut copy = Command::new(cmd.get_program());
    copy.args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => copy.env(key, v),
            None => copy.env_remove(key),
        };
    }
    copy
}

/// The custom-message package's action: its client gets the sequence from its server, as
/// feedback number by number and as the result, through a stock rosmaster.
#[test]
fn the_fibonacci_action_examples_compute_the_sequence() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let profile = common::workspace_programs();
    let (server, client) = (
        profile.join("fibonacci_server"),
        profile.join("fibonacci_client"),
    );
    let mut server = Command::new(server);
    server.arg("_step:=0.02");
    ros_env(&mut server, &uri);
    let (_server, mut served) = spawn_lines(server);
    let mut client = Command::new(client);
    client.arg("_order:=6");
    ros_env(&mut client, &uri);
    let out = client.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("so far: [0, 1, 1]\n"), "{text}");
    assert!(text.ends_with("result: [0, 1, 1, 2, 3, 5, 8]\n"), "{text}");
    assert!(served
        .wait_for(Duration::from_secs(10), |l| l
            == "order 6: [0, 1, 1, 2, 3, 5, 8]")
        .is_some());

    // `udpros action send` on a machine that does not know tutorial_msgs: the goal type
    // is learnt from the server's subscription header.
    let mut send = Command::new(profile.join("udpros"));
    send.args(["action", "send", "/fibonacci", "{order: 4}"]);
    ros_env(&mut send, &uri);
    send.env_remove("ROS_PACKAGE_PATH");
    let out = send.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("SUCCEEDED"), "{text}");
    assert!(
        text.contains("sequence: [0, 1, 1, 2, 3]"),
        "the result: {text}"
    );
    drop(_server);

    // Ctrl-C ends the server cleanly, idle or in the middle of a goal: exit status 0, no
    // error printed, and the master no longer lists it.
    for (i, mid_goal) in [false, true].into_iter().enumerate() {
        let name = format!("fibonacci_server_{i}");
        let mut server = Command::new(profile.join("fibonacci_server"));
        server.args(["_step:=0.5", &format!("__name:={name}")]);
        ros_env(&mut server, &uri);
        let server = server
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Listed as the action's publisher, not only as /rosout's: the node registers
        // /rosout while it starts, and a SIGINT then ends the process with 130, as the
        // default action would (one run in several on a loaded machine).
        let publishes = |name: &str, prefix: &str| {
            let state = system_state(&uri);
            state.publishers.iter().any(|(topic, nodes)| {
                topic.starts_with(prefix) && nodes.iter().any(|n| n == &format!("/{name}"))
            })
        };
        let listed = |name: &str| publishes(name, "/fibonacci/");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !listed(&name) {
            assert!(
                std::time::Instant::now() < deadline,
                "{name} never registered"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let _goal = mid_goal.then(|| {
            let mut client = Command::new(profile.join("fibonacci_client"));
            client.args(["_order:=40", "__name:=long_client"]);
            client.env("ROS_NAMESPACE", "/");
            ros_env(&mut client, &uri);
            let (child, mut lines) = spawn_lines(client);
            assert!(lines
                .wait_for(Duration::from_secs(20), |l| l.starts_with("so far"))
                .is_some());
            child
        });
        let _ = Command::new("kill")
            .args(["-INT", &server.id().to_string()])
            .status();
        let out = server.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "mid goal {mid_goal}: {stderr}");
        assert!(!stderr.contains("Error"), "mid goal {mid_goal}: {stderr}");
        assert!(!publishes(&name, "/"), "{name} is still registered");
    }
}

/// Ctrl-C while a node is still registering (its /rosout advertisement held on its way
/// to the master): the process ends as the signal's default action would (status 130),
/// but only once the registration is answered and undone, so the master lists nothing
/// of it. Before, the signal either killed the process at once, leaving everything it
/// had registered, or was caught and the late registration outlived it.
#[test]
fn ctrl_c_while_a_node_starts_leaves_nothing_registered() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let master = runtime
        .block_on(udpros::master::Master::start(
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1",
        ))
        .unwrap();
    let relay = runtime.block_on(common::SlowRegistrations::start(
        master.uri(),
        Duration::from_millis(800),
    ));
    let mut talker = run_example("talker", &relay.uri(), &["__name:=hasty_talker"]);
    let mut child = Child(talker.stdout(Stdio::null()).spawn().unwrap());
    let arrived = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), relay.arrived.notified()).await
    });
    assert!(arrived.is_ok(), "the talker never advertised");
    let pid = child.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let mut status = None;
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(10) && status.is_none() {
        status = child.0.try_wait().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{status:?}");
    let left = runtime.block_on(common::registered(master.uri(), "/hasty_talker"));
    assert!(!left, "the master still knows /hasty_talker");
}

/// The master's graph, asked from a runtime of this test's own.
fn system_state(uri: &str) -> udpros::api::SystemState {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let master = udpros::api::MasterClient::new(
            uri,
            "/examples_test",
            udpros::xmlrpc::XmlRpcClient::new(Duration::from_secs(2), Duration::from_secs(10)),
        );
        master.get_system_state().await.unwrap()
    })
}

/// Whether `node` is named anywhere in the master's system state.
fn registered(python: &std::path::Path, master: &str, node: &str) -> bool {
    let mut list = common::ros_tool(python, "rosnode", master);
    list.arg("list");
    let out = list.output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l == node)
}

/// SIGINT, SIGTERM and `rosnode kill` end the examples, which watch no signal themselves:
/// the node shuts down, the listener's `recv()` returns `None`, the talker's
/// `Rate::sleep()` and `ok()` end its loop, the server's `spin()` returns; each exits 0
/// with nothing of it registered, within a second of a signal (the bar).
#[test]
fn signals_and_rosnode_kill_end_an_example_cleanly() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    // The listener waits in recv(), the talker in Rate::sleep(), the server in spin().
    let cases = [
        ("listener", "INT"),
        ("listener", "TERM"),
        ("listener", "rosnode kill"),
        ("talker", "INT"),
        ("talker", "rosnode kill"),
        ("service_server", "TERM"),
    ];
    for (example, how) in cases {
        let name = format!("/{example}_ended_by_{}", how.replace(' ', "_"));
        let mut cmd = run_example(example, &uri, &[&format!("__name:={}", &name[1..])]);
        let mut child = Child(cmd.stdout(Stdio::null()).spawn().unwrap());
        assert!(
            common::wait_for(Duration::from_secs(30), || registered(&python, &uri, &name)),
            "{name} did not register"
        );
        let started = std::time::Instant::now();
        match how {
            "rosnode kill" => {
                let mut kill = common::ros_tool(&python, "rosnode", &uri);
                assert!(kill
                    .args(["kill", &name])
                    .output()
                    .unwrap()
                    .status
                    .success());
            }
            signal => {
                let pid = child.0.id().to_string();
                let sent = Command::new("kill")
                    .args([&format!("-{signal}"), &pid])
                    .status();
                assert!(sent.unwrap().success());
            }
        }
        let mut status = None;
        while started.elapsed() < Duration::from_secs(10) && status.is_none() {
            status = child.0.try_wait().unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        let took = started.elapsed();
        println!("{how}: the {example} example exited after {took:?} with {status:?}");
        assert!(status.is_some_and(|s| s.success()), "{how}: {status:?}");
        assert!(
            !registered(&python, &uri, &name),
            "{how}: {name} still registered"
        );
        // rosnode kill's time includes starting the Python tool.
        let bar = if how == "rosnode kill" { 5 } else { 1 };
        assert!(took < Duration::from_secs(bar), "{how}: {took:?}");
    }
}
