//! MAVLink 2 message signing, without I/O: frames signed on the way out and checked on the
//! way in, as the MAVLink spec says (ArduPilot, PX4 since 2025, pymavlink and MAVProxy
//! speak it; mavros and BlueOS's router do not).
//!
//! A signed frame sets incompatibility flag 0x01 and ends in 13 bytes: the link id (1),
//! a timestamp (6, little-endian, in 10 µs since 2015-01-01 00:00 UTC) and the first 6
//! bytes of SHA-256(secret ‖ the frame up to and with the timestamp). A receiver takes a
//! frame whose signature holds and whose timestamp is newer than the last one of its
//! stream (system, component, link id); a stream it has not heard yet must be within a
//! minute of its clock. Signing authenticates and stops replay; it hides nothing.
//!
//! Time comes in as an argument (`unix_us`): the link layer reads the clock.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;

/// Incompatibility flag of a signed frame.
pub const SIGNED: u8 = 0x01;
/// Bytes a signature adds to a frame.
pub const SIGNATURE_LEN: usize = 13;
/// Seconds from 1970 to MAVLink's epoch, 2015-01-01 00:00 UTC.
const EPOCH_UNIX_S: u64 = 1_420_070_400;
/// How far behind this clock a new stream's first timestamp may be (the spec's minute).
const NEW_STREAM_WINDOW: u64 = 60 * 100_000;
/// Streams a verifier remembers; past it, the stream heard longest ago is forgotten (a
/// forgotten stream is new again, held to the one-minute window).
pub const MAX_STREAMS: usize = 256;

/// What a link does about signing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SigningPolicy {
    /// Nothing signed, signatures not checked (signed frames are taken as they come).
    #[default]
    Off,
    /// Every frame sent is signed; a signed frame received must verify, an unsigned one
    /// is taken (an autopilot that does not sign yet, a radio's RADIO_STATUS).
    Sign,
    /// As `Sign`, and unsigned frames are refused.
    Require,
}

impl std::str::FromStr for SigningPolicy {
    type Err = String;

    fn from_str(text: &str) -> Result<SigningPolicy, String> {
        match text {
            "off" => Ok(SigningPolicy::Off),
            "sign" => Ok(SigningPolicy::Sign),
            "require" => Ok(SigningPolicy::Require),
            other => Err(format!("~signing {other:?}: off, sign or require")),
        }
    }
}

impl fmt::Display for SigningPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SigningPolicy::Off => "off",
            SigningPolicy::Sign => "sign",
            SigningPolicy::Require => "require",
        })
    }
}

/// The 32-byte secret both ends of a link share.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey(pub [u8; 32]);

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

/// How one link signs: its secret, policy and link id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningConfig {
    /// The secret both ends share.
    pub key: SigningKey,
    /// Sign only, or refuse unsigned frames too.
    pub policy: SigningPolicy,
    /// The link id our frames carry (a GCS or companion uses one per link it has).
    pub link_id: u8,
}

impl SigningConfig {
    /// The signer and verifier of one link under this config; `None` when it is off.
    pub fn start(&self) -> Option<(Signer, Verifier)> {
        match self.policy {
            SigningPolicy::Off => None,
            SigningPolicy::Sign | SigningPolicy::Require => Some((
                Signer::new(self.key.clone(), self.link_id),
                Verifier::new(self.key.clone(), self.policy),
            )),
        }
    }
}

/// This host's wall clock in µs since 1970, as signatures carry it.
pub fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// MAVLink time (10 µs since 2015) for a Unix time in µs.
pub fn mavlink_time(unix_us: u64) -> u64 {
    unix_us.saturating_sub(EPOCH_UNIX_S * 1_000_000) / 10
}

/// The signature of `signed_part`: the frame up to and with the link id and timestamp.
fn signature(key: &SigningKey, signed_part: &[u8]) -> [u8; 6] {
    let mut hash = Sha256::new();
    hash.update(key.0);
    hash.update(signed_part);
    let digest = hash.finalize();
    let mut out = [0u8; 6];
    out.copy_from_slice(&digest[..6]);
    out
}

