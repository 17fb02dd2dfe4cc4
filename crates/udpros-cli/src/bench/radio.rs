//! S10, the narrow radio: a robot, a radio and an operator, three network namespaces (the
//! test kit's), the robot's traffic to the operator routed through the radio, whose cable
//! is a token bucket (`tc tbf`, 50 ms of queue) of 20, 4 or 2 Mbit/s, or stepping 20 → 4 →
//! 20 Mbit/s; with and without 2 % random loss at the operator (nftables). The robot runs
//! two publishers, two processes: 100 kB images at 10 Hz (8 Mbit/s offered) and a 64 B
//! control topic at 50 Hz (the one-node rows: both from one udpros node under a budget
//! per host); the operator subscribes to each from a process of its own. For
//! each radio and row: images whole, their age, control delivered and its age (all hosts
//! share the machine's clock), and for a governed publisher its pacing rate against the
//! radio's capacity two seconds after each step. Needs root, iproute2 (`ip`, `tc`),
//! nftables and ethtool.

use super::harness::{spawn, Peer};
use super::report::{percentile, read_dump};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use udpros_testkit::netns::{Family, Host, Identity, Network};

/// The radio's capacity over a cell: `(seconds after the publishers start, kbit/s)`.
struct Radio {
    what: &'static str,
    steps: &'static [(f64, u32)],
}

const RADIOS: [Radio; 4] = [
    Radio {
        what: "20 Mbit/s",
        steps: &[(0.0, 20_000)],
    },
    Radio {
        what: "4 Mbit/s",
        steps: &[(0.0, 4_000)],
    },
    Radio {
        what: "2 Mbit/s",
        steps: &[(0.0, 2_000)],
    },
    Radio {
        what: "20 → 4 → 20 Mbit/s",
        steps: &[(0.0, 20_000), (7.0, 4_000), (14.0, 20_000)],
    },
];

/// One row: the implementation at each end, the transport, whether udpros's publisher
/// governs its links, and whether one udpros node publishes both topics under a budget
/// per host of 90 % of the radio's narrowest capacity (the user who knows the radio).
struct Way {
    name: &'static str,
    kind: &'static str,
    transport: &'static str,
    governor: bool,
    one_node_budget: bool,
}

/// The share of the radio's narrowest capacity a one-node row's budget per host takes.
const BUDGET_SHARE: f64 = 0.9;

const WAYS: [Way; 7] = [
    Way {
        name: "udpros UDPROS (governed, the default)",
        kind: "udpros",
        transport: "udp",
        governor: true,
        one_node_budget: false,
    },
    Way {
        name: "udpros UDPROS, governor off",
        kind: "udpros",
        transport: "udp",
        governor: false,
        one_node_budget: false,
    },
    Way {
        name: "udpros TCPROS",
        kind: "udpros",
        transport: "tcp",
        governor: false,
        one_node_budget: false,
    },
    Way {
        name: "udpros UDPROS, one node, budget per host",
        kind: "udpros",
        transport: "udp",
        governor: false,
        one_node_budget: true,
    },
    Way {
        name: "udpros TCPROS, one node, budget per host",
        kind: "udpros",
        transport: "tcp",
        governor: false,
        one_node_budget: true,
    },
    Way {
        name: "roscpp UDPROS",
        kind: "roscpp",
        transport: "udp",
        governor: false,
        one_node_budget: false,
    },
    Way {
        name: "roscpp TCPROS",
        kind: "roscpp",
        transport: "tcp",
        governor: false,
        one_node_budget: false,
    },
];

/// The two topics of a cell: bytes, rate; the count follows from the cell's length.
const IMAGE: (usize, f64) = (100_000, 10.0);
const CONTROL: (usize, f64) = (64, 50.0);

/// The images' bits per second, as the governor counts them (datagrams' payload, a
/// UDPROS header of 8 bytes a datagram of 1472): a link that has no more to send cannot
/// show a path wider than that, so a rate is held against it where the radio is wider.
const OFFERED_BPS: f64 = IMAGE.0 as f64 * 8.0 * IMAGE.1 * 1472.0 / 1464.0;

