//! How much of a link's datagrams are lost, measured by the subscriber and reported to a
//! udpros publisher on an FEC link, and how much repair that loss calls for.
//!
//! The subscriber tallies each message's datagrams: how many it should have had (its block
//! count from DATA0, plus its repair datagrams from the FEC metadata) against how many
//! arrived, closed when a newer message begins. Tallies feed two windows: one that halves
//! its weight every [`HALF_LIFE`] datagrams, which follows a link that worsens within a
//! second of traffic, and one ten times as long, which tells a clean link (no loss in tens
//! of thousands of datagrams) from one that was merely lucky for a few messages.
//!
//! A REPORT datagram (opcode 5, udpros FEC links only) goes back to the publisher on the
//! link's own path, from the socket the subscriber reads on to the port the publisher sends
//! from, at most every [`REPORT_INTERVAL`] while messages arrive:
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..8 | UDPROS header: connection id, opcode 5, the newest message id tallied, block 0 |
//! | 8..12 | datagram loss over the short window, in parts per million, `u32` |
//! | 12..16 | datagram loss over the long window, in parts per million, `u32` |
//! | 16..20 | datagrams the long window holds (its weight), `u32` |
//! | 20..24 | the mean length of a run of lost data blocks, in thousandths, `u32` |
//! | 24..28 | CRC-32 of bytes 0..24 |
//!
//! The publisher picks, per message of `k` blocks, the fewest repair datagrams `r` for
//! which losing more than `r` of the `k + r` is less likely than its target
//! ([`repairs_for_target`]), for a loss a little worse than reported, and for losses that
//! come in runs (a radio's fade, a tether's thruster noise) as if each run were one loss of
//! a bigger datagram: `b × repairs_for_target(k / b)` for runs of `b`.

use super::{message_id_distance, DatagramHeader, Opcode, HEADER_LEN};
use std::time::{Duration, Instant};

/// Datagrams after which a tally weighs half as much in the loss estimate.
pub const HALF_LIFE: f64 = 2000.0;
/// The shortest time between two reports of one link.
pub const REPORT_INTERVAL: Duration = Duration::from_millis(200);
/// Bytes of a REPORT datagram.
pub const REPORT_LEN: usize = HEADER_LEN + 20;
/// The longest mean run of losses a report may claim.
pub const MAX_REPORTED_RUN: f64 = 16.0;
/// The worst loss a report may claim: beyond it a link carries more repair than data and
/// still fails, and a report claiming more is taken as this much.
pub const MAX_REPORTED_LOSS: f64 = 0.5;

/// The datagrams of one message seen so far.
#[derive(Debug, Clone, Copy)]
struct Tally {
    id: u8,
    /// Datagrams the message was sent as, once known (from DATA0 or its FEC metadata).
    expected: Option<u32>,
    /// The highest block index seen: a lower bound on the block count when DATA0 and
    /// every metadata datagram were lost.
    highest: u32,
    received: u32,
    /// The message's block count, once known.
    blocks: Option<u32>,
}

impl Tally {
    fn new(id: u8) -> Tally {
        Tally {
            id,
            expected: None,
            highest: 0,
            received: 0,
            blocks: None,
        }
    }
}

/// Which data blocks of the message being tallied arrived, one bit each: runs of loss are
/// read from it when the message closes, whatever order the blocks came in (an FEC link
/// may send a message's last block first). At most 1024 words: a block index is a `u16`.
#[derive(Debug, Clone, Default)]
struct BlocksSeen {
    words: Vec<u64>,
}

impl BlocksSeen {
    fn insert(&mut self, index: u32) {
        let word = index as usize / 64;
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << (index % 64);
    }

    /// The runs of blocks missing among the first `blocks`, and how many blocks they hold;
    /// then forgets every block, for the next message.
    fn take_gaps(&mut self, blocks: u32) -> (u32, u32) {
        let (mut runs, mut missing) = (0, 0);
        // Whether the block before the word's first was seen (none is before block 0).
        let mut previous_seen = true;
        let blocks = blocks as usize;
        for (i, &word) in self.words.iter().enumerate().take(blocks.div_ceil(64)) {
            let valid = match blocks - i * 64 {
                64.. => u64::MAX,
                n => (1 << n) - 1,
            };
            let unseen = !word & valid;
            missing += unseen.count_ones();
            // A run starts at a missing block whose predecessor arrived.
            let predecessor_seen = (word << 1) | u64::from(previous_seen);
            runs += (unseen & predecessor_seen).count_ones();
            previous_seen = word >> 63 == 1;
        }
        // The blocks past the last word written were all missing: one run.
        let tail = blocks.saturating_sub(self.words.len() * 64) as u32;
        if tail > 0 {
            missing += tail;
            runs += u32::from(previous_seen);
        }
        self.words.clear();
        (runs, missing)
    }
}

