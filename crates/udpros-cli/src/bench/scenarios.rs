//! The scenarios of the benchmark issue, and the publisher/subscriber pairs each runs for.

/// A scenario of the issue: message size, rate, count, subscribers.
#[derive(Debug, Clone)]
pub(super) struct Scenario {
    pub(super) id: &'static str,
    pub(super) what: &'static str,
    pub(super) size: usize,
    pub(super) rate: f64,
    pub(super) count: u64,
    pub(super) subscribers: usize,
}

pub(super) fn scenarios(quick: bool) -> Vec<Scenario> {
    let n = |full: u64, small: u64| if quick { small } else { full };
    vec![
        Scenario {
            id: "S1",
            what: "64 B at 1 kHz",
            size: 64,
            rate: 1000.0,
            count: n(5000, 200),
            subscribers: 1,
        },
        Scenario {
            id: "S2",
            what: "64 B flood",
            size: 64,
            rate: 0.0,
            count: n(100_000, 2000),
            subscribers: 1,
        },
        Scenario {
            id: "S3",
            what: "100 kB at 100 Hz",
            size: 100_000,
            rate: 100.0,
            count: n(500, 20),
            subscribers: 1,
        },
        Scenario {
            id: "S4",
            what: "1 MB at 20 Hz",
            size: 1_000_000,
            rate: 20.0,
            count: n(100, 5),
            subscribers: 1,
        },
        Scenario {
            id: "S5",
            what: "10 kB at 500 Hz to 5 subscribers",
            size: 10_000,
            rate: 500.0,
            count: n(2500, 100),
            subscribers: 5,
        },
    ]
}

/// The pairs of the table: (publisher, subscriber) implementations.
pub(super) const PAIRS: [(&str, &str); 4] = [
    ("udpros", "udpros"),
    ("roscpp", "roscpp"),
    ("udpros", "roscpp"),
    ("roscpp", "udpros"),
];

/// The pairs with rosrust, the Rust library a user would pick instead (TCPROS only: it has
/// no UDPROS), run when its peer builds.
pub(super) const ROSRUST_PAIRS: [(&str, &str); 5] = [
    ("rosrust", "rosrust"),
    ("udpros", "rosrust"),
    ("rosrust", "udpros"),
    ("roscpp", "rosrust"),
    ("rosrust", "roscpp"),
];

/// The pairs with roslibrust's ROS1 backend (TCPROS only), run when its peer builds.
pub(super) const ROSLIBRUST_PAIRS: [(&str, &str); 7] = [
    ("roslibrust", "roslibrust"),
    ("udpros", "roslibrust"),
    ("roslibrust", "udpros"),
    ("roscpp", "roslibrust"),
    ("roslibrust", "roscpp"),
    ("rosrust", "roslibrust"),
    ("roslibrust", "rosrust"),
];

/// The pairs with a Python subscriber (the `udpros` package's node, rospy with `import
/// udpros.rospy`, stock rospy), run when a Python with rospy and the wheel is there.
pub(super) const PYTHON_PAIRS: [(&str, &str); 3] = [
    ("udpros", "python"),
    ("udpros", "rospy+udpros"),
    ("udpros", "rospy"),
];

/// Whether `scenario` runs the Python pairs: the single-subscriber paced ones (the flood
/// and the fan-out compare the wire ends, not Python); in a quick run, S3 only.
pub(super) fn runs_python(scenario: &Scenario, quick: bool) -> bool {
    match quick {
        true => scenario.id == "S3",
        false => ["S1", "S3", "S4"].contains(&scenario.id),
    }
}

/// The transports a pair is measured over: both, unless a side has TCPROS only.
pub(super) fn transports(pair: (&str, &str)) -> &'static [&'static str] {
    let tcp_only = |kind: &str| kind == "rosrust" || kind == "roslibrust" || kind == "rospy";
    if tcp_only(pair.0) || tcp_only(pair.1) {
        &["tcp"]
    } else {
        &["udp", "tcp"]
    }
}
