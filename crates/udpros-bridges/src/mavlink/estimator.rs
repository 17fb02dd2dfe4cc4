//! Clock-offset estimators for TIMESYNC exchanges, as pure code: every sample is the
//! triple (t1 = our send time, tc1 = the peer's clock when it answered, t3 = our receive
//! time), all in nanoseconds. Offsets use mavros's sign: local − remote.
//!
//! Two estimators run side by side:
//! - [`Px4Filter`]: PX4's and mavros's filter, constant for constant (RTT gate 10 ms,
//!   deviation gate 100 ms, gain schedule over 500 samples, Holt smoothing per sample);
//! - [`WindowFit`]: ours. A sliding window of accepted samples; the lowest-RTT quarter of it
//!   fitted by least squares to offset + skew per real elapsed time; an RTT gate that adapts
//!   to the link (3 × the window's minimum, at least 10 ms); a step detector that restarts
//!   the window after a clock jump; and an honest uncertainty bound, RTT_min / 2 (the
//!   delay asymmetry no filter can see). What it publishes is the last *confirmed* fit (one
//!   that [`WindowFit::converged`]): after a jump the previous estimate stands until the
//!   new window confirms itself, so a burst of absurd but mutually consistent clocks
//!   shorter than that is never published.

/// One TIMESYNC round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// Our clock when the request left (its `ts1`).
    pub t1: i64,
    /// The peer's clock when it answered (`tc1`).
    pub tc1: i64,
    /// Our clock when the reply arrived.
    pub t3: i64,
}

impl Exchange {
    /// The round trip (ns), as our clock measured it.
    pub fn rtt(&self) -> i64 {
        self.t3.saturating_sub(self.t1)
    }

    /// local − remote, as mavros computes it: (t1 + t3) / 2 − tc1.
    pub fn observed_offset(&self) -> i64 {
        saturate((i128::from(self.t1) + i128::from(self.t3)) / 2 - i128::from(self.tc1))
    }

    /// Our clock at the exchange's middle.
    pub fn mid(&self) -> i64 {
        saturate((i128::from(self.t1) + i128::from(self.t3)) / 2)
    }
}

/// Clocks from the network can be anything: arithmetic on them saturates, never wraps.
fn saturate(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// What an estimator made of one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The sample moved the estimate.
    Accepted,
    /// Refused: its round trip was too long.
    RejectedRtt,
    /// Refused: it disagreed too much with the estimate.
    RejectedDeviation,
    /// The estimator reset itself (a clock jump).
    Reset,
}

/// PX4's and mavros's parameters, under mavros's names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Px4Params {
    /// The filter's gain on the offset until it converges.
    pub timesync_alpha_initial: f64,
    /// The filter's gain on the skew until it converges.
    pub timesync_beta_initial: f64,
    /// The gain on the offset once converged.
    pub timesync_alpha_final: f64,
    /// The gain on the skew once converged.
    pub timesync_beta_final: f64,
    /// Samples before the filter counts as converged.
    pub convergence_window: u32,
    /// ms
    pub max_rtt_sample: f64,
    /// ms
    pub max_deviation_sample: f64,
    /// Refused samples in a row for a long round trip before the filter resets.
    pub max_consecutive_high_rtt: u32,
    /// Refused samples in a row for a large deviation before the filter resets.
    pub max_consecutive_high_deviation: u32,
}

impl Default for Px4Params {
    fn default() -> Self {
        Px4Params {
            timesync_alpha_initial: 0.05,
            timesync_beta_initial: 0.05,
            timesync_alpha_final: 0.003,
            timesync_beta_final: 0.003,
            convergence_window: 500,
            max_rtt_sample: 10.0,
            max_deviation_sample: 100.0,
            max_consecutive_high_rtt: 5,
            max_consecutive_high_deviation: 5,
        }
    }
}

/// PX4's `Timesync` estimator (as mavros's `sys_time` ports it), in nanoseconds.
#[derive(Debug, Clone)]
pub struct Px4Filter {
    p: Px4Params,
    sequence: u32,
    offset: f64,
    skew: f64,
    high_rtt: u32,
    high_deviation: u32,
    /// Times the filter reset itself.
    pub resets: u32,
}

impl Px4Filter {
    /// A filter with PX4's parameters `p`, before any sample.
    pub fn new(p: Px4Params) -> Px4Filter {
        Px4Filter {
            p,
            sequence: 0,
            offset: 0.0,
            skew: 0.0,
            high_rtt: 0,
            high_deviation: 0,
            resets: 0,
        }
    }

