//! Forged FEC loss reports for ten seconds, sent from the subscriber's own port (spoofed through a raw
//! socket, as an attacker on the subscriber's host or path could) as fast as this machine
//! sends: the publisher's link socket queues a few kilobytes of them, not megabytes, and
//! once the flood stops the subscriber's real reports are the ones the link follows again
//! within a second or two, not minutes later.

use bytes::Bytes;
use std::time::{Duration, Instant};
use udpros::master::Master;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, Node, SubscribeOptions};
use udpros::wire::udpros::loss::Report;
use udpros_testkit::spoof;

async fn node(master: &Master, name: &str) -> Node {
    let args = [
        format!("__master:={}", master.uri()),
        "__ip:=127.0.0.1".into(),
        format!("__name:={name}"),
    ];
    Node::new(name, args).await.unwrap()
}

/// Bytes waiting in the receive queue of the UDP socket bound to 127.0.0.1:`port`.
fn rx_queue(port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&local.as_str()) {
            return None;
        }
        let (_, rx) = fields.get(4)?.split_once(':')?;
        u64::from_str_radix(rx, 16).ok()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_forged_reports_stays_small_and_the_real_ones_win_again() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let (talker, listener) = (
        node(&master, "talker").await,
        node(&master, "listener").await,
    );
    let publisher = std::sync::Arc::new(
        talker
            .advertise::<std_msgs::UInt8MultiArray>("/flooded", AdvertiseOptions::default())
            .await
            .unwrap(),
    );
    let mut subscriber = listener
        .subscribe::<std_msgs::UInt8MultiArray>("/flooded", SubscribeOptions::udp_only())
        .await
        .unwrap();
    let sender = publisher.clone();
    let sending = tokio::spawn(async move {
        let message = std_msgs::UInt8MultiArray {
            data: Bytes::from(vec![7u8; 20_000]),
            ..Default::default()
        };
        // 50 Hz for at most a minute.
        for _ in 0..3000 {
            let _ = sender.publish(&message);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let link = loop {
        tokio::time::timeout(Duration::from_secs(10), subscriber.recv())
            .await
            .expect("messages over UDPROS")
            .unwrap();
        if let Some(link) = subscriber.links().into_iter().find(|l| l.peer.is_some()) {
            break link;
        }
    };
    let (sub_port, pub_port) = (link.local_port, link.peer.unwrap().port());
    let raw = spoof::raw_socket();
    let seen = spoof::sniff(&raw, pub_port, sub_port, 1);
    let first = seen.first().expect("a UDPROS datagram on the wire");
    let connection_id = u32::from_le_bytes([first[0], first[1], first[2], first[3]]);

    let forged = Report {
        loss: 0.4,
        long_loss: 0.4,
        long_datagrams: 10_000,
        mean_run: 1.0,
    }
    .encode(connection_id, 0);
    let flood = std::thread::spawn(move || {
        let (started, mut sent, mut deepest) = (Instant::now(), 0u64, 0u64);
        while started.elapsed() < Duration::from_secs(10) && sent < 10_000_000 {
            for _ in 0..1000 {
                spoof::send_spoofed(&raw, sub_port, pub_port, &forged);
            }
            sent += 1000;
            deepest = deepest.max(rx_queue(pub_port).unwrap_or(0));
        }
        (sent, deepest)
    });
    let publisher_links = || {
        publisher
            .links()
            .into_iter()
            .find_map(|l| l.fec?.reported_loss)
    };
    // The forged reports are heard (a link cannot tell them from the subscriber's).
    let mut believed: f64 = 0.0;
    while !flood.is_finished() {
        believed = believed.max(publisher_links().unwrap_or(0.0));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (sent, deepest) = flood.join().unwrap();
    assert!(believed > 0.3, "the forged reports never reached the link");
    assert!(sent > 10_000, "the flood sent {sent} reports");
    assert!(
        deepest <= 512 << 10,
        "the link's socket queued {deepest} bytes of {sent} forged reports"
    );
    // The real reports (nothing lost on loopback) take over again soon after the flood.
    let started = Instant::now();
    let mut recovered = None;
    while started.elapsed() < Duration::from_secs(5) {
        let reported = publisher_links();
        if reported.is_some_and(|loss| loss < 0.05) {
            recovered = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        recovered.is_some(),
        "the link still follows forged reports 5 s after the flood: {:?}",
        publisher_links()
    );
    sending.abort();
}
