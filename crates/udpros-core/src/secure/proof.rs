//! Proof that a connection header was written by a holder of the graph key: an
//! HMAC-SHA256 over every other field of the header, the writer's role and the other
//! end's nonce, carried in the header as [`PROOF_FIELD`].
//!
//! Covering every field means nothing of the header can be changed on the way (the
//! topic, the type, the FEC terms, the address to send to); the role means a
//! subscriber's proof never passes for a publisher's; the other end's nonce means an
//! answer recorded from one link is refused on any other.

use super::key::{from_hex, to_hex};
use super::{GraphKey, NONCE_LEN};
use crate::header::ConnectionHeader;
use hmac::Mac;
use std::fmt;

/// The connection header field that carries the proof.
pub const PROOF_FIELD: &str = "secure_proof";

/// Which end wrote a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A topic's subscriber (its offer).
    Subscriber,
    /// A topic's publisher (its answer).
    Publisher,
    /// A service's client.
    ServiceClient,
    /// A service's server.
    ServiceServer,
}

impl Role {
    fn label(self) -> &'static [u8] {
        match self {
            Role::Subscriber => b"subscriber",
            Role::Publisher => b"publisher",
            Role::ServiceClient => b"service client",
            Role::ServiceServer => b"service server",
        }
    }
}

/// Why a header's proof is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofError {
    /// The header carries no proof: a peer without the key (or with security off).
    Missing,
    /// The proof is not an HMAC's hex.
    Malformed,
    /// The proof does not match: another key, or a header changed or replayed.
    Wrong,
}

impl fmt::Display for ProofError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProofError::Missing => "the peer proved no key (a plain peer)",
            ProofError::Malformed => "the peer's key proof is malformed",
            ProofError::Wrong => {
                "the peer's key proof is wrong (another key, or a changed or replayed header)"
            }
        })
    }
}

impl std::error::Error for ProofError {}

fn mac(
    key: &GraphKey,
    role: Role,
    header: &ConnectionHeader,
    peer_nonce: Option<&[u8; NONCE_LEN]>,
) -> hmac::Hmac<sha2::Sha256> {
    let mut mac = key.hmac();
    mac.update(b"udpros header proof v1\0");
    mac.update(role.label());
    mac.update(&[0]);
    mac.update(peer_nonce.map_or(&[][..], |n| &n[..]));
    // Length-prefixed and in the header's (sorted) order: one byte string per header.
    for (name, value) in header.iter().filter(|(name, _)| *name != PROOF_FIELD) {
        for part in [name, value] {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part.as_bytes());
        }
    }
    mac
}

/// The proof of `header` written by `role`, in answer to `peer_nonce` (the other end's
/// nonce; `None` for the first header of an exchange), to be put in [`PROOF_FIELD`].
pub fn prove(
    key: &GraphKey,
    role: Role,
    header: &ConnectionHeader,
    peer_nonce: Option<&[u8; NONCE_LEN]>,
) -> String {
    to_hex(&mac(key, role, header, peer_nonce).finalize().into_bytes())
}

/// Adds the proof of `header` to it.
pub fn sign(
    key: &GraphKey,
    role: Role,
    header: &mut ConnectionHeader,
    peer_nonce: Option<&[u8; NONCE_LEN]>,
) {
    let proof = prove(key, role, header, peer_nonce);
    header.insert(PROOF_FIELD, proof);
}

