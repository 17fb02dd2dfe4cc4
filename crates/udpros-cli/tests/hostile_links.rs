//! Attacks on a node's topic links, each reproduced and shown harmless: TCPROS handshakes
//! that never finish, a stranger taking over a UDPROS link, reassembly amplification, a UDP
//! link that keeps failing, and floods of link requests.
//!
//! Each test prints its figures and asserts generous bounds on memory, CPU, liveness and
//! delivered fractions (never tight timings). Servers under attack run as their own
//! processes, so their memory and CPU are theirs alone. The helpers are `hostile_kit`'s.

mod hostile_kit;

use hostile_kit::*;

use udpros_testkit as common;

use common::{peak_rss_mb, wait_for, Child};
use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use udpros::xmlrpc::Value;

/// TCPROS handshakes that declare a large header and never finish: bounded in number and
/// memory, and a real subscriber still connects.
#[test]
fn pending_tcpros_handshakes_are_bounded() {
    let (_master, master_port) = start_master(None);
    let master_uri = format!("http://127.0.0.1:{master_port}/");
    let (publisher, _, tcpros_port) = start_publisher(master_port, "/hs_test", "hs_pub", None);
    let pid = publisher.0.id();
    let before = peak_rss_mb(pid);
    let header = 1_000_000u32;
    let attackers: Vec<_> = (0..100)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", tcpros_port)).ok()?;
                s.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
                s.write_all(&header.to_le_bytes()).ok()?;
                let _ = s.write_all(&vec![b'a'; 900_000]);
                Some(s)
            })
        })
        .collect();
    let held: Vec<_> = attackers
        .into_iter()
        .filter_map(|a| a.join().unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let peak = peak_rss_mb(pid);
    println!(
        "100 handshakes of 0.9 MB that never finish: publisher peak RSS {before:.1} -> {peak:.1} MB"
    );
    assert!(peak <= 100.0, "peak RSS {peak} MB");
    assert!(receives_alive_over_tcp(
        &master_uri,
        "/hs_test",
        "hs_listener"
    ));
    drop(held);
}

