//! What the `mavlink_bridge` tests share: a bridge on an embedded master, its
//! configuration, waiting for its estimates to converge, and the autopilots it talks to.

#![allow(dead_code, unused_imports)]

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
pub(crate) async fn bridge(cfg: Config) -> (Master, Node, tokio::task::JoinHandle<()>) {
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

pub(crate) fn config(url: String) -> Config {
    Config::new(url.parse().unwrap())
}

/// `~latency` messages until `done` says so or `limit` passes; the last one.
pub(crate) async fn latency_until(
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
pub(crate) async fn converged(listener: &Node) -> umsg::MavlinkLatency {
    let settled = |m: &umsg::MavlinkLatency| m.converged && m.timesync_received >= 30;
    let last = latency_until(listener, Duration::from_secs(15), settled).await;
    match last {
        Some(m) if settled(&m) => m,
        other => panic!("the estimator did not converge: {other:?}"),
    }
}

/// The true offset (ROS time − autopilot time, ns) at a message's stamp, for an autopilot
/// clock given on CLOCK_MONOTONIC.
pub(crate) fn truth_at(stamp: udpros::msg::Time, remote_at: impl Fn(i64) -> i64) -> i64 {
    let base = ros_minus_monotonic_ns(&udpros::time::Clock::wall());
    let local = stamp.as_nanos() as i64 - base;
    local - remote_at(local) + base
}

pub(crate) fn sim(config: SimConfig) -> SimAutopilot {
    SimAutopilot::start("127.0.0.1:0".parse().unwrap(), config).unwrap()
}

/// Starts the pymavlink autopilot on `url` (its side); `None` if it cannot run here.
pub(crate) fn pymavlink_peer(
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

/// Until the bridge has had `n` TIMESYNC replies (30 s at most): the link works both ways.
pub(crate) async fn timesync_flows(listener: &Node, n: u64) -> umsg::MavlinkLatency {
    let last = latency_until(listener, Duration::from_secs(30), |m| {
        m.timesync_received >= n
    })
    .await
    .expect("latency published");
    assert!(last.timesync_received >= n, "{last:?}");
    last
}

/// Microseconds since the Unix epoch, now.
pub(crate) fn unix_usec_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// A stream face (TCP, serial) for the simulated autopilot, which speaks UDP: each frame
/// from the stream
/// goes to it as a datagram, each of its datagrams into the stream.
pub(crate) async fn relay_to_sim<S>(stream: S, sim: std::net::SocketAddr)
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
