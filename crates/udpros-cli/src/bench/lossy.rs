//! S8, the lossy link: a publisher on host A and a subscriber on host B, two network
//! namespaces on one switch (the test kit's), every UDP datagram a packet of its own on A's
//! cable (no segmentation offload, so a drop takes one datagram), and nftables on B
//! dropping a share of what arrives, at random or in runs of about 3 (the TCP rows: of TCP
//! segments, as a lossy link would). For each message size, loss and row: messages
//! delivered, their age at the subscriber (both hosts share the machine's clock), bytes on
//! the wire per payload byte (nftables' counter of what reached B, IP headers included,
//! before the drop), and CPU per message of each side. Needs root, iproute2, nftables and
//! ethtool.

use super::harness::{fields, spawn};
use super::python::{is_python, PythonPeer};
use super::report::{age_cells, cell, read_dump};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use udpros_testkit::netns::{Family, Host, Identity, Network};

/// One size of the scenario: bytes, rate, messages.
struct Load {
    what: &'static str,
    size: usize,
    rate: f64,
    count: u64,
}

/// One row: which implementation at each end, the transport, and udpros's `--fec`.
struct Way {
    name: &'static str,
    publisher: &'static str,
    subscriber: &'static str,
    transport: &'static str,
    fec: Option<&'static str>,
    /// The publisher governs its UDPROS links (udpros, by default).
    governor: bool,
    /// Both ends hold a graph key: the link is sealed (encrypted), its repair too.
    sealed: bool,
}

const WAYS: [Way; 9] = [
    Way {
        name: "udpros FEC adaptive",
        publisher: "udpros",
        subscriber: "udpros",
        transport: "udp",
        fec: Some("adaptive"),
        governor: true,
        sealed: false,
    },
    Way {
        name: "udpros FEC adaptive, sealed",
        publisher: "udpros",
        subscriber: "udpros",
        transport: "udp",
        fec: Some("adaptive"),
        governor: true,
        sealed: true,
    },
    Way {
        name: "udpros FEC adaptive, governor off",
        publisher: "udpros",
        subscriber: "udpros",
        transport: "udp",
        fec: Some("adaptive"),
        governor: false,
        sealed: false,
    },
    Way {
        name: "udpros FEC off",
        publisher: "udpros",
        subscriber: "udpros",
        transport: "udp",
        fec: Some("off"),
        governor: true,
        sealed: false,
    },
    Way {
        name: "roscpp UDPROS",
        publisher: "roscpp",
        subscriber: "roscpp",
        transport: "udp",
        fec: None,
        governor: false,
        sealed: false,
    },
    Way {
        name: "udpros TCPROS",
        publisher: "udpros",
        subscriber: "udpros",
        transport: "tcp",
        fec: None,
        governor: false,
        sealed: false,
    },
    Way {
        name: "roscpp TCPROS",
        publisher: "roscpp",
        subscriber: "roscpp",
        transport: "tcp",
        fec: None,
        governor: false,
        sealed: false,
    },
    Way {
        name: "rospy + import udpros.rospy, UDPROS FEC adaptive",
        publisher: "udpros",
        subscriber: "rospy+udpros",
        transport: "udp",
        fec: Some("adaptive"),
        governor: true,
        sealed: false,
    },
    Way {
        name: "stock rospy TCPROS",
        publisher: "udpros",
        subscriber: "rospy",
        transport: "tcp",
        fec: None,
        governor: false,
        sealed: false,
    },
];

/// How the subscriber's host loses packets: `per_mille` of them, in runs of `mean_run` on
/// average (1: each at random).
#[derive(Clone, Copy)]
pub(super) struct Loss {
    pub(super) per_mille: u32,
    mean_run: f64,
}

impl Loss {
    pub(super) const fn random(per_mille: u32) -> Loss {
        Loss {
            per_mille,
            mean_run: 1.0,
        }
    }

    pub(super) fn apply(&self, host: &Host, protocol: &str) {
        host.lose_in_runs(&[protocol], self.per_mille, self.mean_run);
    }
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.1} %", f64::from(self.per_mille) / 10.0)?;
        if self.mean_run > 1.0 {
            write!(f, " in runs of {}", self.mean_run)?;
        }
        Ok(())
    }
}

/// What one cell measured.
struct Cell {
    load: &'static str,
    loss: Loss,
    way: &'static str,
    sent: u64,
    received: u64,
    ages_ms: Vec<f64>,
    wire_per_payload: Option<f64>,
    pub_cpu_us: Option<f64>,
    sub_cpu_us: Option<f64>,
}

