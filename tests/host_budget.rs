//! One rate for all of a node's topics toward a host (`NodeOptions::max_rate_per_host`):
//! the sum keeps to it, bulk topics share it, and urgent ones (marked, or one datagram
//! small) go ahead of the bulk, over UDPROS and TCPROS, to udpros subscribers and to
//! roscpp ones. Rates are asserted with generous margins; the priority by the gap between
//! an urgent and a plain topic of the same size, which load widens rather than closes.

use udpros_testkit as common;

use bytes::Bytes;
use common::{node_with, spawn_lines, Child, Lines};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use udpros::master::Master;
use udpros::msgs::std_msgs::UInt8MultiArray;
use udpros::node::{AdvertiseOptions, Node, NodeOptions, Publisher, SubscribeOptions};
use udpros::transport::Protocol;

/// The node's budget toward the subscriber's host: 200 kB/s (1.6 Mbit/s).
const CAP: f64 = 200_000.0;

/// Time since the test began, the clock every message carries.
fn since_start() -> Duration {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// A message of `size` bytes (at least 8) that says when it was published.
fn stamped(size: usize) -> UInt8MultiArray {
    let mut data = vec![0u8; size.max(8)];
    data[..8].copy_from_slice(&(since_start().as_micros() as u64).to_le_bytes());
    UInt8MultiArray {
        data: Bytes::from(data),
        ..Default::default()
    }
}

/// How long ago a [`stamped`] message was published.
fn age(message: &UInt8MultiArray) -> Duration {
    let mut micros = [0u8; 8];
    micros.copy_from_slice(&message.data[..8]);
    since_start().saturating_sub(Duration::from_micros(u64::from_le_bytes(micros)))
}

/// The publishing node: its budget per host is [`CAP`].
async fn capped_node(master: &str) -> Node {
    let options = NodeOptions {
        max_rate_per_host: Some(CAP),
        handle_signals: false,
        ..NodeOptions::default()
    };
    node_with(master, "capped", options).await
}

/// Publishes `size`-byte stamped messages every `period` until aborted.
fn keep_publishing(
    publisher: impl std::ops::Deref<Target = Publisher<UInt8MultiArray>> + Send + 'static,
    size: usize,
    period: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            let _ = publisher.publish(&stamped(size));
        }
    })
}

/// What one subscriber saw in the measured stretch.
#[derive(Debug, Default)]
struct Seen {
    messages: usize,
    bytes: usize,
    ages: Vec<Duration>,
}

impl Seen {
    /// The `q` quantile of the ages (0 when none arrived).
    fn age(&mut self, q: f64) -> Duration {
        self.ages.sort();
        let last = self.ages.len().saturating_sub(1);
        self.ages
            .get((last as f64 * q).round() as usize)
            .copied()
            .unwrap_or_default()
    }
}

/// A topic the test publishes and subscribes to.
struct Stream {
    topic: &'static str,
    size: usize,
    period: Duration,
    urgent: bool,
}

const STREAMS: [Stream; 4] = [
    // A camera: 20 kB at 50 Hz, 1 MB/s offered, five times the budget.
    Stream {
        topic: "/bulk",
        size: 20_000,
        period: Duration::from_millis(20),
        urgent: false,
    },
    // Control: one datagram, so urgent whatever it is marked.
    Stream {
        topic: "/control",
        size: 64,
        period: Duration::from_millis(20),
        urgent: false,
    },
    // A state topic of several datagrams, marked urgent, and its unmarked twin.
    Stream {
        topic: "/state",
        size: 4_000,
        period: Duration::from_millis(50),
        urgent: true,
    },
    Stream {
        topic: "/state_plain",
        size: 4_000,
        period: Duration::from_millis(50),
        urgent: false,
    },
];

