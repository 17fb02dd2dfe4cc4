//! The latency distributions of a bench run as one SVG: a panel per scenario, a cumulative
//! curve per pair and transport on a logarithmic time axis, so tails can be compared at a
//! glance (the table only has p50, p99 and max).

use std::fmt::Write;

/// One curve: its label parts, every latency it measured (µs) and how many messages were
/// meant to arrive, so a lossy cell levels off at the fraction it delivered.
pub struct Curve {
    pub pair: String,
    pub transport: String,
    pub latencies_us: Vec<f64>,
    pub expected: usize,
}

/// One panel: a scenario and its curves.
pub struct Panel {
    pub title: String,
    pub curves: Vec<Curve>,
}

const WIDTH: f64 = 960.0;
const PANEL_HEIGHT: f64 = 260.0;
const TOP: f64 = 70.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 230.0;
const PLOT_HEIGHT: f64 = 190.0;
/// Points per curve: enough for a smooth line, few enough for a small file.
const POINTS: usize = 400;
const COLOURS: [&str; 4] = ["#1b7837", "#2166ac", "#d6604d", "#8073ac"];

/// The SVG document of the panels; pairs are told apart by colour, UDPROS is drawn solid
/// and TCPROS dashed.
pub fn render(title: &str, panels: &[Panel]) -> String {
    let height = TOP + PANEL_HEIGHT * panels.len() as f64 + 20.0;
    let mut pairs: Vec<&str> = Vec::new();
    for c in panels.iter().flat_map(|p| &p.curves) {
        if !pairs.contains(&c.pair.as_str()) {
            pairs.push(&c.pair);
        }
    }
    let colour = |pair: &str| {
        let i = pairs.iter().position(|p| *p == pair).unwrap_or(0);
        COLOURS[i % COLOURS.len()]
    };
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="28" font-size="16" font-weight="bold">{}</text>"#,
        escape(title)
    );
    let _ = writeln!(
        svg,
        r##"<text x="{LEFT}" y="48" fill="#555">fraction of the messages sent that arrived within the time on the x axis (one-way latency, log scale); solid UDPROS, dashed TCPROS</text>"##
    );
    for (i, panel) in panels.iter().enumerate() {
        draw_panel(&mut svg, panel, TOP + PANEL_HEIGHT * i as f64, &colour);
    }
    svg.push_str("</svg>\n");
    svg
}

fn draw_panel(svg: &mut String, panel: &Panel, y0: f64, colour: &dyn Fn(&str) -> &'static str) {
    let plot_width = WIDTH - LEFT - RIGHT;
    let (top, bottom) = (y0 + 24.0, y0 + 24.0 + PLOT_HEIGHT);
    let positive = panel
        .curves
        .iter()
        .flat_map(|c| c.latencies_us.iter().copied())
        .filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = positive.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="{}" font-weight="bold">{}</text>"#,
        y0 + 14.0,
        escape(&panel.title)
    );
    if hi <= 0.0 {
        let _ = writeln!(
            svg,
            r#"<text x="{LEFT}" y="{}">no latencies measured</text>"#,
            top + 20.0
        );
        return;
    }
    // Whole decades, so the grid lines fall on 10, 100, 1000 ... µs.
    let first_decade = lo.max(1.0).log10().floor() as i32;
    let last_decade = (hi.log10().ceil() as i32).max(first_decade + 1);
    let x = |us: f64| {
        let t =
            (us.max(1.0).log10() - f64::from(first_decade)) / f64::from(last_decade - first_decade);
        LEFT + t.clamp(0.0, 1.0) * plot_width
    };
    let y = |fraction: f64| bottom - fraction * PLOT_HEIGHT;
    for d in first_decade..=last_decade {
        let gx = x(10f64.powi(d));
        let _ = writeln!(
            svg,
            r##"<line x1="{gx:.1}" y1="{top}" x2="{gx:.1}" y2="{bottom}" stroke="#ddd"/><text x="{gx:.1}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 16.0,
            decade_label(d)
        );
    }
    for f in [0.0, 0.25, 0.5, 0.75, 0.9, 1.0] {
        let gy = y(f);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{gy:.1}" x2="{:.1}" y2="{gy:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{f}</text>"##,
            LEFT + plot_width,
            LEFT - 6.0,
            gy + 4.0
        );
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{top}" width="{plot_width}" height="{PLOT_HEIGHT}" fill="none" stroke="#888"/>"##
    );
    let mut legend_y = top + 8.0;
    for curve in &panel.curves {
        let mut sorted: Vec<f64> = curve
            .latencies_us
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        sorted.sort_by(f64::total_cmp);
        let dash = if curve.transport.eq_ignore_ascii_case("tcp") {
            r#" stroke-dasharray="6,4""#
        } else {
            ""
        };
        let c = colour(&curve.pair);
        let n = sorted.len();
        if n > 0 {
            let whole = curve.expected.max(n) as f64;
            let points: String = (0..=POINTS.min(n))
                .map(|k| {
                    let i = (k * (n - 1)) / POINTS.min(n).max(1);
                    format!("{:.1},{:.1} ", x(sorted[i]), y((i + 1) as f64 / whole))
                })
                .collect();
            let _ = writeln!(
                svg,
                r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="1.6"{dash}/>"#,
                points.trim_end()
            );
        }
        let lx = LEFT + plot_width + 14.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" y1="{legend_y}" x2="{}" y2="{legend_y}" stroke="{c}" stroke-width="2"{dash}/><text x="{}" y="{}">{} {}{}</text>"#,
            lx + 26.0,
            lx + 32.0,
            legend_y + 4.0,
            escape(&curve.pair),
            escape(&curve.transport),
            if n == 0 { ": none arrived" } else { "" }
        );
        legend_y += 20.0;
    }
}

