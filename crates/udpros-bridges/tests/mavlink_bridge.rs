//! The `mavlink_bridge` node end to end: against the simulated autopilot (offset, drift, a
//! reboot), through the fault proxy (loss and delay asymmetry as theory predicts), against
//! an independent pymavlink autopilot (accuracy after 20 s, a v1 responder, replies meant
//! for another requester), and to a rospy subscriber that knows only the connection header.

use udpros_testkit as common;

use common::{diagnostic, node};
use mavlink::MavlinkVersion;
use std::process::{Command, Stdio};
use std::time::Duration;
use udpros::master::Master;
use udpros::msgs::{diagnostic_msgs, mavros_msgs, sensor_msgs, std_msgs, udpros as umsg};
use udpros::node::{Node, SubscribeOptions};
use udpros::transport::Protocol;
use udpros_bridges::mavlink::clock::ros_minus_monotonic_ns;
use udpros_bridges::mavlink::messages::{frame, Outgoing};
use udpros_bridges::mavlink::node::{run, Config};
use udpros_bridges::mavlink::protocol::Ids;
use udpros_bridges::mavlink::sim::{SimAutopilot, SimConfig};
use udpros_bridges::sim::{Faults, Proxy};

/// A master, a running mavlink_bridge and a listener node.
async fn bridge(cfg: Config) -> (Master, Node, tokio::task::JoinHandle<()>) {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let bridge = node(master.uri(), "mavlink_bridge").await;
    let task = tokio::spawn(async move {
        if let Err(e) = run(bridge, cfg).await {
            panic!("mavlink_bridge: {e}");
        }
    });
    let listener = node(master.uri(), "listener").await;
    (master, listener, task)
}

fn config(url: String) -> Config {
    Config::new(url.parse().unwrap())
}