/// What one cell measured.
struct Cell {
    radio: &'static str,
    loss_per_mille: u32,
    way: &'static str,
    images_sent: u64,
    image_ages_ms: Vec<f64>,
    control_sent: u64,
    control_ages_ms: Vec<f64>,
    /// For a governed publisher: its pacing rate two seconds after each step (the first
    /// "step" is the start) over what fits: the radio's capacity, or what is offered
    /// ([`OFFERED_BPS`]) where the radio is wider.
    rate_after_steps: Vec<f64>,
}

/// Which rows of S8 and S10, and which radios of S10, to run (`bench run --rows`,
/// `--radios`).
pub(super) struct Only {
    rows: Option<Vec<String>>,
    radios: Option<Vec<String>>,
}

impl Only {
    pub(super) fn new(rows: Option<&str>, radios: Option<&str>) -> Only {
        let list = |s: &str| s.split(',').map(|x| x.trim().to_string()).collect();
        Only {
            rows: rows.map(list),
            radios: radios.map(list),
        }
    }

    fn row(&self, way: &Way) -> bool {
        self.row_named(way.name)
    }

    /// Whether the row called `name` runs: its name holds one of the words asked for.
    pub(super) fn row_named(&self, name: &str) -> bool {
        self.rows
            .as_ref()
            .is_none_or(|r| r.iter().any(|x| name.contains(x.as_str())))
    }

    fn radio(&self, radio: &Radio) -> bool {
        self.radios
            .as_ref()
            .is_none_or(|r| r.iter().any(|x| radio.what.starts_with(x.as_str())))
    }
}

/// Runs S10 and prints its table. `quick`: the 4 Mbit/s radio without loss, the governed
/// row and the one-node UDPROS row, 3 s (CI: that they run, not what they measure).
pub(super) fn run(quick: bool, only: &Only, roscpp: &Path, dumps: &Path) -> Result<(), String> {
    let Some(net) = Network::new(&["robot", "radio", "operator"], 1500) else {
        println!(
            "\nS10 (the narrow radio) left out: it needs network namespaces (root and iproute2)"
        );
        return Ok(());
    };
    let (robot, radio, operator) = (net.host("robot"), net.host("radio"), net.host("operator"));
    net.route_through(robot, operator, radio);
    // Every datagram a packet of its own, as a radio sends them: the token bucket and the
    // loss then take datagrams one at a time.
    robot.unsegmented_udp();
    radio.unsegmented_udp();
    let master_uri = format!("http://{}:11311/", robot.ipv4);
    let udpros = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut master = robot.ros_command(&udpros, &master_uri, Identity::Ip, Family::Ipv4);
    master.args(["master", "--host", &robot.ipv4, "--port", "11311"]);
    let _master = spawn(master)?;
    let peers = Peers {
        nodes: super::lossy::Peers {
            udpros: &udpros,
            roscpp,
            python: None,
            master_uri: &master_uri,
        },
        dumps,
    };
    let seconds = if quick { 3.0 } else { 20.0 };
    let mut cells = Vec::new();
    for (r, radio_kind) in RADIOS.iter().enumerate() {
        if (quick && radio_kind.what != "4 Mbit/s") || !only.radio(radio_kind) {
            continue;
        }
        for loss in [0, 20] {
            if quick && loss != 0 {
                continue;
            }
            for (w, way) in WAYS.iter().enumerate() {
                // The quick run: the governed row and the one-node UDPROS row.
                let quick_row = way.governor || (way.one_node_budget && way.transport == "udp");
                if (quick && !quick_row) || !only.row(way) {
                    continue;
                }
                let at = Place {
                    robot,
                    radio,
                    operator,
                };
                let tag = format!("{r}_{loss}_{w}");
                match run_cell(&peers, &at, radio_kind, loss, way, seconds, &tag) {
                    Ok(cell) => {
                        eprintln!("S10 {} at {loss} ‰ {}: done", radio_kind.what, way.name);
                        cells.push(cell);
                    }
                    Err(e) => eprintln!("S10 {} at {loss} ‰ {}: {e}", radio_kind.what, way.name),
                }
            }
        }
    }
    if cells.is_empty() {
        return Err("S10: no cell of the narrow radio ran (see the lines above)".into());
    }
    print_table(&cells);
    Ok(())
}

