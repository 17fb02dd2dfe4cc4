//! Forward error correction on a UDPROS link between udpros peers, sender to receiver over
//! simulated paths (see `util`): large messages survive loss that loses most of them
//! without it, bursts included; what arrives is whole, once and in order; a block of an
//! older message with the same id never makes it into a delivered one; forged repair
//! datagrams cost bounded memory; a lossless link carries next to nothing more.

mod util;

use bytes::Bytes;
use proptest::prelude::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use udpros_core::udpros::fec::{FecEncoder, FecPolicy, RepairRatio};
use udpros_core::udpros::{ReceiverEvent, UdpReceiver, UdpSender, HEADER_LEN};
use util::{
    body, check_body, data_datagram, publisher_addr, receiver_from, receiver_with, sender_for,
    settle, Pair, PathConfig, Rng,
};

const DATAGRAM: usize = 1472;

fn fixed(ratio: f64) -> FecPolicy {
    FecPolicy::Fixed(RepairRatio::new(ratio).unwrap())
}

/// Sends `count` messages of `size` bytes every `period` over `path`; returns the pair and
/// the ids delivered, each checked whole.
fn stream(
    path: PathConfig,
    seed: u64,
    fec: FecPolicy,
    count: usize,
    size: usize,
    period: Duration,
) -> (Pair, Vec<u64>) {
    let mut pair = Pair::with_fec(path, seed, DATAGRAM, fec);
    for id in 0..count {
        pair.send(&body(id as u64, size));
        pair.run_for(period);
    }
    let ids = pair.finish();
    (pair, ids)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// 100 kB messages (about 70 datagrams) over 5 % loss, duplication and reordering, a
    /// quarter of repair: all but a rare one arrive (without FEC, 3 % would), whole, once,
    /// in order, and the link stays up.
    #[test]
    fn large_messages_are_rebuilt_over_a_lossy_path(seed in any::<u64>()) {
        let count = 60;
        let (pair, ids) = stream(
            PathConfig::lossy(), seed, fixed(0.25), count, 100_000, Duration::from_millis(100),
        );
        prop_assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        prop_assert!(ids.len() >= count - 1, "{} of {count}", ids.len());
        prop_assert_eq!(pair.dead(), None);
        let stats = pair.receiver.stats();
        prop_assert!(stats.rebuilt > 0, "{stats:?}");
        prop_assert_eq!(stats.corrupt, 0);
        prop_assert_eq!(stats.messages, ids.len() as u64);
    }
}

/// The same path without FEC loses most large messages, but the link is not torn down:
/// most of each message's datagrams arrive, which is loss, not a path that cannot carry
/// them.
#[test]
fn without_fec_heavy_loss_loses_messages_but_not_the_link() {
    let count = 100;
    let (pair, ids) = stream(
        PathConfig::losing(0.05, 1.0),
        7,
        FecPolicy::Off,
        count,
        100_000,
        Duration::from_millis(100),
    );
    assert!(ids.len() < count / 4, "{} of {count}", ids.len());
    assert_eq!(pair.dead(), None, "{:?}", pair.receiver.stats());
    // With FEC on the same path, every one arrives.
    let (_, ids) = stream(
        PathConfig::losing(0.05, 1.0),
        7,
        fixed(0.25),
        count,
        100_000,
        Duration::from_millis(100),
    );
    assert!(ids.len() >= count - 1, "{} of {count}", ids.len());
}

/// 1 MB messages (about 720 datagrams) at 5 % loss with a tenth of repair, and 100 kB ones
/// through bursts of loss (runs of 3 on average, 5 % overall) with a quarter.
#[test]
fn megabyte_messages_and_bursts_of_loss_are_rebuilt() {
    let (pair, ids) = stream(
        PathConfig::losing(0.05, 1.0),
        11,
        fixed(0.1),
        20,
        1 << 20,
        Duration::from_millis(100),
    );
    assert_eq!(ids.len(), 20, "{:?}", pair.receiver.stats());
    let (pair, ids) = stream(
        PathConfig::losing(0.05, 3.0),
        13,
        fixed(0.25),
        200,
        100_000,
        Duration::from_millis(100),
    );
    let loss = pair.path.lost as f64 / pair.path.offered as f64;
    assert!((0.03..0.07).contains(&loss), "the path lost {loss}");
    assert!(ids.len() >= 198, "{} of 200 at {loss} loss", ids.len());
}

