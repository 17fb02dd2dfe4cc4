//! `--help` on the bridges: printed without a master (nothing touches the network), exit
//! 0, and naming every `~` parameter, topic and service the node's source reads or
//! advertises; an unknown `--option` is refused in one line with exit status 2.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs a bridge against a master that does not exist; it must finish within 5 s.
fn run(program: &str, args: &[&str]) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .env("ROS_MASTER_URI", "http://127.0.0.1:9/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("{program} {args:?} still running after 5 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Every `"~name"` literal in a node's source: its parameters, topics and services.
fn private_names(source: &str) -> Vec<String> {
    source
        .split("\"~")
        .skip(1)
        .filter_map(|rest| {
            // A name literal: word characters and slashes, then the closing quote.
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '/'))?;
            (rest[end..].starts_with('"')).then(|| &rest[..end])
        })
        .filter(|name| !name.is_empty() && !name.ends_with('/'))
        .map(str::to_string)
        .collect()
}

fn check(program: &str, source: &str) {
    for flag in ["--help", "-h"] {
        let out = run(program, &[flag]);
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{program} {flag}: {:?}", out.status);
        assert!(
            help.contains("Parameters") && help.contains("Topics") && help.contains("Services")
        );
        let names = private_names(source);
        assert!(names.len() > 10, "{names:?}");
        for name in names {
            assert!(
                help.contains(&name),
                "{program} --help does not mention {name}"
            );
        }
    }
    let out = run(program, &["--bogus"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{program} --bogus: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--bogus") && err.contains("--help"), "{err}");
}

#[test]
fn ping_sonar_help_names_everything_and_needs_no_master() {
    check(
        env!("CARGO_BIN_EXE_ping_sonar"),
        concat!(
            include_str!("../src/ping/node.rs"),
            include_str!("../src/ping/publish.rs")
        ),
    );
}

#[test]
fn mavlink_bridge_help_names_everything_and_needs_no_master() {
    check(
        env!("CARGO_BIN_EXE_mavlink_bridge"),
        concat!(
            include_str!("../src/mavlink/node.rs"),
            include_str!("../src/mavlink/publish.rs")
        ),
    );
}

#[test]
fn ping360_node_help_names_everything_and_needs_no_master() {
    check(
        env!("CARGO_BIN_EXE_ping360_node"),
        include_str!("../src/ping/ping360_sonar.rs"),
    );
    // Its topics are absolute, as the driver's: those must be named too.
    let help =
        String::from_utf8(run(env!("CARGO_BIN_EXE_ping360_node"), &["--help"]).stdout).unwrap();
    for topic in ["sonar/images", "sonar/data", "sonar/scan", "emulated_sonar"] {
        assert!(help.contains(topic), "{topic}");
    }
}
