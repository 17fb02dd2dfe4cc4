//! Ping Viewer logs end to end: `~record` writes what a simulated Ping360 sends, an
//! independent reader (Python, from the format's facts) and brping read every frame of it,
//! and `ping_sonar _device:=replay:FILE` publishes the same pings again, at the speed asked,
//! stamped in ROS time; a damaged log plays as far as it goes, with one line saying why.

use udpros_testkit as common;

use common::node;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use udpros::master::Master;
use udpros::msgs::udpros as umsg;
use udpros::node::SubscribeOptions;
use udpros_bridges::ping::link::LinkSpec;
use udpros_bridges::ping::log::{LogReader, Record};
use udpros_bridges::ping::messages::Message;
use udpros_bridges::ping::node::{run, Config};
use udpros_bridges::ping::DeviceKind;

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("udpros-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every record of a log, and the reader's problem.
fn records(path: &Path) -> (Vec<Record>, Option<String>) {
    let bytes = std::fs::read(path).unwrap();
    let mut log = LogReader::new(&bytes[..]).unwrap();
    let mut out = Vec::new();
    while let Some(r) = log.next_record().unwrap() {
        out.push(r);
    }
    (out, log.problem())
}

/// (angle in gradians, intensities) of each Ping360 data frame among `records`.
fn pings(records: &[Record]) -> Vec<(u16, Vec<u8>)> {
    records
        .iter()
        .filter_map(|r| {
            let id = u16::from_le_bytes([r.frame[4], r.frame[5]]);
            match Message::decode(id, &r.frame[8..r.frame.len() - 2]).ok()? {
                Message::DeviceData(d) => Some((d.angle, d.data.to_vec())),
                Message::AutoDeviceData(d) => Some((d.angle, d.data.to_vec())),
                _ => None,
            }
        })
        .collect()
}

/// Records a simulated Ping360 through the node's `~record` until `n` echoes were published:
/// streaming by itself (auto_device_data) or asked angle by angle (device_data).
async fn record_ping360(path: &Path, n: usize, auto_transmit: bool) {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let sonar = node(master.uri(), "ping_sonar").await;
    let mut cfg = Config::new(LinkSpec::Sim(DeviceKind::Ping360));
    cfg.record = Some(path.to_path_buf());
    cfg.use_auto_transmit = auto_transmit;
    let task = tokio::spawn(run(sonar.clone(), cfg));
    let listener = node(master.uri(), "listener").await;
    let mut echoes = listener
        .subscribe::<umsg::Ping360Echo>("/ping_sonar/echo", SubscribeOptions::default())
        .await
        .unwrap();
    for i in 0..n {
        tokio::time::timeout(Duration::from_secs(20), echoes.recv())
            .await
            .unwrap_or_else(|_| panic!("echo {i}"))
            .unwrap();
    }
    sonar.shutdown().await;
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_reads_in_brping_and_replays_the_same_pings_at_the_speed_asked() {
    let dir = scratch("ping-log");
    let log = dir.join("ping360.bin");
    // Angle by angle: brping 0.1.5 cannot unpack auto_device_data.
    record_ping360(&log, 80, false).await;
    let (recorded, problem) = records(&log);
    assert_eq!(problem, None);
    let recorded_pings = pings(&recorded);
    assert!(recorded_pings.len() >= 80, "{}", recorded_pings.len());

    // The independent reader and brping: the header, and every frame whole.
    if let Some(python) = common::venv_python("brping") {
        let out = Command::new(python)
            .arg(common::peer_script("ping_log_check.py"))
            .arg(&log)
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success());
        let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let header = &lines[0];
        assert_eq!(header["header"], "PingViewer sensor log file");
        assert_eq!(
            (header["version"].as_i64(), header["family"].as_i64()),
            (Some(1), Some(1))
        );
        assert_eq!(header["type"].as_i64(), Some(2), "a Ping360");
        let summary = lines.last().unwrap();
        assert_eq!(summary["records"].as_u64(), Some(recorded.len() as u64));
        assert_eq!(
            summary["decoded"], summary["records"],
            "brping decodes every frame"
        );
        let theirs: Vec<(u64, u16, usize)> = lines[1..lines.len() - 1]
            .iter()
            .filter(|l| !l["angle"].is_null())
            .map(|l| {
                (
                    l["at_ms"].as_u64().unwrap(),
                    l["angle"].as_u64().unwrap() as u16,
                    l["samples"].as_u64().unwrap() as usize,
                )
            })
            .collect();
        let ours: Vec<(u64, u16, usize)> = recorded
            .iter()
            .filter_map(|r| {
                let p = pings(std::slice::from_ref(r)).pop()?;
                Some((r.at.as_millis() as u64, p.0, p.1.len()))
            })
            .collect();
        assert_eq!(theirs, ours);
    } else {
        common::skip_or_fail("brping");
    }

    // The replay, looped at 4 times the speed: one whole pass of the recording's pings
    // arrives in order, and takes about a quarter of the time the recording took.
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let listener = node(master.uri(), "listener").await;
    let mut echoes = listener
        .subscribe::<umsg::Ping360Echo>("/replay/echo", SubscribeOptions::default())
        .await
        .unwrap();
    let replay = common::Child(
        Command::new(env!("CARGO_BIN_EXE_ping_sonar"))
            .args([
                "__name:=replay",
                &format!("_device:=replay:{}", log.display()),
                "_replay_rate:=4",
                "_replay_loop:=true",
            ])
            .env("ROS_MASTER_URI", master.uri())
            .env("ROS_IP", "127.0.0.1")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let want = recorded_pings.len();
    let mut got: Vec<(u16, Vec<u8>, udpros::msg::Time)> = Vec::new();
    let found = loop {
        let echo = tokio::time::timeout(Duration::from_secs(30), echoes.recv())
            .await
            .expect("replayed echoes")
            .unwrap();
        got.push((
            echo.angle_gradians,
            echo.intensities.to_vec(),
            echo.header.stamp,
        ));
        let whole = got.windows(want).position(|w| {
            w.iter()
                .zip(&recorded_pings)
                .all(|(g, r)| (g.0, &g.1) == (r.0, &r.1))
        });
        if let Some(at) = whole {
            break at;
        }
        assert!(
            got.len() < 6 * want,
            "no whole pass in {} echoes",
            got.len()
        );
    };
    let pass = &got[found..found + want];
    let replayed = pass[want - 1].2.as_nanos() as f64 - pass[0].2.as_nanos() as f64;
    let (first, last) = (
        recorded
            .iter()
            .find(|r| !pings(std::slice::from_ref(r)).is_empty())
            .unwrap()
            .at,
        recorded
            .iter()
            .rev()
            .find(|r| !pings(std::slice::from_ref(r)).is_empty())
            .unwrap()
            .at,
    );
    let original = (last - first).as_nanos() as f64;
    let ratio = original / replayed;
    assert!(
        (2.5..6.0).contains(&ratio),
        "replayed {ratio:.2} times as fast, asked 4"
    );
    // Stamped now, in ROS time (wall time here), not at the recording's times.
    let now = udpros::time::Clock::wall().now();
    let age = now.as_nanos() as f64 - pass[want - 1].2.as_nanos() as f64;
    assert!((0.0..30e9).contains(&age), "stamped {age} ns ago");
    drop(replay);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_log_replays_as_far_as_it_goes_and_says_where_it_stopped() {
    let dir = scratch("ping-log-damaged");
    let log = dir.join("whole.bin");
    record_ping360(&log, 20, true).await;
    let (recorded, _) = records(&log);
    let bytes = std::fs::read(&log).unwrap();
    // Cut in the middle of the last record's frame.
    let cut = dir.join("cut.bin");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let want = pings(&recorded[..recorded.len() - 1]);
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let listener = node(master.uri(), "listener").await;
    let mut echoes = listener
        .subscribe::<umsg::Ping360Echo>("/cut/echo", SubscribeOptions::default())
        .await
        .unwrap();
    let mut replay = Command::new(env!("CARGO_BIN_EXE_ping_sonar"))
        .args([
            "__name:=cut",
            &format!("_device:=replay:{}", cut.display()),
            "_replay_rate:=2",
            "_replay_loop:=true",
        ])
        .env("ROS_MASTER_URI", master.uri())
        .env("ROS_IP", "127.0.0.1")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Looped: the second pass holds every whole record's ping.
    let mut got = Vec::new();
    while got.len() < 3 * want.len() {
        let echo = tokio::time::timeout(Duration::from_secs(30), echoes.recv())
            .await
            .expect("replayed echoes")
            .unwrap();
        got.push((echo.angle_gradians, echo.intensities.to_vec()));
    }
    assert!(got.windows(want.len()).any(|w| w == want.as_slice()));
    let _ = replay.kill();
    let out = replay.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "said once, not per pass: {stderr}");
    assert!(
        warnings[0].contains("cut short at byte") && warnings[0].contains("cut.bin"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `~record` left on the parameter server by an earlier run names the very log now
/// replayed: the log is not touched (the recording goes to a new name beside it), and the
/// node says at start that `~record` came from the server, not its command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_record_parameter_never_destroys_the_log_being_replayed() {
    let dir = scratch("ping-log-stale-record");
    let log = dir.join("dive.bin");
    record_ping360(&log, 20, true).await;
    let before = std::fs::read(&log).unwrap();
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let listener = node(master.uri(), "listener").await;
    listener
        .set_param(
            "/replayer/record",
            udpros::xmlrpc::Value::String(log.display().to_string()),
        )
        .await
        .unwrap();
    let mut echoes = listener
        .subscribe::<umsg::Ping360Echo>("/replayer/echo", SubscribeOptions::default())
        .await
        .unwrap();
    let replay = Command::new(env!("CARGO_BIN_EXE_ping_sonar"))
        .args([
            "__name:=replayer",
            &format!("_device:=replay:{}", log.display()),
            "_replay_rate:=4",
        ])
        .env("ROS_MASTER_URI", master.uri())
        .env("ROS_IP", "127.0.0.1")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for i in 0..10 {
        tokio::time::timeout(Duration::from_secs(30), echoes.recv())
            .await
            .unwrap_or_else(|_| panic!("replayed echo {i}"))
            .unwrap();
    }
    // SIGINT: the node finishes its recording and unregisters.
    let _ = Command::new("kill")
        .args(["-INT", &replay.id().to_string()])
        .status();
    let out = replay.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        std::fs::read(&log).unwrap(),
        before,
        "the replayed log changed"
    );
    let (recorded, _) = records(&dir.join("dive-2.bin"));
    assert!(
        !recorded.is_empty(),
        "the recording went beside it: {stderr}"
    );
    let told: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("from the parameter server, not this command line"))
        .collect();
    assert_eq!(told.len(), 1, "{stderr}");
    assert!(
        told[0].contains("~record=") && told[0].contains("dive.bin"),
        "{stderr}"
    );
    assert!(
        !told[0].contains("~device"),
        "given on the command line: {stderr}"
    );
    assert!(stderr.contains("dive.bin exists: recording to"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_unwritable_or_endless_log_stops_the_node_with_one_line() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    for (i, (arg, says)) in [
        (
            "_device:=replay:/nonexistent/udpros.bin",
            "/nonexistent/udpros.bin: No such file",
        ),
        (
            "_record:=/nonexistent/dir/rec.bin",
            "~record /nonexistent/dir/rec.bin: No such file",
        ),
        // A device never ends: it is refused, not read for ever.
        (
            "_device:=replay:/dev/urandom",
            "/dev/urandom: not a regular file",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let out = Command::new(env!("CARGO_BIN_EXE_ping_sonar"))
            .args([arg, "_device_type:=ping1d", &format!("__name:=missing_{i}")])
            .env("ROS_MASTER_URI", master.uri())
            .env("ROS_IP", "127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{arg}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or_default();
        assert!(last.contains(says), "{arg}: {stderr}");
    }
}

/// `rosbag record` of a replay looks like the live device's: every message is stamped when
/// it was played (within a second of when rosbag received it), not at the log's own
/// times (which start at zero), and the Ping1D's rate is the recording's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rosbag_of_a_replay_looks_like_the_live_device() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let dir = scratch("ping-log-rosbag");
    let log = dir.join("ping1d.bin");
    let recorded = udpros_bridges::ping::node::record_device(
        Config::new(LinkSpec::Sim(DeviceKind::Ping1d)),
        &log,
        tokio::time::sleep(Duration::from_secs(3)),
    )
    .await
    .unwrap();
    assert!(recorded.frames >= 20, "{recorded:?}");
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let mut replay = Command::new(env!("CARGO_BIN_EXE_ping_sonar"));
    replay
        .args([
            "__name:=replay",
            &format!("_device:=replay:{}", log.display()),
            "_replay_loop:=true",
        ])
        .stdout(Stdio::null());
    common::ros_env(&mut replay, &uri);
    let _replay = common::Child(replay.spawn().unwrap());
    let bag = dir.join("replay.bag");
    let started = udpros::time::Clock::wall().now().as_nanos() as i64;
    {
        let (python, uri, bag) = (python.clone(), uri.clone(), bag.clone());
        tokio::task::spawn_blocking(move || {
            common::record_bag(&python, &uri, &bag, &["/replay/range"], 4)
        })
        .await
        .unwrap();
    }
    let ended = udpros::time::Clock::wall().now().as_nanos() as i64;
    let out = Command::new(&python)
        .args([
            "-c",
            "import rosbag, sys\n\
             for _, m, t in rosbag.Bag(sys.argv[1]).read_messages():\n\
             \x20   print(t.to_nsec(), m.header.stamp.to_nsec())",
        ])
        .arg(&bag)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<(i64, i64)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (t, stamp) = l.split_once(' ').unwrap();
            (t.parse().unwrap(), stamp.parse().unwrap())
        })
        .collect();
    // The simulated Ping1D pings at 10 Hz; 4 s of bag after rosbag's own start-up.
    assert!(rows.len() >= 15, "{} messages in the bag", rows.len());
    for (received, stamp) in &rows {
        assert!(
            (started..=ended).contains(stamp),
            "stamped {stamp}, outside the replay"
        );
        assert!(
            (received - stamp).abs() < 1_000_000_000,
            "{received} vs {stamp}"
        );
    }
    assert!(
        rows.windows(2).all(|w| w[0].1 <= w[1].1),
        "stamps go forward"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
