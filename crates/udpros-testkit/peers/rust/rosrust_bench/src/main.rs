//! rosrust as a `udpros bench` peer, with the command line and output of
//! `roscpp_bench.cpp` (TCPROS only: rosrust has no UDPROS):
//!
//!   rosrust_bench pub TOPIC --size BYTES --rate HZ --count N [--subscribers K]
//!   rosrust_bench sub TOPIC --count N [--transport tcp] [--idle SECONDS] [--dump FILE]
//!
//! `PUB sent=.. seconds=.. user=.. sys=.. rss_kb=..` and `READY`, then
//! `SUB received=.. lost=.. seconds=.. p50_us=.. p99_us=.. max_us=.. user=.. sys=.. rss_kb=..`.

#[path = "../../bench_common.rs"]
mod bench_common;
use bench_common::{opt, report_subscriber, usage};
use rosrust_msg::sensor_msgs::CompressedImage;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Seen {
    latencies: Vec<(i64, f64)>,
    first: Option<Instant>,
    last: Option<Instant>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: rosrust_bench pub|sub TOPIC [options]");
        std::process::exit(2);
    }
    let (mode, topic) = (args[1].clone(), args[2].clone());
    rosrust::init(&format!("rosrust_bench_{}", std::process::id()));
    let count: i64 = opt(&args, "--count", "1000").parse().unwrap_or(1000);
    if mode == "pub" {
        let size: usize = opt(&args, "--size", "64").parse().unwrap_or(64);
        let rate: f64 = opt(&args, "--rate", "0").parse().unwrap_or(0.0);
        let subscribers: usize = opt(&args, "--subscribers", "1").parse().unwrap_or(1);
        let publisher = rosrust::publish::<CompressedImage>(&topic, 1000).expect("advertise");
        let deadline = Instant::now() + Duration::from_secs(30);
        while publisher.subscriber_count() < subscribers && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(500));
        let mut msg = CompressedImage {
            format: "bench".into(),
            data: vec![0x5a; size],
            ..Default::default()
        };
        let start = Instant::now();
        for i in 0..count {
            if rate > 0.0 {
                let due = start + Duration::from_secs_f64(i as f64 / rate);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            msg.header.seq = i as u32;
            msg.header.stamp = rosrust::now();
            let _ = publisher.send(msg.clone());
        }
        let seconds = start.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_secs(1));
        println!("PUB sent={count} seconds={seconds:.3} {}", usage());
        return;
    }
    let idle: f64 = opt(&args, "--idle", "3").parse().unwrap_or(3.0);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let sink = seen.clone();
    let _sub = rosrust::subscribe(&topic, 100_000, move |m: CompressedImage| {
        let now = rosrust::now();
        let at = Instant::now();
        let latency = (now.nanos() - m.header.stamp.nanos()) as f64 / 1e3;
        let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
        s.first.get_or_insert(at);
        s.last = Some(at);
        s.latencies.push((i64::from(m.header.seq), latency));
    })
    .expect("subscribe");
    println!("READY");
    let started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let s = seen.lock().unwrap_or_else(|e| e.into_inner());
        let done = s.latencies.len() as i64 >= count;
        let quiet = match s.last {
            Some(last) => last.elapsed().as_secs_f64() > idle,
            None => started.elapsed() > Duration::from_secs(60),
        };
        if done || quiet || !rosrust::is_ok() {
            break;
        }
    }
    let s = seen.lock().unwrap_or_else(|e| e.into_inner());
    report_subscriber(&args, count, &s.latencies, s.first, s.last);
    std::process::exit(0);
}
