//! The `mavlink_bridge` node's links, as mavros names them: UDP, TCP and serial URLs to the
//! simulated autopilot both ways, broadcast discovery, and what strangers, noise and silent
//! clients cannot do to a link. The helpers are `mavlink_kit`'s.

mod mavlink_kit;

use mavlink_kit::*;

use udpros_testkit as common;

use common::diagnostic;
use mavlink::MavlinkVersion;
use std::process::Command;
use std::time::Duration;
use udpros_bridges::mavlink::messages::{frame, Outgoing};
use udpros_bridges::mavlink::protocol::Ids;
use udpros_bridges::mavlink::sim::{SimAutopilot, SimConfig};

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
