//! Forward error correction on UDPROS links between udpros peers: a lossy tether or radio
//! still delivers large messages whole, without a round trip.
//!
//! A message of `k` blocks is one code block: its blocks, zero-padded to the shard size
//! `S`, are the source shards of a systematic Reed-Solomon code over GF(2^16), and `r`
//! repair shards go out beside today's DATA0/DATAN datagrams. Any `k` of the `k + r`
//! rebuild the message; a message whose blocks all arrived is never decoded. One block per
//! message rather than small fixed blocks: at 70 datagrams, 5 % loss and 10 % repair, blocks
//! of 32 lose 11.6 % of messages, one block 3.8 %.
//!
//! Only links where both ends asked for it carry REPAIR datagrams (the subscriber's
//! connection header has [`FEC_FIELD`], the publisher's answer confirms it), so roscpp and
//! every stock tool see today's wire. On such a link the data blocks carry `S` bytes
//! ([`shard_size`]), [`FEC_HEADER_LEN`] less than the negotiated datagram, so that a repair
//! datagram is exactly the negotiated size. A repair datagram:
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..8 | UDPROS header: connection id, opcode 4, message id, block = repair index |
//! | 8..10 | `k`, the message's blocks (its DATA0's count), `u16` |
//! | 10..12 | `r`, the repair datagrams sent for it, `u16` |
//! | 12..16 | the frame's length (length prefix included), `u32` |
//! | 16..20 | CRC-32 of the message body |
//! | 20..24 | CRC-32 of the whole datagram with these four bytes zero |
//! | 24.. | the repair shard, `S` bytes; none in a datagram that carries the metadata only |
//!
//! All little-endian. UDPROS itself has no message checksum: a delayed block of the
//! message that used the same id 255 messages earlier is assembled into the new one. The
//! body's CRC catches that between udpros peers; a message of several blocks always carries
//! it, in a metadata-only datagram when it has no repair shards.
//!
//! The code is `reed-solomon-simd`'s: systematic, up to 32768 + 32768 shards, SIMD chosen at
//! run time (SSSE3/AVX2, and Neon for a vehicle's Raspberry Pi), about 18 µs to encode the
//! 7 repair shards of a 100 kB message and 0.25 ms to rebuild one (`raptorq`, the other
//! candidate, encodes about 10 times slower).

use super::loss::Report;
use super::{DatagramHeader, Opcode, HEADER_LEN};
use crate::header::ConnectionHeader;
use bytes::Bytes;
use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};

/// The connection header field in which a udpros subscriber asks for FEC and a udpros
/// publisher confirms it, with the version of this format as its value.
pub const FEC_FIELD: &str = "udpros_fec";
/// The version of the repair format this crate speaks.
pub const FEC_VERSION: &str = "1";
/// The connection header field in which a subscriber asks for at least this ratio of
/// repair ([`RepairRatio`], a decimal number).
pub const FEC_REPAIR_FIELD: &str = "udpros_fec_repair";
/// The connection header field in which a subscriber asks for adaptive repair with this
/// target ([`LossTarget`], a decimal number).
pub const FEC_TARGET_FIELD: &str = "udpros_fec_target";
/// Bytes a repair datagram carries after the UDPROS header, before its shard.
pub const FEC_HEADER_LEN: usize = 16;
/// The smallest shard worth coding: below it the headers outweigh the payload.
pub const MIN_SHARD: usize = 64;

/// The shard size, and so the payload of every data block but a message's last, on an FEC
/// link whose datagrams are at most `max_datagram` bytes: what is left after both headers,
/// even (the code works on 16-bit symbols). `None` when that is below [`MIN_SHARD`].
pub fn shard_size(max_datagram: usize) -> Option<usize> {
    let shard = max_datagram.checked_sub(HEADER_LEN + FEC_HEADER_LEN)? & !1;
    (shard >= MIN_SHARD).then_some(shard)
}

/// Bytes of a message each data datagram carries on a link of `max_datagram`: on a link
/// that agreed on FEC (`fec`) the code's shard ([`shard_size`]), so that a repair
/// datagram, its FEC header more, fits `max_datagram` too; elsewhere all but the header.
/// Publisher and subscriber both cut messages at it (the publisher's data datagrams are
/// [`HEADER_LEN`] more).
pub fn block_payload(max_datagram: usize, fec: bool) -> usize {
    match shard_size(max_datagram).filter(|_| fec) {
        Some(shard) => shard,
        None => max_datagram.saturating_sub(HEADER_LEN),
    }
}

/// How much repair a link carries, as each end wants it: a publisher's policy is what it
/// adds to each message, a subscriber's what it asks for. A link carries FEC only when
/// both ends are udpros and neither is [`FecPolicy::Off`]; it then repairs at least the
/// larger fixed ratio of the two, and adapts to the loss the subscriber reports when either
/// end is adaptive (to the stricter target). See [`LinkFec`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FecPolicy {
    /// Today's wire even between udpros peers: no checksum, no repair.
    Off,
    /// A fixed share of repair shards per message; at 0, each message of several blocks
    /// carries only its checksum (a 24-byte datagram).
    Fixed(RepairRatio),
    /// The fewest repair shards that keep the chance of losing a message under the target,
    /// for the datagram loss the subscriber measures and reports (see
    /// [`loss`](super::loss)). On a lossless link: checksums, and one or two repair
    /// datagrams for messages of hundreds of blocks.
    Adaptive(LossTarget),
}

