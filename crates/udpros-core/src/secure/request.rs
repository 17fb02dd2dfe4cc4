//! Proof of the key on XML-RPC calls between udpros processes: an HTTP header on the
//! request (an HMAC of its body, with the sender's wall-clock time and a fresh nonce) and
//! one on the response (bound to the request's nonce).
//!
//! ```text
//! X-Udpros-Proof: v1 <unix ms> <nonce, 32 hex> <HMAC-SHA256, 64 hex>
//! ```
//!
//! A receiver takes a request whose time is within [`MAX_SKEW`] of its own clock and
//! whose nonce it has not seen ([`RequestVerifier`]), so a recorded call cannot be played
//! again (a `registerPublisher` of a fake `/cmd_vel`, a `shutdown`). The nonces it
//! remembers are bounded: when it must forget some, it forgets the oldest and refuses
//! everything not newer than them.

use super::key::{from_hex, to_hex};
use super::{GraphKey, NONCE_LEN};
use hmac::Mac;
use std::collections::{BTreeSet, HashSet};
use std::fmt;

/// The HTTP header that carries the proof.
pub const PROOF_HEADER: &str = "x-udpros-proof";

/// How far a request's time may be from the receiver's clock, either way, in
/// milliseconds: hosts of one robot keep time within this (NTP, chrony, or a companion's
/// clock from the autopilot), and a recorded request is useless after it.
pub const MAX_SKEW: u64 = 30_000;

/// Nonces a receiver remembers at most (each a few dozen bytes).
pub const MAX_REMEMBERED: usize = 100_000;

const VERSION: &str = "v1";

fn mac(
    key: &GraphKey,
    direction: &[u8],
    unix_ms: u64,
    nonce: &[u8; NONCE_LEN],
    body: &[u8],
) -> hmac::Hmac<sha2::Sha256> {
    let mut mac = key.hmac();
    mac.update(b"udpros xmlrpc proof v1\0");
    mac.update(direction);
    mac.update(&unix_ms.to_le_bytes());
    mac.update(nonce);
    mac.update(body);
    mac
}

/// The proof header's value for a request with `body`, sent at `unix_ms` (the sender's
/// wall clock) with a fresh `nonce`.
pub fn sign_request(key: &GraphKey, unix_ms: u64, nonce: &[u8; NONCE_LEN], body: &[u8]) -> String {
    let tag = mac(key, b"request", unix_ms, nonce, body)
        .finalize()
        .into_bytes();
    format!("{VERSION} {unix_ms} {} {}", to_hex(nonce), to_hex(&tag))
}

/// The proof header's value for the response with `body` to the request that carried
/// `request_nonce`.
pub fn sign_response(key: &GraphKey, request_nonce: &[u8; NONCE_LEN], body: &[u8]) -> String {
    let tag = mac(key, b"response", 0, request_nonce, body)
        .finalize()
        .into_bytes();
    format!("{VERSION} 0 {} {}", to_hex(request_nonce), to_hex(&tag))
}

/// Why a call's proof is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallRefused {
    /// No proof header: a stock ROS node or tool, or udpros without the key.
    Missing,
    /// Not a proof of this version's form.
    Malformed,
    /// The HMAC does not match: another key, or a body changed on the way.
    Wrong,
    /// Its time is further from this clock than [`MAX_SKEW`].
    Skewed,
    /// Its nonce was seen already, or it is not newer than nonces forgotten.
    Replayed,
}

impl fmt::Display for CallRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CallRefused::Missing => "the call carries no proof of the graph key",
            CallRefused::Malformed => "the call's proof of the key is malformed",
            CallRefused::Wrong => {
                "the call's proof of the key is wrong (another key, or a changed body)"
            }
            CallRefused::Skewed => "the call's time is more than 30 s from this host's clock",
            CallRefused::Replayed => "the call was seen already (replayed)",
        })
    }
}

impl std::error::Error for CallRefused {}

/// A proof header's parts.
struct Parsed {
    unix_ms: u64,
    nonce: [u8; NONCE_LEN],
    tag: Vec<u8>,
}

