//! The `ping_sonar` node end to end: against brping's own Ping1D simulator, the built-in
//! simulator over UDP and over a pseudo-terminal, Ping360 sweeps, a device killed and
//! restarted, bursts of garbage, the 2017 draft dialect, and a roscpp subscriber.

use udpros_testkit as common;

use common::{diagnostic, node};

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use udpros::master::Master;
use udpros::msgs::{sensor_msgs, udpros as umsg};
use udpros::node::{Node, SubscribeOptions};
use udpros_bridges::ping::link::LinkSpec;
use udpros_bridges::ping::node::{run, Config};
use udpros_bridges::ping::scene::ping360_echo;
use udpros_bridges::ping::sim::{serve_stream, serve_udp};
use udpros_bridges::ping::DeviceKind;
use udpros_bridges::ping::Dialect;

/// A master and a running ping_sonar on `device`; returns the master and a listener node.
async fn sonar(cfg: Config) -> (Master, Node, tokio::task::JoinHandle<()>) {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let sonar = node(master.uri(), "ping_sonar").await;
    let task = tokio::spawn(async move {
        let _ = run(sonar, cfg).await;
    });
    let listener = node(master.uri(), "listener").await;
    (master, listener, task)
}

async fn ranges(listener: &Node, count: usize, limit: Duration) -> Vec<f32> {
    let mut sub = listener
        .subscribe::<sensor_msgs::Range>("/ping_sonar/range", SubscribeOptions::default())
        .await
        .unwrap();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    while out.len() < count {
        match tokio::time::timeout_at(deadline, sub.recv()).await {
            Ok(Some(r)) => out.push(r.range),
            _ => break,
        }
    }
    out
}