/// Signs our frames: one link id, timestamps strictly increasing.
#[derive(Debug, Clone)]
pub struct Signer {
    key: SigningKey,
    link_id: u8,
    last: u64,
}

impl Signer {
    /// A signer for `link_id` under `key`.
    pub fn new(key: SigningKey, link_id: u8) -> Signer {
        Signer {
            key,
            link_id,
            last: 0,
        }
    }

    /// Signs the MAVLink 2 frame `frame` (unsigned, whole) at `unix_us`: sets the flag,
    /// recomputes the checksum with `crc_extra` (the message's), appends the signature.
    /// A MAVLink 1 frame, or one already signed, is left as it is (v1 cannot be signed).
    pub fn sign(&mut self, frame: &mut Vec<u8>, unix_us: u64, crc_extra: u8) {
        if frame.len() < 12 || frame[0] != 0xFD || frame[2] & SIGNED != 0 {
            return;
        }
        frame[2] |= SIGNED;
        let end = frame.len() - 2;
        let crc = frame_crc(&frame[1..end], crc_extra);
        frame[end..].copy_from_slice(&crc.to_le_bytes());
        // Strictly increasing, even for frames within one 10 µs tick.
        let timestamp = mavlink_time(unix_us).max(self.last + 1);
        self.last = timestamp;
        frame.push(self.link_id);
        frame.extend_from_slice(&timestamp.to_le_bytes()[..6]);
        let sig = signature(&self.key, frame);
        frame.extend_from_slice(&sig);
    }
}

/// MAVLink's checksum (CRC-16/MCRF4XX) over `bytes` (everything after the start byte up to
/// the checksum) and the message's `crc_extra`.
pub fn frame_crc(bytes: &[u8], crc_extra: u8) -> u16 {
    let crc = bytes.iter().fold(0xFFFFu16, |crc, &b| crc_x25(crc, b));
    crc_x25(crc, crc_extra)
}

/// One byte into MAVLink's checksum.
pub fn crc_x25(crc: u16, byte: u8) -> u16 {
    let mut tmp = byte ^ (crc & 0xFF) as u8;
    tmp ^= tmp << 4;
    let tmp = u16::from(tmp);
    (crc >> 8) ^ (tmp << 8) ^ (tmp << 3) ^ (tmp >> 4)
}

/// Why a received frame is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Unsigned (or MAVLink 1), and the policy is `require`.
    Unsigned,
    /// The signature does not hold: another key, or a changed frame.
    BadSignature,
    /// Its timestamp is not newer than its stream's last: a replay.
    Replayed,
    /// The first frame of a stream, older than a minute by this clock.
    Stale,
}

/// Frames refused, by reason, and signed frames taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyStats {
    /// Signed frames taken.
    pub verified: u64,
    /// Unsigned frames taken (policy `sign`).
    pub unsigned_taken: u64,
    /// Unsigned frames refused (policy `require`).
    pub unsigned: u64,
    /// Frames whose signature did not hold.
    pub bad_signature: u64,
    /// Frames replayed (a timestamp not newer than their stream's).
    pub replayed: u64,
    /// A new stream's first frame older than a minute.
    pub stale: u64,
}

impl VerifyStats {
    /// Every refusal.
    pub fn refused(&self) -> u64 {
        self.unsigned + self.bad_signature + self.replayed + self.stale
    }
}

/// Checks received frames' signatures and their streams' timestamps.
#[derive(Debug, Clone)]
pub struct Verifier {
    key: SigningKey,
    policy: SigningPolicy,
    /// (system, component, link id) → (last timestamp, when last heard, in our order).
    streams: HashMap<(u8, u8, u8), (u64, u64)>,
    heard: u64,
    stats: VerifyStats,
}

impl Verifier {
    /// A verifier under `key` with `policy` (`Sign` or `Require`).
    pub fn new(key: SigningKey, policy: SigningPolicy) -> Verifier {
        Verifier {
            key,
            policy,
            streams: HashMap::new(),
            heard: 0,
            stats: VerifyStats::default(),
        }
    }