fn parse(value: &str) -> Result<Parsed, CallRefused> {
    let mut parts = value.split(' ');
    let (Some(VERSION), Some(ms), Some(nonce), Some(tag), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(CallRefused::Malformed);
    };
    let unix_ms = ms.parse().map_err(|_| CallRefused::Malformed)?;
    let nonce = super::parse_nonce(nonce).ok_or(CallRefused::Malformed)?;
    let tag = from_hex(tag)
        .filter(|t| t.len() == 32)
        .ok_or(CallRefused::Malformed)?;
    Ok(Parsed {
        unix_ms,
        nonce,
        tag,
    })
}

/// Checks the proof on the response to a request sent with `request_nonce`.
pub fn verify_response(
    key: &GraphKey,
    request_nonce: &[u8; NONCE_LEN],
    value: Option<&str>,
    body: &[u8],
) -> Result<(), CallRefused> {
    let parsed = parse(value.ok_or(CallRefused::Missing)?)?;
    if parsed.nonce != *request_nonce {
        return Err(CallRefused::Wrong);
    }
    mac(key, b"response", 0, request_nonce, body)
        .verify_slice(&parsed.tag)
        .map_err(|_| CallRefused::Wrong)
}

/// Checks requests' proofs and remembers their nonces, within bounds.
#[derive(Debug, Default)]
pub struct RequestVerifier {
    /// Nonces taken, with their requests' times, oldest first.
    by_time: BTreeSet<(u64, [u8; NONCE_LEN])>,
    seen: HashSet<[u8; NONCE_LEN]>,
    /// Requests at or before this time are refused: nonces of that age were forgotten.
    floor: Option<u64>,
}

impl RequestVerifier {
    /// A verifier that has seen nothing.
    pub fn new() -> RequestVerifier {
        RequestVerifier::default()
    }

    /// Checks the request whose proof header is `value` (`None`: it had none) and whose
    /// body is `body`, at `now_ms` by this host's wall clock; a request taken has its
    /// nonce remembered. Its nonce comes back, for the response's proof.
    pub fn verify(
        &mut self,
        key: &GraphKey,
        now_ms: u64,
        value: Option<&str>,
        body: &[u8],
    ) -> Result<[u8; NONCE_LEN], CallRefused> {
        let parsed = parse(value.ok_or(CallRefused::Missing)?)?;
        if parsed.unix_ms.abs_diff(now_ms) > MAX_SKEW {
            return Err(CallRefused::Skewed);
        }
        mac(key, b"request", parsed.unix_ms, &parsed.nonce, body)
            .verify_slice(&parsed.tag)
            .map_err(|_| CallRefused::Wrong)?;
        if self.floor.is_some_and(|floor| parsed.unix_ms <= floor)
            || self.seen.contains(&parsed.nonce)
        {
            return Err(CallRefused::Replayed);
        }
        self.forget_before(now_ms.saturating_sub(MAX_SKEW));
        while self.seen.len() >= MAX_REMEMBERED {
            let Some(oldest) = self.by_time.pop_first() else {
                break;
            };
            self.seen.remove(&oldest.1);
            self.floor = Some(self.floor.map_or(oldest.0, |f| f.max(oldest.0)));
        }
        self.seen.insert(parsed.nonce);
        self.by_time.insert((parsed.unix_ms, parsed.nonce));
        Ok(parsed.nonce)
    }

    /// Nonces of requests older than `cutoff` need no remembering: their time refuses
    /// them already.
    fn forget_before(&mut self, cutoff: u64) {
        while let Some(&(at, nonce)) = self.by_time.first() {
            if at >= cutoff {
                break;
            }
            self.by_time.pop_first();
            self.seen.remove(&nonce);
        }
    }

    /// Nonces remembered now.
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000;

    fn key() -> GraphKey {
        GraphKey::from_bytes([5; 32])
    }

    fn nonce(n: u32) -> [u8; NONCE_LEN] {
        let mut nonce = [0u8; NONCE_LEN];
        nonce[..4].copy_from_slice(&n.to_le_bytes());
        nonce
    }