    /// Whether enough samples came for the final gains.
    pub fn converged(&self) -> bool {
        self.sequence >= self.p.convergence_window
    }

    /// The estimate (local − remote, ns); `None` before the first accepted sample.
    pub fn offset(&self) -> Option<i64> {
        (self.sequence > 0).then_some(self.offset as i64)
    }

    fn reset(&mut self) {
        *self = Px4Filter {
            resets: self.resets + 1,
            ..Px4Filter::new(self.p)
        };
    }

    /// Takes one exchange, as PX4's `Timesync::handle_message` does.
    pub fn update(&mut self, e: &Exchange) -> Verdict {
        let observed = e.observed_offset() as f64;
        let rtt = e.rtt() as f64;
        let deviation = (self.offset - observed).abs();
        if rtt >= self.p.max_rtt_sample * 1e6 {
            self.high_rtt += 1;
            if self.high_rtt > self.p.max_consecutive_high_rtt {
                tracing::debug!("RTT too high for timesync: {:.1} ms", rtt / 1e6);
                self.high_rtt = 0;
            }
            return Verdict::RejectedRtt;
        }
        if self.converged() && deviation > self.p.max_deviation_sample * 1e6 {
            self.high_deviation += 1;
            if self.high_deviation > self.p.max_consecutive_high_deviation {
                self.reset();
                return Verdict::Reset;
            }
            return Verdict::RejectedDeviation;
        }
        let (alpha, beta) = if self.sequence < self.p.convergence_window {
            let progress = f64::from(self.sequence) / f64::from(self.p.convergence_window);
            let p = 1.0 - (0.5 * (1.0 - 1.0 / (1.0 - progress))).exp();
            (
                p * self.p.timesync_alpha_final + (1.0 - p) * self.p.timesync_alpha_initial,
                p * self.p.timesync_beta_final + (1.0 - p) * self.p.timesync_beta_initial,
            )
        } else {
            (self.p.timesync_alpha_final, self.p.timesync_beta_final)
        };
        let previous = self.offset;
        if self.sequence == 0 {
            self.offset = observed;
        } else {
            self.offset = alpha * observed + (1.0 - alpha) * (self.offset + self.skew);
            self.skew = beta * (self.offset - previous) + (1.0 - beta) * self.skew;
        }
        self.sequence = self.sequence.saturating_add(1);
        self.high_deviation = 0;
        self.high_rtt = 0;
        Verdict::Accepted
    }
}

/// Our estimator's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitParams {
    /// Accepted samples kept.
    pub window: usize,
    /// The share of the window, lowest RTT first, that the fit uses.
    pub quantile: f64,
    /// The RTT gate never closes below this (ns).
    pub min_gate: i64,
    /// The gate: this many times the window's minimum RTT.
    pub gate_factor: i64,
    /// Consecutive samples off the fit by more than the step threshold that mean a jump.
    pub step_samples: usize,
}