/// `~latency` messages until `done` says so or `limit` passes; the last one.
async fn latency_until(
    listener: &Node,
    limit: Duration,
    mut done: impl FnMut(&umsg::MavlinkLatency) -> bool,
) -> Option<umsg::MavlinkLatency> {
    let mut sub = listener
        .subscribe::<umsg::MavlinkLatency>("/mavlink_bridge/latency", SubscribeOptions::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + limit;
    let mut last = None;
    while let Ok(Some(m)) = tokio::time::timeout_at(deadline, sub.recv()).await {
        let stop = done(&m);
        last = Some(m);
        if stop {
            break;
        }
    }
    last
}

/// The first `~latency` once the estimator has converged on 30 TIMESYNC answers (within
/// 15 s): where a test that disturbs the link starts from.
async fn converged(listener: &Node) -> umsg::MavlinkLatency {
    let settled = |m: &umsg::MavlinkLatency| m.converged && m.timesync_received >= 30;
    let last = latency_until(listener, Duration::from_secs(15), settled).await;
    match last {
        Some(m) if settled(&m) => m,
        other => panic!("the estimator did not converge: {other:?}"),
    }
}

/// The true offset (ROS time − autopilot time, ns) at a message's stamp, for an autopilot
/// clock given on CLOCK_MONOTONIC.
fn truth_at(stamp: udpros::msg::Time, remote_at: impl Fn(i64) -> i64) -> i64 {
    let base = ros_minus_monotonic_ns(&udpros::time::Clock::wall());
    let local = stamp.as_nanos() as i64 - base;
    local - remote_at(local) + base
}

fn sim(config: SimConfig) -> SimAutopilot {
    SimAutopilot::start("127.0.0.1:0".parse().unwrap(), config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracks_a_simulated_autopilots_offset_and_drift() {
    let fcu = sim(SimConfig {
        clock_offset_ns: Some(123_456_789_000),
        drift_ppm: 30.0,
        ..SimConfig::default()
    });
    let (_master, listener, _task) = bridge(config(format!("udpout:{}", fcu.local_addr()))).await;
    let mut reference = listener
        .subscribe::<sensor_msgs::TimeReference>(
            "/mavlink_bridge/time_reference",
            SubscribeOptions::default(),
        )
        .await
        .unwrap();
    // 8 s of TIMESYNC at 10 Hz: 30 ppm is 240 µs of drift by then, well clear of the
    // scheduling noise of a loaded test machine (4 s gave skews off by 15-20 ppm).
    let last = latency_until(&listener, Duration::from_secs(20), |m| {
        m.converged && m.timesync_received >= 80 && m.ping_received >= 3
    })
    .await
    .expect("latency published");
    assert!(last.converged, "{last:?}");
    let error = last.offset_ns - truth_at(last.header.stamp, |t| fcu.remote_at(t));
    eprintln!("sim: error {error} ns, skew {:.1} ppm", last.skew_ppm);
    // The simulator hands each request and reply between threads, one wake more on the way
    // up than down; the estimate is off by half that asymmetry: 20 µs on one test machine,
    // 60-90 µs on another.
    assert!(error.abs() < 200_000, "error {error} ns: {last:?}");
    assert!(
        (last.skew_ppm.abs() - 30.0).abs() < 10.0,
        "skew {}",
        last.skew_ppm
    );
    assert_eq!(last.responder, umsg::MavlinkLatency::RESPONDER_V2);
    assert_eq!((last.ping_lost, last.timesync_lost), (0, 0));
    assert!(last.ping_rtt > 0.0 && last.ping_rtt < 0.05, "{last:?}");
    assert!(last.uncertainty_ns >= 0 && last.uncertainty_ns < 5_000_000);
    // SYSTEM_TIME becomes a TimeReference with the autopilot's wall clock.
    let r = tokio::time::timeout(Duration::from_secs(5), reference.recv())
        .await
        .expect("a time reference")
        .unwrap();
    // The autopilot's wall clock against when its SYSTEM_TIME arrived (the message may
    // have waited in the queue since the start).
    let arrived = r.header.stamp.as_nanos() as i64;
    assert!(
        (r.time_ref.as_nanos() as i64 - arrived).abs() < 5_000_000_000,
        "{r:?}"
    );
    assert_eq!(r.source, "fcu");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reacquires_within_seconds_after_the_autopilot_reboots() {
    let fcu = sim(SimConfig {
        clock_offset_ns: Some(3_600_000_000_000),
        ..SimConfig::default()
    });
    let (_master, listener, _task) = bridge(config(format!("udpout:{}", fcu.local_addr()))).await;
    let before = converged(&listener).await;
    fcu.reboot();
    let rebooted_at = std::time::Instant::now();
    let after = latency_until(&listener, Duration::from_secs(10), |m| {
        m.resets > before.resets
            && (m.offset_ns - truth_at(m.header.stamp, |t| fcu.remote_at(t))).abs() < 1_000_000
    })
    .await
    .unwrap();
    let error = after.offset_ns - truth_at(after.header.stamp, |t| fcu.remote_at(t));
    eprintln!("reboot: {error} ns after {:?}", rebooted_at.elapsed());
    assert!(
        error.abs() < 1_000_000 && after.resets > before.resets,
        "{error} ns after {:?}: {after:?}",
        rebooted_at.elapsed()
    );
    assert!(rebooted_at.elapsed() < Duration::from_secs(5));
}

/// An autopilot whose clock reads 33 hours off for under a second (consistent samples, so
/// the estimator's window restarts on them): no estimate published meanwhile is off, the
/// diagnostics say the estimator is re-converging, and it converges again on the honest
/// clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_absurd_autopilot_clocks_is_never_published() {
    let fcu = sim(SimConfig {
        clock_offset_ns: Some(42_000_000_000),
        ..SimConfig::default()
    });
    let (_master, listener, _task) = bridge(config(format!("udpout:{}", fcu.local_addr()))).await;
    let mut status = listener
        .subscribe::<mavros_msgs::TimesyncStatus>(
            "/mavlink_bridge/timesync_status",
            SubscribeOptions::default(),
        )
        .await
        .unwrap();
    let mut diagnostics = listener
        .subscribe::<diagnostic_msgs::DiagnosticArray>("/diagnostics", SubscribeOptions::default())
        .await
        .unwrap();
    converged(&listener).await;
    const ABSURD: i64 = 120_000_000_000_000; // 1.2e11 ms
    fcu.step_clock(ABSURD);
    // About 7 samples at 10 Hz: past the 3 that restart the window, short of the 16 that
    // would confirm it.
    tokio::time::sleep(Duration::from_millis(700)).await;
    fcu.step_clock(-ABSURD);
    // Read after the clock came back: the honest clock.
    let honest = |t: i64| fcu.remote_at(t);
    let (mut seen, mut absurd_observed, mut reconverging_said) = (0, 0, false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
    loop {
        tokio::select! {
            m = tokio::time::timeout_at(deadline, status.recv()) => {
                let Ok(Some(m)) = m else { break };
                seen += 1;
                if m.observed_offset_ns.abs_diff(m.estimated_offset_ns) > (ABSURD / 2) as u64 {
                    absurd_observed += 1;
                }
                let error = m.estimated_offset_ns - truth_at(m.header.stamp, honest);
                assert!(error.abs() < 10_000_000, "published {error} ns off: {m:?}");
            }
            Some(d) = diagnostics.recv() => {
                reconverging_said |= d.status.iter().any(|s| s.message.contains("re-converging"));
            }
        }
    }
    assert!(
        seen >= 20 && absurd_observed >= 3,
        "{seen} statuses, {absurd_observed} absurd"
    );
    assert!(
        reconverging_said,
        "the diagnostics never said re-converging"
    );
    let after = latency_until(&listener, Duration::from_secs(10), |m| m.converged)
        .await
        .unwrap();
    let error = after.offset_ns - truth_at(after.header.stamp, honest);
    assert!(
        after.converged && error.abs() < 1_000_000,
        "{error} ns: {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_timesync_restarts_both_estimators_and_they_converge_again() {
    let fcu = sim(SimConfig {
        clock_offset_ns: Some(42_000_000_000),
        ..SimConfig::default()
    });
    let (_master, listener, _task) = bridge(config(format!("udpout:{}", fcu.local_addr()))).await;
    let before = converged(&listener).await;
    let reset = listener.service_client::<udpros::msgs::std_srvs::Trigger>(
        "/mavlink_bridge/reset_timesync",
        udpros::service::ClientOptions::default().with_timeout(Duration::from_secs(5)),
    );
    let answer = reset
        .call(&udpros::msgs::std_srvs::TriggerRequest {})
        .await
        .unwrap();
    assert!(answer.success, "{answer:?}");
    // Both count the restart, and our estimator converges on the offset again.
    let after = latency_until(&listener, Duration::from_secs(15), |m| {
        m.resets > before.resets
            && m.px4_resets > before.px4_resets
            && m.converged
            && (m.offset_ns - truth_at(m.header.stamp, |t| fcu.remote_at(t))).abs() < 1_000_000
    })
    .await
    .unwrap();
    assert!(
        after.resets > before.resets && after.px4_resets > before.px4_resets && after.converged,
        "{after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_fault_proxy_loss_and_bias_match_what_was_injected() {
    let fcu = sim(SimConfig {
        clock_offset_ns: Some(-42_000_000_000),
        ..SimConfig::default()
    });
    let (loss, up_ms, down_ms) = (0.05, 1.0, 5.0);
    let way = |ms: f64| Faults {
        loss,
        delay: Duration::from_secs_f64(ms / 1000.0),
        ..Faults::NONE
    };
    let proxy = Proxy::start(
        "127.0.0.1:0".parse().unwrap(),
        fcu.local_addr(),
        way(up_ms),
        way(down_ms),
        7,
    )
    .await
    .unwrap();
    let mut cfg = config(format!("udpout:{}", proxy.local_addr()));
    // About 2000 round trips of each: the binomial spread of a 9.75 % loss is then 0.66
    // percentage points, a third of the 2-point bar.
    cfg.ping_rate = 100.0;
    cfg.timesync_rate = 100.0;
    let (_master, listener, _task) = bridge(cfg).await;
    let started = std::time::Instant::now();
    let last = latency_until(&listener, Duration::from_secs(40), |m| {
        started.elapsed() > Duration::from_secs(22) && m.timesync_received + m.timesync_lost > 1900
    })
    .await
    .unwrap();
    let injected = 1.0 - (1.0 - loss) * (1.0 - loss); // a round trip crosses the proxy twice
    for (what, measured, settled) in [
        (
            "PING",
            f64::from(last.ping_loss),
            last.ping_received + last.ping_lost,
        ),
        (
            "TIMESYNC",
            f64::from(last.timesync_loss),
            last.timesync_received + last.timesync_lost,
        ),
    ] {
        assert!(settled > 1800, "{what}: only {settled} settled");
        assert!(
            (measured - injected).abs() < 0.02,
            "{what} loss {measured:.4}, injected {injected:.4}: {last:?}"
        );
    }
    // local − remote reads (d_down − d_up) / 2 too high: the bias no protocol can see.
    let expected_bias = ((down_ms - up_ms) / 2.0 * 1e6) as i64;
    let bias = last.offset_ns - truth_at(last.header.stamp, |t| fcu.remote_at(t));
    let p = proxy.stats();
    eprintln!(
        "proxy: loss PING {:.4} TIMESYNC {:.4} (injected {injected:.4}; dropped up {}/{} down {}/{}), bias {bias} ns (theory {expected_bias})",
        last.ping_loss, last.timesync_loss, p.up_dropped, p.up, p.down_dropped, p.down
    );
    assert!(
        (bias - expected_bias).abs() < 300_000,
        "bias {bias} ns, theory {expected_bias} ns"
    );
    assert!(last.uncertainty_ns >= expected_bias, "{last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_simulator_feeds_mavros_timesync_status_to_rospy_and_udpros() {
    let mut cfg = Config::new(udpros_bridges::mavlink::url::FcuUrl::Sim);
    cfg.timesync_rate = 20.0;
    let (master, listener, _task) = bridge(cfg).await;
    // udpros over UDP only.
    let mut udp = listener
        .subscribe::<mavros_msgs::TimesyncStatus>(
            "/mavlink_bridge/timesync_status",
            SubscribeOptions {
                transports: vec![Protocol::Udp],
                ..SubscribeOptions::default()
            },
        )
        .await
        .unwrap();
    let mut diagnostics = listener
        .subscribe::<diagnostic_msgs::DiagnosticArray>("/diagnostics", SubscribeOptions::default())
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 5 {
        let m = tokio::time::timeout(Duration::from_secs(10), udp.recv())
            .await
            .expect("timesync_status over UDP")
            .unwrap();
        got.push(m);
    }
    assert!(got
        .iter()
        .all(|m| m.round_trip_time_ms > 0.0 && m.remote_timestamp_ns > 0));
    // `~sim/command` steps the simulated clock: the observed offset follows at once.
    let before = got.last().unwrap().observed_offset_ns;
    let command = listener
        .advertise::<std_msgs::String>("/mavlink_bridge/sim/command", Default::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let stepped = loop {
        let _ = command.publish(&std_msgs::String {
            data: "step 0.5".into(),
        });
        let m = tokio::time::timeout_at(deadline, udp.recv())
            .await
            .expect("the step shows")
            .unwrap();
        if (m.observed_offset_ns - before).abs() > 100_000_000 {
            break m.observed_offset_ns - before;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The autopilot's clock moved ahead, so ROS − autopilot moved back, by one step per
    // command that arrived.
    let steps = (-stepped as f64 / 5e8).round();
    assert!(
        steps >= 1.0 && (stepped as f64 + steps * 5e8).abs() < 1e7,
        "offset moved by {stepped} ns"
    );
    let d = tokio::time::timeout(Duration::from_secs(5), diagnostics.recv())
        .await
        .expect("diagnostics")
        .unwrap();
    assert!(
        d.status.iter().any(|s| s.name.ends_with("Time Sync")),
        "{d:?}"
    );
    // rospy with a class generated from the connection header, as rostopic does.
    let Some(python) = common::ros_python() else {
        return;
    };
    let mut cmd = Command::new(python);
    cmd.arg(common::peer_script("dynamic_sub.py"))
        .args(["/mavlink_bridge/timesync_status", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    common::ros_env(&mut cmd, master.uri());
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(lines.len() >= 3, "{stdout}");
    for l in lines {
        assert_eq!(l["type"], "mavros_msgs/TimesyncStatus");
        assert_eq!(l["md5"], "021ec8044e747bea518b441f374ba64b");
        assert_eq!(l["class_md5"], "021ec8044e747bea518b441f374ba64b");
        assert!(
            l["fields"]["round_trip_time_ms"].as_f64().unwrap() > 0.0,
            "{l}"
        );
    }
}

/// Starts the pymavlink autopilot on `url` (its side); `None` if it cannot run here.
fn pymavlink_peer(
    url: &str,
    extra: &[&str],
) -> Option<(common::Child, common::Lines, i64, i64, f64)> {
    let python = common::venv_python("pymavlink")?;
    let mut cmd = Command::new(python);
    cmd.arg(common::peer_script("mavlink_peer.py"))
        .arg(url)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let (child, mut lines) = common::spawn_lines(cmd);
    let ready = lines
        .wait_for(Duration::from_secs(20), |l| l.starts_with("READY"))
        .expect("the pymavlink peer starts");
    let field = |name: &str| -> String {
        ready
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap()
            .to_string()
    };
    Some((
        child,
        lines,
        field("t0_ns").parse().unwrap(),
        field("offset_ns").parse().unwrap(),
        field("drift_ppm").parse().unwrap(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pymavlink_autopilot_is_tracked_within_500_us_and_foreign_replies_are_ignored() {
    let port = common::free_port();
    let Some((_peer, _lines, t0, offset, drift_ppm)) = pymavlink_peer(
        &format!("udpout:127.0.0.1:{port}"),
        &[
            "--offset-s",
            "1234.5",
            "--drift-ppm",
            "50",
            "--foreign",
            "--duration-s",
            "40",
        ],
    ) else {
        return;
    };
    let remote_at = |t: i64| t + offset + ((t - t0) as f64 * drift_ppm * 1e-6) as i64;
    let (_master, listener, _task) = bridge(config(format!("udpin:127.0.0.1:{port}"))).await;
    let started = std::time::Instant::now();
    let last = latency_until(&listener, Duration::from_secs(30), |_| {
        started.elapsed() >= Duration::from_secs(20)
    })
    .await
    .unwrap();
    let error = last.offset_ns - truth_at(last.header.stamp, remote_at);
    eprintln!("pymavlink: error {error} ns after {:?}", started.elapsed());
    assert!(error.abs() < 500_000, "error {error} ns: {last:?}");
    assert!(last.converged && last.timesync_received > 150, "{last:?}");
    assert_eq!(last.responder, umsg::MavlinkLatency::RESPONDER_V2);
    // Every PING was answered twice (to us and to 255/190): only ours counted.
    assert!(
        last.ping_received <= last.ping_sent && last.ping_received >= 15,
        "{last:?}"
    );
    assert_eq!(last.ping_lost, 0);
    let mut diagnostics = listener
        .subscribe::<diagnostic_msgs::DiagnosticArray>("/diagnostics", SubscribeOptions::default())
        .await
        .unwrap();
    let unmatched = loop {
        let d = tokio::time::timeout(Duration::from_secs(5), diagnostics.recv())
            .await
            .expect("diagnostics")
            .unwrap();
        let value = d
            .status
            .iter()
            .flat_map(|s| &s.values)
            .find(|kv| kv.key == "Unmatched replies");
        if let Some(kv) = value {
            break kv.value.parse::<u64>().unwrap();
        }
    };
    assert!(
        unmatched >= 150,
        "the second requester's replies: {unmatched} unmatched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pymavlink_v1_responder_is_detected() {
    let port = common::free_port();
    let Some((_peer, _lines, t0, offset, _)) = pymavlink_peer(
        &format!("udpout:127.0.0.1:{port}"),
        &["--offset-s", "-77", "--v1", "--duration-s", "20"],
    ) else {
        return;
    };
    let (_master, listener, _task) = bridge(config(format!("udpin:127.0.0.1:{port}"))).await;
    let last = latency_until(&listener, Duration::from_secs(15), |m| {
        m.responder != umsg::MavlinkLatency::RESPONDER_UNKNOWN && m.timesync_received >= 20
    })
    .await
    .unwrap();
    assert_eq!(
        last.responder,
        umsg::MavlinkLatency::RESPONDER_V1,
        "{last:?}"
    );
    let _ = t0;
    let error = last.offset_ns - truth_at(last.header.stamp, |t| t + offset);
    assert!(
        error.abs() < 2_000_000,
        "a v1 responder still gives an offset: {error} ns"
    );
}

/// Under `/use_sim_time`, stamps and offsets are against `/clock`'s time: a simulator at
/// 1000 s, while the autopilot's clock reads ten days plus the host's uptime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_sim_time_stamps_and_offsets_are_against_clock() {
    let fcu = sim(SimConfig {
        clock_offset_ns: Some(864_000_000_000_000),
        ..SimConfig::default()
    });
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let simulator = node(master.uri(), "simulator").await;
    simulator
        .set_param("/use_sim_time", udpros::xmlrpc::Value::Bool(true))
        .await
        .unwrap();
    let (_ticking, sim_now) =
        common::simulated_clock(&simulator, udpros::msg::Time::new(1000, 0)).await;
    let bridge = node(master.uri(), "mavlink_bridge").await;
    assert!(bridge.clock().is_sim_time());
    let _task = tokio::spawn(run(bridge, config(format!("udpout:{}", fcu.local_addr()))));
    let listener = node(master.uri(), "listener").await;
    let last = latency_until(&listener, Duration::from_secs(20), |m| {
        m.converged && !m.header.stamp.is_zero()
    })
    .await
    .expect("latency published");
    assert!(last.converged, "{last:?}");
    let age = (sim_now() - last.header.stamp).as_secs_f64();
    assert!((0.0..5.0).contains(&age), "stamped in sim time: {last:?}");
    let remote_now = fcu.remote_at(udpros_bridges::mavlink::clock::monotonic_ns());
    let expected = sim_now().as_nanos() as i64 - remote_now;
    let error_s = (last.offset_ns - expected) as f64 / 1e9;
    assert!(
        error_s.abs() < 5.0,
        "offset against sim time, off by {error_s} s: {last:?}"
    );
}

/// Until the bridge has had `n` TIMESYNC replies (30 s at most): the link works both ways.
async fn timesync_flows(listener: &Node, n: u64) -> umsg::MavlinkLatency {
    let last = latency_until(listener, Duration::from_secs(30), |m| {
        m.timesync_received >= n
    })
    .await
    .expect("latency published");
    assert!(last.timesync_received >= n, "{last:?}");
    last
}

/// Microseconds since the Unix epoch, now.
fn unix_usec_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mavros_udp_urls_reach_the_simulated_autopilot_both_ways_and_send_system_time() {
    // The bridge speaks first, to the remote its URL names, as `?ids=` says it is.
    let fcu = sim(SimConfig::default());
    let mut cfg = config(format!(
        "udp://127.0.0.1:0@127.0.0.1:{}/?ids=1,240",
        fcu.local_addr().port()
    ));
    cfg.system_time_rate = 5.0;
    let (_master, listener, _task) = bridge(cfg).await;
    timesync_flows(&listener, 10).await;
    let stats = fcu.stats();
    assert!(stats.system_time_received >= 3, "{stats:?}");
    let (from, unix_usec, _boot_ms) = stats.last_system_time.unwrap();
    assert_eq!((from.system, from.component), (1, 240));
    let behind = unix_usec_now() - unix_usec as i64;
    assert!(
        (0..2_000_000).contains(&behind),
        "SYSTEM_TIME {behind} µs behind"
    );

    // An empty remote: the autopilot speaks first and is answered where it spoke from.
    // SYSTEM_TIME is off by default.
    let port = common::free_port();
    let fcu = sim(SimConfig::default());
    let (_master, listener, _task) = bridge(config(format!("udp://127.0.0.1:{port}@"))).await;
    fcu.introduce(([127, 0, 0, 1], port).into());
    timesync_flows(&listener, 10).await;
    assert_eq!(fcu.stats().system_time_received, 0);
}

/// A stream face (TCP, serial) for the simulated autopilot, which speaks UDP: each frame
/// from the stream
/// goes to it as a datagram, each of its datagrams into the stream.
async fn relay_to_sim<S>(stream: S, sim: std::net::SocketAddr)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use udpros_bridges::mavlink::messages::StreamParser;
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    udp.connect(sim).await.unwrap();
    let (mut reader, mut writer) = tokio::io::split(stream);
    let mut parser = StreamParser::default();
    let (mut bytes, mut datagram) = (vec![0u8; 4096], vec![0u8; 2048]);
    loop {
        tokio::select! {
            n = reader.read(&mut bytes) => {
                let Ok(n @ 1..) = n else { return };
                let mut frames = Vec::new();
                parser.push(&bytes[..n], |frame, _, _| frames.push(frame.to_vec()));
                for frame in frames {
                    let _ = udp.send(&frame).await;
                }
            }
            n = udp.recv(&mut datagram) => {
                let Ok(n) = n else { return };
                if writer.write_all(&datagram[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mavros_tcp_urls_reach_the_simulated_autopilot_both_ways() {
    // tcp://: the bridge connects to the autopilot.
    let fcu = sim(SimConfig::default());
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("tcp://127.0.0.1:{}", server.local_addr().unwrap().port());
    let (_master, listener, _task) = bridge(config(url)).await;
    let (stream, _) = tokio::time::timeout(Duration::from_secs(10), server.accept())
        .await
        .expect("the bridge connects")
        .unwrap();
    tokio::spawn(relay_to_sim(stream, fcu.local_addr()));
    timesync_flows(&listener, 10).await;

    // tcp-l://: the autopilot connects to the bridge.
    let fcu = sim(SimConfig::default());
    let port = common::free_port();
    let (_master, listener, _task) = bridge(config(format!("tcp-l://127.0.0.1:{port}"))).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let stream = loop {
        match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Ok(stream) => break stream,
            Err(e) if std::time::Instant::now() > deadline => panic!("tcp-l never listened: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    tokio::spawn(relay_to_sim(stream, fcu.local_addr()));
    timesync_flows(&listener, 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mavros_serial_urls_reach_the_simulated_autopilot_through_a_pseudo_terminal() {
    if std::process::Command::new("socat")
        .arg("-V")
        .output()
        .is_err()
    {
        return common::skip_or_fail("socat");
    }
    // A bare path (mavros's launch files) and serial-hwfc:// (RTS/CTS, which a pseudo
    // terminal accepts and ignores).
    for (i, url) in ["{path}:57600", "serial-hwfc://{path}:115200"]
        .iter()
        .enumerate()
    {
        let dir = std::env::temp_dir().join(format!("udpros-fcu-pty-{}-{i}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (fcu_side, bridge_side) = (dir.join("fcu"), dir.join("bridge"));
        let mut cmd = Command::new("socat");
        cmd.arg(format!("pty,raw,echo=0,link={}", fcu_side.display()))
            .arg(format!("pty,raw,echo=0,link={}", bridge_side.display()));
        let _socat = common::Child(cmd.spawn().unwrap());
        assert!(common::wait_for(Duration::from_secs(10), || {
            fcu_side.exists() && bridge_side.exists()
        }));
        let fcu = sim(SimConfig::default());
        let port =
            tokio_serial::SerialStream::open(&tokio_serial::new(fcu_side.to_str().unwrap(), 57600))
                .unwrap();
        tokio::spawn(relay_to_sim(port, fcu.local_addr()));
        let url = url.replace("{path}", bridge_side.to_str().unwrap());
        let (_master, listener, _task) = bridge(config(url)).await;
        timesync_flows(&listener, 10).await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pymavlink_autopilot_over_tcp_hears_system_time_from_the_ids_of_the_url() {
    let port = common::free_port();
    // pymavlink listens (tcpin:), the bridge connects with mavros's URL.
    let Some((_peer, mut lines, ..)) = pymavlink_peer(&format!("tcpin:127.0.0.1:{port}"), &[])
    else {
        return;
    };
    let mut cfg = config(format!("tcp://127.0.0.1:{port}?ids=1,240"));
    cfg.system_time_rate = 2.0;
    let (_master, listener, _task) = bridge(cfg).await;
    timesync_flows(&listener, 5).await;
    let line = tokio::task::block_in_place(|| {
        lines.wait_for(Duration::from_secs(10), |l| l.starts_with("SYSTEM_TIME"))
    })
    .expect("pymavlink heard SYSTEM_TIME");
    let field = |name: &str| -> String {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} in {line}"))
            .to_string()
    };
    assert_eq!(field("src"), "1/240", "{line}");
    let sent: i64 = field("unix_usec").parse().unwrap();
    let heard: i64 = field("at_usec").parse().unwrap();
    assert!((0..2_000_000).contains(&(heard - sent)), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_server_link_bounds_its_clients_and_shrugs_off_megabytes_of_noise() {
    use tokio::io::AsyncWriteExt;
    use udpros_bridges::mavlink::link::MAX_TCP_CLIENTS;
    let port = common::free_port();
    let (_master, listener, _task) = bridge(config(format!("tcp-l://127.0.0.1:{port}"))).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let first = loop {
        match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Ok(stream) => break stream,
            Err(e) if std::time::Instant::now() > deadline => panic!("tcp-l never listened: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    // The first client says who it is (a valid frame): it is never closed to make room.
    let hello = frame(
        Ids::GROUND_STATION,
        0,
        MavlinkVersion::V2,
        &Outgoing::Heartbeat,
    );
    let mut first = first;
    first.write_all(&hello).await.unwrap();
    // 2000 more: the link keeps MAX_TCP_CLIENTS and closes the rest at once (or, where
    // connecting took longer than the grace of silent clients, a silent one in their
    // place).
    let rss_before = common::peak_rss_mb(std::process::id());
    let mut clients = vec![first];
    for _ in 0..2000 {
        if let Ok(Ok(c)) = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::TcpStream::connect(("127.0.0.1", port)),
        )
        .await
        {
            clients.push(c);
        }
    }
    let turned_away = || async {
        let refused = diagnostic(&listener, "TCP clients refused", |_| true).await;
        let evicted = diagnostic(&listener, "TCP clients closed for silence", |_| true).await;
        refused.parse::<usize>().unwrap() + evicted.parse::<usize>().unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while turned_away().await < 2001 - MAX_TCP_CLIENTS && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(turned_away().await, 2001 - MAX_TCP_CLIENTS);
    // 16 MB of noise, start bytes and false lengths among it, from the first client.
    let noise: Vec<u8> = (0..1_000_000u32)
        .map(|i| [0xFD, 0xFF, 0x01, 0xFE, 0x42][i as usize % 5] ^ (i % 7 == 0) as u8)
        .collect();
    let mut writer = clients.swap_remove(0);
    for _ in 0..16 {
        writer.write_all(&noise).await.unwrap();
    }
    let skipped = diagnostic(&listener, "noise bytes skipped", |v| {
        v.parse::<u64>().is_ok_and(|n| n >= 15_000_000)
    })
    .await;
    assert!(skipped.parse::<u64>().unwrap() >= 15_000_000, "{skipped}");
    let grew = common::peak_rss_mb(std::process::id()) - rss_before;
    assert!(grew < 200.0, "memory grew {grew:.0} MB");
    // Room again once clients leave, and the link still works: the autopilot joins.
    drop(clients);
    drop(writer);
    let fcu = sim(SimConfig::default());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let stream = loop {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        // A refused client is closed at once: try again until one stays.
        let mut probe = [0u8; 1];
        match tokio::time::timeout(Duration::from_millis(300), stream.peek(&mut probe)).await {
            Ok(Ok(0)) | Ok(Err(_)) if std::time::Instant::now() < deadline => continue,
            _ => break stream,
        }
    };
    tokio::spawn(relay_to_sim(stream, fcu.local_addr()));
    timesync_flows(&listener, 10).await;
}

/// Sixteen TCP clients that connect to a `tcp-l://` link and say nothing take every place;
/// once they have been silent a while, the autopilot still gets in (the silent client
/// connected longest makes room) and TIMESYNC flows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_tcp_clients_do_not_keep_the_autopilot_out() {
    use udpros_bridges::mavlink::link::{MAX_TCP_CLIENTS, SILENT_CLIENT_GRACE};
    let port = common::free_port();
    let (_master, listener, _task) = bridge(config(format!("tcp-l://127.0.0.1:{port}"))).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut idle = Vec::new();
    while idle.len() < MAX_TCP_CLIENTS {
        match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Ok(stream) => idle.push(stream),
            Err(e) if std::time::Instant::now() > deadline => panic!("tcp-l never listened: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    tokio::time::sleep(SILENT_CLIENT_GRACE + Duration::from_millis(500)).await;
    let fcu = sim(SimConfig::default());
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tokio::spawn(relay_to_sim(stream, fcu.local_addr()));
    timesync_flows(&listener, 10).await;
    let evicted = diagnostic(&listener, "TCP clients closed for silence", |v| v != "0").await;
    assert_eq!(evicted, "1", "one silent client made room");
    drop(idle);
}

/// With a learnt remote (`udp://:PORT@`), junk datagrams at 100 Hz and valid frames of
/// another system for ten seconds move nothing: the bridge keeps answering the autopilot
/// (nothing is sent to the attacker) and TIMESYNC keeps its rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_and_strangers_cannot_steal_a_learnt_udp_remote() {
    let port = common::free_port();
    let fcu = sim(SimConfig::default());
    let (_master, listener, _task) = bridge(config(format!("udp://127.0.0.1:{port}@"))).await;
    fcu.introduce(([127, 0, 0, 1], port).into());
    let before = timesync_flows(&listener, 5).await.timesync_received;
    let attacker = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let stranger = frame(
        Ids {
            system: 42,
            component: 1,
        },
        0,
        MavlinkVersion::V2,
        &Outgoing::Heartbeat,
    );
    let (mut sent, mut answered) = (0u64, 0u64);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut buf = [0u8; 600];
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        tick.tick().await;
        let datagram: &[u8] = if sent % 10 == 0 { &stranger } else { &[0x42] };
        let _ = attacker.send_to(datagram, ("127.0.0.1", port)).await;
        sent += 1;
        while attacker.try_recv(&mut buf).is_ok() {
            answered += 1;
        }
    }
    let after = timesync_flows(&listener, before + 1)
        .await
        .timesync_received;
    assert_eq!(answered, 0, "the bridge sent to the attacker");
    assert!(
        after - before >= 60,
        "{} TIMESYNC replies in the 10 s of the attack",
        after - before
    );
    // Nine in ten were junk; loopback loses none, the socket's buffer may a few.
    let junk = sent - sent.div_ceil(10);
    let ignored = diagnostic(&listener, "datagrams without a valid frame", |v| {
        v.parse::<u64>().is_ok_and(|n| n >= junk * 9 / 10)
    })
    .await;
    assert!(
        ignored.parse::<u64>().unwrap() <= junk,
        "{ignored} of {junk}"
    );
}

#[test]
fn udp_b_broadcasts_until_the_autopilot_answers_and_udp_pb_for_good() {
    use common::netns::Network;
    let Some(net) = Network::new(&["companion", "fcu"], 1500) else {
        return;
    };
    // The limited broadcast needs a route; a companion on a tether has one like this.
    let companion = net.host("companion");
    let routed = Command::new("ip")
        .args([
            "-n",
            &companion.ns,
            "route",
            "add",
            "default",
            "dev",
            "eth0",
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(routed, "default route in {}", companion.ns);
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let fcu = net.host("fcu").spawn_inside(move || {
        // The autopilot listens on the remote port and answers whoever asks.
        let _sim =
            SimAutopilot::start("0.0.0.0:14550".parse().unwrap(), SimConfig::default()).unwrap();
        let _ = stopped.recv();
    });
    let bridge = companion.spawn_inside(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                for url in [
                    "udp-b://0.0.0.0:14555@:14550",
                    "udp-pb://0.0.0.0:14556@:14550",
                ] {
                    let (_master, listener, task) = bridge(config(url.into())).await;
                    timesync_flows(&listener, 10).await;
                    task.abort();
                }
            })
    });
    let result = bridge.join();
    let _ = stop.send(());
    fcu.join().unwrap();
    result.expect("TIMESYNC flowed over both broadcast URLs");
}
