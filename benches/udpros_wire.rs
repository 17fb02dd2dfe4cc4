//! Fragmenting and reassembling UDPROS messages, beside a plain copy of the same bytes; and
//! serializing a message into its frame, beside allocating and copying the same bytes; and
//! a LaserScan's float arrays written and read as blocks; and forward error correction:
//! making a message's repair datagrams, checking its checksum, rebuilding lost blocks; and
//! a secure link's sealing and opening of a datagram.
//!
//! `cargo bench --bench udpros_wire` prints a table; `-- --quick` runs a few iterations only
//! (CI uses it so the benchmark cannot rot). Timings are printed, never asserted.

use bytes::Bytes;
use std::hint::black_box;
use std::time::{Duration, Instant};
use udpros::msgs::sensor_msgs::{CompressedImage, LaserScan};
use udpros::wire::tcpros::frame;
use udpros::wire::udpros::fec::{self, FecEncoder, Repair};
use udpros::wire::udpros::{Event, Fragmenter, Reassembler, ReassemblerConfig};

fn per_iteration(iterations: u32, mut f: impl FnMut()) -> Duration {
    f(); // warm up
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    start.elapsed() / iterations
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let datagram_size = 1500;
    println!("UDPROS fragment + reassemble at {datagram_size}-byte datagrams, beside one memcpy of the frame");
    println!();
    println!("| message | datagrams | memcpy | alloc + memcpy | write datagrams | reassemble | reassemble / memcpy | reassembly throughput |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for size in [64usize, 100_000, 1_000_000] {
        let iterations = if quick {
            3
        } else {
            (200_000_000 / (size as u32 + 1000)).clamp(20, 200_000)
        };
        let body: Vec<u8> = (0..size).map(|i| i as u8).collect();
        let frame = frame(&body);
        let mut fragmenter = Fragmenter::new(1, datagram_size).expect("size");
        let datagrams: Vec<Bytes> = fragmenter
            .fragment(&frame)
            .expect("fits")
            .map(|d| Bytes::from(d.to_vec()))
            .collect();

        let mut destination = vec![0u8; frame.len()];
        let copy = per_iteration(iterations, || {
            destination.copy_from_slice(black_box(&frame));
            black_box(&destination);
        });

        let alloc_copy = per_iteration(iterations, || {
            let mut v = Vec::with_capacity(frame.len());
            v.extend_from_slice(black_box(&frame));
            black_box(v);
        });

        // What a publisher does per message and link: the datagrams laid out back to back
        // in the link's send buffer (reused, as the link reuses it).
        let mut out = Vec::with_capacity(frame.len() + frame.len() / 100 + 64);
        let fragment = per_iteration(iterations, || {
            out.clear();
            fragmenter
                .write_datagrams(black_box(&frame), &mut out)
                .expect("fits");
            black_box(&out);
        });

        // A fresh reassembler per message, so the same datagrams (warm in cache, as the
        // memcpy source is) can be fed again without reading as duplicates.
        let now = Instant::now();
        let reassemble = per_iteration(iterations, || {
            let mut reassembler = Reassembler::new(ReassemblerConfig::default());
            let mut delivered = 0;
            for d in &datagrams {
                if let Some(Event::Message(m)) = reassembler.handle(now, d.clone()) {
                    delivered += m.len();
                }
            }
            assert_eq!(delivered, size);
        });
        let ratio = reassemble.as_secs_f64() / copy.as_secs_f64();
        let throughput = size as f64 / reassemble.as_secs_f64() / 1e9;
        println!(
            "| {size} B | {} | {copy:.2?} | {alloc_copy:.2?} | {fragment:.2?} | {reassemble:.2?} | {ratio:.1}x | {throughput:.2} GB/s |",
            datagrams.len()
        );
    }
    serialization(quick);
    numeric_arrays(quick);
    forward_error_correction(quick);
    sender_per_message(quick);
    sealing(quick);
}