/// A stranger reads the subscriber's UDP port from getBusInfo and sends first, with every
/// plausible connection id and heartbeats: the publisher's messages all arrive, the
/// stranger's none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_cannot_take_over_a_udpros_link() {
    let master = udpros::master::Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let publisher = common::node(&uri, "victim_pub").await;
    let subscriber = common::node(&uri, "victim_sub").await;
    let out = publisher
        .advertise::<udpros::msgs::std_msgs::String>("/victim", Default::default())
        .await
        .unwrap();
    let mut sub = subscriber
        .subscribe::<udpros::msgs::std_msgs::String>(
            "/victim",
            udpros::node::SubscribeOptions {
                transports: vec![udpros::transport::Protocol::Udp],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // What an attacker sees: the subscriber's bus info names its UDP port.
    let client = udpros::xmlrpc::XmlRpcClient::new(Duration::from_secs(5), Duration::from_secs(5));
    let mut port = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while port.is_none() && Instant::now() < deadline {
        let info = client
            .call(
                subscriber.uri(),
                "getBusInfo",
                vec![Value::from("/attacker")],
            )
            .await
            .unwrap();
        port = udp_port_in_bus_info(&info);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let port = port.expect("the subscriber's UDP port, from getBusInfo");
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let attacker = {
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || {
            let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
            let target = SocketAddr::from(([127, 0, 0, 1], port));
            let body = b"\x04\x00\x00\x00evil";
            let mut id = 1u8;
            while !stop.load(Ordering::Relaxed) {
                for conn in 0..64u32 {
                    let mut d = conn.to_le_bytes().to_vec();
                    d.extend_from_slice(&[0, id, 1, 0]);
                    d.extend_from_slice(&(body.len() as u32).to_le_bytes());
                    d.extend_from_slice(body);
                    let _ = socket.send_to(&d, target);
                    let mut ping = conn.to_le_bytes().to_vec();
                    ping.extend_from_slice(&[2, 0, 0, 0]);
                    let _ = socket.send_to(&ping, target);
                    sent.fetch_add(2, Ordering::Relaxed);
                }
                id = id.wrapping_add(1).max(1);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // Let the attack start before the publisher sends anything.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let total = 30;
    let mut received = Vec::new();
    for i in 0..total {
        out.publish(&udpros::msgs::std_msgs::String {
            data: format!("hi {i}"),
        })
        .expect("publish");
        if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(100), sub.recv()).await {
            received.push(m.data);
        }
    }
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(500), sub.recv()).await {
        received.push(m.data);
    }
    stop.store(true, Ordering::Relaxed);
    attacker.join().unwrap();
    let genuine = received.iter().filter(|m| m.starts_with("hi ")).count();
    println!(
        "first-sender attack ({} datagrams): {genuine}/{total} genuine messages delivered, {} forged",
        sent.load(Ordering::Relaxed),
        received.len() - genuine
    );
    assert_eq!(genuine, total, "every genuine message arrives");
    assert_eq!(received.len(), genuine, "no forged message arrives");
    subscriber.shutdown().await;
    publisher.shutdown().await;
}

/// Reassembly amplification from the publisher's own host (the source rule lets loopback
/// through): DATA0s that declare 65,535 blocks, their last block and blocks far apart.
/// A roscpp publisher's 100 Hz stream still arrives, and the subscriber's memory stays small.
#[test]
fn reassembly_amplification_costs_neither_memory_nor_messages() {
    let Some(roscpp) = common::roscpp_peer() else {
        return;
    };
    let (_master, master_port) = start_master(None);
    let master_uri = format!("http://127.0.0.1:{master_port}/");
    let mut echo = udpros();
    echo.env("ROS_MASTER_URI", &master_uri)
        .args([
            "topic",
            "echo",
            "--transport",
            "udp",
            "--json",
            "/amp",
            "__name:=amp_echo",
        ])
        .stdout(Stdio::piped());
    let (echo, mut lines) = common::spawn_lines(echo);
    let mut pubc = Command::new(&roscpp);
    common::ros_env(&mut pubc, &master_uri);
    let total = 500;
    pubc.args([
        "pub",
        "/amp",
        "--type",
        "bytes",
        "--size",
        "2000",
        "--rate",
        "100",
        "--count",
        &total.to_string(),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    // The subscriber's port, as an attacker reads it.
    let echo_port = node_port(master_port, "/amp_echo");
    let publisher = Child(pubc.spawn().unwrap());
    let mut port = None;
    assert!(wait_for(Duration::from_secs(20), || {
        port = call(
            echo_port,
            "getBusInfo",
            &[Value::from("/h")],
            Duration::from_secs(5),
        )
        .ok()
        .and_then(|v| udp_port_in_bus_info(&v));
        port.is_some()
    }));
    let target = SocketAddr::from(([127, 0, 0, 1], port.unwrap()));
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (mut bytes, started) = (0usize, Instant::now());
    let payload = 1492usize;
    let blocks: u16 = 65535;
    let mut id = 1u8;
    while started.elapsed() < Duration::from_secs(5) {
        for conn in 0..4u32 {
            let mut data0 = conn.to_le_bytes().to_vec();
            data0.extend_from_slice(&[0, id]);
            data0.extend_from_slice(&blocks.to_le_bytes());
            data0.extend_from_slice(&((usize::from(blocks) * payload - 4) as u32).to_le_bytes());
            data0.resize(8 + payload, 0xEE);
            for index in [0, blocks - 1, blocks / 2, 1000] {
                let mut d = data0.clone();
                if index > 0 {
                    d[4] = 1;
                    d[6..8].copy_from_slice(&index.to_le_bytes());
                }
                bytes += d.len();
                let _ = socket.send_to(&d, target);
            }
        }
        id = id.wrapping_add(1).max(1);
        std::thread::sleep(Duration::from_millis(5));
    }
    let delivered = lines.count(total, Duration::from_secs(10), |l| l.starts_with('{'));
    drop(publisher);
    let peak = peak_rss_mb(echo.0.id());
    println!(
        "amplification flood ({:.1} MB in 5 s): {delivered}/{total} delivered at 100 Hz, subscriber peak RSS {peak:.1} MB",
        bytes as f64 / 1e6
    );
    assert!(
        delivered * 100 >= total * 95,
        "{delivered}/{total} delivered"
    );
    assert!(peak <= 30.0, "peak RSS {peak} MB");
}

/// A publisher that answers UDPROS and then sends nothing (a path that drops its
/// datagrams): after three dead UDP links in a row the subscriber, which also offers TCP,
/// asks for TCPROS only, and the data arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_udp_link_that_keeps_failing_falls_back_to_tcp() {
    use udpros::msg::Message;
    use udpros::msgs::std_msgs;
    use udpros::wire::header::ConnectionHeader;

    struct SilentOverUdp {
        udp_offers: Arc<AtomicU64>,
        tcp_port: u16,
    }
    impl udpros::xmlrpc::Handler for SilentOverUdp {
        fn call(&self, method: &str, params: Vec<Value>) -> udpros::xmlrpc::HandlerFuture {
            let offers = params
                .get(2)
                .and_then(Value::as_array)
                .unwrap_or(&[])
                .to_vec();
            let first = offers
                .first()
                .and_then(Value::as_array)
                .and_then(|o| o.first())
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let reply = match (method, first.as_str()) {
                ("requestTopic", "UDPROS") => {
                    self.udp_offers.fetch_add(1, Ordering::Relaxed);
                    let header = ConnectionHeader::new()
                        .with("callerid", "/silent")
                        .with("md5sum", std_msgs::String::MD5SUM)
                        .with("type", std_msgs::String::TYPE)
                        .with("udpros", "1");
                    Value::Array(vec![
                        Value::from("UDPROS"),
                        Value::from("127.0.0.1"),
                        Value::Int(9),
                        Value::Int(7),
                        Value::Int(1500),
                        Value::Base64(header.encode_fields()),
                    ])
                }
                ("requestTopic", "TCPROS") => Value::Array(vec![
                    Value::from("TCPROS"),
                    Value::from("127.0.0.1"),
                    Value::Int(i32::from(self.tcp_port)),
                ]),
                _ => Value::Array(vec![]),
            };
            let answer = Value::Array(vec![Value::Int(1), Value::from(""), reply]);
            Box::pin(async move { Ok(answer) })
        }
    }

    let master = udpros::master::Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    // The TCPROS side: answers a subscriber's header and sends one message.
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = tcp.accept().await {
            let mut len = [0u8; 4];
            if s.read_exact(&mut len).await.is_err() {
                continue;
            }
            let mut header = vec![0u8; u32::from_le_bytes(len) as usize];
            if s.read_exact(&mut header).await.is_err() {
                continue;
            }
            let reply = ConnectionHeader::new()
                .with("callerid", "/silent")
                .with("md5sum", std_msgs::String::MD5SUM)
                .with("type", std_msgs::String::TYPE)
                .with("message_definition", "string data\n");
            let _ = s.write_all(&reply.encode_tcp()).await;
            let body = b"\x08\x00\x00\x00over tcp";
            let _ = s.write_all(&udpros::wire::tcpros::frame(body)).await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    });
    let udp_offers = Arc::new(AtomicU64::new(0));
    let fake = udpros::xmlrpc::XmlRpcServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(SilentOverUdp {
            udp_offers: udp_offers.clone(),
            tcp_port,
        }),
    )
    .await
    .unwrap();
    let client = udpros::xmlrpc::XmlRpcClient::new(Duration::from_secs(5), Duration::from_secs(5));
    client
        .call(
            &uri,
            "registerPublisher",
            vec![
                Value::from("/silent"),
                Value::from("/fallback"),
                Value::from(std_msgs::String::TYPE),
                Value::from(fake.uri("127.0.0.1")),
            ],
        )
        .await
        .unwrap();
    let node = common::node(&uri, "fallback_sub").await;
    let mut sub = node
        .subscribe::<std_msgs::String>("/fallback", Default::default())
        .await
        .unwrap();
    let started = Instant::now();
    let got = tokio::time::timeout(Duration::from_secs(40), sub.recv()).await;
    println!(
        "UDP offered {} times, then TCP: data after {:.1} s",
        udp_offers.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        got.ok().flatten().map(|m| m.data),
        Some("over tcp".to_string())
    );
    assert_eq!(udp_offers.load(Ordering::Relaxed), 3);
    node.shutdown().await;
}

/// Asks the node at `api_port` for a UDPROS link on `topic` toward `sink`: the status code
/// and text of its answer.
fn request_udp_link(api_port: u16, topic: &str, sink: SocketAddr, i: usize) -> (i32, String) {
    let caller = format!("/flood{i}");
    let header = udpros::wire::header::ConnectionHeader::new()
        .with("callerid", caller.as_str())
        .with("topic", topic)
        .with("md5sum", "*")
        .with("type", "std_msgs/String");
    let offer = Value::Array(vec![
        Value::from("UDPROS"),
        Value::Base64(header.encode_fields()),
        Value::from(sink.ip().to_string()),
        Value::Int(i32::from(sink.port())),
        Value::Int(1500),
    ]);
    let params = [
        Value::from(caller),
        Value::from(topic),
        Value::Array(vec![offer]),
    ];
    let answer = call(api_port, "requestTopic", &params, Duration::from_secs(10))
        .expect("requestTopic answered");
    let answer = answer.as_array().expect("an answer triple");
    (
        answer[0].as_i32().unwrap_or(-99),
        answer[1].as_str().unwrap_or("").to_string(),
    )
}

/// Requests from `hosts` (loopback addresses, `per_host` each, spread over 20 sinks per
/// host that stay open): how many links were granted, and the refusals' texts.
fn flood_requests(
    api_port: u16,
    topic: &str,
    hosts: &[&str],
    per_host: usize,
) -> (usize, Vec<String>) {
    let (mut granted, mut refusals) = (0, Vec::new());
    let mut sinks = Vec::new();
    for host in hosts {
        let mine: Vec<UdpSocket> = (0..20)
            .map(|_| UdpSocket::bind((*host, 0)).unwrap())
            .collect();
        for i in 0..per_host {
            let sink = mine[i % mine.len()].local_addr().unwrap();
            match request_udp_link(api_port, topic, sink, i) {
                (1, _) => granted += 1,
                (_, why) => refusals.push(why),
            }
        }
        sinks.extend(mine);
    }
    // The sinks stay open until the caller is done looking: closed ones end their links.
    std::mem::forget(sinks);
    (granted, refusals)
}

/// 2000 UDPROS requestTopic calls from one host to a publisher under `ulimit -n 1024`: it
/// grants 128 (the cap per host) and refuses the rest saying why; 900 more from nine other
/// hosts stop at 512 links in all; under `ulimit -n 256` the node keeps its margin of
/// descriptors. The node answers calls throughout and never runs out of descriptors.
#[test]
fn a_publisher_caps_its_links_per_host_and_in_all_and_keeps_descriptors_for_itself() {
    raise_own_fd_limit();
    let (_master, master_port) = start_master(None);
    let (publisher, api_port, _) =
        start_publisher(master_port, "/capped", "capped_pub", Some(1024));
    let (granted, refusals) = flood_requests(api_port, "/capped", &["127.0.0.1"], 2000);
    println!(
        "2000 requests from one host: {granted} granted, first refusal: {:?}",
        refusals.first()
    );
    assert_eq!(granted, udpros::node::DEFAULT_MAX_LINKS_PER_HOST);
    assert_eq!(refusals.len(), 2000 - granted);
    assert!(
        refusals.iter().all(|r| r.contains("limit per host")),
        "{:?}",
        refusals.first()
    );
    let others: Vec<String> = (2..=10).map(|h| format!("127.0.0.{h}")).collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let (more, refusals) = flood_requests(api_port, "/capped", &others, 100);
    println!(
        "900 more from nine hosts: {more} granted, last refusal: {:?}",
        refusals.last()
    );
    assert_eq!(granted + more, udpros::node::DEFAULT_MAX_LINKS);
    assert!(
        refusals.iter().any(|r| r.contains("max_links")),
        "{:?}",
        refusals.last()
    );
    let fds = open_fds(publisher.0.id());
    assert!(fds < 700, "the publisher holds {fds} descriptors");
    assert!(get_pid(api_port).is_ok());

    // A node with 256 descriptors stops taking links while it still has 128 to spare.
    let (small, small_api, _) = start_publisher(master_port, "/small", "small_pub", Some(256));
    let hosts: Vec<String> = (11..=14).map(|h| format!("127.0.0.{h}")).collect();
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let (granted, refusals) = flood_requests(small_api, "/small", &hosts, 100);
    let fds = open_fds(small.0.id());
    println!(
        "a node with 256 descriptors: {granted} links granted, {fds} descriptors open; {:?}",
        refusals.last()
    );
    assert!(granted > 16 && granted < 256 - 64, "{granted} granted");
    assert!(
        refusals.iter().any(|r| r.contains("descriptor limit")),
        "{:?}",
        refusals.last()
    );
    assert!(fds <= 256 - 64, "{fds} descriptors open");
    assert!(get_pid(small_api).is_ok());
}