/// A link's datagram loss, as the subscriber sees it (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct LossMeter {
    current: Option<Tally>,
    blocks_seen: BlocksSeen,
    /// The decayed sums of datagrams expected and received over the short window and the
    /// long one, and of runs of lost data blocks and the blocks in them.
    expected: f64,
    received: f64,
    long_expected: f64,
    long_received: f64,
    runs: f64,
    skipped: f64,
    /// Tallies closed since the last report.
    fresh: u32,
    last_report: Option<Instant>,
    /// The windows' decays for the last tally's datagram count (see [`LossMeter::add`]).
    decays: Option<(u32, Decays)>,
}

/// How much the short window and the long one keep of what they held, across one tally.
#[derive(Debug, Clone, Copy)]
struct Decays {
    short: f64,
    long: f64,
}

impl Decays {
    fn over(datagrams: u32) -> Decays {
        let datagrams = f64::from(datagrams);
        Decays {
            short: 0.5f64.powf(datagrams / HALF_LIFE),
            long: 0.5f64.powf(datagrams / (10.0 * HALF_LIFE)),
        }
    }
}

impl LossMeter {
    /// A datagram of message `id` arrived: a data block (DATA0 also says the block
    /// count) or a repair datagram.
    pub fn on_datagram(&mut self, header: &DatagramHeader) {
        let id = header.message_id;
        let (blocks, index) = match header.opcode {
            Opcode::Data0 => (Some(u32::from(header.block)), Some(0)),
            Opcode::DataN => (None, Some(u32::from(header.block))),
            Opcode::Repair => (None, None),
            _ => return,
        };
        let tally = match self.current.as_mut() {
            Some(tally) if tally.id == id => tally,
            // A datagram of an older message: late, its tally is closed.
            Some(tally) if message_id_distance(tally.id, id) >= 128 => return,
            _ => {
                let before = self.current.as_ref().map(|t| t.id);
                let last_expected = self.close();
                // Messages whose ids were skipped lost every datagram: as many, as far as
                // anyone can tell, as the message before them had.
                if let (Some(before), Some(expected)) = (before, last_expected) {
                    let skipped = message_id_distance(before, id).saturating_sub(1);
                    for _ in 0..skipped {
                        self.add(expected, 0, 0, 0);
                    }
                }
                self.current.insert(Tally::new(id))
            }
        };
        // Duplicates (or a flood under one id) must not overflow the count.
        tally.received = tally.received.saturating_add(1);
        if let Some(index) = index {
            tally.highest = tally.highest.max(index);
            self.blocks_seen.insert(index);
        }
        if tally.blocks.is_none() {
            tally.blocks = blocks;
            tally.expected = tally.expected.or(blocks);
        }
    }

    /// The FEC metadata of message `id` says it has `blocks` blocks and was sent as
    /// `datagrams` datagrams (its blocks, and its repair datagrams or the one metadata
    /// datagram).
    pub fn on_meta(&mut self, id: u8, blocks: u32, datagrams: u32) {
        if let Some(tally) = self.current.as_mut().filter(|t| t.id == id) {
            tally.expected = Some(datagrams);
            tally.blocks = Some(blocks);
        }
    }

    /// Closes the current tally into the window; how many datagrams it expected.
    fn close(&mut self) -> Option<u32> {
        let tally = self.current.take()?;
        let expected = tally
            .expected
            .unwrap_or(tally.highest + 1)
            .max(tally.received)
            .max(1);
        let blocks = tally.blocks.unwrap_or(tally.highest + 1);
        let (runs, missing) = self.blocks_seen.take_gaps(blocks);
        let received = tally.received.min(expected);
        self.add(expected, received, runs, missing);
        Some(expected)
    }

