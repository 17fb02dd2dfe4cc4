//! Services against Debian's Noetic: rosservice on udpros servers (std_srvs and a custom
//! service with nested and array fields), rospy and roscpp clients on udpros servers,
//! udpros clients on rospy and roscpp servers (persistent and not, md5 mismatches both
//! ways, 1 MB requests and responses, a killed server, a restarted one), and services
//! registered again after rosmaster restarts.

use udpros_testkit as common;

use common::{node, ros_tool, spawn_lines};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use udpros::msgs::std_srvs::{
    SetBool, SetBoolRequest, SetBoolResponse, Trigger, TriggerRequest, TriggerResponse,
};
use udpros::service::{ClientOptions, DynamicService, ServerOptions, ServiceError};

const WAIT: Duration = Duration::from_secs(30);
const BLOB: &str = "string data\n---\nstring data\n";
const PLAN: &str = "geometry_msgs/Point[] waypoints\nstring[] names\nint32[3] limits\n---\ngeometry_msgs/Pose best\nfloat64[] costs\nstring summary\n";
const MEGABYTE: usize = 1 << 20;

/// A folder of its own for generated Python classes, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(python: &Path) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "udpros-srv-{}-{}",
            std::process::id(),
            common::free_port()
        ));
        common::genpy_services(
            python,
            &dir,
            "udpros_test",
            &[("Blob", BLOB), ("Plan", PLAN)],
        );
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tool(python: &Path, name: &str, master: &str, classes: &Scratch) -> Command {
    let mut cmd = ros_tool(python, name, master);
    cmd.env("PYTHONPATH", with_pythonpath(&classes.0));
    cmd
}

fn with_pythonpath(dir: &Path) -> String {
    match std::env::var("PYTHONPATH") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", dir.display()),
        _ => dir.display().to_string(),
    }
}

/// Runs a tool; (exit code, stdout, stderr).
fn run(mut cmd: Command) -> (i32, String, String) {
    let ran = common::run_tool(&mut cmd);
    (ran.code, ran.stdout, ran.stderr)
}

async fn serve_set_bool(
    node: &udpros::node::Node,
    name: &str,
) -> udpros::service::ServiceServer<SetBool> {
    node.advertise_service::<SetBool, _, _>(name, |req: SetBoolRequest| async move {
        match req.data {
            true => Ok(SetBoolResponse {
                success: true,
                message: "on".into(),
            }),
            false => Err("refusing to switch off".into()),
        }
    })
    .await
    .unwrap()
}

