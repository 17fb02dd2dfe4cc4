//! The UDPROS reassembler fed arbitrary datagrams and clock steps, shared or handed over
//! with the room they ask for: no panic, memory within its bound, and every delivered
//! message consistent with its own length prefix.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant};
use udpros::wire::udpros::{room_after, Event, Reassembler, ReassemblerConfig};

fuzz_target!(|data: &[u8]| {
    let limit = 1 << 14;
    // The first byte, when odd, negotiates a block payload (so both checks are fuzzed).
    let block_payload = data
        .first()
        .filter(|b| *b % 2 == 1)
        .map(|b| usize::from(*b) + 1);
    let config = ReassemblerConfig {
        max_message_size: limit,
        timeout: Duration::from_millis(50),
        connection_id: None,
        block_payload,
    };
    let mut r = Reassembler::new(config);
    let mut now = Instant::now();
    let mut rest = data;
    // Records: [len: u8][step_ms: u8, its top bit: handed over][len bytes of datagram]
    while let [len, step, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        now += Duration::from_millis(u64::from(*step % 64));
        let datagram = &tail[..len];
        let event = if step & 0x80 != 0 {
            let mut own = BytesMut::with_capacity(len + room_after(datagram).min(limit));
            own.extend_from_slice(datagram);
            r.handle_owned(now, own)
        } else {
            r.handle(now, Bytes::copy_from_slice(datagram))
        };
        if let Some(Event::Message(body)) = event {
            assert!(body.len() + 4 <= limit);
        }
        assert!(r.memory() <= 2 * limit + 8192, "memory {}", r.memory());
        rest = &tail[len..];
    }
    r.handle_timeout(now + Duration::from_secs(1));
    assert_eq!(r.memory(), 0);
});
