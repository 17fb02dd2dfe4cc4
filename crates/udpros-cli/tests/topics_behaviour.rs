//! How links behave when things go wrong: a publisher or subscriber killed with SIGKILL,
//! a master restart, an md5 mismatch, hostile datagrams; and several topics and mixed
//! transports at once.

use udpros_testkit as common;

use common::node;

use common::spawn_lines;
use std::process::Command;
use std::time::{Duration, Instant};
use udpros::master::Master;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, SubscribeOptions};
use udpros::transport::Protocol;

async fn embedded(port: u16) -> Master {
    Master::start(format!("127.0.0.1:{port}").parse().unwrap(), "127.0.0.1")
        .await
        .expect("master")
}

/// The `udpros` binary as a separate node process.
fn udpros_process(master: &str, args: &[&str]) -> (common::Child, common::Lines) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.args(args)
        .env("ROS_MASTER_URI", master)
        .env("ROS_IP", "127.0.0.1");
    spawn_lines(cmd)
}

/// Waits (bounded) for a condition checked on the runtime.
async fn eventually(limit: Duration, mut ready: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ready() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_udpros_publisher_is_noticed_by_heartbeat() {
    let master = embedded(0).await;
    let (mut publisher, _) = udpros_process(
        master.uri(),
        &[
            "topic",
            "pub",
            "-r",
            "50",
            "/beat",
            "std_msgs/String",
            "data: x",
        ],
    );
    let listener = node(master.uri(), "listener").await;
    let mut sub = listener
        .subscribe::<std_msgs::String>("/beat", SubscribeOptions::udp_only())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), sub.recv())
        .await
        .expect("first message")
        .expect("open");
    publisher.0.kill().expect("kill -9");
    let killed = Instant::now();
    let noticed = eventually(Duration::from_secs(8), || {
        sub.links().iter().all(|l| !l.connected)
    })
    .await;
    let noticed = noticed.expect("the subscriber never noticed the dead publisher");
    eprintln!("dead publisher noticed after {:?}", killed.elapsed());
    assert!(
        noticed <= Duration::from_millis(4500),
        "noticed only after {noticed:?} (heartbeats are 1 s apart)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_subscriber_stops_the_publisher_sending_to_it() {
    let master = embedded(0).await;
    let talker = node(master.uri(), "talker").await;
    let publisher = talker
        .advertise::<std_msgs::String>("/gone", AdvertiseOptions::default())
        .await
        .unwrap();
    let (mut subscriber, mut lines) = udpros_process(
        master.uri(),
        &["topic", "echo", "--transport", "udp", "/gone"],
    );
    let sending = {
        let p = publisher.raw().topic().to_string();
        let publisher = talker
            .advertise::<std_msgs::String>(&p, AdvertiseOptions::default())
            .await
            .unwrap();
        let message = std_msgs::String { data: "x".into() };
        common::publish_every(publisher, message, Duration::from_millis(20))
    };
    let got = tokio::task::block_in_place(|| {
        lines.wait_for(Duration::from_secs(20), |l| l == "data: \"x\"")
    });
    assert!(got.is_some(), "echo printed {:?}", lines.seen);
    assert_eq!(publisher.num_subscribers(), 1);
    subscriber.0.kill().expect("kill -9");
    let stopped = eventually(Duration::from_secs(5), || publisher.num_subscribers() == 0).await;
    assert!(
        stopped.is_some(),
        "the publisher still sends to a dead subscriber"
    );
    sending.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_registers_again_after_a_master_restart() {
    registers_again_after_a_restart(Duration::from_millis(500)).await;
}

/// A master back at once, in the same process (its pid unchanged), before the nodes'
/// watchdogs looked even once while it was down: they notice it forgot them all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_registers_again_after_a_master_restart_quicker_than_a_look() {
    registers_again_after_a_restart(Duration::ZERO).await;
}

