//! The graph's key: 32 secret bytes, kept in a key file as one line of hex.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

/// Bytes of a graph key.
pub const KEY_LEN: usize = 32;

/// The first word of a key file's key line: it says what the file is, and lets the
/// format change later without a guess.
const KEY_LINE_PREFIX: &str = "udpros-key-v1";

/// The secret a graph (or a fleet) shares. Its `Debug` shows only its [`KeyId`], so that
/// a key never reaches a log.
#[derive(Clone, PartialEq, Eq)]
pub struct GraphKey([u8; KEY_LEN]);

/// A key's public name: 8 bytes of an HMAC under the key, so peers can say "another key"
/// rather than "no key" without showing anything of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId(pub [u8; 8]);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&to_hex(&self.0))
    }
}

/// Why a key file's text is no key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// No line starting with `udpros-key-v1`.
    NoKeyLine,
    /// Two key lines: which one is meant cannot be told.
    TwoKeys,
    /// The key is not 64 hex digits.
    BadKey,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::NoKeyLine => write!(
                f,
                "no key in the file: a line '{KEY_LINE_PREFIX} <64 hex digits>' (udpros key new FILE makes one)"
            ),
            KeyError::TwoKeys => f.write_str("two keys in the file: keep one"),
            KeyError::BadKey => write!(f, "the key is not {} hex digits", 2 * KEY_LEN),
        }
    }
}

impl std::error::Error for KeyError {}

impl GraphKey {
    /// A key of these bytes (from the OS's random source: `udpros key new`).
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> GraphKey {
        GraphKey(bytes)
    }

    /// The key in a key file's text: one line `udpros-key-v1 <64 hex digits>`; blank
    /// lines and lines starting with `#` are comments.
    pub fn parse(text: &str) -> Result<GraphKey, KeyError> {
        let mut found = None;
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some(hex) = line.strip_prefix(KEY_LINE_PREFIX) else {
                continue;
            };
            if found.is_some() {
                return Err(KeyError::TwoKeys);
            }
            let bytes = from_hex(hex.trim()).ok_or(KeyError::BadKey)?;
            found = Some(bytes.try_into().map_err(|_| KeyError::BadKey)?);
        }
        found.map(GraphKey).ok_or(KeyError::NoKeyLine)
    }

    /// The text of a key file holding this key, with a comment that says what it is.
    pub fn file_text(&self) -> String {
        format!(
            "# A udpros graph key (id {}): every node holding it may join the secure graph.\n\
             # Keep it readable by its owner only.\n{KEY_LINE_PREFIX} {}\n",
            self.id(),
            to_hex(&self.0)
        )
    }

    /// The key's public name.
    pub fn id(&self) -> KeyId {
        let tag = self.mac(&[b"udpros key id"]);
        let mut id = [0u8; 8];
        id.copy_from_slice(&tag[..8]);
        KeyId(id)
    }

    /// HMAC-SHA256 under the key, to be fed.
    pub(crate) fn hmac(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length")
    }

    /// HMAC-SHA256 under the key of `parts`, one after another.
    pub(crate) fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = self.hmac();
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    /// A key for another protocol, derived from this one and named by `purpose` (HMAC
    /// under the graph key): MAVLink signing's secret comes from the graph key this way,
    /// so one key file secures both links and neither key opens the other's traffic.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        self.mac(&[b"udpros derived key v1\0", purpose.as_bytes()])
    }

    pub(super) fn secret(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for GraphKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GraphKey(id {})", self.id())
    }
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

pub(crate) fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || text.len() > 1024 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    text.as_bytes()
        .chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_reads_back_the_key_it_was_written_with() {
        let key = GraphKey::from_bytes(std::array::from_fn(|i| i as u8 * 7));
        let text = key.file_text();
        assert_eq!(GraphKey::parse(&text), Ok(key.clone()));
        assert!(text.contains(&key.id().to_string()));
        assert!(
            !format!("{key:?}").contains(&to_hex(key.secret())),
            "Debug shows the id only"
        );
        let upper = format!(
            "\n  # a comment\n{KEY_LINE_PREFIX} {}  \n",
            to_hex(key.secret()).to_uppercase()
        );
        assert_eq!(GraphKey::parse(&upper), Ok(key));
    }

    #[test]
    fn a_file_that_is_no_key_is_refused_by_reason() {
        let hex = "ab".repeat(KEY_LEN);
        assert_eq!(GraphKey::parse(""), Err(KeyError::NoKeyLine));
        assert_eq!(GraphKey::parse(&hex), Err(KeyError::NoKeyLine), "no prefix");
        let short = format!("{KEY_LINE_PREFIX} {}", "ab".repeat(31));
        assert_eq!(GraphKey::parse(&short), Err(KeyError::BadKey));
        let odd = format!("{KEY_LINE_PREFIX} {hex}a");
        assert_eq!(GraphKey::parse(&odd), Err(KeyError::BadKey));
        let not_hex = format!("{KEY_LINE_PREFIX} {}", "zz".repeat(KEY_LEN));
        assert_eq!(GraphKey::parse(&not_hex), Err(KeyError::BadKey));
        let two = format!("{KEY_LINE_PREFIX} {hex}\n{KEY_LINE_PREFIX} {hex}\n");
        assert_eq!(GraphKey::parse(&two), Err(KeyError::TwoKeys));
        // A huge file is read line by line; a huge line is refused without decoding it.
        let huge = format!("{KEY_LINE_PREFIX} {}", "ab".repeat(1 << 20));
        assert_eq!(GraphKey::parse(&huge), Err(KeyError::BadKey));
    }

    #[test]
    fn different_keys_have_different_ids() {
        let a = GraphKey::from_bytes([1; KEY_LEN]);
        let b = GraphKey::from_bytes([2; KEY_LEN]);
        assert_ne!(a.id(), b.id());
        assert_eq!(a.id(), a.clone().id());
        assert_eq!(a.id().to_string().len(), 16);
    }
}
