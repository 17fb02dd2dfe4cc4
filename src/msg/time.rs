use serde::{Deserialize, Serialize};

/// ROS `time`: seconds and nanoseconds since the Unix epoch (or since start in sim time).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Time {
    /// Seconds since the epoch (1970 for wall time; since start for sim time).
    pub sec: u32,
    /// Nanoseconds within the second.
    pub nsec: u32,
}

/// ROS `duration`: signed seconds and nanoseconds.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Duration {
    /// Whole seconds (negative for a negative duration).
    pub sec: i32,
    /// Nanoseconds added to the seconds.
    pub nsec: i32,
}

const NANOS_PER_SEC: u64 = 1_000_000_000;

impl Time {
    /// A time of `sec` seconds and `nsec` nanoseconds, as given.
    pub const fn new(sec: u32, nsec: u32) -> Time {
        Time { sec, nsec }
    }

    /// The wall clock now, as roscpp's `ros::Time::now()` without sim time.
    pub fn now() -> Time {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Time::from_nanos(since_epoch.as_nanos().min(u128::from(u64::MAX)) as u64)
    }

    /// Saturates at the largest representable time (year 2106).
    pub fn from_nanos(nanos: u64) -> Time {
        let sec = nanos / NANOS_PER_SEC;
        match u32::try_from(sec) {
            Ok(sec) => Time {
                sec,
                nsec: (nanos % NANOS_PER_SEC) as u32,
            },
            Err(_) => Time {
                sec: u32::MAX,
                nsec: (NANOS_PER_SEC - 1) as u32,
            },
        }
    }

    /// The same instant with `nsec` below a second (the excess carried into `sec`, as
    /// roscpp's `normalizeSecNSec`), saturating at the largest time.
    pub fn normalized(self) -> Time {
        Time::from_nanos(self.as_nanos())
    }

    /// Nanoseconds since the epoch.
    pub fn as_nanos(self) -> u64 {
        u64::from(self.sec) * NANOS_PER_SEC + u64::from(self.nsec)
    }

    /// Seconds since the epoch, as `f64` (rospy's `to_sec`).
    pub fn as_secs_f64(self) -> f64 {
        f64::from(self.sec) + f64::from(self.nsec) * 1e-9
    }

    /// Whether this is time zero: in sim time, the clock before its first `/clock` message
    /// (roscpp's `!Time::isValid()`).
    pub fn is_zero(self) -> bool {
        self.sec == 0 && self.nsec == 0
    }

    /// `self + d`, saturating at zero and at the largest representable time.
    pub fn saturating_add(self, d: Duration) -> Time {
        let nanos = i128::from(self.as_nanos()) + i128::from(d.as_nanos());
        Time::from_nanos(nanos.clamp(0, i128::from(u64::MAX)) as u64)
    }

    /// `self - earlier` as a signed duration (negative when `earlier` is later), saturating
    /// at the `i32` seconds range.
    pub fn since(self, earlier: Time) -> Duration {
        let nanos = i128::from(self.as_nanos()) - i128::from(earlier.as_nanos());
        Duration::from_nanos(nanos.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
    }
}

impl std::ops::Add<Duration> for Time {
    type Output = Time;

    /// Saturating, as [`Time::saturating_add`].
    fn add(self, d: Duration) -> Time {
        self.saturating_add(d)
    }
}

impl std::ops::Sub<Duration> for Time {
    type Output = Time;

    /// Saturating at zero, as [`Time::saturating_add`] of the negated duration.
    fn sub(self, d: Duration) -> Time {
        self.saturating_add(Duration::from_nanos(d.as_nanos().saturating_neg()))
    }
}

impl std::ops::Sub for Time {
    type Output = Duration;

    /// Saturating, as [`Time::since`].
    fn sub(self, earlier: Time) -> Duration {
        self.since(earlier)
    }
}

impl Duration {
    /// A duration of `sec` seconds and `nsec` nanoseconds, as given.
    pub const fn new(sec: i32, nsec: i32) -> Duration {
        Duration { sec, nsec }
    }

    /// Normalised so that `nsec` lies in `0..1e9`; saturates at the `i32` seconds range.
    pub fn from_nanos(nanos: i64) -> Duration {
        let sec = nanos.div_euclid(NANOS_PER_SEC as i64);
        let nsec = nanos.rem_euclid(NANOS_PER_SEC as i64) as i32;
        match i32::try_from(sec) {
            Ok(sec) => Duration { sec, nsec },
            Err(_) if sec < 0 => Duration {
                sec: i32::MIN,
                nsec: 0,
            },
            Err(_) => Duration {
                sec: i32::MAX,
                nsec: (NANOS_PER_SEC - 1) as i32,
            },
        }
    }

    /// The duration in nanoseconds.
    pub fn as_nanos(self) -> i64 {
        i64::from(self.sec) * NANOS_PER_SEC as i64 + i64::from(self.nsec)
    }

    /// The duration in seconds, as `f64` (rospy's `to_sec`).
    pub fn as_secs_f64(self) -> f64 {
        f64::from(self.sec) + f64::from(self.nsec) * 1e-9
    }

    /// `secs` seconds, rounded to the nanosecond; saturates at the `i32` seconds range
    /// (NaN gives zero).
    pub fn from_secs_f64(secs: f64) -> Duration {
        // `as` saturates, and maps NaN to 0.
        Duration::from_nanos((secs * 1e9).round() as i64)
    }

    /// The duration as a `std::time::Duration`; a negative one is zero.
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(u64::try_from(self.as_nanos()).unwrap_or(0))
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Duration {
        Duration::from_nanos(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_nanos_round_trip_and_saturate() {
        let t = Time::from_nanos(1_600_000_000_123_456_789);
        assert_eq!(t, Time::new(1_600_000_000, 123_456_789));
        assert_eq!(t.as_nanos(), 1_600_000_000_123_456_789);
        assert_eq!(Time::from_nanos(u64::MAX).sec, u32::MAX);
    }

    #[test]
    fn duration_normalises_negative_values() {
        let d = Duration::from_nanos(-1_500_000_000);
        assert_eq!(d, Duration::new(-2, 500_000_000));
        assert_eq!(d.as_nanos(), -1_500_000_000);
        assert_eq!(Duration::from_nanos(i64::MIN).sec, i32::MIN);
    }

    #[test]
    fn time_arithmetic_saturates_and_signs() {
        let t = Time::new(10, 500_000_000);
        assert_eq!(
            t + Duration::from_secs_f64(0.75),
            Time::new(11, 250_000_000)
        );
        assert_eq!(t + Duration::from_secs_f64(-20.0), Time::new(0, 0));
        assert_eq!(
            Time::new(u32::MAX, 0) + Duration::new(5, 0),
            Time::from_nanos(u64::MAX)
        );
        assert_eq!(Time::new(3, 0) - t, Duration::from_nanos(-7_500_000_000));
        assert_eq!((t - Time::new(3, 0)).as_secs_f64(), 7.5);
        assert_eq!(Duration::from_secs_f64(f64::NAN), Duration::default());
        assert_eq!(Duration::from_secs_f64(f64::INFINITY).sec, i32::MAX);
        assert_eq!(Duration::from_nanos(-5).to_std(), std::time::Duration::ZERO);
        assert!(Time::default().is_zero() && !t.is_zero());
        assert_eq!(t - Duration::new(1, 0), Time::new(9, 500_000_000));
        assert_eq!(t - Duration::new(11, 0), Time::default());
    }
}
