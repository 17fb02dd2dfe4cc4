//! Secure links between udpros peers, without I/O: the graph's key, the proof that a
//! connection header was written by a holder of it, the keys of one link derived from
//! both ends' headers, and datagrams sealed and opened under them.
//!
//! A ROS1 graph trusts whoever reaches it. Here a graph (or a fleet) shares one secret,
//! a [`GraphKey`] of 32 random bytes in a key file. Nothing secret ever crosses the wire:
//!
//! - Each end of a link puts a fresh random nonce in its connection header and a
//!   [`proof`] over the whole header (an HMAC under the graph key), so each end knows the
//!   other holds the key, and a header replayed from another link fails: the proof covers
//!   the other end's nonce too.
//! - The link's keys come from the graph key and both nonces through HKDF
//!   ([`LinkKeys::derive`]): one key per direction, fresh for every link, so nothing
//!   sealed for one link opens on another, and a replayed handshake yields keys the
//!   replayer cannot use.
//! - Each datagram carries its direction's counter and an AEAD tag
//!   ([`datagram::Sealer`]) under the link's [`Cipher`] (AES-256-GCM where both ends have
//!   AES instructions, ChaCha20-Poly1305 otherwise); the receiver keeps a window of
//!   counters seen ([`datagram::ReplayWindow`]), so a datagram is taken once.
//!   [`Mode::Encrypt`] hides the payload too; [`Mode::Authenticate`] leaves it readable
//!   and costs only the MAC.
//!
//! The node library reads the key file (refusing one that others may read), draws the
//! nonces from the OS and applies the [`Policy`]; this module only computes.

mod cipher;
pub mod datagram;
pub mod handshake;
mod key;
pub mod proof;
pub mod request;
pub mod stream;

pub use cipher::Cipher;
pub use key::{GraphKey, KeyError, KeyId, KEY_LEN};

use hkdf::Hkdf;
use sha2::Sha256;
use std::fmt;
use std::str::FromStr;

/// Bytes of the random nonce each end of a link contributes.
pub const NONCE_LEN: usize = 16;

/// How a node treats peers about security.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Today's ROS1: plain links with everyone, no key needed.
    #[default]
    Off,
    /// Secure links with peers that can (udpros peers holding the same key), plain
    /// links with stock ROS nodes.
    Prefer,
    /// Secure links only: a plain peer is refused, and told why.
    Require,
}

impl FromStr for Policy {
    type Err = String;

    fn from_str(text: &str) -> Result<Policy, String> {
        match text {
            "off" => Ok(Policy::Off),
            "prefer" => Ok(Policy::Prefer),
            "require" => Ok(Policy::Require),
            other => Err(format!("security policy {other:?}: off, prefer or require")),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Off => "off",
            Policy::Prefer => "prefer",
            Policy::Require => "require",
        })
    }
}

/// What a secure link does to each datagram's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Mode {
    /// A tag proves who sent it and that it is whole; the payload stays readable (a
    /// tether the operator trusts not to be listened to, at the cost of a MAC only).
    Authenticate,
    /// The payload is encrypted as well. The default: the cost over
    /// [`Mode::Authenticate`] is small, and nobody on the path reads the topics.
    #[default]
    Encrypt,
}

impl Mode {
    /// The mode's name in a connection header.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Authenticate => "auth",
            Mode::Encrypt => "encrypt",
        }
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(text: &str) -> Result<Mode, String> {
        match text {
            "auth" | "authenticate" => Ok(Mode::Authenticate),
            "encrypt" => Ok(Mode::Encrypt),
            other => Err(format!("security mode {other:?}: auth or encrypt")),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The keys of one link, one per direction, derived from the graph key and both ends'
/// nonces: fresh for every link.
#[derive(Clone, PartialEq, Eq)]
pub struct LinkKeys {
    /// Seals what the publisher sends (data, repair, heartbeats).
    pub downstream: [u8; 32],
    /// Seals what the subscriber sends back (reports, feedback).
    pub upstream: [u8; 32],
}

impl fmt::Debug for LinkKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LinkKeys { .. }")
    }
}

impl LinkKeys {
    /// The keys of the link whose subscriber offered `subscriber_nonce` and whose
    /// publisher answered `publisher_nonce`, with `context` naming what the link is
    /// (its topic and connection id, say): HKDF-SHA256 with both nonces as the salt, so
    /// that one fresh nonce on either side makes all-new keys.
    pub fn derive(
        key: &GraphKey,
        subscriber_nonce: &[u8; NONCE_LEN],
        publisher_nonce: &[u8; NONCE_LEN],
        context: &[u8],
    ) -> LinkKeys {
        let mut salt = [0u8; 2 * NONCE_LEN];
        salt[..NONCE_LEN].copy_from_slice(subscriber_nonce);
        salt[NONCE_LEN..].copy_from_slice(publisher_nonce);
        let hkdf = Hkdf::<Sha256>::new(Some(&salt), key.secret());
        let expand = |label: &[u8]| {
            let mut out = [0u8; 32];
            // 32 bytes is far below HKDF-SHA256's limit of 8160: expand cannot fail.
            let info = [b"udpros link v1 ".as_slice(), label, b" ", context];
            hkdf.expand_multi_info(&info, &mut out)
                .expect("32 bytes are within HKDF's output limit");
            out
        };
        LinkKeys {
            downstream: expand(b"downstream"),
            upstream: expand(b"upstream"),
        }
    }
}