async fn registers_again_after_a_restart(downtime: Duration) {
    let port = common::free_port();
    let master = embedded(port).await;
    let uri = master.uri().to_string();
    let talker = node(&uri, "talker").await;
    let listener = node(&uri, "listener").await;
    let publisher = talker
        .advertise::<std_msgs::String>("/survive", AdvertiseOptions::default())
        .await
        .unwrap();
    let mut before = listener
        .subscribe::<std_msgs::String>("/survive", SubscribeOptions::default())
        .await
        .unwrap();
    let sending = tokio::spawn(async move {
        loop {
            publisher
                .publish(&std_msgs::String {
                    data: "alive".into(),
                })
                .unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    tokio::time::timeout(Duration::from_secs(10), before.recv())
        .await
        .unwrap()
        .unwrap();
    drop(master);
    tokio::time::sleep(downtime).await;
    let restarted = embedded(port).await;
    let back = Instant::now();
    // A newcomer subscribes on the new master: the publisher must be registered there again.
    let newcomer = node(&uri, "newcomer").await;
    let mut after = newcomer
        .subscribe::<std_msgs::String>("/survive", SubscribeOptions::default())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), after.recv())
        .await
        .expect("data after the restart")
        .unwrap();
    eprintln!(
        "data flowed to a new subscriber {:?} after the master came back",
        back.elapsed()
    );
    // Each node's watchdog looks every second on its own: the listener may register again
    // after the talker did and data flowed.
    let deadline = Instant::now() + Duration::from_secs(5);
    let listener_back = loop {
        let state = newcomer.master().get_system_state().await.unwrap();
        let listed = state
            .subscribers
            .iter()
            .any(|(t, n)| t == "/survive" && n.contains(&"/listener".to_string()));
        if listed || Instant::now() > deadline {
            break listed;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(listener_back, "the listener never registered again");
    drop(restarted);
    sending.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_md5sum_is_refused_with_no_data() {
    let master = embedded(0).await;
    let talker = node(master.uri(), "talker").await;
    let listener = node(master.uri(), "listener").await;
    let publisher = talker
        .advertise::<std_msgs::String>("/typed", AdvertiseOptions::default())
        .await
        .unwrap();
    let sending = tokio::spawn(async move {
        loop {
            publisher
                .publish(&std_msgs::String {
                    data: "text".into(),
                })
                .unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    for options in [SubscribeOptions::udp_only(), SubscribeOptions::tcp_only()] {
        let mut wrong = listener
            .subscribe::<std_msgs::Int32>("/typed", options)
            .await
            .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(2), wrong.recv())
                .await
                .is_err(),
            "data despite md5 mismatch"
        );
        assert_eq!(wrong.num_publishers(), 0);
        drop(wrong);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sending.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_datagrams_do_not_break_a_udp_link() {
    let master = embedded(0).await;
    let talker = node(master.uri(), "talker").await;
    let listener = node(master.uri(), "listener").await;
    let publisher = talker
        .advertise::<std_msgs::UInt8MultiArray>("/big", AdvertiseOptions::default())
        .await
        .unwrap();
    let options = SubscribeOptions::udp_only();
    let mut sub = listener
        .subscribe::<std_msgs::UInt8MultiArray>("/big", options)
        .await
        .unwrap();
    let body = bytes::Bytes::from(vec![7u8; 20_000]);
    let msg = std_msgs::UInt8MultiArray {
        data: body.clone(),
        ..Default::default()
    };
    let sending = tokio::spawn(async move {
        loop {
            publisher.publish(&msg).unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    tokio::time::timeout(Duration::from_secs(10), sub.recv())
        .await
        .unwrap()
        .unwrap();
    let port = sub.links()[0].local_port;
    let attacker = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let garbage: Vec<Vec<u8>> = vec![
        vec![],                                 // empty
        vec![1, 2, 3],                          // short
        vec![0; 65_000],                        // an oversize block
        vec![0, 0, 0, 0, 2, 1, 0, 0],           // PING (wrong id and source)
        vec![9, 9, 9, 9, 0, 5, 3, 0, 255, 255], // DATA0 for another connection id
        vec![0, 0, 0, 0, 1, 7, 2, 0, 1, 2, 3],  // a stray DATAN
    ];
    let mut delivered = 0;
    for round in 0..50 {
        for g in &garbage {
            let _ = attacker.send_to(g, ("127.0.0.1", port)).await;
        }
        if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(200), sub.recv()).await {
            assert_eq!(m.data, body, "round {round}: corrupt message");
            delivered += 1;
        }
    }
    assert!(
        delivered >= 40,
        "only {delivered} of 50 rounds delivered a message"
    );
    assert!(sub.links()[0].connected);
    sending.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_udp_topics_and_mixed_transports_on_one_topic() {
    let master = embedded(0).await;
    let talker = node(master.uri(), "talker").await;
    let listener = node(master.uri(), "listener").await;
    let other = node(master.uri(), "other").await;
    let mut publishers = Vec::new();
    let mut subscribers = Vec::new();
    for i in 0..3 {
        let topic = format!("/multi_{i}");
        publishers.push(
            talker
                .advertise::<std_msgs::Int32>(&topic, AdvertiseOptions::default())
                .await
                .unwrap(),
        );
        subscribers.push(
            listener
                .subscribe::<std_msgs::Int32>(&topic, SubscribeOptions::udp_only())
                .await
                .unwrap(),
        );
    }
    // A TCP subscriber beside the UDP one on /multi_0.
    let mut tcp = other
        .subscribe::<std_msgs::Int32>("/multi_0", SubscribeOptions::tcp_only())
        .await
        .unwrap();
    let sending = tokio::spawn(async move {
        for n in 0.. {
            for (i, p) in publishers.iter().enumerate() {
                p.publish(&std_msgs::Int32 {
                    data: n * 10 + i as i32,
                })
                .unwrap();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    for (i, s) in subscribers.iter_mut().enumerate() {
        let m = tokio::time::timeout(Duration::from_secs(10), s.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(m.data % 10, i as i32);
        assert_eq!(s.links()[0].protocol, Some(Protocol::Udp));
    }
    let m = tokio::time::timeout(Duration::from_secs(10), tcp.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.data % 10, 0);
    assert_eq!(tcp.links()[0].protocol, Some(Protocol::Tcp));
    sending.abort();
}