/// What a secure link adds per datagram: sealing at the publisher, opening at the
/// subscriber, under each cipher (encrypted, or the tag alone in auth mode), beside a
/// memcpy.
fn sealing(quick: bool) {
    use udpros::wire::secure::datagram::{Opener, Sealer};
    use udpros::wire::secure::{Cipher, Mode};
    println!();
    println!("Secure links: one datagram sealed and opened");
    println!();
    println!(
        "This host would rather use {} (AES instructions: AES-256-GCM).",
        Cipher::of_this_host()
    );
    println!();
    println!("| datagram | cipher | mode | memcpy | seal | open | seal + open throughput |");
    println!("|---:|---|---|---:|---:|---:|---:|");
    for size in [64usize, 1472, 8972] {
        let plain: Vec<u8> = (0..size).map(|i| i as u8).collect();
        // `cargo test` runs this bench unoptimised, where a seal takes a thousand times
        // longer: a few iterations there, as under --quick.
        let iterations = if quick || cfg!(debug_assertions) {
            3
        } else {
            200_000
        };
        let mut destination = vec![0u8; size];
        let copy = per_iteration(iterations, || {
            destination.copy_from_slice(black_box(&plain));
            black_box(&destination);
        });
        let ciphers = [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305];
        for (cipher, mode) in ciphers
            .into_iter()
            .flat_map(|c| [Mode::Encrypt, Mode::Authenticate].map(|m| (c, m)))
        {
            let mut sealer = Sealer::new(&[7; 32], cipher, mode);
            let mut out = Vec::with_capacity(size + 64);
            let seal = per_iteration(iterations, || {
                out.clear();
                sealer.seal_into(black_box(&plain), &mut out);
                black_box(&out);
            });
            // Each opened once, where it lies, as a receiver takes them from its read
            // buffer.
            let mut sealer = Sealer::new(&[7; 32], cipher, mode);
            let mut sealed: Vec<Vec<u8>> = (0..=iterations).map(|_| sealer.seal(&plain)).collect();
            let mut opener = Opener::new(&[7; 32], cipher, mode);
            let mut next = sealed.iter_mut();
            let open = per_iteration(iterations, || {
                let datagram = next.next().expect("one per iteration");
                black_box(
                    opener
                        .open_in_place(black_box(datagram))
                        .expect("sealed here"),
                );
            });
            let throughput = size as f64 / (seal + open).as_secs_f64() / 1e9;
            println!("| {size} B | {cipher} | {mode} | {copy:.2?} | {seal:.2?} | {open:.2?} | {throughput:.2} GB/s |");
        }
    }
}

/// What a publisher's link does per 100 kB message, sends left out: lay out the datagrams
/// (and with FEC, make the repair and interleave it), as `UdpSender` does before the kernel
/// sees anything. FEC adaptive after a report of a clean link, and at 5 % loss.
fn sender_per_message(quick: bool) {
    use udpros::wire::header::ConnectionHeader;
    use udpros::wire::udpros::fec::FecPolicy;
    use udpros::wire::udpros::loss::Report;
    use udpros::wire::udpros::{UdpSender, UdpSenderConfig};
    println!();
    println!("A publisher's link per 100 kB message (1472-byte datagrams), before the sends");
    println!();
    println!("| FEC | datagrams | lay out |");
    println!("|---|---:|---:|");
    let frame = frame(&vec![7u8; 100_000]);
    let policy = FecPolicy::default();
    let link = policy.grant(&policy.ask(ConnectionHeader::new()), 1472);
    let report = |loss| Report {
        loss,
        long_loss: loss,
        long_datagrams: 30_000,
        mean_run: 1.0,
    };
    let cases = [
        ("off", None, None),
        ("adaptive, clean link", link, Some(report(0.0))),
        ("adaptive, 5 % loss", link, Some(report(0.05))),
    ];
    for (name, fec, reported) in cases {
        let datagram = match fec {
            Some(_) => 8 + fec::shard_size(1472).expect("room"),
            None => 1472,
        };
        let config = UdpSenderConfig {
            udpros_peer: true,
            route_mtu: None,
            segmenting: true,
            loopback: false,
            fec,
            governor: None,
            max_rate: None,
            secure: None,
        };
        let now = Instant::now();
        let mut tx = UdpSender::new(now, Fragmenter::new(1, datagram).expect("size"), config);
        if let Some(r) = reported {
            tx.handle_report(now, &r.encode(1, 1));
        }
        let mut datagrams = 0;
        let iterations = if quick { 3 } else { 5000 };
        // A fake clock a period on per message, so that pacing never holds a send.
        let mut at = now;
        let took = per_iteration(iterations, || {
            at += Duration::from_millis(100);
            tx.push_queued(at, std::slice::from_ref(&frame))
                .expect("fits");
            datagrams = 0;
            while tx.is_sending() {
                match tx.poll_transmit(at) {
                    Some(t) => {
                        datagrams += t.datagrams.len().div_ceil(t.segment_size);
                        tx.on_transmitted(at);
                    }
                    None => at = tx.poll_timeout().unwrap_or(at),
                }
            }
        });
        println!("| {name} | {datagrams} | {took:.2?} |");
    }
}

