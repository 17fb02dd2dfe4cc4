//! ROS time: a node's clock, sleeping until a ROS time, and [`Rate`].
//!
//! A node's [`Clock`] is decided once, when the node starts, exactly when roscpp and rospy
//! decide theirs: if the master's `/use_sim_time` is true then, the node is in **sim time**
//! and subscribes `/clock` (`rosgraph_msgs/Clock`, queue 1); otherwise it runs on the wall
//! clock and never subscribes `/clock`. The parameter is read once and never watched.
//!
//! "True" is rospy's rule: any Python-truthy value (the boolean `true`, a non-zero number, a
//! non-empty string or list). roscpp accepts only the boolean, so `rosparam set
//! /use_sim_time 1` puts rospy and udpros nodes in sim time and leaves roscpp nodes on the
//! wall clock. Tools that check the sim-time contract (a node under sim time lists `/clock`
//! among its subscriptions) use the truthy rule too.
//!
//! In sim time:
//! - [`Clock::now`] is the latest `/clock` message's time, exactly (no smoothing, no
//!   monotonicity check), and **zero** before the first one, as in roscpp and rospy
//!   ([`Clock::wait_for_valid`] waits for a non-zero time).
//! - Sleeps ([`Clock::sleep`], [`Clock::sleep_until`], [`Rate::sleep`]) wake on `/clock`
//!   messages, not on a timer: they stop while `rosbag play` is paused and resume with it,
//!   and run faster with `rosbag play -r 10`. A sleep started before the first `/clock`
//!   waits for it, then sleeps its full length (as both libraries do).
//!
//! **A clock that jumps backwards** (a bag played again, `rosbag play -l`, a simulation
//! reset; or a wall clock set back) ends every sleep in progress with
//! [`ClockError::MovedBackwards`], as rospy raises `ROSTimeMovedBackwardsException` and
//! roscpp's sleeps return `false`. A [`Rate`] then restarts its cycle from the new time, as
//! both libraries' rates do, so the next `sleep` waits one period of the new time: a loop
//! that logs the error and carries on simply follows the replay. A jump is noticed however
//! briefly the clock went back (every backward step of a sim clock is counted), and it is
//! reported to each sleeper once.
//!
//! **Shutdown** ends every sleep with [`ClockError::Shutdown`], so a loop around
//! [`Rate::sleep`] ends with the node, as `while ros::ok()` loops do.
//!
//! ```no_run
//! # async fn example(node: udpros::node::Node) {
//! use udpros::time::ClockError;
//! let mut rate = node.rate(10.0);
//! loop {
//!     // ... work, stamped with node.now() ...
//!     match rate.sleep().await {
//!         Ok(()) => {}
//!         Err(ClockError::MovedBackwards { from, to }) => {
//!             udpros::tracing::warn!("time moved back from {from:?} to {to:?}")
//!         }
//!         Err(ClockError::Shutdown) => break,
//!     }
//! }
//! # }
//! ```

pub use crate::msg::{Duration, Time};
use std::fmt;
use tokio::sync::watch;

/// The longest a wall-time sleep waits before looking at the clock again, so that a wall
/// clock set back is noticed within this long.
const WALL_SLICE: std::time::Duration = std::time::Duration::from_secs(1);

/// Sleeps until `due` on the wall clock, or for ever when there is nothing due: the wait of
/// a driver whose pure object answered `poll_timeout()` with an `Option`.
pub(crate) async fn sleep_until_due(due: Option<std::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due.into()).await,
        None => std::future::pending().await,
    }
}

/// A ROS clock: the wall clock, or sim time driven by `/clock` (or by a [`SimTimeSource`]).
///
/// Cheap to clone; clones read the same time. A node's clock ([`crate::node::Node::clock`])
/// also knows when the node shuts down, and ends sleeps then.
#[derive(Clone)]
pub struct Clock {
    source: Source,
    /// The node's shutdown reason, `None` while it runs; no receiver for a clock that
    /// belongs to no node.
    shutdown: Option<watch::Receiver<Option<String>>>,
}

#[derive(Clone)]
enum Source {
    Wall,
    Sim(watch::Receiver<SimTime>),
}

