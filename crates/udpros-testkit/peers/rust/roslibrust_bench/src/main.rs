//! roslibrust's ROS1 backend as a `udpros bench` peer, with the command line and output of
//! `roscpp_bench.cpp` (TCPROS only: roslibrust has no UDPROS):
//!
//!   roslibrust_bench pub TOPIC --size BYTES --rate HZ --count N [--subscribers K]
//!   roslibrust_bench sub TOPIC --count N [--transport tcp] [--idle SECONDS] [--dump FILE]
//!
//! roslibrust's publisher tells only whether some subscriber is connected, not how many:
//! with several, the publisher waits for the first and then a second more.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

roslibrust::generate_ros_types!(
    "/usr/share/std_msgs",
    "/usr/share/sensor_msgs",
    "/usr/share/geometry_msgs"
);

use sensor_msgs::CompressedImage;

fn opt(args: &[String], name: &str, fallback: &str) -> String {
    args.windows(2)
        .find(|w| w[0] == name)
        .map_or_else(|| fallback.to_string(), |w| w[1].clone())
}

fn usage() -> String {
    // SAFETY: getrusage fills the struct it is given.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .unwrap_or(0);
    format!(
        "user={:.6} sys={:.6} rss_kb={rss}",
        secs(r.ru_utime),
        secs(r.ru_stime)
    )
}

fn now_nanos() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[(p * (sorted.len() - 1) as f64 + 0.5) as usize]
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
    let dump = opt(&args, "--dump", "");
    if !dump.is_empty() {
        let text: String = latencies
            .iter()
            .map(|(seq, us)| format!("{seq} {us:.1}\n"))
            .collect();
        let _ = std::fs::write(&dump, text);
    }
    let mut sorted: Vec<f64> = latencies.iter().map(|l| l.1).collect();
    sorted.sort_by(f64::total_cmp);
    let mut seqs: Vec<i64> = latencies.iter().map(|l| l.0).collect();
    seqs.sort_unstable();
    seqs.dedup();
    let seconds = match (first, last) {
        (Some(f), Some(l)) => (l - f).as_secs_f64(),
        _ => 0.0,
    };
    println!(
        "SUB received={} lost={} seconds={seconds:.3} p50_us={:.1} p99_us={:.1} max_us={:.1} {}",
        latencies.len(),
        count - seqs.len() as i64,
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
        sorted.last().copied().unwrap_or(0.0),
        usage()
    );
    std::process::exit(0);
}
