//! roslibrust's ROS1 backend as a `udpros bench` peer, with the command line and output of
//! `roscpp_bench.cpp` (TCPROS only: roslibrust has no UDPROS):
//!
//!   roslibrust_bench pub TOPIC --size BYTES --rate HZ --count N [--subscribers K]
//!   roslibrust_bench sub TOPIC --count N [--transport tcp] [--idle SECONDS] [--dump FILE]
//!
//! roslibrust's publisher tells only whether some subscriber is connected, not how many:
//! with several, the publisher waits for the first and then a second more.

#[path = "../../bench_common.rs"]
mod bench_common;
use bench_common::{opt, report_subscriber, usage};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

roslibrust::generate_ros_types!(
    "/usr/share/std_msgs",
    "/usr/share/sensor_msgs",
    "/usr/share/geometry_msgs"
);

use sensor_msgs::CompressedImage;

fn now_nanos() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: roslibrust_bench pub|sub TOPIC [options]");
        std::process::exit(2);
    }
    let (mode, topic) = (args[1].clone(), args[2].clone());
    let master =
        std::env::var("ROS_MASTER_URI").unwrap_or_else(|_| "http://localhost:11311".into());
    let name = format!("roslibrust_bench_{}", std::process::id());
    let nh = roslibrust::ros1::NodeHandle::new(&master, &name)
        .await
        .expect("node");
    let count: i64 = opt(&args, "--count", "1000").parse().unwrap_or(1000);
    if mode == "pub" {
        let size: usize = opt(&args, "--size", "64").parse().unwrap_or(64);
        let rate: f64 = opt(&args, "--rate", "0").parse().unwrap_or(0.0);
        let subscribers: usize = opt(&args, "--subscribers", "1").parse().unwrap_or(1);
        let publisher = nh
            .advertise::<CompressedImage>(&topic, 1000, false)
            .await
            .expect("advertise");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !publisher.has_connected_clients() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let settle = if subscribers > 1 { 1500 } else { 500 };
        tokio::time::sleep(Duration::from_millis(settle)).await;
        let mut msg = CompressedImage {
            format: "bench".into(),
            data: vec![0x5a; size],
            ..Default::default()
        };
        let start = Instant::now();
        for i in 0..count {
            if rate > 0.0 {
                let due = start + Duration::from_secs_f64(i as f64 / rate);
                tokio::time::sleep_until(due.into()).await;
            }
            let t = now_nanos();
            msg.header.seq = i as u32;
            msg.header.stamp.secs = (t / 1_000_000_000) as i32;
            msg.header.stamp.nsecs = (t % 1_000_000_000) as i32;
            let _ = publisher.publish(&msg).await;
        }
        let seconds = start.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_secs(1)).await;
        println!("PUB sent={count} seconds={seconds:.3} {}", usage());
        std::process::exit(0);
    }
    let idle = Duration::from_secs_f64(opt(&args, "--idle", "3").parse().unwrap_or(3.0));
    let mut sub = nh
        .subscribe::<CompressedImage>(&topic, 100_000)
        .await
        .expect("subscribe");
    println!("READY");
    let mut latencies: Vec<(i64, f64)> = Vec::new();
    let (mut first, mut last) = (None, None);
    let started = Instant::now();
    while (latencies.len() as i64) < count {
        let wait = match last {
            Some(_) => idle,
            None => Duration::from_secs(60).saturating_sub(started.elapsed()),
        };
        let Ok(Some(Ok(m))) = tokio::time::timeout(wait, sub.next()).await else {
            break;
        };
        let at = Instant::now();
        let stamp =
            i128::from(m.header.stamp.secs) * 1_000_000_000 + i128::from(m.header.stamp.nsecs);
        latencies.push((i64::from(m.header.seq), (now_nanos() - stamp) as f64 / 1e3));
        first.get_or_insert(at);
        last = Some(at);
    }
    report_subscriber(&args, count, &latencies, first, last);
    std::process::exit(0);
}
