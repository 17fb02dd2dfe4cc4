//! `udpros bench`: udpros and roscpp side by side, in one run on one machine.
//!
//! `udpros bench run` builds the roscpp peer (the test kit's `peers/roscpp_bench.cpp`, g++ and
//! pkg-config), starts a master, and runs every scenario for each pair (udpros → udpros,
//! roscpp → roscpp, udpros → roscpp, roscpp → udpros) over UDPROS and TCPROS, each side in
//! its own process; it prints a markdown table and writes CSV. `udpros bench peer` is the
//! udpros side, with the roscpp peer's arguments and output.

use super::{bench_plot, bench_raw, CliResult};
use clap::{Args, Subcommand};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use udpros::msgs::{sensor_msgs, std_msgs};
use udpros::node::{AdvertiseOptions, Node, SubscribeOptions};
use udpros::transport::Protocol;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Run the scenarios and print the table.
    Run(RunArgs),
    /// One side of a scenario (what the harness starts).
    Peer(PeerArgs),
}

#[derive(Args)]
pub struct RunArgs {
    /// Tiny counts: checks that everything runs (CI), measures nothing worth reading.
    #[arg(long)]
    quick: bool,
    /// Scenarios to run, e.g. `S1,S3` (default: all).
    #[arg(long)]
    scenarios: Option<String>,
    /// Where to write the CSV (default: target/bench/udpros_bench.csv).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Run the udpros peers on tokio's multi-threaded runtime (see `bench peer`).
    #[arg(long)]
    multi_thread: bool,
    /// Runs of the whole sweep. Each figure of the tables is then the median of the
    /// runs' (latencies: over the messages of all runs); the CSV keeps every run.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
}

#[derive(Args)]
pub struct PeerArgs {
    /// `pub` or `sub`.
    role: String,
    topic: String,
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Messages per second; 0: as fast as the publisher can.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    #[arg(long, default_value_t = 1000)]
    count: u64,
    /// Subscribers the publisher waits for.
    #[arg(long, default_value_t = 1)]
    subscribers: usize,
    /// `udp` or `tcp` (subscriber).
    #[arg(long, default_value = "udp")]
    transport: String,
    /// Seconds without a message after which the subscriber stops.
    #[arg(long, default_value_t = 3.0)]
    idle: f64,
    /// Where a subscriber writes each message's `seq latency_us`, a line each.
    #[arg(long)]
    dump: Option<PathBuf>,
    /// Use tokio's multi-threaded runtime. By default a peer runs on a current-thread
    /// runtime, as a latency-critical node should: every step from socket to `recv`
    /// then happens on one thread, with no wake of another.
    #[arg(long)]
    multi_thread: bool,
}

pub fn run(cmd: BenchCommand) -> CliResult {
    let runtime = match &cmd {
        BenchCommand::Peer(args) if !args.multi_thread => {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        }
        _ => tokio::runtime::Runtime::new(),
    }
    .map_err(|e| format!("cannot start the runtime: {e}"))?;
    match cmd {
        BenchCommand::Peer(args) => runtime.block_on(peer(args)),
        BenchCommand::Run(args) => runtime.block_on(harness(args)),
    }
}

/// `user=.. sys=.. rss_kb=..` of this process, read as the roscpp peer reads them: CPU from
/// getrusage, peak RSS from VmHWM (getrusage's ru_maxrss is carried across fork and exec on
/// Linux, so it would report the harness's own size).
fn usage() -> String {
    // SAFETY: getrusage only writes the struct it is given, which is plain old data.
    let r = unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut r);
        r
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let peak_rss_kb: u64 = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
            line.trim().trim_end_matches("kB").trim().parse().ok()
        })
        .unwrap_or(0);
    format!(
        "user={:.6} sys={:.6} rss_kb={peak_rss_kb}",
        seconds(r.ru_utime),
        seconds(r.ru_stime),
    )
}

