//! Properties of a UDPROS link as a whole, sender to [`UdpReceiver`], over simulated
//! paths (see `util`): what arrives is whole and arrives once, a silent publisher is
//! declared dead in time, and hostile datagrams cannot make the receiver hold more than
//! its bounds.

mod util;

use bytes::Bytes;
use proptest::prelude::*;
use std::time::Duration;
use udpros_core::link::{Dead, LIVENESS_CHECK, LIVENESS_TIMEOUT};
use udpros_core::udpros::{DatagramHeader, Opcode, MAX_STASH_BYTES};
use util::{body, check_body, publisher_addr, Pair, PathConfig, Rng};

/// Sends `sizes` as messages 10 ms apart over `path` and returns the ids delivered.
fn deliver(path: PathConfig, seed: u64, sizes: &[usize]) -> (Pair, Vec<u64>) {
    let mut pair = Pair::new(path, seed, 1500);
    for (id, &size) in sizes.iter().enumerate() {
        pair.send(&body(id as u64, size));
        pair.run_for(Duration::from_millis(10));
    }
    let ids = pair.finish();
    (pair, ids)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// 5 % loss, duplication and reordering: every message that arrives is whole, none
    /// arrives twice, none arrives after a newer one (a subscriber wants the freshest), and
    /// the link stays up.
    #[test]
    fn over_a_lossy_path_messages_arrive_whole_once_and_in_order(
        seed in any::<u64>(),
        sizes in prop::collection::vec(1usize..20_000, 1..120),
    ) {
        let (pair, ids) = deliver(PathConfig::lossy(), seed, &sizes);
        prop_assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        prop_assert_eq!(pair.dead(), None);
        let stats = pair.receiver.stats();
        prop_assert_eq!(stats.messages, ids.len() as u64);
        prop_assert!(stats.messages + stats.lost() <= sizes.len() as u64, "{stats:?} of {}", sizes.len());
    }

    /// A publisher that stops sending (no data, no heartbeat) is declared dead once
    /// [`LIVENESS_TIMEOUT`] has passed since the last datagram arrived, and within one
    /// check of it.
    #[test]
    fn a_silent_publisher_is_declared_dead_within_the_bound(
        seed in any::<u64>(),
        messages in 0usize..50,
        idle_ms in 0u64..5000,
    ) {
        let mut pair = Pair::new(PathConfig::clean(), seed, 1500);
        for id in 0..messages {
            pair.send(&body(id as u64, 100));
            pair.run_for(Duration::from_millis(10));
        }
        // Heartbeats keep an idle link alive ...
        pair.run_for(Duration::from_millis(idle_ms));
        prop_assert_eq!(pair.dead(), None);
        // ... and their end kills it.
        pair.heartbeats = false;
        pair.run_for(LIVENESS_TIMEOUT + LIVENESS_CHECK * 2);
        let (at, why) = pair.dead().expect("declared dead");
        prop_assert_eq!(why, Dead::Silent);
        let silent_for = at - pair.last_arrival.unwrap_or(pair.started);
        prop_assert!(silent_for > LIVENESS_TIMEOUT, "{:?}", silent_for);
        prop_assert!(silent_for <= LIVENESS_TIMEOUT + LIVENESS_CHECK, "{:?}", silent_for);
    }

    /// Datagrams with the right connection id and source but hostile contents (any
    /// opcode, message id, block number and length): the receiver never holds more than
    /// its stash bound plus one message in reassembly, and a genuine message after the
    /// flood still arrives.
    #[test]
    fn hostile_datagrams_leave_the_receiver_bounded_and_working(seed in any::<u64>()) {
        let mut pair = Pair::new(PathConfig::clean(), seed, 1500);
        let mut rng = Rng::new(seed);
        let mut peak = 0;
        let mut bytes = 0usize;
        for _ in 0..4000 {
            let header = DatagramHeader {
                connection_id: 7,
                opcode: [Opcode::Data0, Opcode::DataN, Opcode::Ping, Opcode::Err][rng.below(4) as usize],
                message_id: rng.below(256) as u8,
                block: rng.below(65536) as u16,
            };
            let mut datagram = header.encode().to_vec();
            let len = if rng.chance(0.8) { 1492 } else { rng.below(1493) as usize };
            datagram.extend((0..len).map(|_| rng.next_u64() as u8));
            bytes += datagram.len();
            pair.receiver.handle(pair.now, publisher_addr(), Bytes::from(datagram));
            peak = peak.max(pair.receiver.memory());
            while pair.receiver.poll_event().is_some() {}
        }
        prop_assert!(bytes > 4_000_000);
        let bound = MAX_STASH_BYTES + 2 * 65_536 * 1492 / 64;
        prop_assert!(peak <= bound, "held {peak} bytes of {bytes}");
        pair.run_for(Duration::from_secs(1));
        let before = pair.delivered().count();
        pair.send(&body(1_000_000, 5000));
        pair.run_for(Duration::from_millis(50));
        let after: Vec<_> = pair.delivered().skip(before).filter_map(|b| check_body(b)).collect();
        prop_assert_eq!(after, vec![1_000_000]);
    }
}

/// Small messages over 5 % loss, duplication and reordering: most arrive (each is one
/// datagram, lost with the datagram or when a newer message overtakes it).
#[test]
fn over_a_lossy_path_most_single_datagram_messages_arrive() {
    let sizes = vec![200; 2000];
    let (pair, ids) = deliver(PathConfig::lossy(), 42, &sizes);
    let fraction = ids.len() as f64 / sizes.len() as f64;
    assert!(fraction > 0.85, "{fraction}");
    assert!(pair.receiver.stats().duplicates > 0, "the path duplicated");
}

/// A 4 MB message (2800 datagrams) over a clean path arrives whole.
#[test]
fn a_multi_megabyte_message_arrives_whole() {
    let (_, ids) = deliver(PathConfig::clean(), 1, &[4 << 20, 100]);
    assert_eq!(ids, [0, 1]);
}
