//! The `mavlink_bridge` node's clock estimates end to end: against the simulated autopilot
//! (offset, drift, a reboot, absurd clocks), through the fault proxy (loss and delay
//! asymmetry as theory predicts), against an independent pymavlink autopilot (accuracy
//! after 20 s, a v1 responder, replies meant for another requester), in sim time, and to a
//! rospy subscriber that knows only the connection header. The helpers are
//! `mavlink_kit`'s.

mod mavlink_kit;

use mavlink_kit::*;

use udpros_testkit as common;

use common::node;
use std::process::{Command, Stdio};
use std::time::Duration;
use udpros::master::Master;
use udpros::msgs::{diagnostic_msgs, mavros_msgs, sensor_msgs, std_msgs, udpros as umsg};
use udpros::node::SubscribeOptions;
use udpros::transport::Protocol;
use udpros_bridges::mavlink::node::{run, Config};
use udpros_bridges::mavlink::sim::SimConfig;
use udpros_bridges::sim::{Faults, Proxy};

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
