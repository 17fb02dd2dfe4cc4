//! Attacks on the master's fan-out and `/rosout`, each reproduced and shown harmless: ten
//! thousand dead subscribers, and a log flood toward a reader that stalls.
//!
//! Each test prints its figures and asserts generous bounds on memory, CPU, liveness and
//! delivered fractions (never tight timings). Servers under attack run as their own
//! processes, so their memory and CPU are theirs alone. The helpers are `hostile_kit`'s.

mod hostile_kit;

use hostile_kit::*;

use udpros_testkit as common;

use common::{peak_rss_mb, wait_for};
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use udpros::xmlrpc::Value;

/// 10,000 subscribers whose APIs are dead ports (5000) or tarpits that accept nothing
/// (5000), against `udpros master` under `ulimit -n 1024`: the master's fan-out stays within
/// its descriptors and memory, live subscribers hear the first publisher (their updates
/// wait behind tarpits at most once) and then a new publisher within a second, udpros's
/// and rospy's alike, and the master answers calls throughout.
#[test]
fn a_fan_out_to_ten_thousand_dead_subscribers_is_bounded_and_reaches_the_live_ones() {
    let Some(python) = common::ros_python() else {
        return;
    };
    raise_own_fd_limit();
    let (master, master_port) = start_master(Some(1024));
    let master_uri = format!("http://127.0.0.1:{master_port}/");
    let topic = "/crowded";
    // The ghosts live on 127.0.0.2: 10,000 ports taken there never collide with the
    // 127.0.0.1 ports other tests pick with free_port() and bind a moment later.
    const GHOSTS: &str = "127.0.0.2";
    let tarpits: Vec<std::net::TcpListener> = (0..5000)
        .map(|_| std::net::TcpListener::bind((GHOSTS, 0)).unwrap())
        .collect();
    let dead: Vec<u16> = {
        let listeners: Vec<std::net::TcpListener> = (0..5000)
            .map(|_| std::net::TcpListener::bind((GHOSTS, 0)).unwrap())
            .collect();
        listeners
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect()
    };
    let ghost_apis: Vec<String> = tarpits
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .chain(dead)
        .map(|port| format!("http://{GHOSTS}:{port}/"))
        .collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = udpros::xmlrpc::XmlRpcClient::default();
        for (i, api) in ghost_apis.iter().enumerate() {
            let params = vec![
                Value::from(format!("/ghost{i}")),
                Value::from(topic),
                Value::from("std_msgs/String"),
                Value::from(api.as_str()),
            ];
            client
                .call(&master_uri, "registerSubscriber", params)
                .await
                .expect("registerSubscriber");
        }
    });
    // The live subscribers register after the ghosts: the first fan-out reaches them last.
    let listener = rt.block_on(common::node(&master_uri, "live_listener"));
    let mut sub = rt
        .block_on(listener.subscribe::<udpros::msgs::std_msgs::String>(
            topic,
            udpros::node::SubscribeOptions::default(),
        ))
        .unwrap();
    let mut echo = common::ros_tool(&python, "rostopic", &master_uri);
    echo.args(["echo", &format!("{topic}/data")]);
    let (_echo, mut echoed) = common::spawn_lines(echo);
    assert!(
        wait_for(Duration::from_secs(30), || {
            call(
                master_port,
                "getSystemState",
                &[Value::from("/h")],
                Duration::from_secs(5),
            )
            .is_ok_and(|v| format!("{v:?}").contains("/rostopic_"))
        }),
        "rostopic echo registered"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let liveness = probe_liveness(master_port, stop.clone());
    let peak_fds = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, peak, pid) = (stop.clone(), peak_fds.clone(), master.0.id());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(open_fds(pid) as u64, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // Times from the moment the publisher is started, its process start-up included.
    let receive_within = |sub: &mut udpros::node::Subscriber<_>, since: Instant, limit| {
        let got = rt.block_on(async { tokio::time::timeout(limit, sub.recv()).await });
        got.ok()
            .flatten()
            .map(|_: udpros::msgs::std_msgs::String| since.elapsed())
    };
    // The first publisher: every ghost is new to the master and the live subscribers
    // registered after them, so their updates queue behind a round of 5000 never-tried
    // tarpits (256 at a time), which the congested first lane's short deadline keeps to
    // about half a second. The publisher starts on a thread while the subscribers listen,
    // so that a heard time is when the message arrived, not when this test's own polling
    // of the new node ended.
    let started = Instant::now();
    let first = std::thread::spawn(move || {
        let publisher = start_publisher(master_port, topic, "first_pub", None);
        (publisher, started.elapsed())
    });
    let first_heard = receive_within(&mut sub, started, Duration::from_secs(30));
    let first_echoed = echoed
        .wait_for(Duration::from_secs(30), |l| l.contains("alive"))
        .and_then(|_| echoed.arrived.last())
        .map(|at| at.saturating_duration_since(started));
    let (first, first_polled) = first.join().unwrap();
    drop(first);
    // The second: the ghosts have failed once and wait in the retry lane.
    std::thread::sleep(Duration::from_secs(2));
    rt.block_on(async {
        while tokio::time::timeout(Duration::from_millis(300), sub.recv())
            .await
            .is_ok()
        {}
    });
    // What rostopic printed of the first publisher is read now, so that only a line of
    // the second can match below.
    echoed.wait_for(Duration::from_millis(300), |_| false);
    let echoed_before = echoed.seen.len();
    let second_started = Instant::now();
    let second =
        std::thread::spawn(move || start_publisher(master_port, topic, "second_pub", None));
    let second_heard = receive_within(&mut sub, second_started, Duration::from_secs(10));
    let second_echoed = echoed
        .wait_for(Duration::from_secs(10), |l| l.contains("alive"))
        .and_then(|_| echoed.arrived.last())
        .map(|at| at.saturating_duration_since(second_started));
    let _second = second.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let (slowest, failures) = liveness.join().unwrap();
    sampler.join().unwrap();
    let peak_fds = peak_fds.load(Ordering::Relaxed);
    let peak_mb = peak_rss_mb(master.0.id());
    println!(
        "10k dead subscribers: first publisher heard after {first_heard:?} (rostopic {first_echoed:?}; \
         the test's polling saw it advertise after {first_polled:?}), second after {second_heard:?} (rostopic {second_echoed:?}, {} lines before); master peak \
         {peak_fds} fds, {peak_mb:.0} MB; slowest getPid {slowest:?}, {failures} failed",
        echoed_before,
    );
    // Heard = a first message received, so the publisher's start-up and its 5 Hz period
    // count too.
    assert!(
        first_heard.is_some_and(|t| t < Duration::from_secs(2)),
        "udpros heard the first publisher after {first_heard:?}"
    );
    assert!(
        first_echoed.is_some_and(|t| t < Duration::from_secs(3)),
        "rostopic heard the first publisher after {first_echoed:?}"
    );
    let second = second_heard.expect("the second publisher never reached udpros");
    assert!(
        second < Duration::from_secs(1),
        "udpros heard the new publisher after {second:?}"
    );
    assert!(
        second_echoed.is_some_and(|t| t < Duration::from_secs(3)),
        "rostopic heard the new publisher after {second_echoed:?}"
    );
    assert!(peak_fds < 800, "the master held {peak_fds} descriptors");
    assert!(peak_mb < 120.0, "the master peaked at {peak_mb:.0} MB");
    assert_eq!(failures, 0, "getPid failed during the fan-out");
    drop(tarpits);
}

