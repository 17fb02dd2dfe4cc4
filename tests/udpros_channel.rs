//! UDPROS fragmentation and reassembly through a simulated channel that drops, duplicates
//! and reorders datagrams: what comes out is always a message that went in, never twice,
//! and every message whose blocks all arrive comes out.

use bytes::Bytes;
use proptest::prelude::*;
use std::collections::HashSet;
use std::time::{Duration, Instant};
use udpros::wire::tcpros::frame;
use udpros::wire::udpros::{
    Event, Fragmenter, Reassembler, ReassemblerConfig, HEADER_LEN, MAX_UDP_PAYLOAD,
};

const MAX_MESSAGE: usize = 4 << 20;

/// A message body whose first bytes number it, so each delivery names its origin.
fn message(index: usize, len: usize) -> Vec<u8> {
    let mut body: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(7) ^ index as u8)
        .collect();
    let tag = (index as u64).to_le_bytes();
    let n = len.min(8);
    body[..n].copy_from_slice(&tag[..n]);
    body
}

fn message_len() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..100, 3 => 100usize..5000, 2 => 5000usize..200_000, 1 => 200_000usize..2_000_000]
}

#[derive(Debug, Clone)]
struct Channel {
    drop_per_mille: u32,
    dup_per_mille: u32,
    shuffle: bool,
    seed: u64,
}

fn channel() -> impl Strategy<Value = Channel> {
    (0u32..200, 0u32..200, any::<bool>(), any::<u64>()).prop_map(
        |(drop_per_mille, dup_per_mille, shuffle, seed)| Channel {
            drop_per_mille,
            dup_per_mille,
            shuffle,
            seed,
        },
    )
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn per_mille(&mut self, p: u32) -> bool {
        (self.next() % 1000) < u64::from(p)
    }
}

/// Passes one message's datagrams through the channel; returns what arrives and whether
/// every block arrived at least once.
fn transmit(datagrams: Vec<Bytes>, ch: &Channel, rng: &mut Rng) -> (Vec<Bytes>, bool) {
    let mut out = Vec::new();
    let mut complete = true;
    for d in datagrams {
        if rng.per_mille(ch.drop_per_mille) {
            complete = false;
            continue;
        }
        if rng.per_mille(ch.dup_per_mille) {
            out.push(d.clone());
        }
        out.push(d);
    }
    if ch.shuffle {
        for i in (1..out.len()).rev() {
            out.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
    }
    (out, complete)
}

fn datagram_size_for(len: usize, pick: usize) -> usize {
    let min = (len + 4).div_ceil(65535) + HEADER_LEN;
    min.max(HEADER_LEN + 1) + pick % (MAX_UDP_PAYLOAD - min.max(HEADER_LEN + 1) + 1)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn complete_messages_arrive_once_and_intact(
        lens in proptest::collection::vec(message_len(), 1..6),
        size_pick in any::<usize>(),
        small_datagrams in any::<bool>(),
        ch in channel(),
    ) {
        let largest = lens.iter().copied().max().unwrap_or(0);
        let size = if small_datagrams { 1500 } else { datagram_size_for(largest, size_pick) };
        let mut f = Fragmenter::new(3, size).expect("size");
        let mut r = Reassembler::new(ReassemblerConfig { max_message_size: MAX_MESSAGE, ..Default::default() });
        let mut rng = Rng(ch.seed);
        let mut now = Instant::now();
        let mut seen = HashSet::new();
        for (index, &len) in lens.iter().enumerate() {
            let body = message(index, len);
            let datagrams: Vec<Bytes> = f.fragment(&frame(&body)).expect("fits").map(|d| Bytes::from(d.to_vec())).collect();
            prop_assert!(datagrams.iter().all(|d| d.len() <= size));
            let (arriving, complete) = transmit(datagrams, &ch, &mut rng);
            let mut delivered = Vec::new();
            for d in arriving {
                now += Duration::from_micros(1);
                if let Some(Event::Message(m)) = r.handle(now, d) {
                    delivered.push(m);
                }
                prop_assert!(r.memory() <= 2 * MAX_MESSAGE + 8192);
            }
            for m in &delivered {
                prop_assert_eq!(&m[..], &body[..], "delivered bytes differ from message {}", index);
                prop_assert!(seen.insert(index), "message {} delivered twice", index);
            }
            if complete {
                prop_assert_eq!(delivered.len(), 1, "message {} ({} bytes) had every block", index, len);
            }
        }
        // Whatever is still incomplete expires and frees its memory.
        r.handle_timeout(now + r.config().timeout);
        prop_assert_eq!(r.memory(), 0);
    }

    /// Datagrams of several messages interleaved at random: no guarantee of delivery, but
    /// never corrupt, never twice, memory bounded.
    #[test]
    fn interleaved_messages_never_mix(
        lens in proptest::collection::vec(0usize..20_000, 1..12),
        ch in channel(),
    ) {
        let mut f = Fragmenter::new(3, 600).expect("size");
        let limit = 64 << 10;
        let mut r = Reassembler::new(ReassemblerConfig { max_message_size: limit, ..Default::default() });
        let mut rng = Rng(ch.seed);
        let mut all = Vec::new();
        let bodies: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &len)| message(i, len.max(8))).collect();
        for body in &bodies {
            let datagrams = f.fragment(&frame(body)).expect("fits").map(|d| Bytes::from(d.to_vec())).collect();
            all.extend(transmit(datagrams, &Channel { shuffle: false, ..ch.clone() }, &mut rng).0);
        }
        for i in (1..all.len()).rev() {
            all.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        let mut seen = HashSet::new();
        let now = Instant::now();
        for d in all {
            if let Some(Event::Message(m)) = r.handle(now, d) {
                let index = u64::from_le_bytes(m[..8].try_into().expect("tag")) as usize;
                prop_assert!(index < bodies.len());
                prop_assert_eq!(&m[..], &bodies[index][..]);
                prop_assert!(seen.insert(index), "message {} delivered twice", index);
            }
            prop_assert!(r.memory() <= 2 * limit + 8192);
        }
    }
}