/// Streams every topic of [`STREAMS`] from a capped node to a udpros subscriber over
/// `transport` for `measure` after a second's start: what each topic delivered.
async fn across_the_budget(transport: Protocol, measure: Duration) -> Vec<Seen> {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let talker = capped_node(master.uri()).await;
    let listener = common::node(master.uri(), "listener").await;
    let mut tasks = Vec::new();
    let mut subscribers = Vec::new();
    for stream in &STREAMS {
        let options = AdvertiseOptions {
            urgent: stream.urgent,
            ..AdvertiseOptions::default()
        };
        let publisher = talker
            .advertise::<UInt8MultiArray>(stream.topic, options)
            .await
            .unwrap();
        let options = SubscribeOptions {
            transports: vec![transport],
            ..SubscribeOptions::default()
        };
        let subscriber = listener
            .subscribe::<UInt8MultiArray>(stream.topic, options)
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while publisher.num_subscribers() == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(publisher.num_subscribers(), 1, "{} linked", stream.topic);
        tasks.push(keep_publishing(
            Box::new(publisher),
            stream.size,
            stream.period,
        ));
        subscribers.push(subscriber);
    }
    let from = Instant::now() + Duration::from_secs(1);
    let until = from + measure;
    let readers = subscribers.into_iter().map(|mut subscriber| {
        tokio::spawn(async move {
            let mut seen = Seen::default();
            loop {
                let left = until.saturating_duration_since(Instant::now());
                let Ok(Some(message)) = tokio::time::timeout(left, subscriber.recv()).await else {
                    return seen;
                };
                if Instant::now() >= from {
                    seen.messages += 1;
                    seen.bytes += message.data.len();
                    seen.ages.push(age(&message));
                }
            }
        })
    });
    let mut seen = Vec::new();
    for reader in readers.collect::<Vec<_>>() {
        seen.push(reader.await.unwrap());
    }
    tasks.iter().for_each(|t| t.abort());
    seen
}