impl Default for FecPolicy {
    /// Adaptive, at [`LossTarget::DEFAULT`].
    fn default() -> Self {
        FecPolicy::Adaptive(LossTarget::DEFAULT)
    }
}

impl FecPolicy {
    /// Whether this end takes part in FEC.
    pub fn enabled(&self) -> bool {
        !matches!(self, FecPolicy::Off)
    }

    fn ratio(&self) -> RepairRatio {
        match self {
            FecPolicy::Fixed(ratio) => *ratio,
            _ => RepairRatio::ZERO,
        }
    }

    fn target(&self) -> Option<LossTarget> {
        match self {
            FecPolicy::Adaptive(target) => Some(*target),
            _ => None,
        }
    }

    /// A subscriber's UDPROS connection header with what this policy asks of the
    /// publisher.
    pub fn ask(&self, header: ConnectionHeader) -> ConnectionHeader {
        match self {
            FecPolicy::Off => header,
            FecPolicy::Fixed(ratio) => header
                .with(FEC_FIELD, FEC_VERSION)
                .with(FEC_REPAIR_FIELD, ratio.get().to_string()),
            FecPolicy::Adaptive(target) => header
                .with(FEC_FIELD, FEC_VERSION)
                .with(FEC_TARGET_FIELD, target.get().to_string()),
        }
    }

    /// What a publisher with this policy sends a udpros subscriber whose connection header
    /// is `subscriber`, on a link of `max_datagram`-byte datagrams: `None` unless the
    /// subscriber asked in this crate's version, neither end is off and the datagrams leave
    /// room for a shard ([`shard_size`]). The subscriber's numbers are clamped to their
    /// ranges; one that does not read counts as not given. The publisher confirms with
    /// [`FEC_FIELD`] in its answer exactly when this is `Some`.
    pub fn grant(&self, subscriber: &ConnectionHeader, max_datagram: usize) -> Option<LinkFec> {
        let asked = subscriber.get(FEC_FIELD) == Some(FEC_VERSION);
        if !asked || !self.enabled() || shard_size(max_datagram).is_none() {
            return None;
        }
        let number = |field: &str| {
            subscriber
                .get(field)
                .and_then(|r| r.trim().parse::<f64>().ok())
                .filter(|r| r.is_finite())
        };
        let wanted_ratio = number(FEC_REPAIR_FIELD)
            .and_then(|r| RepairRatio::new(r.clamp(0.0, f64::from(RepairRatio::MAX))));
        let wanted_target = number(FEC_TARGET_FIELD)
            .and_then(|t| LossTarget::new(t.clamp(LossTarget::MIN, LossTarget::MAX)));
        let floor = match wanted_ratio {
            Some(wanted) if wanted > self.ratio() => wanted,
            _ => self.ratio(),
        };
        let target = match (self.target(), wanted_target) {
            (Some(own), Some(wanted)) => Some(if wanted < own { wanted } else { own }),
            (own, wanted) => own.or(wanted),
        };
        Some(LinkFec { floor, target })
    }

    /// For a subscriber with this policy, given the publisher's answer header and
    /// datagram size: the shard size when the link carries FEC, `None` when not.
    pub fn agreed(&self, publisher: &ConnectionHeader, max_datagram: usize) -> Option<usize> {
        let confirmed = publisher.get(FEC_FIELD) == Some(FEC_VERSION);
        (self.enabled() && confirmed)
            .then(|| shard_size(max_datagram))
            .flatten()
    }
}

/// The FEC one link carries, as its publisher settled it from both ends' policies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkFec {
    /// At least this much repair, whatever the loss.
    pub floor: RepairRatio,
    /// Adapt to the reported loss with this target, if either end is adaptive.
    pub target: Option<LossTarget>,
}

/// The loss an adaptive link assumes before the subscriber's first report, which can
/// come only once a message has arrived, so that it shapes the third message at the
/// earliest: enough repair for the first messages over a poor radio (at 5 % loss, 2 % left
/// 1 MB messages unrepaired), gone within a report of a clean link.
pub const PRIOR_LOSS: f64 = 0.06;
/// The least loss an adaptive link assumes, however clean the link was so far: below the
/// resolution of the windows (a few thousand datagrams), low enough that a clean link
/// carries no repair for messages of up to about a thousand blocks (a 1 MB image in
/// 1500-byte datagrams). At 1e-5 it carried one repair datagram with every such image,
/// whose encoding cost S4 (1 MB at 20 Hz) a third more publisher CPU; the first loss the
/// subscriber reports brings repair back.
pub const MIN_ASSUMED_LOSS: f64 = 1e-6;
/// The prior's weight, in datagrams, against a link's first reports; it fades as the long
/// window fills (by `e` every [`PRIOR_FADE`] datagrams, or every [`PRIOR_FADE`] × 1472
/// bytes when datagrams are larger): a link that lost nothing in its first 80 datagrams
/// may still lose 5 % in bursts (one did in the tests), one clean for 2,000 is planned as
/// clean. Counted in datagrams alone, the prior outlived S4's whole run on loopback, where
/// a 1 MB message is 16 datagrams of 64 kB.
pub const PRIOR_WEIGHT: f64 = 200.0;
/// See [`PRIOR_WEIGHT`].
pub const PRIOR_FADE: f64 = 500.0;
/// The datagram of an Ethernet path, by which [`PRIOR_FADE`] counts larger ones.
pub(super) const ETHERNET_DATAGRAM: usize = 1472;
/// Messages of 2 to this many blocks less one are planned from the reports alone, never
/// from the prior: their repair datagrams are full-size, several times the data of a
/// small message. Messages of one block are planned with the prior: their repair is a
/// copy of themselves (see [`ONE_BLOCK_COPIES`]).
pub const PRIOR_MIN_BLOCKS: usize = 8;
/// The most copies of a message of one block an adaptive link sends. A copy costs only
/// the message's own size, and single-datagram messages are the control topics an
/// operator feels the loss of: they are planned for a tenth of the link's target
/// ([`ONE_BLOCK_TARGET_SHARE`]) and with the prior, so that a link's first messages are
/// copied before the subscriber has seen a loss (bench S10, 64-byte control at 50 Hz over
/// 2 % loss: 997-998 of 1000 arrived with at most one copy and no prior, the first losses
/// before the first report that showed any). Two copies leave one in 64,000 lost at 2.5 %.
pub const ONE_BLOCK_COPIES: u16 = 2;
/// The share of the link's target a message of one block is planned for.
pub const ONE_BLOCK_TARGET_SHARE: f64 = 0.1;