/// udpros_test/Blob served by an echo over the raw API, its md5 computed from the text.
async fn serve_blob(node: &udpros::node::Node, name: &str) -> udpros::service::RawServiceServer {
    let blob = DynamicService::from_text("udpros_test/Blob", BLOB).unwrap();
    assert_eq!(blob.md5sum, "a9e4701c829f791367680c5f8ed06ff4");
    node.advertise_service_raw(
        name,
        "udpros_test/Blob",
        &blob.md5sum,
        ServerOptions::default(),
        |body| async move { Ok(body.to_vec()) },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rosservice_on_udpros_servers() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let classes = Scratch::new(&python);
    let server = node(&uri, "udpros_srv").await;
    let _set_bool = serve_set_bool(&server, "~set_bool").await;
    let _trigger = server
        .advertise_service::<Trigger, _, _>("~trigger", |_: TriggerRequest| async {
            Ok(TriggerResponse {
                success: true,
                message: "triggered".into(),
            })
        })
        .await
        .unwrap();
    // The custom service, served from its definition alone (dynamic values): the best
    // waypoint is the last one, a cost per name, and a summary.
    let plan = DynamicService::from_text("udpros_test/Plan", PLAN).unwrap();
    let (request_type, response_type) = (plan.request.clone(), plan.response.clone());
    let plan_server = server
        .advertise_service_raw(
            "~plan",
            "udpros_test/Plan",
            &plan.md5sum,
            ServerOptions::default(),
            move |body| {
                let (request_type, response_type) = (request_type.clone(), response_type.clone());
                async move {
                    let request = request_type.decode(&body).map_err(|e| e.to_string())?;
                    let names = request
                        .field("names")
                        .map(|n| n.to_yaml())
                        .unwrap_or_default();
                    let last = match request.field("waypoints") {
                        Some(udpros::msg::dynamic::Value::Array(points)) => points.last().cloned(),
                        _ => None,
                    };
                    let yaml = format!(
                        "{{best: {{position: {}}}, costs: [1.5, 2.5], summary: {:?}}}",
                        last.map(|p| p.to_json()).unwrap_or_else(|| "{}".into()),
                        format!("names {}", names.trim().replace('\n', " "))
                    );
                    let value = response_type
                        .value_from_yaml(Some(
                            &udpros::yaml::load(&yaml).map_err(|e| e.to_string())?,
                        ))
                        .map_err(|e| e.to_string())?;
                    response_type.encode(&value).map_err(|e| e.to_string())
                }
            },
        )
        .await
        .unwrap();

    let mut list = tool(&python, "rosservice", &uri, &classes);
    list.arg("list");
    let (code, listed, err) = run(list);
    assert_eq!(code, 0, "{err}");
    for name in [
        "/udpros_srv/get_loggers",
        "/udpros_srv/plan",
        "/udpros_srv/set_bool",
        "/udpros_srv/set_logger_level",
        "/udpros_srv/trigger",
    ] {
        assert!(listed.lines().any(|l| l == name), "{name} not in {listed}");
    }

    let mut info = tool(&python, "rosservice", &uri, &classes);
    info.args(["info", "/udpros_srv/set_bool"]);
    let (code, text, err) = run(info);
    assert_eq!(code, 0, "{err}");
    let port = plan_server.uri().rsplit(':').next().unwrap().to_string();
    assert_eq!(
        text,
        format!("Node: /udpros_srv\nURI: rosrpc://127.0.0.1:{port}\nType: std_srvs/SetBool\nArgs: data\n")
    );

    for (service, expected_type, expected_args) in [
        ("/udpros_srv/set_bool", "std_srvs/SetBool", "data"),
        ("/udpros_srv/trigger", "std_srvs/Trigger", ""),
        (
            "/udpros_srv/plan",
            "udpros_test/Plan",
            "waypoints names limits",
        ),
        ("/udpros_srv/get_loggers", "roscpp/GetLoggers", ""),
    ] {
        let mut ty = tool(&python, "rosservice", &uri, &classes);
        ty.args(["type", service]);
        assert_eq!(run(ty).1.trim(), expected_type);
        let mut args = tool(&python, "rosservice", &uri, &classes);
        args.args(["args", service]);
        assert_eq!(run(args).1.trim(), expected_args);
    }

    let mut call = tool(&python, "rosservice", &uri, &classes);
    call.args(["call", "/udpros_srv/set_bool", "data: true"]);
    let (code, text, err) = run(call);
    assert_eq!(
        (code, text.as_str()),
        (0, "success: True\nmessage: \"on\"\n"),
        "{err}"
    );

    let mut refused = tool(&python, "rosservice", &uri, &classes);
    refused.args(["call", "/udpros_srv/set_bool", "data: false"]);
    let (code, _, err) = run(refused);
    assert_eq!(code, 2);
    assert!(err.contains("refusing to switch off"), "{err}");

    let mut trigger = tool(&python, "rosservice", &uri, &classes);
    trigger.args(["call", "/udpros_srv/trigger"]);
    let (code, text, err) = run(trigger);
    assert_eq!(
        (code, text.as_str()),
        (0, "success: True\nmessage: \"triggered\"\n"),
        "{err}"
    );

    let mut plan_call = tool(&python, "rosservice", &uri, &classes);
    plan_call.args([
        "call",
        "/udpros_srv/plan",
        "{waypoints: [{x: 1, y: 2, z: 3}, {x: 4, y: 5, z: 6}], names: [a, b], limits: [1, 2, 3]}",
    ]);
    let (code, text, err) = run(plan_call);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("x: 4.0\n") && text.contains("z: 6.0"),
        "{text}"
    );
    assert!(text.contains("costs: [1.5, 2.5]"), "{text}");
    assert!(text.contains("summary: \"names - a - b\""), "{text}");
}

/// What the client and server tests need: Debian's Python, the roscpp service peer, a
/// rosmaster and the generated Python classes of the custom services.
struct Peers {
    python: PathBuf,
    cpp: PathBuf,
    _master: common::Child,
    uri: String,
    classes: Scratch,
}

