//! Sealed TCPROS streams. After a secure handshake each frame travels as a record:
//!
//! ```text
//! u32 LE length (body + 16) │ body (encrypted, or as it is in auth mode) │ tag (16)
//! ```
//!
//! The record's nonce is its number in its direction: TCP delivers in order and loses
//! nothing, so it is not sent, and a record dropped, repeated, reordered or spliced in on
//! the way fails its tag; the stream is then closed (a TCP stream, unlike a datagram
//! link, cannot skip a bad record). The length prefix is the associated data, so nothing
//! of a record can be changed. 16 bytes per message; the keys are the link's own
//! ([`LinkKeys`](super::LinkKeys)), from a handshake named by [`tcp_context`].

use super::cipher::{Cipher, SealingKey};
use super::Mode;
use std::fmt;

/// Bytes a record adds to its frame: the tag.
pub const TAG_LEN: usize = super::cipher::TAG_LEN;

/// What names a TCPROS link in its keys' derivation (a datagram link's context names its
/// connection id instead: the two never share keys).
pub fn tcp_context(topic: &str) -> Vec<u8> {
    format!("tcpros topic {topic}").into_bytes()
}

/// Seals one direction of a stream.
pub struct StreamSealer {
    key: SealingKey,
    next: u64,
}

impl fmt::Debug for StreamSealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamSealer")
            .field("key", &self.key)
            .field("sealed", &self.next)
            .finish_non_exhaustive()
    }
}

impl StreamSealer {
    /// A sealer under `key` (this direction's key of the link) and the link's cipher.
    pub fn new(key: &[u8; 32], cipher: Cipher, mode: Mode) -> StreamSealer {
        StreamSealer {
            key: SealingKey::new(key, cipher, mode),
            next: 0,
        }
    }

    /// Appends the record of `body` (a message, or a header) to `out`.
    pub fn seal_into(&mut self, body: &[u8], out: &mut Vec<u8>) {
        let length = u32::try_from(body.len() + TAG_LEN).unwrap_or(u32::MAX);
        let start = out.len();
        out.extend_from_slice(&length.to_le_bytes());
        out.extend_from_slice(body);
        let tag = self.key.seal(self.next, 4, &mut out[start..]);
        self.next += 1;
        out.extend_from_slice(&tag);
    }

    /// Appends the record of the TCPROS frame `frame` (its u32 length, then its body).
    pub fn seal_frame_into(&mut self, frame: &[u8], out: &mut Vec<u8>) {
        self.seal_into(frame.get(4..).unwrap_or_default(), out);
    }

    /// Records sealed so far.
    pub fn sealed(&self) -> u64 {
        self.next
    }
}

/// Why a stream's record was refused: the stream is to be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRefused {
    /// Shorter than a tag.
    TooShort,
    /// The tag does not hold: forged, changed, dropped, repeated or reordered.
    BadTag,
}

impl fmt::Display for StreamRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StreamRefused::TooShort => "a sealed record shorter than its tag",
            StreamRefused::BadTag => {
                "a sealed record failed its tag (forged, changed, or out of order)"
            }
        })
    }
}

impl std::error::Error for StreamRefused {}

/// Opens one direction of a stream.
pub struct StreamOpener {
    key: SealingKey,
    next: u64,
    /// In [`Mode::Authenticate`]: a record's length and body laid end to end, as its tag
    /// covers them (kept for its allocation).
    authenticated: Vec<u8>,
}

impl fmt::Debug for StreamOpener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamOpener")
            .field("key", &self.key)
            .field("opened", &self.next)
            .finish_non_exhaustive()
    }
}

impl StreamOpener {
    /// An opener under `key` (the sending end's key of this direction) and the link's
    /// cipher.
    pub fn new(key: &[u8; 32], cipher: Cipher, mode: Mode) -> StreamOpener {
        StreamOpener {
            key: SealingKey::new(key, cipher, mode),
            next: 0,
            authenticated: Vec::new(),
        }
    }

    /// The body of the record `record` (what followed its length prefix), or why it is
    /// refused. A refused record ends the stream: the next one's number is unknown.
    pub fn open(&mut self, record: &[u8]) -> Result<Vec<u8>, StreamRefused> {
        let mut out = record.to_vec();
        let body = self.open_slice(&mut out)?;
        out.truncate(body);
        Ok(out)
    }

    /// [`open`](Self::open) where the record lies: decrypted in place, the tag cut off
    /// (a megabyte message is neither copied nor allocated again).
    pub fn open_in_place(&mut self, record: &mut bytes::BytesMut) -> Result<(), StreamRefused> {
        let body = self.open_slice(record)?;
        record.truncate(body);
        Ok(())
    }