    /// Adds one message's tally to both windows.
    ///
    /// The decays are kept for the last datagram count: a link's messages mostly have one,
    /// and the two `powf` calls were, on a loaded machine, a cold call into libm for every
    /// message (S3's Python subscriber: 4 µs a message in its profile).
    fn add(&mut self, expected: u32, received: u32, runs: u32, skipped: u32) {
        let decays = match self.decays {
            Some((count, decays)) if count == expected => decays,
            _ => {
                let decays = Decays::over(expected);
                self.decays = Some((expected, decays));
                decays
            }
        };
        let (decay, long_decay) = (decays.short, decays.long);
        let (expected, received) = (f64::from(expected), f64::from(received));
        self.expected = self.expected * decay + expected;
        self.received = self.received * decay + received;
        self.long_expected = self.long_expected * long_decay + expected;
        self.long_received = self.long_received * long_decay + received;
        self.runs = self.runs * decay + f64::from(runs);
        self.skipped = self.skipped * decay + f64::from(skipped);
        self.fresh += 1;
    }

    /// The mean length of a run of lost data blocks over the window, drawn toward 1 while
    /// few runs were seen (one run of three reads as two): the first messages of a bursty
    /// link must not be planned as if its losses were single.
    pub fn mean_run(&self) -> f64 {
        ((self.skipped + 1.0) / (self.runs + 1.0)).clamp(1.0, MAX_REPORTED_RUN)
    }

    /// The datagram loss over the window, once it holds a few messages' worth.
    pub fn loss(&self) -> Option<f64> {
        (self.expected >= 20.0).then(|| (1.0 - self.received / self.expected).clamp(0.0, 1.0))
    }

    /// A REPORT for connection `connection_id`, if one is due at `now`: messages were
    /// tallied since the last and [`REPORT_INTERVAL`] has passed.
    pub fn poll_report(&mut self, now: Instant, connection_id: u32) -> Option<[u8; REPORT_LEN]> {
        let due = self
            .last_report
            .is_none_or(|at| now.saturating_duration_since(at) >= REPORT_INTERVAL);
        let loss = self.loss().filter(|_| due && self.fresh > 0)?;
        self.last_report = Some(now);
        self.fresh = 0;
        let newest = self.current.map_or(0, |t| t.id);
        let report = Report {
            loss,
            long_loss: (1.0 - self.long_received / self.long_expected).clamp(0.0, 1.0),
            long_datagrams: self.long_expected as u32,
            mean_run: self.mean_run(),
        };
        Some(report.encode(connection_id, newest))
    }
}

/// What a REPORT says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Report {
    /// Datagram loss over the short window, 0 to [`MAX_REPORTED_LOSS`].
    pub loss: f64,
    /// Datagram loss over the long window, 0 to [`MAX_REPORTED_LOSS`].
    pub long_loss: f64,
    /// Datagrams the long window holds.
    pub long_datagrams: u32,
    /// The mean length of a run of lost datagrams, 1 to [`MAX_REPORTED_RUN`].
    pub mean_run: f64,
}

