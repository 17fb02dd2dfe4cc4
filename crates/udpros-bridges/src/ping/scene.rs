//! What the simulated sonars look at: a harbour floor worth drawing. A seabed that slopes
//! away and rises to starboard, with sand ripples and patches; three objects (a boulder, a
//! mooring block, a rock outcrop) that echo brightly and cast acoustic shadows; and a
//! quay wall across the bow that ends the picture. Echo strength follows the device's gain
//! and the range it samples, and every ping carries fresh speckle, so that the demo, the
//! console and the tests show what an operator would see on a real vehicle.
//!
//! Frame: the transducer at the origin, `x` forward (Ping360 angle 0), `y` to starboard
//! (angle 100 gradians); depths in metres below the transducer.

/// The Ping360's vertical beam reaches this far below horizontal (half of its 25° beam).
const BEAM_DEPRESSION_TAN: f64 = 0.2217; // tan(12.5°)

/// An object on the seabed, seen from above as a disc.
struct Object {
    x: f64,
    y: f64,
    radius: f64,
    strength: f64,
}

const OBJECTS: [Object; 3] = [
    // A boulder off the starboard bow.
    Object {
        x: 5.0,
        y: 3.0,
        radius: 0.6,
        strength: 1.0,
    },
    // A concrete mooring block on the port side.
    Object {
        x: 1.5,
        y: -6.5,
        radius: 0.5,
        strength: 1.2,
    },
    // A rock outcrop astern.
    Object {
        x: -9.0,
        y: 2.0,
        radius: 1.4,
        strength: 0.8,
    },
];

/// The quay wall: a straight face from `WALL.0` to `WALL.1`, across the bow.
const WALL: ((f64, f64), (f64, f64)) = ((13.0, -16.0), (9.0, 14.0));

/// The seabed's depth below the transducer at `(x, y)`: 0.9 m under the vehicle (it
/// hovers near the bottom, as an ROV inspecting a quay does), deeper ahead, shallower to
/// starboard and astern, with a long swell of relief.
pub fn seabed_depth(x: f64, y: f64) -> f64 {
    let depth = 0.9 + 0.1 * x - 0.04 * y + 0.2 * (0.35 * x).sin() * (0.28 * y).cos();
    depth.max(0.3)
}

/// How much the seabed at `(x, y)` backscatters, in [0.2, 1]: sand ripples and patches of
/// rougher ground.
fn seabed_texture(x: f64, y: f64) -> f64 {
    let ripples = 0.5 + 0.5 * (2.6 * (0.8 * x + 0.6 * y)).sin();
    let patches = value_noise(x / 2.5, y / 2.5);
    (0.2 + 0.45 * patches + 0.35 * ripples * patches).clamp(0.2, 1.0)
}

/// Smooth noise in [0, 1] from a lattice of hashed values, interpolated.
fn value_noise(x: f64, y: f64) -> f64 {
    let (x0, y0) = (x.floor(), y.floor());
    let (fx, fy) = (x - x0, y - y0);
    let smooth = |t: f64| t * t * (3.0 - 2.0 * t);
    let at = |i: f64, j: f64| unit(hash3(i as i64 as u64, j as i64 as u64, 0x5eab));
    let top = lerp(at(x0, y0), at(x0 + 1.0, y0), smooth(fx));
    let bottom = lerp(at(x0, y0 + 1.0), at(x0 + 1.0, y0 + 1.0), smooth(fx));
    lerp(top, bottom, smooth(fy))
}

fn lerp(a: f64, b: f64, t: f64) -> f64 {
    a + (b - a) * t
}

