//! The physical reference for the scenarios: plain UDP on loopback between threads with
//! blocking sockets, no ROS and no runtime. What no ROS library can beat on this machine:
//! datagrams per second one way, the round trip of one datagram, one datagram's one-way
//! latency at S1's pace (each a wake of a sleeping receiver, stamped as the bench's peers
//! stamp), and how far apart one sender's datagrams reach several receivers (the fan-out
//! of S5).

use super::CliResult;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::UdpSocket;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// One datagram size's figures.
#[derive(Debug, Clone)]
pub struct RawUdp {
    pub size: usize,
    pub sent: u64,
    pub received: u64,
    pub per_second: f64,
    pub rtt_p50_us: f64,
    pub rtt_p99_us: f64,
    /// One way at [`ONE_WAY_RATE`] Hz, the receiver blocked in `recv` between datagrams.
    pub one_way_p50_us: f64,
    pub one_way_p99_us: f64,
    /// CPU seconds per 100k datagrams of the paced one-way run: the sender thread (its
    /// sleep to each datagram's time, the send and the kernel's loopback delivery, which
    /// runs in the sender's context) and the receiver thread. The floor under the table's
    /// S1 CPU columns: what a paced publisher and its subscriber cost with no ROS at all.
    pub one_way_sender_cpu_per_100k: f64,
    pub one_way_receiver_cpu_per_100k: f64,
}

/// What [`fan_out`] measured.
#[derive(Debug, Clone, Default)]
pub struct FanOut {
    /// Each receiver's one-way latency (µs) by message number.
    pub latencies: Vec<BTreeMap<u64, f64>>,
    /// CPU seconds of the sender thread over its paced loop.
    pub sender_cpu: f64,
    /// CPU seconds of each receiver thread, from its start to its last datagram.
    pub receiver_cpu: Vec<f64>,
}

/// The pace of the one-way reference: S1's.
pub const ONE_WAY_RATE: f64 = 1000.0;

/// The datagram sizes the scenarios put on the wire: a `CompressedImage` with 64 B of
/// data (97 B serialized with its length, plus the 8-byte UDPROS header), and a fragment
/// of a large one at the default 1500-byte datagram.
pub const SIZES: [usize; 2] = [105, 1500];

pub fn measure(size: usize, quick: bool) -> std::io::Result<RawUdp> {
    let (count, round_trips) = if quick {
        (2_000, 100)
    } else {
        (200_000, 5_000)
    };
    let (sent, received, per_second) = flood(size, count)?;
    let mut rtts = round_trip(size, round_trips)?;
    rtts.sort_by(f64::total_cmp);
    let pick = |sorted: &[f64], p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
    let paced = if quick { 200 } else { 5_000 };
    let interval = Duration::from_secs_f64(1.0 / ONE_WAY_RATE);
    let paced_run = fan_out(1, size, paced, interval)?;
    let mut one_way: Vec<f64> = paced_run
        .latencies
        .iter()
        .flat_map(|latencies| latencies.values().copied())
        .collect();
    if one_way.is_empty() {
        return Err(std::io::Error::other("no paced datagram arrived"));
    }
    one_way.sort_by(f64::total_cmp);
    let per_100k = |cpu: f64, n: usize| cpu * 100_000.0 / n as f64;
    let receiver_cpu = paced_run.receiver_cpu.iter().sum::<f64>();
    Ok(RawUdp {
        size,
        sent,
        received,
        per_second,
        rtt_p50_us: pick(&rtts, 0.5),
        rtt_p99_us: pick(&rtts, 0.99),
        one_way_p50_us: pick(&one_way, 0.5),
        one_way_p99_us: pick(&one_way, 0.99),
        one_way_sender_cpu_per_100k: per_100k(paced_run.sender_cpu, paced as usize),
        one_way_receiver_cpu_per_100k: per_100k(receiver_cpu, one_way.len()),
    })
}

fn pair() -> std::io::Result<(UdpSocket, UdpSocket)> {
    let a = UdpSocket::bind("127.0.0.1:0")?;
    let b = UdpSocket::bind("127.0.0.1:0")?;
    a.connect(b.local_addr()?)?;
    b.connect(a.local_addr()?)?;
    // Both ends wait at most this long: a lost datagram ends a measurement, never hangs it.
    a.set_read_timeout(Some(Duration::from_millis(500)))?;
    b.set_read_timeout(Some(Duration::from_millis(500)))?;
    Ok((a, b))
}

