//! MAVLink 2 signing on mavlink_bridge's link (issue 50): against a pymavlink autopilot
//! that checks signatures with pymavlink's own code (both directions verify, TIMESYNC
//! flows), against one that does not sign (refused and counted under `require`), against
//! the simulated autopilot, and against forged, replayed and unsigned frames sent by hand.

mod mavlink_kit;

use mavlink_kit::*;
use udpros_testkit as common;

use std::time::Duration;
use udpros_bridges::mavlink::messages::{crc_extra, frame, Outgoing};
use udpros_bridges::mavlink::node::SIGNING_PURPOSE;
use udpros_bridges::mavlink::protocol::{Ids, Timesync};
use udpros_bridges::mavlink::signing::{unix_us, Signer, SigningConfig, SigningKey, SigningPolicy};
use udpros_bridges::mavlink::sim::SimConfig;

/// The secret mavlink_bridge derives from a fresh graph key, as `udpros key mavlink` prints.
fn secret() -> SigningKey {
    let key = udpros::secure::new_key().unwrap();
    SigningKey(key.derive(SIGNING_PURPOSE))
}

fn hex(key: &SigningKey) -> String {
    key.0.iter().map(|b| format!("{b:02x}")).collect()
}

fn signing(key: &SigningKey, policy: SigningPolicy) -> Option<SigningConfig> {
    Some(SigningConfig {
        key: key.clone(),
        policy,
        link_id: 1,
    })
}

