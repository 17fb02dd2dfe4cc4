//! Both bridges under dynamic_reconfigure, driven by Debian's `dynparam` and followed by
//! a rospy `Client`. `ping_sonar`: a simulated Ping360's echoes follow range, gain (an
//! enum, by name and by value) and a clamped transmit frequency within a ping; a simulated
//! Ping1D's scan follows `range`, and a range the device refuses goes back; each device
//! advertises its own topics only. `mavlink_bridge`: rates, the estimator published and the
//! window estimator's settings (`~fit`) change while it runs.

use udpros_testkit as common;

use common::{node, Dynparam};
use std::time::Duration;
use udpros::msgs::{sensor_msgs, udpros as umsg};
use udpros::node::{Node, SubscribeOptions};
use udpros_bridges::ping::link::LinkSpec;
use udpros_bridges::ping::node::{run, Config, Ping360Settings};
use udpros_bridges::ping::DeviceKind;

/// A rosmaster and a ping_sonar on a simulated `kind`.
async fn sonar(kind: DeviceKind) -> Option<(common::Child, String, Node, std::path::PathBuf)> {
    let python = common::ros_python()?;
    let (master, uri) = common::start_rosmaster()?;
    let sonar = node(&uri, "ping_sonar").await;
    tokio::spawn(run(sonar, Config::new(LinkSpec::Sim(kind))));
    let listener = node(&uri, "listener").await;
    Some((master, uri, listener, python))
}

/// The data topics the sonar publishes, from the master (not dynamic_reconfigure's).
async fn sonar_topics(listener: &Node) -> Vec<String> {
    let mut topics: Vec<String> = listener
        .master()
        .get_published_topics("")
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.0)
        .filter(|t| t.starts_with("/ping_sonar/") && !t.starts_with("/ping_sonar/parameter_"))
        .collect();
    topics.sort();
    topics
}

/// Waits until the device is identified and its settings are served.
async fn until_served(listener: &Node) {
    let served = listener.service_client::<udpros::msgs::dynamic_reconfigure::Reconfigure>(
        "/ping_sonar/set_parameters",
        Default::default(),
    );
    served
        .wait_for_service(Duration::from_secs(30))
        .await
        .expect("ping_sonar serves dynamic_reconfigure once the device is identified");
}

/// The first of the next three messages that `fits`: with a queue of one, one may be
/// stale and one on its way from the device, so the third is the first to carry what was
/// set since ("within a ping").
async fn within_a_ping<M: udpros::msg::Message + std::fmt::Debug>(
    sub: &mut udpros::node::Subscriber<M>,
    fits: impl Fn(&M) -> bool,
) -> M {
    let mut seen = Vec::new();
    for _ in 0..3 {
        let m = tokio::time::timeout(Duration::from_secs(10), sub.recv())
            .await
            .expect("a message within 10 s")
            .unwrap();
        if fits(&m) {
            return m;
        }
        seen.push(m);
    }
    panic!("three messages and none fits: {seen:?}");
}