impl Default for FitParams {
    fn default() -> Self {
        FitParams {
            window: 1024,
            quantile: 0.25,
            min_gate: 10_000_000,
            gate_factor: 3,
            step_samples: 3,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    mid: i64,
    offset: i64,
    rtt: i64,
}

/// Offset and skew fitted over the lowest-RTT samples of a sliding window.
#[derive(Debug, Clone)]
pub struct WindowFit {
    p: FitParams,
    samples: std::collections::VecDeque<Sample>,
    /// Samples that disagree with the fit, waiting to prove a jump.
    suspects: Vec<Sample>,
    fit: Option<Line>,
    /// The last fit that was converged: what [`WindowFit::offset_at`] answers while a new
    /// window (after a jump) has not confirmed itself yet.
    confirmed: Option<Line>,
    /// How far the fitted samples sit from the fit, beyond what their RTT explains (ns):
    /// large when the samples contradict each other.
    fit_error: i64,
    /// Times a clock jump restarted the fit.
    pub resets: u32,
}

impl WindowFit {
    /// A fit with parameters `p`, before any sample.
    pub fn new(p: FitParams) -> WindowFit {
        WindowFit {
            p,
            samples: Default::default(),
            suspects: Vec::new(),
            fit: None,
            confirmed: None,
            fit_error: 0,
            resets: 0,
        }
    }

    /// The smallest RTT in the window (ns).
    pub fn rtt_min(&self) -> Option<i64> {
        self.samples.iter().map(|s| s.rtt).min()
    }

    /// Half the smallest RTT: the bound on the error that delay asymmetry can cause.
    pub fn uncertainty(&self) -> Option<i64> {
        self.rtt_min().map(|r| r / 2)
    }

    /// Enough samples for a fit that deserves trust, and samples that agree with it: an
    /// estimate the samples contradict is never called converged.
    pub fn converged(&self) -> bool {
        self.samples.len() >= 16 && self.fit_error <= self.step_threshold()
    }

    /// A jump restarted the window, and the new one has not confirmed itself yet: the
    /// estimate published meanwhile is the last confirmed one.
    pub fn reconverging(&self) -> bool {
        self.confirmed.is_some() && !self.converged()
    }

    /// What is published: the current fit once it is confirmed, the last confirmed fit
    /// while a new window re-converges, the current fit before anything was confirmed.
    fn published(&self) -> Option<Line> {
        if self.converged() {
            self.fit
        } else {
            self.confirmed.or(self.fit)
        }
    }

    /// Clock skew in parts per million (local relative to remote), of the published fit.
    pub fn skew_ppm(&self) -> Option<f64> {
        self.published().map(|line| line.skew * 1e6)
    }

    /// The published estimate at our clock `at` (local − remote, ns).
    pub fn offset_at(&self, at: i64) -> Option<i64> {
        self.published().map(|line| line.at(at))
    }

    fn gate(&self) -> i64 {
        self.rtt_min().map_or(i64::MAX, |m| {
            m.saturating_mul(self.p.gate_factor).max(self.p.min_gate)
        })
    }

    /// How far a sample may sit from the fit before it is a suspect: several times the
    /// jitter a low-RTT sample can carry.
    fn step_threshold(&self) -> i64 {
        self.rtt_min().map_or(i64::MAX, |m| (m / 2).max(200_000))
    }

    /// Takes one exchange.
    pub fn update(&mut self, e: &Exchange) -> Verdict {
        let s = Sample {
            mid: e.mid(),
            offset: e.observed_offset(),
            rtt: e.rtt(),
        };
        if s.rtt < 0 {
            return Verdict::RejectedRtt;
        }
        if s.rtt > self.gate() {
            return Verdict::RejectedRtt;
        }
        if let Some(predicted) = self.fit.map(|line| line.at(s.mid)) {
            // Residuals are judged after removing what the sample's own RTT can explain.
            let residual = s
                .offset
                .saturating_sub(predicted)
                .saturating_abs()
                .saturating_sub(s.rtt / 2);
            if self.samples.len() >= 4 && residual > self.step_threshold() {
                // A jump is adopted only when consecutive suspects agree with one another:
                // a stream of mutually inconsistent (absurd) replies never moves the fit.
                let threshold = self.step_threshold();
                if !self.suspects.iter().all(|t| agree(t, &s, threshold)) {
                    self.suspects.clear();
                }
                self.suspects.push(s);
                if self.suspects.len() < self.p.step_samples {
                    return Verdict::RejectedDeviation;
                }
                // A jump: start again from the samples that revealed it.
                self.samples = self.suspects.drain(..).collect();
                self.resets += 1;
                self.refit();
                return Verdict::Reset;
            }
        }
        self.suspects.clear();
        self.samples.push_back(s);
        if self.samples.len() > self.p.window {
            self.samples.pop_front();
        }
        self.refit();
        Verdict::Accepted
    }

    fn refit(&mut self) {
        let mut best: Vec<Sample> = self.samples.iter().copied().collect();
        // Among equal RTTs the newest samples say the most about now.
        best.sort_by_key(|s| (s.rtt, std::cmp::Reverse(s.mid)));
        let keep = ((best.len() as f64 * self.p.quantile).ceil() as usize)
            .clamp(1.min(best.len()), best.len());
        let keep = keep.max(best.len().min(4));
        best.truncate(keep);
        if best.is_empty() {
            self.fit = None;
            return;
        }
        let reference = best.iter().map(|s| s.mid).max().unwrap_or(0);
        let n = best.len() as f64;
        let xs: Vec<f64> = best
            .iter()
            .map(|s| s.mid.saturating_sub(reference) as f64)
            .collect();
        let ys: Vec<f64> = best.iter().map(|s| s.offset as f64).collect();
        // Samples nearer the minimum RTT carry less queueing noise: weigh them more.
        let rtt_min = best.iter().map(|s| s.rtt).min().unwrap_or(0) as f64;
        let spread = best.iter().map(|s| s.rtt as f64 - rtt_min).sum::<f64>() / n + 1.0;
        let ws: Vec<f64> = best
            .iter()
            .map(|s| 1.0 / (1.0 + (s.rtt as f64 - rtt_min) / spread).powi(2))
            .collect();
        let wsum: f64 = ws.iter().sum();
        let mx = xs.iter().zip(&ws).map(|(x, w)| x * w).sum::<f64>() / wsum;
        let my = ys.iter().zip(&ws).map(|(y, w)| y * w).sum::<f64>() / wsum;
        let sxx: f64 = xs
            .iter()
            .zip(&ws)
            .map(|(x, w)| w * (x - mx) * (x - mx))
            .sum();
        let sxy: f64 = xs
            .iter()
            .zip(&ys)
            .zip(&ws)
            .map(|((x, y), w)| w * (x - mx) * (y - my))
            .sum();
        // Skew needs a span of time; over a short one it is noise.
        let span = xs.iter().cloned().fold(0.0, f64::min).abs();
        let skew = if sxx > 0.0 && span > 2e9 {
            (sxy / sxx).clamp(-1e-3, 1e-3)
        } else {
            0.0
        };
        let offset = my - skew * mx;
        let line = Line {
            reference,
            offset,
            skew,
        };
        self.fit = Some(line);
        self.fit_error = best
            .iter()
            .map(|s| {
                let predicted = offset + skew * s.mid.saturating_sub(reference) as f64;
                ((s.offset as f64 - predicted).abs() - (s.rtt / 2) as f64).max(0.0) as i64
            })
            .max()
            .unwrap_or(0);
        if self.converged() {
            self.confirmed = Some(line);
        }
    }
}

/// A fitted offset line: `offset` (ns) at our clock `reference`, changing by `skew` ns per ns.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Line {
    reference: i64,
    offset: f64,
    skew: f64,
}

impl Line {
    fn at(&self, t: i64) -> i64 {
        (self.offset + self.skew * t.saturating_sub(self.reference) as f64) as i64
    }
}

/// Whether two samples tell the same offset, within what their RTTs and `threshold` allow.
fn agree(a: &Sample, b: &Sample, threshold: i64) -> bool {
    let apart = a.offset.saturating_sub(b.offset).saturating_abs();
    apart.saturating_sub(a.rtt / 2 + b.rtt / 2) <= threshold
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(t1: i64, offset_remote_minus_local: i64, up: i64, down: i64) -> Exchange {
        Exchange {
            t1,
            tc1: t1 + up + offset_remote_minus_local,
            t3: t1 + up + down,
        }
    }

    #[test]
    fn observed_offset_carries_the_asymmetry_bias() {
        // remote = local + 1 s; 1 ms up, 3 ms down: local − remote = −1 s, biased by (3−1)/2 ms.
        let e = exchange(10_000_000_000, 1_000_000_000, 1_000_000, 3_000_000);
        assert_eq!(e.rtt(), 4_000_000);
        assert_eq!(e.observed_offset(), -1_000_000_000 + 1_000_000);
    }

    #[test]
    fn px4_filter_starts_at_the_first_sample_gates_rtt_and_resets_after_six_jumps() {
        let mut f = Px4Filter::new(Px4Params::default());
        assert_eq!(
            f.update(&exchange(0, 5_000, 20_000_000, 1_000)),
            Verdict::RejectedRtt
        );
        assert_eq!(
            f.update(&exchange(0, 5_000, 1_000, 1_000)),
            Verdict::Accepted
        );
        assert_eq!(f.offset(), Some(-5_000));
        for i in 1..600 {
            f.update(&exchange(i * 100_000_000, 5_000, 1_000, 1_000));
        }
        assert!(f.converged());
        let jump = 500_000_000; // 500 ms
        let verdicts: Vec<Verdict> = (600..606)
            .map(|i| f.update(&exchange(i * 100_000_000, 5_000 + jump, 1_000, 1_000)))
            .collect();
        assert_eq!(verdicts[..5], [Verdict::RejectedDeviation; 5]);
        assert_eq!(verdicts[5], Verdict::Reset);
        assert_eq!(f.resets, 1);
    }

    #[test]
    fn window_fit_tracks_skew_and_adopts_a_jump_once_the_new_window_confirms_it() {
        let mut f = WindowFit::new(FitParams::default());
        // 30 ppm: remote runs faster.
        let remote = |t: i64| 7_000_000_000 + t + t * 30 / 1_000_000;
        let sample = |clock: &dyn Fn(i64) -> i64, i: i64| Exchange {
            t1: i * 100_000_000,
            tc1: clock(i * 100_000_000 + 1_000_000),
            t3: i * 100_000_000 + 2_000_000,
        };
        for i in 0..300i64 {
            f.update(&sample(&remote, i));
        }
        let at = 300 * 100_000_000;
        let truth = at - remote(at);
        assert!(
            (f.offset_at(at).unwrap() - truth).abs() < 20_000,
            "{} vs {truth}",
            f.offset_at(at).unwrap()
        );
        assert!(
            (f.skew_ppm().unwrap() + 30.0).abs() < 1.0,
            "skew {:?}",
            f.skew_ppm()
        );
        // A 50 ms jump: three suspects, then the window restarts from them...
        let jumped = |t: i64| remote(t) + 50_000_000;
        let verdicts: Vec<Verdict> = (300..303).map(|i| f.update(&sample(&jumped, i))).collect();
        assert_eq!(
            verdicts,
            [
                Verdict::RejectedDeviation,
                Verdict::RejectedDeviation,
                Verdict::Reset
            ]
        );
        // ...but what is published stays the confirmed estimate until the new window has
        // confirmed itself.
        let mut published_new_at = None;
        for i in 303..330 {
            let at = i * 100_000_000;
            let published = f.offset_at(at).unwrap();
            if f.reconverging() {
                assert!((published - (at - remote(at))).abs() < 50_000, "sample {i}");
            } else if published_new_at.is_none() {
                published_new_at = Some(i);
            }
            f.update(&sample(&jumped, i));
        }
        assert!(f.converged() && !f.reconverging());
        assert!(
            matches!(published_new_at, Some(i) if (310..=320).contains(&i)),
            "{published_new_at:?}"
        );
        let at = 330 * 100_000_000;
        let (got, want) = (f.offset_at(at).unwrap(), at - jumped(at));
        assert!((got - want).abs() < 50_000, "{got} vs {want}");
    }

    /// A burst of absurd clocks that agree with one another (a clock read 33 hours off for
    /// a second) restarts the window but is never published, and the estimate is back on
    /// the honest samples when the burst ends.
    #[test]
    fn a_consistent_absurd_burst_is_never_published() {
        let mut f = WindowFit::new(FitParams::default());
        let offset = 3_000_000; // local − remote
        let exchange = |i: i64, off: i64| {
            let t1 = i * 100_000_000;
            Exchange {
                t1,
                tc1: t1 + 500_000 - off,
                t3: t1 + 1_000_000,
            }
        };
        for i in 0..40 {
            f.update(&exchange(i, offset));
        }
        assert!(f.converged());
        let absurd = offset + 120_000_000_000_000; // 1.2e11 ms
        for i in 40..55 {
            f.update(&exchange(i, absurd));
            let published = f.offset_at(i * 100_000_000).unwrap();
            assert!(
                (published - offset).abs() < 100_000,
                "sample {i}: {published}"
            );
        }
        assert_eq!(f.resets, 1);
        assert!(f.reconverging());
        for i in 55..80 {
            f.update(&exchange(i, offset));
            let published = f.offset_at(i * 100_000_000).unwrap();
            assert!(
                (published - offset).abs() < 100_000,
                "sample {i}: {published}"
            );
        }
        assert!(f.converged());
    }

    /// Absurd replies that contradict one another (±1e18 ns, i64 extremes) are never
    /// adopted as a jump, and the estimate stays where the honest samples put it.
    #[test]
    fn contradicting_absurd_samples_never_move_or_converge_the_fit() {
        let mut f = WindowFit::new(FitParams::default());
        let offset = 3_000_000; // local − remote
        let honest = |i: i64| {
            let t1 = i * 100_000_000;
            Exchange {
                t1,
                tc1: t1 + 500_000 - offset,
                t3: t1 + 1_000_000,
            }
        };
        for i in 0..40 {
            f.update(&honest(i));
        }
        assert!(f.converged());
        let absurd = [
            1_000_000_000_000_000_000,
            -1_000_000_000_000_000_000,
            i64::MAX,
            i64::MIN,
        ];
        for i in 40..400 {
            let t1 = i * 100_000_000;
            let tc1 = absurd[i as usize % absurd.len()];
            let verdict = f.update(&Exchange {
                t1,
                tc1,
                t3: t1 + 1_000_000,
            });
            assert_ne!(verdict, Verdict::Reset, "sample {i}");
        }
        let at = 400 * 100_000_000;
        assert!((f.offset_at(at).unwrap() - offset).abs() < 100_000);
        assert_eq!(f.resets, 0);
        // Absurd samples from the start never make a converged estimate.
        let mut g = WindowFit::new(FitParams::default());
        for i in 0..200 {
            let t1 = i * 100_000_000;
            g.update(&Exchange {
                t1,
                tc1: absurd[i as usize % absurd.len()],
                t3: t1 + 1_000_000,
            });
            assert!(!g.converged(), "sample {i}");
        }
    }
}