/// What a sim clock holds: the time, and how many times it went backwards, so a sleeper
/// that only sees the latest value still notices a jump back and forth in between.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SimTime {
    now: Time,
    jumps: u64,
}

/// The time and jump count a sleeper saw last; a later reading that is earlier, or has
/// more jumps, is a backward jump.
#[derive(Debug, Clone, Copy)]
struct Seen {
    at: Time,
    jumps: u64,
}

/// Why a sleep ended before its time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClockError {
    /// The clock went backwards while sleeping (or, for [`Rate::sleep`], since the last
    /// cycle): from the last time seen to the time now.
    MovedBackwards {
        /// The last time the sleeper saw before the jump.
        from: Time,
        /// The time after the jump.
        to: Time,
    },
    /// The node shut down (or, for a [`SimTimeSource`] clock, the source was dropped).
    Shutdown,
}

impl fmt::Display for ClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockError::MovedBackwards { from, to } => write!(
                f,
                "ROS time moved backwards (from {:.9} to {:.9})",
                from.as_secs_f64(),
                to.as_secs_f64()
            ),
            ClockError::Shutdown => f.write_str("the node shut down"),
        }
    }
}

impl std::error::Error for ClockError {}

/// Sets the time of the sim clocks made with [`Clock::simulated`], as `/clock` messages
/// set a node's. Dropping it ends their sleeps with [`ClockError::Shutdown`].
pub struct SimTimeSource {
    time: watch::Sender<SimTime>,
}

impl SimTimeSource {
    /// Makes `now` the clock's time and wakes every sleeper. An earlier time than the
    /// current one is a backward jump. Nanoseconds of a second or more (a hostile or
    /// broken `/clock` sends 4294967295) are carried into the seconds, as roscpp's
    /// `normalizeSecNSec` does, so no stamp ever holds them.
    pub fn set(&self, now: Time) {
        let now = now.normalized();
        self.time.send_modify(|t| {
            if now < t.now {
                t.jumps += 1;
            }
            t.now = now;
        });
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Clock")
            .field("sim_time", &self.is_sim_time())
            .field("now", &self.now())
            .finish()
    }
}

impl Clock {
    /// The wall clock, as a node without sim time has; it belongs to no node, so its
    /// sleeps end only by time or a backward jump.
    pub fn wall() -> Clock {
        Clock {
            source: Source::Wall,
            shutdown: None,
        }
    }

    /// A sim clock at time zero and the source that drives it: for tests of code that
    /// sleeps in ROS time, and for programs that get their time from elsewhere than
    /// `/clock`.
    pub fn simulated() -> (SimTimeSource, Clock) {
        let (time, rx) = watch::channel(SimTime::default());
        let clock = Clock {
            source: Source::Sim(rx),
            shutdown: None,
        };
        (SimTimeSource { time }, clock)
    }

    /// This clock, ending its sleeps when `shutdown` holds a reason.
    pub(crate) fn until(mut self, shutdown: watch::Receiver<Option<String>>) -> Clock {
        self.shutdown = Some(shutdown);
        self
    }

    /// Whether this is sim time (driven by `/clock`), not the wall clock.
    pub fn is_sim_time(&self) -> bool {
        matches!(self.source, Source::Sim(_))
    }

    /// The time now: the wall clock, or the latest sim time (zero before the first).
    pub fn now(&self) -> Time {
        self.read().at
    }

    /// Whether the time is usable: always for the wall clock; in sim time once the first
    /// `/clock` arrived (roscpp's `Time::isValid`).
    pub fn is_valid(&self) -> bool {
        !self.now().is_zero()
    }

    /// The first non-zero time: at once for the wall clock and for a sim clock that has
    /// had its first `/clock`; otherwise when it comes (roscpp's `Time::waitForValid`).
    pub async fn wait_for_valid(&self) -> Result<Time, ClockError> {
        self.valid().await.map(|seen| seen.at)
    }

    /// Sleeps for `d` of this clock's time. In sim time before the first `/clock`, waits
    /// for it and then sleeps the whole of `d`.
    pub async fn sleep(&self, d: Duration) -> Result<(), ClockError> {
        let start = self.valid().await?;
        self.wait_until(start.at + d, start).await.map(drop)
    }