/// What a secure link's two ends agreed: the mode, the cipher and the link's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSecurity {
    /// Encrypted or authenticated.
    pub mode: Mode,
    /// The AEAD under the link's seals.
    pub cipher: Cipher,
    /// The link's keys, one per direction.
    pub keys: LinkKeys,
}

impl LinkSecurity {
    /// The publisher's sealer of what it sends, and its opener of what the subscriber
    /// sends back.
    pub fn publisher_end(&self) -> (datagram::Sealer, datagram::Opener) {
        (
            datagram::Sealer::new(&self.keys.downstream, self.cipher, self.mode),
            datagram::Opener::new(&self.keys.upstream, self.cipher, self.mode),
        )
    }

    /// The subscriber's opener of what the publisher sends, and its sealer of what it
    /// sends back.
    pub fn subscriber_end(&self) -> (datagram::Opener, datagram::Sealer) {
        (
            datagram::Opener::new(&self.keys.downstream, self.cipher, self.mode),
            datagram::Sealer::new(&self.keys.upstream, self.cipher, self.mode),
        )
    }

    /// On a TCPROS link: the publisher's (or service's) sealer of its stream, and its
    /// opener of the peer's.
    pub fn publisher_stream(&self) -> (stream::StreamSealer, stream::StreamOpener) {
        (
            stream::StreamSealer::new(&self.keys.downstream, self.cipher, self.mode),
            stream::StreamOpener::new(&self.keys.upstream, self.cipher, self.mode),
        )
    }

    /// On a TCPROS link: the subscriber's (or service client's) opener of the publisher's
    /// stream, and its sealer of its own.
    pub fn subscriber_stream(&self) -> (stream::StreamOpener, stream::StreamSealer) {
        (
            stream::StreamOpener::new(&self.keys.downstream, self.cipher, self.mode),
            stream::StreamSealer::new(&self.keys.upstream, self.cipher, self.mode),
        )
    }
}

/// Reads a nonce written in hex in a connection header.
pub fn parse_nonce(text: &str) -> Option<[u8; NONCE_LEN]> {
    let bytes = key::from_hex(text)?;
    bytes.try_into().ok()
}

/// Writes a nonce as a connection header carries it.
pub fn nonce_text(nonce: &[u8; NONCE_LEN]) -> String {
    key::to_hex(nonce)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_link_and_each_direction_has_keys_of_its_own() {
        let key = GraphKey::from_bytes([7; KEY_LEN]);
        let keys = LinkKeys::derive(&key, &[1; 16], &[2; 16], b"/chatter 5");
        assert_ne!(keys.downstream, keys.upstream);
        let again = LinkKeys::derive(&key, &[1; 16], &[2; 16], b"/chatter 5");
        assert_eq!(keys, again, "both ends derive the same keys");
        for other in [
            LinkKeys::derive(&key, &[1; 16], &[3; 16], b"/chatter 5"),
            LinkKeys::derive(&key, &[9; 16], &[2; 16], b"/chatter 5"),
            LinkKeys::derive(&key, &[2; 16], &[1; 16], b"/chatter 5"),
            LinkKeys::derive(&key, &[1; 16], &[2; 16], b"/chatter 6"),
            LinkKeys::derive(
                &GraphKey::from_bytes([8; 32]),
                &[1; 16],
                &[2; 16],
                b"/chatter 5",
            ),
        ] {
            assert_ne!(keys.downstream, other.downstream);
            assert_ne!(keys.upstream, other.upstream);
        }
        assert_eq!(
            format!("{keys:?}"),
            "LinkKeys { .. }",
            "keys never reach a log"
        );
    }

    #[test]
    fn policies_and_modes_read_back_what_they_write() {
        for policy in [Policy::Off, Policy::Prefer, Policy::Require] {
            assert_eq!(policy.to_string().parse::<Policy>(), Ok(policy));
        }
        for mode in [Mode::Authenticate, Mode::Encrypt] {
            assert_eq!(mode.to_string().parse::<Mode>(), Ok(mode));
        }
        assert!("on".parse::<Policy>().is_err());
        assert!("plain".parse::<Mode>().is_err());
        let nonce = [0xa5; NONCE_LEN];
        assert_eq!(parse_nonce(&nonce_text(&nonce)), Some(nonce));
        assert_eq!(parse_nonce("a5a5"), None, "too short");
        assert_eq!(parse_nonce(&"zz".repeat(16)), None, "not hex");
    }
}
