//! `udpros ping`: `discover` on a network of namespaces (the broadcast never leaves them)
//! lists a simulated Ping360 with its address, MAC and firmware, or says in one line that
//! nothing answered; `record` drives a simulated device and writes a Ping Viewer log that
//! reads back whole; bad arguments are one line.

use udpros_testkit as common;

use common::netns::Network;
use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::Duration;
use udpros_bridges::ping::discovery;
use udpros_bridges::ping::log::LogReader;
use udpros_bridges::ping::{DeviceKind, Message};

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn discover_lists_a_ping360_with_its_firmware_and_says_when_none_answers() {
    let Some(net) = Network::new(&["topside", "sonar"], 1500) else {
        return;
    };
    let topside = net.host("topside");
    let discover = || {
        topside
            .command(env!("CARGO_BIN_EXE_udpros"))
            .args(["ping", "discover", "--wait", "2"])
            .output()
            .unwrap()
    };
    // Nothing there yet.
    let out = discover();
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success());
    assert_eq!(stdout, "");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no Ping360 answered discovery"), "{stderr}");

    let address = net.host("sonar").ipv4.parse().unwrap();
    let (_stop, stopped) = mpsc::channel::<()>();
    let _sonar = net
        .host("sonar")
        .spawn_inside(move || discovery::run_simulated(address, "02-00-00-00-00-07", stopped));
    let out = discover();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let fields: Vec<&str> = stdout.trim_end().split('\t').collect();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert_eq!(
        &fields[..3],
        [
            &net.host("sonar").ipv4,
            "02-00-00-00-00-07",
            "SONAR PING360"
        ]
    );
    assert!(
        fields[3].starts_with("firmware ") && fields[3].chars().any(|c| c.is_ascii_digit()),
        "{stdout}"
    );
}

#[test]
fn record_writes_a_log_of_a_simulated_ping1d_that_reads_back_whole() {
    let dir = std::env::temp_dir().join(format!("udpros-cli-ping-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ping1d.bin");
    let out = Command::new(env!("CARGO_BIN_EXE_udpros"))
        .args(["ping", "record", "sim:ping1d"])
        .arg(&file)
        .args(["--duration", "2"])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("frames written"), "{stderr}");
    let bytes = std::fs::read(&file).unwrap();
    let mut log = LogReader::new(&bytes[..]).unwrap();
    assert_eq!(log.header().unwrap().device(), Some(DeviceKind::Ping1d));
    let mut profiles = 0;
    let mut last = Duration::ZERO;
    while let Some(record) = log.next_record().unwrap() {
        assert!(record.at >= last, "times go forward");
        last = record.at;
        let f = &record.frame;
        let id = u16::from_le_bytes([f[4], f[5]]);
        let message = Message::decode(id, &f[8..f.len() - 2]).expect("every frame decodes");
        profiles += matches!(message, Message::Profile(_)) as u32;
    }
    assert_eq!(log.problem(), None);
    assert!(profiles >= 5, "{profiles} profiles in 2 s");
    assert!(last <= Duration::from_secs(3), "{last:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_ping_arguments_are_one_line() {
    for (args, says) in [
        (vec!["ping", "discover", "--wait", "-1"], "--wait"),
        (vec!["ping", "discover", "--wait", "0"], "--wait"),
        (
            vec!["ping", "record", "bogus:x", "/tmp/x.bin"],
            "device 'bogus:x'",
        ),
        (
            vec!["ping", "record", "sim:ping1d", "/nonexistent/dir/x.bin"],
            "/nonexistent/dir/x.bin",
        ),
        (
            vec![
                "ping",
                "record",
                "sim:ping1d",
                "/tmp/x.bin",
                "--duration",
                "NaN",
            ],
            "--duration",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_udpros"))
            .args(&args)
            .output()
            .unwrap();
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