    /// Sleeps until this clock reads `deadline` or later (returns at once if it already
    /// does).
    pub async fn sleep_until(&self, deadline: Time) -> Result<(), ClockError> {
        let start = self.valid().await?;
        self.wait_until(deadline, start).await.map(drop)
    }

    /// A [`Rate`] of `hz` cycles per second of this clock's time.
    pub fn rate(&self, hz: f64) -> Rate {
        Rate::new(self.clone(), hz)
    }

    fn read(&self) -> Seen {
        match &self.source {
            Source::Wall => Seen {
                at: Time::now(),
                jumps: 0,
            },
            Source::Sim(rx) => {
                let t = *rx.borrow();
                Seen {
                    at: t.now,
                    jumps: t.jumps,
                }
            }
        }
    }

    fn shut_down(&self) -> bool {
        self.shutdown.as_ref().is_some_and(|s| s.borrow().is_some())
    }

    /// The first reading with a non-zero time.
    async fn valid(&self) -> Result<Seen, ClockError> {
        let mut waker = self.waker();
        loop {
            if self.shut_down() {
                return Err(ClockError::Shutdown);
            }
            let seen = self.read();
            if !seen.at.is_zero() {
                return Ok(seen);
            }
            waker.wait(WALL_SLICE).await?;
        }
    }

    /// Waits until the clock reads `deadline`, checking for backward jumps against what
    /// was `seen` last; returns the reading that reached the deadline.
    async fn wait_until(&self, deadline: Time, mut seen: Seen) -> Result<Seen, ClockError> {
        let mut waker = self.waker();
        loop {
            if self.shut_down() {
                return Err(ClockError::Shutdown);
            }
            let now = self.read();
            if now.jumps != seen.jumps || now.at < seen.at {
                return Err(ClockError::MovedBackwards {
                    from: seen.at,
                    to: now.at,
                });
            }
            seen = now;
            if now.at >= deadline {
                return Ok(now);
            }
            let left = deadline.since(now.at).to_std();
            waker.wait(left.min(WALL_SLICE)).await?;
        }
    }

    /// What wakes a sleeper: a new sim time, a wall-clock timer, or shutdown. Made before
    /// the sleeper's first reading, so no change after that reading is missed.
    fn waker(&self) -> Waker {
        let mut time = match &self.source {
            Source::Wall => None,
            Source::Sim(rx) => Some(rx.clone()),
        };
        if let Some(rx) = time.as_mut() {
            rx.mark_unchanged();
        }
        Waker {
            time,
            shutdown: self.shutdown.clone(),
        }
    }
}

struct Waker {
    time: Option<watch::Receiver<SimTime>>,
    shutdown: Option<watch::Receiver<Option<String>>>,
}

