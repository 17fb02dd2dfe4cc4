//! Seeded synthetic TIMESYNC exchanges with a known truth, and how well each estimator
//! follows it: the deterministic test bench of the estimators (no sockets, no clocks).

use super::estimator::{Exchange, FitParams, Px4Filter, Px4Params, Verdict, WindowFit};

/// A one-way delay: `base` plus an exponentially distributed part of mean `jitter` (ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Delay {
    /// The fixed part (ns).
    pub base: f64,
    /// The mean of the exponential part (ns).
    pub jitter: f64,
}

impl Delay {
    /// A delay given in milliseconds.
    pub const fn ms(base: f64, jitter: f64) -> Delay {
        Delay {
            base: base * 1e6,
            jitter: jitter * 1e6,
        }
    }
}

/// One link the timesync benchmark replays: rates, delays, loss, drift and clock steps.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Its name in the tables.
    pub name: &'static str,
    /// TIMESYNC requests per second.
    pub rate_hz: f64,
    /// How long it runs (s).
    pub duration_s: f64,
    /// remote − local at the start (ns).
    pub offset: i64,
    /// The remote clock's rate error (parts per million).
    pub drift_ppm: f64,
    /// Requests' one-way delay.
    pub up: Delay,
    /// Replies' one-way delay.
    pub down: Delay,
    /// The fraction of messages lost each way.
    pub loss: f64,
    /// (time in s, jump of the remote clock in ns)
    pub steps: Vec<(f64, i64)>,
    /// The random seed, so a run is repeatable.
    pub seed: u64,
}

impl Scenario {
    fn base(name: &'static str) -> Scenario {
        Scenario {
            name,
            rate_hz: 10.0,
            duration_s: 300.0,
            offset: 100_000_000_000,
            drift_ppm: 0.0,
            up: Delay::ms(1.0, 0.5),
            down: Delay::ms(1.0, 0.5),
            loss: 0.0,
            steps: Vec::new(),
            seed: 1,
        }
    }

    /// The scenarios the issue names: symmetric jitter, asymmetric delays, 30 ppm drift,
    /// 5 ms / 50 ms / 1 s steps, heavy jitter, a 57600-baud-like radio.
    pub fn standard() -> Vec<Scenario> {
        let drift = |mut s: Scenario| {
            s.drift_ppm = 30.0;
            s
        };
        let step = |name, jump: i64| Scenario {
            steps: vec![(150.0, jump)],
            duration_s: 600.0,
            ..drift(Scenario::base(name))
        };
        vec![
            Scenario::base("symmetric jitter"),
            drift(Scenario::base("30 ppm drift")),
            Scenario {
                up: Delay::ms(1.0, 0.0),
                down: Delay::ms(3.0, 0.0),
                ..Scenario::base("asymmetric 1 ms up, 3 ms down")
            },
            step("5 ms step", 5_000_000),
            step("50 ms step", 50_000_000),
            step("1 s step", 1_000_000_000),
            Scenario {
                up: Delay::ms(1.0, 3.0),
                down: Delay::ms(1.0, 3.0),
                ..drift(Scenario::base("heavy jitter"))
            },
            Scenario {
                up: Delay::ms(5.2, 0.3),
                down: Delay::ms(5.2, 0.3),
                ..drift(Scenario::base("57600-baud radio"))
            },
        ]
    }

    /// remote − local at our clock `t` (ns since start).
    fn remote_minus_local(&self, t: i64) -> i64 {
        let steps: i64 = self
            .steps
            .iter()
            .filter(|(at, _)| t as f64 >= at * 1e9)
            .map(|(_, j)| j)
            .sum();
        self.offset + (t as f64 * self.drift_ppm * 1e-6) as i64 + steps
    }

    /// The offset estimators should report (local − remote, mavros's sign), with the
    /// asymmetry bias (mean down − mean up)/2 that no estimator can remove.
    pub fn expected(&self, t: i64) -> i64 {
        let bias = ((self.down.base + self.down.jitter) - (self.up.base + self.up.jitter)) / 2.0;
        -self.remote_minus_local(t) + bias as i64
    }