/// A well-mixed hash of three words (the speckle and the lattice of the noise).
fn hash3(a: u64, b: u64, c: u64) -> u64 {
    let mut h = a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.rotate_left(21) ^ c.rotate_left(42);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A hash as a number in [0, 1).
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// How strongly the Ping360's gain setting (0 low, 1 normal, 2 high) amplifies echoes, and
/// the noise floor it raises with them.
fn gain(setting: u8) -> (f64, f64) {
    match setting {
        0 => (0.55, 3.0),
        1 => (1.0, 6.0),
        _ => (1.6, 12.0),
    }
}

/// One Ping360 ping: `samples` intensities `sample_m` metres apart along `angle_gradians`,
/// at `gain_setting`; `ping` varies the speckle from one ping to the next.
pub fn ping360_echo(
    angle_gradians: u16,
    sample_m: f64,
    samples: usize,
    gain_setting: u8,
    ping: u64,
) -> Vec<u8> {
    let theta = f64::from(angle_gradians % 400) * std::f64::consts::PI / 200.0;
    let (dy, dx) = theta.sin_cos();
    let (amplify, floor) = gain(gain_setting);
    // Where along this bearing the objects and the wall are, and where their shadows start.
    let mut hits: Vec<(f64, f64, f64)> = Vec::new(); // (near, far, strength)
    let mut shadow = f64::INFINITY;
    for o in &OBJECTS {
        let along = o.x * dx + o.y * dy;
        let across = (o.y * dx - o.x * dy).abs();
        if along > 0.0 && across < o.radius {
            let half = (o.radius * o.radius - across * across).sqrt();
            hits.push((along - half, along + half * 0.4, o.strength));
            shadow = shadow.min(along);
        }
    }
    if let Some(r) = ray_hits_segment(dx, dy, WALL.0, WALL.1) {
        hits.push((r, r + 0.35, 1.15));
        shadow = shadow.min(r + 0.35);
    }
    (0..samples)
        .map(|i| {
            let r = (i as f64 + 0.5) * sample_m;
            let (x, y) = (r * dx, r * dy);
            let speckle = unit(hash3(u64::from(angle_gradians), i as u64, ping));
            // The transducer's ring-down, then water (a faint column of noise).
            let mut echo = 140.0 * (-r / 0.12).exp();
            // The seabed, once the lower edge of the beam reaches it, fading with range.
            let depth = seabed_depth(x, y);
            let reach = ((r * BEAM_DEPRESSION_TAN - depth) / 0.35).clamp(0.0, 1.0);
            if r < shadow {
                echo += reach
                    * 190.0
                    * seabed_texture(x, y)
                    * (-r / 20.0).exp()
                    * (0.65 + 0.7 * speckle);
            }
            for (near, far, strength) in &hits {
                if r >= *near && r <= *far {
                    echo += 220.0 * strength * (0.8 + 0.4 * speckle);
                }
            }
            (echo * amplify + floor * speckle).clamp(0.0, 255.0) as u8
        })
        .collect()
}

/// How far along the ray from the origin in direction `(dx, dy)` the segment `a`–`b` lies,
/// if the ray meets it.
fn ray_hits_segment(dx: f64, dy: f64, a: (f64, f64), b: (f64, f64)) -> Option<f64> {
    let (ex, ey) = (b.0 - a.0, b.1 - a.1);
    let denominator = dx * ey - dy * ex;
    if denominator.abs() < 1e-12 {
        return None;
    }
    let along = (a.0 * ey - a.1 * ex) / denominator;
    let on_segment = (a.0 * dy - a.1 * dx) / denominator;
    (along > 0.0 && (0.0..=1.0).contains(&on_segment)).then_some(along)
}

/// One Ping1D profile of `points` samples over its scan window (`start_m`, `length_m`),
/// looking down at `depth_m`, at gain index `gain_setting` (0–6): a sharp bottom echo
/// with a softer sub-bottom tail, and noise that rises with the gain.
pub fn ping1d_profile(
    depth_m: f64,
    start_m: f64,
    length_m: f64,
    points: usize,
    gain_setting: u32,
    ping: u64,
) -> Vec<u8> {
    let amplify = 0.5 + 0.16 * f64::from(gain_setting.min(6));
    let floor = 4.0 + 3.0 * f64::from(gain_setting.min(6));
    let step = length_m / points.max(1) as f64;
    (0..points)
        .map(|i| {
            let r = start_m + (i as f64 + 0.5) * step;
            let speckle = unit(hash3(i as u64, ping, 0x1d));
            let d = (r - depth_m) / 0.06;
            let bottom = if d < 0.0 {
                230.0 * (-d * d).exp()
            } else {
                230.0 * (-d * d).exp().max(0.35 * (-d / 12.0).exp())
            };
            let ring = 160.0 * (-(r - start_m).max(0.0) / 0.1).exp();
            ((bottom + ring) * amplify * (0.8 + 0.4 * speckle) + floor * speckle).clamp(0.0, 255.0)
                as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index of the first sample at or above `level`.
    fn first_at_least(samples: &[u8], level: u8, after: usize) -> Option<usize> {
        samples
            .iter()
            .skip(after)
            .position(|v| *v >= level)
            .map(|i| i + after)
    }

    #[test]
    fn the_wall_ahead_echoes_brightly_and_nothing_lies_behind_it() {
        let sample_m = 0.025;
        let echo = ping360_echo(0, sample_m, 1200, 1, 1); // straight ahead, 30 m
        let wall_at = ray_hits_segment(1.0, 0.0, WALL.0, WALL.1).unwrap();
        let first = first_at_least(&echo, 200, 40).unwrap() as f64 * sample_m;
        assert!((first - wall_at).abs() < 0.1, "{first} vs {wall_at}");
        let behind = &echo[((wall_at + 0.5) / sample_m) as usize..];
        assert!(behind.iter().all(|v| *v < 20), "shadow behind the wall");
    }

    #[test]
    fn an_object_casts_a_shadow_on_the_seabed_beside_it() {
        // The boulder at (5, 3): its bearing, and a bearing 10° off it.
        let on = (3.0f64.atan2(5.0).to_degrees() / 0.9).round() as u16;
        let off = on + 11;
        let sample_m = 0.02;
        let (a, b) = (
            ping360_echo(on, sample_m, 1000, 1, 7),
            ping360_echo(off, sample_m, 1000, 1, 7),
        );
        let range = (5.0f64 * 5.0 + 3.0 * 3.0).sqrt();
        let beyond = |e: &[u8]| {
            let from = ((range + 1.0) / sample_m) as usize;
            e[from..from + 100]
                .iter()
                .map(|v| f64::from(*v))
                .sum::<f64>()
                / 100.0
        };
        assert!(a.iter().any(|v| *v >= 200), "the boulder echoes");
        assert!(
            beyond(&a) * 3.0 < beyond(&b),
            "shadow {} vs seabed {}",
            beyond(&a),
            beyond(&b)
        );
    }

    #[test]
    fn gain_and_range_change_the_picture() {
        let mean = |e: &[u8]| e.iter().map(|v| f64::from(*v)).sum::<f64>() / e.len() as f64;
        let low = ping360_echo(300, 0.02, 1000, 0, 3);
        let high = ping360_echo(300, 0.02, 1000, 2, 3);
        assert!(
            mean(&high) > mean(&low) * 1.8,
            "{} {}",
            mean(&high),
            mean(&low)
        );
        // Twice the sample spacing: the same seabed edge at half the sample index.
        let near = ping360_echo(300, 0.01, 1200, 1, 3);
        let far = ping360_echo(300, 0.02, 1200, 1, 3);
        let edge = |e: &[u8], m: f64| first_at_least(e, 60, 40).map(|i| i as f64 * m);
        let (a, b) = (edge(&near, 0.01).unwrap(), edge(&far, 0.02).unwrap());
        assert!((a - b).abs() < 0.3, "{a} {b}");
        // Speckle changes from ping to ping; the scene does not.
        assert_ne!(
            ping360_echo(300, 0.02, 1000, 1, 3),
            ping360_echo(300, 0.02, 1000, 1, 4)
        );
    }

    #[test]
    fn the_seabed_slopes_and_its_texture_varies() {
        assert!(seabed_depth(10.0, 0.0) > seabed_depth(-10.0, 0.0) + 1.5);
        let textures: Vec<f64> = (0..200)
            .map(|i| seabed_texture(f64::from(i) * 0.37, f64::from(i) * -0.21))
            .collect();
        let (min, max) = textures
            .iter()
            .fold((1.0f64, 0.0f64), |(lo, hi), t| (lo.min(*t), hi.max(*t)));
        assert!(min >= 0.2 && max <= 1.0 && max - min > 0.4, "{min} {max}");
    }

    #[test]
    fn the_ping1d_profile_peaks_at_the_bottom_and_noise_follows_gain() {
        let profile = ping1d_profile(6.0, 0.0, 10.0, 200, 3, 1);
        let peak = (0..200).max_by_key(|i| profile[*i]).unwrap();
        assert!((peak as f64 * 0.05 - 6.0).abs() < 0.15, "{peak}");
        let noise = |g| {
            let p = ping1d_profile(6.0, 0.0, 10.0, 200, g, 1);
            p[20..100].iter().map(|v| f64::from(*v)).sum::<f64>()
        };
        assert!(noise(6) > noise(0));
    }
}
