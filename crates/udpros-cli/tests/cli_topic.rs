//! `udpros topic` beside `rostopic`: the same YAML for the same messages, and `udpros topic
//! pub` received by stock tools.

use udpros_testkit as common;

use common::random::{random_value, Rng};
use common::ros_tool;
use std::process::Command;
use std::time::Duration;
use udpros::msg::dynamic::DynamicType;
use udpros::node::{AdvertiseOptions, Node};

fn udpros_cmd(master: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.args(args)
        .env("ROS_MASTER_URI", master)
        .env("ROS_IP", "127.0.0.1");
    cmd
}

fn output(mut cmd: Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

const TYPES: &[&str] = &[
    "std_msgs/String",
    "std_msgs/Int32",
    "std_msgs/Float64",
    "std_msgs/Header",
    "std_msgs/UInt8MultiArray",
    "sensor_msgs/Range",
    "sensor_msgs/LaserScan",
    "sensor_msgs/Imu",
    "sensor_msgs/JointState",
    "sensor_msgs/NavSatFix",
    "geometry_msgs/PoseStamped",
    "geometry_msgs/TwistStamped",
    "diagnostic_msgs/DiagnosticArray",
    "rosgraph_msgs/Log",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udpros_topic_echo_prints_what_rostopic_echo_prints() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let node = Node::new(
        "typed_talker",
        [format!("__master:={uri}"), "__ip:=127.0.0.1".to_string()],
    )
    .await
    .unwrap();
    let mut rng = Rng::new(42);
    let mut publishers = Vec::new();
    for (i, type_name) in TYPES.iter().enumerate() {
        let info = udpros::msg::builtin(type_name).unwrap();
        let ty = DynamicType::from_definition(type_name, info.definition).unwrap();
        let body = ty.encode(&random_value(&ty, type_name, &mut rng)).unwrap();
        let topic = format!("/echo_{i}");
        let options = AdvertiseOptions::latched();
        let p = node
            .advertise_raw(&topic, type_name, info.md5sum, info.definition, options)
            .await
            .unwrap();
        p.publish_body(&body);
        publishers.push((topic, p));
    }
    tokio::task::block_in_place(|| {
        for (i, (topic, _)) in publishers.iter().enumerate() {
            let mut ros = ros_tool(&python, "rostopic", &uri);
            ros.args(["echo", "-n", "1", topic]);
            let theirs = output(ros);
            let ours = output(udpros_cmd(&uri, &["topic", "echo", "-n", "1", topic]));
            assert_eq!(ours, theirs, "{} on {topic}", TYPES[i]);
            let json = output(udpros_cmd(
                &uri,
                &[
                    "topic",
                    "echo",
                    "-n",
                    "1",
                    "--json",
                    "--transport",
                    "tcp",
                    topic,
                ],
            ));
            let parsed: serde_json::Value =
                serde_json::from_str(json.trim()).expect("one JSON object");
            assert!(parsed.is_object());
        }
    });
}

#[test]
fn udpros_topic_pub_reaches_rostopic_echo() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let publish = udpros_cmd(
        &uri,
        &[
            "topic",
            "pub",
            "-r",
            "10",
            "/cli",
            "geometry_msgs/Point",
            "{x: 1.5, y: -2, z: 0}",
        ],
    );
    let (publisher, _) = common::spawn_lines(publish);
    let mut echo = ros_tool(&python, "rostopic", &uri);
    echo.args(["echo", "-n", "1", "/cli"]);
    let (_echo, mut lines) = common::spawn_lines(echo);
    let text = lines.rest(Duration::from_secs(30));
    assert_eq!(text, "x: 1.5\ny: -2.0\nz: 0.0\n---");
    // Its node serves the logger services, as the rospy node of `rostopic pub` does.
    let node = format!("/udpros_topic_{}", publisher.0.id());
    let mut list = ros_tool(&python, "rosservice", &uri);
    list.arg("list");
    let services = output(list);
    for service in ["get_loggers", "set_logger_level"] {
        assert!(
            services.contains(&format!("{node}/{service}\n")),
            "{service} of {node} in {services}"
        );
    }
    let mut call = ros_tool(&python, "rosservice", &uri);
    call.args([
        "call",
        &format!("{node}/set_logger_level"),
        "{logger: ros, level: debug}",
    ]);
    output(call);
}

