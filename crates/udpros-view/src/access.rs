//! Who may use the view: with a token configured, a WebSocket client (and `/stats.json`)
//! must present it, as `?token=` in the URL (a browser's WebSocket can set no header) or
//! as `Authorization: Bearer`. Without one the view is open, as Foxglove's bridge is.
//!
//! The rules are pure: [`Gate::check`] takes the caller's address, what it presented and
//! `now`. The comparison takes the same time wherever the texts differ, and wrong tries
//! are limited per address ([`TRIES_BURST`] at once, then one per [`TRY_EVERY`]), so a
//! short token a person chose cannot be guessed at the speed of the network.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Wrong tries an address may make at once.
pub const TRIES_BURST: u32 = 10;
/// After the burst, one more wrong try per this long.
pub const TRY_EVERY: Duration = Duration::from_secs(1);
/// Addresses whose wrong tries are remembered; past it, every other address shares one
/// allowance (a flood from many addresses limits itself, not the addresses already known).
pub const MAX_ADDRESSES: usize = 1024;

/// Why a caller is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// It presented no token.
    Missing,
    /// It presented another token.
    Wrong,
    /// Its address made too many wrong tries: it waits before it may try again.
    TooManyTries,
}

impl Denied {
    /// What the refused caller reads.
    pub fn text(self) -> &'static str {
        match self {
            Denied::Missing => "this view asks for a token: open the URL it printed (…/?token=…)\n",
            Denied::Wrong => "wrong token\n",
            Denied::TooManyTries => "too many wrong tokens from this address: wait a moment\n",
        }
    }
}

/// An address's allowance of wrong tries, as a token bucket.
#[derive(Debug, Clone, Copy)]
struct Allowance {
    tries: f64,
    at: Instant,
}

impl Allowance {
    fn full(now: Instant) -> Allowance {
        Allowance {
            tries: f64::from(TRIES_BURST),
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let earned = now.saturating_duration_since(self.at).as_secs_f64() / TRY_EVERY.as_secs_f64();
        self.tries = (self.tries + earned).min(f64::from(TRIES_BURST));
        self.at = now;
    }
}

/// The view's door: its token, and the wrong tries of each address.
#[derive(Debug)]
pub struct Gate {
    token: Option<String>,
    allowances: HashMap<IpAddr, Allowance>,
    /// Shared by addresses past [`MAX_ADDRESSES`].
    overflow: Option<Allowance>,
}

impl Gate {
    /// A gate that asks for `token` (`None`: an open view).
    pub fn new(token: Option<String>) -> Gate {
        Gate {
            token: token.filter(|t| !t.is_empty()),
            allowances: HashMap::new(),
            overflow: None,
        }
    }

    /// Whether the view asks for a token.
    pub fn closed(&self) -> bool {
        self.token.is_some()
    }

    /// Lets in a caller from `from` that presented `presented`, or says why not.
    pub fn check(
        &mut self,
        now: Instant,
        from: IpAddr,
        presented: Option<&str>,
    ) -> Result<(), Denied> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        // Tries are spent before the comparison: an address out of them learns nothing,
        // not even from a right token.
        let known = self.allowances.len() < MAX_ADDRESSES || self.allowances.contains_key(&from);
        let allowance = match known {
            true => self
                .allowances
                .entry(from)
                .or_insert_with(|| Allowance::full(now)),
            false => self.overflow.get_or_insert_with(|| Allowance::full(now)),
        };
        allowance.refill(now);
        if allowance.tries < 1.0 {
            return Err(Denied::TooManyTries);
        }
        let Some(presented) = presented else {
            return Err(Denied::Missing);
        };
        if same(token.as_bytes(), presented.as_bytes()) {
            return Ok(());
        }
        allowance.tries -= 1.0;
        Err(Denied::Wrong)
    }

    /// Forgets addresses whose allowance is full again: they need no remembering.
    pub fn forget_idle(&mut self, now: Instant) {
        let full = TRY_EVERY * TRIES_BURST;
        self.allowances
            .retain(|_, a| now.saturating_duration_since(a.at) < full);
        if self
            .overflow
            .is_some_and(|a| now.saturating_duration_since(a.at) >= full)
        {
            self.overflow = None;
        }
    }
}