/// Checks what [`across_the_budget`] delivered over `transport`.
async fn urgent_topics_go_ahead_of_bulk(transport: Protocol) {
    let measure = Duration::from_secs(4);
    let mut seen = across_the_budget(transport, measure).await;
    for (stream, seen) in STREAMS.iter().zip(&seen) {
        println!(
            "{transport:?} {}: {} messages, {} B, ages {:?}",
            stream.topic,
            seen.messages,
            seen.bytes,
            {
                let mut a = seen.ages.clone();
                a.sort();
                [0.5, 0.9].map(|q| {
                    a.get((a.len().saturating_sub(1) as f64 * q) as usize)
                        .copied()
                })
            }
        );
    }
    let secs = measure.as_secs_f64();
    let total: usize = seen.iter().map(|s| s.bytes).sum();
    // The sum keeps to the budget: 25 % for timers and the start of the stretch.
    assert!(
        (total as f64) < CAP * secs * 1.25 + 40_000.0,
        "{transport:?}: {total} bytes in {secs} s through a {CAP} B/s budget"
    );
    // The bulk topic is not starved: at least a third of what the others leave it.
    let bulk = seen[0].bytes as f64;
    assert!(
        bulk > (CAP - 85_000.0) * secs / 3.0,
        "{transport:?}: bulk got {bulk} bytes"
    );
    // Control and the urgent state topic arrive (nearly) all, and at once.
    for (i, expected) in [(1, 50.0 * secs), (2, 20.0 * secs)] {
        let topic = STREAMS[i].topic;
        let delivered = seen[i].messages as f64 / expected;
        assert!(
            delivered > 0.9,
            "{transport:?} {topic}: {delivered:.2} delivered"
        );
        let p90 = seen[i].age(0.9);
        assert!(
            p90 < Duration::from_millis(60),
            "{transport:?} {topic}: p90 age {p90:?}"
        );
    }
    // Its unmarked twin waits behind the bulk topic's debt: the priority is the mark.
    let (urgent, plain) = (seen[2].age(0.5), seen[3].age(0.5));
    assert!(
        plain > Duration::from_millis(20) && plain > urgent * 2,
        "{transport:?}: p50 age urgent {urgent:?}, unmarked {plain:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn urgent_topics_go_ahead_of_bulk_over_udpros() {
    urgent_topics_go_ahead_of_bulk(Protocol::Udp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn urgent_topics_go_ahead_of_bulk_over_tcpros() {
    urgent_topics_go_ahead_of_bulk(Protocol::Tcp).await;
}

/// The roscpp test peer subscribing to `topic` of byte messages.
fn roscpp_subscriber(master: &str, topic: &str, hints: &str) -> Option<(Child, Lines)> {
    let binary = common::roscpp_peer()?;
    let mut cmd = Command::new(binary);
    cmd.args(["sub", topic, "--type", "bytes", "--hints", hints]);
    common::ros_env(&mut cmd, master);
    Some(spawn_lines(cmd))
}

/// Toward roscpp subscribers, which report nothing, the budget is all a publisher has: two
/// bulk topics, one over UDPROS and one over TCPROS, share it, both get some of it, and
/// what arrives is whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roscpp_subscribers_share_one_budget() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let talker = capped_node(&uri).await;
    let mut peers = Vec::new();
    let mut tasks = Vec::new();
    for (topic, hints) in [("/over_udp", "udp"), ("/over_tcp", "tcp")] {
        let Some(mut peer) = roscpp_subscriber(&uri, topic, hints) else {
            return;
        };
        let publisher = talker
            .advertise::<UInt8MultiArray>(topic, AdvertiseOptions::default())
            .await
            .unwrap();
        tokio::task::block_in_place(|| peer.1.wait_for(Duration::from_secs(30), |l| l == "READY"))
            .expect("roscpp subscribes");
        let deadline = Instant::now() + Duration::from_secs(30);
        while publisher.num_subscribers() == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(publisher.num_subscribers(), 1, "{topic} linked");
        // 10 kB at 50 Hz: 500 kB/s offered on each, five times the budget together. The
        // peer checks each message's pattern, so the first four bytes are a count.
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            for n in 0u32.. {
                tick.tick().await;
                let mut data: Vec<u8> = (0..10_000)
                    .map(|i| (n as usize * 31 + i * 7) as u8)
                    .collect();
                data[..4].copy_from_slice(&n.to_le_bytes());
                let message = UInt8MultiArray {
                    data: Bytes::from(data),
                    ..Default::default()
                };
                let _ = publisher.publish(&message);
            }
        }));
        peers.push(peer);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let from = Instant::now();
    let measure = Duration::from_secs(4);
    tokio::time::sleep(measure).await;
    let until = Instant::now();
    tasks.iter().for_each(|t| t.abort());
    let mut total = 0usize;
    for (mut peer, topic) in peers.into_iter().zip(["/over_udp", "/over_tcp"]) {
        tokio::task::block_in_place(|| peer.1.rest(Duration::from_millis(300)));
        let lines = &peer.1;
        assert!(
            !lines.seen.iter().any(|l| l.ends_with("corrupt")),
            "{topic}: corrupt messages"
        );
        let good = lines
            .seen
            .iter()
            .zip(&lines.arrived)
            .filter(|(l, at)| {
                l.starts_with("RECV ") && l.ends_with(" ok") && **at >= from && **at < until
            })
            .count();
        println!("{topic}: {good} messages of 10 kB in {measure:?}");
        // Each has a fair share of a third at the least.
        assert!(
            good as f64 * 10_000.0 > CAP * measure.as_secs_f64() / 2.0 / 3.0,
            "{topic}: {good} messages"
        );
        total += good * 10_000;
    }
    assert!(
        (total as f64) < CAP * measure.as_secs_f64() * 1.25 + 40_000.0,
        "{total} bytes in {measure:?} through a {CAP} B/s budget"
    );
}

