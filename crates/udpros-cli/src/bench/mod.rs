//! `udpros bench`: udpros and roscpp side by side, in one run on one machine.
//!
//! `udpros bench run` builds the roscpp peer (the test kit's `peers/roscpp_bench.cpp`, g++ and
//! pkg-config), starts a master, and runs every scenario for each pair (udpros → udpros,
//! roscpp → roscpp, udpros → roscpp, roscpp → udpros) over UDPROS and TCPROS, each side in
//! its own process; it prints a markdown table and writes CSV. `udpros bench peer` is the
//! udpros side, with the roscpp peer's arguments and output.
//!
//! Modules: [`peer`] (udpros's side of a cell), [`scenarios`], [`harness`] (processes,
//! cells, the whole run), [`report`] (tables and CSV), [`plot`] (the SVG of latency
//! distributions, drawn by [`plot_svg`]), [`raw`] (the raw UDP reference), [`services`]
//! (S6, the service round trip, and its peer), [`lossy`] (S8, the lossy link between two
//! network namespaces; only when asked for), [`radio`] (S10, a narrow radio between three
//! namespaces; only when asked for), [`record`] (S11, `udpros record` beside `rosbag
//! record` on the lossy link; only when asked for), [`view`] (S9, what `udpros view` adds
//! between a publisher and a browser).

mod harness;
mod lossy;
mod peer;
mod plot;
mod plot_svg;
mod python;
mod radio;
mod raw;
mod record;
mod report;
mod scenarios;
mod services;
mod view;

use super::CliResult;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Run the scenarios and print the table.
    Run(RunArgs),
    /// One side of a scenario (what the harness starts).
    Peer(PeerArgs),
    /// One side of the service scenario, S6: an echo server or a timing client.
    ServicePeer(services::ServicePeerArgs),
    /// A receiver of the raw UDP fan-out reference in a process of its own, as each
    /// subscriber of S5 is (what the harness starts).
    #[command(hide = true)]
    RawReceiver(raw::ReceiverArgs),
}

#[derive(Args)]
pub struct RunArgs {
    /// Tiny counts: checks that everything runs (CI), measures nothing worth reading.
    #[arg(long)]
    quick: bool,
    /// Scenarios to run, e.g. `S1,S3` (default: S1-S6 and S9; S6 is the service round
    /// trip, S9 the view's added age and CPU; S8, the lossy link between two network
    /// namespaces, needs root and runs only when named; so do S10, the narrow radio
    /// between three, and S11, `udpros record` beside `rosbag record` on S8's link).
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
    /// The udpros peers' forward error correction (see `bench peer --fec`; default: theirs,
    /// adaptive): `off` runs udpros as it was before FEC, to compare.
    #[arg(long)]
    fec: Option<String>,
    /// Also run udpros → udpros over secure links in these modes, e.g. `encrypt,auth`:
    /// each sweep then runs that pair plain and sealed side by side (under a throwaway
    /// key), and a table prints what sealing costs.
    #[arg(long)]
    secure: Option<String>,
    /// Only these publisher → subscriber pairs, e.g. `udpros-udpros,roscpp-udpros`
    /// (default: every pair whose peers exist).
    #[arg(long)]
    pairs: Option<String>,
    /// S8 and S10 only: the rows whose name holds one of these, e.g. `governed,roscpp`
    /// (default: every row).
    #[arg(long)]
    rows: Option<String>,
    /// S10 only: the radios whose name starts with one of these, e.g. `4,20 →` (default:
    /// every radio).
    #[arg(long)]
    radios: Option<String>,
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
    /// Forward error correction: `off`, or the repair ratio a publisher adds or a
    /// subscriber asks for (udpros peers only).
    #[arg(long, default_value_t = udpros::node::FecPolicy::default())]
    fec: udpros::node::FecPolicy,
    /// No link governor on the publisher's UDPROS links to udpros subscribers on other
    /// hosts (`AdvertiseOptions::governor` `None`; governed by default): the rows that
    /// show a link without one.
    #[arg(long)]
    no_governor: bool,
    /// Where a publisher writes its first governed link's state after each report it
    /// takes, a line each: `unix_ms rate_bit_s capacity_bit_s queue_ms reports overuses
    /// ignored` (what S10 reads after a step).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// A publisher's cap on each link's rate, in kbit/s (`AdvertiseOptions::max_rate`).
    #[arg(long)]
    max_rate_kbit: Option<f64>,
    /// A publisher's budget per subscriber host, in kbit/s, shared by its topics
    /// (`NodeOptions::max_rate_per_host`).
    #[arg(long)]
    max_rate_per_host_kbit: Option<f64>,
    /// A publisher also publishes a small topic of its own, `TOPIC:BYTES:HZ`, from the
    /// same node (S10's control topic beside the images, sharing one budget).
    #[arg(long)]
    control: Option<String>,
}

/// User and system CPU seconds of `who` (`RUSAGE_SELF`: this process; `RUSAGE_THREAD`:
/// the calling thread), from getrusage as every peer of the bench reads them.
fn cpu_seconds(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage only writes the struct it is given, which is plain old data.
    let r = unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut r);
        r
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (seconds(r.ru_utime), seconds(r.ru_stime))
}

pub fn run(cmd: BenchCommand) -> CliResult {
    let runtime = |multi_thread: bool| {
        match multi_thread {
            true => tokio::runtime::Runtime::new(),
            false => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
        }
        .map_err(|e| format!("cannot start the runtime: {e}"))
    };
    match cmd {
        BenchCommand::Peer(args) => {
            runtime(args.multi_thread)?.block_on(in_a_task(peer::run(args)))
        }
        BenchCommand::ServicePeer(args) => {
            runtime(false)?.block_on(in_a_task(services::peer(args)))
        }
        BenchCommand::Run(args) => runtime(true)?.block_on(harness::run(args)),
        // Plain blocking sockets, as the raw reference's threads: no runtime.
        BenchCommand::RawReceiver(args) => raw::receiver(&args),
    }
}

/// Runs a peer's work as a task, as a latency-critical node should. `block_on`'s own
/// future is woken through the I/O driver (an eventfd write and one more `epoll_wait`
/// per wake); a task is woken onto the run queue. A subscriber receiving in `block_on`
/// took 3.1-4.9 µs from the socket read to holding the message, in a task 1.2-1.8 µs.
async fn in_a_task(
    work: impl std::future::Future<Output = CliResult> + Send + 'static,
) -> CliResult {
    tokio::spawn(work)
        .await
        .unwrap_or_else(|e| Err(format!("the peer's task failed: {e}")))
}