fn decade_label(d: i32) -> String {
    match d {
        i32::MIN..=2 => format!("{} µs", 10u64.pow(d.max(0) as u32)),
        3..=5 => format!("{} ms", 10u64.pow((d - 3) as u32)),
        _ => format!("{} s", 10u64.pow((d - 6).min(9) as u32)),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(pair: &str, transport: &str, latencies_us: Vec<f64>) -> Curve {
        Curve {
            pair: pair.into(),
            transport: transport.into(),
            expected: latencies_us.len(),
            latencies_us,
        }
    }

    /// The y of a curve's last point.
    fn top_of_last_curve(svg: &str) -> f64 {
        let points = svg.rsplit("points=\"").next().unwrap();
        let last = points
            .split('"')
            .next()
            .unwrap()
            .split_whitespace()
            .last()
            .unwrap();
        last.split_once(',').unwrap().1.parse().unwrap()
    }

    #[test]
    fn a_lossy_cell_levels_off_at_the_fraction_it_delivered() {
        let mut lossy = curve("roscpp → roscpp", "UDP", vec![100.0; 25]);
        lossy.expected = 100;
        let panels = [Panel {
            title: "S4".into(),
            curves: vec![lossy],
        }];
        let bottom = TOP + 24.0 + PLOT_HEIGHT;
        let top = top_of_last_curve(&render("bench", &panels));
        assert!((top - (bottom - 0.25 * PLOT_HEIGHT)).abs() < 0.1, "{top}");
        let whole = [Panel {
            title: "S4".into(),
            curves: vec![curve("udpros → udpros", "UDP", vec![100.0; 25])],
        }];
        let top = top_of_last_curve(&render("bench", &whole));
        assert!((top - (bottom - PLOT_HEIGHT)).abs() < 0.1, "{top}");
    }

    #[test]
    fn every_curve_is_drawn_within_the_panel_and_named_in_the_legend() {
        let panels = [Panel {
            title: "S1 <64 B>".into(),
            curves: vec![
                curve(
                    "udpros → udpros",
                    "UDP",
                    (1..=1000).map(f64::from).collect(),
                ),
                curve("roscpp → roscpp", "TCP", vec![150.0, 200.0, 4000.0]),
            ],
        }];
        let svg = render("bench", &panels);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("S1 &lt;64 B&gt;"));
        assert!(svg.contains("udpros → udpros UDP") && svg.contains("roscpp → roscpp TCP"));
        assert!(svg.contains(r#"stroke-dasharray="6,4""#));
        // Latencies from 1 µs to 4 ms: decades 1 µs .. 10 ms on the axis.
        assert!(svg.contains(">1 µs<") && svg.contains(">10 ms<"));
        for points in svg.split("points=\"").skip(1) {
            for xy in points.split('"').next().unwrap().split_whitespace() {
                let (px, py) = xy.split_once(',').unwrap();
                let (px, py): (f64, f64) = (px.parse().unwrap(), py.parse().unwrap());
                assert!((LEFT..=WIDTH - RIGHT).contains(&px), "x {px}");
                assert!((TOP..=TOP + PANEL_HEIGHT).contains(&py), "y {py}");
            }
        }
    }

    #[test]
    fn a_panel_without_latencies_says_so_instead_of_drawing() {
        let panels = [Panel {
            title: "S4".into(),
            curves: vec![curve("roscpp → roscpp", "UDP", vec![])],
        }];
        let svg = render("bench", &panels);
        assert!(svg.contains("no latencies measured"));
        assert!(!svg.contains("<polyline"));
        // Beside a curve that has points, one without is named in the legend only.
        let panels = [Panel {
            title: "S4".into(),
            curves: vec![
                curve("roscpp → roscpp", "UDP", vec![]),
                curve("udpros → udpros", "UDP", vec![900.0, 1000.0]),
            ],
        }];
        let svg = render("bench", &panels);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("roscpp → roscpp UDP: none arrived"));
    }
}
