//! `udpros record` beside ROS's own readers: a bag it writes passes Debian's `rosbag info`
//! and plays through `rosbag play` into `rostopic echo` with every message equal; an MCAP
//! it writes decodes with the `mcap` Python package from the stored schemas; a file is never
//! overwritten, and a recording stopped by SIGTERM is closed whole.

use udpros_testkit as common;

use common::random::{random_value, Rng};
use common::ros_tool;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use udpros::msg::dynamic::DynamicType;
use udpros::node::{AdvertiseOptions, Node, RawPublisher};

fn udpros_cmd(master: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.args(args)
        .env("ROS_MASTER_URI", master)
        .env("ROS_IP", "127.0.0.1");
    cmd
}

/// A scratch directory of this test's own, removed when it ends.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("udpros-record-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A command run to its end exited 0 (else its stderr is the failure).
fn assert_succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The folder of the Node.js MCAP reader, if Node and its packages are installed.
fn node_reader() -> Option<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../udpros-record/node-test");
    let node = Command::new("node").arg("--version").output();
    let ready =
        node.is_ok_and(|o| o.status.success()) && dir.join("node_modules/@mcap/core").is_dir();
    ready.then_some(dir)
}

async fn talker(uri: &str, name: &str) -> Node {
    Node::new(
        name,
        [format!("__master:={uri}"), "__ip:=127.0.0.1".to_string()],
    )
    .await
    .unwrap()
}

