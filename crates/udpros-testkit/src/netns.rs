//! Several hosts on one machine: a network namespace per host, each joined by a veth pair to
//! a bridge in a switch namespace of its own, so a test's traffic never leaves the
//! namespaces it made and tests run in parallel (each network has its own namespaces; the
//! same addresses in two networks never meet). Needs root and iproute2, as CI has.
//!
//! Host `i` (from 0) is `10.77.0.(i+1)` and `fd77::(i+1)`. Each host has its own hosts file
//! (`ip netns exec` mounts `/etc/netns/NS/hosts` over `/etc/hosts`), which names every host
//! of the network twice: `NAME` for its IPv4 address and `NAME6` for its IPv6 one, so
//! `ROS_HOSTNAME` resolves as it would on a robot's LAN, through the host's own files.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// How a node on a host names itself to the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// `ROS_IP` set to the host's address.
    Ip,
    /// `ROS_HOSTNAME` set to the host's name, resolved through the hosts files.
    Hostname,
}

/// Which family a node's addresses and names are of (`Ipv6` sets `ROS_IPV6=on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Addresses and names of IPv4.
    Ipv4,
    /// Addresses and names of IPv6.
    Ipv6,
}

/// One host of a [`Network`].
#[derive(Debug)]
pub struct Host {
    /// The name its hosts files give it (and `NAME6` for its IPv6 address).
    pub name: String,
    /// Its network namespace.
    pub ns: String,
    /// Its IPv4 address.
    pub ipv4: String,
    /// Its IPv6 address.
    pub ipv6: String,
    /// The switch's end of its cable.
    switch_port: String,
}

/// Hosts on one switch, removed (namespaces and hosts files) when dropped.
pub struct Network {
    switch: String,
    /// The hosts, in the order they were asked for.
    pub hosts: Vec<Host>,
}

impl Network {
    /// Hosts named `names` on one switch, every link of `mtu` bytes. `None` (after failing
    /// the test when interop is required) when namespaces cannot be made here.
    pub fn new(names: &[&str], mtu: u32) -> Option<Network> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // Interface names have 15 bytes at most: keep the tag short.
        let tag = format!(
            "{}x{}",
            std::process::id() % 1_000_000,
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut net = Network {
            switch: format!("udpros-sw{tag}"),
            hosts: Vec::new(),
        };
        let mtu = mtu.to_string();
        let mut steps: Vec<Vec<String>> = vec![
            args(&["netns", "add", &net.switch]),
            args(&["-n", &net.switch, "link", "add", "br0", "type", "bridge"]),
            args(&["-n", &net.switch, "link", "set", "br0", "mtu", &mtu, "up"]),
        ];
        for (i, name) in names.iter().enumerate() {
            let host = Host {
                name: name.to_string(),
                ns: format!("udpros-{name}{tag}"),
                ipv4: format!("10.77.0.{}", i + 1),
                ipv6: format!("fd77::{}", i + 1),
                switch_port: format!("s{tag}h{i}"),
            };
            let dev = format!("h{tag}h{i}");
            steps.extend([
                args(&["netns", "add", &host.ns]),
                args(&[
                    "link",
                    "add",
                    &dev,
                    "netns",
                    &host.ns,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &host.switch_port,
                    "netns",
                    &net.switch,
                ]),
                args(&["-n", &host.ns, "link", "set", &dev, "name", "eth0"]),
                args(&[
                    "-n",
                    &net.switch,
                    "link",
                    "set",
                    &host.switch_port,
                    "master",
                    "br0",
                    "mtu",
                    &mtu,
                    "up",
                ]),
                args(&[
                    "-n",
                    &host.ns,
                    "addr",
                    "add",
                    &format!("{}/24", host.ipv4),
                    "dev",
                    "eth0",
                ]),
                // No duplicate address detection: the address is usable at once.
                args(&[
                    "-n",
                    &host.ns,
                    "addr",
                    "add",
                    &format!("{}/64", host.ipv6),
                    "dev",
                    "eth0",
                    "nodad",
                ]),
                args(&["-n", &host.ns, "link", "set", "eth0", "mtu", &mtu, "up"]),
                args(&["-n", &host.ns, "link", "set", "lo", "up"]),
            ]);
            net.hosts.push(host);
        }
        for step in steps {
            let ok = Command::new("ip")
                .args(&step)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                crate::skip_or_fail(&format!(
                    "network namespaces (root and iproute2: `ip {}` failed)",
                    step.join(" ")
                ));
                return None;
            }
        }
        let mut hosts_file = String::from("127.0.0.1 localhost\n::1 localhost ip6-localhost\n");
        for host in &net.hosts {
            hosts_file += &format!(
                "{} {}\n{} {}6\n",
                host.ipv4, host.name, host.ipv6, host.name
            );
        }
        for host in &net.hosts {
            let dir = hosts_dir(&host.ns);
            std::fs::create_dir_all(&dir).expect("create /etc/netns/NS");
            std::fs::write(dir.join("hosts"), &hosts_file).expect("write the host's hosts file");
        }
        Some(net)
    }

    /// The host named `name`.
    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("no host {name}"))
    }

    /// Plugs `host`'s cable in or pulls it out at the switch: the host keeps its addresses
    /// and sockets, and its packets go nowhere until the cable is back.
    pub fn set_link(&self, host: &Host, up: bool) {
        let state = if up { "up" } else { "down" };
        let ok = Command::new("ip")
            .args(["-n", &self.switch, "link", "set", &host.switch_port, state])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip link set {} {state}", host.switch_port);
    }
}