impl LinkFec {
    /// The repair shards for a message of `k` blocks, given what the subscriber last
    /// reported (`None` before its first report). An adaptive link plans for the worse of
    /// a quarter more than the short window's loss (it follows a worsening link) and the
    /// long window's loss with a fading [`PRIOR_WEIGHT`] datagrams of [`PRIOR_LOSS`] mixed
    /// in (a few clean messages do not prove a clean link); and for losses in runs of the
    /// reported mean length `b` as for single losses of datagrams `b` times as large.
    /// `datagram` is the link's datagram size.
    pub fn repairs(&self, k: usize, datagram: usize, reported: Option<&Report>) -> u16 {
        self.plan(k, datagram, reported, true)
    }

    /// [`repairs`](Self::repairs) toward a subscriber on this machine (a loopback
    /// address), without the prior: no radio lies between, and a datagram is lost there
    /// only when the subscriber's receive buffer overflows, which its reports show. A
    /// clean local link then never builds the code's tables (8 MB, about 12 ms on the
    /// first repaired message of a process) nor repairs its first messages.
    pub fn repairs_on_loopback(&self, k: usize, datagram: usize, reported: Option<&Report>) -> u16 {
        self.plan(k, datagram, reported, false)
    }

    fn plan(&self, k: usize, datagram: usize, reported: Option<&Report>, prior: bool) -> u16 {
        let fixed = self.floor.repairs(k);
        let Some(target) = self.target else {
            return fixed;
        };
        let with_prior = prior && (k == 1 || k >= PRIOR_MIN_BLOCKS);
        let (loss, run) = match reported {
            // The prior is a plan already, not an estimate to pad.
            None if with_prior => (PRIOR_LOSS, 1.0),
            None => (0.0, 1.0),
            Some(r) => {
                let seen = f64::from(r.long_datagrams);
                let scale = (datagram as f64 / ETHERNET_DATAGRAM as f64).max(1.0);
                let prior = PRIOR_WEIGHT
                    * (-seen * scale / PRIOR_FADE).exp()
                    * f64::from(u8::from(with_prior));
                let long = (r.long_loss * seen + PRIOR_LOSS * prior) / (seen + prior).max(1.0);
                let loss = (r.loss * 1.25).max(long).max(MIN_ASSUMED_LOSS);
                (loss, r.mean_run.max(1.0))
            }
        };
        if k == 1 {
            // Copies, each lost as the message is: the fewest that leave less than the
            // target's share.
            let target = f64::from(target.get()) * ONE_BLOCK_TARGET_SHARE;
            let copies = (0..ONE_BLOCK_COPIES)
                .find(|c| loss.powi(i32::from(*c) + 1) <= target)
                .unwrap_or(ONE_BLOCK_COPIES);
            return copies.max(fixed);
        }
        let clumps = (k as f64 / run).ceil() as usize;
        let per_clump = super::loss::repairs_for_target(clumps, loss, f64::from(target.get()));
        let adaptive = ((per_clump as f64 * run).ceil() as usize).min(k);
        let r = u16::try_from(adaptive).unwrap_or(u16::MAX).max(fixed);
        if ReedSolomonEncoder::supports(k, usize::from(r)) {
            r
        } else {
            fixed
        }
    }
}

/// The chance of losing a message an adaptive link aims to stay under, from
/// [`LossTarget::MIN`] to [`LossTarget::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct LossTarget(f32);

impl LossTarget {
    /// One message in a thousand.
    pub const DEFAULT: LossTarget = LossTarget(1e-3);
    /// The strictest target: one in a billion.
    pub const MIN: f64 = 1e-9;
    /// The loosest: one in ten.
    pub const MAX: f64 = 0.1;

    /// `target` if it is a number from [`LossTarget::MIN`] to [`LossTarget::MAX`].
    pub fn new(target: f64) -> Option<LossTarget> {
        (Self::MIN..=Self::MAX)
            .contains(&target)
            .then_some(LossTarget(target as f32))
    }

    /// The target.
    pub fn get(&self) -> f32 {
        self.0
    }
}

impl std::fmt::Display for FecPolicy {
    /// `off`, the ratio, or `adaptive:TARGET`: what
    /// [`FecPolicy::from_str`](std::str::FromStr) reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FecPolicy::Off => f.write_str("off"),
            FecPolicy::Fixed(ratio) => write!(f, "{}", ratio.get()),
            FecPolicy::Adaptive(target) => write!(f, "adaptive:{}", target.get()),
        }
    }
}

impl std::str::FromStr for FecPolicy {
    type Err = String;