impl Report {
    /// The REPORT datagram.
    pub fn encode(&self, connection_id: u32, message_id: u8) -> [u8; REPORT_LEN] {
        let mut out = [0u8; REPORT_LEN];
        let header = DatagramHeader {
            connection_id,
            opcode: Opcode::Report,
            message_id,
            block: 0,
        };
        out[..HEADER_LEN].copy_from_slice(&header.encode());
        let ppm = |loss: f64| (loss.clamp(0.0, 1.0) * 1e6).round() as u32;
        let run = (self.mean_run.clamp(1.0, MAX_REPORTED_RUN) * 1e3).round() as u32;
        let fields = [
            ppm(self.loss),
            ppm(self.long_loss),
            self.long_datagrams,
            run,
        ];
        for (i, field) in fields.into_iter().enumerate() {
            out[8 + 4 * i..12 + 4 * i].copy_from_slice(&field.to_le_bytes());
        }
        let crc = crc32fast::hash(&out[..24]);
        out[24..28].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Reads a REPORT of connection `connection_id`; `None` for anything else. A loss
    /// over [`MAX_REPORTED_LOSS`] or a run over [`MAX_REPORTED_RUN`] reads as that.
    pub fn parse(datagram: &[u8], connection_id: u32) -> Option<Report> {
        let header = DatagramHeader::parse(datagram)?;
        let bytes: &[u8; REPORT_LEN] = datagram.try_into().ok()?;
        let ours = header.opcode == Opcode::Report && header.connection_id == connection_id;
        let u32_at =
            |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        if !ours || u32_at(24) != crc32fast::hash(&bytes[..24]) {
            return None;
        }
        let loss = |at: usize| (f64::from(u32_at(at)) / 1e6).min(MAX_REPORTED_LOSS);
        Some(Report {
            loss: loss(8),
            long_loss: loss(12),
            long_datagrams: u32_at(16),
            mean_run: (f64::from(u32_at(20)) / 1e3).clamp(1.0, MAX_REPORTED_RUN),
        })
    }
}

/// The fewest repair datagrams `r` for a message of `k` blocks such that, with each of the
/// `k + r` datagrams lost independently with probability `loss`, more than `r` are lost
/// (and the message with them) with probability at most `target`; at most `k`.
pub fn repairs_for_target(k: usize, loss: f64, target: f64) -> usize {
    let loss = loss.clamp(0.0, MAX_REPORTED_LOSS);
    if k == 0 || loss <= 0.0 {
        return 0;
    }
    // The datagram count depends on r: settle it in a few rounds from the mean.
    let mut r = ((k as f64) * loss / (1.0 - loss)).ceil() as usize;
    for _ in 0..4 {
        let next = fewest_surviving(k + r.min(k), loss, target).min(k);
        if next == r {
            break;
        }
        r = next;
    }
    r.min(k)
}

/// The smallest `r` with P(Binomial(n, p) > r) <= `target`, summed in log space (the first
/// terms of a large `n` underflow otherwise).
fn fewest_surviving(n: usize, p: f64, target: f64) -> usize {
    let (ln_p, ln_q) = (p.ln(), (1.0 - p).ln());
    let mut ln_term = n as f64 * ln_q; // P(X = 0)
    let mut cdf = ln_term.exp();
    for r in 0..n {
        if 1.0 - cdf <= target {
            return r;
        }
        // P(X = r + 1) from P(X = r).
        ln_term += ((n - r) as f64).ln() - ((r + 1) as f64).ln() + ln_p - ln_q;
        cdf += ln_term.exp();
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udpros::Fragmenter;
    use bytes::Bytes;

    #[test]
    fn repair_follows_loss_size_and_target() {
        let target = 1e-3;
        assert_eq!(repairs_for_target(70, 0.0, target), 0);
        assert_eq!(repairs_for_target(70, 1e-4, target), 1);
        assert_eq!(repairs_for_target(70, 1.25e-3, target), 2);
        let at_five = repairs_for_target(70, 0.0625, target);
        assert!((10..=16).contains(&at_five), "{at_five}");
        let megabyte = repairs_for_target(700, 0.0625, target);
        assert!((60..=90).contains(&megabyte), "{megabyte}");
        assert_eq!(repairs_for_target(1, 0.0625, target), 1, "duplicated");
        assert_eq!(repairs_for_target(1, 1e-4, target), 0, "left alone");
        assert_eq!(repairs_for_target(10, 0.9, target), 10, "capped at k");
        let huge = repairs_for_target(32_768, 0.5, target);
        assert_eq!(huge, 32_768);
    }

    /// The decays kept for the last datagram count are the ones for each tally's own count,
    /// however the counts alternate: the windows hold what the formula gives.
    #[test]
    fn each_tally_decays_the_windows_by_its_own_count() {
        let mut meter = LossMeter::default();
        let (mut short, mut long) = (0.0f64, 0.0f64);
        for (expected, received) in [(2, 2), (2, 1), (70, 70), (2, 2), (70, 60), (70, 70)] {
            meter.add(expected, received, 0, 0);
            let n = f64::from(expected);
            short = short * 0.5f64.powf(n / HALF_LIFE) + f64::from(received);
            long = long * 0.5f64.powf(n / (10.0 * HALF_LIFE)) + f64::from(received);
            assert!((meter.received - short).abs() < 1e-9, "{expected}");
            assert!((meter.long_received - long).abs() < 1e-9, "{expected}");
        }
    }

    fn headers(fragmenter: &mut Fragmenter, len: usize) -> Vec<DatagramHeader> {
        let frame = Bytes::from(vec![0u8; len]);
        fragmenter
            .fragment(&frame)
            .unwrap()
            .map(|d| DatagramHeader::parse(&d.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn the_meter_counts_lost_datagrams_of_whole_and_broken_messages() {
        let mut meter = LossMeter::default();
        let mut fragmenter = Fragmenter::new(7, 1000).unwrap();
        assert_eq!(meter.loss(), None);
        for n in 0..100 {
            let sent = headers(&mut fragmenter, 9920); // ten datagrams
            for (i, h) in sent.iter().enumerate() {
                // One of every ten lost, DATA0 among them every tenth message.
                if i != n % 10 {
                    meter.on_datagram(h);
                }
            }
        }
        let loss = meter.loss().unwrap();
        assert!((0.08..0.12).contains(&loss), "{loss}");
        let now = Instant::now();
        let report = meter.poll_report(now, 7).expect("due");
        assert_eq!(meter.poll_report(now, 7), None, "nothing new");
        let read = Report::parse(&report, 7).unwrap();
        assert!((read.loss - loss).abs() < 1e-5);
        assert_eq!(Report::parse(&report, 8), None, "another link's");
        assert!(
            (1.0..1.2).contains(&read.mean_run),
            "single losses: {}",
            read.mean_run
        );
        assert!((read.long_loss - loss).abs() < 1e-3);
        let mut forged = report;
        forged[8..12].copy_from_slice(&10_000_000u32.to_le_bytes()); // 1000 %
        forged[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Report::parse(&forged, 7), None, "bad CRC");
        let crc = crc32fast::hash(&forged[..24]);
        forged[24..28].copy_from_slice(&crc.to_le_bytes());
        let capped = Report::parse(&forged, 7).unwrap();
        assert_eq!(
            (capped.loss, capped.mean_run),
            (MAX_REPORTED_LOSS, MAX_REPORTED_RUN)
        );
    }

    #[test]
    fn the_meter_measures_runs_of_loss() {
        let mut meter = LossMeter::default();
        let mut fragmenter = Fragmenter::new(7, 1000).unwrap();
        for n in 0..100usize {
            let sent = headers(&mut fragmenter, 19_840); // twenty datagrams
            let run = (n % 3) + 3..(n % 3) + 6; // three in a row
            for (i, h) in sent.iter().enumerate() {
                if !run.contains(&i) {
                    meter.on_datagram(h);
                }
            }
        }
        assert!((meter.mean_run() - 3.0).abs() < 0.1, "{}", meter.mean_run());
    }

    #[test]
    fn runs_are_read_in_block_order_whatever_order_the_blocks_came_in() {
        let mut fragmenter = Fragmenter::new(7, 1000).unwrap();
        let mut clean = LossMeter::default();
        let mut single = LossMeter::default();
        for n in 0..100usize {
            // Twenty datagrams, the last sent first (an FEC link's lossless layout).
            let mut sent = headers(&mut fragmenter, 19_840);
            sent.rotate_right(1);
            for (i, h) in sent.iter().enumerate() {
                clean.on_datagram(h);
                if i != 1 + n % 19 {
                    single.on_datagram(h);
                }
            }
        }
        assert_eq!(clean.loss(), Some(0.0));
        assert!(clean.mean_run() < 1.01, "{}", clean.mean_run());
        assert!((single.loss().unwrap() - 0.05).abs() < 0.005);
        assert!(single.mean_run() < 1.01, "{}", single.mean_run());
    }

    #[test]
    fn gaps_count_runs_across_words_and_the_missing_tail() {
        let mut seen = BlocksSeen::default();
        for index in [0, 1, 5, 63, 64, 65, 130] {
            seen.insert(index);
        }
        // Missing: 2-4, 6-62, 66-129, 131-199.
        assert_eq!(seen.take_gaps(200), (4, 3 + 57 + 64 + 69));
        assert_eq!(seen.take_gaps(3), (1, 3), "forgotten after a message");
        seen.insert(65_535);
        assert_eq!(
            seen.take_gaps(65_535),
            (1, 65_535),
            "past the count: not counted"
        );
        seen.insert(63);
        assert_eq!(seen.take_gaps(64), (1, 63));
    }
}