/// Sends `count` datagrams as fast as one thread can; the rate is what arrived, over the
/// time between the first and the last arrival.
fn flood(size: usize, count: u64) -> std::io::Result<(u64, u64, f64)> {
    let (tx, rx) = pair()?;
    let receiver = std::thread::spawn(move || {
        let mut buf = vec![0u8; size.max(1) + 1];
        let (mut received, mut first, mut last) = (0u64, None, Instant::now());
        while received < count {
            if rx.recv(&mut buf).is_err() {
                break;
            }
            last = Instant::now();
            first.get_or_insert(last);
            received += 1;
        }
        (
            received,
            first.map_or(0.0, |f| last.duration_since(f).as_secs_f64()),
        )
    });
    let datagram = vec![0x5au8; size];
    let mut sent = 0;
    for _ in 0..count {
        if tx.send(&datagram).is_ok() {
            sent += 1;
        }
    }
    let (received, seconds) = receiver
        .join()
        .map_err(|_| std::io::Error::other("receiver thread panicked"))?;
    let rate = if seconds > 0.0 && received > 1 {
        (received - 1) as f64 / seconds
    } else {
        0.0
    };
    Ok((sent, received, rate))
}

/// One datagram there and back, `count` times, in µs.
fn round_trip(size: usize, count: usize) -> std::io::Result<Vec<f64>> {
    let (a, b) = pair()?;
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; size.max(1) + 1];
        for _ in 0..count {
            match b.recv(&mut buf) {
                Ok(n) => {
                    let _ = b.send(&buf[..n]);
                }
                Err(_) => break,
            }
        }
    });
    let datagram = vec![0x5au8; size];
    let mut buf = vec![0u8; size.max(1) + 1];
    let mut rtts = Vec::with_capacity(count);
    for _ in 0..count {
        let start = Instant::now();
        a.send(&datagram)?;
        if a.recv(&mut buf).is_err() {
            break; // lost: the echo thread ends on its own timeout
        }
        rtts.push(start.elapsed().as_secs_f64() * 1e6);
        // As the scenarios do: a quiet moment between messages, so each one wakes the peer.
        std::thread::sleep(Duration::from_micros(200));
    }
    let _ = echo.join();
    if rtts.is_empty() {
        return Err(std::io::Error::other("no round trip completed"));
    }
    Ok(rtts)
}

/// One sender, `receivers` threads each on its own socket: every `interval` the sender
/// sends one `size`-byte datagram to each receiver in turn, over connected sockets as a
/// publisher's links do.
pub fn fan_out(
    receivers: usize,
    size: usize,
    count: u64,
    interval: Duration,
) -> std::io::Result<FanOut> {
    let mut links = Vec::new();
    let mut threads = Vec::new();
    for _ in 0..receivers {
        let (tx, rx) = pair()?;
        links.push(tx);
        threads.push(std::thread::spawn(move || {
            (receive_stamped(&rx, size, count), thread_cpu())
        }));
    }
    let mut measured = FanOut {
        sender_cpu: send_paced(&links, size, count, interval),
        ..FanOut::default()
    };
    for t in threads {
        let (latencies, cpu) = t
            .join()
            .map_err(|_| std::io::Error::other("receiver thread panicked"))?;
        measured.latencies.push(latencies?);
        measured.receiver_cpu.push(cpu);
    }
    Ok(measured)
}

/// A datagram of the paced references carries its number and when it left (`stamp_ns`).
const STAMP: usize = 16;

/// Connected sockets to receivers on loopback `ports`, one per receiver, as a publisher's
/// links are: the sender side of a fan-out whose receivers are other processes.
pub fn links_to(ports: &[u16]) -> std::io::Result<Vec<UdpSocket>> {
    ports
        .iter()
        .map(|&port| {
            let link = UdpSocket::bind("127.0.0.1:0")?;
            link.connect(("127.0.0.1", port))?;
            Ok(link)
        })
        .collect()
}

/// Every `interval`, one `size`-byte stamped datagram to each link in turn, `count` times,
/// sleeping to each message's time as the bench's publishers do. Returns the CPU seconds
/// this thread spent on it.
pub fn send_paced(links: &[UdpSocket], size: usize, count: u64, interval: Duration) -> f64 {
    let mut datagram = vec![0x5au8; size.clamp(STAMP, 65_000)];
    let cpu_before = thread_cpu();
    let mut next = Instant::now();
    for seq in 0..count {
        next += interval;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        datagram[..8].copy_from_slice(&seq.to_le_bytes());
        datagram[8..STAMP].copy_from_slice(&stamp_ns().to_le_bytes());
        for link in links {
            let _ = link.send(&datagram);
        }
    }
    thread_cpu() - cpu_before
}