    /// The exchanges, and for each whether it arrived.
    pub fn exchanges(&self) -> Vec<Option<Exchange>> {
        let mut rng = self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = || {
            rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        };
        let n = (self.duration_s * self.rate_hz) as i64;
        let period = (1e9 / self.rate_hz) as i64;
        (0..n)
            .map(|i| {
                let t1 = 1_000_000 + i * period;
                let mut delay = |d: Delay| d.base - d.jitter * (1.0 - next()).ln();
                let (up, down) = (delay(self.up) as i64, delay(self.down) as i64);
                let lost = next() < self.loss;
                let arrive = t1 + up;
                let tc1 = arrive + self.remote_minus_local(arrive);
                (!lost).then_some(Exchange {
                    t1,
                    tc1,
                    t3: arrive + down,
                })
            })
            .collect()
    }
}

/// How one estimator did on one scenario.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Score {
    /// Samples the estimator took.
    pub accepted: usize,
    /// Samples it was given.
    pub samples: usize,
    /// When |error − expected| last came back under 100 µs for good (s), if it did.
    pub settled_at: Option<f64>,
    /// The same, measured from the last step.
    pub settled_after_step: Option<f64>,
    /// Over the last 60 s (µs).
    pub mean_error_us: f64,
    /// Over the last 60 s (µs).
    pub rms_error_us: f64,
    /// Times it reset.
    pub resets: u32,
    /// Whether it ever had an estimate.
    pub had_estimate: bool,
}

/// Runs both estimators over a scenario.
pub fn score(s: &Scenario) -> (Score, Score) {
    let mut px4 = Px4Filter::new(Px4Params::default());
    let mut fit = WindowFit::new(FitParams::default());
    let mut scores = (Score::default(), Score::default());
    // (time in s, error in ns) per estimator.
    let mut errors: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
    for e in s.exchanges().into_iter().flatten() {
        let t = e.t3 as f64 / 1e9;
        let expected = s.expected(e.t3) as f64;
        let verdict = px4.update(&e);
        scores.0.samples += 1;
        scores.0.accepted += usize::from(verdict == Verdict::Accepted);
        if let Some(o) = px4.offset() {
            errors[0].push((t, o as f64 - expected));
        }
        let verdict = fit.update(&e);
        scores.1.samples += 1;
        scores.1.accepted += usize::from(verdict == Verdict::Accepted);
        if let Some(o) = fit.offset_at(e.t3) {
            errors[1].push((t, o as f64 - expected));
        }
    }
    let last_step = s.steps.iter().map(|(t, _)| *t).fold(0.0, f64::max);
    let finish = |score: &mut Score, errors: &[(f64, f64)], resets: u32| {
        score.resets = resets;
        score.had_estimate = !errors.is_empty();
        let end = s.duration_s;
        let tail: Vec<f64> = errors
            .iter()
            .filter(|(t, _)| *t >= end - 60.0)
            .map(|(_, e)| *e / 1e3)
            .collect();
        if !tail.is_empty() {
            score.mean_error_us = tail.iter().sum::<f64>() / tail.len() as f64;
            score.rms_error_us =
                (tail.iter().map(|e| e * e).sum::<f64>() / tail.len() as f64).sqrt();
        }
        let settled = |from: f64| -> Option<f64> {
            let after: Vec<&(f64, f64)> = errors.iter().filter(|(t, _)| *t >= from).collect();
            let last_bad = after.iter().rposition(|(_, e)| e.abs() >= 100_000.0);
            match last_bad {
                None => after.first().map(|(t, _)| t - from),
                Some(i) if i + 1 < after.len() => Some(after[i + 1].0 - from),
                Some(_) => None,
            }
        };
        score.settled_at = settled(0.0);
        score.settled_after_step = if s.steps.is_empty() {
            None
        } else {
            settled(last_step)
        };
    };
    finish(&mut scores.0, &errors[0], px4.resets);
    finish(&mut scores.1, &errors[1], fit.resets);
    scores
}