/// Checks the proof `header` carries, as written by `role` in answer to `peer_nonce`
/// (compared in constant time).
pub fn verify(
    key: &GraphKey,
    role: Role,
    header: &ConnectionHeader,
    peer_nonce: Option<&[u8; NONCE_LEN]>,
) -> Result<(), ProofError> {
    let text = header.get(PROOF_FIELD).ok_or(ProofError::Missing)?;
    let claimed = from_hex(text).ok_or(ProofError::Malformed)?;
    if claimed.len() != 32 {
        return Err(ProofError::Malformed);
    }
    mac(key, role, header, peer_nonce)
        .verify_slice(&claimed)
        .map_err(|_| ProofError::Wrong)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer() -> ConnectionHeader {
        ConnectionHeader::from_pairs([
            ("callerid", "/listener"),
            ("topic", "/chatter"),
            ("md5sum", "992ce8a1687cec8c8bd883ec73ca41d1"),
            ("secure_nonce", "00112233445566778899aabbccddeeff"),
        ])
    }

    #[test]
    fn a_signed_header_verifies_and_any_change_to_it_does_not() {
        let key = GraphKey::from_bytes([3; 32]);
        let mut header = offer();
        sign(&key, Role::Subscriber, &mut header, None);
        assert_eq!(verify(&key, Role::Subscriber, &header, None), Ok(()));
        // Another key, another role, an answer's nonce: refused.
        let other = GraphKey::from_bytes([4; 32]);
        assert_eq!(
            verify(&other, Role::Subscriber, &header, None),
            Err(ProofError::Wrong)
        );
        assert_eq!(
            verify(&key, Role::Publisher, &header, None),
            Err(ProofError::Wrong)
        );
        assert_eq!(
            verify(&key, Role::Subscriber, &header, Some(&[0; 16])),
            Err(ProofError::Wrong)
        );
        // A field changed, added or removed: refused.
        for change in [
            |h: &mut ConnectionHeader| h.insert("topic", "/cmd_vel"),
            |h: &mut ConnectionHeader| h.insert("fec", "off"),
            |h: &mut ConnectionHeader| h.insert("callerid", "/listener "),
        ] {
            let mut changed = header.clone();
            change(&mut changed);
            assert_eq!(
                verify(&key, Role::Subscriber, &changed, None),
                Err(ProofError::Wrong)
            );
        }
        // Fields cannot be shifted into one another: "ab"+"c" is not "a"+"bc".
        let mut a = ConnectionHeader::from_pairs([("ab", "c")]);
        let b = ConnectionHeader::from_pairs([("a", "bc")]);
        sign(&key, Role::Publisher, &mut a, None);
        let mut forged = b.clone();
        forged.insert(PROOF_FIELD, a.get(PROOF_FIELD).unwrap());
        assert_eq!(
            verify(&key, Role::Publisher, &forged, None),
            Err(ProofError::Wrong)
        );
    }

    #[test]
    fn an_answer_is_bound_to_the_offer_it_answers() {
        let key = GraphKey::from_bytes([3; 32]);
        let mut answer = ConnectionHeader::from_pairs([("secure_nonce", "ff".repeat(16))]);
        sign(&key, Role::Publisher, &mut answer, Some(&[1; 16]));
        assert_eq!(
            verify(&key, Role::Publisher, &answer, Some(&[1; 16])),
            Ok(())
        );
        assert_eq!(
            verify(&key, Role::Publisher, &answer, Some(&[2; 16])),
            Err(ProofError::Wrong),
            "replayed to another offer"
        );
    }

    #[test]
    fn a_missing_or_malformed_proof_says_so() {
        let key = GraphKey::from_bytes([3; 32]);
        let mut header = offer();
        assert_eq!(
            verify(&key, Role::Subscriber, &header, None),
            Err(ProofError::Missing)
        );
        header.insert(PROOF_FIELD, "xyz");
        assert_eq!(
            verify(&key, Role::Subscriber, &header, None),
            Err(ProofError::Malformed)
        );
        header.insert(PROOF_FIELD, "ab".repeat(16));
        assert_eq!(
            verify(&key, Role::Subscriber, &header, None),
            Err(ProofError::Malformed)
        );
        header.insert(PROOF_FIELD, "ab".repeat(100_000));
        assert_eq!(
            verify(&key, Role::Subscriber, &header, None),
            Err(ProofError::Malformed)
        );
    }
}
