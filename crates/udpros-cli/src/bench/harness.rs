//! The harness: builds the roscpp peer, starts a master, runs every cell (scenario, pair,
//! transport) as processes, and hands the rows to the report and the plot.

use super::report::{print_fan_out, print_secure_cost, print_table, read_dump, write_csv, Row};
use super::scenarios::{
    runs_python, scenarios, transports, Scenario, PAIRS, PYTHON_PAIRS, ROSLIBRUST_PAIRS,
    ROSRUST_PAIRS,
};
use super::{plot, raw, CliResult, RunArgs};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Builds the roscpp peer into the target folder (once; later runs reuse it).
fn build_roscpp_peer() -> Result<PathBuf, String> {
    let source = udpros_testkit::peer_script("roscpp_bench.cpp");
    udpros_testkit::cpp_peer::build_once(&source, "roscpp_bench", &["roscpp", "sensor_msgs"])
}

/// Builds one of the Rust peers (`peers/rust/`, a cargo workspace of its own: `rosrust` or
/// `roslibrust`) into `target/rust-peers`, in release mode (dev with `--quick`); its path,
/// or why it could not be built (the bench then runs without its cells and says so).
fn build_rust_peer(library: &str, quick: bool) -> Result<PathBuf, String> {
    let package = format!("{library}_bench");
    let manifest = udpros_testkit::peer_script("rust/Cargo.toml");
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/rust-peers");
    let profile = if quick { "dev" } else { "release" };
    let out = Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "--locked",
            "--profile",
            profile,
            "-p",
            &package,
            "--manifest-path",
        ])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &target)
        // rosrust_msg generates messages from the .msg files Debian's ROS packages install;
        // given all of /usr/share it meets packages it cannot generate and leaves every
        // message empty, so it is given the three the bench needs.
        .env(
            "ROSRUST_MSG_PATH",
            "/usr/share/std_msgs:/usr/share/sensor_msgs:/usr/share/geometry_msgs",
        )
        .env_remove("ROS_PACKAGE_PATH")
        .env_remove("CMAKE_PREFIX_PATH")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cargo: {e}"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = why.lines().rev().take(5).collect();
        return Err(tail.into_iter().rev().collect::<Vec<_>>().join(" | "));
    }
    let dir = if quick { "debug" } else { "release" };
    Ok(target.join(dir).join(package))
}

/// `key=value` pairs of a peer's summary line.
pub(super) fn fields(line: &str) -> BTreeMap<String, f64> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