/// The programs a cell runs, the master they join (S8's), and where their dumps go.
struct Peers<'a> {
    nodes: super::lossy::Peers<'a>,
    dumps: &'a Path,
}

/// The three hosts.
struct Place<'a> {
    robot: &'a Host,
    radio: &'a Host,
    operator: &'a Host,
}

impl Peers<'_> {
    fn command(&self, kind: &str, host: &Host) -> Command {
        self.nodes.command(kind, host)
    }

    /// A subscriber of `topic` on the operator, dumping each message's age to `dump`.
    fn subscriber(
        &self,
        way: &Way,
        at: &Place,
        topic: &str,
        count: u64,
        dump: &Path,
    ) -> Result<Peer, String> {
        let mut sub = self.command(way.kind, at.operator);
        sub.args(["sub", topic, "--count", &count.to_string()]);
        sub.args(["--transport", way.transport, "--idle", "3"]);
        sub.arg("--dump").arg(dump);
        let sub = spawn(sub)?;
        sub.wait_line("READY", Duration::from_secs(30))
            .ok_or_else(|| format!("the subscriber of {topic} did not start"))?;
        Ok(sub)
    }

    /// A publisher of `topic` on the robot: `(bytes, rate)`, `count` messages; `extra`, more
    /// of `bench peer`'s options.
    fn publisher(
        &self,
        way: &Way,
        at: &Place,
        topic: &str,
        (size, rate): (usize, f64),
        count: u64,
        extra: &[&str],
    ) -> Result<Peer, String> {
        let mut publisher = self.command(way.kind, at.robot);
        publisher.args(extra);
        publisher.args(["pub", topic, "--size", &size.to_string()]);
        publisher.args(["--rate", &rate.to_string(), "--count", &count.to_string()]);
        publisher.args(["--subscribers", "1"]);
        if !way.governor && way.kind == "udpros" {
            publisher.arg("--no-governor");
        }
        spawn(publisher)
    }
}