/// Subscribers that come and go leave nothing behind: a link that closes while it waits
/// for its turn in the host's budget stops waiting (each waiting link holds a task and a
/// socket, and at 10 kB/s a 100 kB image's turn is seconds away, so subscribers coming and
/// going faster than that would pile them up without bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_that_come_and_go_leave_no_waiting_links() {
    const ROUNDS: usize = 60;
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let options = NodeOptions {
        max_rate_per_host: Some(10_000.0),
        handle_signals: false,
        ..NodeOptions::default()
    };
    let talker = node_with(master.uri(), "slow_radio", options).await;
    let publisher = talker
        .advertise::<UInt8MultiArray>("/images", AdvertiseOptions::default())
        .await
        .unwrap();
    let publisher = std::sync::Arc::new(publisher);
    let publishing = keep_publishing(publisher.clone(), 100_000, Duration::from_millis(50));
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    // The publisher's TCPROS port, as a subscriber learns it.
    let answer = udpros::xmlrpc::XmlRpcClient::default()
        .call(
            talker.uri(),
            "requestTopic",
            vec![
                "/comes_and_goes".into(),
                "/images".into(),
                udpros::xmlrpc::Value::from(vec![udpros::xmlrpc::Value::from(vec!["TCPROS"])]),
            ],
        )
        .await
        .unwrap();
    let port = answer.as_array().unwrap()[2].as_array().unwrap()[2]
        .as_i32()
        .unwrap() as u16;
    let header = udpros::wire::header::ConnectionHeader::new()
        .with("callerid", "/comes_and_goes")
        .with("topic", "/images")
        .with("md5sum", "*")
        .with("type", "*")
        .encode_tcp();
    // A subscriber that connects and never reads: its link waits for its turns.
    let connect = || async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        stream.write_all(&header).await.unwrap();
        stream
    };
    let stays = connect().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while publisher.num_subscribers() < 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = tasks();
    for round in 0..ROUNDS {
        let goes = connect().await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while publisher.num_subscribers() < 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(publisher.num_subscribers(), 2, "round {round}: linked");
        // An image is published every 50 ms: its link has one waiting for its turn.
        tokio::time::sleep(Duration::from_millis(60)).await;
        drop(goes);
        let deadline = Instant::now() + Duration::from_secs(10);
        while publisher.num_subscribers() > 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // What the closed links' tasks had to finish takes moments, not turns.
    let deadline = Instant::now() + Duration::from_secs(5);
    while tasks() > before + 10 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = tasks();
    publishing.abort();
    drop(stays);
    assert!(
        after <= before + 10,
        "{ROUNDS} subscribers came and went: {before} tasks before, {after} after"
    );
}

/// A link under the budget may hold its newest message back for a fresher one due soon
/// (`wire::freshness::Cadence`); a publisher that stops then leaves its last message
/// waiting only until a little after its successor was due, never for good: 20 kB at
/// 20 Hz (twice the budget) for two seconds, then a last message marked by its size, and
/// nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_message_under_the_budget_is_never_held_for_good() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let talker = capped_node(master.uri()).await;
    let listener = common::node(master.uri(), "listener").await;
    let publisher = talker
        .advertise::<UInt8MultiArray>("/images", AdvertiseOptions::default())
        .await
        .unwrap();
    let mut subscriber = listener
        .subscribe::<UInt8MultiArray>("/images", SubscribeOptions::default())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while publisher.num_subscribers() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(publisher.num_subscribers(), 1);
    for _ in 0..40 {
        publisher.publish(&stamped(20_000)).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    publisher.publish(&stamped(20_001)).unwrap();
    let (mut before, mut last) = (0, None);
    let until = Instant::now() + Duration::from_secs(5);
    while last.is_none() {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, subscriber.recv()).await {
            Ok(Some(message)) if message.data.len() == 20_001 => last = Some(age(&message)),
            Ok(Some(_)) => before += 1,
            _ => break,
        }
    }
    let last = last.unwrap_or_else(|| panic!("the last message never came ({before} before)"));
    // At 200 kB/s a 20 kB message takes 0.1 s; held, a little longer.
    assert!(
        last < Duration::from_secs(2),
        "the last arrived {last:?} old"
    );
    assert!((5..=40).contains(&before), "{before} of 40 before it");
}
