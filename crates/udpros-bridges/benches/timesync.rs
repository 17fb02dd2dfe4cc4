//! Both clock-offset estimators over the seeded scenarios: time to settle within 100 µs of
//! the expected offset (the truth plus the unobservable asymmetry bias), steady-state error,
//! resets. Simulated time: the figures are the same on any machine.

use udpros_bridges::mavlink::scenario::{score, Scenario};

fn main() {
    let fmt = |t: Option<f64>| t.map_or("never".to_string(), |t| format!("{t:.1} s"));
    println!("TIMESYNC estimators, 10 Hz, seeded (PX4/mavros filter vs udpros window fit)");
    println!();
    println!("| scenario | estimator | accepted | settles (< 100 µs) | after last step | mean (µs) | RMS (µs) | resets |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for s in Scenario::standard() {
        let (px4, ours) = score(&s);
        for (name, sc) in [("PX4", &px4), ("udpros", &ours)] {
            let rms = if sc.had_estimate {
                format!("{:.1}", sc.rms_error_us)
            } else {
                "no estimate".into()
            };
            println!(
                "| {} | {name} | {:.0} % | {} | {} | {:+.1} | {rms} | {} |",
                s.name,
                100.0 * sc.accepted as f64 / sc.samples.max(1) as f64,
                fmt(sc.settled_at),
                if s.steps.is_empty() {
                    "-".into()
                } else {
                    fmt(sc.settled_after_step)
                },
                sc.mean_error_us,
                sc.resets
            );
        }
    }
}