    /// Checks the whole frame `frame` (checksum already good) at `unix_us`.
    pub fn check(&mut self, frame: &[u8], unix_us: u64) -> Result<(), Refused> {
        let checked = self.verify(frame, unix_us);
        let counter = match checked {
            Ok(true) => &mut self.stats.verified,
            Ok(false) => &mut self.stats.unsigned_taken,
            Err(Refused::Unsigned) => &mut self.stats.unsigned,
            Err(Refused::BadSignature) => &mut self.stats.bad_signature,
            Err(Refused::Replayed) => &mut self.stats.replayed,
            Err(Refused::Stale) => &mut self.stats.stale,
        };
        *counter += 1;
        checked.map(drop)
    }

    /// Whether the frame was signed (and holds), or why it is refused.
    fn verify(&mut self, frame: &[u8], unix_us: u64) -> Result<bool, Refused> {
        let signed = frame.first() == Some(&0xFD) && frame.get(2).is_some_and(|f| f & SIGNED != 0);
        if !signed {
            return match self.policy {
                SigningPolicy::Require => Err(Refused::Unsigned),
                _ => Ok(false),
            };
        }
        if frame.len() < 12 + SIGNATURE_LEN {
            return Err(Refused::BadSignature);
        }
        let (part, sig) = frame.split_at(frame.len() - 6);
        let expected = signature(&self.key, part);
        let differs = expected.iter().zip(sig).fold(0u8, |d, (a, b)| d | (a ^ b));
        if differs != 0 {
            return Err(Refused::BadSignature);
        }
        let link_id = part[part.len() - 7];
        let mut stamp = [0u8; 8];
        stamp[..6].copy_from_slice(&part[part.len() - 6..]);
        let timestamp = u64::from_le_bytes(stamp);
        let stream = (frame[5], frame[6], link_id);
        match self.streams.get(&stream) {
            Some(&(last, _)) if timestamp <= last => return Err(Refused::Replayed),
            Some(_) => {}
            None if timestamp + NEW_STREAM_WINDOW < mavlink_time(unix_us) => {
                return Err(Refused::Stale)
            }
            None => self.make_room(),
        }
        self.heard += 1;
        self.streams.insert(stream, (timestamp, self.heard));
        Ok(true)
    }

    fn make_room(&mut self) {
        if self.streams.len() < MAX_STREAMS {
            return;
        }
        if let Some(oldest) = self
            .streams
            .iter()
            .min_by_key(|(_, (_, heard))| *heard)
            .map(|(k, _)| *k)
        {
            self.streams.remove(&oldest);
        }
    }

    /// What it took and refused so far.
    pub fn stats(&self) -> VerifyStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mavlink::messages::{frame, Outgoing};
    use crate::mavlink::protocol::{Ids, Timesync};
    use mavlink::MavlinkVersion;

    const KEY: SigningKey = SigningKey([9; 32]);
    /// 2026-11-29, in µs since 1970.
    const NOW: u64 = 1_795_900_000_000_000;
    const TIMESYNC_CRC_EXTRA: u8 = 34;

    fn timesync(ts1: i64) -> Vec<u8> {
        let msg = Outgoing::Timesync(Timesync {
            tc1: 0,
            ts1,
            target: Ids::BROADCAST,
        });
        frame(Ids::ONBOARD_COMPUTER, 1, MavlinkVersion::V2, &msg)
    }