/// Wire bytes per payload byte against FEC off: a lossless link with no repair carries one
/// 24-byte checksum datagram per large message (and slightly smaller data datagrams).
#[test]
fn checksums_alone_cost_under_two_percent_and_repair_what_it_says() {
    let wire = |fec| {
        let (pair, ids) = stream(
            PathConfig::clean(),
            3,
            fec,
            20,
            100_000,
            Duration::from_millis(100),
        );
        assert_eq!(ids.len(), 20);
        pair.path.offered_bytes as f64
    };
    let off = wire(FecPolicy::Off);
    let checksum_only = wire(fixed(0.0)) / off;
    assert!(checksum_only < 1.02, "{checksum_only}");
    let tenth = wire(fixed(0.1)) / off;
    assert!((1.08..1.13).contains(&tenth), "{tenth}");
}

/// Everything a publisher sends for `frame`, as separate datagrams.
fn datagrams_of(tx: &mut UdpSender, frame: &Bytes, now: Instant) -> Vec<Bytes> {
    assert_eq!(tx.push_queued(now, std::slice::from_ref(frame)), Ok(1));
    let mut out = Vec::new();
    let mut at = now;
    while tx.is_sending() {
        match tx.poll_transmit(at) {
            Some(t) => {
                out.extend(
                    t.datagrams
                        .chunks(t.segment_size)
                        .map(Bytes::copy_from_slice),
                );
                tx.on_transmitted(at);
            }
            None => at = tx.poll_timeout().unwrap(),
        }
    }
    out
}

