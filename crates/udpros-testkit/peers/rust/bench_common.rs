//! What the Rust bench peers share, included by each with `#[path]` (they are separate
//! crates, one per ROS library, so that each builds with its own dependencies): the
//! command line and output of `roscpp_bench.cpp`.

use std::time::Instant;

/// The value after `--name` on the command line, or `fallback`.
pub fn opt(args: &[String], name: &str, fallback: &str) -> String {
    args.windows(2)
        .find(|w| w[0] == name)
        .map_or_else(|| fallback.to_string(), |w| w[1].clone())
}

/// CPU seconds (user, system) and peak RSS (VmHWM, kB) of this process, as
/// `user=.. sys=.. rss_kb=..`.
pub fn usage() -> String {
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

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[(p * (sorted.len() - 1) as f64 + 0.5) as usize]
}

/// A subscriber's end: writes `--dump` (a `seq latency_us` line per message) if asked, and
/// prints the `SUB received=.. lost=.. seconds=.. p50_us=.. p99_us=.. max_us=..` line.
/// `latencies` are (seq, µs) in arrival order; `count` is what the publisher sends.
pub fn report_subscriber(
    args: &[String],
    count: i64,
    latencies: &[(i64, f64)],
    first: Option<Instant>,
    last: Option<Instant>,
) {
    let dump = opt(args, "--dump", "");
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
}