    #[test]
    fn a_signed_frame_verifies_once_and_nothing_changed_or_replayed_does() {
        let mut signer = Signer::new(KEY, 3);
        let mut signed = timesync(42);
        let plain_len = signed.len();
        signer.sign(&mut signed, NOW, TIMESYNC_CRC_EXTRA);
        assert_eq!(signed.len(), plain_len + SIGNATURE_LEN);
        assert_eq!(signed[2] & SIGNED, SIGNED);
        assert_eq!(signed[plain_len], 3, "the link id");
        let end = plain_len - 2;
        assert_eq!(
            signed[end..plain_len],
            frame_crc(&signed[1..end], TIMESYNC_CRC_EXTRA).to_le_bytes(),
            "the checksum covers the flag"
        );
        let mut verifier = Verifier::new(KEY, SigningPolicy::Require);
        assert_eq!(verifier.check(&signed, NOW), Ok(()));
        assert_eq!(verifier.check(&signed, NOW), Err(Refused::Replayed));
        let mut flipped = signed.clone();
        flipped[12] ^= 0x10;
        assert_eq!(verifier.check(&flipped, NOW), Err(Refused::BadSignature));
        let mut other = Verifier::new(SigningKey([8; 32]), SigningPolicy::Sign);
        assert_eq!(other.check(&signed, NOW), Err(Refused::BadSignature));
        // Two frames in one tick still go up.
        let mut a = timesync(1);
        let mut b = timesync(2);
        signer.sign(&mut a, NOW, TIMESYNC_CRC_EXTRA);
        signer.sign(&mut b, NOW, TIMESYNC_CRC_EXTRA);
        assert_eq!(verifier.check(&a, NOW), Ok(()));
        assert_eq!(verifier.check(&b, NOW), Ok(()));
        assert_eq!(verifier.check(&a, NOW), Err(Refused::Replayed));
        let stats = verifier.stats();
        assert_eq!(
            (stats.verified, stats.replayed, stats.bad_signature),
            (3, 2, 1)
        );
    }

    #[test]
    fn unsigned_frames_are_taken_under_sign_and_refused_under_require() {
        let plain = timesync(7);
        let mut sign = Verifier::new(KEY, SigningPolicy::Sign);
        assert_eq!(sign.check(&plain, NOW), Ok(()));
        let mut require = Verifier::new(KEY, SigningPolicy::Require);
        assert_eq!(require.check(&plain, NOW), Err(Refused::Unsigned));
        assert_eq!(
            (sign.stats().unsigned_taken, require.stats().unsigned),
            (1, 1)
        );
        // A v1 frame is never signed.
        let mut v1 = frame(
            Ids::ONBOARD_COMPUTER,
            1,
            MavlinkVersion::V1,
            &Outgoing::Heartbeat,
        );
        let before = v1.clone();
        Signer::new(KEY, 0).sign(&mut v1, NOW, 50);
        assert_eq!(v1, before);
        assert_eq!(require.check(&v1, NOW), Err(Refused::Unsigned));
    }

    #[test]
    fn a_new_stream_must_be_within_a_minute_and_streams_are_bounded() {
        let mut verifier = Verifier::new(KEY, SigningPolicy::Require);
        let mut old = timesync(1);
        Signer::new(KEY, 0).sign(&mut old, NOW - 61_000_000, TIMESYNC_CRC_EXTRA);
        assert_eq!(verifier.check(&old, NOW), Err(Refused::Stale));
        let mut recent = timesync(1);
        Signer::new(KEY, 0).sign(&mut recent, NOW - 59_000_000, TIMESYNC_CRC_EXTRA);
        assert_eq!(verifier.check(&recent, NOW), Ok(()));
        // Thousands of link ids × systems: at most MAX_STREAMS remembered.
        for n in 0..2000u32 {
            let mut f = timesync(i64::from(n));
            f[5] = (n % 250) as u8; // system id, before signing
            let crc_end = f.len() - 2;
            let crc = frame_crc(&f[1..crc_end], TIMESYNC_CRC_EXTRA);
            f[crc_end..].copy_from_slice(&crc.to_le_bytes());
            Signer::new(KEY, (n / 250) as u8).sign(&mut f, NOW, TIMESYNC_CRC_EXTRA);
            assert_eq!(verifier.check(&f, NOW), Ok(()));
            assert!(verifier.streams.len() <= MAX_STREAMS);
        }
    }

    #[test]
    fn mavlink_time_counts_ten_microseconds_from_2015() {
        assert_eq!(mavlink_time(EPOCH_UNIX_S * 1_000_000), 0);
        assert_eq!(mavlink_time(EPOCH_UNIX_S * 1_000_000 + 1_000_000), 100_000);
        assert_eq!(mavlink_time(0), 0);
    }
}
