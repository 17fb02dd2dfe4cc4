//! Seeded network faults for one direction of a link: loss, duplication, delay and jitter.
//! The decisions are a pure function of the seed, so a run can be repeated exactly; the
//! [fault proxy](super::proxy) and the simulated autopilot's link apply them.

use std::time::Duration;

/// Faults for one direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Faults {
    /// Probability of dropping a datagram.
    pub loss: f64,
    /// Probability of sending a datagram twice.
    pub duplicate: f64,
    /// Fixed delay.
    pub delay: Duration,
    /// Mean of an exponentially distributed extra delay (reorders datagrams when it exceeds
    /// their spacing).
    pub jitter: Duration,
}

impl Faults {
    /// No faults: a perfect path.
    pub const NONE: Faults = Faults {
        loss: 0.0,
        duplicate: 0.0,
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
    };
}

/// What happens to one datagram: the delays of its copies (none: dropped).
pub type Fate = Vec<Duration>;

/// Seeded decisions, so a run can be repeated exactly.
#[derive(Debug, Clone)]
pub struct FaultModel {
    state: u64,
}

impl FaultModel {
    /// A model whose random draws start from `seed`.
    pub fn new(seed: u64) -> FaultModel {
        FaultModel {
            state: seed ^ 0x5851_f42d_4c95_7f2d,
        }
    }

    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn delay(&mut self, f: &Faults) -> Duration {
        let extra = -f.jitter.as_secs_f64() * (1.0 - self.uniform()).ln();
        f.delay + Duration::from_secs_f64(extra.max(0.0))
    }

    /// What happens to the next datagram on a path with faults `f`.
    pub fn fate(&mut self, f: &Faults) -> Fate {
        if self.uniform() < f.loss {
            return Vec::new();
        }
        let mut copies = vec![self.delay(f)];
        if self.uniform() < f.duplicate {
            copies.push(self.delay(f));
        }
        copies
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fates_follow_the_probabilities_and_repeat_with_the_seed() {
        let f = Faults {
            loss: 0.05,
            duplicate: 0.02,
            delay: Duration::from_millis(3),
            jitter: Duration::from_millis(1),
        };
        let fates: Vec<Fate> = {
            let mut m = FaultModel::new(7);
            (0..100_000).map(|_| m.fate(&f)).collect()
        };
        let lost = fates.iter().filter(|c| c.is_empty()).count() as f64 / 1e5;
        let doubled = fates.iter().filter(|c| c.len() == 2).count() as f64 / 1e5;
        assert!((lost - 0.05).abs() < 0.005, "loss {lost}");
        assert!((doubled - 0.019).abs() < 0.004, "duplicates {doubled}");
        let delays: Vec<f64> = fates.iter().flatten().map(Duration::as_secs_f64).collect();
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        assert!((mean - 0.004).abs() < 0.0002, "mean delay {mean}");
        assert!(delays.iter().all(|d| *d >= 0.003));
        let again: Vec<Fate> = {
            let mut m = FaultModel::new(7);
            (0..100).map(|_| m.fate(&f)).collect()
        };
        assert_eq!(again[..], fates[..100]);
    }
}