/// A flood of 64 kB logs on `/rosout` (192 MB in all) while one `/rosout_agg` subscriber
/// reads nothing: the master's `/rosout` queues hold megabytes, not the 128 MB they held
/// when they were bounded by count alone, and a reader that keeps up still gets logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_flood_toward_a_stalled_rosout_agg_reader_stays_bounded() {
    use udpros::msgs::rosgraph_msgs::Log;
    let (master, master_port) = start_master(None);
    let uri = format!("http://127.0.0.1:{master_port}/");
    let rosout_api = tokio::task::spawn_blocking(move || node_port(master_port, "/rosout"))
        .await
        .unwrap();
    // The node is known to the master (its logger services) a moment before it
    // advertises /rosout_agg: asked until it does.
    let mut tcpros_port = None;
    let served = tokio::task::spawn_blocking(move || {
        wait_for(Duration::from_secs(20), || {
            tcpros_port = call(
                rosout_api,
                "requestTopic",
                &[
                    Value::from("/stalled"),
                    Value::from("/rosout_agg"),
                    Value::from(vec![Value::from(vec!["TCPROS"])]),
                ],
                Duration::from_secs(5),
            )
            .ok()
            .and_then(|v| v.as_array()?.get(2)?.as_array()?.get(2)?.as_i32());
            tcpros_port.is_some()
        });
        tcpros_port
    })
    .await
    .unwrap();
    let tcpros_port = served.expect("rosout serves /rosout_agg over TCPROS");
    let mut stalled = TcpStream::connect(("127.0.0.1", tcpros_port as u16)).unwrap();
    let header = udpros::wire::header::ConnectionHeader::new()
        .with("callerid", "/stalled")
        .with("topic", "/rosout_agg")
        .with("md5sum", "*")
        .with("type", "*");
    stalled.write_all(&header.encode_tcp()).unwrap();
    let logger = common::node(&uri, "log_flood").await;
    let reader = common::node(&uri, "agg_reader").await;
    let mut agg = reader
        .subscribe::<Log>("/rosout_agg", udpros::node::SubscribeOptions::default())
        .await
        .unwrap();
    let out = logger
        .advertise::<Log>("/rosout", Default::default())
        .await
        .unwrap();
    // Both of rosout's links are up before the flood.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = master.0.id();
    let before = peak_rss_mb(pid);
    let log = Log {
        name: "/log_flood".into(),
        msg: "x".repeat(64 << 10),
        ..Default::default()
    };
    for i in 0..3000 {
        out.publish(&log).unwrap();
        if i % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let peak = peak_rss_mb(pid);
    let mut heard = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(500), agg.recv()).await {
        heard += 1;
    }
    println!("3000 logs of 64 kB, one stalled /rosout_agg reader: master peak RSS {before:.0} -> {peak:.0} MB; a live reader got {heard}");
    assert!(
        peak - before < 48.0,
        "the master grew by {:.0} MB",
        peak - before
    );
    assert!(heard > 0, "a live /rosout_agg reader got nothing");
    drop(stalled);
}
