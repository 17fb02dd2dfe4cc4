//! Sealed datagrams: each carries its direction's counter and an AEAD tag, and is taken
//! once.
//!
//! ```text
//! UDPROS header (8) │ counter (8, big-endian) │ body (as sent, or encrypted) │ tag (16)
//! ```
//!
//! The UDPROS header stays readable (the receiver finds its link by it) and is
//! authenticated with everything else. The counter is the AEAD's nonce under a key used
//! in one direction of one link only ([`LinkKeys`](super::LinkKeys)), so a nonce is never
//! used twice under a key. A datagram that fails its tag is refused before anything reads
//! it: to FEC it is an erasure like a lost one, which repair shards (sealed the same way)
//! rebuild.

use super::cipher::{Cipher, SealingKey};
use super::Mode;
use std::fmt;
use std::ops::Range;

/// Bytes of the UDPROS header at the front of every datagram (`udpros::HEADER_LEN`;
/// written here so that sealing sits below the link that uses it).
pub const HEADER_LEN: usize = 8;
/// Bytes of the counter after the header.
pub const COUNTER_LEN: usize = 8;
/// Bytes of the tag at the end.
pub const TAG_LEN: usize = super::cipher::TAG_LEN;
/// What sealing adds to a datagram: the largest body a link sends is this much smaller.
pub const OVERHEAD: usize = COUNTER_LEN + TAG_LEN;

/// Counters a receiver remembers behind the highest it has taken: a datagram reordered
/// further back than this is refused as too old. 4096 datagrams are 6 MB of 1472-byte
/// datagrams, far beyond what a path reorders.
pub const REPLAY_WINDOW: u64 = 4096;

/// Seals the datagrams of one direction of a link.
pub struct Sealer {
    key: SealingKey,
    next: u64,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer")
            .field("key", &self.key)
            .field("sealed", &self.next)
            .finish_non_exhaustive()
    }
}

impl Sealer {
    /// A sealer under `key` (one direction's key of a link) and the link's cipher.
    pub fn new(key: &[u8; 32], cipher: Cipher, mode: Mode) -> Sealer {
        Sealer {
            key: SealingKey::new(key, cipher, mode),
            next: 0,
        }
    }

    /// Appends `datagram` (a UDPROS header and its body) to `out`, sealed: [`OVERHEAD`]
    /// bytes longer. A datagram shorter than a header is appended as it is (nothing
    /// sends one).
    pub fn seal_into(&mut self, datagram: &[u8], out: &mut Vec<u8>) {
        if datagram.len() < HEADER_LEN {
            out.extend_from_slice(datagram);
            return;
        }
        let counter = self.next;
        self.next += 1;
        let start = out.len();
        out.extend_from_slice(&datagram[..HEADER_LEN]);
        out.extend_from_slice(&counter.to_be_bytes());
        out.extend_from_slice(&datagram[HEADER_LEN..]);
        let tag = self
            .key
            .seal(counter, HEADER_LEN + COUNTER_LEN, &mut out[start..]);
        out.extend_from_slice(&tag);
    }

    /// `datagram`, sealed.
    pub fn seal(&mut self, datagram: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(datagram.len() + OVERHEAD);
        self.seal_into(datagram, &mut out);
        out
    }

    /// Datagrams sealed so far.
    pub fn sealed(&self) -> u64 {
        self.next
    }
}

/// Why a datagram was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Shorter than a header, a counter and a tag.
    TooShort,
    /// Its tag does not match: forged, corrupted, of another link, or plain.
    BadTag,
    /// Its counter was taken already.
    Replayed,
    /// Its counter is further behind the highest taken than [`REPLAY_WINDOW`].
    TooOld,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::TooShort => "too short to be sealed",
            Refusal::BadTag => "its tag does not match",
            Refusal::Replayed => "replayed",
            Refusal::TooOld => "older than the replay window",
        })
    }
}

impl std::error::Error for Refusal {}

/// Datagrams opened and refused, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenStats {
    /// Opened and taken.
    pub opened: u64,
    /// Refused: too short.
    pub too_short: u64,
    /// Refused: the tag did not match.
    pub bad_tag: u64,
    /// Refused: a counter taken already.
    pub replayed: u64,
    /// Refused: behind the window.
    pub too_old: u64,
}