/// A `/diagnostics` counter of the bridge once it satisfies `ready` (within 20 s).
async fn counter(listener: &udpros::node::Node, key: &str, ready: impl Fn(u64) -> bool) -> u64 {
    let text = common::diagnostic(listener, key, |v| v.parse().is_ok_and(&ready)).await;
    text.parse().unwrap_or_else(|_| panic!("{key}: {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pymavlink_autopilot_that_requires_signing_and_the_bridge_verify_each_other() {
    let key = secret();
    let port = common::free_port();
    let Some((_peer, mut lines, ..)) = pymavlink_peer(
        &format!("udpout:127.0.0.1:{port}"),
        &[
            "--signing-key",
            &hex(&key),
            "--require-signed",
            "--duration-s",
            "40",
        ],
    ) else {
        return;
    };
    let mut cfg = config(format!("udpin:127.0.0.1:{port}"));
    cfg.signing = signing(&key, SigningPolicy::Require);
    let (_master, listener, _task) = bridge(cfg).await;
    // pymavlink answers only requests whose signature it verified; the bridge takes only
    // replies whose signature it verified.
    timesync_flows(&listener, 10).await;
    let line = tokio::task::block_in_place(|| {
        lines.wait_for(Duration::from_secs(10), |l| {
            l.starts_with("SIGNING")
                && l.split_whitespace()
                    .find_map(|kv| kv.strip_prefix("good="))
                    .is_some_and(|n| n.parse::<u64>().is_ok_and(|n| n >= 10))
        })
    })
    .expect("pymavlink verified the bridge's frames");
    assert!(
        line.contains(" bad=0 ") && line.ends_with("rejected=0"),
        "{line}"
    );
    assert!(counter(&listener, "signed frames verified", |n| n >= 10).await >= 10);
    assert_eq!(
        counter(&listener, "frames refused: bad signature", |_| true).await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_require_an_autopilot_that_does_not_sign_is_refused_and_counted() {
    let key = secret();
    let port = common::free_port();
    let Some((_peer, ..)) =
        pymavlink_peer(&format!("udpout:127.0.0.1:{port}"), &["--duration-s", "30"])
    else {
        return;
    };
    let mut cfg = config(format!("udpin:127.0.0.1:{port}"));
    cfg.signing = signing(&key, SigningPolicy::Require);
    let (_master, listener, _task) = bridge(cfg).await;
    assert!(counter(&listener, "unsigned frames refused", |n| n >= 5).await >= 5);
    let last = latency_until(&listener, Duration::from_secs(3), |_| false)
        .await
        .expect("latency published");
    assert_eq!(last.timesync_received, 0, "{last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulated_autopilot_signs_and_checks_as_a_signing_autopilot_does() {
    let key = secret();
    let fcu = sim(SimConfig {
        signing: signing(&key, SigningPolicy::Require),
        ..SimConfig::default()
    });
    let mut cfg = config(format!(
        "udp://127.0.0.1:0@127.0.0.1:{}",
        fcu.local_addr().port()
    ));
    cfg.signing = signing(&key, SigningPolicy::Require);
    let (_master, listener, _task) = bridge(cfg).await;
    timesync_flows(&listener, 10).await;
    let seen = fcu.stats().signatures;
    assert!(seen.verified >= 10 && seen.refused() == 0, "{seen:?}");
}

/// Frames sent to the bridge by hand: unsigned, replayed, signed with another key, with a
/// changed signature. None reaches the node; each is counted by its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_replayed_and_unsigned_frames_are_refused_by_reason() {
    let key = secret();
    let port = common::free_port();
    let mut cfg = config(format!("udp://127.0.0.1:{port}@"));
    cfg.signing = signing(&key, SigningPolicy::Require);
    let (_master, listener, _task) = bridge(cfg).await;
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let to = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let reply = Outgoing::Timesync(Timesync {
        tc1: 5_000_000_000,
        ts1: 1,
        target: Ids::ONBOARD_COMPUTER,
    });
    let unsigned = frame(Ids::AUTOPILOT, 1, mavlink::MavlinkVersion::V2, &reply);
    let sign = |key: &SigningKey| {
        let mut bytes = unsigned.clone();
        Signer::new(key.clone(), 3).sign(&mut bytes, unix_us(), crc_extra(&reply));
        bytes
    };
    let signed = sign(&key);
    let mut changed = signed.clone();
    *changed.last_mut().unwrap() ^= 0x01;
    let other = sign(&secret());
    // The bridge binds its port once it runs: send until the first frame is counted.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut verified = 0;
    while verified == 0 && tokio::time::Instant::now() < deadline {
        socket.send_to(&signed, to).await.unwrap();
        verified = counter(&listener, "signed frames verified", |_| true).await;
    }
    assert_eq!(verified, 1, "the first copy is taken");
    for datagram in [&signed, &signed, &unsigned, &changed, &other] {
        socket.send_to(datagram, to).await.unwrap();
    }
    assert!(counter(&listener, "frames refused: replayed or stale", |n| n >= 2).await >= 2);
    assert!(counter(&listener, "unsigned frames refused", |n| n >= 1).await >= 1);
    assert!(counter(&listener, "frames refused: bad signature", |n| n >= 2).await >= 2);
    assert_eq!(
        counter(&listener, "signed frames verified", |_| true).await,
        1
    );
}

/// The graph key and the MAVLink secret appear nowhere a user or another node can read:
/// not in the bridge's log (debug level, on stderr and /rosout), its command line, its
/// parameters, its getBusInfo, nor /rosout_agg; only the key file's path and id do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_are_in_no_log_parameter_bus_info_or_command_line() {
    use std::process::{Command, Stdio};
    use udpros::secure::{Mode, Policy, Security};
    let dir = std::env::temp_dir().join(format!("udpros-keys-nowhere-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("graph.key");
    let key = udpros::secure::new_key().unwrap();
    udpros::secure::write_new_key_file(&file, &key).unwrap();
    let key_hex = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("udpros-key-v1 ").map(str::to_string))
        .expect("the key in its file");
    let secret_hex = hex(&SigningKey(key.derive(SIGNING_PURPOSE)));
    let secrets = [key_hex.as_str(), secret_hex.as_str()];
    let leaks = |what: &str, text: &str| {
        for secret in secrets {
            assert!(
                !text.to_lowercase().contains(secret),
                "a secret in {what}: {text}"
            );
        }
    };
    let security = Security {
        policy: Policy::Require,
        mode: Mode::Encrypt,
        key: Some(std::sync::Arc::new(key.clone())),
        cipher: None,
    };
    let options = udpros::master::RoscoreOptions {
        security: Some(security.clone()),
        ..Default::default()
    };
    let core = udpros::master::Roscore::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1", options)
        .await
        .unwrap();
    let uri = core.master().uri().to_string();
    let watcher = common::node_with(
        &uri,
        "watcher",
        udpros::node::NodeOptions {
            security: Some(security),
            ..Default::default()
        },
    )
    .await;
    let mut logs = watcher
        .subscribe::<udpros::msgs::rosgraph_msgs::Log>(
            "/rosout_agg",
            udpros::node::SubscribeOptions::default(),
        )
        .await
        .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mavlink_bridge"));
    cmd.args([
        format!("__master:={uri}"),
        "__ip:=127.0.0.1".into(),
        "_signing:=require".into(),
    ])
    .env("UDPROS_KEY_FILE", &file)
    .env("UDPROS_SECURITY", "require")
    .env("RUST_LOG", "debug")
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    // A file, not a pipe: a debug log nobody reads yet must not block the bridge.
    .stderr(std::fs::File::create(dir.join("stderr")).unwrap());
    let child = common::Child(cmd.spawn().unwrap());
    let pid = child.0.id();
    // The bridge signs and verifies with its simulated autopilot: TIMESYNC flows.
    timesync_flows(&watcher, 10).await;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    leaks("the command line", &String::from_utf8_lossy(&cmdline));
    let client = watcher.master().xmlrpc().clone();
    let params = client
        .call(&uri, "getParam", vec!["/watcher".into(), "/".into()])
        .await
        .unwrap();
    leaks("the parameter server", &format!("{params:?}"));
    let bridge_uri = watcher
        .master()
        .lookup_node("/mavlink_bridge")
        .await
        .unwrap();
    let bus = client
        .call(&bridge_uri, "getBusInfo", vec!["/watcher".into()])
        .await
        .unwrap();
    leaks("getBusInfo", &format!("{bus:?}"));
    let mut aggregated = 0;
    while let Ok(Some(log)) = tokio::time::timeout(Duration::from_millis(500), logs.recv()).await {
        leaks("/rosout_agg", &format!("{log:?}"));
        aggregated += 1;
    }
    drop(child);
    let output = std::fs::read_to_string(dir.join("stderr")).unwrap();
    leaks("stderr", &output);
    assert!(
        output.contains("policy require"),
        "the log says the policy: {output}"
    );
    assert!(
        output.contains(&key.id().to_string()),
        "and the key's id: {output}"
    );
    println!("{aggregated} log messages aggregated");
    let _ = std::fs::remove_dir_all(&dir);
}