impl Network {
    /// Sends what `a` and `b` say to each other through `via`, which forwards it (a radio
    /// or a router between them): host routes on both ends, no ICMP redirects to undo them.
    pub fn route_through(&self, a: &Host, b: &Host, via: &Host) {
        via.sysctl(&[
            ("net/ipv4/ip_forward", "1"),
            ("net/ipv4/conf/all/send_redirects", "0"),
            ("net/ipv4/conf/eth0/send_redirects", "0"),
        ]);
        for (from, to) in [(a, b), (b, a)] {
            from.sysctl(&[
                ("net/ipv4/conf/all/accept_redirects", "0"),
                ("net/ipv4/conf/eth0/accept_redirects", "0"),
            ]);
            let route = format!("{}/32", to.ipv4);
            run_ip(&["-n", &from.ns, "route", "add", &route, "via", &via.ipv4]);
        }
    }

    /// Hands the UDP datagrams `via` forwards from `from` to `to` to a transparent proxy on
    /// `via` at `port` (`udpros proxy --transparent`): a TPROXY rule, and the policy route
    /// that delivers its marked packets locally. Needs nftables.
    pub fn divert_udp(&self, via: &Host, from: &Host, to: &Host, port: u16) {
        let rules = format!(
            "table ip udpros_fault {{\n  chain pre {{\n    type filter hook prerouting priority mangle; policy accept;\n    ip saddr {} ip daddr {} meta l4proto udp tproxy to :{port} meta mark set 1 accept\n  }}\n}}\n",
            from.ipv4, to.ipv4
        );
        let mut nft = via.command("nft");
        nft.args(["-f", "-"]).stdin(Stdio::piped());
        let mut child = nft.spawn().expect("nft (apt install nftables)");
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().expect("nft stdin");
            stdin.write_all(rules.as_bytes()).expect("nft rules");
        }
        assert!(child.wait().is_ok_and(|s| s.success()), "nft -f: {rules}");
        run_ip(&["-n", &via.ns, "rule", "add", "fwmark", "1", "lookup", "100"]);
        run_ip(&[
            "-n",
            &via.ns,
            "route",
            "add",
            "local",
            "0.0.0.0/0",
            "dev",
            "lo",
            "table",
            "100",
        ]);
    }
}

fn run_ip(args: &[&str]) {
    let ok = Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "ip {}", args.join(" "));
}

impl Drop for Network {
    fn drop(&mut self) {
        for host in &self.hosts {
            let _ = Command::new("ip").args(["netns", "del", &host.ns]).status();
            let _ = std::fs::remove_dir_all(hosts_dir(&host.ns));
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.switch])
            .status();
    }
}