fn peers() -> Option<Peers> {
    let python = common::ros_python()?;
    let cpp = common::roscpp_service_peer()?;
    let (master, uri) = common::start_rosmaster()?;
    let classes = Scratch::new(&python);
    Some(Peers {
        python,
        cpp,
        _master: master,
        uri,
        classes,
    })
}

/// One client run: the lines it printed.
fn client_lines(mut cmd: Command) -> Vec<String> {
    cmd.stdin(std::process::Stdio::null());
    let (code, out, err) = run(cmd);
    assert_eq!(code, 0, "client failed: {err}");
    out.lines().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rospy_and_roscpp_clients_call_udpros_servers() {
    let Some(Peers {
        python,
        cpp,
        _master,
        uri,
        classes,
    }) = peers()
    else {
        return;
    };
    let server = node(&uri, "u").await;
    let set_bool = serve_set_bool(&server, "~set_bool").await;
    let _blob = serve_blob(&server, "~blob").await;
    let rospy_client = |args: &[&str]| {
        let mut cmd = Command::new(&python);
        cmd.arg(common::peer_script("rospy_service_peer.py"))
            .arg("call")
            .args(args);
        common::ros_env(&mut cmd, &uri);
        cmd.env("PYTHONPATH", with_pythonpath(&classes.0));
        client_lines(cmd)
    };
    let cpp_client = |args: &[&str]| {
        let mut cmd = Command::new(&cpp);
        cmd.arg("call").args(args);
        common::ros_env(&mut cmd, &uri);
        client_lines(cmd)
    };
    for persistent in [false, true] {
        let mut args = vec!["/u/set_bool", "setbool", "--count", "4"];
        let mut blob = vec!["/u/blob", "blob", "--count", "2", "--size", "1048576"];
        if persistent {
            args.push("--persistent");
            blob.push("--persistent");
        }
        let py = rospy_client(&args);
        assert_eq!(py.len(), 4, "{py:?}");
        assert_eq!(py[0], "OK 1 on");
        assert!(
            py[1].starts_with("ERR ") && py[1].contains("refusing to switch off"),
            "{py:?}"
        );
        assert_eq!(py[2], "OK 1 on");
        let cpp_lines = cpp_client(&args);
        assert_eq!(
            cpp_lines,
            ["OK 1 on", "FAIL", "OK 1 on", "FAIL"],
            "persistent {persistent}"
        );
        let big = format!("OK {MEGABYTE} same");
        assert_eq!(rospy_client(&blob), [big.clone(), big.clone()]);
        assert_eq!(cpp_client(&blob), [big.clone(), big]);
    }
    assert!(set_bool.calls() >= 16, "{} calls", set_bool.calls());
    // The wrong type: refused with the reason, in rospy's words of it.
    let py = rospy_client(&["/u/blob", "setbool"]);
    assert!(
        py[0].starts_with("ERR ") && py[0].contains("md5sum"),
        "{py:?}"
    );
    assert_eq!(cpp_client(&["/u/blob", "setbool"]), ["FAIL"]);
}

/// A ROS service peer process, ready.
fn serve_peer(mut cmd: Command, master: &str) -> (common::Child, common::Lines) {
    common::ros_env(&mut cmd, master);
    let (child, mut lines) = spawn_lines(cmd);
    assert!(
        lines.wait_for(WAIT, |l| l == "READY").is_some(),
        "peer did not start: {:?}",
        lines.seen
    );
    (child, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udpros_clients_call_rospy_and_roscpp_servers() {
    let Some(Peers {
        python,
        cpp,
        _master,
        uri,
        classes,
    }) = peers()
    else {
        return;
    };
    let rospy_server = |name: &str, ty: &str| {
        let mut cmd = Command::new(&python);
        cmd.arg(common::peer_script("rospy_service_peer.py"))
            .args(["serve", name, ty]);
        cmd.env("PYTHONPATH", with_pythonpath(&classes.0));
        serve_peer(cmd, &uri)
    };
    let cpp_server = |name: &str, ty: &str| {
        let mut cmd = Command::new(&cpp);
        cmd.args(["serve", name, ty]);
        serve_peer(cmd, &uri)
    };
    let _py_bool = rospy_server("/py/set_bool", "setbool");
    let _py_blob = rospy_server("/py/blob", "blob");
    let mut cpp_bool = cpp_server("/cpp/set_bool", "setbool");
    let _cpp_blob = cpp_server("/cpp/blob", "blob");
    let client = node(&uri, "udpros_client").await;
    let blob = DynamicService::from_text("udpros_test/Blob", BLOB).unwrap();
    let big = {
        let text: String = (0..MEGABYTE)
            .map(|i| (b'a' + (i % 26) as u8) as char)
            .collect();
        udpros::wire::to_vec(&text).unwrap()
    };
    for persistent in [false, true] {
        let options = ClientOptions {
            persistent,
            ..ClientOptions::default().with_timeout(Duration::from_secs(10))
        };
        for (server, refusal) in [("/py", "refusing"), ("/cpp", "")] {
            let set_bool =
                client.service_client::<SetBool>(&format!("{server}/set_bool"), options.clone());
            for _ in 0..2 {
                let on = set_bool.call(&SetBoolRequest { data: true }).await.unwrap();
                assert_eq!((on.success, on.message.as_str()), (true, "on"));
                match set_bool.call(&SetBoolRequest { data: false }).await {
                    Err(ServiceError::Failed(text)) => assert!(text.ends_with(refusal), "{text}"),
                    other => panic!("{server}: expected a failed call, got {other:?}"),
                }
            }
            let echo =
                client.service_client_raw(&format!("{server}/blob"), &blob.md5sum, options.clone());
            for _ in 0..2 {
                let answer = echo.call(&big).await.unwrap();
                assert!(answer[..] == big[..], "{server}: 1 MB echo differs");
            }
        }
    }
    // md5 mismatches: each server's own words reach the caller.
    for (service, words) in [
        ("/py/set_bool", "md5sums do not match"),
        ("/cpp/set_bool", "but it has"),
    ] {
        let wrong = client.service_client::<Trigger>(service, ClientOptions::default());
        match wrong.call(&TriggerRequest {}).await {
            Err(ServiceError::Refused(text)) => assert!(text.contains(words), "{text}"),
            other => panic!("{service}: expected a refusal, got {other:?}"),
        }
    }
    // A persistent client whose server is killed (-9): the next call fails at once, well
    // within its timeout; a server started again under the name is reached by the same
    // client.
    let persistent = client.service_client::<SetBool>(
        "/cpp/set_bool",
        ClientOptions::persistent().with_timeout(Duration::from_secs(5)),
    );
    assert!(
        persistent
            .call(&SetBoolRequest { data: true })
            .await
            .unwrap()
            .success
    );
    cpp_bool.0 .0.kill().unwrap();
    let _ = cpp_bool.0 .0.wait();
    let started = Instant::now();
    let failed = persistent.call(&SetBoolRequest { data: true }).await;
    println!(
        "a call to a server killed with -9 failed after {:?}: {failed:?}",
        started.elapsed()
    );
    assert!(failed.is_err());
    assert!(started.elapsed() < Duration::from_secs(5));
    let _cpp_again = cpp_server("/cpp/set_bool", "setbool");
    assert!(
        persistent
            .call(&SetBoolRequest { data: true })
            .await
            .unwrap()
            .success
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_come_back_after_rosmaster_restarts() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let port = common::free_port();
    let uri = format!("http://127.0.0.1:{port}/");
    let start_master = || {
        let mut cmd = Command::new(&python);
        cmd.args(["/usr/bin/rosmaster", "--core", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        common::ros_env(&mut cmd, &uri);
        let child = common::Child(cmd.spawn().expect("rosmaster"));
        assert!(common::wait_for(WAIT, || std::net::TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_ok()));
        child
    };
    let mut master = start_master();
    let server = node(&uri, "survivor").await;
    let _set_bool = serve_set_bool(&server, "~set_bool").await;
    master.0.kill().unwrap();
    let _ = master.0.wait();
    let _master = start_master();
    let client = node(&uri, "asker").await;
    let set_bool = client.service_client::<SetBool>("/survivor/set_bool", ClientOptions::default());
    let deadline = Instant::now() + WAIT;
    let answer = loop {
        match set_bool.call(&SetBoolRequest { data: true }).await {
            Ok(answer) => break answer,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("the service did not come back: {e}"),
        }
    };
    assert!(answer.success);
    let mut list = ros_tool(&python, "rosservice", &uri);
    list.arg("list");
    let listed = run(list).1;
    assert!(listed.contains("/survivor/get_loggers"), "{listed}");
}