impl OpenStats {
    /// Every refusal.
    pub fn refused(&self) -> u64 {
        self.too_short + self.bad_tag + self.replayed + self.too_old
    }

    fn count(&mut self, refusal: Refusal) {
        *match refusal {
            Refusal::TooShort => &mut self.too_short,
            Refusal::BadTag => &mut self.bad_tag,
            Refusal::Replayed => &mut self.replayed,
            Refusal::TooOld => &mut self.too_old,
        } += 1;
    }
}

/// The counters a receiver has taken: the highest, and which of the [`REPLAY_WINDOW`]
/// before it (a ring of bits, as RFC 6479 keeps it).
#[derive(Debug, Clone)]
pub struct ReplayWindow {
    highest: Option<u64>,
    seen: Box<[u64; (REPLAY_WINDOW / 64) as usize]>,
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            highest: None,
            seen: Box::new([0; (REPLAY_WINDOW / 64) as usize]),
        }
    }
}

impl ReplayWindow {
    fn bit(counter: u64) -> (usize, u64) {
        let slot = counter % REPLAY_WINDOW;
        ((slot / 64) as usize, 1 << (slot % 64))
    }

    /// Whether `counter` may be taken (checked before the tag, so a replay costs no
    /// decryption; taken only after it).
    pub fn check(&self, counter: u64) -> Result<(), Refusal> {
        let Some(highest) = self.highest else {
            return Ok(());
        };
        if counter > highest {
            return Ok(());
        }
        if highest - counter >= REPLAY_WINDOW {
            return Err(Refusal::TooOld);
        }
        let (word, mask) = Self::bit(counter);
        match self.seen[word] & mask {
            0 => Ok(()),
            _ => Err(Refusal::Replayed),
        }
    }

    /// Takes `counter` (which [`check`](Self::check) allowed).
    pub fn take(&mut self, counter: u64) {
        if self.highest.is_none_or(|highest| counter > highest) {
            // The counters from the old highest on are new: their ring slots, last used a
            // window ago, are cleared first.
            let from = self.highest.map_or(counter, |highest| highest + 1);
            if counter - from >= REPLAY_WINDOW {
                self.seen.fill(0);
            } else {
                for new in from..=counter {
                    let (word, mask) = Self::bit(new);
                    self.seen[word] &= !mask;
                }
            }
            self.highest = Some(counter);
        }
        let (word, mask) = Self::bit(counter);
        self.seen[word] |= mask;
    }
}

/// Opens the datagrams of one direction of a link.
pub struct Opener {
    key: SealingKey,
    window: ReplayWindow,
    stats: OpenStats,
}