/// Runs S8 and prints its table. `quick`: 100 kB at 5 % loss for the udpros UDPROS rows
/// only, a few messages (CI: that it runs, not what it measures).
pub(super) fn run(
    quick: bool,
    only: &super::radio::Only,
    (roscpp, python): (&Path, Option<&PythonPeer>),
    dumps: &Path,
) -> Result<(), String> {
    let loads = [
        Load {
            what: "1 kB at 100 Hz",
            size: 1_000,
            rate: 100.0,
            count: 600,
        },
        Load {
            what: "100 kB at 10 Hz",
            size: 100_000,
            rate: 10.0,
            count: 150,
        },
        Load {
            what: "1 MB at 10 Hz",
            size: 1_000_000,
            rate: 10.0,
            count: 50,
        },
    ];
    let random = Loss::random;
    let bursty = Loss {
        per_mille: 50,
        mean_run: 3.0,
    };
    let losses = if quick {
        vec![random(50)]
    } else {
        vec![
            random(0),
            random(1),
            random(10),
            random(50),
            bursty,
            random(100),
        ]
    };
    let Some(hosts) = TwoHosts::start("S8 (lossy link)")? else {
        return Ok(());
    };
    let (a, b) = (hosts.net.host("a"), hosts.net.host("b"));
    let (udpros, master_uri) = (&hosts.udpros, &hosts.master_uri);
    let mut cells = Vec::new();
    for load in &loads {
        if quick && load.size != 100_000 {
            continue;
        }
        for &loss in &losses {
            for (n, way) in WAYS.iter().enumerate() {
                if quick && (way.transport != "udp" || way.publisher != "udpros")
                    || !only.row_named(way.name)
                    || is_python(way.subscriber) && python.is_none()
                {
                    continue;
                }
                let count = if quick { 20 } else { load.count };
                let topic = format!(
                    "/lossy_{}_{}_{}_{n}",
                    load.size, loss.per_mille, loss.mean_run as u32
                );
                let peers = Peers {
                    udpros,
                    roscpp,
                    python,
                    master_uri,
                };
                let cell = run_cell(&peers, (a, b), load, count, loss, way, &topic, dumps);
                match cell {
                    Ok(cell) => {
                        eprintln!("S8 {} at {loss} {}: done", load.what, way.name);
                        cells.push(cell);
                    }
                    Err(e) => eprintln!("S8 {} at {loss} {}: {e}", load.what, way.name),
                }
            }
        }
    }
    print_table(&cells);
    Ok(())
}

/// S8's two hosts, which S11 shares: `a` and `b` on one switch, each UDP datagram a
/// packet of its own on `a`'s cable, and a udpros master on `a`.
pub(super) struct TwoHosts {
    pub(super) net: Network,
    /// This program, which each cell runs as its peers.
    pub(super) udpros: PathBuf,
    pub(super) master_uri: String,
    _master: super::harness::Peer,
}

impl TwoHosts {
    /// The hosts and their master; `None`, said in a line naming `scenario`, where network
    /// namespaces cannot be made.
    pub(super) fn start(scenario: &str) -> Result<Option<TwoHosts>, String> {
        let Some(net) = Network::new(&["a", "b"], 1500) else {
            println!("\n{scenario} left out: it needs network namespaces (root and iproute2)");
            return Ok(None);
        };
        let a = net.host("a");
        a.unsegmented_udp();
        let master_uri = format!("http://{}:11311/", a.ipv4);
        let udpros = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut master = a.ros_command(&udpros, &master_uri, Identity::Ip, Family::Ipv4);
        master.args(["master", "--host", &a.ipv4, "--port", "11311"]);
        let master = spawn(master)?;
        Ok(Some(TwoHosts {
            net,
            udpros,
            master_uri,
            _master: master,
        }))
    }
}

/// The programs a cell runs and the master they join (S8's and S10's).
pub(super) struct Peers<'a> {
    pub(super) udpros: &'a Path,
    pub(super) roscpp: &'a Path,
    /// The Python subscribers, where a Python with rospy and the wheel is there.
    pub(super) python: Option<&'a PythonPeer>,
    pub(super) master_uri: &'a str,
}

impl Peers<'_> {
    /// `kind`'s bench peer (`udpros bench peer ...` or the roscpp peer) as a node on `host`.
    pub(super) fn command(&self, kind: &str, host: &Host) -> Command {
        let ros_command =
            |program: &Path| host.ros_command(program, self.master_uri, Identity::Ip, Family::Ipv4);
        match (kind, self.python) {
            ("roscpp", _) => ros_command(self.roscpp),
            (kind, Some(python)) if is_python(kind) => {
                let mut cmd = ros_command(python.python());
                cmd.args(python.args(kind));
                cmd
            }
            _ => {
                let mut cmd = ros_command(self.udpros);
                cmd.args(["bench", "peer"]);
                cmd
            }
        }
    }

    /// `kind`'s publisher of `count` messages of `size` bytes at `rate` on `topic`, once
    /// its one subscriber is there; a udpros one without its link governor unless
    /// `governed`.
    pub(super) fn publisher(
        &self,
        kind: &str,
        host: &Host,
        topic: &str,
        (size, rate, count): (usize, f64, u64),
        governed: bool,
    ) -> Command {
        let mut cmd = self.command(kind, host);
        cmd.args(["pub", topic, "--size", &size.to_string()]);
        cmd.args(["--rate", &rate.to_string(), "--count", &count.to_string()]);
        cmd.args(["--subscribers", "1"]);
        if !governed && kind == "udpros" {
            cmd.arg("--no-governor");
        }
        cmd
    }
}