async fn peer(args: PeerArgs) -> CliResult {
    let name = format!("udpros_bench_{}", std::process::id());
    let node = Node::new(&name, std::iter::empty::<String>())
        .await
        .map_err(|e| e.to_string())?;
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
    let mut msg = sensor_msgs::CompressedImage {
        format: "bench".into(),
        data: vec![0x5a; args.size].into(),
        ..Default::default()
    };
    let start = Instant::now();
    for i in 0..args.count {
        if args.rate > 0.0 {
            let due = start + Duration::from_secs_f64(i as f64 / args.rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                tokio::time::sleep_until(tokio::time::Instant::from_std(Instant::now() + wait))
                    .await;
            }
        }
        msg.header = std_msgs::Header {
            seq: i as u32,
            stamp: udpros::msg::Time::now(),
            frame_id: String::new(),
        };
        if args.rate > 0.0 {
            publisher.publish(&msg).map_err(|e| e.to_string())?;
        } else {
            // A flood goes at the pace of the links instead of dropping in its own queue.
            publisher
                .publish_when_room(&msg)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!("PUB sent={} seconds={seconds:.3} {}", args.count, usage());
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn subscribe(node: &Node, args: &PeerArgs) -> CliResult {
    let transports = match args.transport.as_str() {
        "tcp" => vec![Protocol::Tcp],
        _ => vec![Protocol::Udp],
    };
    let options = SubscribeOptions {
        transports,
        queue_size: 100_000,
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

/// A scenario of the issue: message size, rate, count, subscribers.
#[derive(Debug, Clone)]
struct Scenario {
    id: &'static str,
    what: &'static str,
    size: usize,
    rate: f64,
    count: u64,
    subscribers: usize,
}

fn scenarios(quick: bool) -> Vec<Scenario> {
    let n = |full: u64, small: u64| if quick { small } else { full };
    vec![
        Scenario {
            id: "S1",
            what: "64 B at 1 kHz",
            size: 64,
            rate: 1000.0,
            count: n(5000, 200),
            subscribers: 1,
        },
        Scenario {
            id: "S2",
            what: "64 B flood",
            size: 64,
            rate: 0.0,
            count: n(100_000, 2000),
            subscribers: 1,
        },
        Scenario {
            id: "S3",
            what: "100 kB at 100 Hz",
            size: 100_000,
            rate: 100.0,
            count: n(500, 20),
            subscribers: 1,
        },
        Scenario {
            id: "S4",
            what: "1 MB at 20 Hz",
            size: 1_000_000,
            rate: 20.0,
            count: n(100, 5),
            subscribers: 1,
        },
        Scenario {
            id: "S5",
            what: "10 kB at 500 Hz to 5 subscribers",
            size: 10_000,
            rate: 500.0,
            count: n(2500, 100),
            subscribers: 5,
        },
    ]
}

/// The pairs of the table: (publisher, subscriber) implementations.
const PAIRS: [(&str, &str); 4] = [
    ("udpros", "udpros"),
    ("roscpp", "roscpp"),
    ("udpros", "roscpp"),
    ("roscpp", "udpros"),
];

/// Builds the roscpp peer into the target folder (once; later runs reuse it).
fn build_roscpp_peer() -> Result<PathBuf, String> {
    let source = udpros_testkit::peer_script("roscpp_bench.cpp");
    udpros_testkit::cpp_peer::build_once(&source, "roscpp_bench", &["roscpp", "sensor_msgs"])
}

/// `key=value` pairs of a peer's summary line.
fn fields(line: &str) -> BTreeMap<String, f64> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

struct Peer {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(mut cmd: Command) -> Result<Peer, String> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let out = child.stdout.take().ok_or("no stdout")?;
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok(Peer { child, lines })
}

impl Peer {
    fn wait_line(&self, prefix: &str, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return Some(l),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }
}

/// One measured cell of the table.
#[derive(Debug, Clone, Default)]
struct Row {
    /// Which sweep of `--repeat` it came from.
    run: u32,
    scenario: String,
    pair: String,
    transport: String,
    sent: f64,
    received: Vec<BTreeMap<String, f64>>,
    publisher: BTreeMap<String, f64>,
    /// Each subscriber's latency (µs) of each message, by seq.
    latencies: Vec<BTreeMap<u64, f64>>,
}

/// Reads a subscriber's `--dump` file.
fn read_dump(path: &Path) -> BTreeMap<u64, f64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (seq, us) = l.split_once(' ')?;
            Some((seq.parse().ok()?, us.parse().ok()?))
        })
        .collect()
}

/// Fan-out: of each message every subscriber received, its latencies sorted (when it
/// reached its first subscriber, its second, ... its last); the median of each rank.
fn arrival_ranks(per_subscriber: &[BTreeMap<u64, f64>]) -> Option<Vec<f64>> {
    let (head, rest) = per_subscriber.split_first()?;
    if rest.is_empty() {
        return None;
    }
    let mut ranks = vec![Vec::new(); per_subscriber.len()];
    for (seq, &us) in head {
        let mut arrivals: Vec<f64> = std::iter::once(Some(us))
            .chain(rest.iter().map(|m| m.get(seq).copied()))
            .collect::<Option<_>>()
            .unwrap_or_default();
        if arrivals.len() != ranks.len() {
            continue; // not everywhere
        }
        arrivals.sort_by(f64::total_cmp);
        for (rank, us) in ranks.iter_mut().zip(arrivals) {
            rank.push(us);
        }
    }
    if ranks[0].is_empty() {
        return None;
    }
    Some(ranks.iter_mut().map(|r| median(r)).collect())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    percentile(values, 0.5)
}

fn peer_command(kind: &str, roscpp: &Path, master: &str, multi_thread: bool) -> Command {
    let mut cmd = if kind == "roscpp" {
        Command::new(roscpp)
    } else {
        let mut c = Command::new(std::env::current_exe().unwrap_or_else(|_| "udpros".into()));
        c.args(["bench", "peer"]);
        if multi_thread {
            c.arg("--multi-thread");
        }
        c
    };
    cmd.env("ROS_MASTER_URI", master)
        .env("ROS_IP", "127.0.0.1")
        .env_remove("ROS_HOSTNAME")
        .env_remove("ROS_NAMESPACE");
    cmd
}

fn run_cell(
    (s, (publisher, subscriber), transport): (&Scenario, (&str, &str), &str),
    roscpp: &Path,
    master: &str,
    topic: &str,
    multi_thread: bool,
    dumps: &Path,
) -> Result<Row, String> {
    let mut subs = Vec::new();
    let dump_files: Vec<PathBuf> = (0..s.subscribers)
        .map(|k| dumps.join(format!("{}_{k}.txt", topic.trim_start_matches('/'))))
        .collect();
    for dump in &dump_files {
        let mut cmd = peer_command(subscriber, roscpp, master, multi_thread);
        cmd.args([
            "sub",
            topic,
            "--count",
            &s.count.to_string(),
            "--transport",
            transport,
        ]);
        cmd.arg("--dump").arg(dump);
        let p = spawn(cmd)?;
        p.wait_line("READY", Duration::from_secs(30))
            .ok_or_else(|| format!("{subscriber} subscriber did not start"))?;
        subs.push(p);
    }
    let mut cmd = peer_command(publisher, roscpp, master, multi_thread);
    cmd.args([
        "pub",
        topic,
        "--size",
        &s.size.to_string(),
        "--rate",
        &s.rate.to_string(),
        "--count",
        &s.count.to_string(),
        "--subscribers",
        &s.subscribers.to_string(),
    ]);
    let pub_peer = spawn(cmd)?;
    let limit = Duration::from_secs_f64(60.0 + s.count as f64 / s.rate.max(1000.0));
    let pub_line = pub_peer
        .wait_line("PUB", limit)
        .ok_or_else(|| format!("{publisher} publisher did not finish"))?;
    let mut row = Row {
        scenario: format!("{} ({})", s.id, s.what),
        pair: format!("{publisher} → {subscriber}"),
        transport: transport.to_uppercase(),
        sent: s.count as f64,
        publisher: fields(&pub_line),
        ..Row::default()
    };
    for p in &subs {
        let line = p
            .wait_line("SUB", Duration::from_secs(30))
            .unwrap_or_else(|| "SUB received=0".into());
        row.received.push(fields(&line));
    }
    row.latencies = dump_files.iter().map(|f| read_dump(f)).collect();
    Ok(row)
}

async fn harness(args: RunArgs) -> CliResult {
    let roscpp = build_roscpp_peer()?;
    let master =
        udpros::master::Master::start("127.0.0.1:0".parse().map_err(|_| "address")?, "127.0.0.1")
            .await
            .map_err(|e| format!("cannot start a master: {e}"))?;
    let uri = master.uri().to_string();
    let wanted: Option<Vec<String>> = args
        .scenarios
        .as_ref()
        .map(|s| s.split(',').map(|x| x.trim().to_uppercase()).collect());
    let dumps = std::env::temp_dir().join(format!("udpros_bench_{}", std::process::id()));
    std::fs::create_dir_all(&dumps).map_err(|e| format!("{}: {e}", dumps.display()))?;
    let mut rows = Vec::new();
    let chosen: Vec<Scenario> = scenarios(args.quick)
        .into_iter()
        .filter(|s| wanted.as_ref().is_none_or(|w| w.iter().any(|x| x == s.id)))
        .collect();
    // Sweep after sweep, so a drift of the machine touches every cell alike.
    for run in 0..args.repeat.max(1) {
        for (i, s) in chosen.iter().enumerate() {
            for (j, pair) in PAIRS.iter().enumerate() {
                for transport in ["udp", "tcp"] {
                    let topic = format!("/bench_{run}_{i}_{j}_{transport}");
                    let (roscpp2, uri2, s2) = (roscpp.clone(), uri.clone(), s.clone());
                    let (pair, multi_thread, dumps) = (*pair, args.multi_thread, dumps.clone());
                    let row = tokio::task::spawn_blocking(move || {
                        let cell = (&s2, pair, transport);
                        run_cell(cell, &roscpp2, &uri2, &topic, multi_thread, &dumps)
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                    match row {
                        Ok(mut row) => {
                            row.run = run;
                            eprintln!("{} {} {}: done", row.scenario, row.pair, row.transport);
                            rows.push(row);
                        }
                        Err(e) => eprintln!("{} {}→{} {transport}: {e}", s.id, pair.0, pair.1),
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dumps);
    print_table(&rows);
    // The fan-out scenario's physical reference: its message as one datagram, same pace.
    let raw_fan_out = match chosen.iter().find(|s| s.subscribers > 1).cloned() {
        Some(s) => tokio::task::spawn_blocking(move || {
            let interval = Duration::from_secs_f64(1.0 / s.rate.max(1.0));
            bench_raw::fan_out(s.subscribers, s.size, s.count, interval)
        })
        .await
        .map_err(|e| e.to_string())?
        .map(Some)
        .map_err(|e| format!("raw UDP fan-out: {e}"))?,
        None => None,
    };
    print_fan_out(&rows, raw_fan_out.as_deref());
    let quick = args.quick;
    let raw = tokio::task::spawn_blocking(move || {
        bench_raw::SIZES
            .iter()
            .map(|&size| bench_raw::measure(size, quick))
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("raw UDP reference: {e}"))?;
    bench_raw::print_table(&raw);
    let csv = args.csv.unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench/udpros_bench.csv")
    });
    write_csv(&csv, &rows)?;
    println!("\nCSV: {}", csv.display());
    let svg = csv.with_extension("svg");
    std::fs::write(&svg, plot(&rows)).map_err(|e| format!("{}: {e}", svg.display()))?;
    println!("Latency distributions (SVG): {}", svg.display());
    Ok(())
}

/// The latency distributions of every cell, a panel per scenario.
fn plot(rows: &[Row]) -> String {
    let mut panels: Vec<bench_plot::Panel> = Vec::new();
    for runs in cells(rows) {
        let r = runs[0];
        let curve = bench_plot::Curve {
            pair: r.pair.clone(),
            transport: r.transport.clone(),
            latencies_us: runs
                .iter()
                .flat_map(|r| r.latencies.iter().flat_map(|m| m.values().copied()))
                .collect(),
            expected: runs
                .iter()
                .map(|r| r.sent as usize * r.received.len().max(1))
                .sum(),
        };
        match panels.iter_mut().find(|p| p.title == r.scenario) {
            Some(panel) => panel.curves.push(curve),
            None => panels.push(bench_plot::Panel {
                title: r.scenario.clone(),
                curves: vec![curve],
            }),
        }
    }
    bench_plot::render("udpros bench: one-way latency, udpros and roscpp", &panels)
}

fn sum(row: &Row, key: &str) -> f64 {
    row.received
        .iter()
        .map(|r| r.get(key).copied().unwrap_or(0.0))
        .sum()
}

fn max_of(row: &Row, key: &str) -> f64 {
    row.received
        .iter()
        .map(|r| r.get(key).copied().unwrap_or(0.0))
        .fold(0.0, f64::max)
}

/// The runs of each cell (scenario, pair, transport), in the order they first ran.
fn cells(rows: &[Row]) -> Vec<Vec<&Row>> {
    let mut cells: Vec<Vec<&Row>> = Vec::new();
    for r in rows {
        let same = |c: &&mut Vec<&Row>| {
            (&c[0].scenario, &c[0].pair, &c[0].transport) == (&r.scenario, &r.pair, &r.transport)
        };
        match cells.iter_mut().find(same) {
            Some(cell) => cell.push(r),
            None => cells.push(vec![r]),
        }
    }
    cells
}

/// A run's figures, as the main table shows them.
struct Figures {
    delivered_percent: f64,
    /// A rate needs two messages and some time between them.
    per_second: Option<f64>,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    pub_cpu_per_100k: f64,
    sub_cpu_per_100k: f64,
    pub_rss_mb: f64,
    sub_rss_mb: f64,
}

impl Figures {
    fn of(r: &Row) -> Figures {
        let subs = r.received.len().max(1) as f64;
        let per_sub = sum(r, "received") / subs;
        let seconds = max_of(r, "seconds");
        let cpu = |m: &BTreeMap<String, f64>| {
            m.get("user").copied().unwrap_or(0.0) + m.get("sys").copied().unwrap_or(0.0)
        };
        let per_100k = |cpu: f64, n: f64| if n > 0.0 { cpu * 100_000.0 / n } else { 0.0 };
        let sub_cpu: f64 = r.received.iter().map(cpu).sum::<f64>() / subs;
        Figures {
            delivered_percent: 100.0 * per_sub / r.sent,
            per_second: (seconds > 0.0 && per_sub >= 2.0).then(|| (per_sub - 1.0) / seconds),
            // Several subscribers: the worst one's.
            p50_us: max_of(r, "p50_us"),
            p99_us: max_of(r, "p99_us"),
            max_us: max_of(r, "max_us"),
            pub_cpu_per_100k: per_100k(cpu(&r.publisher), r.sent),
            sub_cpu_per_100k: per_100k(sub_cpu, per_sub),
            pub_rss_mb: r.publisher.get("rss_kb").copied().unwrap_or(0.0) / 1024.0,
            sub_rss_mb: max_of(r, "rss_kb") / 1024.0,
        }
    }
}

fn print_table(rows: &[Row]) {
    println!("| scenario | pair | transport | delivered | msgs/s | p50 µs | p99 µs | max µs | pub CPU s/100k | sub CPU s/100k | pub RSS MB | sub RSS MB |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for runs in cells(rows) {
        let figures: Vec<Figures> = runs.iter().map(|r| Figures::of(r)).collect();
        // Each column's median over the runs.
        let m = |f: fn(&Figures) -> f64| median(&mut figures.iter().map(f).collect::<Vec<_>>());
        let rates: Vec<f64> = figures.iter().filter_map(|f| f.per_second).collect();
        let rate = match rates.is_empty() {
            true => "-".into(),
            false => format!("{:.0}", median(&mut rates.clone())),
        };
        let r = runs[0];
        println!(
            "| {} | {} | {} | {:.1} % | {rate} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.1} | {:.1} |",
            r.scenario,
            r.pair,
            r.transport,
            m(|f| f.delivered_percent),
            m(|f| f.p50_us),
            m(|f| f.p99_us),
            m(|f| f.max_us),
            m(|f| f.pub_cpu_per_100k),
            m(|f| f.sub_cpu_per_100k),
            m(|f| f.pub_rss_mb),
            m(|f| f.sub_rss_mb),
        );
    }
}

/// Each subscriber's latencies of a cell's runs, as if one long run: message numbers of
/// run k are put past those of the runs before it.
fn pooled_latencies(runs: &[&Row]) -> Vec<BTreeMap<u64, f64>> {
    let subscribers = runs.iter().map(|r| r.latencies.len()).max().unwrap_or(0);
    (0..subscribers)
        .map(|k| {
            runs.iter()
                .filter_map(|r| Some((r.run, r.latencies.get(k)?)))
                .flat_map(|(run, m)| {
                    m.iter()
                        .map(move |(&seq, &us)| ((u64::from(run) << 32) | seq, us))
                })
                .collect()
        })
        .collect()
}

/// The scenarios with several subscribers, seen two ways: per message (when it reached
/// its first subscriber, its second, ... its last) and per subscriber (each one's median);
/// then the same for raw UDP, the physical reference.
fn print_fan_out(rows: &[Row], raw: Option<&[BTreeMap<u64, f64>]>) {
    let fanned: Vec<Vec<&Row>> = cells(rows)
        .into_iter()
        .filter(|runs| runs[0].latencies.len() > 1)
        .collect();
    if fanned.is_empty() {
        return;
    }
    println!("\n| fan-out | pair | transport | per message p50 µs, by arrival | last − first µs | last / first | per subscriber p50 µs, best to worst | worst / best |");
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    for runs in fanned {
        let r = runs[0];
        let scenario = r.scenario.split(' ').next().unwrap_or("");
        print_fan_out_row(scenario, &r.pair, &r.transport, &pooled_latencies(&runs));
    }
    if let Some(raw) = raw {
        print_fan_out_row("raw UDP", "threads, blocking", "UDP", raw);
    }
}

fn print_fan_out_row(
    scenario: &str,
    pair: &str,
    transport: &str,
    latencies: &[BTreeMap<u64, f64>],
) {
    let figures = |v: &[f64]| {
        v.iter()
            .map(|m| format!("{m:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ratio = |lo: f64, hi: f64| match lo > 0.0 {
        true => format!("{:.2}×", hi / lo),
        false => "-".into(),
    };
    let (by_arrival, spread, message_ratio) = match arrival_ranks(latencies) {
        Some(ranks) => {
            let (first, last) = (ranks[0], ranks[ranks.len() - 1]);
            (
                figures(&ranks),
                format!("{:.0}", last - first),
                ratio(first, last),
            )
        }
        None => ("-".into(), "-".into(), "-".into()),
    };
    let mut medians: Vec<f64> = latencies
        .iter()
        .map(|m| median(&mut m.values().copied().collect::<Vec<_>>()))
        .collect();
    medians.sort_by(f64::total_cmp);
    let subscriber_ratio = match (medians.first(), medians.last()) {
        (Some(&best), Some(&worst)) => ratio(best, worst),
        _ => "-".into(),
    };
    println!(
        "| {scenario} | {pair} | {transport} | {by_arrival} | {spread} | {message_ratio} | {} | {subscriber_ratio} |",
        figures(&medians)
    );
}

fn write_csv(path: &Path, rows: &[Row]) -> CliResult {
    let mut out = String::from("run,scenario,pair,transport,subscriber,sent,received,lost,seconds,p50_us,p99_us,max_us,pub_user,pub_sys,pub_rss_kb,sub_user,sub_sys,sub_rss_kb\n");
    for r in rows {
        for (i, s) in r.received.iter().enumerate() {
            let g = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(0.0);
            out += &format!(
                "{},{},{},{},{i},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                r.run,
                r.scenario,
                r.pair,
                r.transport,
                r.sent,
                g(s, "received"),
                g(s, "lost"),
                g(s, "seconds"),
                g(s, "p50_us"),
                g(s, "p99_us"),
                g(s, "max_us"),
                g(&r.publisher, "user"),
                g(&r.publisher, "sys"),
                g(&r.publisher, "rss_kb"),
                g(s, "user"),
                g(s, "sys"),
                g(s, "rss_kb"),
            );
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    std::fs::write(path, out).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscriber(latencies: &[(u64, f64)]) -> BTreeMap<u64, f64> {
        latencies.iter().copied().collect()
    }

    #[test]
    fn arrival_ranks_sort_each_message_and_skip_the_ones_not_everywhere() {
        let subscribers = [
            subscriber(&[(0, 10.0), (1, 50.0), (2, 30.0), (3, 1.0)]),
            subscriber(&[(0, 20.0), (1, 40.0), (2, 10.0)]),
            subscriber(&[(0, 30.0), (1, 60.0), (2, 20.0), (3, 2.0)]),
        ];
        // Message 3 missed the second subscriber; the others sort to
        // [10, 20, 30], [40, 50, 60], [10, 20, 30].
        let ranks = arrival_ranks(&subscribers).expect("three messages everywhere");
        assert_eq!(ranks, vec![10.0, 20.0, 30.0]);
    }

    #[test]
    fn arrival_ranks_need_two_subscribers_and_a_shared_message() {
        assert_eq!(arrival_ranks(&[subscriber(&[(0, 1.0)])]), None);
        let apart = [subscriber(&[(0, 1.0)]), subscriber(&[(1, 1.0)])];
        assert_eq!(arrival_ranks(&apart), None);
    }
}