fn latest() -> SubscribeOptions {
    SubscribeOptions {
        queue_size: 1,
        ..SubscribeOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping360_follows_dynparam_within_a_ping() {
    let Some((_master, uri, listener, python)) = sonar(DeviceKind::Ping360).await else {
        return;
    };
    let mut echoes = listener
        .subscribe::<umsg::Ping360Echo>("/ping_sonar/echo", latest())
        .await
        .unwrap();
    until_served(&listener).await;
    assert_eq!(
        sonar_topics(&listener).await,
        [
            "/ping_sonar/echo",
            "/ping_sonar/frames",
            "/ping_sonar/image",
            "/ping_sonar/scan"
        ],
        "a Ping360 has no range or profile"
    );
    let (_client, mut client) =
        common::reconfigure_peer(&python, &uri, &["client", "/ping_sonar", "range", "gain"]);
    let dynparam = Dynparam::new(&python, &uri, "ping360");
    let set = |args: &[&str]| {
        let mut all = vec!["set", "/ping_sonar"];
        all.extend_from_slice(args);
        tokio::task::block_in_place(|| dynparam.run(&all));
    };

    set(&["range", "5"]);
    let want = Ping360Settings::for_range(5.0, 1500.0);
    let echo = within_a_ping(&mut echoes, |e| {
        (e.number_of_samples, e.sample_period) == (want.number_of_samples, want.sample_period)
    })
    .await;
    assert!((echo.range - 5.0).abs() < 0.1, "{}", echo.range);
    assert!(tokio::task::block_in_place(|| client
        .wait_for(Duration::from_secs(20), |l| l == "CONFIG range=5.0 gain=1")
        .is_some()));

    set(&["gain", "high"]); // an enum by name
    within_a_ping(&mut echoes, |e| e.gain_setting == 2).await;
    set(&["gain", "0"]); // and by value
    within_a_ping(&mut echoes, |e| e.gain_setting == 0).await;
    set(&["transmit_frequency", "5000"]); // clamped to 1000
    within_a_ping(&mut echoes, |e| e.transmit_frequency == 1000).await;
    let got = tokio::task::block_in_place(|| dynparam.run(&["get", "/ping_sonar"]));
    assert!(got.contains("'transmit_frequency': 1000"), "{got}");
    assert!(got.contains("'range': 5.0"), "{got}");
    // The parameter server mirrors the settings: `udpros param` and rosparam see them.
    let mirrored = listener
        .get_param("/ping_sonar/transmit_frequency")
        .await
        .unwrap();
    assert_eq!(mirrored, Some(udpros::xmlrpc::Value::Int(1000)));

    // dump, change, load: back where it was.
    let dump = std::env::temp_dir().join(format!("udpros-ping360-{}.yaml", std::process::id()));
    let dump_arg = dump.to_str().unwrap().to_string();
    tokio::task::block_in_place(|| dynparam.run(&["dump", "/ping_sonar", &dump_arg]));
    set(&["range", "20"]);
    tokio::task::block_in_place(|| dynparam.run(&["load", "/ping_sonar", &dump_arg]));
    within_a_ping(&mut echoes, |e| (e.range - 5.0).abs() < 0.1).await;
    let _ = std::fs::remove_file(&dump);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping1d_scan_follows_range_and_a_refused_range_goes_back() {
    let Some((_master, uri, listener, python)) = sonar(DeviceKind::Ping1d).await else {
        return;
    };
    let mut ranges = listener
        .subscribe::<sensor_msgs::Range>("/ping_sonar/range", latest())
        .await
        .unwrap();
    until_served(&listener).await;
    assert_eq!(
        sonar_topics(&listener).await,
        [
            "/ping_sonar/frames",
            "/ping_sonar/profile",
            "/ping_sonar/range"
        ],
        "a Ping1D has no echo, scan or image"
    );
    let dynparam = Dynparam::new(&python, &uri, "ping1d");
    tokio::task::block_in_place(|| {
        dynparam.run(&["set", "/ping_sonar", "{'mode_auto': False, 'range': 20}"])
    });
    within_a_ping(&mut ranges, |r| r.max_range == 20.0).await; // the scan follows range

    // Under a metre, the Ping1D refuses (NACK): the setting stays 20, everywhere.
    let got = tokio::task::block_in_place(|| {
        dynparam.run(&["set", "/ping_sonar", "range", "0.5"]);
        dynparam.run(&["get", "/ping_sonar"])
    });
    assert!(got.contains("'range': 20.0"), "{got}");
    for _ in 0..3 {
        let r = tokio::time::timeout(Duration::from_secs(10), ranges.recv()).await;
        assert_eq!(r.unwrap().unwrap().max_range, 20.0, "the device kept 20 m");
    }
    let mirrored = listener.get_param("/ping_sonar/range").await.unwrap();
    assert_eq!(mirrored, Some(udpros::xmlrpc::Value::Double(20.0)));
}

/// `~latency` until `done` says so (20 s at most).
async fn latency_until(
    sub: &mut udpros::node::Subscriber<umsg::MavlinkLatency>,
    done: impl Fn(&umsg::MavlinkLatency) -> bool,
) -> umsg::MavlinkLatency {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let m = tokio::time::timeout_at(deadline, sub.recv())
            .await
            .expect("~latency within 20 s")
            .unwrap();
        if done(&m) {
            return m;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mavlink_bridge_rates_estimator_and_fit_change_while_it_runs() {
    use udpros_bridges::mavlink::link::FcuUrl;
    use udpros_bridges::mavlink::node::{run, Config};
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let bridge = node(&uri, "mavlink_bridge").await;
    tokio::spawn(run(bridge, Config::new(FcuUrl::Sim)));
    let listener = node(&uri, "listener").await;
    let mut latency = listener
        .subscribe::<umsg::MavlinkLatency>("/mavlink_bridge/latency", SubscribeOptions::default())
        .await
        .unwrap();
    let dynparam = Dynparam::new(&python, &uri, "mavlink");
    let listed = tokio::task::block_in_place(|| {
        common::wait_for(Duration::from_secs(20), || {
            dynparam.run(&["list"]).contains("/mavlink_bridge/fit")
        });
        dynparam.run(&["list"])
    });
    let servers: Vec<&str> = listed.lines().collect();
    assert_eq!(
        servers,
        ["/mavlink_bridge", "/mavlink_bridge/fit"],
        "{listed}"
    );
    let (_client, mut client) = common::reconfigure_peer(
        &python,
        &uri,
        &[
            "client",
            "/mavlink_bridge",
            "ping_rate",
            "timesync_estimator",
        ],
    );

    // PING from 1 Hz to 20 Hz: a second brings about twenty replies, not one.
    let before = latency_until(&mut latency, |m| m.ping_received >= 1).await;
    tokio::task::block_in_place(|| dynparam.run(&["set", "/mavlink_bridge", "ping_rate", "20"]));
    let after = latency_until(&mut latency, |m| {
        m.ping_received >= before.ping_received + 10
    })
    .await;
    assert!(
        after.ping_received >= before.ping_received + 10,
        "{after:?}"
    );
    assert!(tokio::task::block_in_place(|| client
        .wait_for(Duration::from_secs(20), |l| l
            == "CONFIG ping_rate=20.0 timesync_estimator=window")
        .is_some()));

    // TIMESYNC off: the count stops. `set` returns once the bridge's loop has applied the
    // change, so a report stamped after that counts every send there will be; a report
    // still queued from before it may not (the next one would then count a few more).
    tokio::task::block_in_place(|| dynparam.run(&["set", "/mavlink_bridge", "timesync_rate", "0"]));
    let changed = listener.now();
    let stopped = latency_until(&mut latency, |m| m.header.stamp > changed).await;
    let later = latency_until(&mut latency, |m| m.header.stamp > stopped.header.stamp).await;
    let later = latency_until(&mut latency, |m| m.header.stamp > later.header.stamp).await;
    assert_eq!(
        later.timesync_sent, stopped.timesync_sent,
        "TIMESYNC requests went on after the rate was set to 0"
    );

    // The estimator published: an enum of strings, by name; mirrored as a parameter.
    tokio::task::block_in_place(|| {
        dynparam.run(&["set", "/mavlink_bridge", "timesync_estimator", "px4"])
    });
    assert!(tokio::task::block_in_place(|| client
        .wait_for(Duration::from_secs(20), |l| l
            .ends_with("timesync_estimator=px4"))
        .is_some()));
    let mirrored = listener
        .get_param("/mavlink_bridge/timesync_estimator")
        .await
        .unwrap();
    assert_eq!(mirrored, Some(udpros::xmlrpc::Value::String("px4".into())));

    // The window estimator's settings live under ~fit, mirrored to ~fit/...; clamped.
    let got = tokio::task::block_in_place(|| {
        dynparam.run(&[
            "set",
            "/mavlink_bridge/fit",
            "{'window': 5, 'quantile': 0.5}",
        ]);
        dynparam.run(&["get", "/mavlink_bridge/fit"])
    });
    assert!(
        got.contains("'window': 16") && got.contains("'quantile': 0.5"),
        "{got}"
    );
    let window = listener
        .get_param("/mavlink_bridge/fit/window")
        .await
        .unwrap();
    assert_eq!(window, Some(udpros::xmlrpc::Value::Int(16)));
}
