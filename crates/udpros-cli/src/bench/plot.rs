//! The latency distributions of every cell as an SVG, a panel per scenario.

use super::plot_svg;
use super::report::{cells, Row};

/// The latency distributions of every cell, a panel per scenario.
pub(super) fn plot(rows: &[Row]) -> String {
    let mut panels: Vec<plot_svg::Panel> = Vec::new();
    for runs in cells(rows) {
        let r = runs[0];
        let curve = plot_svg::Curve {
            pair: r.pair.clone(),
            transport: r.transport.clone(),
            latencies_us: runs
                .iter()
                .flat_map(|r| r.latencies.iter().flat_map(|m| m.values().copied()))
                .collect(),
            expected: runs
                .iter()
                .map(|r| r.sent as usize * r.received.len().max(1))
                .sum(),
        };
        match panels.iter_mut().find(|p| p.title == r.scenario) {
            Some(panel) => panel.curves.push(curve),
            None => panels.push(plot_svg::Panel {
                title: r.scenario.clone(),
                curves: vec![curve],
            }),
        }
    }
    plot_svg::render("udpros bench: one-way latency, udpros and roscpp", &panels)
}
