//! The clocks timing runs on: CLOCK_MONOTONIC for every exchange (no steps, and the same
//! clock as any other process's on this host, so a peer's truth can be checked), and the
//! ROS clock only when an offset is published.

/// CLOCK_MONOTONIC in nanoseconds.
#[allow(clippy::useless_conversion)] // time_t and c_long are 32 bits on some targets
pub fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    i64::from(ts.tv_sec) * 1_000_000_000 + i64::from(ts.tv_nsec)
}

/// `clock`'s ROS time minus CLOCK_MONOTONIC (ns), sampled now: adds to a monotonic-based
/// offset to express it against ROS time (wall, or sim time under `/use_sim_time`).
pub fn ros_minus_monotonic_ns(clock: &udpros::time::Clock) -> i64 {
    let mono = monotonic_ns();
    let ros = clock.now();
    let ros_ns = i64::from(ros.sec) * 1_000_000_000 + i64::from(ros.nsec);
    ros_ns - mono
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_agrees_with_std_instant_and_never_goes_back() {
        let (a, start) = (monotonic_ns(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (b, took) = (monotonic_ns(), start.elapsed().as_nanos() as i64);
        assert!(b >= a);
        assert!((b - a - took).abs() < 2_000_000, "{} vs {took}", b - a);
    }
}