impl Waker {
    /// Until the sim time changes (or, on the wall clock, `wall` has passed), or shutdown.
    async fn wait(&mut self, wall: std::time::Duration) -> Result<(), ClockError> {
        let time = async {
            match self.time.as_mut() {
                Some(rx) => rx.changed().await.map_err(|_| ClockError::Shutdown),
                None => {
                    tokio::time::sleep(wall).await;
                    Ok(())
                }
            }
        };
        let shutdown = async {
            match self.shutdown.as_mut() {
                // A dropped sender is a node that is gone: shut down too.
                Some(rx) => {
                    let _ = rx.changed().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            woke = time => woke,
            () = shutdown => Err(ClockError::Shutdown),
        }
    }
}

/// Sleeps that keep a loop at a steady rate of a [`Clock`]'s time, as `ros::Rate` and
/// `rospy.Rate` do.
///
/// Each [`Rate::sleep`] ends one period after the previous one ended (not after it was
/// called), so the work between sleeps does not slow the loop. A loop that overran by
/// more than a whole period starts again from now instead of hurrying to catch up. After a
/// backward jump the cycle restarts from the new time (and the sleep reports the jump).
/// Made in sim time before the first `/clock`, the first cycle starts at the first
/// `/clock`.
#[derive(Debug)]
pub struct Rate {
    clock: Clock,
    period: Duration,
    /// Where the current cycle started; `None` until the clock is valid.
    start: Option<Seen>,
}

impl Rate {
    /// `hz` cycles per second of `clock`'s time. A rate that is not a positive number (0,
    /// negative, NaN) has the longest period there is (about 68 years): it does not spin.
    pub fn new(clock: Clock, hz: f64) -> Rate {
        let period = if hz > 0.0 {
            Duration::from_secs_f64(1.0 / hz)
        } else {
            Duration::from_secs_f64(f64::INFINITY)
        };
        Rate::every(clock, period)
    }

    /// One cycle every `period` of `clock`'s time.
    pub fn every(clock: Clock, period: Duration) -> Rate {
        let now = clock.read();
        Rate {
            clock,
            period,
            start: (!now.at.is_zero()).then_some(now),
        }
    }

    /// The period of one cycle.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Starts the current cycle now, as after a pause in the loop.
    pub fn reset(&mut self) {
        let now = self.clock.read();
        self.start = (!now.at.is_zero()).then_some(now);
    }

    /// Sleeps until the end of the current cycle. `Err(MovedBackwards)` when the clock
    /// went backwards during the sleep or since the last one (the cycle then restarts from
    /// the new time); `Err(Shutdown)` once the node shuts down.
    pub async fn sleep(&mut self) -> Result<(), ClockError> {
        let start = match self.start {
            Some(start) => start,
            None => self.clock.valid().await?,
        };
        let deadline = start.at + self.period;
        match self.clock.wait_until(deadline, start).await {
            Ok(woke) => {
                let overran = woke.at > deadline + self.period;
                let at = if overran { woke.at } else { deadline };
                self.start = Some(Seen {
                    at,
                    jumps: woke.jumps,
                });
                Ok(())
            }
            Err(e @ ClockError::MovedBackwards { .. }) => {
                self.reset();
                Err(e)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_with_a_second_or_more_of_nanoseconds_is_normalised() {
        let (source, clock) = Clock::simulated();
        source.set(Time::new(5, u32::MAX));
        assert_eq!(clock.now(), Time::new(9, 294_967_295));
        source.set(Time::new(u32::MAX, u32::MAX));
        assert_eq!(clock.now(), Time::new(u32::MAX, 999_999_999), "saturates");
        assert!(clock.now().nsec < 1_000_000_000);
    }
    use std::future::Future;
    use std::task::{Context, Poll};

    fn t(secs: f64) -> Time {
        Time::from_nanos((secs * 1e9) as u64)
    }

    fn d(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    /// Polls `f` once: a sim sleep that is still pending has not reached its time.
    fn poll_once<F: Future>(f: &mut std::pin::Pin<Box<F>>) -> Poll<F::Output> {
        f.as_mut()
            .poll(&mut Context::from_waker(std::task::Waker::noop()))
    }

    #[tokio::test]
    async fn sim_clock_is_zero_until_the_first_time_then_exactly_it() {
        let (source, clock) = Clock::simulated();
        assert!(clock.is_sim_time() && !clock.is_valid());
        assert_eq!(clock.now(), Time::default());
        source.set(t(100.25));
        assert!(clock.is_valid());
        assert_eq!(clock.now(), t(100.25));
        assert!(!Clock::wall().is_sim_time() && Clock::wall().is_valid());
    }

    #[tokio::test]
    async fn sim_sleep_started_at_zero_waits_for_time_then_sleeps_in_full() {
        let (source, clock) = Clock::simulated();
        let mut sleep = Box::pin(clock.sleep(d(1.0)));
        assert!(poll_once(&mut sleep).is_pending());
        source.set(t(100.0));
        assert!(poll_once(&mut sleep).is_pending());
        source.set(t(100.9));
        assert!(poll_once(&mut sleep).is_pending());
        source.set(t(101.0));
        assert_eq!(poll_once(&mut sleep), Poll::Ready(Ok(())));
    }

    #[tokio::test]
    async fn sim_sleep_stays_asleep_while_the_clock_is_paused() {
        let (source, clock) = Clock::simulated();
        source.set(t(5.0));
        let mut sleep = Box::pin(clock.sleep_until(t(5.5)));
        for _ in 0..50 {
            source.set(t(5.2)); // a paused bag repeats nothing; the same time again is harmless
            assert!(poll_once(&mut sleep).is_pending());
        }
        source.set(t(6.0));
        assert_eq!(poll_once(&mut sleep), Poll::Ready(Ok(())));
    }

    #[tokio::test]
    async fn a_backward_jump_ends_sleeps_even_when_the_clock_came_forward_again() {
        let (source, clock) = Clock::simulated();
        source.set(t(123.0));
        let mut sleep = Box::pin(clock.sleep(d(10.0)));
        assert!(poll_once(&mut sleep).is_pending());
        // Back to 50 and past 123 again before the sleeper looks: still a jump.
        source.set(t(50.0));
        source.set(t(124.0));
        match poll_once(&mut sleep) {
            Poll::Ready(Err(ClockError::MovedBackwards { from, to })) => {
                assert_eq!((from, to), (t(123.0), t(124.0)));
            }
            other => panic!("expected a backward jump, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn rate_keeps_its_cycle_reports_a_jump_once_and_restarts_from_the_new_time() {
        let (source, clock) = Clock::simulated();
        let mut rate = clock.rate(10.0);
        assert_eq!(rate.period(), d(0.1));
        source.set(t(100.0));
        for cycle in 1..=3 {
            let mut sleep = Box::pin(rate.sleep());
            assert!(poll_once(&mut sleep).is_pending());
            // Late by 30 ms: the next cycle still ends on the 100 ms grid.
            source.set(t(100.0 + 0.1 * f64::from(cycle) + 0.03));
            assert_eq!(poll_once(&mut sleep), Poll::Ready(Ok(())));
        }
        // The bag starts again at 50 while the loop works: the next sleep reports it
        // at once and the one after waits one period of the new time.
        source.set(t(50.0));
        assert!(matches!(
            rate.sleep().await,
            Err(ClockError::MovedBackwards { .. })
        ));
        let mut sleep = Box::pin(rate.sleep());
        source.set(t(50.05));
        assert!(poll_once(&mut sleep).is_pending());
        source.set(t(50.1));
        assert_eq!(poll_once(&mut sleep), Poll::Ready(Ok(())));
    }

    #[tokio::test]
    async fn rate_that_overran_by_a_period_restarts_instead_of_hurrying() {
        let (source, clock) = Clock::simulated();
        source.set(t(10.0));
        let mut rate = clock.rate(10.0);
        source.set(t(11.0)); // ten periods of work
        assert_eq!(rate.sleep().await, Ok(())); // overran: no wait
        let mut sleep = Box::pin(rate.sleep());
        source.set(t(11.05));
        assert!(
            poll_once(&mut sleep).is_pending(),
            "no burst of catch-up cycles"
        );
        source.set(t(11.1));
        assert_eq!(poll_once(&mut sleep), Poll::Ready(Ok(())));
    }

    #[tokio::test]
    async fn shutdown_and_a_dropped_source_end_sleeps() {
        let (source, clock) = Clock::simulated();
        let (stop, rx) = watch::channel(None);
        let node_clock = clock.clone().until(rx);
        let mut sleep = Box::pin(node_clock.sleep(d(1.0)));
        assert!(poll_once(&mut sleep).is_pending());
        stop.send_replace(Some("test".into()));
        assert_eq!(
            poll_once(&mut sleep),
            Poll::Ready(Err(ClockError::Shutdown))
        );
        let wall = Clock::wall().until(stop.subscribe());
        assert_eq!(wall.sleep(d(60.0)).await, Err(ClockError::Shutdown));
        let mut sleep = Box::pin(clock.sleep(d(1.0)));
        drop(source);
        assert_eq!(
            poll_once(&mut sleep),
            Poll::Ready(Err(ClockError::Shutdown))
        );
    }

    #[tokio::test]
    async fn wall_rate_ticks_in_wall_time_and_bad_rates_do_not_spin() {
        let clock = Clock::wall();
        let mut rate = clock.rate(200.0);
        let started = std::time::Instant::now();
        for _ in 0..4 {
            rate.sleep().await.unwrap();
        }
        // Four 5 ms periods; generous bounds (timings are not asserted tightly).
        let took = started.elapsed();
        assert!(took >= std::time::Duration::from_millis(15), "{took:?}");
        assert!(took < std::time::Duration::from_secs(5), "{took:?}");
        for hz in [0.0, -1.0, f64::NAN] {
            assert!(clock.rate(hz).period() >= d(1e9), "{hz}");
        }
    }
}