    /// Opens `record` in place; the length of its body (the rest is the tag).
    fn open_slice(&mut self, record: &mut [u8]) -> Result<usize, StreamRefused> {
        if record.len() < TAG_LEN {
            return Err(StreamRefused::TooShort);
        }
        let length = u32::try_from(record.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes();
        let body_len = record.len() - TAG_LEN;
        let (body, tag) = record.split_at_mut(body_len);
        let aad = match self.key.mode() {
            Mode::Encrypt => &length[..],
            // The length prefix and the body, as sealed, are the associated data.
            Mode::Authenticate => {
                self.authenticated.clear();
                self.authenticated.extend_from_slice(&length);
                self.authenticated.extend_from_slice(body);
                &self.authenticated[..]
            }
        };
        self.key
            .open(self.next, aad, body, tag)
            .map_err(|_| StreamRefused::BadTag)?;
        self.next += 1;
        Ok(body_len)
    }

    /// Records opened so far.
    pub fn opened(&self) -> u64 {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [3; 32];
    const AES: Cipher = Cipher::Aes256Gcm;

    /// The records in `bytes`, each without its length prefix.
    fn records(mut bytes: &[u8]) -> Vec<&[u8]> {
        let mut out = Vec::new();
        while bytes.len() >= 4 {
            let len = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
            out.push(&bytes[4..4 + len]);
            bytes = &bytes[4 + len..];
        }
        out
    }

    #[test]
    fn records_open_in_order_to_what_was_sealed_in_both_modes() {
        let both = [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305];
        for (cipher, mode) in both
            .into_iter()
            .flat_map(|c| [Mode::Encrypt, Mode::Authenticate].map(|m| (c, m)))
        {
            let mut sealer = StreamSealer::new(&KEY, cipher, mode);
            let mut wire = Vec::new();
            let bodies: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100 * i as usize]).collect();
            for body in &bodies {
                let mut frame = (body.len() as u32).to_le_bytes().to_vec();
                frame.extend_from_slice(body);
                sealer.seal_frame_into(&frame, &mut wire);
            }
            assert_eq!(
                wire.len(),
                bodies.iter().map(|b| b.len() + 4 + TAG_LEN).sum()
            );
            let readable = wire.windows(100).any(|w| w == [4u8; 100].as_slice());
            assert_eq!(readable, mode == Mode::Authenticate, "{mode}");
            let mut opener = StreamOpener::new(&KEY, cipher, mode);
            let mut in_place = StreamOpener::new(&KEY, cipher, mode);
            for (record, body) in records(&wire).into_iter().zip(&bodies) {
                assert_eq!(&opener.open(record).unwrap(), body);
                let mut where_it_lies = bytes::BytesMut::from(record);
                in_place.open_in_place(&mut where_it_lies).unwrap();
                assert_eq!(&where_it_lies[..], &body[..]);
            }
            assert_eq!((opener.opened(), in_place.opened()), (5, 5));
        }
    }

    #[test]
    fn a_record_changed_dropped_repeated_or_under_another_key_fails() {
        let mut sealer = StreamSealer::new(&KEY, AES, Mode::Encrypt);
        let mut wire = Vec::new();
        for body in [b"one".as_slice(), b"two", b"three"] {
            sealer.seal_into(body, &mut wire);
        }
        let records = records(&wire);
        // Changed.
        let mut changed = records[0].to_vec();
        changed[0] ^= 1;
        assert_eq!(
            StreamOpener::new(&KEY, AES, Mode::Encrypt).open(&changed),
            Err(StreamRefused::BadTag)
        );
        // Dropped (the second first) and repeated.
        let mut opener = StreamOpener::new(&KEY, AES, Mode::Encrypt);
        assert_eq!(opener.open(records[1]), Err(StreamRefused::BadTag));
        assert_eq!(opener.open(records[0]).unwrap(), b"one");
        assert_eq!(opener.open(records[0]), Err(StreamRefused::BadTag));
        assert_eq!(opener.open(records[1]).unwrap(), b"two");
        // Another key, the other mode, the other cipher, a stub.
        assert!(StreamOpener::new(&[4; 32], AES, Mode::Encrypt)
            .open(records[0])
            .is_err());
        assert!(StreamOpener::new(&KEY, AES, Mode::Authenticate)
            .open(records[0])
            .is_err());
        assert!(
            StreamOpener::new(&KEY, Cipher::ChaCha20Poly1305, Mode::Encrypt)
                .open(records[0])
                .is_err()
        );
        assert_eq!(
            StreamOpener::new(&KEY, AES, Mode::Encrypt).open(&[0; 15]),
            Err(StreamRefused::TooShort)
        );
    }
}
