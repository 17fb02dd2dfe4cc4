//! Proof of the graph key on XML-RPC calls, for servers ([`CallGuard`]) and clients
//! ([`CallSigner`]): the tokio-free rules are [`crate::wire::secure::request`]'s; this
//! module adds the wall clock, the nonces, the counters and the policy.
//!
//! A udpros process with a key signs every call it makes (the master and slave APIs and
//! the parameter server alike) and every answer to a signed call. Under
//! [`Policy::Require`] a server refuses an unsigned call with a fault that says why
//! before it parses the body, and a client refuses an unsigned answer; under
//! [`Policy::Prefer`] an unsigned call is taken (stock ROS nodes and tools sign nothing)
//! and its handler is told ([`Caller::Unproven`]). A proof that is there and wrong is
//! refused under either policy: it comes from another key, or was changed on the way.

use crate::secure::Security;
use crate::wire::secure::request::{sign_request, sign_response, verify_response, RequestVerifier};
use crate::wire::secure::{GraphKey, Policy, NONCE_LEN};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use crate::wire::secure::request::{CallRefused, PROOF_HEADER};

/// Whether the call a handler answers proved the graph key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Caller {
    /// Signed with the graph key, fresh and not seen before.
    Proven,
    /// Unsigned: security is off on this server, or the policy is `prefer` and the caller
    /// is a stock ROS node or tool (or udpros without the key).
    Unproven,
}

/// This host's wall clock in milliseconds since 1970, as proofs carry it.
fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What a server that checks proofs has seen, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GuardStats {
    /// Calls whose proof held.
    pub proven: u64,
    /// Unsigned calls taken (policy `prefer`).
    pub unproven: u64,
    /// Unsigned calls refused (policy `require`).
    pub refused_missing: u64,
    /// Calls refused for a proof that is malformed, wrong, too far from this clock or
    /// replayed.
    pub refused_bad: u64,
}

/// A server's check of its callers' proofs, shared by its connections.
pub struct CallGuard {
    key: Arc<GraphKey>,
    policy: Policy,
    verifier: Mutex<RequestVerifier>,
    proven: AtomicU64,
    unproven: AtomicU64,
    refused_missing: AtomicU64,
    refused_bad: AtomicU64,
    log: Mutex<RefusalLog>,
}

/// The pace of the refusal log: a flood of bad calls writes a line every [`LOG_EVERY`]
/// with the count of those left unsaid, not one line per call.
#[derive(Debug, Default)]
struct RefusalLog {
    last: Option<Instant>,
    unsaid: u64,
}

impl RefusalLog {
    /// A refusal at `now`: `Some(unsaid)` when it is to be logged (with the refusals left
    /// unsaid since the last line), `None` when it is only counted.
    fn refused(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|at| now.saturating_duration_since(at) < LOG_EVERY)
        {
            self.unsaid += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unsaid))
    }
}

/// How often a server logs refused calls at most.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// How a server treated one call's proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Proven: the answer is signed for this nonce.
    Proven([u8; NONCE_LEN]),
    /// Taken unsigned.
    Unproven,
}

impl Checked {
    /// What the handler is told.
    pub fn caller(self) -> Caller {
        match self {
            Checked::Proven(_) => Caller::Proven,
            Checked::Unproven => Caller::Unproven,
        }
    }
}

