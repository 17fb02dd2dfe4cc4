//! S11, the recorder: `udpros record` beside `rosbag record` (Debian's C++ recorder, the
//! program `rosbag record` runs), each on host B of S8's two namespaces, recording what a
//! udpros bench publisher on host A sends: 100 kB at 10 Hz with no loss and with 5 % of
//! the datagrams (TCP segments for rosbag's row) dropped at B, then 1 MB at 30 Hz and
//! 100-byte messages at 10 kHz with no loss. Both write an uncompressed bag, read back
//! here: messages kept, their age when recorded (the bag's time minus the message's header
//! stamp; both hosts share the machine's clock), and the recorder's CPU per message (from
//! two seconds after it started to the end of the traffic). Needs
//! root, iproute2, nftables and Debian's rosbag.

use super::harness::{fields, spawn};
use super::lossy::{Loss, Peers, TwoHosts};
use super::report::{age_cells, cell};
use std::path::Path;
use std::time::{Duration, Instant};
use udpros_record::{Item, Limits};
use udpros_testkit::netns::{Family, Host, Identity};

/// The recorders; the second row's publisher sends without its link governor, which shows
/// what the recorder keeps when the link does not hold messages back.
const ROWS: [&str; 3] = [
    "udpros record",
    "udpros record, publisher ungoverned",
    "rosbag record",
];

/// Debian's recorder, as `rosbag record` runs it.
const ROSBAG_RECORD: &str = "/usr/lib/rosbag/record";

struct Load {
    what: &'static str,
    size: usize,
    rate: f64,
    count: u64,
    loss: Loss,
}

struct Cell {
    load: &'static str,
    loss: Loss,
    row: &'static str,
    sent: u64,
    kept: u64,
    ages_ms: Vec<f64>,
    cpu_us: Option<f64>,
}

/// Runs S11 and prints its table. `quick`: 100 kB at 5 % loss, a few messages.
pub(super) fn run(quick: bool, roscpp: &Path, dumps: &Path) -> Result<(), String> {
    let loads = [
        Load {
            what: "100 kB at 10 Hz",
            size: 100_000,
            rate: 10.0,
            count: 150,
            loss: Loss::random(0),
        },
        Load {
            what: "100 kB at 10 Hz",
            size: 100_000,
            rate: 10.0,
            count: 150,
            loss: Loss::random(50),
        },
        Load {
            what: "1 MB at 30 Hz",
            size: 1_000_000,
            rate: 30.0,
            count: 300,
            loss: Loss::random(0),
        },
        Load {
            what: "100 B at 10 kHz",
            size: 100,
            rate: 10_000.0,
            count: 50_000,
            loss: Loss::random(0),
        },
    ];
    if !Path::new(ROSBAG_RECORD).exists() {
        println!("\nS11 (the recorder) left out: it needs Debian's rosbag ({ROSBAG_RECORD})");
        return Ok(());
    }
    let Some(hosts) = TwoHosts::start("S11 (the recorder)")? else {
        return Ok(());
    };
    let (a, b) = (hosts.net.host("a"), hosts.net.host("b"));
    let peers = Peers {
        udpros: &hosts.udpros,
        roscpp,
        python: None,
        master_uri: &hosts.master_uri,
    };
    let mut cells = Vec::new();
    for (n, load) in loads.iter().enumerate() {
        if quick && load.loss.per_mille == 0 {
            continue;
        }
        for row in ROWS {
            let count = if quick { 20 } else { load.count };
            let topic = format!("/record_{n}_{}", row.len());
            match run_cell(&peers, (a, b), load, count, row, &topic, dumps) {
                Ok(cell) => {
                    eprintln!("S11 {} at {} {row}: done", load.what, load.loss);
                    cells.push(cell);
                }
                Err(e) => eprintln!("S11 {} at {} {row}: {e}", load.what, load.loss),
            }
        }
    }
    print_table(&cells);
    Ok(())
}

