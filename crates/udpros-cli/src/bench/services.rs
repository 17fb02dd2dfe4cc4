//! The service round trip (scenario S6): a client calls an echo service of 64-byte
//! strings, persistent (one connection for every call) and not (a lookup and a connection
//! per call, as ROS clients do by default), for each pair of server and client among
//! udpros and roscpp. Each call's round trip is timed by the client.

use super::report::{percentile, read_dump};
use super::CliResult;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use udpros::service::{ClientOptions, ServerOptions};

/// The benchmark's service: `udpros_test/Blob`, `string data --- string data` (the roscpp
/// peer declares the same type by hand).
const BLOB_TYPE: &str = "udpros_test/Blob";
const BLOB_MD5: &str = "a9e4701c829f791367680c5f8ed06ff4";
/// The request's string.
const SIZE: usize = 64;

#[derive(Args)]
pub struct ServicePeerArgs {
    /// `serve` or `call`.
    role: String,
    /// The service name.
    name: String,
    /// Calls to make (client).
    #[arg(long, default_value_t = 1000)]
    count: u64,
    /// Keep one connection for every call (client).
    #[arg(long)]
    persistent: bool,
    /// Where the client writes each call's `number round_trip_us`, a line each.
    #[arg(long)]
    dump: Option<PathBuf>,
}

/// udpros's side of a cell: an echo server (prints `READY`), or a client that writes its
/// round trips and prints `CALLS ok=.. failed=..`.
pub(super) async fn peer(args: ServicePeerArgs) -> CliResult {
    let node = crate::tool_node::tool_node("udpros_bench_service").await?;
    if args.role == "serve" {
        let _server = node
            .advertise_service_raw(
                &args.name,
                BLOB_TYPE,
                BLOB_MD5,
                ServerOptions::default(),
                |body| async move { Ok(body.to_vec()) },
            )
            .await
            .map_err(|e| e.to_string())?;
        println!("READY");
        node.shutdown_requested().await;
        return Ok(());
    }
    let options = ClientOptions {
        persistent: args.persistent,
        ..ClientOptions::default()
    };
    let client = node.service_client_raw(&args.name, BLOB_MD5, options);
    let request = udpros::wire::to_vec(&"x".repeat(SIZE)).map_err(|e| e.to_string())?;
    let mut lines = String::new();
    let mut ok = 0u64;
    for i in 0..args.count {
        let started = Instant::now();
        let answered = client.call(&request).await;
        let us = started.elapsed().as_secs_f64() * 1e6;
        if matches!(&answered, Ok(body) if body[..] == request[..]) {
            ok += 1;
            lines.push_str(&format!("{i} {us:.1}\n"));
        }
    }
    if let Some(path) = &args.dump {
        std::fs::write(path, lines).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    println!("CALLS ok={ok} failed={}", args.count - ok);
    node.shutdown().await;
    Ok(())
}

/// The pairs: (server, client).
const PAIRS: [(&str, &str); 4] = [
    ("udpros", "udpros"),
    ("roscpp", "roscpp"),
    ("udpros", "roscpp"),
    ("roscpp", "udpros"),
];

/// One measured cell.
struct Cell {
    pair: String,
    persistent: bool,
    count: u64,
    round_trips: Vec<f64>,
}

/// Runs every cell and prints the S6 table.
pub(super) fn run_table(quick: bool, master: &str, dumps: &Path) -> CliResult {
    let roscpp = udpros_testkit::cpp_peer::build_once(
        &udpros_testkit::peer_script("roscpp_service_peer.cpp"),
        "roscpp_service_peer",
        &["roscpp", "std_msgs", "std_srvs"],
    )?;
    let mut cells = Vec::new();
    for (k, (server, client)) in PAIRS.iter().enumerate() {
        for persistent in [true, false] {
            let count = match (quick, persistent) {
                (true, _) => 20,
                (false, true) => 5000,
                (false, false) => 1000,
            };
            let name = format!("/bench_service_{k}_{persistent}");
            let dump = dumps.join(format!("service_{k}_{persistent}.txt"));
            match run_cell(
                &roscpp,
                master,
                (server, client),
                &name,
                persistent,
                count,
                &dump,
            ) {
                Ok(round_trips) => {
                    eprintln!("S6 {server} ← {client} persistent={persistent}: done");
                    cells.push(Cell {
                        pair: format!("{client} → {server}"),
                        persistent,
                        count,
                        round_trips,
                    });
                }
                Err(e) => eprintln!("S6 {server} ← {client} persistent={persistent}: {e}"),
            }
        }
    }
    print_table(&cells);
    Ok(())
}

fn command(kind: &str, roscpp: &Path, master: &str) -> std::process::Command {
    let mut cmd = match kind {
        "roscpp" => std::process::Command::new(roscpp),
        _ => {
            let exe = std::env::current_exe().unwrap_or_else(|_| "udpros".into());
            let mut c = std::process::Command::new(exe);
            c.args(["bench", "service-peer"]);
            c
        }
    };
    super::harness::loopback_ros_env(&mut cmd, master);
    cmd
}

fn run_cell(
    roscpp: &Path,
    master: &str,
    (server, client): (&str, &str),
    name: &str,
    persistent: bool,
    count: u64,
    dump: &Path,
) -> Result<Vec<f64>, String> {
    let mut serve = command(server, roscpp, master);
    serve.args(["serve", name]);
    if server == "roscpp" {
        serve.arg("blob");
    }
    let server_peer = super::harness::spawn(serve)?;
    server_peer
        .wait_line("READY", Duration::from_secs(30))
        .ok_or("the server did not start")?;
    let mut call = command(client, roscpp, master);
    call.args(["call", name]);
    if client == "roscpp" {
        call.args(["blob", "--size", &SIZE.to_string()]);
    }
    call.args(["--count", &count.to_string()])
        .arg("--dump")
        .arg(dump);
    if persistent {
        call.arg("--persistent");
    }
    let client_peer = super::harness::spawn(call)?;
    let limit = Duration::from_secs(60 + count / 50);
    let line = client_peer
        .wait_line("CALLS", limit)
        .ok_or("the client did not finish")?;
    if !line.contains(&format!("ok={count} ")) {
        return Err(format!("calls failed: {line}"));
    }
    let mut round_trips: Vec<f64> = read_dump(dump).into_values().collect();
    round_trips.sort_by(f64::total_cmp);
    Ok(round_trips)
}

fn print_table(cells: &[Cell]) {
    println!("\nS6 (service round trip, {SIZE} B request and response, one call at a time)\n");
    println!("| client → server | connection | calls | p50 µs | p99 µs | max µs | calls/s |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for c in cells {
        let total: f64 = c.round_trips.iter().sum();
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} |",
            c.pair,
            if c.persistent {
                "persistent"
            } else {
                "per call"
            },
            c.count,
            percentile(&c.round_trips, 0.5),
            percentile(&c.round_trips, 0.99),
            c.round_trips.last().copied().unwrap_or(f64::NAN),
            c.round_trips.len() as f64 / (total / 1e6),
        );
    }
}