impl std::fmt::Debug for CallGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallGuard")
            .field("policy", &self.policy)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl CallGuard {
    /// The guard for `security`; `None` when its policy uses no key (every call taken,
    /// nothing signed, as stock ROS does).
    pub fn new(security: &Security) -> Option<Arc<CallGuard>> {
        let key = security.active_key()?;
        Some(Arc::new(CallGuard {
            key: Arc::new(key.clone()),
            policy: security.policy,
            verifier: Mutex::new(RequestVerifier::new()),
            proven: AtomicU64::new(0),
            unproven: AtomicU64::new(0),
            refused_missing: AtomicU64::new(0),
            refused_bad: AtomicU64::new(0),
            log: Mutex::default(),
        }))
    }

    /// Checks a call whose proof header is `proof` and whose body is `body`.
    pub fn check(&self, proof: Option<&str>, body: &[u8]) -> Result<Checked, CallRefused> {
        let verified = self
            .verifier
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .verify(&self.key, unix_ms(), proof, body);
        match verified {
            Ok(nonce) => {
                self.proven.fetch_add(1, Ordering::Relaxed);
                Ok(Checked::Proven(nonce))
            }
            Err(CallRefused::Missing) if self.policy != Policy::Require => {
                self.unproven.fetch_add(1, Ordering::Relaxed);
                Ok(Checked::Unproven)
            }
            Err(why) => {
                let counter = match why {
                    CallRefused::Missing => &self.refused_missing,
                    _ => &self.refused_bad,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                self.log_refusal(why);
                Err(why)
            }
        }
    }

    /// The proof header for the answer `body` to a call checked as `checked`, if any.
    pub fn sign_answer(&self, checked: Checked, body: &[u8]) -> Option<String> {
        match checked {
            Checked::Proven(nonce) => Some(sign_response(&self.key, &nonce, body)),
            Checked::Unproven => None,
        }
    }

    /// The fault text a refused caller reads: one line that says what to do.
    pub fn refusal_text(&self, why: CallRefused) -> String {
        format!(
            "udpros: call refused: {why} (this node's security policy is {}; a caller needs \
             the graph's key file in UDPROS_KEY_FILE)",
            self.policy
        )
    }

    /// Calls seen so far, by outcome.
    pub fn stats(&self) -> GuardStats {
        GuardStats {
            proven: self.proven.load(Ordering::Relaxed),
            unproven: self.unproven.load(Ordering::Relaxed),
            refused_missing: self.refused_missing.load(Ordering::Relaxed),
            refused_bad: self.refused_bad.load(Ordering::Relaxed),
        }
    }

    fn log_refusal(&self, why: CallRefused) {
        let now = Instant::now();
        let said = self
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .refused(now);
        match said {
            None => {}
            Some(0) => tracing::warn!("XML-RPC call refused: {why}"),
            Some(n) => {
                tracing::warn!("XML-RPC call refused: {why} ({n} more refused since the last line)")
            }
        }
    }
}

/// A client's signing of its calls and checking of the answers.
#[derive(Clone)]
pub struct CallSigner {
    key: Arc<GraphKey>,
    policy: Policy,
}

impl std::fmt::Debug for CallSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallSigner")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// A signed call on its way: its proof header, and the nonce its answer must be bound to.
#[derive(Debug, Clone)]
pub struct SignedCall {
    /// The value of [`PROOF_HEADER`].
    pub header: String,
    nonce: [u8; NONCE_LEN],
}

impl CallSigner {
    /// The signer for `security`; `None` when its policy uses no key.
    pub fn new(security: &Security) -> Option<CallSigner> {
        Some(CallSigner {
            key: Arc::new(security.active_key()?.clone()),
            policy: security.policy,
        })
    }

    /// Signs a call whose body is `body` with a fresh nonce.
    pub fn sign(&self, body: &[u8]) -> Result<SignedCall, crate::secure::KeyFileError> {
        let nonce = crate::secure::new_nonce()?;
        Ok(SignedCall {
            header: sign_request(&self.key, unix_ms(), &nonce, body),
            nonce,
        })
    }

    /// Checks the answer to `call`: a wrong proof is refused always, a missing one under
    /// `require` only (a stock ROS peer signs nothing). `is_fault` says the answer reports
    /// a failure (a fault, or a status code other than 1): an unsigned one is passed on as
    /// the peer's word (a `require` peer that refuses this call says why in one), never
    /// taken as data.
    pub fn check_answer(
        &self,
        call: &SignedCall,
        proof: Option<&str>,
        body: &[u8],
        is_fault: bool,
    ) -> Result<(), CallRefused> {
        match verify_response(&self.key, &call.nonce, proof, body) {
            Err(CallRefused::Missing) if self.policy != Policy::Require || is_fault => Ok(()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::secure::Mode;

    fn security(policy: Policy, byte: u8) -> Security {
        Security {
            policy,
            mode: Mode::default(),
            key: Some(Arc::new(GraphKey::from_bytes([byte; 32]))),
            cipher: None,
        }
    }

    #[test]
    fn a_signed_call_is_proven_once_and_its_answer_checks_at_the_caller() {
        let require = security(Policy::Require, 1);
        let guard = CallGuard::new(&require).unwrap();
        let signer = CallSigner::new(&require).unwrap();
        let call = signer.sign(b"<call/>").unwrap();
        let checked = guard.check(Some(&call.header), b"<call/>").unwrap();
        assert!(matches!(checked, Checked::Proven(_)));
        assert_eq!(checked.caller(), Caller::Proven);
        assert_eq!(
            guard.check(Some(&call.header), b"<call/>"),
            Err(CallRefused::Replayed)
        );
        let answer = guard.sign_answer(checked, b"<answer/>").unwrap();
        assert_eq!(
            signer.check_answer(&call, Some(&answer), b"<answer/>", false),
            Ok(())
        );
        assert_eq!(
            signer.check_answer(&call, Some(&answer), b"<forged/>", false),
            Err(CallRefused::Wrong)
        );
        assert_eq!(
            signer.check_answer(&call, None, b"<answer/>", false),
            Err(CallRefused::Missing),
            "require: an unsigned answer is not data"
        );
        assert_eq!(
            signer.check_answer(&call, None, b"<fault/>", true),
            Ok(()),
            "an unsigned fault is passed on"
        );
        let stats = guard.stats();
        assert_eq!((stats.proven, stats.refused_bad), (1, 1));
    }

    #[test]
    fn refusals_are_logged_once_per_pace_with_the_count_left_unsaid() {
        let start = Instant::now();
        let mut log = RefusalLog::default();
        assert_eq!(log.refused(start), Some(0));
        for n in 1..=500u64 {
            assert_eq!(log.refused(start + Duration::from_millis(n)), None);
        }
        assert_eq!(
            log.refused(start + LOG_EVERY - Duration::from_millis(1)),
            None
        );
        assert_eq!(log.refused(start + LOG_EVERY), Some(501));
        assert_eq!(log.refused(start + LOG_EVERY * 3), Some(0));
    }

    #[test]
    fn require_refuses_unsigned_calls_and_prefer_takes_them_as_unproven() {
        let guard = CallGuard::new(&security(Policy::Require, 1)).unwrap();
        assert_eq!(guard.check(None, b"x"), Err(CallRefused::Missing));
        assert!(guard.refusal_text(CallRefused::Missing).contains("require"));
        let prefer = CallGuard::new(&security(Policy::Prefer, 1)).unwrap();
        assert_eq!(prefer.check(None, b"x"), Ok(Checked::Unproven));
        assert_eq!(prefer.sign_answer(Checked::Unproven, b"x"), None);
        // Another key's proof is refused under prefer too.
        let other = CallSigner::new(&security(Policy::Prefer, 2)).unwrap();
        let call = other.sign(b"x").unwrap();
        assert_eq!(
            prefer.check(Some(&call.header), b"x"),
            Err(CallRefused::Wrong)
        );
        let prefer_signer = CallSigner::new(&security(Policy::Prefer, 1)).unwrap();
        let call = prefer_signer.sign(b"x").unwrap();
        assert_eq!(
            prefer_signer.check_answer(&call, None, b"y", false),
            Ok(()),
            "prefer: a stock peer's unsigned answer is taken"
        );
        assert_eq!(
            (
                guard.stats().refused_missing,
                prefer.stats().unproven,
                prefer.stats().refused_bad
            ),
            (1, 1, 1)
        );
        let off = Security {
            policy: Policy::Off,
            ..security(Policy::Off, 1)
        };
        assert!(CallGuard::new(&off).is_none() && CallSigner::new(&off).is_none());
    }
}