#[test]
fn topic_errors_are_one_line() {
    let out = udpros_cmd("http://127.0.0.1:9/", &["topic", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("cannot reach the master"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn type_find_bw_and_delay_report_a_stamped_topic() {
    let master = udpros::master::Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let node = common::node(&uri, "stamped_talker").await;
    let publisher = node
        .advertise::<udpros::msgs::sensor_msgs::Range>("/stamped", AdvertiseOptions::default())
        .await
        .unwrap();
    let talking = tokio::spawn(async move {
        for _ in 0..200 {
            let msg = udpros::msgs::sensor_msgs::Range {
                header: udpros::msgs::std_msgs::Header {
                    stamp: udpros::msg::Time::now(),
                    ..Default::default()
                },
                range: 1.5,
                ..Default::default()
            };
            let _ = publisher.publish(&msg);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let run = |args: &'static [&'static str]| {
        let uri = uri.clone();
        tokio::task::spawn_blocking(move || output(udpros_cmd(&uri, args)))
    };
    assert_eq!(
        run(&["topic", "type", "/stamped"]).await.unwrap(),
        "sensor_msgs/Range\n"
    );
    assert_eq!(
        run(&["topic", "find", "sensor_msgs/Range"]).await.unwrap(),
        "/stamped\n"
    );
    let bw = run(&["topic", "bw", "--duration", "2.5", "/stamped"])
        .await
        .unwrap();
    // A Range with an empty frame id is 16 (header) + 1 + 4 × 4 = 33 bytes; at 50 Hz the
    // rate is over 1000 B/s, so rostopic's unit for every figure is KB.
    assert!(bw.contains("mean: 0.03KB min: 0.03KB max: 0.03KB"), "{bw}");
    let delay = run(&["topic", "delay", "--duration", "2.5", "/stamped"])
        .await
        .unwrap();
    let first = delay
        .lines()
        .find_map(|l| l.strip_prefix("average delay: "))
        .unwrap_or_else(|| panic!("{delay}"));
    let seconds: f64 = first.parse().unwrap();
    assert!((0.0..0.5).contains(&seconds), "{delay}");
    talking.abort();
}

/// The `secs`/`nsecs` pair under `stamp:` in echo's YAML, as seconds.
fn stamp_seconds(yaml: &str) -> f64 {
    let mut lines = yaml
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("stamp:"));
    let mut field = |name: &str| -> f64 {
        lines
            .find_map(|l| l.trim().strip_prefix(name)?.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name} under stamp in {yaml}"))
    };
    let secs = field("secs:");
    secs + field("nsecs:") * 1e-9
}

/// Under `/use_sim_time`, the tool is a sim-time node too: `topic pub` stamps
/// `header: auto` with `/clock`'s time, `topic echo --offset` shows stamps as offsets from
/// it (as `rostopic echo --offset` does), and `topic delay` measures against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_sim_time_pub_echo_offset_and_delay_use_ros_time() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let driver = common::node(&uri, "clock_driver").await;
    driver
        .set_param("/use_sim_time", udpros::xmlrpc::Value::Bool(true))
        .await
        .unwrap();
    let (ticking, sim_now) =
        common::simulated_clock(&driver, udpros::msg::Time::new(1000, 0)).await;
    // Stamped 2.5 s in the past of sim time.
    let stamped = driver
        .advertise::<udpros::msgs::geometry_msgs::PointStamped>(
            "/stamped",
            AdvertiseOptions::default(),
        )
        .await
        .unwrap();
    let stamp_now = sim_now.clone();
    let talking = tokio::spawn(async move {
        loop {
            let mut msg = udpros::msgs::geometry_msgs::PointStamped::default();
            msg.header.stamp = stamp_now() - udpros::msg::Duration::from_secs_f64(2.5);
            let _ = stamped.publish(&msg);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let run = |args: &'static [&'static str]| {
        let uri = uri.clone();
        tokio::task::spawn_blocking(move || output(udpros_cmd(&uri, args)))
    };
    let ours = run(&["topic", "echo", "--offset", "-n", "1", "/stamped"])
        .await
        .unwrap();
    // rostopic's first message can race its first /clock (rospy's time is 0 until then, so
    // that offset is the stamp itself): judge its last of five. Ours waits for the clock.
    let theirs = tokio::task::block_in_place(|| {
        let mut echo = ros_tool(&python, "rostopic", &uri);
        echo.args(["echo", "--offset", "-n", "5", "/stamped"]);
        output(echo)
    });
    let theirs_last = theirs.rsplit("header:").next().unwrap_or_default();
    for (who, text) in [("udpros", ours.as_str()), ("rostopic", theirs_last)] {
        let offset = stamp_seconds(text);
        assert!((-3.0..-2.4).contains(&offset), "{who}: {offset} in {text}");
    }

    let mut auto = driver
        .subscribe::<udpros::msgs::geometry_msgs::PointStamped>(
            "/auto",
            udpros::node::SubscribeOptions::default(),
        )
        .await
        .unwrap();
    let mut publish = udpros_cmd(
        &uri,
        &[
            "topic",
            "pub",
            "/auto",
            "geometry_msgs/PointStamped",
            "header: auto",
        ],
    );
    let _published = common::Child(publish.spawn().unwrap());
    let got = tokio::time::timeout(Duration::from_secs(20), auto.recv())
        .await
        .expect("the latched message arrives")
        .unwrap();
    let age = (sim_now() - got.header.stamp).as_secs_f64();
    assert!(
        (0.0..15.0).contains(&age),
        "stamped in sim time: {:?}",
        got.header
    );

    let delay = run(&["topic", "delay", "--duration", "2.5", "/stamped"])
        .await
        .unwrap();
    let average: f64 = delay
        .lines()
        .find_map(|l| l.strip_prefix("average delay: ")?.parse().ok())
        .unwrap_or_else(|| panic!("{delay}"));
    assert!((2.4..3.0).contains(&average), "{delay}");
    ticking.abort();
    talking.abort();
}

/// `udpros topic hz /x | head -1`: when the reader of its output goes, hz ends cleanly (no
/// panic on the broken pipe) and its node leaves the graph.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hz_into_a_closed_pipe_ends_and_unregisters() {
    use std::io::{BufRead, BufReader};
    let master = udpros::master::Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let mut hz = udpros_cmd(&uri, &["topic", "hz", "/nothing_here"]);
    hz.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = common::Child(hz.spawn().unwrap());
    let mut first = String::new();
    BufReader::new(child.0.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(
        first.starts_with("subscribed to [/nothing_here]"),
        "{first}"
    );
    drop(child.0.stdout.take()); // as `head -1` does after its line
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "hz kept running");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The node unregistered as it left (waited for a moment: the master's own
    // bookkeeping on a loaded machine).
    let master = master_client(&uri);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let graph = master.get_system_state().await.unwrap();
        let gone = graph
            .subscribers
            .iter()
            .all(|(topic, _)| topic != "/nothing_here");
        if gone {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "hz's node is still subscribed: {:?}; hz's stderr: {stderr}",
            graph.subscribers
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn master_client(uri: &str) -> udpros::api::MasterClient {
    udpros::api::MasterClient::new(
        uri,
        "/cli_topic_test",
        udpros::xmlrpc::XmlRpcClient::new(Duration::from_secs(2), Duration::from_secs(10)),
    )
}

/// `topic pub --max-rate` caps each of its links (bytes per second): 1 kB messages at
/// 200 Hz reach a udpros subscriber at about two a second under a 2000 B/s cap, whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_pub_max_rate_caps_its_links() {
    pub_under_a_cap("--max-rate", "/capped").await;
}

/// `topic pub --max-rate-per-host` caps what its links to one host send together: the
/// same as one link's cap when one subscriber listens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_pub_max_rate_per_host_caps_the_host() {
    pub_under_a_cap("--max-rate-per-host", "/capped_host").await;
}

/// Publishes 1 kB at 200 Hz on `topic` under `cap` 2000 and checks what arrives.
async fn pub_under_a_cap(cap: &str, topic: &str) {
    let master = udpros::master::Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let text = "x".repeat(1000);
    let yaml = format!("data: {text}");
    let publish = udpros_cmd(
        master.uri(),
        &[
            "topic",
            "pub",
            "-r",
            "200",
            cap,
            "2000",
            topic,
            "std_msgs/String",
            &yaml,
        ],
    );
    let (_publisher, _) = common::spawn_lines(publish);
    let listener = common::node(master.uri(), "capped_listener").await;
    let mut sub = listener
        .subscribe::<udpros::msgs::std_msgs::String>(
            topic,
            udpros::node::SubscribeOptions::default(),
        )
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(30), sub.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.data, text);
    const WINDOW: Duration = Duration::from_secs(4);
    let end = tokio::time::Instant::now() + WINDOW;
    let mut count = 0;
    while let Ok(Some(message)) = tokio::time::timeout_at(end, sub.recv()).await {
        assert_eq!(message.data.len(), 1000, "whole");
        count += 1;
    }
    // 2000 B/s of 1 kB messages: 8 in 4 s, where 800 are published.
    assert!((1..=16).contains(&count), "{cap}: {count} in {WINDOW:?}");
    // `topic hz` shows what the publisher says of its link to it: what the cap dropped.
    let hz = output(udpros_cmd(
        master.uri(),
        &["topic", "hz", topic, "--duration", "4"],
    ));
    let dropped: Vec<u64> = hz
        .lines()
        .filter_map(|l| {
            l.split_once("(the publisher's view): ")?
                .1
                .split_once(" dropped")
        })
        .filter_map(|(n, _)| n.rsplit(' ').next()?.parse().ok())
        .collect();
    assert!(dropped.iter().any(|n| *n > 100), "{cap}: {hz}");
}
