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