    #[test]
    fn a_signed_call_is_taken_once_and_its_response_checked() {
        let key = key();
        let body = b"<methodCall><methodName>shutdown</methodName></methodCall>";
        let proof = sign_request(&key, NOW, &nonce(1), body);
        let mut verifier = RequestVerifier::new();
        assert_eq!(
            verifier.verify(&key, NOW + 5, Some(&proof), body),
            Ok(nonce(1))
        );
        assert_eq!(
            verifier.verify(&key, NOW + 10, Some(&proof), body),
            Err(CallRefused::Replayed)
        );
        let response = b"<methodResponse/>";
        let answer = sign_response(&key, &nonce(1), response);
        assert_eq!(
            verify_response(&key, &nonce(1), Some(&answer), response),
            Ok(())
        );
        assert_eq!(
            verify_response(&key, &nonce(2), Some(&answer), response),
            Err(CallRefused::Wrong),
            "an answer to another call"
        );
        assert_eq!(
            verify_response(
                &key,
                &nonce(1),
                Some(&answer),
                b"<methodResponse>x</methodResponse>"
            ),
            Err(CallRefused::Wrong)
        );
        assert_eq!(
            verify_response(&key, &nonce(1), None, response),
            Err(CallRefused::Missing)
        );
    }

    #[test]
    fn a_changed_body_another_key_a_skewed_or_malformed_proof_is_refused() {
        let key = key();
        let mut verifier = RequestVerifier::new();
        let proof = sign_request(&key, NOW, &nonce(1), b"body");
        assert_eq!(
            verifier.verify(&key, NOW, Some(&proof), b"bodY"),
            Err(CallRefused::Wrong)
        );
        let other = GraphKey::from_bytes([6; 32]);
        assert_eq!(
            verifier.verify(&other, NOW, Some(&proof), b"body"),
            Err(CallRefused::Wrong)
        );
        assert_eq!(
            verifier.verify(&key, NOW + MAX_SKEW + 1, Some(&proof), b"body"),
            Err(CallRefused::Skewed)
        );
        assert_eq!(
            verifier.verify(&key, NOW - MAX_SKEW - 1, Some(&proof), b"body"),
            Err(CallRefused::Skewed)
        );
        for bad in [
            "",
            "v1",
            "v2 1 2 3",
            "v1 x 00 00",
            "v1 1 00 00",
            &format!("{proof} extra"),
        ] {
            assert_eq!(
                verifier.verify(&key, NOW, Some(bad), b"body"),
                Err(CallRefused::Malformed),
                "{bad:?}"
            );
        }
        assert_eq!(
            verifier.verify(&key, NOW, None, b"body"),
            Err(CallRefused::Missing)
        );
        assert_eq!(verifier.remembered(), 0, "nothing refused is remembered");
    }

    #[test]
    fn the_nonces_remembered_are_bounded_and_what_is_forgotten_stays_refused() {
        let key = key();
        let mut verifier = RequestVerifier::new();
        // Old nonces go as time passes: their time refuses them anyway.
        for n in 0..1000 {
            let proof = sign_request(&key, NOW + u64::from(n), &nonce(n), b"");
            verifier
                .verify(&key, NOW + u64::from(n), Some(&proof), b"")
                .unwrap();
        }
        let later = NOW + MAX_SKEW + 2000;
        let proof = sign_request(&key, later, &nonce(5000), b"");
        verifier.verify(&key, later, Some(&proof), b"").unwrap();
        assert_eq!(verifier.remembered(), 1);
        // A flood within the window: at most MAX_REMEMBERED kept; those forgotten, and
        // anything as old, are refused.
        let start = later + 1;
        for n in 0..(MAX_REMEMBERED as u32 + 500) {
            let at = start + u64::from(n / 64);
            let proof = sign_request(&key, at, &nonce(10_000 + n), b"");
            verifier.verify(&key, at, Some(&proof), b"").unwrap();
        }
        assert!(verifier.remembered() <= MAX_REMEMBERED);
        let now = start + (MAX_REMEMBERED as u64 + 500) / 64;
        let replay = sign_request(&key, start, &nonce(10_000), b"");
        assert_eq!(
            verifier.verify(&key, now, Some(&replay), b""),
            Err(CallRefused::Replayed)
        );
        let fresh = sign_request(&key, now + 1, &nonce(999_999), b"");
        assert!(verifier.verify(&key, now + 1, Some(&fresh), b"").is_ok());
    }
}
