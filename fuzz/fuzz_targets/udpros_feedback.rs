//! A governed UDPROS link's send side fed reports of any shape between its sends; a record
//! may ask for its bytes to become a FEEDBACK datagram with a correct CRC (samples naming
//! the link's own recent datagrams), so that the fuzzer reaches the governor rather than
//! stopping at the checksum. Whatever the reports say, the pacing rate stays within the
//! governor's limits and the link keeps sending.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant};
use udpros::wire::udpros::feedback::{Feedback, Sample};
use udpros::wire::udpros::governor::GovernorConfig;
use udpros::wire::udpros::{Fragmenter, UdpSender, UdpSenderConfig};

fuzz_target!(|data: &[u8]| {
    let mut now = Instant::now();
    let limits = GovernorConfig::default();
    let config = UdpSenderConfig {
        udpros_peer: true,
        route_mtu: None,
        segmenting: true,
        loopback: false,
        fec: None,
        governor: Some(limits),
        max_rate: None,
        secure: None,
    };
    let mut tx = UdpSender::new(now, Fragmenter::new(7, 1472).unwrap(), config);
    let frame = Bytes::from(vec![0u8; 20_000]);
    let mut rest = data;
    let mut sequence = 0u32;
    // Records: [len: u8][step_ms: u8][flags: u8][len bytes]. Flags bit 0: send a message
    // first; bit 1: make the bytes a sealed report of samples (id, block, arrival, bytes
    // taken from them).
    while let [len, step, flags, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        now += Duration::from_millis(u64::from(*step % 128));
        let bytes = &tail[..len];
        if flags & 1 == 1 && !tx.is_sending() {
            let _ = tx.push_queued(now, std::slice::from_ref(&frame));
        }
        while let Some(_t) = tx.poll_transmit(now) {
            tx.on_transmitted(now);
        }
        let datagram = if flags & 2 == 2 {
            sequence = sequence.wrapping_add(u32::from(bytes.first().copied().unwrap_or(1)));
            let samples = bytes
                .chunks_exact(7)
                .map(|c| Sample {
                    message_id: c[0],
                    block: u16::from(c[1]) % 16,
                    arrival_us: u32::from_le_bytes([c[2], c[3], c[4], 0]) << (c[5] % 12),
                    bytes: u32::from(c[6]) << (c[5] % 24),
                })
                .take(8)
                .collect();
            let report = Feedback {
                sequence,
                datagrams: 0,
                bytes: 0,
                samples,
            };
            let mut out = Vec::new();
            report.encode(7, &mut out);
            out
        } else {
            bytes.to_vec()
        };
        tx.handle_report(now, &datagram);
        let rate = tx.governor().expect("governed").rate;
        assert!(
            (limits.min_rate..=limits.max_rate).contains(&rate),
            "rate {rate}"
        );
        rest = &tail[len..];
    }
});
