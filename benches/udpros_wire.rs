//! Fragmenting and reassembling UDPROS messages, beside a plain copy of the same bytes; and
//! serializing a message into its frame, beside allocating and copying the same bytes; and
//! a LaserScan's float arrays written and read as blocks.
//!
//! `cargo bench --bench udpros_wire` prints a table; `-- --quick` runs a few iterations only
//! (CI uses it so the benchmark cannot rot). Timings are printed, never asserted.

use bytes::Bytes;
use std::hint::black_box;
use std::time::{Duration, Instant};
use udpros::msgs::sensor_msgs::{CompressedImage, LaserScan};
use udpros::wire::tcpros::frame;
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