    /// `off`; a ratio of repair from 0 to 1 (`0.25`: a quarter as many repair datagrams as
    /// data datagrams); or `adaptive`, optionally with the chance of losing a message to
    /// stay under (`adaptive:0.001`, the default), as the command line gives it.
    fn from_str(text: &str) -> Result<FecPolicy, String> {
        let text = text.trim();
        let wrong = || {
            format!(
                "FEC '{text}': 'off', a repair ratio from 0 to {}, or 'adaptive[:TARGET]' with a target from {} to {}",
                RepairRatio::MAX,
                LossTarget::MIN,
                LossTarget::MAX
            )
        };
        if text.eq_ignore_ascii_case("off") {
            return Ok(FecPolicy::Off);
        }
        if let Some(rest) = text.strip_prefix("adaptive") {
            return match rest.strip_prefix(':') {
                None if rest.is_empty() => Ok(FecPolicy::default()),
                Some(target) => target
                    .parse::<f64>()
                    .ok()
                    .and_then(LossTarget::new)
                    .map(FecPolicy::Adaptive)
                    .ok_or_else(wrong),
                None => Err(wrong()),
            };
        }
        text.parse::<f64>()
            .ok()
            .and_then(RepairRatio::new)
            .map(FecPolicy::Fixed)
            .ok_or_else(wrong)
    }
}

/// Repair shards per source shard, from 0 to [`RepairRatio::MAX`]: a message of `k` blocks
/// gets `round(ratio × k)` (so a one-block message is duplicated from 0.5 on).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct RepairRatio(f32);

impl RepairRatio {
    /// The most repair a link carries: as many repair shards as source shards, which
    /// survives the loss of half of a message's datagrams.
    pub const MAX: f32 = 1.0;
    /// No repair: checksums only.
    pub const ZERO: RepairRatio = RepairRatio(0.0);

    /// `ratio` if it is a number from 0 to [`RepairRatio::MAX`].
    pub fn new(ratio: f64) -> Option<RepairRatio> {
        (0.0..=f64::from(Self::MAX))
            .contains(&ratio)
            .then_some(RepairRatio(ratio as f32))
    }

    /// The ratio.
    pub fn get(&self) -> f32 {
        self.0
    }

    /// Repair shards for a message of `k` blocks, within what the code supports.
    pub fn repairs(&self, k: usize) -> u16 {
        let r = (f64::from(self.0) * k as f64).round() as usize;
        let r = r.min(k);
        if r == 0 || !ReedSolomonEncoder::supports(k, r) {
            return 0;
        }
        u16::try_from(r).unwrap_or(0)
    }
}

/// What every datagram of a message's FEC carries besides its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairMeta {
    /// The message's blocks.
    pub blocks: u16,
    /// The repair shards sent for it.
    pub repairs: u16,
    /// Its frame's length, length prefix included.
    pub frame_len: u32,
    /// CRC-32 of its body.
    pub body_crc: u32,
}

/// A repair datagram, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// The message it belongs to.
    pub message_id: u8,
    /// Its index among the message's repair shards.
    pub index: u16,
    /// The message's FEC metadata.
    pub meta: RepairMeta,
    /// The shard (empty in a metadata-only datagram).
    pub shard: Bytes,
}

/// Why a repair datagram was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepairError {
    /// Shorter than its headers, or not a repair datagram.
    Short,
    /// Its CRC does not match: damaged or made up.
    Checksum,
    /// Its fields contradict each other or the link's shard size.
    Inconsistent,
}

