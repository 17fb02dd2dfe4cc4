//! Sim time against the real thing: Debian's rosmaster, `rosparam`, `rostopic pub /clock`,
//! and `rosbag play --clock` of a bag that `rosbag record` took from a udpros publisher.
//! The sim-time contract (a node subscribes `/clock` exactly when `/use_sim_time` is true as
//! it starts), the clock following the bag, a `Rate` that stops while the bag is paused,
//! and a bag played again (a backward jump) reported to the loop, which then follows it.

use udpros_testkit as common;

use common::{node, ros_tool};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use udpros::msg::Time;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, Node};
use udpros::time::ClockError;

fn rosparam_set(python: &std::path::Path, uri: &str, key: &str, value: &str) {
    let status = ros_tool(python, "rosparam", uri)
        .args(["set", key, value])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The node's `getSubscriptions`, asked over XML-RPC by Python as ROS tools ask it.
fn subscriptions(python: &std::path::Path, node: &Node) -> String {
    let script = format!(
        "import xmlrpc.client as x; print(x.ServerProxy('{}').getSubscriptions('/test')[2])",
        node.uri()
    );
    let out = std::process::Command::new(python)
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The ROS Clock contract, as roscpp and rospy read `/use_sim_time` (rospy's truthy rule
/// for the int 1), and the clock at zero until the first `/clock`, then exactly it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn use_sim_time_decides_the_clock_and_the_clock_subscription() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let wall = node(&uri, "wall_node").await;
    assert!(!wall.clock().is_sim_time());
    let subs = tokio::task::block_in_place(|| subscriptions(&python, &wall));
    assert!(!subs.contains("/clock"), "{subs}");
    let drift = wall.now().as_secs_f64() - Time::now().as_secs_f64();
    assert!(drift.abs() < 1.0, "wall node time is wall time: {drift}");

    tokio::task::block_in_place(|| rosparam_set(&python, &uri, "/use_sim_time", "true"));
    let sim = node(&uri, "sim_node").await;
    assert!(sim.clock().is_sim_time());
    assert_eq!(sim.now(), Time::default(), "zero before the first /clock");
    let subs = tokio::task::block_in_place(|| subscriptions(&python, &sim));
    assert!(subs.contains("['/clock', 'rosgraph_msgs/Clock']"), "{subs}");
    // Never re-read: the wall node stays on the wall clock.
    assert!(!wall.clock().is_sim_time());

    tokio::task::block_in_place(|| rosparam_set(&python, &uri, "/use_sim_time", "1"));
    let truthy = node(&uri, "truthy_node").await;
    assert!(
        truthy.clock().is_sim_time(),
        "an int 1 is true, as rospy reads it"
    );
    tokio::task::block_in_place(|| rosparam_set(&python, &uri, "/use_sim_time", "false"));
    let off = node(&uri, "off_node").await;
    assert!(!off.clock().is_sim_time());

    // rospy publishes /clock; both sim nodes take its time exactly.
    let mut clock = ros_tool(&python, "rostopic", &uri);
    clock
        .args([
            "pub",
            "-r",
            "20",
            "/clock",
            "rosgraph_msgs/Clock",
            "{clock: {secs: 1234, nsecs: 5}}",
        ])
        .stdout(Stdio::null());
    let _clock = common::Child(clock.spawn().unwrap());
    for n in [&sim, &truthy] {
        let first = tokio::time::timeout(Duration::from_secs(20), n.clock().wait_for_valid())
            .await
            .expect("a /clock within 20 s")
            .unwrap();
        assert_eq!(first, Time::new(1234, 5));
    }
    assert!(wall.now().sec > 1_600_000_000);
}

/// What the follower saw of its `Rate` loop.
#[derive(Default)]
struct Loop {
    ticks: AtomicU64,
    jumps: AtomicU64,
    /// The node's time at each tick.
    times: Mutex<Vec<Time>>,
}

fn rate_loop(node: &Node, seen: Arc<Loop>) -> tokio::task::JoinHandle<()> {
    let mut rate = node.rate(10.0);
    let node = node.clone();
    tokio::spawn(async move {
        loop {
            match rate.sleep().await {
                Ok(()) => {
                    seen.times.lock().unwrap().push(node.now());
                    seen.ticks.fetch_add(1, Ordering::SeqCst);
                }
                Err(ClockError::MovedBackwards { .. }) => {
                    seen.jumps.fetch_add(1, Ordering::SeqCst);
                }
                Err(ClockError::Shutdown) => return,
            }
        }
    })
}

async fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if ready() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ready()
}

async fn pause(node: &Node, paused: bool) {
    use udpros::msgs::std_srvs::{SetBool, SetBoolRequest};
    let client = node.service_client::<SetBool>(
        "/player/pause_playback",
        udpros::service::ClientOptions::default(),
    );
    client
        .wait_for_service(Duration::from_secs(20))
        .await
        .expect("rosbag play serves pause_playback");
    let reply = client
        .call_timeout(&SetBoolRequest { data: paused }, Duration::from_secs(10))
        .await
        .expect("rosbag play answers pause_playback");
    assert!(reply.success, "{}", reply.message);
}

/// A bag recorded from a udpros publisher, played with `--clock`: the follower's time is the
/// bag's, its 10 Hz `Rate` stops while the bag is paused and resumes with it, and playing
/// the bag again (time back to its start) is reported once and followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rosbag_play_drives_the_clock_and_a_rate_pauses_with_the_bag() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    // The bag: rosbag record of a udpros talker.
    let talker = node(&uri, "talker").await;
    let chatter = talker
        .advertise::<std_msgs::String>("/chatter", AdvertiseOptions::default())
        .await
        .unwrap();
    let sending = tokio::spawn(async move {
        for n in 0u32.. {
            let _ = chatter.publish(&std_msgs::String {
                data: format!("hello {n}"),
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let bag = std::env::temp_dir().join(format!("udpros-sim-time-{}.bag", std::process::id()));
    let _ = std::fs::remove_file(&bag);
    let recorded_from = Time::now();
    tokio::task::block_in_place(|| common::record_bag(&python, &uri, &bag, &["/chatter"], 4));
    let recorded_to = Time::now();
    sending.abort();

    tokio::task::block_in_place(|| rosparam_set(&python, &uri, "/use_sim_time", "true"));
    let follower = node(&uri, "follower").await;
    let seen = Arc::new(Loop::default());
    let _loop = rate_loop(&follower, seen.clone());

    // Paused from the start: the clock holds the bag's start, and the rate does not tick.
    let play = common::play_bag(&python, &uri, &bag, &["--pause"]);
    let start = tokio::time::timeout(Duration::from_secs(20), follower.clock().wait_for_valid())
        .await
        .expect("rosbag play publishes /clock while paused")
        .unwrap();
    assert!(
        start >= recorded_from && start <= recorded_to,
        "{start:?} is the bag's time"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(seen.ticks.load(Ordering::SeqCst), 0, "no tick while paused");

    pause(&follower, false).await;
    assert!(
        wait_until(Duration::from_secs(10), || seen
            .ticks
            .load(Ordering::SeqCst)
            >= 5)
        .await,
        "the rate ticks once the bag plays"
    );
    pause(&follower, true).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = seen.ticks.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = seen.ticks.load(Ordering::SeqCst);
    assert!(after <= held + 1, "paused again: {held} then {after} ticks");
    pause(&follower, false).await;
    assert!(
        wait_until(Duration::from_secs(10), || seen
            .ticks
            .load(Ordering::SeqCst)
            >= after + 5)
        .await,
        "the rate resumes with the bag"
    );
    // Every tick happened at the bag's time, 0.1 s apart (the clock ticks at 100 Hz).
    {
        let times = seen.times.lock().unwrap();
        assert!(times
            .iter()
            .all(|t| *t >= recorded_from && *t <= recorded_to));
        let steps: Vec<f64> = times
            .windows(2)
            .map(|w| (w[1] - w[0]).as_secs_f64())
            .collect();
        let on_grid = steps.iter().filter(|s| (**s - 0.1).abs() < 0.015).count();
        assert!(
            on_grid * 10 >= steps.len() * 8,
            "most cycles last 0.1 s of bag time: {steps:?}"
        );
    }
    assert_eq!(seen.jumps.load(Ordering::SeqCst), 0);

    // The bag again, once the first play ended: time goes back to its start.
    let mut play = play;
    let ended = tokio::task::block_in_place(|| {
        common::wait_for(Duration::from_secs(20), || {
            play.0.try_wait().ok().flatten().is_some()
        })
    });
    assert!(ended, "the first play ends");
    let ticks_before = seen.ticks.load(Ordering::SeqCst);
    let _again = common::play_bag(&python, &uri, &bag, &[]);
    assert!(
        wait_until(Duration::from_secs(15), || seen
            .jumps
            .load(Ordering::SeqCst)
            >= 1)
        .await,
        "the backward jump is reported to the sleeping rate"
    );
    assert!(
        wait_until(Duration::from_secs(10), || seen
            .ticks
            .load(Ordering::SeqCst)
            >= ticks_before + 5)
        .await,
        "and the rate follows the replay"
    );
    follower.shutdown().await;
    let _ = std::fs::remove_file(&bag);
}