/// What FEC costs per message at 1472-byte datagrams: the publisher makes the repair
/// datagrams (checksum included), the subscriber checks the checksum of every message and
/// rebuilds only when blocks were lost (here as many as there are repair shards).
fn forward_error_correction(quick: bool) {
    println!();
    println!("Forward error correction, 1472-byte datagrams (1448-byte shards)");
    println!();
    println!("| message | blocks | repair | encode (repairs + CRC) | CRC of the body | rebuild |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let shard = fec::shard_size(1472).expect("room");
    for (size, ratio) in [
        (10_000usize, 0.25),
        (100_000, 0.1),
        (100_000, 0.25),
        (1_000_000, 0.1),
    ] {
        let iterations = if quick {
            3
        } else {
            (50_000_000 / size as u32).clamp(20, 5000)
        };
        let body: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
        let frame = frame(&body);
        let k = frame.len().div_ceil(shard);
        let r = (k as f64 * ratio).round() as u16;
        let mut encoder = FecEncoder::default();
        let mut out = Vec::new();
        let encode = per_iteration(iterations, || {
            out.clear();
            encoder.write(1, 1, black_box(&frame), shard, r, &mut out);
            black_box(&out);
        });
        let crc = per_iteration(iterations, || {
            black_box(fec::body_crc(black_box(&body)));
        });
        let repairs: Vec<(u16, Bytes)> = out
            .chunks(24 + shard)
            .map(|d| Repair::parse(Bytes::copy_from_slice(d), shard).expect("ours"))
            .map(|repair| (repair.index, repair.shard))
            .collect();
        let meta = Repair::parse(Bytes::copy_from_slice(&out[..24 + shard]), shard)
            .expect("ours")
            .meta;
        // The first `r` blocks lost, the rest held.
        let held: Vec<(u16, &[u8])> = frame
            .chunks(shard)
            .enumerate()
            .skip(usize::from(r))
            .map(|(i, b)| (i as u16, b))
            .collect();
        let rebuild = per_iteration(iterations.min(500), || {
            let restored = fec::rebuild(meta, shard, black_box(&held), &repairs).expect("enough");
            assert_eq!(restored.len(), usize::from(r));
        });
        println!("| {size} B | {k} | {r} | {encode:.2?} | {crc:.2?} | {rebuild:.2?} |");
    }
}

/// `to_frame` sizes the frame first (a walk that copies nothing), then writes it once.
fn serialization(quick: bool) {
    println!();
    println!("Serializing a sensor_msgs/CompressedImage into its frame (`wire::to_frame`)");
    println!();
    println!("| image data | size walk | to_frame | alloc + memcpy of the frame | to_frame / alloc + memcpy |");
    println!("|---:|---:|---:|---:|---:|");
    for size in [64usize, 10_000, 100_000, 1_000_000] {
        let iterations = if quick {
            3
        } else {
            (200_000_000 / (size as u32 + 1000)).clamp(20, 200_000)
        };
        let image = CompressedImage {
            format: "jpeg".into(),
            data: Bytes::from(vec![0x5a; size]),
            ..CompressedImage::default()
        };
        let walk = per_iteration(iterations, || {
            black_box(udpros::wire::serialized_len(black_box(&image)).expect("fits"));
        });
        let to_frame = per_iteration(iterations, || {
            black_box(udpros::wire::to_frame(black_box(&image)).expect("fits"));
        });
        let frame = udpros::wire::to_frame(&image).expect("fits");
        let alloc_copy = per_iteration(iterations, || {
            let mut v = Vec::with_capacity(frame.len());
            v.extend_from_slice(black_box(&frame));
            black_box(v);
        });
        let ratio = to_frame.as_secs_f64() / alloc_copy.as_secs_f64();
        println!("| {size} B | {walk:.2?} | {to_frame:.2?} | {alloc_copy:.2?} | {ratio:.2}x |");
    }
}

/// A LaserScan's float arrays: written and read as blocks (`wire::numeric_array`).
fn numeric_arrays(quick: bool) {
    println!();
    println!("A sensor_msgs/LaserScan of N ranges and N intensities: to_frame and decode, beside one memcpy of the frame");
    println!();
    println!("| N | frame | to_frame | per float | decode | per float | alloc + memcpy of the frame | to_frame / memcpy |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for n in [1_000usize, 10_000, 250_000] {
        let iterations = if quick {
            3
        } else {
            (50_000_000 / n as u32).clamp(20, 50_000)
        };
        let scan = LaserScan {
            ranges: (0..n).map(|i| i as f32 * 0.001).collect(),
            intensities: (0..n).map(|i| (i % 255) as f32).collect(),
            ..LaserScan::default()
        };
        let to_frame = per_iteration(iterations, || {
            black_box(udpros::wire::to_frame(black_box(&scan)).expect("fits"));
        });
        let frame = udpros::wire::to_frame(&scan).expect("fits");
        let body = frame.slice(4..);
        let decode = per_iteration(iterations, || {
            black_box(udpros::wire::from_bytes::<LaserScan>(black_box(&body)).expect("decodes"));
        });
        let alloc_copy = per_iteration(iterations, || {
            let mut v = Vec::with_capacity(frame.len());
            v.extend_from_slice(black_box(&frame));
            black_box(v);
        });
        let floats = 2.0 * n as f64;
        println!(
            "| {n} | {} B | {to_frame:.2?} | {:.2} ns | {decode:.2?} | {:.2} ns | {alloc_copy:.2?} | {:.2}x |",
            frame.len(),
            to_frame.as_secs_f64() * 1e9 / floats,
            decode.as_secs_f64() * 1e9 / floats,
            to_frame.as_secs_f64() / alloc_copy.as_secs_f64()
        );
    }
}