fn frame_of(body: &[u8]) -> Bytes {
    let mut frame = (body.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(body);
    Bytes::from(frame)
}

fn is_data(datagram: &[u8], index: u16) -> bool {
    datagram[4] == 1 && u16::from_le_bytes([datagram[6], datagram[7]]) == index
}

/// UDPROS ids cycle through 255: a block of the message that used an id before, delayed
/// until the id comes back, is taken into the new message. Without FEC it is delivered
/// corrupted (roscpp does the same); with FEC the checksum catches it, and the real block,
/// arriving after it, is put in its place, or the message is dropped and counted.
#[test]
fn a_stale_block_with_a_recycled_id_never_reaches_the_subscriber() {
    for fec in [FecPolicy::Off, fixed(0.0)] {
        let now = Instant::now();
        let mut tx = sender_for(now, &settle(fec, DATAGRAM, None));
        let mut rx = receiver_with(now, 7, DATAGRAM, fec.enabled());
        let mut delivered = Vec::new();
        let mut stale = None;
        // Messages 0, 255 and 510 share the id 1.
        for n in 0..=510u64 {
            let mut sent = datagrams_of(&mut tx, &frame_of(&body(n, 10_000)), now);
            if n == 255 || n == 510 {
                // Block 3 of the message before with this id arrives first: at 255 the
                // real one follows it, at 510 the real one is lost.
                if let Some(stale) = stale.take() {
                    rx.handle(now, publisher_addr(), stale);
                }
                if n == 510 {
                    sent.retain(|d| !is_data(d, 3));
                }
            }
            if n % 255 == 0 {
                stale = sent.iter().find(|d| is_data(d, 3)).cloned();
            }
            for d in sent {
                rx.handle(now, publisher_addr(), d);
            }
            while let Some(event) = rx.poll_event() {
                if let ReceiverEvent::Message(body) = event {
                    delivered.push(body);
                }
            }
        }
        let corrupted = delivered.iter().filter(|b| check_body(b).is_none()).count();
        let stats = rx.stats();
        if fec.enabled() {
            assert_eq!(corrupted, 0, "{stats:?}");
            assert_eq!(stats.corrupt, 1, "the message whose real block was lost");
            assert_eq!(delivered.len(), 510);
        } else {
            assert_eq!(corrupted, 2, "the hole FEC closes");
        }
    }
}

/// On loopback, a message assembled from its own blocks, each arriving once, is delivered
/// without its checksum computed: nothing there can put another message's block in it. A
/// message one of whose blocks came twice, different, and a rebuilt one are still checked,
/// and elsewhere every message is.
#[test]
fn on_loopback_only_a_message_something_could_have_mixed_is_checked() {
    let loopback: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    for from in [publisher_addr(), loopback] {
        let now = Instant::now();
        let fec = fixed(0.25);
        let terms = settle(fec, DATAGRAM, None);
        let mut tx = sender_for(now, &terms);
        let mut rx = receiver_from(now, &terms, fec, from);
        let mut delivered = Vec::new();
        let mut deliver = |rx: &mut UdpReceiver, datagrams: Vec<Bytes>| {
            for d in datagrams {
                rx.handle(now, from, d);
            }
            while let Some(event) = rx.poll_event() {
                if let ReceiverEvent::Message(body) = event {
                    delivered.push(body);
                }
            }
        };
        let flip = |d: &Bytes| {
            let mut d = d.to_vec();
            let last = d.len() - 1;
            d[last] ^= 0xff;
            Bytes::from(d)
        };
        // 0: a block altered on its way (what loopback cannot do).
        let mut sent = datagrams_of(&mut tx, &frame_of(&body(0, 10_000)), now);
        let block = sent.iter().position(|d| is_data(d, 3)).unwrap();
        sent[block] = flip(&sent[block]);
        deliver(&mut rx, sent);
        // 1: an altered copy of a block first, the real one after it.
        let mut sent = datagrams_of(&mut tx, &frame_of(&body(1, 10_000)), now);
        let block = sent.iter().position(|d| is_data(d, 3)).unwrap();
        sent.insert(block, flip(&sent[block]));
        deliver(&mut rx, sent);
        // 2: a block lost and rebuilt, from an altered one beside it.
        let mut sent = datagrams_of(&mut tx, &frame_of(&body(2, 10_000)), now);
        sent.retain(|d| !is_data(d, 3));
        let block = sent.iter().position(|d| is_data(d, 4)).unwrap();
        sent[block] = flip(&sent[block]);
        deliver(&mut rx, sent);

        let stats = rx.stats();
        let ids: Vec<_> = delivered.iter().map(|b| check_body(b)).collect();
        if from.ip().is_loopback() {
            assert_eq!(ids, [None, Some(1)], "{stats:?}");
            assert_eq!(stats.corrupt, 1, "the rebuilt message: {stats:?}");
        } else {
            assert_eq!(ids, [Some(1)], "{stats:?}");
            assert_eq!(stats.corrupt, 2, "{stats:?}");
        }
        assert_eq!(stats.rebuilt, 1, "{stats:?}");
    }
}

/// Forged repair datagrams (checksums right, geometry lying or not) for the link's ids,
/// megabytes of them between real messages: memory stays within the link's bound, no
/// message is delivered corrupted, and the real ones keep arriving.
#[test]
fn forged_repairs_cost_bounded_memory_and_corrupt_nothing() {
    let now = Instant::now();
    let fec = fixed(0.1);
    let shard = data_datagram(DATAGRAM, true) - HEADER_LEN;
    let mut tx = sender_for(now, &settle(fec, DATAGRAM, None));
    let mut rx = receiver_with(now, 7, DATAGRAM, true);
    let mut rng = Rng::new(99);
    let mut forger = FecEncoder::default();
    let mut forged_bytes = 0usize;
    let mut most_memory = 0;
    let mut delivered = Vec::new();
    for id in 0..200u64 {
        let mut sent = datagrams_of(&mut tx, &frame_of(&body(id, 50_000)), now);
        // Lose a block now and then, so that repair (and forged repair) matters.
        if id % 3 == 0 {
            sent.retain(|d| !is_data(d, 5));
        }
        // Forged: any id, sizes up to 400 kB and once 8 MB, as much repair as the message
        // has blocks.
        for forgery in 0..3 {
            let len = match (id, forgery) {
                (100, 0) => 8 << 20,
                _ => 4 + rng.below(400_000) as usize,
            };
            let frame: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            let blocks = len.div_ceil(shard) as u16;
            let mut out = Vec::new();
            forger.write(7, rng.below(256) as u8, &frame, shard, blocks, &mut out);
            forged_bytes += out.len();
            let size = HEADER_LEN + 16 + shard;
            for d in out.chunks(size) {
                rx.handle(now, publisher_addr(), Bytes::copy_from_slice(d));
            }
        }
        for d in sent {
            rx.handle(now, publisher_addr(), d);
        }
        most_memory = most_memory.max(rx.memory());
        while let Some(event) = rx.poll_event() {
            if let ReceiverEvent::Message(body) = event {
                delivered.push(body);
            }
        }
    }
    assert!(forged_bytes > 100 << 20, "{forged_bytes}");
    // The 8 MB claim is held at most as large as it is, the rest never adds up.
    assert!(most_memory < 12 << 20, "{most_memory}");
    assert!(delivered.iter().all(|b| check_body(b).is_some()));
    assert!(delivered.len() >= 120, "{} of 200", delivered.len());
}

/// A message's checksum belongs to it alone: 255 messages later its id comes back on a
/// message of one block, which has no checksum, and which must not be held to the old one.
#[test]
fn a_checksum_never_outlives_its_message() {
    let mut pair = Pair::with_fec(PathConfig::clean(), 5, DATAGRAM, FecPolicy::default());
    let sizes: Vec<usize> = std::iter::once(20_000).chain([64; 300]).collect();
    for (id, &size) in sizes.iter().enumerate() {
        pair.send(&body(id as u64, size));
        pair.run_for(Duration::from_millis(1));
    }
    pair.run_for(Duration::from_secs(1));
    let ids: Vec<u64> = pair.delivered().filter_map(|b| check_body(b)).collect();
    assert_eq!(ids, (0..sizes.len() as u64).collect::<Vec<_>>());
    assert_eq!(pair.receiver.stats().corrupt, 0);
}

/// Adaptive repair, the default between udpros peers: the subscriber reports the loss it
/// sees, the publisher repairs just enough for one message in a thousand. The bars:
/// at 5 % loss at least 99.9 % of 100 kB messages and of 1 MB ones; in bursts (runs of 3,
/// 5 % overall) at least 99 %; on a clean link at most 2 % more bytes than FEC off, at 0.1 %
/// loss at most 5 % more, at 5 % at most 30 % more.
#[test]
fn adaptive_repair_meets_the_delivery_and_overhead_bars() {
    let adaptive = FecPolicy::default();
    let period = Duration::from_millis(100);
    let run = |loss, burst, size, count| {
        stream(
            PathConfig::losing(loss, burst),
            21,
            adaptive,
            count,
            size,
            period,
        )
    };
    let (pair, ids) = run(0.05, 1.0, 100_000, 300);
    assert!(
        ids.len() >= 299,
        "{} of 300: {:?}",
        ids.len(),
        pair.receiver.stats()
    );
    assert!(pair.reports > 10, "{} reports", pair.reports);
    let loss = pair.sender.reported().expect("reported").loss;
    assert!((0.03..0.07).contains(&loss), "reported {loss}");
    let (pair, ids) = run(0.05, 1.0, 1 << 20, 30);
    assert_eq!(ids.len(), 30, "{:?}", pair.receiver.stats());
    let (pair, ids) = run(0.05, 3.0, 100_000, 300);
    let missing: Vec<u64> = (0..300).filter(|i| !ids.contains(i)).collect();
    assert!(
        missing.len() <= 3,
        "lost {missing:?} in bursts: {:?}",
        pair.receiver.stats()
    );

    let wire = |fec, loss| {
        let path = PathConfig::losing(loss, 1.0);
        let (pair, _) = stream(path, 23, fec, 150, 100_000, period);
        pair.path.offered_bytes as f64
    };
    for (loss, bar) in [(0.0, 1.02), (0.001, 1.05), (0.05, 1.3)] {
        let ratio = wire(adaptive, loss) / wire(FecPolicy::Off, loss);
        println!("adaptive FEC at {loss} loss: {ratio:.3} bytes per byte of FEC off");
        assert!(ratio <= bar, "{ratio} at {loss} loss, bar {bar}");
    }
}

/// Reports are the subscriber's word, and anyone who can send from its port can forge one:
/// a claim of 1000 % loss in runs of a billion, or megabytes of random reports, cost a link
/// at most as many repair datagrams as data datagrams, and a few microseconds per message.
#[test]
fn forged_reports_cost_at_most_one_repair_per_block() {
    use udpros_core::udpros::loss::{Report, REPORT_LEN};
    let now = Instant::now();
    let data = data_datagram(DATAGRAM, true);
    let mut tx = sender_for(now, &settle(FecPolicy::default(), DATAGRAM, None));
    let worst = Report {
        loss: 10.0,
        long_loss: 10.0,
        long_datagrams: u32::MAX,
        mean_run: 1e9,
    };
    assert!(tx.handle_report(now, &worst.encode(7, 1)));
    let frame = frame_of(&body(1, 100_000));
    let blocks = frame.len().div_ceil(data - HEADER_LEN);
    let sent = datagrams_of(&mut tx, &frame, now);
    assert_eq!(tx.repairs_sent() as usize, blocks, "capped at k");
    assert_eq!(sent.len(), 2 * blocks);
    // A flood of random reports: each read, none trusted beyond the caps.
    let mut rng = Rng::new(5);
    let mut taken = 0;
    for _ in 0..100_000 {
        let mut forged = [0u8; REPORT_LEN];
        forged.iter_mut().for_each(|b| *b = rng.below(256) as u8);
        forged[..4].copy_from_slice(&7u32.to_le_bytes());
        forged[4] = 5;
        taken += usize::from(tx.handle_report(now, &forged));
    }
    assert_eq!(taken, 0, "random bytes never pass the CRC");
    let started = Instant::now();
    let huge = frame_of(&body(2, 20 << 20));
    let sent = datagrams_of(&mut tx, &huge, now);
    let k = huge.len().div_ceil(data - HEADER_LEN);
    assert!(
        sent.len() <= 2 * k,
        "{} datagrams for {k} blocks",
        sent.len()
    );
    assert!(started.elapsed() < Duration::from_secs(30), "bounded work");
}

/// A lossless message is never decoded (repair that arrives while its last blocks are on
/// their way is not used); small messages are copied while the link has not shown itself
/// clean, and not once it has; over a lossy link they are copied, and arrive.
///
/// 400 large messages: the adaptive repair falls from the prior's to none after about 40,
/// and the ids of those last repaired come back 255 messages later. The shards held for
/// them once rebuilt message 298 from a stale shard (the checksum caught it: lost, not
/// corrupt), in the test and in bench S8 alike.
#[test]
fn clean_links_decode_nothing_and_small_messages_are_copied_only_when_lossy() {
    let period = Duration::from_millis(100);
    let adaptive = FecPolicy::default();
    let (pair, ids) = stream(PathConfig::clean(), 3, adaptive, 400, 100_000, period);
    let stats = pair.receiver.stats();
    assert_eq!(ids, (0..400).collect::<Vec<u64>>(), "{stats:?}");
    assert_eq!((stats.rebuilt, stats.corrupt), (0, 0), "{stats:?}");
    assert_eq!(pair.sender.last_plan(), Some((70, 0)), "no repair left");
    // A clean link: the prior's copies fade within about a thousand datagrams (see
    // ONE_BLOCK_COPIES), then small messages cost what they cost without FEC.
    let mut clean = Pair::with_fec(PathConfig::clean(), 9, DATAGRAM, adaptive);
    let send = |pair: &mut Pair, from: u64, count: u64| {
        for id in from..from + count {
            pair.send(&body(id, 1_000));
            pair.run_for(Duration::from_millis(10));
        }
    };
    send(&mut clean, 0, 1_500);
    let copied = clean.sender.repairs_sent();
    assert!((1..1_500).contains(&copied), "{copied} copies");
    let before = clean.path.offered_bytes;
    send(&mut clean, 1_500, 500);
    assert_eq!(clean.sender.repairs_sent(), copied, "none once shown clean");
    let mut bare = Pair::with_fec(PathConfig::clean(), 9, DATAGRAM, FecPolicy::Off);
    send(&mut bare, 0, 500);
    assert_eq!(clean.path.offered_bytes - before, bare.path.offered_bytes);
    assert_eq!(clean.finish().len(), 2_000);
    let small = |fec, loss| {
        let path = PathConfig::losing(loss, 1.0);
        stream(path, 9, fec, 600, 1_000, Duration::from_millis(10))
    };
    let (with, with_ids) = small(adaptive, 0.05);
    let (_, without_ids) = small(FecPolicy::Off, 0.05);
    assert!(with_ids.len() >= 599, "{} of 600 copied", with_ids.len());
    assert!(
        without_ids.len() < 590,
        "{} of 600 without",
        without_ids.len()
    );
    assert!(with.receiver.stats().rebuilt > 0);
}

/// A control topic (64 bytes at 50 Hz) over 2 % random loss, the issue 48 bar of 99.9 %:
/// copied from the first message (the prior) and twice while the loss is reported, it
/// loses none of 1,000 on any of 20 paths (with one copy and no prior, 8 of 20 paths lost
/// one or two, most before the first report that showed a loss).
#[test]
fn control_messages_arrive_through_two_percent_loss() {
    for seed in 0..20 {
        let path = PathConfig::losing(0.02, 1.0);
        let period = Duration::from_millis(20);
        let (pair, ids) = stream(path, seed * 2, FecPolicy::default(), 1_000, 64, period);
        assert_eq!(ids.len(), 1_000, "seed {seed}: {:?}", pair.receiver.stats());
    }
}

/// On a link of 64 kB datagrams (loopback), where each data datagram is a send of its own,
/// a lossless message's checksum leaves in one send with its last block, which goes first:
/// every message is still checked (none delivered unverified), none is decoded, and the
/// subscriber sees no loss and no runs in the blocks that came out of order.
#[test]
fn with_64_kb_datagrams_the_checksum_rides_with_the_last_block() {
    let mut pair = Pair::with_fec(PathConfig::clean(), 4, 65_507, FecPolicy::default());
    let sizes = [100_000, 1_000_000, 130_990, 65_480, 70_000];
    for id in 0..200u64 {
        pair.send(&body(id, sizes[id as usize % sizes.len()]));
        pair.run_for(Duration::from_millis(20));
    }
    let ids = pair.finish();
    let stats = pair.receiver.stats();
    assert_eq!(ids, (0..200).collect::<Vec<u64>>(), "{stats:?}");
    assert_eq!(
        (stats.unverified, stats.corrupt, stats.rebuilt),
        (0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(stats.loss_ppm, 0, "{stats:?}");
    let (_, repairs) = pair.sender.last_plan().unwrap();
    assert_eq!(repairs, 0, "the prior has faded on a clean link");
}

/// A message whose last data block is lost, with one repair datagram (sent ahead of the
/// data): nothing tells the subscriber that the data is over but the pause after it, and it rebuilds the message then, not when
/// the next message comes 100 ms later.
#[test]
fn a_message_missing_its_last_block_is_rebuilt_after_a_short_pause() {
    use udpros_core::udpros::{DatagramHeader, Opcode, FEC_QUIET};
    // 100 kB is 70 blocks here: one repair at 1.5 %.
    let mut pair = Pair::with_fec(PathConfig::clean(), 1, DATAGRAM, fixed(0.015));
    pair.path.drop_when = Some(|d: &[u8]| {
        DatagramHeader::parse(d).is_some_and(|h| h.opcode == Opcode::DataN && h.block == 69)
    });
    let mut sent_at = Vec::new();
    for id in 0..10u64 {
        sent_at.push(pair.now);
        pair.send(&body(id, 100_000));
        pair.run_for(Duration::from_millis(100));
    }
    let arrivals: Vec<(u64, Instant)> = pair
        .events
        .iter()
        .filter_map(|(at, e)| match e {
            ReceiverEvent::Message(body) => Some((check_body(body)?, *at)),
            _ => None,
        })
        .collect();
    assert_eq!(arrivals.len(), 10, "{:?}", pair.receiver.stats());
    for (id, at) in arrivals {
        let age = at - sent_at[id as usize];
        // The path's delay, the pause, and nothing like the next message's 100 ms.
        assert!(
            age < Duration::from_millis(1) + FEC_QUIET * 3,
            "message {id}: {age:?}"
        );
    }
    assert_eq!(pair.receiver.stats().rebuilt, 10);
}
