//! The physical reference for the scenarios: plain UDP on loopback between threads with
//! blocking sockets, no ROS and no runtime. What no ROS library can beat on this machine:
//! datagrams per second one way, the round trip of one datagram, one datagram's one-way
//! latency at S1's pace (each a wake of a sleeping receiver, stamped as the bench's peers
//! stamp), and how far apart one sender's datagrams reach several receivers (the fan-out
//! of S5).

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::sync::Arc;
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
    let mut one_way: Vec<f64> = fan_out(1, size, paced, interval)?
        .pop()
        .map(|latencies| latencies.into_values().collect())
        .unwrap_or_default();
    if one_way.is_empty() {
        return Err(std::io::Error::other("no paced datagram arrived"));
    }
    one_way.sort_by(f64::total_cmp);
    Ok(RawUdp {
        size,
        sent,
        received,
        per_second,
        rtt_p50_us: pick(&rtts, 0.5),
        rtt_p99_us: pick(&rtts, 0.99),
        one_way_p50_us: pick(&one_way, 0.5),
        one_way_p99_us: pick(&one_way, 0.99),
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
/// publisher's links do. Returns each receiver's one-way latency (µs) by message number.
pub fn fan_out(
    receivers: usize,
    size: usize,
    count: u64,
    interval: Duration,
) -> std::io::Result<Vec<BTreeMap<u64, f64>>> {
    // A datagram carries its number and when it left, as nanoseconds since `origin`.
    const STAMP: usize = 16;
    let size = size.clamp(STAMP, 65_000);
    let origin = Arc::new(Instant::now());
    let mut links = Vec::new();
    let mut threads = Vec::new();
    for _ in 0..receivers {
        let (tx, rx) = pair()?;
        links.push(tx);
        let origin = origin.clone();
        threads.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; size + 1];
            let mut latencies = BTreeMap::new();
            // Ends on the last message or on a read timeout (a lost last datagram).
            while let Ok(n) = rx.recv(&mut buf) {
                let arrived = origin.elapsed().as_nanos() as f64;
                let Some((seq, sent)) = buf.get(..n).and_then(read_stamp) else {
                    continue;
                };
                latencies.insert(seq, (arrived - sent as f64) / 1e3);
                if seq + 1 >= count {
                    break;
                }
            }
            latencies
        }));
    }
    let mut datagram = vec![0x5au8; size];
    let mut next = Instant::now();
    for seq in 0..count {
        next += interval;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        datagram[..8].copy_from_slice(&seq.to_le_bytes());
        let sent = origin.elapsed().as_nanos() as u64;
        datagram[8..STAMP].copy_from_slice(&sent.to_le_bytes());
        for link in &links {
            let _ = link.send(&datagram);
        }
    }
    threads
        .into_iter()
        .map(|t| {
            t.join()
                .map_err(|_| std::io::Error::other("receiver thread panicked"))
        })
        .collect()
}

fn read_stamp(datagram: &[u8]) -> Option<(u64, u64)> {
    let seq = u64::from_le_bytes(datagram.get(..8)?.try_into().ok()?);
    let sent = u64::from_le_bytes(datagram.get(8..16)?.try_into().ok()?);
    Some((seq, sent))
}

pub fn print_table(rows: &[RawUdp]) {
    println!("\nThe physical reference: raw UDP on loopback, two threads, blocking sockets.\n");
    println!(
        "| datagram | delivered | datagrams/s | MB/s | round trip p50 µs | round trip p99 µs | one way at {ONE_WAY_RATE:.0} Hz p50 µs | p99 µs |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} B | {:.1} % | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            r.size,
            100.0 * r.received as f64 / r.sent.max(1) as f64,
            r.per_second,
            r.per_second * r.size as f64 / 1e6,
            r.rtt_p50_us,
            r.rtt_p99_us,
            r.one_way_p50_us,
            r.one_way_p99_us
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fan_out_reaches_every_receiver_with_every_message_stamped() {
        let receivers = fan_out(3, 1000, 20, Duration::from_millis(1)).expect("loopback");
        assert_eq!(receivers.len(), 3);
        for latencies in &receivers {
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