fn run_cell(
    peers: &Peers,
    (a, b): (&Host, &Host),
    load: &Load,
    count: u64,
    row: &'static str,
    topic: &str,
    dumps: &Path,
) -> Result<Cell, String> {
    let udpros_row = row.starts_with("udpros");
    load.loss.apply(b, if udpros_row { "udp" } else { "tcp" });
    let file = dumps.join(format!("{}.bag", topic.trim_start_matches('/')));
    let _ = std::fs::remove_file(&file);
    let mut recorder = if udpros_row {
        let mut cmd = b.ros_command(peers.udpros, peers.master_uri, Identity::Ip, Family::Ipv4);
        cmd.args(["record", "--bag", "-q", "--no-link-channel", "-O"])
            .arg(&file)
            .arg(topic);
        cmd
    } else {
        let mut cmd = b.ros_command(ROSBAG_RECORD, peers.master_uri, Identity::Ip, Family::Ipv4);
        cmd.arg("-O").arg(&file).arg(topic);
        cmd
    };
    // 1 GB of queue for both (rosbag's -b is 256 MB by default, as is ours): what a
    // recorder drops here it drops for want of disk or CPU, not of queue.
    recorder.args(["-b", "1024"]);
    let recorder = spawn(recorder)?;
    // The recorder's CPU from here on: its start (a node, a master's answers) is not a
    // cost per message.
    std::thread::sleep(Duration::from_secs(2));
    let cpu_before = cpu_seconds(recorder.pid());
    let governed = !row.ends_with("ungoverned");
    let publisher = peers.publisher("udpros", a, topic, (load.size, load.rate, count), governed);
    let publisher = spawn(publisher)?;
    let limit = Duration::from_secs_f64(60.0 + count as f64 / load.rate);
    let pub_line = publisher
        .wait_line("PUB", limit)
        .ok_or("the publisher did not finish")?;
    let sent = fields(&pub_line).get("sent").map_or(count, |s| *s as u64);
    // What a TCP link still carries arrives within a few seconds on these links.
    std::thread::sleep(Duration::from_secs(3));
    let cpu = cpu_seconds(recorder.pid())
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    // SAFETY: a signal to the child this bench started; both recorders close their file
    // on SIGINT.
    unsafe { libc::kill(recorder.pid() as i32, libc::SIGINT) };
    let closed = Instant::now();
    while std::fs::metadata(&file).is_err() && closed.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(recorder);
    let (kept, mut ages_ms) = read_back(&file, topic)?;
    let _ = std::fs::remove_file(&file);
    ages_ms.sort_by(f64::total_cmp);
    Ok(Cell {
        load: load.what,
        loss: load.loss,
        row,
        sent,
        kept,
        ages_ms,
        cpu_us: cpu.filter(|_| kept > 0).map(|s| s * 1e6 / kept as f64),
    })
}

/// User and system CPU seconds of a live process, from `/proc`.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (per_second > 0.0).then(|| ticks / per_second)
}

/// Messages of `topic` in the bag, and each one's age when recorded (ms): the bag's time
/// minus the header stamp the bench publisher wrote.
fn read_back(file: &Path, topic: &str) -> Result<(u64, Vec<f64>), String> {
    let opened = std::fs::File::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let items = udpros_record::read_recording(std::io::BufReader::new(opened), Limits::default())
        .map_err(|e| e.to_string())?;
    let mut ours = std::collections::HashSet::new();
    let mut ages = Vec::new();
    for item in items {
        match item.map_err(|e| format!("{}: {e}", file.display()))? {
            Item::Connection { id, connection } if connection.topic == topic => {
                ours.insert(id);
            }
            Item::Message {
                connection,
                time_ns,
                data,
            } if ours.contains(&connection) => {
                if let Some(stamp) = crate::topic::header_stamp_ns(&data) {
                    ages.push((time_ns as f64 - stamp as f64) / 1e6);
                }
            }
            _ => {}
        }
    }
    Ok((ages.len() as u64, ages))
}

fn print_table(cells: &[Cell]) {
    if cells.is_empty() {
        return;
    }
    println!("\nS11, the recorder: udpros record and rosbag record on host B of the lossy link\n");
    println!("| load | loss | recorder | kept | age p50 ms | age p99 ms | CPU µs/msg |");
    println!("|---|---:|---|---:|---:|---:|---:|");
    for c in cells {
        let [p50, p99] = age_cells(&c.ages_ms);
        println!(
            "| {} | {} | {} | {}/{} ({:.2} %) | {} | {} | {} |",
            c.load,
            c.loss,
            c.row,
            c.kept,
            c.sent,
            100.0 * c.kept as f64 / c.sent.max(1) as f64,
            p50,
            p99,
            cell(c.cpu_us, 1),
        );
    }
}