async fn udp_sim(
    kind: DeviceKind,
    dialect: Dialect,
) -> (u16, tokio::task::JoinHandle<()>, Arc<Mutex<Vec<u16>>>) {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = socket.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    (
        port,
        tokio::spawn(serve_udp(socket, kind, dialect, Some(seen.clone()))),
        seen,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_distances_from_brpings_own_simulator() {
    let Some(python) = common::venv_python("brping") else {
        return;
    };
    let script = python.parent().unwrap().join("ping1d-simulation.py");
    let port = common::free_port();
    // brping's simulator binds 0.0.0.0:6676; run it on loopback and a port of our own.
    let patch = format!(
        "import socket; b = socket.socket.bind; socket.socket.bind = lambda s, a: b(s, ('127.0.0.1', {port})); \
         exec(compile(open({script:?}).read(), 'ping1d-simulation.py', 'exec'))"
    );
    let mut cmd = std::process::Command::new(&python);
    cmd.args(["-c", &patch]).stdout(std::process::Stdio::null());
    let _sim = common::Child(cmd.spawn().unwrap());
    let (_m, listener, _task) = sonar(Config::new(LinkSpec::Udp {
        host: "127.0.0.1".into(),
        port,
    }))
    .await;
    let got = ranges(&listener, 5, Duration::from_secs(30)).await;
    assert_eq!(got.len(), 5, "ranges from brping's simulator: {got:?}");
    // The simulator's distance is a sine wave that touches 0 mm at its trough.
    assert!(got.iter().all(|r| r.is_finite() && *r >= 0.0), "{got:?}");
    assert!(
        got.windows(2).any(|w| w[0] != w[1]),
        "the wave should move: {got:?}"
    );
    // brping's simulator sends no ACK: the settings are confirmed by reading them back.
    assert_eq!(
        diagnostic(&listener, "settings confirmed", |v| v == "3").await,
        "3"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_simulator_over_udp_with_profiles_and_no_draft_ids() {
    let (port, _sim, seen) = udp_sim(DeviceKind::Ping1d, Dialect::Current).await;
    let (_m, listener, _task) = sonar(Config::new(LinkSpec::Udp {
        host: "127.0.0.1".into(),
        port,
    }))
    .await;
    let mut profiles = listener
        .subscribe::<umsg::PingProfile>("/ping_sonar/profile", SubscribeOptions::default())
        .await
        .unwrap();
    let got = ranges(&listener, 10, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 10);
    let p = tokio::time::timeout(Duration::from_secs(10), profiles.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p.profile_data.len(), 200);
    assert!((p.distance - p.distance_mm as f32 / 1000.0).abs() < 1e-3);
    // `current` never sends an id that exists only in the draft, nor the bootloader's.
    let draft_only = [
        101, 102, 110, 112, 120, 1100, 1101, 1102, 1110, 1111, 1112, 1113, 1114, 1115,
    ];
    let sent = seen.lock().unwrap().clone();
    assert!(!sent.is_empty());
    assert!(
        sent.iter().all(|id| !draft_only.contains(id)),
        "sent {sent:?}"
    );
    // The built-in simulator ACKs each setting.
    assert_eq!(
        diagnostic(&listener, "settings confirmed", |v| v == "3").await,
        "3"
    );
    // The node measures its own frame-to-message latency (printed, not asserted).
    let p99 = diagnostic(&listener, "latency p99 (us)", |v| !v.is_empty()).await;
    assert!(p99.parse::<f64>().is_ok(), "latency p99 reported: {p99:?}");
    eprintln!("ping_sonar frame-to-message latency p99: {p99} us");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_at_an_ipv6_address() {
    let socket = tokio::net::UdpSocket::bind("[::1]:0").await.unwrap();
    let port = socket.local_addr().unwrap().port();
    let _sim = tokio::spawn(serve_udp(
        socket,
        DeviceKind::Ping1d,
        Dialect::Current,
        None,
    ));
    let spec: LinkSpec = format!("udp:[::1]:{port}").parse().unwrap();
    let (_m, listener, _task) = sonar(Config::new(spec)).await;
    let got = ranges(&listener, 5, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 5, "ranges from a sonar at [::1]:{port}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_setting_is_reported() {
    let mut cfg = Config::new(LinkSpec::Sim(DeviceKind::Ping1d));
    cfg.mode_auto = false;
    cfg.gain = 9; // the device takes 0 to 6
    let (_m, listener, _task) = sonar(cfg).await;
    assert_eq!(
        diagnostic(&listener, "settings refused", |v| v == "1").await,
        "1"
    );
    // Four settings confirmed at start; then the reconfigure server, whose gain range is
    // 0-6, clamps the gain to 6, which the device takes.
    assert_eq!(
        diagnostic(&listener, "settings confirmed", |v| v == "5").await,
        "5"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_simulator_over_a_pseudo_terminal() {
    if std::process::Command::new("socat")
        .arg("-V")
        .output()
        .is_err()
    {
        return common::skip_or_fail("socat");
    }
    let dir = std::env::temp_dir().join(format!("udpros-pty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("device"), dir.join("host"));
    let mut cmd = std::process::Command::new("socat");
    cmd.arg(format!("pty,raw,echo=0,link={}", a.display()))
        .arg(format!("pty,raw,echo=0,link={}", b.display()));
    let _socat = common::Child(cmd.spawn().unwrap());
    assert!(common::wait_for(Duration::from_secs(10), || a.exists() && b.exists()));
    let device =
        tokio_serial::SerialStream::open(&tokio_serial::new(a.to_str().unwrap(), 115200)).unwrap();
    let _sim = tokio::spawn(serve_stream(device, DeviceKind::Ping1d, Dialect::Current));
    let spec = LinkSpec::Serial {
        path: b.to_str().unwrap().into(),
        baud: 115200,
    };
    let (_m, listener, _task) = sonar(Config::new(spec)).await;
    assert_eq!(ranges(&listener, 5, Duration::from_secs(20)).await.len(), 5);
}

/// A UDP relay between the node and the device that, every few datagrams from the device,
/// first sends a burst of garbage bytes (noise, a false start, a damaged frame).
async fn garbage_relay(device: u16) -> u16 {
    let socket = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let port = socket.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut node = None;
        let mut buf = vec![0u8; 65536];
        let mut n_from_device = 0u64;
        loop {
            let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                continue;
            };
            if from.port() == device {
                n_from_device += 1;
                if let Some(node) = node {
                    if n_from_device.is_multiple_of(3) {
                        let mut garbage = vec![0x42u8, 0x52, 0xff, 0x00, 0x13];
                        garbage.extend((0..200u32).map(|i| (i * 97 % 251) as u8));
                        let _ = socket.send_to(&garbage, node).await;
                    }
                    let _ = socket.send_to(&buf[..n], node).await;
                }
            } else {
                node = Some(from);
                let _ = socket.send_to(&buf[..n], ("127.0.0.1", device)).await;
            }
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_bursts_cost_only_the_frames_they_hit() {
    let (device, _sim, _) = udp_sim(DeviceKind::Ping1d, Dialect::Current).await;
    let relay = garbage_relay(device).await;
    let (_m, listener, _task) = sonar(Config::new(LinkSpec::Udp {
        host: "127.0.0.1".into(),
        port: relay,
    }))
    .await;
    let start = Instant::now();
    let got = ranges(&listener, 20, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 20, "ranges through the garbage");
    // 10 Hz: losing only garbage, 20 ranges take about 2 s.
    eprintln!("20 ranges through garbage in {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_when_the_device_restarts() {
    let (port, sim, _) = udp_sim(DeviceKind::Ping1d, Dialect::Current).await;
    let (_m, listener, _task) = sonar(Config::new(LinkSpec::Udp {
        host: "127.0.0.1".into(),
        port,
    }))
    .await;
    assert_eq!(ranges(&listener, 3, Duration::from_secs(20)).await.len(), 3);
    sim.abort();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let socket = tokio::net::UdpSocket::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let back = Instant::now();
    let _sim = tokio::spawn(serve_udp(
        socket,
        DeviceKind::Ping1d,
        Dialect::Current,
        None,
    ));
    assert_eq!(ranges(&listener, 3, Duration::from_secs(20)).await.len(), 3);
    eprintln!("data again {:?} after the device came back", back.elapsed());
    assert!(
        back.elapsed() < Duration::from_secs(5),
        "recovery took {:?}",
        back.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draft2017_dialect_end_to_end() {
    let (port, _sim, seen) = udp_sim(DeviceKind::Ping1d, Dialect::Draft2017).await;
    let mut cfg = Config::new(LinkSpec::Udp {
        host: "127.0.0.1".into(),
        port,
    });
    cfg.dialect = Dialect::Draft2017;
    let (_m, listener, _task) = sonar(cfg).await;
    let got = ranges(&listener, 5, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 5, "{got:?}");
    let sent = seen.lock().unwrap().clone();
    assert!(
        !sent.contains(&1100),
        "never the current set's goto_bootloader"
    );
}

/// The node's default `~scan_threshold`.
const SCAN_THRESHOLD: u8 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping360_sweeps_become_echoes_scans_and_images() {
    for auto in [false, true] {
        let mut cfg = Config::new(LinkSpec::Sim(DeviceKind::Ping360));
        cfg.use_auto_transmit = auto;
        cfg.num_steps = 10;
        cfg.range = 5.0;
        let (_m, listener, _task) = sonar(cfg).await;
        let mut echoes = listener
            .subscribe::<umsg::Ping360Echo>("/ping_sonar/echo", SubscribeOptions::default())
            .await
            .unwrap();
        let mut scans = listener
            .subscribe::<sensor_msgs::LaserScan>("/ping_sonar/scan", SubscribeOptions::default())
            .await
            .unwrap();
        let mut images = listener
            .subscribe::<sensor_msgs::Image>("/ping_sonar/image", SubscribeOptions::default())
            .await
            .unwrap();
        let e = tokio::time::timeout(Duration::from_secs(30), echoes.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(
            e.intensities.len() >= 200 && (e.range - 5.0).abs() < 0.5,
            "auto {auto}: {} samples to {} m",
            e.intensities.len(),
            e.range
        );
        let scan = tokio::time::timeout(Duration::from_secs(30), scans.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(scan.ranges.len(), 400);
        // Each bearing pinged sees the scene's first strong return (the seabed where the
        // beam reaches it, or an object), as the scene draws it, within its speckle.
        let hits: Vec<(usize, f32)> = scan
            .ranges
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, r)| r.is_finite())
            .collect();
        assert!(hits.len() >= 5, "auto {auto}: {hits:?}");
        for (slot, hit) in &hits {
            let n = e.intensities.len();
            let scene = ping360_echo(
                *slot as u16,
                f64::from(e.range_resolution),
                n,
                e.gain_setting,
                1,
            );
            let first = scene
                .iter()
                .enumerate()
                .skip(n / 20)
                .find(|(_, v)| **v >= SCAN_THRESHOLD)
                .map(|(i, _)| (i + 1) as f32 * e.range_resolution);
            assert!(
                first.is_some_and(|f| (f - hit).abs() < 0.75),
                "auto {auto}: bearing {slot}: {hit} m against the scene's {first:?}"
            );
        }
        let image = tokio::time::timeout(Duration::from_secs(30), images.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (image.encoding.as_str(), image.width, image.data.len()),
            ("mono8", 200, 200 * 200)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roscpp_udp_subscriber_receives_range() {
    let Some(roscpp) = common::roscpp_peer() else {
        return;
    };
    let Some((_rosmaster, uri)) = common::start_rosmaster() else {
        return;
    };
    let sonar_node = node(&uri, "ping_sonar").await;
    let _task = tokio::spawn(run(
        sonar_node,
        Config::new(LinkSpec::Sim(DeviceKind::Ping1d)),
    ));
    // The peer's String type would be refused; it subscribes with md5 of Range via rostopic-like
    // generic check instead: use the roscpp peer's "range" type.
    let mut cmd = std::process::Command::new(roscpp);
    cmd.args([
        "sub",
        "/ping_sonar/range",
        "--type",
        "range",
        "--hints",
        "udp",
        "--count",
        "5",
    ]);
    common::ros_env(&mut cmd, &uri);
    let (_sub, mut lines) = common::spawn_lines(cmd);
    let got = tokio::task::block_in_place(|| {
        lines.count(5, Duration::from_secs(30), |l| l.starts_with("RECV range"))
    });
    assert_eq!(got, 5, "{:?}", lines.seen);
}

/// Under `/use_sim_time`, the `ping_sonar` program stamps `~range` with the time of
/// `rosbag play --clock` (a bag recorded from a udpros publisher), not the wall clock: each
/// stamp lies within one ping period (0.1 s) of the bag's time when the message arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_stamps_follow_clock_from_rosbag_play() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_rosmaster, uri)) = common::start_rosmaster() else {
        return;
    };
    let talker = node(&uri, "talker").await;
    let chatter = talker
        .advertise::<udpros::msgs::std_msgs::String>("/chatter", Default::default())
        .await
        .unwrap();
    let sending = common::publish_every(chatter, Default::default(), Duration::from_millis(20));
    let bag = std::env::temp_dir().join(format!("udpros-ping-clock-{}.bag", std::process::id()));
    let _ = std::fs::remove_file(&bag);
    tokio::task::block_in_place(|| common::record_bag(&python, &uri, &bag, &["/chatter"], 4));
    sending.abort();

    let set = common::ros_tool(&python, "rosparam", &uri)
        .args(["set", "/use_sim_time", "true"])
        .status()
        .unwrap();
    assert!(set.success());
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ping_sonar"));
    cmd.args(["__name:=sonar", "_device:=sim:ping1d"])
        .stdout(std::process::Stdio::null());
    common::ros_env(&mut cmd, &uri);
    let _sonar = common::Child(cmd.spawn().unwrap());
    let listener = node(&uri, "listener").await;
    assert!(listener.clock().is_sim_time());
    let mut ranges = listener
        .subscribe::<sensor_msgs::Range>("/sonar/range", SubscribeOptions::default())
        .await
        .unwrap();
    let _play = common::play_bag(&python, &uri, &bag, &[]);
    let mut offsets = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while offsets.len() < 20 {
        let Ok(Some(range)) = tokio::time::timeout_at(deadline, ranges.recv()).await else {
            break;
        };
        let now = listener.now();
        if now.is_zero() || range.header.stamp.is_zero() {
            continue; // before the bag's first /clock
        }
        let wall_gap = udpros::msg::Time::now() - range.header.stamp;
        assert!(
            wall_gap.as_secs_f64() > 3.0,
            "the stamp is the bag's time, seconds before the wall clock: {wall_gap:?}"
        );
        offsets.push((now - range.header.stamp).as_secs_f64());
    }
    let _ = std::fs::remove_file(&bag);
    assert_eq!(offsets.len(), 20, "ranges stamped in sim time: {offsets:?}");
    let within = offsets.iter().filter(|o| o.abs() <= 0.1).count();
    assert!(
        within * 10 >= offsets.len() * 9,
        "stamps within one ping period of /clock: {offsets:?}"
    );
}

/// FEC toward a udpros subscriber shows in `/diagnostics`, per link: the mode, the loss
/// its subscriber reports and the repair sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fec_links_show_in_diagnostics() {
    let (_master, listener, _task) = sonar(Config::new(LinkSpec::Sim(DeviceKind::Ping360))).await;
    let mut echoes = listener
        .subscribe::<umsg::Ping360Echo>("/ping_sonar/echo", SubscribeOptions::udp_only())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), echoes.recv())
        .await
        .expect("an echo over UDPROS")
        .unwrap();
    let key = format!("FEC /ping_sonar/echo to {}", listener.name());
    let value = diagnostic(&listener, &key, |v| v.contains("loss reported")).await;
    assert!(
        value.starts_with("adaptive") && value.contains("loss reported 0.00 %"),
        "{key}: {value}"
    );
}

/// `~max_rate` caps what each link of the bridge's topics sends, `~max_rate_per_host` what
/// all of them send to one host: the Ping360's echoes, a steady stream, reach a udpros
/// subscriber at no more than either cap (bytes/s), where uncapped they come several
/// times faster; whole, and the newest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_rate_caps_each_link_of_the_bridge() {
    const CAP: f64 = 10_000.0;
    const WINDOW: Duration = Duration::from_secs(3);
    let mut rates = Vec::new();
    for (max_rate, per_host) in [(None, None), (Some(CAP), None), (None, Some(CAP))] {
        let mut cfg = Config::new(LinkSpec::Sim(DeviceKind::Ping360));
        cfg.use_auto_transmit = true;
        cfg.links.max_rate = max_rate;
        cfg.links.max_rate_per_host = per_host;
        let (_m, listener, _task) = sonar(cfg).await;
        let mut echoes = listener
            .subscribe::<umsg::Ping360Echo>("/ping_sonar/echo", SubscribeOptions::default())
            .await
            .unwrap();
        // The first echo: the link is up and the device streaming.
        tokio::time::timeout(Duration::from_secs(30), echoes.recv())
            .await
            .unwrap()
            .unwrap();
        let (mut bytes, mut messages) = (0usize, 0usize);
        let end = tokio::time::Instant::now() + WINDOW;
        while let Ok(Some(echo)) = tokio::time::timeout_at(end, echoes.recv()).await {
            bytes += echo.intensities.len();
            messages += 1;
        }
        let rate = bytes as f64 / WINDOW.as_secs_f64();
        println!("max_rate {max_rate:?}, per host {per_host:?}: {messages} echoes, {rate:.0} B/s of samples");
        rates.push((rate, messages));
    }
    let uncapped = rates[0];
    assert!(
        uncapped.0 > 2.0 * CAP,
        "the device streams well above the cap uncapped: {uncapped:?}"
    );
    // Samples are most of each message; a burst of 2 ms beyond the cap at most.
    for capped in &rates[1..] {
        assert!(
            capped.0 <= 1.2 * CAP && capped.1 > 0,
            "capped at {CAP} B/s: {capped:?}"
        );
    }
}
