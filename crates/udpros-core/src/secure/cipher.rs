//! The AEAD under a secure link's datagrams and stream records, chosen per link.
//!
//! Two ciphers, both from `ring` (BoringSSL's constant-time assembly):
//!
//! - [`Cipher::Aes256Gcm`] where both ends have AES and carry-less multiply instructions
//!   (x86-64 with AES-NI and PCLMULQDQ, ARMv8 with its crypto extensions): about 0.4 µs
//!   a 1472-byte datagram, a tenth of what the pure-Rust ChaCha20-Poly1305 cost.
//! - [`Cipher::ChaCha20Poly1305`] otherwise (a Raspberry Pi 4 has no AES instructions,
//!   and AES in software is both slow and harder to keep constant-time).
//!
//! Each end names its choice in its connection header; the link takes AES-256-GCM only
//! when both name it ([`Cipher::agree`]). The field is covered by the header's proof, so
//! nobody on the path changes the choice, and the cipher is in the keys' derivation too.
//!
//! What a seal does to a buffer is the same under both: the bytes before `aad_len` are
//! associated data, the rest is encrypted in place ([`Mode::Encrypt`]) or, in
//! [`Mode::Authenticate`], the whole buffer is associated data of an empty message (a
//! tag, and the payload left as it is).

use super::Mode;
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey};
use std::fmt;
use std::str::FromStr;

/// Bytes of a tag, under either cipher.
pub(super) const TAG_LEN: usize = 16;

/// An AEAD a link can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cipher {
    /// AES-256 in Galois/counter mode: the fastest where the CPU has AES instructions.
    Aes256Gcm,
    /// ChaCha20 with Poly1305: fast everywhere, the choice when either end lacks AES
    /// instructions (and what a header that names no cipher means).
    ChaCha20Poly1305,
}

impl Cipher {
    /// The cipher this host would rather use: AES-256-GCM where the CPU has AES and
    /// carry-less multiply instructions, ChaCha20-Poly1305 elsewhere.
    pub fn of_this_host() -> Cipher {
        if aes_in_hardware() {
            Cipher::Aes256Gcm
        } else {
            Cipher::ChaCha20Poly1305
        }
    }

    /// What a link whose ends would rather use `ours` and `theirs` uses: AES-256-GCM when
    /// both have it in hardware, ChaCha20-Poly1305 (fast at both) otherwise.
    pub fn agree(ours: Cipher, theirs: Cipher) -> Cipher {
        if ours == theirs {
            ours
        } else {
            Cipher::ChaCha20Poly1305
        }
    }

    /// The cipher's name in a connection header.
    pub fn as_str(self) -> &'static str {
        match self {
            Cipher::Aes256Gcm => "aes256gcm",
            Cipher::ChaCha20Poly1305 => "chacha20poly1305",
        }
    }

    fn algorithm(self) -> &'static ring::aead::Algorithm {
        match self {
            Cipher::Aes256Gcm => &ring::aead::AES_256_GCM,
            Cipher::ChaCha20Poly1305 => &ring::aead::CHACHA20_POLY1305,
        }
    }
}

impl FromStr for Cipher {
    type Err = String;

    fn from_str(text: &str) -> Result<Cipher, String> {
        match text {
            "aes256gcm" => Ok(Cipher::Aes256Gcm),
            "chacha20poly1305" => Ok(Cipher::ChaCha20Poly1305),
            other => Err(format!("cipher {other:?}: aes256gcm or chacha20poly1305")),
        }
    }
}

impl fmt::Display for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(target_arch = "x86_64")]
fn aes_in_hardware() -> bool {
    std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("pclmulqdq")
}