fn run_cell(
    peers: &Peers,
    at: &Place,
    radio: &Radio,
    loss_per_mille: u32,
    way: &Way,
    seconds: f64,
    tag: &str,
) -> Result<Cell, String> {
    at.radio.radio(radio.steps[0].1, at.operator);
    at.operator.lose(&[way.transport], loss_per_mille);
    let (image_topic, control_topic) = (
        format!("/radio_image_{tag}"),
        format!("/radio_control_{tag}"),
    );
    let dump = |what: &str| peers.dumps.join(format!("radio_{what}_{tag}.txt"));
    let (image_dump, control_dump, trace) = (dump("image"), dump("control"), dump("trace"));
    let count = |rate: f64| (seconds * rate).round() as u64;
    let (images, controls) = (count(IMAGE.1), count(CONTROL.1));
    let image_sub = peers.subscriber(way, at, &image_topic, images, &image_dump)?;
    let control_sub = peers.subscriber(way, at, &control_topic, controls, &control_dump)?;
    let (image_pub, control_pub) = if way.one_node_budget {
        // Both topics from one node, sharing its budget toward the operator.
        let narrowest = radio.steps.iter().map(|&(_, kbit)| kbit).min().unwrap_or(0);
        let budget = format!("{:.0}", f64::from(narrowest) * BUDGET_SHARE);
        let control = format!("{control_topic}:{}:{}", CONTROL.0, CONTROL.1);
        let extra = ["--max-rate-per-host-kbit", &budget, "--control", &control];
        let image_pub = peers.publisher(way, at, &image_topic, IMAGE, images, &extra)?;
        (image_pub, None)
    } else {
        let trace = trace.to_string_lossy();
        let traced = if way.governor {
            vec!["--trace", &*trace]
        } else {
            Vec::new()
        };
        let image_pub = peers.publisher(way, at, &image_topic, IMAGE, images, &traced)?;
        let control_pub = peers.publisher(way, at, &control_topic, CONTROL, controls, &[])?;
        (image_pub, Some(control_pub))
    };
    // The publishers find their subscriber and wait half a second before the first
    // message: the steps count from about then.
    let start = Instant::now() + Duration::from_secs(1);
    let mut step_times = Vec::new();
    for &(after, kbit) in radio.steps {
        let due = start + Duration::from_secs_f64(after);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        at.radio.radio(kbit, at.operator);
        step_times.push((unix_ms(), kbit));
    }
    let limit = Duration::from_secs_f64(60.0 + seconds);
    let publishers = [
        (Some(&image_pub), &image_topic),
        (control_pub.as_ref(), &control_topic),
    ];
    for (publisher, topic) in publishers {
        let Some(publisher) = publisher else { continue };
        let line = publisher
            .wait_line("PUB", limit)
            .ok_or_else(|| format!("the publisher of {topic} did not finish"))?;
        if way.governor && topic == &image_topic {
            eprintln!("S10 {} {}: {line}", radio.what, way.name);
        }
    }
    for sub in [&image_sub, &control_sub] {
        let _ = sub.wait_line("SUB", Duration::from_secs(30));
    }
    let ages = |path: &PathBuf| {
        let mut ages: Vec<f64> = read_dump(path).values().map(|us| us / 1e3).collect();
        ages.sort_by(f64::total_cmp);
        let _ = std::fs::remove_file(path);
        ages
    };
    // The governor's trace outlives the run's dumps, beside the CSV, to be plotted.
    if way.governor {
        let kept = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/bench")
            .join(format!("s10_governor_{tag}.txt"));
        if std::fs::copy(&trace, &kept).is_ok() {
            eprintln!("S10 governor trace: {}", kept.display());
        }
        // And the topics' ages by sequence (control at 50 Hz, images at 10 Hz from the
        // trace's start), to set late messages against the governor's reports.
        for (dump, what) in [(&control_dump, "control"), (&image_dump, "image")] {
            let _ = std::fs::copy(dump, kept.with_file_name(format!("s10_{what}_{tag}.txt")));
        }
    }
    let rate_after_steps = if way.governor {
        let samples = read_trace(&trace);
        step_times
            .iter()
            .filter_map(|&(at_ms, kbit)| {
                let (_, rate) = samples.iter().find(|(t, _)| *t >= at_ms + 2000)?;
                Some(rate / (f64::from(kbit) * 1e3).min(OFFERED_BPS))
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Cell {
        radio: radio.what,
        loss_per_mille,
        way: way.name,
        images_sent: images,
        image_ages_ms: ages(&image_dump),
        control_sent: controls,
        control_ages_ms: ages(&control_dump),
        rate_after_steps,
    })
}

/// Milliseconds of the wall clock since 1970: what the governor traces are stamped with.
pub(super) fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// A governor trace's `(unix ms, pacing rate bit/s)` samples.
fn read_trace(path: &Path) -> Vec<(u128, f64)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
        })
        .collect()
}

fn print_table(cells: &[Cell]) {
    if cells.is_empty() {
        return;
    }
    println!(
        "\nS10, the narrow radio: robot → radio (tc tbf, 50 ms queue) → operator; 100 kB images at 10 Hz and 64 B control at 50 Hz, two processes each side\n"
    );
    println!("| radio | loss | row | images whole | image age p50 ms | image age p99 ms | control delivered | control age p50 ms | control age p99 ms | rate / what fits 2 s after each step |");
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---|");
    for c in cells {
        let age = |ages: &[f64], p| {
            if ages.is_empty() {
                "-".to_string()
            } else {
                format!("{:.1}", percentile(ages, p))
            }
        };
        let rates = if c.rate_after_steps.is_empty() {
            "-".to_string()
        } else {
            c.rate_after_steps
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "| {} | {:.0} % | {} | {}/{} | {} | {} | {}/{} | {} | {} | {rates} |",
            c.radio,
            f64::from(c.loss_per_mille) / 10.0,
            c.way,
            c.image_ages_ms.len(),
            c.images_sent,
            age(&c.image_ages_ms, 0.5),
            age(&c.image_ages_ms, 0.99),
            c.control_ages_ms.len(),
            c.control_sent,
            age(&c.control_ages_ms, 0.5),
            age(&c.control_ages_ms, 0.99),
        );
    }
}
