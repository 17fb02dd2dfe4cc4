//! `udpros proxy`: the fault proxy from the command line, against an echo server on loopback.

use udpros_testkit as common;

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// An echo server on loopback; returns its address.
fn echo() -> std::net::SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(&buf[..n], from);
        }
    });
    addr
}

fn proxy(args: &[&str]) -> (common::Child, common::Lines, std::net::SocketAddr) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.arg("proxy").args(args).stdout(Stdio::piped());
    let (child, mut lines) = common::spawn_lines(cmd);
    let ready = lines
        .wait_for(Duration::from_secs(20), |l| l.contains("listening on"))
        .expect("the proxy starts");
    let addr = ready
        .split_whitespace()
        .nth(4)
        .unwrap()
        .trim_end_matches(',')
        .parse()
        .unwrap();
    (child, lines, addr)
}

#[test]
fn delays_each_direction_and_reports_what_it_dropped() {
    let upstream = echo().to_string();
    let (_child, mut lines, addr) = proxy(&[
        "--upstream",
        &upstream,
        "--delay-up",
        "30",
        "--delay-down",
        "20",
        "--duration",
        "3",
    ]);
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let sent = Instant::now();
    client.send_to(b"hello", addr).unwrap();
    let mut buf = [0u8; 64];
    let n = client.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"hello");
    assert!(
        sent.elapsed() >= Duration::from_millis(50),
        "{:?}",
        sent.elapsed()
    );
    let summary = lines
        .wait_for(Duration::from_secs(10), |l| l.starts_with("up:"))
        .expect("a summary when --duration ends");
    assert_eq!(
        summary,
        "up: 1 datagrams, 0 dropped; down: 1 datagrams, 0 dropped"
    );
}

#[test]
fn total_loss_upstream_answers_nothing() {
    let upstream = echo().to_string();
    let (_child, mut lines, addr) =
        proxy(&["--upstream", &upstream, "--loss-up", "1", "--duration", "2"]);
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    for _ in 0..5 {
        client.send_to(b"lost", addr).unwrap();
    }
    let mut buf = [0u8; 64];
    assert!(client.recv(&mut buf).is_err(), "nothing comes back");
    let summary = lines
        .wait_for(Duration::from_secs(10), |l| l.starts_with("up:"))
        .unwrap();
    assert_eq!(
        summary,
        "up: 5 datagrams, 5 dropped; down: 0 datagrams, 0 dropped"
    );
}

#[test]
fn a_bad_probability_is_one_clear_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_udpros"))
        .args(["proxy", "--upstream", "127.0.0.1:9", "--loss", "1.5"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        "udpros: --loss 1.5 is not a probability between 0 and 1"
    );
}

#[test]
fn needs_an_upstream_or_transparent_and_not_both() {
    let udpros = env!("CARGO_BIN_EXE_udpros");
    for args in [
        vec!["proxy"],
        vec!["proxy", "--transparent", "--upstream", "127.0.0.1:9"],
    ] {
        let out = Command::new(udpros).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: a usage error");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--upstream") || stderr.contains("--transparent"),
            "{args:?}: {stderr}"
        );
    }
}
