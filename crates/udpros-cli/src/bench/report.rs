//! The report: rows of figures per cell, the markdown tables (main and fan-out by arrival
//! rank), and the CSV.

use super::CliResult;
use std::collections::BTreeMap;
use std::path::Path;

/// One measured cell of the table.
#[derive(Debug, Clone, Default)]
pub(super) struct Row {
    /// Which sweep of `--repeat` it came from.
    pub(super) run: u32,
    pub(super) scenario: String,
    pub(super) pair: String,
    pub(super) transport: String,
    pub(super) sent: f64,
    pub(super) received: Vec<BTreeMap<String, f64>>,
    pub(super) publisher: BTreeMap<String, f64>,
    /// Each subscriber's latency (µs) of each message, by seq.
    pub(super) latencies: Vec<BTreeMap<u64, f64>>,
}

/// Reads a subscriber's `--dump` file.
pub(super) fn read_dump(path: &Path) -> BTreeMap<u64, f64> {
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
pub(super) fn arrival_ranks(per_subscriber: &[BTreeMap<u64, f64>]) -> Option<Vec<f64>> {
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

pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// A table cell: `x` with `digits` decimals, or `-` where nothing was measured.
pub(super) fn cell(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The p50 and p99 cells of sorted ages (ms, two decimals); `-` where none arrived.
pub(super) fn age_cells(sorted_ms: &[f64]) -> [String; 2] {
    let age = |p| (!sorted_ms.is_empty()).then(|| percentile(sorted_ms, p));
    [cell(age(0.5), 2), cell(age(0.99), 2)]
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    percentile(values, 0.5)
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
pub(super) fn cells(rows: &[Row]) -> Vec<Vec<&Row>> {
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
        // Over the publisher's sending time too: a subscriber that kept 1 % of a flood
        // received it in a short span, and its rate over that span is no delivered rate.
        let seconds = max_of(r, "seconds").max(r.publisher.get("seconds").copied().unwrap_or(0.0));
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

pub(super) fn print_table(rows: &[Row]) {
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

/// What a secure link costs (`--secure`): each sealed udpros → udpros cell beside the plain
/// one of the same scenario and transport, from the same sweeps. Latencies are the
/// medians over the runs, as in the main table; CPU is per message.
pub(super) fn print_secure_cost(rows: &[Row]) {
    println!();
    println!("Secure links: sealed udpros → udpros against plain, same sweeps");
    println!();
    println!("| scenario | transport | link | p50 µs | p99 µs | p50 vs plain | p99 vs plain | pub CPU µs/msg | sub CPU µs/msg |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|");
    let cells = cells(rows);
    let summary = |runs: &[&Row]| {
        let m = Medians::of(runs);
        (m.p50_us, m.p99_us, m.pub_cpu_us, m.sub_cpu_us)
    };
    for sealed in cells.iter().filter(|c| c[0].pair.contains("(sealed")) {
        let r = sealed[0];
        let Some(plain) = cells.iter().find(|c| {
            (&c[0].scenario, &c[0].transport, c[0].pair.as_str())
                == (&r.scenario, &r.transport, "udpros → udpros")
        }) else {
            continue;
        };
        let (p50, p99, pub_cpu, sub_cpu) = summary(plain);
        let mode = r
            .pair
            .trim_start_matches("udpros → udpros (sealed, ")
            .trim_end_matches(')');
        println!(
            "| {} | {} | plain | {p50:.0} | {p99:.0} | | | {pub_cpu:.1} | {sub_cpu:.1} |",
            r.scenario, r.transport
        );
        let (s50, s99, spub, ssub) = summary(sealed);
        let vs = |sealed: f64, plain: f64| {
            if plain > 0.0 {
                format!("{:+.0} %", 100.0 * (sealed - plain) / plain)
            } else {
                "-".into()
            }
        };
        println!(
            "| {} | {} | {mode} | {s50:.0} | {s99:.0} | {} | {} | {spub:.1} | {ssub:.1} |",
            r.scenario,
            r.transport,
            vs(s50, p50),
            vs(s99, p99)
        );
    }
}

/// The publisher's and a subscriber's CPU seconds per 100k messages of a cell, each the
/// median over its runs, as the main table shows them.
pub(super) fn cpu_per_100k(runs: &[&Row]) -> (f64, f64) {
    let m = Medians::of(runs);
    (m.pub_cpu_us / 10.0, m.sub_cpu_us / 10.0)
}

/// A cell's figures, each the median over its runs, as the main table shows them.
struct Medians {
    p50_us: f64,
    p99_us: f64,
    /// CPU µs per message (s per 100k messages is 10 µs per message).
    pub_cpu_us: f64,
    sub_cpu_us: f64,
}

impl Medians {
    fn of(runs: &[&Row]) -> Medians {
        let figures: Vec<Figures> = runs.iter().map(|r| Figures::of(r)).collect();
        let m = |f: fn(&Figures) -> f64| median(&mut figures.iter().map(f).collect::<Vec<_>>());
        Medians {
            p50_us: m(|f| f.p50_us),
            p99_us: m(|f| f.p99_us),
            pub_cpu_us: m(|f| f.pub_cpu_per_100k) * 10.0,
            sub_cpu_us: m(|f| f.sub_cpu_per_100k) * 10.0,
        }
    }
}

/// Issue 52's speed bars for one Python subscriber over UDPROS in one scenario, from the
/// same sweeps as its two references: its median within [`PYTHON_P50_BAR`] times the Rust
/// subscriber's (udpros → udpros, UDPROS), and its CPU per message below stock rospy's
/// TCPROS subscriber's.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PythonBar {
    pub(super) scenario: String,
    /// The pair, e.g. `udpros → rospy+udpros`.
    pub(super) pair: String,
    pub(super) p50_us: f64,
    pub(super) rust_p50_us: f64,
    /// CPU µs per message.
    pub(super) cpu_us: f64,
    pub(super) rospy_cpu_us: f64,
}

/// How many times the Rust subscriber's median a Python subscriber's may be (issue 52).
pub(super) const PYTHON_P50_BAR: f64 = 1.5;

impl PythonBar {
    pub(super) fn latency_met(&self) -> bool {
        self.p50_us <= PYTHON_P50_BAR * self.rust_p50_us
    }

    pub(super) fn cpu_met(&self) -> bool {
        self.cpu_us < self.rospy_cpu_us
    }
}

/// The bars of every scenario that ran a Python subscriber over UDPROS beside both
/// references; a scenario without one of them has none.
pub(super) fn python_bars(rows: &[Row]) -> Vec<PythonBar> {
    let cells = cells(rows);
    let find = |scenario: &str, pair: &str, transport: &str| {
        cells.iter().find(|c| {
            (
                c[0].scenario.as_str(),
                c[0].pair.as_str(),
                c[0].transport.as_str(),
            ) == (scenario, pair, transport)
        })
    };
    // A udpros publisher's Python subscriber (stock rospy has no UDPROS row).
    let python = |pair: &str| {
        pair.strip_prefix("udpros → ")
            .is_some_and(super::python::is_python)
    };
    cells
        .iter()
        .filter(|c| python(&c[0].pair) && c[0].transport == "UDP")
        .filter_map(|c| {
            let scenario = c[0].scenario.as_str();
            let rust = Medians::of(find(scenario, "udpros → udpros", "UDP")?);
            let rospy = Medians::of(find(scenario, "udpros → rospy", "TCP")?);
            let own = Medians::of(c);
            Some(PythonBar {
                scenario: scenario.to_string(),
                pair: c[0].pair.clone(),
                p50_us: own.p50_us,
                rust_p50_us: rust.p50_us,
                cpu_us: own.sub_cpu_us,
                rospy_cpu_us: rospy.sub_cpu_us,
            })
        })
        .collect()
}

/// The table of [`python_bars`], when there are any.
pub(super) fn print_python_bars(rows: &[Row]) {
    let bars = python_bars(rows);
    if bars.is_empty() {
        return;
    }
    println!();
    println!(
        "Python subscribers over UDPROS against issue 52's bars (same sweeps): p50 within {PYTHON_P50_BAR}x the Rust subscriber's, CPU per message below stock rospy's TCPROS subscriber's"
    );
    println!();
    println!("| scenario | pair | p50 µs | Rust p50 µs | ratio | latency bar | sub CPU µs/msg | stock rospy µs/msg | CPU bar |");
    println!("|---|---|---:|---:|---:|---|---:|---:|---|");
    let verdict = |met: bool| if met { "met" } else { "missed" };
    for b in &bars {
        let ratio = match b.rust_p50_us > 0.0 {
            true => format!("{:.2}x", b.p50_us / b.rust_p50_us),
            false => "-".into(),
        };
        println!(
            "| {} | {} | {:.0} | {:.0} | {ratio} | {} | {:.1} | {:.1} | {} |",
            b.scenario,
            b.pair,
            b.p50_us,
            b.rust_p50_us,
            verdict(b.latency_met()),
            b.cpu_us,
            b.rospy_cpu_us,
            verdict(b.cpu_met()),
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
/// then the same for raw UDP, the physical reference, as each of `raw` was laid out.
pub(super) fn print_fan_out(rows: &[Row], raw: &[(&str, Vec<BTreeMap<u64, f64>>)]) {
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
    for (layout, latencies) in raw {
        print_fan_out_row("raw UDP", layout, "UDP", latencies);
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

pub(super) fn write_csv(path: &Path, rows: &[Row]) -> CliResult {
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

    /// A cell's run: a subscriber with median `p50_us` that spent `cpu_s` over 100
    /// messages, of 100 sent.
    fn run(scenario: &str, pair: &str, transport: &str, p50_us: f64, cpu_s: f64) -> Row {
        let received = [("received", 100.0), ("p50_us", p50_us), ("user", cpu_s)];
        Row {
            scenario: scenario.into(),
            pair: pair.into(),
            transport: transport.into(),
            sent: 100.0,
            received: vec![received.iter().map(|(k, v)| (k.to_string(), *v)).collect()],
            ..Row::default()
        }
    }

    #[test]
    fn python_bars_compare_each_python_subscriber_with_the_same_sweeps_references() {
        let s3 = "S3 (100 kB at 100 Hz)";
        let rows = vec![
            run(s3, "udpros → udpros", "UDP", 34.0, 0.0032),
            run(s3, "udpros → udpros", "TCP", 19.0, 0.0024),
            run(s3, "udpros → python", "UDP", 53.0, 0.0077),
            run(s3, "udpros → python", "TCP", 33.0, 0.0051),
            run(s3, "udpros → rospy+udpros", "UDP", 50.0, 0.0060),
            run(s3, "udpros → rospy", "TCP", 47.0, 0.0067),
            // S1 has no stock rospy row: no bar.
            run("S1", "udpros → udpros", "UDP", 20.0, 0.001),
            run("S1", "udpros → python", "UDP", 25.0, 0.001),
        ];
        let bars = python_bars(&rows);
        assert_eq!(bars.len(), 2, "{bars:?}");
        let python = &bars[0];
        assert_eq!(python.pair, "udpros → python");
        assert_eq!((python.p50_us, python.rust_p50_us), (53.0, 34.0));
        // 0.0077 s over 100 messages: 77 µs each; stock rospy 67.
        assert!((python.cpu_us - 77.0).abs() < 1e-9, "{python:?}");
        assert!((python.rospy_cpu_us - 67.0).abs() < 1e-9, "{python:?}");
        assert!(!python.latency_met(), "53 > 1.5 x 34 = 51");
        assert!(!python.cpu_met());
        let rospy = &bars[1];
        assert_eq!(rospy.pair, "udpros → rospy+udpros");
        assert!(rospy.latency_met(), "50 <= 51");
        assert!(rospy.cpu_met(), "60 < 67");
    }

    #[test]
    fn python_bars_take_each_figure_as_the_median_over_the_runs() {
        let s3 = "S3";
        let mut rows = Vec::new();
        for (rust, python, rospy) in [
            (30.0, 40.0, 0.005),
            (40.0, 90.0, 0.007),
            (35.0, 50.0, 0.006),
        ] {
            rows.push(run(s3, "udpros → udpros", "UDP", rust, 0.003));
            rows.push(run(s3, "udpros → python", "UDP", python, 0.0055));
            rows.push(run(s3, "udpros → rospy", "TCP", 45.0, rospy));
        }
        let bars = python_bars(&rows);
        assert_eq!(bars.len(), 1);
        assert_eq!((bars[0].p50_us, bars[0].rust_p50_us), (50.0, 35.0));
        assert!((bars[0].rospy_cpu_us - 60.0).abs() < 1e-9, "{:?}", bars[0]);
        assert!(bars[0].latency_met() && bars[0].cpu_met());
    }

    #[test]
    fn arrival_ranks_need_two_subscribers_and_a_shared_message() {
        assert_eq!(arrival_ranks(&[subscriber(&[(0, 1.0)])]), None);
        let apart = [subscriber(&[(0, 1.0)]), subscriber(&[(1, 1.0)])];
        assert_eq!(arrival_ranks(&apart), None);
    }
}