impl fmt::Debug for Opener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opener")
            .field("key", &self.key)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Opener {
    /// An opener under `key` (the sending end's key of this direction) and the link's
    /// cipher.
    pub fn new(key: &[u8; 32], cipher: Cipher, mode: Mode) -> Opener {
        Opener {
            key: SealingKey::new(key, cipher, mode),
            window: ReplayWindow::default(),
            stats: OpenStats::default(),
        }
    }

    /// The datagram inside `sealed` (its UDPROS header and its body, decrypted), or why
    /// it is refused (counted in [`stats`](Self::stats)).
    pub fn open(&mut self, sealed: &[u8]) -> Result<Vec<u8>, Refusal> {
        let mut out = sealed.to_vec();
        let plain = self.open_in_place(&mut out)?;
        out.truncate(plain.end);
        out.drain(..plain.start);
        Ok(out)
    }

    /// [`open`](Self::open) where the datagram lies: the body is decrypted in place and
    /// the header moved up against it, so the plain datagram is `sealed[range]` (a
    /// receiver that owns its read buffer copies nothing and allocates nothing).
    pub fn open_in_place(&mut self, sealed: &mut [u8]) -> Result<Range<usize>, Refusal> {
        let opened = self.try_open_in_place(sealed);
        match &opened {
            Ok(_) => self.stats.opened += 1,
            Err(refusal) => self.stats.count(*refusal),
        }
        opened
    }

    fn try_open_in_place(&mut self, sealed: &mut [u8]) -> Result<Range<usize>, Refusal> {
        if sealed.len() < HEADER_LEN + OVERHEAD {
            return Err(Refusal::TooShort);
        }
        let end = sealed.len() - TAG_LEN;
        let mut counter = [0u8; COUNTER_LEN];
        counter.copy_from_slice(&sealed[HEADER_LEN..HEADER_LEN + COUNTER_LEN]);
        let counter = u64::from_be_bytes(counter);
        self.window.check(counter)?;
        let (covered, tag) = sealed.split_at_mut(end);
        let opened = match self.key.mode() {
            Mode::Encrypt => {
                let (front, body) = covered.split_at_mut(HEADER_LEN + COUNTER_LEN);
                self.key.open(counter, front, body, tag)
            }
            // The whole datagram is the associated data of an empty message.
            Mode::Authenticate => self.key.open(counter, covered, &mut [], tag),
        };
        opened.map_err(|_| Refusal::BadTag)?;
        self.window.take(counter);
        // The header over the counter: header and body are then one run of bytes.
        sealed.copy_within(..HEADER_LEN, COUNTER_LEN);
        Ok(COUNTER_LEN..end)
    }

    /// What this opener took and refused.
    pub fn stats(&self) -> OpenStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [9; 32];
    const CIPHERS: [Cipher; 2] = [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305];
    const AES: Cipher = Cipher::Aes256Gcm;
    const MODES: [Mode; 2] = [Mode::Encrypt, Mode::Authenticate];

    fn datagram(n: u8, len: usize) -> Vec<u8> {
        let mut d = vec![0x11, 0, 0, 0, 0, n, 1, 0];
        d.extend((0..len).map(|i| i as u8 ^ n));
        d
    }

    #[test]
    fn the_header_left_readable_is_the_udpros_header() {
        assert_eq!(HEADER_LEN, crate::udpros::HEADER_LEN);
    }

    #[test]
    fn sealed_datagrams_open_to_what_was_sealed_in_both_modes() {
        for (cipher, mode) in CIPHERS.into_iter().flat_map(|c| MODES.map(|m| (c, m))) {
            let mut sealer = Sealer::new(&KEY, cipher, mode);
            let mut opener = Opener::new(&KEY, cipher, mode);
            let mut in_place = Opener::new(&KEY, cipher, mode);
            for (n, len) in [(0, 0), (1, 1), (2, 1464), (3, 65_000)] {
                let plain = datagram(n, len);
                let sealed = sealer.seal(&plain);
                assert_eq!(sealed.len(), plain.len() + OVERHEAD);
                assert_eq!(
                    sealed[..HEADER_LEN],
                    plain[..HEADER_LEN],
                    "the header stays readable"
                );
                let body = &sealed[HEADER_LEN + COUNTER_LEN..sealed.len() - TAG_LEN];
                match mode {
                    Mode::Authenticate => assert_eq!(body, &plain[HEADER_LEN..]),
                    Mode::Encrypt if len > 16 => assert_ne!(body, &plain[HEADER_LEN..]),
                    Mode::Encrypt => {}
                }
                let mut where_it_lies = sealed.clone();
                let range = in_place.open_in_place(&mut where_it_lies).unwrap();
                assert_eq!(where_it_lies[range], plain[..]);
                assert_eq!(opener.open(&sealed), Ok(plain));
            }
            assert_eq!(opener.stats().opened, 4);
            assert_eq!(sealer.sealed(), 4);
            // Cut short, its tag is read from the wrong bytes.
            let mut cut = sealer.seal(&datagram(9, 30));
            assert_eq!(in_place.open_in_place(&mut cut[..40]), Err(Refusal::BadTag));
            let stats = in_place.stats();
            assert_eq!((stats.opened, stats.refused()), (4, 1));
        }
    }

    #[test]
    fn a_changed_bit_anywhere_or_another_key_or_mode_or_cipher_is_refused() {
        for (cipher, mode) in CIPHERS.into_iter().flat_map(|c| MODES.map(|m| (c, m))) {
            let mut sealer = Sealer::new(&KEY, cipher, mode);
            let sealed = sealer.seal(&datagram(7, 100));
            for byte in 0..sealed.len() {
                let mut changed = sealed.clone();
                changed[byte] ^= 0x10;
                let mut opener = Opener::new(&KEY, cipher, mode);
                let refused = opener.open(&changed);
                // A changed counter may also fall behind nothing: it is still refused.
                assert_eq!(
                    refused,
                    Err(Refusal::BadTag),
                    "byte {byte}, {cipher} {mode}"
                );
            }
            let mut other_key = Opener::new(&[8; 32], cipher, mode);
            assert_eq!(other_key.open(&sealed), Err(Refusal::BadTag));
            let other = CIPHERS.into_iter().find(|&c| c != cipher).unwrap();
            let mut other_cipher = Opener::new(&KEY, other, mode);
            assert_eq!(other_cipher.open(&sealed), Err(Refusal::BadTag));
        }
        let sealed = Sealer::new(&KEY, AES, Mode::Encrypt).seal(&datagram(7, 100));
        assert_eq!(
            Opener::new(&KEY, AES, Mode::Authenticate).open(&sealed),
            Err(Refusal::BadTag)
        );
        // A plain datagram is refused by its (missing) tag, a runt by its length.
        let mut opener = Opener::new(&KEY, AES, Mode::Encrypt);
        assert_eq!(opener.open(&datagram(1, 200)), Err(Refusal::BadTag));
        assert_eq!(opener.open(&[0; 31]), Err(Refusal::TooShort));
        assert_eq!(opener.stats().refused(), 2);
        assert_eq!((opener.stats().bad_tag, opener.stats().too_short), (1, 1));
    }

    #[test]
    fn each_datagram_is_taken_once_in_any_order_within_the_window() {
        let mut sealer = Sealer::new(&KEY, AES, Mode::Authenticate);
        let sealed: Vec<Vec<u8>> = (0..6000)
            .map(|i| sealer.seal(&datagram(i as u8, 4)))
            .collect();
        let mut opener = Opener::new(&KEY, AES, Mode::Authenticate);
        // Out of order within the window: every one taken, each once.
        for i in [5, 3, 4, 0, 1, 2] {
            assert!(opener.open(&sealed[i]).is_ok(), "{i}");
        }
        for again in &sealed[..6] {
            assert_eq!(opener.open(again), Err(Refusal::Replayed));
        }
        // A jump ahead, then one just inside the window and one just outside it.
        assert!(opener.open(&sealed[5000]).is_ok());
        let inside = 5000 - (REPLAY_WINDOW as usize - 1);
        assert!(opener.open(&sealed[inside]).is_ok());
        assert_eq!(opener.open(&sealed[inside]), Err(Refusal::Replayed));
        assert_eq!(opener.open(&sealed[inside - 1]), Err(Refusal::TooOld));
        // Counters skipped by the jump are new, even where their ring slots were used.
        for (i, skipped) in sealed.iter().enumerate().take(5000).skip(4990) {
            assert!(opener.open(skipped).is_ok(), "{i}");
        }
        let stats = opener.stats();
        assert_eq!((stats.opened, stats.replayed, stats.too_old), (18, 7, 1));
    }

    #[test]
    fn the_window_agrees_with_a_set_of_every_counter_taken() {
        // A model check: random counters near a moving front, against a plain set.
        let mut window = ReplayWindow::default();
        let mut taken = std::collections::BTreeSet::new();
        let mut highest = 0u64;
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let counter = match x % 8 {
                0 => highest + 1 + x % 9000,
                _ => highest.saturating_sub(x % 5000),
            };
            let expected = if !taken.is_empty() && counter + REPLAY_WINDOW <= highest {
                Err(Refusal::TooOld)
            } else if taken.contains(&counter) {
                Err(Refusal::Replayed)
            } else {
                Ok(())
            };
            assert_eq!(
                window.check(counter),
                expected,
                "counter {counter}, highest {highest}"
            );
            if expected.is_ok() {
                window.take(counter);
                taken.insert(counter);
                highest = highest.max(counter);
            }
        }
    }
}