/// Whether `a` and `b` are equal, in a time that depends on their lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// The token a request presents: `token=` in its query, or an `Authorization: Bearer`
/// header.
pub fn presented<'a>(query: Option<&'a str>, authorization: Option<&'a str>) -> Option<&'a str> {
    let from_query = query.and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("token=")));
    from_query.or_else(|| authorization.and_then(|a| a.strip_prefix("Bearer ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    #[test]
    fn an_open_view_lets_everyone_in_and_a_closed_one_only_the_token() {
        let now = Instant::now();
        let mut open = Gate::new(None);
        assert!(!open.closed());
        assert_eq!(open.check(now, ip(1), None), Ok(()));
        let mut gate = Gate::new(Some("s3cret".into()));
        assert!(gate.closed());
        assert_eq!(gate.check(now, ip(1), None), Err(Denied::Missing));
        assert_eq!(gate.check(now, ip(1), Some("s3creT")), Err(Denied::Wrong));
        assert_eq!(gate.check(now, ip(1), Some("s3cret!")), Err(Denied::Wrong));
        assert_eq!(gate.check(now, ip(1), Some("")), Err(Denied::Wrong));
        assert_eq!(gate.check(now, ip(1), Some("s3cret")), Ok(()));
        assert_eq!(
            Gate::new(Some(String::new())).check(now, ip(1), None),
            Ok(())
        );
    }

    #[test]
    fn wrong_tries_are_limited_per_address_and_earned_back_with_time() {
        let start = Instant::now();
        let mut gate = Gate::new(Some("right".into()));
        for _ in 0..TRIES_BURST {
            assert_eq!(gate.check(start, ip(1), Some("wrong")), Err(Denied::Wrong));
        }
        // Out of tries: even the right token waits, so guessing learns nothing.
        assert_eq!(
            gate.check(start, ip(1), Some("right")),
            Err(Denied::TooManyTries)
        );
        // Another address is not held back by this one.
        assert_eq!(gate.check(start, ip(2), Some("right")), Ok(()));
        // One try earned per TRY_EVERY.
        let later = start + TRY_EVERY;
        assert_eq!(gate.check(later, ip(1), Some("wrong")), Err(Denied::Wrong));
        assert_eq!(
            gate.check(later, ip(1), Some("wrong")),
            Err(Denied::TooManyTries)
        );
        assert_eq!(gate.check(later + TRY_EVERY, ip(1), Some("right")), Ok(()));
        // A thousand guesses over ten minutes: at most the burst and one a second.
        let mut wrong = 0;
        let mut gate = Gate::new(Some("right".into()));
        for ms in (0..600_000u64).step_by(50) {
            let now = start + Duration::from_millis(ms);
            if gate.check(now, ip(3), Some("guess")) == Err(Denied::Wrong) {
                wrong += 1;
            }
        }
        assert!(wrong <= TRIES_BURST as u64 + 600, "{wrong}");
    }

    #[test]
    fn the_addresses_remembered_are_bounded_and_the_rest_share_one_allowance() {
        let start = Instant::now();
        let mut gate = Gate::new(Some("right".into()));
        for n in 0..(MAX_ADDRESSES as u32 + 5000) {
            let from = IpAddr::from(n.to_be_bytes());
            let _ = gate.check(start, from, Some("wrong"));
        }
        assert!(gate.allowances.len() <= MAX_ADDRESSES);
        // The flood past the bound spent the shared allowance, not the known addresses'.
        let past = IpAddr::from((MAX_ADDRESSES as u32 + 4999).to_be_bytes());
        assert_eq!(
            gate.check(start, past, Some("right")),
            Err(Denied::TooManyTries)
        );
        let known = IpAddr::from(0u32.to_be_bytes());
        assert_eq!(gate.check(start, known, Some("right")), Ok(()));
        gate.forget_idle(start + TRY_EVERY * TRIES_BURST);
        assert!(gate.allowances.is_empty() && gate.overflow.is_none());
    }

    #[test]
    fn the_token_comes_from_the_query_or_a_bearer_header() {
        assert_eq!(presented(Some("token=abc"), None), Some("abc"));
        assert_eq!(presented(Some("ws=x&token=abc"), None), Some("abc"));
        assert_eq!(presented(None, Some("Bearer abc")), Some("abc"));
        assert_eq!(presented(Some("x=1"), Some("Basic abc")), None);
        assert_eq!(presented(None, None), None);
    }
}
