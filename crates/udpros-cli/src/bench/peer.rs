//! `udpros bench peer`: udpros's side of a cell, with the roscpp peer's arguments and
//! output (a summary line of `key=value` pairs, latencies dumped to a file).

use super::report::percentile;
use super::{CliResult, PeerArgs};
use std::time::{Duration, Instant};
use udpros::msgs::{sensor_msgs, std_msgs};
use udpros::node::{AdvertiseOptions, Node, SubscribeOptions};
use udpros::transport::Protocol;

pub(super) async fn run(args: PeerArgs) -> CliResult {
    let name = format!("udpros_bench_{}", std::process::id());
    let node = Node::new(&name, std::iter::empty::<String>())
        .await
        .map_err(|e| e.to_string())?;
    node.set_max_rate_per_host(args.max_rate_per_host_kbit.map(|kbit| kbit * 1000.0 / 8.0));
    let result = match args.role.as_str() {
        "pub" => publish(&node, &args).await,
        "sub" => subscribe(&node, &args).await,
        other => Err(format!("bench peer role '{other}' is not pub or sub")),
    };
    node.shutdown().await;
    result
}

async fn publish(node: &Node, args: &PeerArgs) -> CliResult {
    let publisher = node
        .advertise::<sensor_msgs::CompressedImage>(
            &args.topic,
            AdvertiseOptions {
                queue_size: 1000, // as the roscpp peer
                fec: args.fec,
                governor: (!args.no_governor)
                    .then(udpros::wire::udpros::governor::GovernorConfig::default),
                max_rate: args.max_rate_kbit.map(|kbit| kbit * 1000.0 / 8.0),
                ..AdvertiseOptions::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while publisher.num_subscribers() < args.subscribers && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let msg = bench_message(args.size);
    let publisher = std::sync::Arc::new(publisher);
    let trace = args
        .trace
        .clone()
        .map(|path| tokio::spawn(trace_governor(publisher.clone(), path)));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(LastSeen::default()));
    let watch = tokio::spawn(watch_links(publisher.clone(), seen.clone()));
    let start = Instant::now();
    let control = match &args.control {
        Some(spec) => {
            Some(publish_control(node, spec, args.count as f64 / args.rate.max(1e-3)).await?)
        }
        None => None,
    };
    if args.rate > 0.0 {
        // Paced as roscpp's peer paces: a plain thread sleeps to each message's time and
        // publishes (`publish` sends from the calling thread), while the node's runtime
        // serves the links on its own. A tokio timer re-armed after every message would
        // cost the publisher an eventfd write and an extra `epoll_wait` after each send,
        // on the vCPU the subscriber is woken onto.
        let (count, rate, publisher) = (args.count, args.rate, publisher.clone());
        tokio::task::spawn_blocking(move || publish_paced(&publisher, msg, start, count, rate))
            .await
            .map_err(|e| e.to_string())??;
    } else {
        let mut msg = msg;
        for i in 0..args.count {
            stamp(&mut msg, i);
            // A flood goes at the pace of the links instead of dropping in its own queue.
            publisher
                .publish_when_room(&msg)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    if let Some(control) = control {
        control.await.map_err(|e| e.to_string())??;
    }
    let seconds = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    if let Some(trace) = trace {
        trace.abort();
    }
    watch.abort();
    let seen = {
        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.update(publisher.links());
        seen.clone()
    };
    // FEC on the first link, if it carries any: what the subscriber reported, and the
    // repair that cost.
    let fec = seen
        .fec
        .map(|f| {
            let loss = f
                .reported_loss
                .map_or("none".to_string(), |p| format!("{p:.4}"));
            format!(" fec_reported_loss={loss} fec_repairs={}", f.repairs_sent)
        })
        .unwrap_or_default();
    // The governor's view of the first governed link's path.
    let governor = seen
        .governor
        .map(|g| {
            format!(
                " governor_rate={:.0} governor_capacity={:.0} governor_queue_ms={:.1} governor_overuses={} governor_reports={} governor_ignored={}",
                g.rate * 8.0,
                g.capacity.unwrap_or(f64::NAN) * 8.0,
                g.queue.as_secs_f64() * 1e3,
                g.overuses,
                g.reports,
                g.ignored
            )
        })
        .unwrap_or_default();
    // What the links dropped: stale on a path that cannot carry everything, or FEC's and
    // the governor's own drops.
    let drops: u64 = seen.links.iter().map(|l| l.drops).sum();
    println!(
        "PUB sent={} seconds={seconds:.3} drops={drops} {}{fec}{governor}",
        args.count,
        usage()
    );
    drop(publisher);
    Ok(())
}

/// Publishes `TOPIC:BYTES:HZ` (stamped as the images are) for `seconds` from a thread of
/// its own, once its subscriber is there.
async fn publish_control(
    node: &Node,
    spec: &str,
    seconds: f64,
) -> Result<tokio::task::JoinHandle<Result<(), String>>, String> {
    let bad = || format!("--control '{spec}' is not TOPIC:BYTES:HZ");
    let mut parts = spec.rsplitn(3, ':');
    let (Some(hz), Some(bytes), Some(topic)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let (hz, bytes): (f64, usize) = match (hz.parse(), bytes.parse()) {
        (Ok(hz), Ok(bytes)) if hz > 0.0 && hz <= 10_000.0 => (hz, bytes),
        _ => return Err(bad()),
    };
    let publisher = node
        .advertise::<sensor_msgs::CompressedImage>(topic, AdvertiseOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while publisher.num_subscribers() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let count = (seconds * hz).round() as u64;
    Ok(tokio::task::spawn_blocking(move || {
        publish_paced(&publisher, bench_message(bytes), Instant::now(), count, hz)
    }))
}

/// A bench message of `bytes` payload bytes (stamped as it is published).
fn bench_message(bytes: usize) -> sensor_msgs::CompressedImage {
    sensor_msgs::CompressedImage {
        format: "bench".into(),
        data: vec![0x5a; bytes].into(),
        ..Default::default()
    }
}

/// Publishes `count` stamped copies of `msg` at `rate` per second from `start`, sleeping
/// to each one's time on the calling (plain) thread.
fn publish_paced(
    publisher: &udpros::node::Publisher<sensor_msgs::CompressedImage>,
    mut msg: sensor_msgs::CompressedImage,
    start: Instant,
    count: u64,
    rate: f64,
) -> Result<(), String> {
    for i in 0..count {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        stamp(&mut msg, i);
        publisher.publish(&msg).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Writes the first governed link's rate, capacity, queue and counts to `path` after each
/// report it takes, with the wall clock's time (the harness changes the radio by the same clock), until aborted.
/// What the publisher's links showed last. A subscriber that gives a link up and makes
/// another (a UDP link on which no message completes is declared failed and made again),
/// or that leaves before the summary (it exits once idle), takes its link's counters
/// with it; the summary says what the links showed while they were there.
#[derive(Debug, Default, Clone)]
struct LastSeen {
    /// The links at the last look that found any.
    links: Vec<udpros::transport::SubscriberLinkStats>,
    /// The FEC of the first link that had any, at the last look that found it.
    fec: Option<udpros::transport::FecSendStats>,
    /// The governor's view of the link that took the most reports.
    governor: Option<udpros::transport::GovernorStats>,
}

impl LastSeen {
    fn update(&mut self, links: Vec<udpros::transport::SubscriberLinkStats>) {
        if let Some(fec) = links.iter().find_map(|l| l.fec) {
            self.fec = Some(fec);
        }
        // The link that heard most: on a path where links come and go, the newest may
        // be a moment old.
        let busiest = links
            .iter()
            .filter_map(|l| l.governor)
            .max_by_key(|g| g.reports);
        if let Some(governor) = busiest {
            if governor.reports >= self.governor.map_or(0, |g| g.reports) {
                self.governor = Some(governor);
            }
        }
        if !links.is_empty() {
            self.links = links;
        }
    }
}

/// Looks at the publisher's links every 100 ms, into `seen`.
async fn watch_links(
    publisher: std::sync::Arc<udpros::node::Publisher<sensor_msgs::CompressedImage>>,
    seen: std::sync::Arc<std::sync::Mutex<LastSeen>>,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tick.tick().await;
        let links = publisher.links();
        seen.lock().unwrap_or_else(|e| e.into_inner()).update(links);
    }
}

async fn trace_governor(
    publisher: std::sync::Arc<udpros::node::Publisher<sensor_msgs::CompressedImage>>,
    path: std::path::PathBuf,
) {
    use std::io::Write;
    let Ok(mut file) = std::fs::File::create(&path) else {
        eprintln!("cannot write {}", path.display());
        return;
    };
    // Looked at often enough to see every report (one each 50 ms), written once each.
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    let mut last_report = None;
    loop {
        tick.tick().await;
        let Some(g) = publisher.links().into_iter().find_map(|l| l.governor) else {
            continue;
        };
        if last_report.replace(g.reports) == Some(g.reports) {
            continue;
        }
        let unix_ms = super::radio::unix_ms();
        let line = format!(
            "{unix_ms} {:.0} {:.0} {:.2} {} {} {}\n",
            g.rate * 8.0,
            g.capacity.unwrap_or(0.0) * 8.0,
            g.queue.as_secs_f64() * 1e3,
            g.reports,
            g.overuses,
            g.ignored,
        );
        if file.write_all(line.as_bytes()).is_err() {
            return;
        }
    }
}

/// Message `i`'s sequence number and send time.
fn stamp(msg: &mut sensor_msgs::CompressedImage, i: u64) {
    msg.header = std_msgs::Header {
        seq: i as u32,
        stamp: udpros::msg::Time::now(),
        frame_id: String::new(),
    };
}

async fn subscribe(node: &Node, args: &PeerArgs) -> CliResult {
    let transports = match args.transport.as_str() {
        "tcp" => vec![Protocol::Tcp],
        _ => vec![Protocol::Udp],
    };
    let options = SubscribeOptions {
        transports,
        queue_size: 100_000,
        fec: args.fec,
        ..SubscribeOptions::default()
    };
    let mut sub = node
        .subscribe::<sensor_msgs::CompressedImage>(&args.topic, options)
        .await
        .map_err(|e| e.to_string())?;
    println!("READY");
    let mut latencies = Vec::with_capacity(args.count.min(1 << 20) as usize);
    let mut seqs = Vec::with_capacity(latencies.capacity());
    let (mut received, mut lost, mut last_seq) = (0u64, 0u64, None::<u64>);
    let (mut first, mut last) = (None, Instant::now());
    let idle = Duration::from_secs_f64(args.idle);
    // One timer, moved on only when it fires early: a timeout armed per message would
    // add a timer-wheel insert and removal to every message this peer measures.
    let mut quiet = std::pin::pin!(tokio::time::sleep(Duration::from_secs(60)));
    loop {
        let m = tokio::select! {
            m = sub.recv() => m,
            _ = &mut quiet => {
                if first.is_none() || last.elapsed() >= idle {
                    break;
                }
                quiet.as_mut().reset((last + idle).into());
                continue;
            }
        };
        let Some(m) = m else {
            break;
        };
        let now = udpros::msg::Time::now();
        last = Instant::now();
        if first.is_none() {
            first = Some(last);
            quiet.as_mut().reset((last + idle).into());
        }
        latencies.push((now.as_nanos() as f64 - m.header.stamp.as_nanos() as f64) / 1e3);
        let seq = u64::from(m.header.seq);
        seqs.push(seq);
        if let Some(prev) = last_seq {
            if seq > prev + 1 {
                lost += seq - prev - 1;
            }
        }
        last_seq = Some(last_seq.map_or(seq, |p| p.max(seq)));
        received += 1;
        if received >= args.count {
            break;
        }
    }
    if let Some(l) = last_seq {
        lost += args.count.saturating_sub(l + 1);
    }
    if let Some(path) = &args.dump {
        let lines: String = seqs
            .iter()
            .zip(&latencies)
            .map(|(seq, us)| format!("{seq} {us:.1}\n"))
            .collect();
        std::fs::write(path, lines).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    latencies.sort_by(f64::total_cmp);
    let seconds = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    println!(
        "SUB received={received} lost={lost} seconds={seconds:.3} p50_us={:.1} p99_us={:.1} max_us={:.1} {}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or(0.0),
        usage()
    );
    Ok(())
}

/// `user=.. sys=.. rss_kb=..` of this process, read as the roscpp peer reads them: CPU from
/// getrusage, peak RSS from VmHWM (getrusage's ru_maxrss is carried across fork and exec on
/// Linux, so it would report the harness's own size).
fn usage() -> String {
    let (user, sys) = super::cpu_seconds(libc::RUSAGE_SELF);
    let peak_rss_kb: u64 = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
            line.trim().trim_end_matches("kB").trim().parse().ok()
        })
        .unwrap_or(0);
    format!("user={user:.6} sys={sys:.6} rss_kb={peak_rss_kb}")
}
