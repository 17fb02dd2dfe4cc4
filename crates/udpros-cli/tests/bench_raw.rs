//! `udpros bench raw-receiver`: the raw UDP fan-out reference's receiver in a process of its
//! own reads stamps sent from another process, skips datagrams that carry none, and dumps
//! one latency per message.

use udpros_testkit as common;

use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

/// `CLOCK_MONOTONIC` in nanoseconds, the clock the raw reference stamps with.
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

#[test]
fn a_raw_receiver_process_measures_stamps_from_another_process() {
    let dir = std::env::temp_dir().join(format!("udpros_bench_raw_{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let dump = dir.join("receiver.txt");
    let count = 20u64;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.args(["bench", "raw-receiver", "--size", "1000", "--count"])
        .arg(count.to_string())
        .arg("--dump")
        .arg(&dump);
    let (_receiver, mut lines) = common::spawn_lines(cmd);
    let ready = lines
        .wait_for(Duration::from_secs(30), |l| l.starts_with("READY port="))
        .expect("the receiver says where it listens");
    let port: u16 = ready["READY port=".len()..].parse().expect("a port");

    let link = UdpSocket::bind("127.0.0.1:0").expect("bind");
    link.connect(("127.0.0.1", port)).expect("connect");
    // Too short to carry a stamp: skipped, not a message.
    link.send(&[1, 2, 3]).expect("send");
    let mut datagram = vec![0x5au8; 1000];
    for seq in 0..count {
        datagram[..8].copy_from_slice(&seq.to_le_bytes());
        datagram[8..16].copy_from_slice(&monotonic_ns().to_le_bytes());
        link.send(&datagram).expect("send");
        std::thread::sleep(Duration::from_millis(1));
    }

    let done = lines
        .wait_for(Duration::from_secs(30), |l| l.starts_with("RAW"))
        .expect("the receiver ends after the last message");
    assert_eq!(done, format!("RAW received={count}"));
    let text = std::fs::read_to_string(&dump).expect("the dump");
    let rows: Vec<(u64, f64)> = text
        .lines()
        .map(|l| {
            let (seq, us) = l.split_once(' ').expect("seq latency");
            (seq.parse().expect("seq"), us.parse().expect("latency"))
        })
        .collect();
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        (0..count).collect::<Vec<_>>()
    );
    // One clock for both processes: a latency is positive and far below a second.
    assert!(rows.iter().all(|&(_, us)| us > 0.0 && us < 1e6), "{rows:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
