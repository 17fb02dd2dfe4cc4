//! Two hosts in network namespaces on one switch, a master on host A, a publisher on A
//! and a UDP-only subscriber on B (`udpros bench peer` or the roscpp bench peer): what
//! crosses a path of a given MTU and loss. Needs root (CI runs as root), iproute2, and for
//! loss nftables and ethtool.

#![allow(dead_code)] // each test binary uses part of it

use udpros_testkit as common;

use common::netns::{Family, Identity, Network};
use common::{Child, Lines};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `program args` run on `host` as a node of the master on host A (`udpros master`).
pub fn on(net: &Network, host: &str, program: &Path, args: &[&str]) -> Command {
    let a = net.host("a");
    let master_uri = format!("http://{}:11311/", a.ipv4);
    let mut cmd = net
        .host(host)
        .ros_command(program, &master_uri, Identity::Ip, Family::Ipv4);
    cmd.args(args);
    cmd
}

/// Which implementation a node is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Side {
    /// `udpros bench peer`.
    Udpros,
    /// The roscpp bench peer.
    Roscpp,
}

fn peer(side: Side, roscpp: &Path) -> PathBuf {
    match side {
        Side::Udpros => PathBuf::from(env!("CARGO_BIN_EXE_udpros")),
        Side::Roscpp => roscpp.to_path_buf(),
    }
}

fn peer_args<'a>(side: Side, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = match side {
        Side::Udpros => vec!["bench", "peer"],
        Side::Roscpp => vec![],
    };
    args.extend_from_slice(rest);
    args
}

/// The path between the hosts, and what the subscriber asks for.
#[derive(Clone, Copy, Debug)]
pub struct Across {
    /// The MTU of every link.
    pub mtu: u32,
    /// Per mille of the UDP datagrams host B receives that are dropped (host A then sends
    /// every datagram as a packet of its own).
    pub loss_per_mille: u32,
    /// The mean length of a run of lost datagrams (1: each lost on its own).
    pub mean_run: f64,
    /// The subscriber's `--fec` (udpros subscribers only).
    pub fec: Option<&'static str>,
    /// The publisher governs its link (the default; `--no-governor` when false, udpros
    /// publishers only).
    pub governor: bool,
}

impl Across {
    /// A clean path of `mtu`.
    pub fn mtu(mtu: u32) -> Across {
        Across {
            mtu,
            loss_per_mille: 0,
            mean_run: 1.0,
            fec: None,
            governor: true,
        }
    }
}

/// What one run delivered.
#[derive(Clone, Debug)]
pub struct Delivered {
    /// Messages the subscriber received.
    pub received: u32,
    /// The publisher's summary line (`PUB sent=.. ...`), if it printed one.
    pub publisher: Option<String>,
}

impl Delivered {
    /// The value of `key=` in the publisher's summary.
    pub fn publisher_says(&self, key: &str) -> Option<String> {
        let prefix = format!("{key}=");
        self.publisher
            .as_deref()?
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(prefix.as_str()).map(str::to_string))
    }
}

/// Sends `count` messages of `size` bytes at 10 Hz from a publisher on host A to a UDP-only
/// subscriber on host B, `across` the path; what arrived.
pub fn delivered(
    from: Side,
    to: Side,
    across: Across,
    size: usize,
    count: u32,
    roscpp: &Path,
) -> Option<Delivered> {
    let net = Network::new(&["a", "b"], across.mtu)?;
    if across.loss_per_mille > 0 {
        net.host("a").unsegmented_udp();
        net.host("b")
            .lose_in_runs(&["udp"], across.loss_per_mille, across.mean_run);
    }
    let host_a = net.host("a").ipv4.clone();
    let udpros = PathBuf::from(env!("CARGO_BIN_EXE_udpros"));
    let mut master = on(
        &net,
        "a",
        &udpros,
        &["master", "--host", &host_a, "--port", "11311"],
    );
    let _master = Child(
        master
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Reachable from host B, across the veth pair, before any node starts.
    let reachable = common::wait_for(Duration::from_secs(30), || {
        on(&net, "b", &udpros, &["node", "list"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    assert!(reachable, "the master on host A, from host B");
    let (size_s, count_s) = (size.to_string(), count.to_string());
    let mut sub_args = vec![
        "sub",
        "/across",
        "--count",
        &count_s,
        "--transport",
        "udp",
        "--idle",
        "5",
    ];
    if let Some(fec) = across.fec.filter(|_| to == Side::Udpros) {
        sub_args.extend(["--fec", fec]);
    }
    let mut sub = on(&net, "b", &peer(to, roscpp), &peer_args(to, &sub_args));
    sub.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut sub_child = sub.spawn().unwrap();
    let mut lines = Lines::new(sub_child.stdout.take().unwrap());
    let _sub = Child(sub_child);
    // The subscriber registers once the master answers (it may start first).
    assert!(
        lines
            .wait_for(Duration::from_secs(30), |l| l == "READY")
            .is_some(),
        "subscriber ready"
    );
    let mut pub_args = vec![
        "pub",
        "/across",
        "--size",
        &size_s,
        "--rate",
        "10",
        "--count",
        &count_s,
        "--subscribers",
        "1",
    ];
    if !across.governor && from == Side::Udpros {
        pub_args.push("--no-governor");
    }
    let mut publisher = on(&net, "a", &peer(from, roscpp), &peer_args(from, &pub_args));
    let mut pub_child = publisher
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut pub_lines = Lines::new(pub_child.stdout.take().unwrap());
    let _pub = Child(pub_child);
    let summary = lines.wait_for(Duration::from_secs(90), |l| l.starts_with("SUB "))?;
    let received = summary
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("received="))
        .and_then(|n| n.parse().ok())?;
    let publisher = pub_lines.wait_for(Duration::from_secs(15), |l| l.starts_with("PUB "));
    Some(Delivered {
        received,
        publisher,
    })
}
