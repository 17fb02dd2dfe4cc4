//! The receive side of a UDPROS link that agreed on FEC, fed datagrams of any shape; a
//! record may ask for its bytes to become a repair datagram with a correct CRC, so that the
//! fuzzer reaches the metadata checks, the repair store and the decoder rather than
//! stopping at the checksum. Whatever arrives, the receiver's memory stays within its bound,
//! nothing delivered exceeds the message size limit, and everything is let go at the end.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use udpros::wire::link::AllowedSources;
use udpros::wire::udpros::fec::{seal, FEC_HEADER_LEN};
use udpros::wire::udpros::{
    Opcode, ReassemblerConfig, ReceiverEvent, UdpReceiver, UdpReceiverConfig, HEADER_LEN,
};

/// A small shard, so that a few hundred bytes of input make a message of many blocks.
const SHARD: usize = 64;
const LIMIT: usize = 1 << 14;

fuzz_target!(|data: &[u8]| {
    let from: SocketAddr = "10.0.0.2:4000".parse().unwrap();
    let mut now = Instant::now();
    let config = UdpReceiverConfig {
        reassembler: ReassemblerConfig {
            max_message_size: LIMIT,
            timeout: Duration::from_millis(50),
            connection_id: Some(7),
            block_payload: Some(SHARD),
        },
        sources: AllowedSources::new(vec![from.ip()], Some(4000)),
        expects_heartbeats: true,
        fec: true,
        feedback: true,
        secure: None,
    };
    let mut rx = UdpReceiver::new(now, config);
    let mut rest = data;
    // Records: [len: u8][step_ms: u8][flags: u8][len bytes]. Flags bit 0: make it a repair
    // datagram of connection 7, sealed.
    while let [len, step, flags, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        now += Duration::from_millis(u64::from(*step % 64));
        let mut datagram = tail[..len].to_vec();
        if flags & 1 == 1 && datagram.len() >= HEADER_LEN + FEC_HEADER_LEN {
            datagram[..4].copy_from_slice(&7u32.to_le_bytes());
            datagram[4] = Opcode::Repair as u8;
            seal(&mut datagram);
        }
        rx.handle(now, from, Bytes::from(datagram));
        while let Some(report) = rx.poll_transmit(now) {
            assert!(report.len() <= 128, "a report of {} bytes", report.len());
        }
        while let Some(event) = rx.poll_event() {
            if let ReceiverEvent::Message(body) = event {
                assert!(body.len() + 4 <= LIMIT);
            }
        }
        // The message in reassembly, blocks waiting for their DATA0, and repair shards
        // up to the message size limit.
        assert!(rx.memory() <= 4 * LIMIT + 8192, "memory {}", rx.memory());
        rest = &tail[len..];
    }
    let later = now + Duration::from_secs(1);
    rx.handle_timeout(later);
    assert!(rx.memory() <= LIMIT, "memory {} after every deadline", rx.memory());
});