/// Waits until `publisher` has `n` subscribers.
async fn subscribed(publisher: &RawPublisher, n: usize) {
    let start = Instant::now();
    while publisher.num_subscribers() < n {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no recorder subscribed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bag_recorded_over_udpros_plays_through_rosbag_into_rostopic_echo() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let scratch = Scratch::new("bag");
    let bag = scratch.path("dive.bag");
    let node = talker(&uri, "talker").await;
    let info = udpros::msg::builtin("std_msgs/String").unwrap();
    let publisher = node
        .advertise_raw(
            "/chatter",
            "std_msgs/String",
            info.md5sum,
            info.definition,
            AdvertiseOptions::default(),
        )
        .await
        .unwrap();
    let ty = DynamicType::from_definition("std_msgs/String", info.definition).unwrap();
    let texts: Vec<String> = (0..60)
        .map(|i| format!("message {i} of the dive"))
        .collect();
    let mut recorder = udpros_cmd(
        &uri,
        &[
            "record",
            "--bag",
            "--lz4",
            "-l",
            "60",
            "-O",
            &scratch.path("dive"),
            "/chatter",
        ],
    );
    recorder.stdout(Stdio::null()).stderr(Stdio::piped());
    let recorder = recorder.spawn().unwrap();
    subscribed(&publisher, 1).await;
    // The link is UDPROS (the recorder's first choice with a udpros publisher).
    let links = publisher.links();
    assert!(
        links
            .iter()
            .all(|l| l.protocol == udpros::transport::Protocol::Udp),
        "{links:?}"
    );
    for text in &texts {
        let value = udpros::msg::dynamic::Value::Message(vec![(
            "data".into(),
            udpros::msg::dynamic::Value::String(text.clone()),
        )]);
        publisher.publish_body(&ty.encode(&value).unwrap());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let out = tokio::task::block_in_place(|| recorder.wait_with_output()).unwrap();
    assert_succeeded(&out);
    assert!(Path::new(&bag).exists() && !Path::new(&format!("{bag}.active")).exists());

    let mut rosbag = ros_tool(&python, "rosbag", &uri);
    rosbag.args(["info", "--yaml", &bag]);
    let info = rosbag.output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("messages: 60"), "{info}");
    assert!(info.contains("compression: lz4"), "{info}");
    assert!(info.contains("indexed: True"), "{info}");

    // Played into a master of its own, heard by rostopic echo.
    let Some((_player_master, player_uri)) = common::start_rosmaster() else {
        return;
    };
    let mut echo = ros_tool(&python, "rostopic", &player_uri);
    echo.args(["echo", "-p", "-n", "60", "/chatter"]);
    let (_echo, mut lines) = common::spawn_lines(echo);
    tokio::task::block_in_place(|| {
        std::thread::sleep(Duration::from_secs(2));
        let mut play = ros_tool(&python, "rosbag", &player_uri);
        play.args(["play", "-q", "-d", "2", &bag]);
        let played = play.output().unwrap();
        assert_succeeded(&played);
        let text = lines.rest(Duration::from_secs(30));
        let heard: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('%'))
            .map(|l| l.split_once(',').map(|(_, data)| data).unwrap_or(l))
            .collect();
        assert_eq!(heard, texts, "{text}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcap_recording_decodes_in_python_from_its_stored_schemas() {
    let Some(python) = common::venv_python("mcap_ros1") else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let scratch = Scratch::new("mcap");
    let file = scratch.path("survey.mcap");
    let node = talker(&uri, "survey").await;
    let types = [
        "sensor_msgs/Range",
        "sensor_msgs/Imu",
        "diagnostic_msgs/DiagnosticArray",
    ];
    let mut rng = Rng::new(51);
    let mut publishers = Vec::new();
    for (i, type_name) in types.iter().enumerate() {
        let info = udpros::msg::builtin(type_name).unwrap();
        let ty = DynamicType::from_definition(type_name, info.definition).unwrap();
        let publisher = node
            .advertise_raw(
                &format!("/survey/{i}"),
                type_name,
                info.md5sum,
                info.definition,
                AdvertiseOptions::default(),
            )
            .await
            .unwrap();
        publishers.push((ty, publisher, *type_name));
    }
    let mut recorder = udpros_cmd(
        &uri,
        &["record", "-l", "20", "-O", &file, "-e", "/survey/.*"],
    );
    recorder.stdout(Stdio::null()).stderr(Stdio::piped());
    let recorder = recorder.spawn().unwrap();
    for (_, publisher, _) in &publishers {
        subscribed(publisher, 1).await;
    }
    let mut sent = Vec::new();
    for _ in 0..20 {
        for (i, (ty, publisher, type_name)) in publishers.iter().enumerate() {
            let body = ty.encode(&random_value(ty, type_name, &mut rng)).unwrap();
            publisher.publish_body(&body);
            sent.push(format!("/survey/{i} {type_name} {}", common::to_hex(&body)));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let out = tokio::task::block_in_place(|| recorder.wait_with_output()).unwrap();
    assert_succeeded(&out);
    // Each message decoded by mcap_ros1 from the schema in the file, serialized again by
    // the class it made: the same bytes as were published.
    let script = r#"
import io, math, sys
from mcap.reader import make_reader
from mcap_ros1.decoder import DecoderFactory
with open(sys.argv[1], "rb") as f:
    reader = make_reader(f, decoder_factories=[DecoderFactory()])
    summary = reader.get_summary()
    # 60 messages and, on /udpros/link, how each of them arrived.
    assert summary.statistics.message_count == 120, summary.statistics
    # In the file's order: each topic's messages in the order they arrived (topics
    # interleave as their subscriptions stamped and handed them on, and /udpros/link
    # holds all three).
    last = {}
    for schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=False):
        assert schema.encoding == "ros1msg" and channel.message_encoding == "ros1"
        assert channel.metadata["md5sum"] == decoded._md5sum, channel.metadata
        stream = (channel.id, getattr(decoded, "topic", None))  # /udpros/link: per topic
        assert message.log_time >= last.get(stream, 0), stream
        last[stream] = message.log_time
        if channel.topic == "/udpros/link":
            assert schema.name == "udpros/LinkArrival", schema.name
            stamp = decoded.header.stamp.secs * 10**9 + decoded.header.stamp.nsecs
            assert stamp == message.log_time, (stamp, message.log_time)
            assert not math.isnan(decoded.age), decoded
            print("LINK", decoded.topic, decoded.publisher, decoded.transport,
                  decoded.lost, decoded.incomplete, decoded.dropped)
            continue
        out = io.BytesIO()
        decoded.serialize(out)
        print(channel.topic, schema.name, out.getvalue().hex())
"#;
    let decoded = Command::new(&python)
        .args(["-c", script, &file])
        .output()
        .unwrap();
    assert_succeeded(&decoded);
    let (links, mut got): (Vec<String>, Vec<String>) = String::from_utf8_lossy(&decoded.stdout)
        .lines()
        .map(str::to_string)
        .partition(|l| l.starts_with("LINK "));
    // Each message's arrival: over UDPROS from /survey, nothing lost or dropped here.
    let mut arrivals: Vec<&str> = links.iter().map(|l| l.as_str()).collect();
    arrivals.sort_unstable();
    let mut expected: Vec<String> = (0..3)
        .flat_map(|i| (0..20).map(move |_| format!("LINK /survey/{i} /survey UDPROS 0 0 0")))
        .collect();
    expected.sort_unstable();
    assert_eq!(arrivals, expected);
    // Per topic, in order; topics interleave as the subscribers' tasks ran.
    // Each type starts with a Header, whose seq the publisher numbers as it sends (as
    // roscpp does): compared from the stamp on.
    let comparable = |lines: &mut Vec<String>| {
        lines.sort_by(|a, b| a.split(' ').next().cmp(&b.split(' ').next()));
        lines
            .iter()
            .map(|l| {
                let (name, hex) = l.rsplit_once(' ').unwrap();
                format!("{name} {}", &hex[8..])
            })
            .collect::<Vec<_>>()
    };
    let (got, sent) = (comparable(&mut got), comparable(&mut sent));
    // Foxglove's TypeScript reader finds the same channels through the file's indexes.
    let Some(dir) = node_reader() else {
        common::skip_or_fail("node, or @mcap/core (npm ci in crates/udpros-record/node-test)");
        return;
    };
    let read = Command::new("node")
        .arg("read.mjs")
        .arg(&file)
        .current_dir(dir)
        .output()
        .unwrap();
    assert_succeeded(&read);
    let mut channels: Vec<String> = String::from_utf8_lossy(&read.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    channels.sort_unstable();
    assert_eq!(
        channels,
        [
            "/survey/0 sensor_msgs/Range ros1msg ros1 20",
            "/survey/1 sensor_msgs/Imu ros1msg ros1 20",
            "/survey/2 diagnostic_msgs/DiagnosticArray ros1msg ros1 20",
            "/udpros/link udpros/LinkArrival ros1msg ros1 60",
        ]
    );
    assert_eq!(got.len(), sent.len());
    for (got, sent) in got.iter().zip(&sent) {
        assert_eq!(got, sent);
    }
}

#[test]
fn a_recording_never_overwrites_a_file_and_closes_whole_on_sigterm() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let scratch = Scratch::new("close");
    let kept = scratch.path("kept.bag");
    std::fs::write(&kept, b"the user's own file").unwrap();
    let refused = udpros_cmd(&uri, &["record", "--bag", "-O", &kept, "/x"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let error = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(error.contains("exists"), "{error}");
    assert_eq!(std::fs::read(&kept).unwrap(), b"the user's own file");

    let mut talker = ros_tool(&python, "rostopic", &uri);
    talker.args([
        "pub",
        "-r",
        "50",
        "/depth",
        "std_msgs/Float64",
        "data: 12.5",
    ]);
    let (_talker, _) = common::spawn_lines(talker);
    let bag = scratch.path("cut.bag");
    let mut recorder = udpros_cmd(&uri, &["record", "--bag", "-j", "-O", &bag, "/depth"]);
    recorder.stdout(Stdio::null()).stderr(Stdio::null());
    let mut recorder = common::Child(recorder.spawn().unwrap());
    // Until something is recorded: the file exists as `.active`, then a few seconds more.
    let active = format!("{bag}.active");
    assert!(common::wait_for(Duration::from_secs(30), || Path::new(
        &active
    )
    .exists()));
    std::thread::sleep(Duration::from_secs(3));
    let start = Instant::now();
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(recorder.0.id() as i32, libc::SIGTERM) };
    let status = recorder.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(start.elapsed() < Duration::from_secs(20));
    let mut rosbag = ros_tool(&python, "rosbag", &uri);
    rosbag.args(["info", "--yaml", &bag]);
    let info = rosbag.output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("indexed: True"), "{info}");
    assert!(info.contains("compression: bz2"), "{info}");
    let messages: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("messages: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("a message count");
    assert!(messages >= 20, "{info}");
}

/// A roscpp test peer (`roscpp_peer pub|sub ...`) on `master`, its stdout as lines.
fn roscpp(master: &str, args: &[&str]) -> Option<(common::Child, common::Lines)> {
    let mut cmd = Command::new(common::roscpp_peer()?);
    cmd.args(args);
    common::ros_env(&mut cmd, master);
    Some(common::spawn_lines(cmd))
}

#[test]
fn a_bag_from_rosbag_record_plays_through_udpros_play_into_a_roscpp_subscriber_over_udp() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let scratch = Scratch::new("play");
    let bag = scratch.path("theirs.bag");
    // Debian's recorder, then a roscpp talker of "hello 0", "hello 1", ...: the recorder
    // keeps 40 in a row from whenever it connected.
    let mut record = ros_tool(&python, "rosbag", &uri);
    record.args(["record", "--lz4", "-l", "40", "-O", &bag, "/chatter"]);
    record.stdout(Stdio::null()).stderr(Stdio::null());
    let mut record = common::Child(record.spawn().unwrap());
    std::thread::sleep(Duration::from_secs(2));
    let Some((_talker, _)) = roscpp(
        &uri,
        &["pub", "/chatter", "--rate", "50", "--count", "1000"],
    ) else {
        return;
    };
    let start = Instant::now();
    while record.0.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "rosbag record did not finish"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(Path::new(&bag).exists(), "rosbag record wrote {bag}");

    // Played by udpros into a master of its own, to a roscpp subscriber that takes UDP only.
    let Some((_player_master, player_uri)) = common::start_rosmaster() else {
        return;
    };
    let Some((_sub, mut heard)) = roscpp(
        &player_uri,
        &["sub", "/chatter", "--hints", "udp", "--count", "40"],
    ) else {
        return;
    };
    heard
        .wait_for(Duration::from_secs(30), |l| l == "READY")
        .expect("subscribed");
    let played = udpros_cmd(&player_uri, &["play", "-d", "1", &bag])
        .output()
        .unwrap();
    assert_succeeded(&played);
    let text = heard.rest(Duration::from_secs(30));
    let got: Vec<&str> = text.lines().filter(|l| l.starts_with("RECV")).collect();
    let first: u32 = got
        .first()
        .and_then(|l| l.split(' ').nth(2))
        .and_then(|n| n.parse().ok())
        .expect("a message heard");
    let want: Vec<String> = (first..first + 40)
        .map(|n| format!("RECV hello {n} {} ok", format!("hello {n}").len()))
        .collect();
    assert_eq!(got, want, "{text}");
    // -l over nothing to play (no such topic) ends in one line instead of spinning.
    let started = Instant::now();
    let nothing = udpros_cmd(
        &player_uri,
        &["play", "-l", "-d", "0", "--topics", "/nothing", "--", &bag],
    )
    .output()
    .unwrap();
    assert!(!nothing.status.success());
    let said = String::from_utf8_lossy(&nothing.stderr);
    assert!(said.contains("has no message to play"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// A recorder on a disk of 4 MiB (a tmpfs in a mount namespace of its own): it stops at
/// the full disk with one line, and what it wrote reads back, message for message, as far
/// as it goes.
#[test]
fn a_full_disk_ends_the_recording_in_one_line_and_what_was_written_reads_back() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let text: String = (0..20_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let mut talker = ros_tool(&python, "rostopic", &uri);
    talker.args([
        "pub",
        "-r",
        "100",
        "/blob",
        "std_msgs/String",
        &format!("data: {text}"),
    ]);
    let (_talker, _) = common::spawn_lines(talker);
    let mut body = (text.len() as u32).to_le_bytes().to_vec();
    body.extend_from_slice(text.as_bytes());
    for format in ["--bag", "--compression=none"] {
        let scratch = Scratch::new(&format!("full{format}"));
        let (full, out) = (scratch.path("full"), scratch.path("out"));
        std::fs::create_dir_all(&full).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        let script = r#"mount -t tmpfs -o size=4m none "$1" || exit 99
"$2" record "$4" -O "$1/x" /blob
echo "exit $?" >&2
cp "$1"/* "$3"/"#;
        let ran = udpros_cmd(&uri, &[]).get_program().to_owned();
        let run = Command::new("unshare")
            .args([
                "-m",
                "sh",
                "-c",
                script,
                "sh",
                &full,
                ran.to_str().unwrap(),
                &out,
                format,
            ])
            .env("ROS_MASTER_URI", &uri)
            .env("ROS_IP", "127.0.0.1")
            .output();
        let run = match run {
            Ok(run) if run.status.code() != Some(99) => run,
            _ => {
                common::skip_or_fail(
                    "root, to mount a small tmpfs in a mount namespace (unshare -m)",
                );
                return;
            }
        };
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains("exit 1"), "{stderr}");
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("udpros: ") && !l.starts_with("udpros: record: "))
            .collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains("No space left on device"), "{stderr}");
        let name = if format == "--bag" { "x.bag" } else { "x.mcap" };
        let file = std::fs::read(Path::new(&out).join(name)).expect("the recording, renamed");
        assert!(file.len() <= 4 << 20);
        let items = udpros_record::read_recording(
            std::io::Cursor::new(file),
            udpros_record::Limits::default(),
        )
        .unwrap();
        let mut messages = 0;
        for item in items {
            match item {
                Ok(udpros_record::Item::Message { data, .. }) if data.len() == body.len() => {
                    assert_eq!(data, body);
                    messages += 1;
                }
                // /udpros/link's arrivals, and the connections.
                Ok(_) => {}
                Err(e) => {
                    assert!(e.to_string().contains("cut short"), "{e}");
                    break;
                }
            }
        }
        // 4 MiB holds 200 messages of 20 kB; the chunk being written (1 MiB at most) is
        // lost to the cut.
        assert!(messages >= 120, "{format}: {messages} messages read back");
    }
}

/// `udpros convert`: a Ping Viewer log of a simulated Ping360 into MCAP, every frame as
/// the device sent it, stamped from the log's start; an existing output is refused.
#[test]
fn a_ping_viewer_log_converts_into_mcap_frame_for_frame() {
    use udpros_bridges::ping::log::LogReader;
    let scratch = Scratch::new("convert");
    let (log, out) = (scratch.path("ping360.bin"), scratch.path("ping360.mcap"));
    let recorded = Command::new(env!("CARGO_BIN_EXE_udpros"))
        .args(["ping", "record", "sim:ping360", &log, "--duration", "2"])
        .output()
        .unwrap();
    assert_succeeded(&recorded);
    let converted = Command::new(env!("CARGO_BIN_EXE_udpros"))
        .args(["convert", &log, &out, "--start", "1700000000.5"])
        .output()
        .unwrap();
    assert_succeeded(&converted);

    let bytes = std::fs::read(&log).unwrap();
    let mut reader = LogReader::new(&bytes[..]).unwrap();
    let mut want = Vec::new();
    while let Some(record) = reader.next_record().unwrap() {
        let ns = 1_700_000_000_500_000_000 + record.at.as_nanos() as u64;
        want.push((ns, record.frame));
    }
    assert!(want.len() > 10, "{} frames in 2 s", want.len());
    let file = std::fs::File::open(&out).unwrap();
    let items = udpros_record::read_recording(
        std::io::BufReader::new(file),
        udpros_record::Limits::default(),
    )
    .unwrap();
    let mut got = Vec::new();
    for item in items {
        match item.unwrap() {
            udpros_record::Item::Connection { connection, .. } => {
                assert_eq!(connection.msg_type, "udpros/PingFrame");
                assert_eq!(connection.topic, "/ping/frames");
            }
            udpros_record::Item::Message { time_ns, data, .. } => {
                let frame: udpros::msgs::udpros::PingFrame =
                    udpros::wire::from_slice(&data).unwrap();
                assert_eq!(frame.header.frame_id, "ping360");
                let stamp = u64::from(frame.header.stamp.sec) * 1_000_000_000
                    + u64::from(frame.header.stamp.nsec);
                assert_eq!(stamp, time_ns);
                assert_eq!(
                    frame.message_id,
                    u16::from_le_bytes([frame.frame[4], frame.frame[5]])
                );
                got.push((time_ns, frame.frame.to_vec()));
            }
        }
    }
    assert_eq!(got, want);
    // Never over an existing file: refused, and the file is as it was.
    let before = std::fs::read(&out).unwrap();
    let again = Command::new(env!("CARGO_BIN_EXE_udpros"))
        .args(["convert", &log, &out])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("cannot create"));
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

/// `udpros play --pause` on a terminal (a pty from util-linux's `script`): nothing is
/// published until space is pressed, then everything, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn play_paused_publishes_nothing_until_space_is_pressed() {
    use std::io::Write;
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let scratch = Scratch::new("pause");
    let bag = scratch.path("paused.bag");
    let info = udpros::msg::builtin("std_msgs/String").unwrap();
    let ty = DynamicType::from_definition("std_msgs/String", info.definition).unwrap();
    let writer = udpros_record::bag::Writer::new(
        std::fs::File::create(&bag).unwrap(),
        udpros_record::Compression::None,
    )
    .unwrap();
    let mut recording = udpros_record::Writer::Bag(writer.with_chunk_threshold(1 << 20));
    let id = recording
        .add_connection(&udpros_record::Connection {
            topic: "/paused".into(),
            msg_type: "std_msgs/String".into(),
            md5sum: info.md5sum.into(),
            definition: info.definition.into(),
            callerid: "/talker".into(),
            latching: false,
        })
        .unwrap();
    for i in 0..10u64 {
        let value = udpros::msg::dynamic::Value::Message(vec![(
            "data".into(),
            udpros::msg::dynamic::Value::String(format!("step {i}")),
        )]);
        recording
            .write(
                id,
                1_700_000_000_000_000_000 + i * 50_000_000,
                &ty.encode(&value).unwrap(),
            )
            .unwrap();
    }
    recording.finish().unwrap();

    let node = talker(&uri, "listener").await;
    let sub = node
        .subscribe_raw("/paused", udpros::node::SubscribeOptions::default())
        .await
        .unwrap();
    let command = format!("{} play -d 0.5 --pause {bag}", env!("CARGO_BIN_EXE_udpros"));
    let mut player = match Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("ROS_MASTER_URI", &uri)
        .env("ROS_IP", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(child) => common::Child(child),
        Err(_) => {
            common::skip_or_fail("util-linux's script, for a terminal");
            return;
        }
    };
    // Paused: nothing in 3 s.
    let early = tokio::time::timeout(Duration::from_secs(3), sub.recv()).await;
    assert!(early.is_err(), "a message before space was pressed");
    player.0.stdin.as_mut().unwrap().write_all(b" ").unwrap();
    let mut heard = Vec::new();
    while heard.len() < 10 {
        let received = tokio::time::timeout(Duration::from_secs(10), sub.recv())
            .await
            .expect("the messages after space")
            .expect("a message");
        heard.push(ty.decode(&received.body).unwrap().to_json());
    }
    let want: Vec<String> = (0..10)
        .map(|i| format!("{{\"data\":\"step {i}\"}}"))
        .collect();
    assert_eq!(heard, want);
    let _ = player.0.wait();
}

/// Like rosbag record (a roscpp node), `udpros record` started before its master waits for
/// it and records once it answers; a signal while it waits ends it cleanly, with no file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorder_started_before_its_master_waits_for_it() {
    let port = common::free_port();
    let uri = format!("http://127.0.0.1:{port}/");
    let scratch = Scratch::new("master-late");

    let never = scratch.path("never.bag");
    let mut waiting = udpros_cmd(&uri, &["record", "--bag", "-O", &never, "/depth"]);
    waiting.stdout(Stdio::null()).stderr(Stdio::null());
    let mut waiting = common::Child(waiting.spawn().unwrap());
    let bag = scratch.path("late.bag");
    let mut recorder = udpros_cmd(
        &uri,
        &["record", "--bag", "--no-link-channel", "-O", &bag, "/depth"],
    );
    recorder.stdout(Stdio::null()).stderr(Stdio::null());
    let mut recorder = common::Child(recorder.spawn().unwrap());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        recorder.0.try_wait().unwrap().is_none(),
        "the recorder gave up before the master came"
    );
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(waiting.0.id() as i32, libc::SIGTERM) };
    let status = tokio::task::block_in_place(|| waiting.0.wait().unwrap());
    assert!(status.success(), "{status:?}");
    assert!(!Path::new(&never).exists() && !Path::new(&format!("{never}.active")).exists());

    let mut master = udpros_cmd(
        &uri,
        &["master", "--host", "127.0.0.1", "--port", &port.to_string()],
    );
    master.stdout(Stdio::null()).stderr(Stdio::null());
    let _master = common::Child(master.spawn().unwrap());
    let node = talker(&uri, "late_talker").await;
    let publisher = node
        .advertise::<udpros::msgs::std_msgs::Float64>("/depth", AdvertiseOptions::default())
        .await
        .unwrap();
    let start = Instant::now();
    while publisher.num_subscribers() < 1 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no recorder subscribed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sent: u32 = 20;
    for i in 0..sent {
        publisher
            .publish(&udpros::msgs::std_msgs::Float64 { data: f64::from(i) })
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    // SAFETY: as above.
    unsafe { libc::kill(recorder.0.id() as i32, libc::SIGINT) };
    let status = tokio::task::block_in_place(|| recorder.0.wait().unwrap());
    assert!(status.success(), "{status:?}");
    node.shutdown().await;
    let file = std::fs::File::open(&bag).unwrap();
    let recorded = udpros_record::read_recording(
        std::io::BufReader::new(file),
        udpros_record::Limits::default(),
    )
    .unwrap()
    .filter(|item| matches!(item, Ok(udpros_record::Item::Message { .. })))
    .count();
    assert_eq!(recorded, sent as usize);
}

/// CLOCK_MONOTONIC and CLOCK_REALTIME − CLOCK_MONOTONIC, in ns: the same for every process
/// on this host, so the test knows when the demo's simulated autopilot sampled each ATTITUDE.
fn monotonic_and_wall_base() -> (i64, i64) {
    let mono = udpros_bridges::mavlink::clock::monotonic_ns();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    (mono, wall - mono)
}

/// The demo recorded for 30 s (`udpros record -a`, MCAP) holds the sonar's echoes and
/// frames, the Ping1D's ranges, the autopilot's ATTITUDE and TIMESYNC on `~messages` and
/// mavros's `~timesync_status`, and the link channel. Each ATTITUDE's stamp, its
/// `time_boot_ms` moved onto the ROS clock with the TIMESYNC offset, lies within 1 ms of
/// when the simulated autopilot sampled it (its clock: 1 s behind CLOCK_MONOTONIC,
/// 25 ppm fast, over a link of 1.5 ms up and 2.5 ms down with jitter and 1 % loss), so an
/// echo and the attitude nearest it in time are paired as they happened.
#[test]
fn the_demo_recorded_puts_sonar_and_autopilot_on_one_clock() {
    let port = common::free_port();
    let uri = format!("http://127.0.0.1:{port}/");
    let scratch = Scratch::new("demo");
    let (started, _) = monotonic_and_wall_base();
    let mut demo = udpros_cmd(
        &uri,
        &["demo", "--plain", "--view-port", "0", "--duration", "90"],
    );
    demo.stdout(Stdio::null()).stderr(Stdio::null());
    let _demo = common::Child(demo.spawn().unwrap());
    let file = scratch.path("demo.mcap");
    let recorded = udpros_cmd(
        &uri,
        &["record", "-a", "-q", "--duration", "30", "-O", &file],
    )
    .output()
    .unwrap();
    assert_succeeded(&recorded);

    let reader = std::io::BufReader::new(std::fs::File::open(&file).unwrap());
    let mut topics = std::collections::HashMap::new();
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    let (mut echoes, mut attitude_errors, mut timesyncs) = (Vec::new(), Vec::new(), 0);
    let (_, wall_base) = monotonic_and_wall_base();
    for item in udpros_record::read_recording(reader, udpros_record::Limits::default()).unwrap() {
        match item.unwrap() {
            udpros_record::Item::Connection { id, connection } => {
                topics.insert(id, connection.topic);
            }
            udpros_record::Item::Message {
                connection, data, ..
            } => {
                let topic = topics[&connection].clone();
                *counts.entry(topic.clone()).or_default() += 1;
                match topic.as_str() {
                    "/ping360/echo" => {
                        let echo: udpros::msgs::udpros::Ping360Echo =
                            udpros::wire::from_slice(&data).unwrap();
                        echoes.push(echo.header.stamp.as_nanos() as i64);
                    }
                    "/mavlink_bridge/messages" => {
                        use udpros::msgs::udpros::MavlinkMessage;
                        let m: MavlinkMessage = udpros::wire::from_slice(&data).unwrap();
                        assert!(!m.frame.is_empty() && m.msgid != 0 || m.name == "HEARTBEAT");
                        timesyncs += usize::from(m.name == "TIMESYNC");
                        if m.name != "ATTITUDE" || m.stamp_source != MavlinkMessage::STAMP_BOOT_TIME
                        {
                            continue;
                        }
                        let fields: serde_json::Value = serde_json::from_str(&m.json).unwrap();
                        let remote = fields["time_boot_ms"].as_i64().unwrap() * 1_000_000;
                        // The demo's autopilot clock: remote = local − 1 s + (local − its
                        // start) · 25 ppm; its start is within seconds of `started`, which
                        // moves the truth by tens of µs at most.
                        let (offset, drift) = (-1_000_000_000f64, 25e-6);
                        let local =
                            (remote as f64 - offset + started as f64 * drift) / (1.0 + drift);
                        let truth = local as i64 + wall_base;
                        attitude_errors.push((m.header.stamp.as_nanos() as i64 - truth).abs());
                    }
                    _ => {}
                }
            }
        }
    }
    println!("{counts:?}");
    for topic in [
        "/ping360/echo",
        "/ping360/frames",
        "/ping1d/range",
        "/ping1d/frames",
        "/mavlink_bridge/messages",
        "/mavlink_bridge/timesync_status",
        "/udpros/link",
    ] {
        assert!(
            counts.get(topic).is_some_and(|&n| n > 0),
            "{topic}: {counts:?}"
        );
    }
    assert!(timesyncs > 0, "TIMESYNC replies on ~messages");
    // 50 Hz for most of 30 s, less the start and the 1 % the link loses.
    assert!(
        attitude_errors.len() > 500,
        "{} ATTITUDE",
        attitude_errors.len()
    );
    attitude_errors.sort_unstable();
    let at = |q: f64| attitude_errors[((attitude_errors.len() - 1) as f64 * q) as usize];
    println!(
        "ATTITUDE stamp − sample time: p50 {} µs, p95 {} µs, max {} µs, over {}",
        at(0.5) / 1000,
        at(0.95) / 1000,
        at(1.0) / 1000,
        attitude_errors.len()
    );
    assert!(at(0.95) < 1_000_000, "p95 {} ns", at(0.95));
    // The echoes are stamped on the same ROS clock (their arrival): with each ATTITUDE
    // within 1 ms of its sample, the attitude nearest an echo is the one it met.
    let recorded_for = echoes.iter().max().unwrap() - echoes.iter().min().unwrap();
    assert!(echoes.len() > 100, "{} echoes", echoes.len());
    assert!(
        recorded_for > 20_000_000_000,
        "echoes over {recorded_for} ns"
    );
}