impl Host {
    /// Sets kernel parameters of this host's network stack (`/proc/sys/...` as seen inside
    /// its namespace).
    pub fn sysctl(&self, settings: &[(&str, &str)]) {
        for (key, value) in settings {
            let ok = self
                .command("sh")
                .args(["-c", &format!("echo {value} > /proc/sys/{key}")])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "{key} = {value} on {}", self.name);
        }
    }

    /// Sends every UDP datagram as a packet of its own: no UDP segmentation offload on the
    /// host's cable (`ethtool -K eth0 tx-udp-segmentation off`), so that a loss further on
    /// takes datagrams one at a time, as a real link does, not a whole segmented send.
    pub fn unsegmented_udp(&self) {
        let ok = self
            .command("ethtool")
            .args(["-K", "eth0", "tx-udp-segmentation", "off"])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "ethtool -K eth0 tx-udp-segmentation off on {}",
            self.name
        );
    }

    /// Makes what this host forwards to `toward` a narrow radio's: a token bucket of
    /// `kbit_per_s` (`tc tbf ... burst 16kb latency 50ms`) on its cable's way to that
    /// host alone, so that packets to it beyond the rate wait in a queue of 50 ms and are
    /// dropped past it, as a radio's transmit queue does; what goes the other way (the
    /// subscriber's reports, TCP's acknowledgements) has a queue of its own, as it has on
    /// two radios. The host has one cable for both ways, so the bucket is a class of an
    /// `htb` root that a `u32` filter sends `toward`'s address to, everything else to an
    /// unshaped class. Called again, it changes the rate in place (a capacity step).
    /// This kernel has `tbf` and `htb` and no `netem` or `prio`.
    pub fn radio(&self, kbit_per_s: u32, toward: &Host) {
        let tc = |args: &[&str]| {
            let ok = self
                .command("tc")
                .args(args)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "tc {} on {}", args.join(" "), self.name);
        };
        let shown = self
            .command("tc")
            .args(["qdisc", "show", "dev", "eth0"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        if !shown.contains("htb 1:") {
            let dst = format!("{}/32", toward.ipv4);
            #[rustfmt::skip]
            let setup: [&[&str]; 4] = [
                &["qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "20"],
                &["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit"],
                &["class", "add", "dev", "eth0", "parent", "1:", "classid", "1:20", "htb", "rate", "10gbit"],
                &["filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", &dst, "flowid", "1:10"],
            ];
            setup.iter().for_each(|args| tc(args));
        }
        let rate = format!("{kbit_per_s}kbit");
        #[rustfmt::skip]
        tc(&["qdisc", "replace", "dev", "eth0", "parent", "1:10", "handle", "10:", "tbf", "rate", &rate, "burst", "16kb", "latency", "50ms"]);
    }

    /// Drops `per_mille` of the packets of `protocols` (`udp`, `tcp`) this host receives,
    /// each at random, replacing any earlier rule, and counts the packets and bytes of those
    /// protocols that reach it before the drop (see [`Host::received_bytes`]).
    pub fn lose(&self, protocols: &[&str], per_mille: u32) {
        self.set_loss_rules(
            protocols,
            &[format!("numgen random mod 1000 < {per_mille} drop")],
        );
    }

    /// Like [`Host::lose`], but the losses come in runs of `mean_run` packets on average
    /// (a Gilbert model: a lossy link's fades and collisions take several packets in a
    /// row), `per_mille` of the packets lost overall. The state is conntrack's mark of
    /// each flow: a run starts at random, each later packet of the flow is dropped, and
    /// each ends the run with the chance that makes runs `mean_run` long. No `tc netem`
    /// needed (this kernel has none).
    pub fn lose_in_runs(&self, protocols: &[&str], per_mille: u32, mean_run: f64) {
        if mean_run <= 1.0 {
            return self.lose(protocols, per_mille);
        }
        let p = f64::from(per_mille.min(999)) / 1000.0;
        // A run is its first drop and then, packet by packet, more drops until one ends
        // it, with chance `end` each: mean length 1 + 1/end. A run starts with chance
        // `start` on a packet outside one, so that the share lost is p.
        let per_100k = |chance: f64| (chance * 1e5).round() as u32;
        let end = per_100k(1.0 / (mean_run - 1.0));
        let start = per_100k(p / (mean_run * (1.0 - p) + p));
        self.set_loss_rules(
            protocols,
            &[
                format!("ct mark 1 numgen random mod 100000 < {end} ct mark set 0 drop"),
                "ct mark 1 drop".to_string(),
                format!("numgen random mod 100000 < {start} ct mark set 1 drop"),
            ],
        );
    }

    /// Replaces the loss table's input chain by a counter of `protocols`' packets (what
    /// [`Host::received_bytes`] reads) and then `drops`, each for those packets only.
    fn set_loss_rules(&self, protocols: &[&str], drops: &[String]) {
        let _ = self
            .command("nft")
            .args(["delete", "table", "inet", "udpros_lossy"])
            .stderr(Stdio::null())
            .status();
        let only = format!("meta l4proto {{ {} }}", protocols.join(", "));
        let mut rules = format!(
            "table inet udpros_lossy {{\n  chain input {{\n    type filter hook input priority 0;\n    {only} counter\n"
        );
        for drop in drops {
            rules.push_str(&format!("    {only} {drop}\n"));
        }
        rules.push_str("  }\n}\n");
        let mut nft = self
            .command("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("nft");
        use std::io::Write;
        let written = nft
            .stdin
            .take()
            .is_some_and(|mut stdin| stdin.write_all(rules.as_bytes()).is_ok());
        let ok = written && nft.wait().is_ok_and(|s| s.success());
        assert!(ok, "nftables loss rules on {}: {rules}", self.name);
    }

    /// Bytes (IP packets, headers included) of the protocols [`Host::lose`] watches that
    /// reached this host since the rule was set, before any was dropped.
    pub fn received_bytes(&self) -> Option<u64> {
        let out = self
            .command("nft")
            .args(["list", "table", "inet", "udpros_lossy"])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut words = text.split_whitespace();
        words.find(|w| *w == "bytes")?;
        words.next()?.parse().ok()
    }

    /// Runs `f` on a thread of its own inside this host's namespace: the sockets it opens
    /// (and the threads it starts, a tokio runtime's workers say) are the host's. How a test
    /// puts code of its own (a simulated device, a node) on a host without a process.
    pub fn spawn_inside<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        use std::os::fd::AsRawFd;
        let path = PathBuf::from("/run/netns").join(&self.ns);
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path)
                .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
            // SAFETY: setns on an open namespace file moves only this thread.
            let entered = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(
                entered,
                0,
                "setns {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            );
            f()
        })
    }

    /// `program` run on this host (inside its namespace), with a ROS_HOME of its own.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns])
            .arg(program)
            .env(
                "ROS_HOME",
                std::env::temp_dir().join(format!("udpros-test-{}", self.ns)),
            )
            .env_remove("ROS_NAMESPACE")
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null());
        cmd
    }

    /// `program` run on this host as a ROS node of `master_uri`, naming itself by `identity`
    /// in `family`.
    pub fn ros_command(
        &self,
        program: impl AsRef<OsStr>,
        master_uri: &str,
        identity: Identity,
        family: Family,
    ) -> Command {
        let mut cmd = self.command(program);
        cmd.env("ROS_MASTER_URI", master_uri)
            .env_remove("ROS_IP")
            .env_remove("ROS_HOSTNAME")
            .env_remove("ROS_IPV6");
        match (identity, family) {
            (Identity::Ip, Family::Ipv4) => cmd.env("ROS_IP", &self.ipv4),
            (Identity::Ip, Family::Ipv6) => cmd.env("ROS_IP", &self.ipv6),
            (Identity::Hostname, Family::Ipv4) => cmd.env("ROS_HOSTNAME", &self.name),
            (Identity::Hostname, Family::Ipv6) => {
                cmd.env("ROS_HOSTNAME", format!("{}6", self.name))
            }
        };
        if family == Family::Ipv6 {
            cmd.env("ROS_IPV6", "on");
        }
        cmd.env("RUST_LOG", "warn");
        cmd
    }

    /// The master URI of a master on this host at `port`, by name (`NAME` or `NAME6`: roscpp
    /// cannot parse a bracketed IPv6 address in `ROS_MASTER_URI`).
    pub fn master_uri(&self, family: Family, port: u16) -> String {
        match family {
            Family::Ipv4 => format!("http://{}:{port}/", self.name),
            Family::Ipv6 => format!("http://{}6:{port}/", self.name),
        }
    }
}

fn hosts_dir(ns: &str) -> PathBuf {
    PathBuf::from("/etc/netns").join(ns)
}

fn args(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