/// Receives [`send_paced`]'s datagrams until the last message's, or until none has come for
/// half a second (a lost last datagram); each message's one-way latency (µs) by number.
/// The first datagram may take longer: the sender starts after every receiver is ready.
pub fn receive_stamped(
    rx: &UdpSocket,
    size: usize,
    count: u64,
) -> std::io::Result<BTreeMap<u64, f64>> {
    let mut buf = vec![0u8; size.clamp(STAMP, 65_000) + 1];
    let mut latencies = BTreeMap::new();
    rx.set_read_timeout(Some(Duration::from_secs(30)))?;
    while let Ok(n) = rx.recv(&mut buf) {
        let arrived = stamp_ns();
        if latencies.is_empty() {
            rx.set_read_timeout(Some(Duration::from_millis(500)))?;
        }
        let Some((seq, sent)) = buf.get(..n).and_then(read_stamp) else {
            continue;
        };
        latencies.insert(seq, arrived.saturating_sub(sent) as f64 / 1e3);
        if seq + 1 >= count {
            break;
        }
    }
    Ok(latencies)
}

/// `bench raw-receiver`'s arguments.
#[derive(clap::Args)]
pub struct ReceiverArgs {
    /// The datagram size the sender sends.
    #[arg(long)]
    size: usize,
    /// Messages the sender sends.
    #[arg(long)]
    count: u64,
    /// Where to write `seq latency_us` lines, as the bench's peers dump theirs.
    #[arg(long)]
    dump: PathBuf,
}

/// A fan-out receiver in a process of its own: binds a loopback socket, says
/// `READY port=N`, receives [`send_paced`]'s datagrams, dumps their latencies and says
/// `RAW received=N`.
pub fn receiver(args: &ReceiverArgs) -> CliResult {
    let rx = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = rx.local_addr().map_err(|e| e.to_string())?.port();
    println!("READY port={port}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let latencies = receive_stamped(&rx, args.size, args.count).map_err(|e| e.to_string())?;
    let lines: String = latencies
        .iter()
        .map(|(seq, us)| format!("{seq} {us:.1}\n"))
        .collect();
    std::fs::write(&args.dump, lines).map_err(|e| format!("{}: {e}", args.dump.display()))?;
    println!("RAW received={}", latencies.len());
    Ok(())
}

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process of the machine, so a
/// receiver in another process reads the sender's stamps.
fn stamp_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CPU seconds (user and system) the calling thread has used.
fn thread_cpu() -> f64 {
    let (user, sys) = super::cpu_seconds(libc::RUSAGE_THREAD);
    user + sys
}

fn read_stamp(datagram: &[u8]) -> Option<(u64, u64)> {
    let seq = u64::from_le_bytes(datagram.get(..8)?.try_into().ok()?);
    let sent = u64::from_le_bytes(datagram.get(8..16)?.try_into().ok()?);
    Some((seq, sent))
}

pub fn print_table(rows: &[RawUdp]) {
    println!("\nThe physical reference: raw UDP on loopback, two threads, blocking sockets.\n");
    println!(
        "| datagram | delivered | datagrams/s | MB/s | round trip p50 µs | round trip p99 µs | one way at {ONE_WAY_RATE:.0} Hz p50 µs | p99 µs | sender CPU s/100k | receiver CPU s/100k |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} B | {:.1} % | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} |",
            r.size,
            100.0 * r.received as f64 / r.sent.max(1) as f64,
            r.per_second,
            r.per_second * r.size as f64 / 1e6,
            r.rtt_p50_us,
            r.rtt_p99_us,
            r.one_way_p50_us,
            r.one_way_p99_us,
            r.one_way_sender_cpu_per_100k,
            r.one_way_receiver_cpu_per_100k
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fan_out_reaches_every_receiver_with_every_message_stamped() {
        let measured = fan_out(3, 1000, 20, Duration::from_millis(1)).expect("loopback");
        assert_eq!(measured.latencies.len(), 3);
        assert_eq!(measured.receiver_cpu.len(), 3);
        // 20 sends and sleeps cannot take a second of CPU, and take some.
        assert!(measured.sender_cpu > 0.0 && measured.sender_cpu < 1.0);
        for latencies in &measured.latencies {
            assert_eq!(
                latencies.keys().copied().collect::<Vec<_>>(),
                (0..20).collect::<Vec<_>>()
            );
            assert!(
                latencies.values().all(|&us| us > 0.0 && us < 1e6),
                "{latencies:?}"
            );
        }
    }
}
