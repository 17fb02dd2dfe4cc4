//! When each message of a recording is due: the recording's time mapped onto this
//! machine's, at a rate, moved by pauses and steps. Pure (instants in, instants out), so
//! its rules are tested on a fake clock.

use std::time::Duration;
use tokio::time::Instant;

/// A recording's timeline as it plays.
#[derive(Debug, Clone)]
pub(super) struct Timeline {
    /// The recording's time (ns) that plays at `started`.
    first_ns: u64,
    started: Instant,
    rate: f64,
    /// Since when it is paused.
    paused_at: Option<Instant>,
}

impl Timeline {
    /// `first_ns` plays at `now`, and the rest `rate` times faster than recorded; paused
    /// from the start if asked.
    pub(super) fn new(first_ns: u64, now: Instant, rate: f64, paused: bool) -> Timeline {
        Timeline {
            first_ns,
            started: now,
            rate,
            paused_at: paused.then_some(now),
        }
    }

    pub(super) fn rate(&self) -> f64 {
        self.rate
    }

    pub(super) fn is_paused(&self) -> bool {
        self.paused_at.is_some()
    }

    /// When the message recorded at `time_ns` is due; `None` while paused.
    pub(super) fn due(&self, time_ns: u64) -> Option<Instant> {
        if self.paused_at.is_some() {
            return None;
        }
        Some(self.started + self.since_first(time_ns))
    }

    /// Pauses if playing, resumes if paused: a pause of `d` moves every later message `d`
    /// later.
    pub(super) fn toggle(&mut self, now: Instant) {
        match self.paused_at.take() {
            Some(at) => self.started += now.saturating_duration_since(at),
            None => self.paused_at = Some(now),
        }
    }

    /// While paused: the message at `time_ns` is published now, and the timeline moves
    /// so that, once resumed, the next ones keep their spacing after it.
    pub(super) fn step_to(&mut self, time_ns: u64) {
        if let Some(at) = self.paused_at {
            self.first_ns = time_ns;
            self.started = at;
        }
    }

    /// The recording's time at `now` (ns), standing still while paused.
    pub(super) fn recording_ns(&self, now: Instant) -> u64 {
        let now = self.paused_at.unwrap_or(now);
        let elapsed = now.saturating_duration_since(self.started);
        self.first_ns
            .saturating_add((elapsed.as_secs_f64() * self.rate * 1e9) as u64)
    }

    fn since_first(&self, time_ns: u64) -> Duration {
        Duration::from_nanos(time_ns.saturating_sub(self.first_ns)).div_f64(self.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn messages_are_due_at_their_recorded_spacing_over_the_rate() {
        let t0 = Instant::now();
        let timeline = Timeline::new(100 * S, t0, 2.0, false);
        assert_eq!(timeline.due(100 * S), Some(t0));
        assert_eq!(timeline.due(104 * S), Some(t0 + Duration::from_secs(2)));
        assert_eq!(timeline.recording_ns(t0 + Duration::from_secs(3)), 106 * S);
    }

    #[test]
    fn a_pause_moves_what_follows_by_its_length_and_stops_the_clock() {
        let t0 = Instant::now();
        let mut timeline = Timeline::new(0, t0, 1.0, false);
        timeline.toggle(t0 + Duration::from_secs(1));
        assert!(timeline.is_paused());
        assert_eq!(timeline.due(2 * S), None);
        // The recording's time stands still while paused.
        assert_eq!(timeline.recording_ns(t0 + Duration::from_secs(9)), S);
        timeline.toggle(t0 + Duration::from_secs(11));
        assert_eq!(timeline.due(2 * S), Some(t0 + Duration::from_secs(12)));
        assert_eq!(timeline.recording_ns(t0 + Duration::from_secs(12)), 2 * S);
    }

    #[test]
    fn started_paused_nothing_is_due_until_resumed() {
        let t0 = Instant::now();
        let mut timeline = Timeline::new(5 * S, t0, 1.0, true);
        assert_eq!(timeline.due(5 * S), None);
        timeline.toggle(t0 + Duration::from_secs(4));
        assert_eq!(timeline.due(5 * S), Some(t0 + Duration::from_secs(4)));
        assert_eq!(timeline.due(6 * S), Some(t0 + Duration::from_secs(5)));
    }

    #[test]
    fn a_step_plays_one_message_and_keeps_the_spacing_of_the_rest() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let mut timeline = Timeline::new(0, t0, 1.0, true);
        let paused_at = t0;
        timeline.step_to(30 * S);
        // Still paused; on resuming 5 s later, the message 1 s after the stepped one is
        // due 1 s after the resume.
        assert!(timeline.is_paused());
        assert_eq!(
            timeline.recording_ns(paused_at + Duration::from_secs(50)),
            30 * S
        );
        timeline.toggle(paused_at + Duration::from_secs(5));
        assert_eq!(
            timeline.due(31 * S),
            Some(paused_at + Duration::from_secs(6))
        );
    }
}
