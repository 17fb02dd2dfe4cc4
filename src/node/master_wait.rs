//! Waiting for the master at start, as roscpp and rospy nodes do: a node started before
//! its master (a companion computer's services started in any order, a launch that brings
//! the master up a moment later) keeps asking, says so now and then, and starts once the
//! master answers, or gives up after the limit the program or `UDPROS_MASTER_WAIT` sets.
//!
//! The rule itself (crate-internal) does no I/O and reads no clock: the caller reports
//! each failed call with the time, and is told when to ask again and what to say.

use std::time::{Duration, Instant};

/// The environment variable that sets how long a starting node waits for its master, in
/// seconds (`0`: not at all; `forever`); it overrides the program's own choice.
pub const MASTER_WAIT_VAR: &str = "UDPROS_MASTER_WAIT";

/// How long a starting node waits for a master that does not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MasterWait {
    /// Until it answers (roscpp's and rospy's way), or the node is interrupted.
    Forever,
    /// At most this long; then the node does not start ([`NodeError::Master`]).
    ///
    /// [`NodeError::Master`]: super::NodeError::Master
    Limit(Duration),
}

impl MasterWait {
    /// `UDPROS_MASTER_WAIT` if set (`Err` with one line if it does not parse), else
    /// `default`.
    pub fn from_env_or(default: MasterWait) -> Result<MasterWait, String> {
        match std::env::var(MASTER_WAIT_VAR) {
            Ok(text) if !text.trim().is_empty() => text.parse(),
            _ => Ok(default),
        }
    }
}

impl std::str::FromStr for MasterWait {
    type Err = String;

    fn from_str(text: &str) -> Result<MasterWait, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("forever") || text.eq_ignore_ascii_case("inf") {
            return Ok(MasterWait::Forever);
        }
        let seconds: f64 = text.parse().map_err(|_| {
            format!("{MASTER_WAIT_VAR}={text:?}: seconds (0: do not wait) or 'forever'")
        })?;
        Duration::try_from_secs_f64(seconds)
            .map(MasterWait::Limit)
            .map_err(|_| format!("{MASTER_WAIT_VAR}={text:?}: seconds from 0, or 'forever'"))
    }
}

/// What a starting node says while it waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Say {
    /// The first call failed: the node waits.
    Waiting,
    /// Still waiting, this long so far.
    Still(Duration),
}

/// What to do after a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Ask again at this time, after saying this (if anything).
    Retry { at: Instant, say: Option<Say> },
    /// The limit passed: the node does not start.
    GiveUp,
}

/// The waiting rule: retries 100 ms apart at first, growing to a second apart; a line at
/// the first failure and one every [`MasterWaiting::SAY_EVERY`] after.
#[derive(Debug)]
pub(crate) struct MasterWaiting {
    started: Option<Instant>,
    limit: MasterWait,
    pause: Duration,
    next_say: Option<Instant>,
}

impl MasterWaiting {
    const FIRST_PAUSE: Duration = Duration::from_millis(100);
    const MAX_PAUSE: Duration = Duration::from_secs(1);
    /// How often a waiting node says it still waits.
    pub(crate) const SAY_EVERY: Duration = Duration::from_secs(10);

    pub(crate) fn new(limit: MasterWait) -> MasterWaiting {
        MasterWaiting {
            started: None,
            limit,
            pause: Self::FIRST_PAUSE,
            next_say: None,
        }
    }

    /// How long the node has waited, as of `now`.
    pub(crate) fn waited(&self, now: Instant) -> Duration {
        self.started
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s))
    }

    /// A call to the master failed at `now` for want of a master.
    #[must_use = "retry at the time given, or give up"]
    pub(crate) fn failed(&mut self, now: Instant) -> Next {
        let started = *self.started.get_or_insert(now);
        let waited = now.saturating_duration_since(started);
        if let MasterWait::Limit(limit) = self.limit {
            if waited >= limit {
                return Next::GiveUp;
            }
        }
        let say = match self.next_say {
            None => {
                self.next_say = Some(now + Self::SAY_EVERY);
                Some(Say::Waiting)
            }
            Some(due) if now >= due => {
                self.next_say = Some(now + Self::SAY_EVERY);
                Some(Say::Still(waited))
            }
            Some(_) => None,
        };
        let mut at = now + self.pause;
        if let MasterWait::Limit(limit) = self.limit {
            at = at.min(started + limit);
        }
        self.pause = (self.pause * 2).min(Self::MAX_PAUSE);
        Next::Retry { at, say }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives the rule on a fake clock where every call fails: each retry time, and what
    /// was said when.
    fn run(
        limit: MasterWait,
        for_at_most: Duration,
    ) -> (Vec<Duration>, Vec<(Duration, Say)>, bool) {
        let t0 = Instant::now();
        let mut rule = MasterWaiting::new(limit);
        let (mut now, mut retries, mut said) = (t0, Vec::new(), Vec::new());
        while now - t0 <= for_at_most {
            match rule.failed(now) {
                Next::GiveUp => return (retries, said, true),
                Next::Retry { at, say } => {
                    if let Some(say) = say {
                        said.push((now - t0, say));
                    }
                    assert!(at > now || rule.waited(now) >= Duration::ZERO);
                    retries.push(at - t0);
                    now = at;
                }
            }
        }
        (retries, said, false)
    }

    #[test]
    fn waits_for_ever_saying_so_every_ten_seconds_and_retrying_within_a_second() {
        let (retries, said, gave_up) = run(MasterWait::Forever, Duration::from_secs(60));
        assert!(!gave_up);
        assert_eq!(retries[0], Duration::from_millis(100));
        assert_eq!(retries[1], Duration::from_millis(300));
        assert!(retries
            .windows(2)
            .all(|w| w[1] - w[0] <= Duration::from_secs(1)));
        assert_eq!(said[0], (Duration::ZERO, Say::Waiting));
        // Then once per ten seconds: six lines in a minute, not one per retry.
        assert_eq!(said.len(), 6, "{said:?}");
        for pair in said.windows(2) {
            let gap = pair[1].0 - pair[0].0;
            assert!(gap >= Duration::from_secs(10) && gap < Duration::from_secs(11));
        }
        assert!(matches!(said[1].1, Say::Still(w) if w >= Duration::from_secs(10)));
    }

    #[test]
    fn gives_up_at_its_limit_and_not_before() {
        let limit = Duration::from_millis(2500);
        let (retries, _, gave_up) = run(MasterWait::Limit(limit), Duration::from_secs(60));
        assert!(gave_up);
        assert_eq!(
            *retries.last().unwrap(),
            limit,
            "the last try is at the limit"
        );
        let (retries, said, gave_up) =
            run(MasterWait::Limit(Duration::ZERO), Duration::from_secs(1));
        assert!(
            gave_up && retries.is_empty() && said.is_empty(),
            "0: no wait at all"
        );
    }

    #[test]
    fn the_environment_s_setting_parses_or_says_what_it_takes() {
        assert_eq!("forever".parse(), Ok(MasterWait::Forever));
        assert_eq!(
            " 2.5 ".parse(),
            Ok(MasterWait::Limit(Duration::from_millis(2500)))
        );
        assert_eq!("0".parse(), Ok(MasterWait::Limit(Duration::ZERO)));
        for bad in ["-1", "soon", "NaN", "1e400"] {
            let e = bad.parse::<MasterWait>().unwrap_err();
            assert!(e.contains(MASTER_WAIT_VAR), "{bad}: {e}");
        }
    }
}