impl Repair {
    /// Reads a repair datagram of a link whose shards are `shard` bytes.
    pub fn parse(datagram: Bytes, shard: usize) -> Result<Repair, RepairError> {
        let header = DatagramHeader::parse(&datagram).ok_or(RepairError::Short)?;
        let fec = datagram
            .get(HEADER_LEN..HEADER_LEN + FEC_HEADER_LEN)
            .filter(|_| header.opcode == Opcode::Repair)
            .ok_or(RepairError::Short)?;
        let u16_at = |i: usize| u16::from_le_bytes([fec[i], fec[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([fec[i], fec[i + 1], fec[i + 2], fec[i + 3]]);
        if u32_at(12) != datagram_crc(&datagram) {
            return Err(RepairError::Checksum);
        }
        let meta = RepairMeta {
            blocks: u16_at(0),
            repairs: u16_at(2),
            frame_len: u32_at(4),
            body_crc: u32_at(8),
        };
        let payload = datagram.slice(HEADER_LEN + FEC_HEADER_LEN..);
        let k = usize::from(meta.blocks);
        let geometry =
            k >= 1 && meta.frame_len >= 4 && (meta.frame_len as usize).div_ceil(shard) == k;
        // A one-block message's repair is a copy of it, padded to even.
        let expected = match k {
            1 => (meta.frame_len as usize).next_multiple_of(2),
            _ => shard,
        };
        let shard_ok = match payload.len() {
            0 => true,
            n => {
                n == expected
                    && header.block < meta.repairs
                    && match k {
                        1 => meta.repairs <= ONE_BLOCK_COPIES,
                        _ => {
                            usize::from(meta.repairs) <= k
                                && ReedSolomonDecoder::supports(k, usize::from(meta.repairs))
                        }
                    }
            }
        };
        if !geometry || !shard_ok {
            return Err(RepairError::Inconsistent);
        }
        Ok(Repair {
            message_id: header.message_id,
            index: header.block,
            meta,
            shard: payload,
        })
    }
}

/// CRC-32 of `datagram` with its own CRC field taken as zero.
fn datagram_crc(datagram: &[u8]) -> u32 {
    let at = HEADER_LEN + 12;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&datagram[..at]);
    hasher.update(&[0; 4]);
    hasher.update(&datagram[at + 4..]);
    hasher.finalize()
}

/// Writes the CRC of a repair datagram built by hand (a test's, a fuzzer's) into it;
/// datagrams shorter than the headers are left alone.
pub fn seal(datagram: &mut [u8]) {
    let at = HEADER_LEN + 12;
    if datagram.len() >= HEADER_LEN + FEC_HEADER_LEN {
        let crc = datagram_crc(datagram);
        datagram[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Builds the code's tables now: `reed-solomon-simd` builds them (about 8 MB; some 12 ms on
/// this project's machine) the first time a process encodes or decodes, which would
/// otherwise hold up the first repaired message on the publisher and the first rebuilt one
/// on the subscriber. A driver calls this off its latency-critical threads once a link
/// agrees on FEC; later calls cost nothing.
pub fn prepare_code() {
    const SHARD: usize = 64;
    if let Ok(mut encoder) = ReedSolomonEncoder::new(1, 1, SHARD) {
        let _ = encoder.add_original_shard([0u8; SHARD]);
        let _ = encoder.encode();
    }
    if let Ok(mut decoder) = ReedSolomonDecoder::new(1, 1, SHARD) {
        let _ = decoder.add_recovery_shard(0, [0u8; SHARD]);
        let _ = decoder.decode();
    }
}

/// CRC-32 of a message body, as the metadata carries it.
pub fn body_crc(body: &[u8]) -> u32 {
    crc32fast::hash(body)
}

/// Makes repair datagrams, send side; keeps the code's work buffers between messages.
#[derive(Default)]
pub struct FecEncoder {
    encoder: Option<ReedSolomonEncoder>,
    /// The message's last block, zero-padded to the shard size.
    padded: Vec<u8>,
}

impl std::fmt::Debug for FecEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FecEncoder").finish_non_exhaustive()
    }
}

impl FecEncoder {
    /// Appends to `out` the FEC datagrams of message `message_id`, whose frame (length
    /// prefix included) is `frame`, cut in blocks of `shard` bytes: `repairs` repair
    /// datagrams of `HEADER_LEN + FEC_HEADER_LEN + shard` bytes each, or, when there are
    /// none (or the code cannot make them) and the message has several blocks, one
    /// metadata-only datagram of `HEADER_LEN + FEC_HEADER_LEN` bytes. Returns how many
    /// datagrams it appended and how many carry a shard.
    pub fn write(
        &mut self,
        connection_id: u32,
        message_id: u8,
        frame: &[u8],
        shard: usize,
        repairs: u16,
        out: &mut Vec<u8>,
    ) -> (usize, u16) {
        let k = frame.len().div_ceil(shard).max(1);
        let Ok(blocks) = u16::try_from(k) else {
            return (0, 0);
        };
        let meta = RepairMeta {
            blocks,
            repairs,
            frame_len: u32::try_from(frame.len()).unwrap_or(u32::MAX),
            body_crc: body_crc(frame.get(4..).unwrap_or_default()),
        };
        if repairs > 0 && k == 1 {
            // A message of one block is repaired by copies of itself, as long as it is: a
            // code of one source shard is a repetition code, and a 1 kB message need not
            // cost a full-size datagram per copy.
            self.padded.clear();
            self.padded.extend_from_slice(frame);
            self.padded.resize(frame.len().next_multiple_of(2), 0);
            for index in 0..repairs {
                write_datagram(connection_id, message_id, index, meta, &self.padded, out);
            }
            return (usize::from(repairs), repairs);
        }
        if repairs > 0 && self.encode(frame, shard, k, usize::from(repairs)) {
            let encoded = self.encoder.as_mut().and_then(|e| e.encode().ok());
            if let Some(encoded) = encoded {
                for (index, shard) in encoded.recovery_iter().enumerate() {
                    write_datagram(connection_id, message_id, index as u16, meta, shard, out);
                }
                return (usize::from(repairs), repairs);
            }
        }
        if k < 2 {
            return (0, 0);
        }
        let meta = RepairMeta { repairs: 0, ..meta };
        write_datagram(connection_id, message_id, 0, meta, &[], out);
        (1, 0)
    }

    /// Feeds the source shards to the code; false when it refuses the geometry.
    fn encode(&mut self, frame: &[u8], shard: usize, k: usize, r: usize) -> bool {
        let ready = match self.encoder.as_mut() {
            Some(encoder) => encoder.reset(k, r, shard).is_ok(),
            None => match ReedSolomonEncoder::new(k, r, shard) {
                Ok(encoder) => {
                    self.encoder = Some(encoder);
                    true
                }
                Err(_) => false,
            },
        };
        let Some(encoder) = self.encoder.as_mut().filter(|_| ready) else {
            return false;
        };
        for chunk in frame.chunks(shard) {
            let fed = if chunk.len() == shard {
                encoder.add_original_shard(chunk)
            } else {
                self.padded.clear();
                self.padded.extend_from_slice(chunk);
                self.padded.resize(shard, 0);
                encoder.add_original_shard(&self.padded)
            };
            if fed.is_err() {
                return false;
            }
        }
        true
    }
}

fn write_datagram(
    connection_id: u32,
    message_id: u8,
    index: u16,
    meta: RepairMeta,
    shard: &[u8],
    out: &mut Vec<u8>,
) {
    let start = out.len();
    let header = DatagramHeader {
        connection_id,
        opcode: Opcode::Repair,
        message_id,
        block: index,
    };
    out.extend_from_slice(&header.encode());
    out.extend_from_slice(&meta.blocks.to_le_bytes());
    out.extend_from_slice(&meta.repairs.to_le_bytes());
    out.extend_from_slice(&meta.frame_len.to_le_bytes());
    out.extend_from_slice(&meta.body_crc.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(shard);
    seal(&mut out[start..]);
}

/// Rebuilds the missing blocks of a message of `meta.blocks` blocks of `shard` bytes from
/// the blocks that arrived (`(index, payload)`, the last one possibly short) and repair
/// shards (`(index, shard)`). Returns the missing blocks, each cut to its size, or `None`
/// when they do not suffice or the code refuses them.
pub fn rebuild(
    meta: RepairMeta,
    shard: usize,
    blocks: &[(u16, &[u8])],
    repairs: &[(u16, Bytes)],
) -> Option<Vec<(u16, Vec<u8>)>> {
    let (k, r) = (usize::from(meta.blocks), usize::from(meta.repairs));
    if blocks.len() + repairs.len() < k || blocks.len() >= k {
        return None;
    }
    let frame_len = meta.frame_len as usize;
    if k == 1 {
        // Copies (see `FecEncoder::write`).
        let (_, copy) = repairs.first()?;
        return Some(vec![(0, copy.get(..frame_len)?.to_vec())]);
    }
    let mut decoder = ReedSolomonDecoder::new(k, r, shard).ok()?;
    let mut padded = Vec::new();
    for &(index, payload) in blocks {
        let added = if payload.len() == shard {
            decoder.add_original_shard(usize::from(index), payload)
        } else {
            padded.clear();
            padded.extend_from_slice(payload);
            padded.resize(shard, 0);
            decoder.add_original_shard(usize::from(index), &padded)
        };
        added.ok()?;
    }
    for (index, repair) in repairs {
        decoder
            .add_recovery_shard(usize::from(*index), repair)
            .ok()?;
    }
    let result = decoder.decode().ok()?;
    let restored = result
        .restored_original_iter()
        .map(|(index, bytes)| {
            let start = index * shard;
            let len = frame_len.saturating_sub(start).min(shard);
            (index as u16, bytes[..len].to_vec())
        })
        .collect();
    Some(restored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udpros::Fragmenter;

    const DATAGRAM: usize = 1472;

    fn frame(len: usize, seed: u8) -> Vec<u8> {
        let mut frame = ((len - 4) as u32).to_le_bytes().to_vec();
        frame.extend((4..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
        frame
    }

    /// The default adaptive link: no floor, one message in a thousand.
    const ADAPTIVE: LinkFec = LinkFec {
        floor: RepairRatio::ZERO,
        target: Some(LossTarget::DEFAULT),
    };

    /// A report of `loss` in both windows, over `long_datagrams`, in runs of `mean_run`.
    fn report_of(loss: f64, long_datagrams: u32, mean_run: f64) -> Report {
        Report {
            loss,
            long_loss: loss,
            long_datagrams,
            mean_run,
        }
    }

    fn repairs_of(out: &[u8], shard: usize) -> Vec<Repair> {
        out.chunks(HEADER_LEN + FEC_HEADER_LEN + shard)
            .map(|d| Repair::parse(Bytes::copy_from_slice(d), shard).unwrap())
            .collect()
    }

    #[test]
    fn shards_leave_room_for_both_headers_and_are_even() {
        assert_eq!(shard_size(1472), Some(1448));
        assert_eq!(shard_size(1501), Some(1476));
        assert_eq!(shard_size(24 + 63), None);
        assert_eq!(shard_size(3), None);
        assert_eq!(block_payload(1472, true), 1448);
        assert_eq!(block_payload(1472, false), 1464);
        assert_eq!(
            block_payload(24 + 63, true),
            24 + 63 - HEADER_LEN,
            "too small to code"
        );
        assert_eq!(block_payload(3, false), 0);
    }

    #[test]
    fn ratios_are_checked_and_round_to_whole_shards() {
        assert_eq!(RepairRatio::new(f64::NAN), None);
        assert_eq!(RepairRatio::new(1.5), None);
        assert_eq!(RepairRatio::new(-0.1), None);
        let tenth = RepairRatio::new(0.1).unwrap();
        assert_eq!(tenth.repairs(70), 7);
        assert_eq!(
            tenth.repairs(1),
            0,
            "a one-block message is left alone at 10 %"
        );
        assert_eq!(
            RepairRatio::new(0.5).unwrap().repairs(1),
            1,
            "... duplicated at 50 %"
        );
        assert_eq!(
            RepairRatio::new(1.0).unwrap().repairs(40_000),
            0,
            "past the code"
        );
    }

    #[test]
    fn policies_read_as_they_print() {
        for text in ["off", "0", "0.25", "1", "adaptive:0.001", "adaptive:0.01"] {
            let policy: FecPolicy = text.parse().unwrap();
            assert_eq!(policy.to_string(), text);
        }
        assert_eq!("adaptive".parse::<FecPolicy>(), Ok(FecPolicy::default()));
        for wild in [
            "NaN",
            "2",
            "-0.5",
            "",
            "on",
            "adaptive:",
            "adaptive:0.5",
            "adaptivex",
        ] {
            assert!(wild.parse::<FecPolicy>().is_err(), "{wild:?}");
        }
    }

    #[test]
    fn fec_needs_both_ends_and_settles_on_the_larger_ratio_and_the_stricter_target() {
        let ratio = |r| RepairRatio::new(r).unwrap();
        let quarter = FecPolicy::Fixed(ratio(0.25));
        let checksums = FecPolicy::Fixed(RepairRatio::ZERO);
        let adaptive = FecPolicy::default();
        let strict = FecPolicy::Adaptive(LossTarget::new(1e-6).unwrap());
        let plain = ConnectionHeader::new().with("topic", "/t");
        assert_eq!(
            adaptive.grant(&plain, DATAGRAM),
            None,
            "roscpp asks nothing"
        );
        let fixed = |floor| {
            Some(LinkFec {
                floor,
                target: None,
            })
        };
        assert_eq!(
            checksums.grant(&quarter.ask(plain.clone()), DATAGRAM),
            fixed(ratio(0.25))
        );
        assert_eq!(
            quarter.grant(&checksums.ask(plain.clone()), DATAGRAM),
            fixed(ratio(0.25))
        );
        let both = adaptive
            .grant(&quarter.ask(plain.clone()), DATAGRAM)
            .unwrap();
        assert_eq!(
            (both.floor, both.target),
            (ratio(0.25), Some(LossTarget::DEFAULT))
        );
        let stricter = adaptive
            .grant(&strict.ask(plain.clone()), DATAGRAM)
            .unwrap();
        assert_eq!(stricter.target, LossTarget::new(1e-6));
        assert_eq!(
            FecPolicy::Off.grant(&quarter.ask(plain.clone()), DATAGRAM),
            None
        );
        assert_eq!(FecPolicy::Off.ask(plain.clone()), plain);
        assert_eq!(
            adaptive.grant(&adaptive.ask(plain.clone()), 80),
            None,
            "no room"
        );
        let version2 = plain.clone().with(FEC_FIELD, "2");
        assert_eq!(quarter.grant(&version2, DATAGRAM), None);
        let asking = |field: &str, value: &str| {
            let header = plain.clone().with(FEC_FIELD, FEC_VERSION);
            checksums
                .grant(&header.with(field, value), DATAGRAM)
                .unwrap()
        };
        for wild in ["NaN", "inf", "-1", "", "0.5.5"] {
            assert_eq!(
                asking(FEC_REPAIR_FIELD, wild),
                LinkFec {
                    floor: RepairRatio::ZERO,
                    target: None
                },
                "{wild:?}"
            );
        }
        assert_eq!(
            asking(FEC_REPAIR_FIELD, "10").floor,
            ratio(1.0),
            "1000 % is capped"
        );
        let loosest = LossTarget::new(LossTarget::MAX);
        assert_eq!(asking(FEC_TARGET_FIELD, "5").target, loosest, "clamped");
        let answer = plain.clone().with(FEC_FIELD, FEC_VERSION);
        assert_eq!(adaptive.agreed(&answer, DATAGRAM), shard_size(DATAGRAM));
        assert_eq!(FecPolicy::Off.agreed(&answer, DATAGRAM), None);
        assert_eq!(adaptive.agreed(&plain, DATAGRAM), None, "not confirmed");
    }

    #[test]
    fn adaptive_repair_follows_the_reports() {
        let link = ADAPTIVE;
        let report = |loss, mean_run| report_of(loss, 30_000, mean_run);
        assert!(
            link.repairs(70, DATAGRAM, None) >= 10,
            "the prior, before any report"
        );
        let clean = report(0.0, 1.0);
        assert!(
            link.repairs(70, DATAGRAM, Some(&clean)) <= 1,
            "a clean link: about a checksum"
        );
        assert_eq!(link.repairs(7, DATAGRAM, Some(&clean)), 0);
        let at_five = link.repairs(70, DATAGRAM, Some(&report(0.05, 1.0)));
        assert!((10..=18).contains(&at_five), "{at_five}");
        let in_runs = link.repairs(70, DATAGRAM, Some(&report(0.05, 3.0)));
        assert!(in_runs > at_five, "runs of 3: {in_runs}");
        assert_eq!(
            link.repairs(10, DATAGRAM, Some(&report(0.5, 1.0))),
            10,
            "at most k"
        );
        let floor = LinkFec {
            floor: RepairRatio::new(0.5).unwrap(),
            ..link
        };
        assert_eq!(floor.repairs(70, DATAGRAM, Some(&clean)), 35);
        // A clean 1 MB image carries its checksum alone; the prior is gone after the same
        // bytes whatever the datagram size.
        assert_eq!(link.repairs(700, DATAGRAM, Some(&clean)), 0);
        let early = Report {
            long_datagrams: 1600,
            ..clean
        };
        assert!(
            link.repairs(16, DATAGRAM, Some(&early)) > 0,
            "1600 small ones"
        );
        assert_eq!(link.repairs(16, 65_000, Some(&early)), 0, "1600 of 64 kB");
        assert_eq!(
            link.repairs_on_loopback(70, DATAGRAM, None),
            0,
            "no prior on loopback"
        );
        assert_eq!(
            link.repairs_on_loopback(70, DATAGRAM, Some(&report(0.05, 1.0))),
            at_five,
            "the reports alone"
        );
    }

    /// A message of one block is copied: twice before any report (the prior) and over a
    /// lossy link, once over a slightly lossy one, never over a link shown clean or on
    /// loopback before a loss; a subscriber takes up to two copies and refuses more.
    #[test]
    fn one_block_messages_are_copied_by_the_loss_they_face() {
        let link = ADAPTIVE;
        let report = |loss, long_datagrams| report_of(loss, long_datagrams, 1.0);
        assert_eq!(link.repairs(1, DATAGRAM, None), 2, "the prior");
        assert_eq!(link.repairs(1, DATAGRAM, Some(&report(0.02, 3_000))), 2);
        assert_eq!(link.repairs(1, DATAGRAM, Some(&report(0.002, 3_000))), 1);
        assert_eq!(
            link.repairs(1, DATAGRAM, Some(&report(0.0, 100))),
            2,
            "too few seen"
        );
        assert_eq!(link.repairs(1, DATAGRAM, Some(&report(0.0, 3_000))), 0);
        assert_eq!(link.repairs_on_loopback(1, DATAGRAM, None), 0);
        assert_eq!(
            link.repairs(1, DATAGRAM, Some(&report(0.5, 3_000))),
            2,
            "at most two"
        );

        let shard = shard_size(DATAGRAM).unwrap();
        let small = frame(64, 1);
        for copies in [1, 2, 3] {
            let mut out = Vec::new();
            let (sent, _) = FecEncoder::default().write(7, 9, &small, shard, copies, &mut out);
            assert_eq!(sent, usize::from(copies));
            let parsed: Vec<_> = out
                .chunks(HEADER_LEN + FEC_HEADER_LEN + 64)
                .map(|d| Repair::parse(Bytes::copy_from_slice(d), shard))
                .collect();
            let taken = parsed.iter().all(|r| r.is_ok());
            assert_eq!(taken, copies <= ONE_BLOCK_COPIES, "{copies} copies");
        }
    }

    #[test]
    fn any_k_of_the_k_plus_r_rebuild_the_message() {
        let shard = shard_size(DATAGRAM).unwrap();
        let frame = frame(100_000, 3);
        let mut out = Vec::new();
        let (sent, shards) = FecEncoder::default().write(7, 9, &frame, shard, 7, &mut out);
        assert_eq!((sent, shards), (7, 7));
        let repairs = repairs_of(&out, shard);
        assert!(repairs
            .iter()
            .all(|r| r.message_id == 9 && r.meta.blocks == 70));
        let body_crc = repairs[0].meta.body_crc;
        assert_eq!(body_crc, super::body_crc(&frame[4..]));
        let blocks: Vec<(u16, &[u8])> = frame
            .chunks(shard)
            .enumerate()
            .map(|(i, b)| (i as u16, b))
            .collect();
        // Lose seven blocks, the last (short) and the first among them.
        let lost = [0u16, 5, 6, 30, 31, 50, 69];
        let kept: Vec<_> = blocks
            .iter()
            .filter(|(i, _)| !lost.contains(i))
            .copied()
            .collect();
        let held: Vec<(u16, Bytes)> = repairs.iter().map(|r| (r.index, r.shard.clone())).collect();
        let restored = rebuild(repairs[0].meta, shard, &kept, &held).expect("enough");
        assert_eq!(restored.len(), 7);
        for (index, bytes) in restored {
            assert_eq!(
                bytes.as_slice(),
                blocks[usize::from(index)].1,
                "block {index}"
            );
        }
        // One shard short: nothing.
        assert_eq!(rebuild(repairs[0].meta, shard, &kept, &held[1..]), None);
    }

    #[test]
    fn a_message_without_repair_still_carries_its_checksum() {
        let shard = shard_size(DATAGRAM).unwrap();
        let mut out = Vec::new();
        let mut encoder = FecEncoder::default();
        assert_eq!(
            encoder.write(7, 1, &frame(5000, 1), shard, 0, &mut out),
            (1, 0)
        );
        assert_eq!(out.len(), HEADER_LEN + FEC_HEADER_LEN);
        let meta = Repair::parse(Bytes::from(out), shard).unwrap();
        assert!(meta.shard.is_empty());
        assert_eq!(meta.meta.blocks, 4);
        let mut out = Vec::new();
        assert_eq!(
            encoder.write(7, 2, &frame(100, 1), shard, 0, &mut out),
            (0, 0),
            "one block cannot mix"
        );
    }

    #[test]
    fn damaged_or_inconsistent_repairs_are_refused() {
        let shard = shard_size(DATAGRAM).unwrap();
        let mut out = Vec::new();
        FecEncoder::default().write(7, 9, &frame(10_000, 3), shard, 2, &mut out);
        let good = out[..HEADER_LEN + FEC_HEADER_LEN + shard].to_vec();
        let parse = |d: &[u8]| Repair::parse(Bytes::copy_from_slice(d), shard);
        assert!(parse(&good).is_ok());
        let mut flipped = good.clone();
        flipped[500] ^= 1;
        assert_eq!(parse(&flipped), Err(RepairError::Checksum));
        assert_eq!(parse(&good[..20]), Err(RepairError::Short));
        assert_eq!(
            Repair::parse(Bytes::from(good.clone()), shard - 2),
            Err(RepairError::Inconsistent),
            "another link's shard size"
        );
        // A datagram that lies consistently (its CRC made to match) about its geometry.
        let mut lying = good.clone();
        lying[8..10].copy_from_slice(&60_000u16.to_le_bytes());
        seal(&mut lying);
        assert_eq!(parse(&lying), Err(RepairError::Inconsistent));
        // Data datagrams are not repairs.
        let mut data = Vec::new();
        Fragmenter::new(7, DATAGRAM)
            .unwrap()
            .write_datagrams(&frame(3000, 1), &mut data)
            .unwrap();
        assert_eq!(parse(&data[..DATAGRAM]), Err(RepairError::Short));
    }
}