#[cfg(target_arch = "aarch64")]
fn aes_in_hardware() -> bool {
    std::arch::is_aarch64_feature_detected!("aes")
        && std::arch::is_aarch64_feature_detected!("pmull")
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn aes_in_hardware() -> bool {
    false
}

/// One direction's key under its link's cipher and mode: seals or opens message number
/// `counter` (the nonce: each key seals one direction of one link, so none repeats).
pub(super) struct SealingKey {
    key: LessSafeKey,
    cipher: Cipher,
    mode: Mode,
}

impl fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealingKey")
            .field("cipher", &self.cipher)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// A tag did not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BadTag;

impl SealingKey {
    pub(super) fn new(key: &[u8; 32], cipher: Cipher, mode: Mode) -> SealingKey {
        // Both algorithms take 32-byte keys: building the key cannot fail.
        let unbound = UnboundKey::new(cipher.algorithm(), key).expect("a 32-byte key");
        SealingKey {
            key: LessSafeKey::new(unbound),
            cipher,
            mode,
        }
    }

    fn nonce(counter: u64) -> Nonce {
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&counter.to_be_bytes());
        Nonce::assume_unique_for_key(nonce)
    }

    /// Seals `buf` in place as message `counter`: its first `aad_len` bytes are associated
    /// data; the tag comes back.
    pub(super) fn seal(&self, counter: u64, aad_len: usize, buf: &mut [u8]) -> [u8; TAG_LEN] {
        let nonce = Self::nonce(counter);
        // A datagram or a TCPROS frame (below 4 GB) is far within both ciphers' limits
        // per nonce: sealing cannot fail.
        let tag = match self.mode {
            Mode::Encrypt => {
                let (aad, body) = buf.split_at_mut(aad_len.min(buf.len()));
                self.key
                    .seal_in_place_separate_tag(nonce, Aad::from(&*aad), body)
            }
            Mode::Authenticate => {
                self.key
                    .seal_in_place_separate_tag(nonce, Aad::from(&*buf), &mut [])
            }
        }
        .expect("a message within the AEAD's limits");
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        out
    }

    /// Opens message `counter` against `tag`. In [`Mode::Encrypt`] `body` is decrypted in
    /// place under the associated data `aad`; in [`Mode::Authenticate`] the tag covers
    /// `aad` alone (pass everything that was sealed as `aad`) and `body` is not touched.
    /// The two need not be one buffer, so a receiver opens straight into the copy it
    /// keeps.
    pub(super) fn open(
        &self,
        counter: u64,
        aad: &[u8],
        body: &mut [u8],
        tag: &[u8],
    ) -> Result<(), BadTag> {
        let nonce = Self::nonce(counter);
        let tag: [u8; TAG_LEN] = tag.try_into().map_err(|_| BadTag)?;
        let tag = Tag::from(tag);
        let body = match self.mode {
            Mode::Encrypt => body,
            Mode::Authenticate => &mut [],
        };
        self.key
            .open_in_place_separate_tag(nonce, Aad::from(aad), tag, body, 0..)
            .map(|_| ())
            .map_err(|_| BadTag)
    }

    /// What sealing does to payloads.
    pub(super) fn mode(&self) -> Mode {
        self.mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_takes_aes_only_when_both_ends_have_it() {
        use Cipher::*;
        assert_eq!(Cipher::agree(Aes256Gcm, Aes256Gcm), Aes256Gcm);
        assert_eq!(Cipher::agree(Aes256Gcm, ChaCha20Poly1305), ChaCha20Poly1305);
        assert_eq!(Cipher::agree(ChaCha20Poly1305, Aes256Gcm), ChaCha20Poly1305);
        assert_eq!(
            Cipher::agree(ChaCha20Poly1305, ChaCha20Poly1305),
            ChaCha20Poly1305
        );
        for cipher in [Aes256Gcm, ChaCha20Poly1305] {
            assert_eq!(cipher.to_string().parse::<Cipher>(), Ok(cipher));
        }
        assert!("aes128gcm".parse::<Cipher>().is_err());
    }

    /// Under each cipher and mode: what is sealed opens with the same key and counter,
    /// and fails with another key, another counter, another cipher, or a byte changed.
    #[test]
    fn each_cipher_opens_what_it_sealed_and_nothing_else() {
        let plain: Vec<u8> = (0..100u8).collect();
        for cipher in [Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305] {
            for mode in [Mode::Encrypt, Mode::Authenticate] {
                let key = SealingKey::new(&[3; 32], cipher, mode);
                let mut buf = plain.clone();
                let tag = key.seal(5, 10, &mut buf);
                assert_eq!(buf[..10], plain[..10], "the associated data stays readable");
                assert_eq!(
                    buf == plain,
                    mode == Mode::Authenticate,
                    "{cipher} {mode}: encrypted only when asked"
                );
                // Opened as a receiver does: the associated data apart from the body.
                let open = |key: &SealingKey, counter, sealed: &[u8], tag: &[u8]| {
                    let mut body = sealed[10..].to_vec();
                    let aad = match mode {
                        Mode::Encrypt => &sealed[..10],
                        Mode::Authenticate => sealed,
                    };
                    key.open(counter, aad, &mut body, tag).map(|()| body)
                };
                assert_eq!(open(&key, 5, &buf, &tag), Ok(plain[10..].to_vec()));
                assert_eq!(open(&key, 6, &buf, &tag), Err(BadTag));
                let other = SealingKey::new(&[4; 32], cipher, mode);
                assert_eq!(open(&other, 5, &buf, &tag), Err(BadTag));
                let other_cipher = match cipher {
                    Cipher::Aes256Gcm => Cipher::ChaCha20Poly1305,
                    Cipher::ChaCha20Poly1305 => Cipher::Aes256Gcm,
                };
                let other = SealingKey::new(&[3; 32], other_cipher, mode);
                assert_eq!(open(&other, 5, &buf, &tag), Err(BadTag));
                for byte in [0, 9, 10, 99] {
                    let mut changed = buf.clone();
                    changed[byte] ^= 0x40;
                    assert_eq!(open(&key, 5, &changed, &tag), Err(BadTag));
                }
                assert_eq!(open(&key, 5, &buf, &tag[..15]), Err(BadTag));
            }
        }
    }
}