#[allow(clippy::too_many_arguments)] // one cell's coordinates, named at the one call
fn run_cell(
    peers: &Peers,
    (a, b): (&Host, &Host),
    load: &Load,
    count: u64,
    loss: Loss,
    way: &Way,
    topic: &str,
    dumps: &Path,
) -> Result<Cell, String> {
    loss.apply(b, way.transport);
    let dump: PathBuf = dumps.join(format!("{}.txt", topic.trim_start_matches('/')));
    let count_s = count.to_string();
    // Sealed rows: both peers hold a throwaway key, under prefer (the master has none).
    let key_file = match way.sealed {
        true => Some(super::harness::throwaway_key(dumps)?),
        false => None,
    };
    let seal = |cmd: &mut Command| {
        if let Some(key_file) = &key_file {
            cmd.env(udpros::secure::KEY_FILE_VAR, key_file)
                .env(udpros::secure::POLICY_VAR, "prefer");
        }
    };
    let mut sub = peers.command(way.subscriber, b);
    seal(&mut sub);
    sub.args([
        "sub",
        topic,
        "--count",
        &count_s,
        "--transport",
        way.transport,
    ]);
    sub.args(["--idle", "3"]).arg("--dump").arg(&dump);
    if let Some(fec) = way.fec {
        sub.args(["--fec", fec]);
    }
    let sub = spawn(sub)?;
    sub.wait_line("READY", Duration::from_secs(30))
        .ok_or("the subscriber did not start")?;
    let mut publisher = peers.publisher(
        way.publisher,
        a,
        topic,
        (load.size, load.rate, count),
        way.governor,
    );
    seal(&mut publisher);
    let publisher = spawn(publisher)?;
    let limit = Duration::from_secs_f64(60.0 + count as f64 / load.rate);
    let pub_line = publisher
        .wait_line("PUB", limit)
        .ok_or("the publisher did not finish")?;
    let sub_line = sub
        .wait_line("SUB", Duration::from_secs(30))
        .unwrap_or_else(|| "SUB received=0".into());
    let (pub_fields, sub_fields) = (fields(&pub_line), fields(&sub_line));
    let received = sub_fields.get("received").copied().unwrap_or(0.0) as u64;
    let mut ages_ms: Vec<f64> = read_dump(&dump).values().map(|us| us / 1e3).collect();
    ages_ms.sort_by(f64::total_cmp);
    let _ = std::fs::remove_file(&dump);
    let payload = (count as usize * load.size) as f64;
    let cpu_us = |f: &std::collections::BTreeMap<String, f64>, messages: u64| {
        let seconds = f.get("user")? + f.get("sys")?;
        (messages > 0).then(|| seconds * 1e6 / messages as f64)
    };
    Ok(Cell {
        load: load.what,
        loss,
        way: way.name,
        sent: count,
        received,
        ages_ms,
        wire_per_payload: b.received_bytes().map(|bytes| bytes as f64 / payload),
        pub_cpu_us: cpu_us(&pub_fields, count),
        sub_cpu_us: cpu_us(&sub_fields, received),
    })
}

fn print_table(cells: &[Cell]) {
    if cells.is_empty() {
        return;
    }
    println!(
        "\nS8, the lossy link: two namespaces, datagram loss at the subscriber's host (at random, or in runs)\n"
    );
    println!("| load | loss | row | delivered | age p50 ms | age p99 ms | wire bytes / payload byte | pub CPU µs/msg | sub CPU µs/msg |");
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
    for c in cells {
        let [p50, p99] = age_cells(&c.ages_ms);
        println!(
            "| {} | {} | {} | {}/{} ({:.1} %) | {} | {} | {} | {} | {} |",
            c.load,
            c.loss,
            c.way,
            c.received,
            c.sent,
            100.0 * c.received as f64 / c.sent.max(1) as f64,
            p50,
            p99,
            cell(c.wire_per_payload, 3),
            cell(c.pub_cpu_us, 0),
            cell(c.sub_cpu_us, 0),
        );
    }
}