pub(super) struct Peer {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn spawn(mut cmd: Command) -> Result<Peer, String> {
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
    /// The peer's process id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn wait_line(&self, prefix: &str, limit: Duration) -> Option<String> {
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

/// Where the peer programs other than udpros itself are.
#[derive(Clone)]
struct Peers {
    roscpp: PathBuf,
    rosrust: Option<PathBuf>,
    roslibrust: Option<PathBuf>,
    python: Option<super::python::PythonPeer>,
}

/// How the harness starts udpros's own peers.
#[derive(Clone)]
struct UdprosPeer {
    multi_thread: bool,
    fec: Option<String>,
    security: PeerSecurity,
}

/// How a udpros peer secures its links.
#[derive(Clone)]
enum PeerSecurity {
    /// As the environment the bench runs in says (no `--secure`).
    FromEnvironment,
    /// Off, whatever the environment says: `--secure`'s plain rows.
    Off,
    /// Sealed in `mode` under the run's throwaway key.
    Sealed {
        key_file: PathBuf,
        mode: udpros::secure::Mode,
    },
}

impl UdprosPeer {
    /// What a row's pair says besides its peers.
    fn label(&self) -> String {
        match &self.security {
            PeerSecurity::Sealed { mode, .. } => format!(" (sealed, {mode})"),
            _ => String::new(),
        }
    }
}

fn peer_command(kind: &str, peers: &Peers, master: &str, udpros: &UdprosPeer) -> Command {
    let mut cmd = if kind == "roscpp" {
        Command::new(&peers.roscpp)
    } else if let (Some(python), true) = (&peers.python, super::python::is_python(kind)) {
        let mut c = Command::new(python.python());
        c.args(python.args(kind));
        if let Some(fec) = &udpros.fec {
            c.args(["--fec", fec]);
        }
        c
    } else if let (Some(rosrust), "rosrust") = (&peers.rosrust, kind) {
        Command::new(rosrust)
    } else if let (Some(roslibrust), "roslibrust") = (&peers.roslibrust, kind) {
        Command::new(roslibrust)
    } else {
        let mut c = Command::new(std::env::current_exe().unwrap_or_else(|_| "udpros".into()));
        c.args(["bench", "peer"]);
        if udpros.multi_thread {
            c.arg("--multi-thread");
        }
        if let Some(fec) = &udpros.fec {
            c.args(["--fec", fec]);
        }
        match &udpros.security {
            PeerSecurity::FromEnvironment => {}
            PeerSecurity::Off => {
                c.env(udpros::secure::POLICY_VAR, "off");
            }
            // `prefer`: both peers hold the key, so their link is sealed; the bench's
            // master holds none, and a node under `require` would refuse its answers.
            PeerSecurity::Sealed { key_file, mode } => {
                c.env(udpros::secure::KEY_FILE_VAR, key_file)
                    .env(udpros::secure::POLICY_VAR, "prefer")
                    .env(udpros::secure::MODE_VAR, mode.as_str());
            }
        }
        c
    };
    loopback_ros_env(&mut cmd, master);
    cmd
}

/// A bench peer's ROS environment: `master`, on loopback, at the root namespace.
pub(super) fn loopback_ros_env(cmd: &mut Command, master: &str) {
    cmd.env("ROS_MASTER_URI", master)
        .env("ROS_IP", "127.0.0.1")
        .env_remove("ROS_HOSTNAME")
        .env_remove("ROS_NAMESPACE");
}

fn run_cell(
    (s, (publisher, subscriber), transport): (&Scenario, (&str, &str), &str),
    peers: &Peers,
    master: &str,
    topic: &str,
    udpros: &UdprosPeer,
    dumps: &Path,
) -> Result<Row, String> {
    let mut subs = Vec::new();
    let dump_files: Vec<PathBuf> = (0..s.subscribers)
        .map(|k| dumps.join(format!("{}_{k}.txt", topic.trim_start_matches('/'))))
        .collect();
    for dump in &dump_files {
        let mut cmd = peer_command(subscriber, peers, master, udpros);
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
    let mut cmd = peer_command(publisher, peers, master, udpros);
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
        pair: format!("{publisher} → {subscriber}{}", udpros.label()),
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

pub(super) async fn run(args: RunArgs) -> CliResult {
    let rust_peer = |library: &str| match build_rust_peer(library, args.quick) {
        Ok(path) => Some(path),
        Err(why) => {
            eprintln!("{library} peer not built, its cells are left out: {why}");
            None
        }
    };
    let dumps = std::env::temp_dir().join(format!("udpros_bench_{}", std::process::id()));
    std::fs::create_dir_all(&dumps).map_err(|e| format!("{}: {e}", dumps.display()))?;
    let wanted_pairs: Option<Vec<String>> = args
        .pairs
        .as_ref()
        .map(|w| w.split(',').map(|p| p.trim().to_string()).collect());
    let wanted: Option<Vec<String>> = args
        .scenarios
        .as_ref()
        .map(|s| s.split(',').map(|x| x.trim().to_uppercase()).collect());
    let chosen: Vec<Scenario> = scenarios(args.quick)
        .into_iter()
        .filter(|s| wanted.as_ref().is_none_or(|w| w.iter().any(|x| x == s.id)))
        .collect();
    // A Rust peer is a cargo build of minutes: only for a pair that was asked for, in a
    // scenario that runs pairs (S8, S10 and S11 alone never start one).
    let asked_for = |library: &str| {
        !chosen.is_empty()
            && wanted_pairs
                .as_ref()
                .is_none_or(|w| w.iter().any(|p| p.split('-').any(|side| side == library)))
    };
    let peers = Peers {
        roscpp: build_roscpp_peer()?,
        rosrust: asked_for("rosrust").then(|| rust_peer("rosrust")).flatten(),
        roslibrust: asked_for("roslibrust")
            .then(|| rust_peer("roslibrust"))
            .flatten(),
        python: super::python::PythonPeer::find(&dumps),
    };
    let mut pairs: Vec<(&'static str, &'static str)> = PAIRS.to_vec();
    if peers.rosrust.is_some() {
        pairs.extend(ROSRUST_PAIRS);
    }
    if peers.roslibrust.is_some() {
        let with_rosrust = peers.rosrust.is_some();
        pairs.extend(
            ROSLIBRUST_PAIRS
                .into_iter()
                .filter(|p| with_rosrust || (p.0 != "rosrust" && p.1 != "rosrust")),
        );
    }
    if peers.python.is_some() {
        pairs.extend(PYTHON_PAIRS);
    }
    if let Some(wanted) = &wanted_pairs {
        pairs.retain(|(publisher, subscriber)| {
            wanted.contains(&format!("{publisher}-{subscriber}"))
        });
        if pairs.is_empty() && !chosen.is_empty() {
            return Err(format!(
                "no pair among {wanted:?} (publisher-subscriber, e.g. udpros-roscpp)"
            ));
        }
    }
    let udpros_peer = UdprosPeer {
        multi_thread: args.multi_thread,
        fec: args.fec.clone(),
        security: PeerSecurity::FromEnvironment,
    };
    let master =
        udpros::master::Master::start("127.0.0.1:0".parse().map_err(|_| "address")?, "127.0.0.1")
            .await
            .map_err(|e| format!("cannot start a master: {e}"))?;
    let uri = master.uri().to_string();
    let secure_variants = secure_variants(args.secure.as_deref(), &dumps)?;
    let mut rows = Vec::new();
    // Sweep after sweep, so a drift of the machine touches every cell alike.
    for run in 0..args.repeat.max(1) {
        for (i, s) in chosen.iter().enumerate() {
            for (j, pair) in pairs.iter().enumerate() {
                if PYTHON_PAIRS.contains(pair) && !runs_python(s, args.quick) {
                    continue;
                }
                // udpros → udpros plain, then sealed in each mode asked for.
                let variants: Vec<UdprosPeer> = match (&secure_variants, *pair) {
                    (Some(variants), ("udpros", "udpros")) => variants
                        .iter()
                        .map(|security| UdprosPeer {
                            security: security.clone(),
                            ..udpros_peer.clone()
                        })
                        .collect(),
                    _ => vec![udpros_peer.clone()],
                };
                for (v, udpros) in variants.into_iter().enumerate() {
                    for &transport in transports(*pair) {
                        let topic = format!("/bench_{run}_{i}_{j}_{v}_{transport}");
                        let (peers2, uri2, s2) = (peers.clone(), uri.clone(), s.clone());
                        let (pair, udpros, dumps) = (*pair, udpros.clone(), dumps.clone());
                        let row = tokio::task::spawn_blocking(move || {
                            let cell = (&s2, pair, transport);
                            run_cell(cell, &peers2, &uri2, &topic, &udpros, &dumps)
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
    }
    let services_wanted = wanted.as_ref().is_none_or(|w| w.iter().any(|x| x == "S6"));
    if !rows.is_empty() {
        print_table(&rows);
        super::report::print_python_bars(&rows);
    }
    if secure_variants.is_some() {
        print_secure_cost(&rows);
    }
    // S8 only when asked for: it needs root, and takes about a quarter of an hour.
    if wanted.as_ref().is_some_and(|w| w.iter().any(|x| x == "S8")) {
        let (quick, roscpp, dumps) = (args.quick, peers.roscpp.clone(), dumps.clone());
        let python = peers.python.clone();
        let only = super::radio::Only::new(args.rows.as_deref(), None);
        tokio::task::spawn_blocking(move || {
            super::lossy::run(quick, &only, (&roscpp, python.as_ref()), &dumps)
        })
        .await
        .map_err(|e| e.to_string())??;
    }
    // S11 likewise: root, Debian's rosbag, and a few minutes.
    if wanted
        .as_ref()
        .is_some_and(|w| w.iter().any(|x| x == "S11"))
    {
        let (quick, roscpp, dumps) = (args.quick, peers.roscpp.clone(), dumps.clone());
        tokio::task::spawn_blocking(move || super::record::run(quick, &roscpp, &dumps))
            .await
            .map_err(|e| e.to_string())??;
    }
    // S10 likewise: root, and about a quarter of an hour.
    if wanted
        .as_ref()
        .is_some_and(|w| w.iter().any(|x| x == "S10"))
    {
        let (quick, roscpp, dumps) = (args.quick, peers.roscpp.clone(), dumps.clone());
        let only = super::radio::Only::new(args.rows.as_deref(), args.radios.as_deref());
        tokio::task::spawn_blocking(move || super::radio::run(quick, &only, &roscpp, &dumps))
            .await
            .map_err(|e| e.to_string())??;
    }
    // Cells that could not run: the tables go on without them, and the run fails at its
    // end (a smoke run must not pass over a scenario that broke).
    let mut failed = Vec::new();
    if wanted.as_ref().is_none_or(|w| w.iter().any(|x| x == "S9")) {
        failed.extend(super::view::run_table(args.quick, &uri, &peers.roscpp).await);
    }
    if services_wanted {
        let (quick, uri, dumps) = (args.quick, uri.clone(), dumps.clone());
        tokio::task::spawn_blocking(move || super::services::run_table(quick, &uri, &dumps))
            .await
            .map_err(|e| e.to_string())??;
    }
    // The fan-out scenario's physical reference: its message as one datagram, same pace,
    // to receiver threads and to receiver processes (the cells' topology).
    let mut raw_fan_outs = Vec::new();
    if let Some(s) = chosen.iter().find(|s| s.subscribers > 1).cloned() {
        let dumps = dumps.clone();
        let (threads, processes) = tokio::task::spawn_blocking(move || {
            let interval = Duration::from_secs_f64(1.0 / s.rate.max(1.0));
            let threads = raw::fan_out(s.subscribers, s.size, s.count, interval)
                .map_err(|e| format!("raw UDP fan-out: {e}"))?;
            let processes = raw_fan_out_to_processes(&s, interval, &dumps)
                .map_err(|e| format!("raw UDP fan-out to processes: {e}"))?;
            Ok::<_, String>((threads.latencies, processes))
        })
        .await
        .map_err(|e| e.to_string())??;
        raw_fan_outs.push(("threads, blocking", threads));
        raw_fan_outs.push(("processes, blocking", processes));
    }
    let _ = std::fs::remove_dir_all(&dumps);
    print_fan_out(&rows, &raw_fan_outs);
    let quick = args.quick;
    let raw = tokio::task::spawn_blocking(move || {
        raw::SIZES
            .iter()
            .map(|&size| raw::measure(size, quick))
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("raw UDP reference: {e}"))?;
    raw::print_table(&raw);
    print_s1_against_raw(&rows, &raw);
    let csv = args.csv.unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench/udpros_bench.csv")
    });
    write_csv(&csv, &rows)?;
    println!("\nCSV: {}", csv.display());
    let svg = csv.with_extension("svg");
    std::fs::write(&svg, plot::plot(&rows)).map_err(|e| format!("{}: {e}", svg.display()))?;
    println!("Latency distributions (SVG): {}", svg.display());
    if !failed.is_empty() {
        return Err(format!("cells that could not run: {}", failed.join("; ")));
    }
    Ok(())
}

/// What `--secure` runs udpros → udpros as: plain, then sealed in each mode it names,
/// under a throwaway key (written into the run's own temporary folder, removed with it).
fn secure_variants(
    wanted: Option<&str>,
    folder: &Path,
) -> Result<Option<Vec<PeerSecurity>>, String> {
    let Some(wanted) = wanted else {
        return Ok(None);
    };
    let key_file = throwaway_key(folder)?;
    let sealed = wanted.split(',').map(|m| {
        let mode = m.trim().parse()?;
        let key_file = key_file.clone();
        Ok(PeerSecurity::Sealed { key_file, mode })
    });
    let variants = std::iter::once(Ok(PeerSecurity::Off))
        .chain(sealed)
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Some(variants))
}

/// The graph key of a run's sealed peers, made once in the run's temporary `folder` (and
/// removed with it): a key of no use beyond the run.
pub(super) fn throwaway_key(folder: &Path) -> Result<PathBuf, String> {
    let key_file = folder.join("bench.key");
    if !key_file.exists() {
        let key = udpros::secure::new_key().map_err(|e| e.to_string())?;
        udpros::secure::write_new_key_file(&key_file, &key).map_err(|e| e.to_string())?;
    }
    Ok(key_file)
}

/// Raw UDP fan-out as S5's cells are laid out: each receiver a process of its own
/// (`bench raw-receiver`), the sender this thread. Each receiver's latencies by message.
fn raw_fan_out_to_processes(
    s: &Scenario,
    interval: Duration,
    dumps: &Path,
) -> Result<Vec<BTreeMap<u64, f64>>, String> {
    let mut receivers = Vec::new();
    let mut ports = Vec::new();
    for k in 0..s.subscribers {
        let dump = dumps.join(format!("raw_fan_out_{k}.txt"));
        let mut cmd = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
        cmd.args(["bench", "raw-receiver", "--size"])
            .arg(s.size.to_string())
            .arg("--count")
            .arg(s.count.to_string())
            .arg("--dump")
            .arg(&dump);
        let receiver = spawn(cmd)?;
        let ready = receiver
            .wait_line("READY", Duration::from_secs(30))
            .ok_or("a raw receiver did not start")?;
        let port = fields(&ready).get("port").copied().unwrap_or(0.0) as u16;
        ports.push(port);
        receivers.push((receiver, dump));
    }
    let links = raw::links_to(&ports).map_err(|e| e.to_string())?;
    raw::send_paced(&links, s.size, s.count, interval);
    Ok(receivers
        .iter()
        .map(|(receiver, dump)| {
            // A receiver that lost its last datagram ends on its read timeout.
            let _ = receiver.wait_line("RAW", Duration::from_secs(30));
            read_dump(dump)
        })
        .collect())
}

/// S1 over UDPROS beside raw UDP one way at the same pace, for the datagram S1 puts on the
/// wire: how close each pair comes to what the kernel allows here, in latency and in CPU
/// (a peer's whole process against the raw sender's or receiver's thread).
fn print_s1_against_raw(rows: &[super::report::Row], raw: &[raw::RawUdp]) {
    let Some(reference) = raw.iter().find(|r| r.size == raw::SIZES[0]) else {
        return;
    };
    let s1: Vec<_> = rows
        .iter()
        .filter(|r| r.scenario.starts_with("S1") && r.transport == "UDP")
        .collect();
    if s1.is_empty() {
        return;
    }
    println!(
        "\nS1 over UDPROS against raw UDP one way at {:.0} Hz ({} B datagrams: p50 {:.0} µs, p99 {:.0} µs; CPU s/100k: sender {:.2}, receiver {:.2})\n",
        raw::ONE_WAY_RATE,
        reference.size,
        reference.one_way_p50_us,
        reference.one_way_p99_us,
        reference.one_way_sender_cpu_per_100k,
        reference.one_way_receiver_cpu_per_100k
    );
    println!("| pair | p50 µs | p50 / raw | p99 µs | p99 / raw | pub CPU / raw sender | sub CPU / raw receiver |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let ratio = |x: f64, floor: f64| match floor > 0.0 {
        true => format!("{:.2}x", x / floor),
        false => "-".into(),
    };
    for runs in super::report::cells(&s1.into_iter().cloned().collect::<Vec<_>>()) {
        let (pub_cpu, sub_cpu) = super::report::cpu_per_100k(&runs);
        let mut all: Vec<f64> = runs
            .iter()
            .flat_map(|r| r.latencies.iter().flat_map(|m| m.values().copied()))
            .collect();
        all.sort_by(f64::total_cmp);
        let (p50, p99) = (
            super::report::percentile(&all, 0.5),
            super::report::percentile(&all, 0.99),
        );
        println!(
            "| {} | {p50:.0} | {:.2}x | {p99:.0} | {:.2}x | {} | {} |",
            runs[0].pair,
            p50 / reference.one_way_p50_us.max(1e-9),
            p99 / reference.one_way_p99_us.max(1e-9),
            ratio(pub_cpu, reference.one_way_sender_cpu_per_100k),
            ratio(sub_cpu, reference.one_way_receiver_cpu_per_100k),
        );
    }
}
