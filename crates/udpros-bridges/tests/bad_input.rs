//! Bad values from a user: one clear line on stderr and exit status 1 within 5 s, never a
//! panic or a silent hang; and a device that never answers is said once, not forever.

use udpros_testkit as common;

use std::process::{Command, Stdio};
use std::time::Duration;
use udpros::master::Master;

/// `program ARG` as a node on `master`, logging warnings to a pipe.
fn run_with_warnings(program: &str, arg: &str, master: &str) -> common::Child {
    common::Child(
        Command::new(program)
            .arg(arg)
            .env("ROS_MASTER_URI", master)
            .env("ROS_IP", "127.0.0.1")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Ends `child` and returns what it wrote on stderr.
fn stderr_until_now(mut child: common::Child) -> String {
    let _ = child.0.kill();
    let out = std::mem::replace(&mut child.0, Command::new("true").spawn().unwrap())
        .wait_with_output()
        .unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_are_one_line_and_exit_1() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let cases: Vec<common::BadCase> = vec![
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_speed_of_sound:=0"],
            "~speed_of_sound",
        ),
        (env!("CARGO_BIN_EXE_ping_sonar"), vec!["_fec:=2"], "~fec"),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_governor:=sometimes"],
            "~governor",
        ),
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_max_rate:=-5"],
            "~max_rate",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_max_rate:=10"],
            "~max_rate",
        ),
        (
            env!("CARGO_BIN_EXE_ping360_node"),
            vec!["_max_rate:=fast"],
            "~max_rate",
        ),
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_max_rate_per_host:=1e12"],
            "~max_rate_per_host",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_max_rate_per_host:=-1"],
            "~max_rate_per_host",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_fec:=adaptive:NaN"],
            "~fec",
        ),
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_range:=-1"],
            "~range",
        ),
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_min_confidence:=5"],
            "~min_confidence",
        ),
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_ping_interval:=0"],
            "~ping_interval",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_timeout:=0"],
            "~timeout",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_fit/quantile:=5"],
            "~fit/quantile",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_timesync_rate:=-1"],
            "~timesync_rate",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_sim/jitter:=.nan"],
            "~sim/jitter",
        ),
        // A subnormal rate is in [0, 1000], but its period is infinite (issue 33).
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_ping_rate:=5.0e-324"],
            "~ping_rate",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_timesync_rate:=1.0e-300"],
            "~timesync_rate",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_time/timesync_alpha_initial:=.nan"],
            "~time/timesync_alpha_initial",
        ),
        (
            env!("CARGO_BIN_EXE_mavlink_bridge"),
            vec!["_sim/drift_ppm:=.inf"],
            "~sim/drift_ppm",
        ),
        // A misspelt parameter is refused by name, not ignored.
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_rnage:=30"],
            "~rnage is not a parameter of ping_sonar",
        ),
        // A Ping360's gain is 0-2 (or low, normal, high): 5 is refused, not clamped.
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_device:=sim:ping360", "_gain:=5"],
            "~gain 5 is out of range: expected a Ping360's",
        ),
        (
            env!("CARGO_BIN_EXE_ping_sonar"),
            vec!["_device:=sim:ping1d", "_gain:=high"],
            "names a Ping360's gain",
        ),
    ];
    tokio::task::spawn_blocking(move || common::assert_each_fails_in_one_line(&uri, cases))
        .await
        .unwrap();
}

/// A serial device that does not exist: diagnostics say so every second, and the console
/// hears of it once, not four times a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_device_is_said_once_and_shown_in_diagnostics() {
    use udpros::msgs::diagnostic_msgs::DiagnosticArray;
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let listener = common::node(&uri, "diag_listener").await;
    let mut diagnostics = listener
        .subscribe::<DiagnosticArray>("/diagnostics", Default::default())
        .await
        .unwrap();
    for device in [
        "serial:/dev/udpros-no-such-device:115200",
        "udp:127.0.0.1:9",
    ] {
        let sonar = run_with_warnings(
            env!("CARGO_BIN_EXE_ping_sonar"),
            &format!("_device:={device}"),
            &uri,
        );
        let got = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let array = diagnostics.recv().await?;
                let values: Vec<(String, String)> = array
                    .status
                    .iter()
                    .flat_map(|s| s.values.iter().map(|kv| (kv.key.clone(), kv.value.clone())))
                    .collect();
                if values.iter().any(|(_, v)| v == device) {
                    return Some(values);
                }
            }
        })
        .await
        .ok()
        .flatten()
        .expect("diagnostics while the device is missing");
        assert!(
            got.contains(&("connected".into(), "false".into())),
            "{got:?}"
        );
        assert!(
            got.contains(&("device type".into(), "not identified".into())),
            "{got:?}"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        let stderr = stderr_until_now(sonar);
        let warnings = stderr.lines().filter(|l| l.contains("WARN")).count();
        println!("{device}: {warnings} warnings in about 4 s:\n{stderr}");
        assert!((1..=2).contains(&warnings), "{device}: {stderr}");
        assert!(
            stderr.lines().all(|l| l.matches(device).count() <= 1),
            "the device is named once per line: {stderr}"
        );
    }
    listener.shutdown().await;
}

/// mavlink_bridge on a serial port that does not exist: one warning that names the URL
/// once and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_serial_autopilot_is_named_once_per_line() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let url = "serial:/dev/udpros-no-such-device:57600";
    let bridge = run_with_warnings(
        env!("CARGO_BIN_EXE_mavlink_bridge"),
        &format!("_fcu_url:={url}"),
        master.uri(),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stderr = stderr_until_now(bridge);
    let warning = stderr
        .lines()
        .find(|l| l.contains("WARN"))
        .unwrap_or_else(|| panic!("no warning: {stderr}"));
    assert_eq!(warning.matches(url).count(), 1, "{warning}");
    assert!(warning.contains("No such file"), "{warning}");
}

/// Every parameter of both bridges given a value of the wrong type: one line that names
/// the parameter, says what it must be and shows what was given (never Rust's debug text).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_parameter_of_the_wrong_type_is_one_line_saying_what_it_must_be() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let ping = env!("CARGO_BIN_EXE_ping_sonar");
    let mavlink = env!("CARGO_BIN_EXE_mavlink_bridge");
    // (program, parameters, a value of the wrong type for them, how that value is shown)
    let groups: [(&str, &[&str], &str, &str); 6] = [
        (
            ping,
            &[
                "speed_of_sound",
                "range",
                "gain",
                "ping_interval",
                "min_confidence",
                "field_of_view",
                "transmit_frequency",
                "start_angle",
                "stop_angle",
                "num_steps",
                "scan_threshold",
                "image_size",
                "image_rate",
            ],
            "abc",
            "the string 'abc'",
        ),
        (
            ping,
            &["mode_auto", "use_auto_transmit"],
            "1.5",
            "the number 1.5",
        ),
        (
            ping,
            &["device", "device_type", "dialect", "frame_id"],
            "5",
            "the integer 5",
        ),
        (
            mavlink,
            &[
                "system_id",
                "component_id",
                "target_system_id",
                "target_component_id",
                "ping_rate",
                "timesync_rate",
                "system_time_rate",
                "timeout",
                "time/timesync_alpha_initial",
                "time/timesync_beta_initial",
                "time/timesync_alpha_final",
                "time/timesync_beta_final",
                "time/convergence_window",
                "time/max_rtt_sample",
                "time/max_deviation_sample",
                "time/max_consecutive_high_rtt",
                "time/max_consecutive_high_deviation",
                "fit/window",
                "fit/quantile",
                "fit/min_rtt_gate",
                "sim/jitter",
                "sim/loss",
                "sim/clock_offset",
                "sim/drift_ppm",
                "sim/delay_up",
                "sim/delay_down",
                "sim/seed",
            ],
            "abc",
            "the string 'abc'",
        ),
        (
            mavlink,
            &["respond_timesync", "sim/answer_ping", "sim/mavlink1"],
            "1.5",
            "the number 1.5",
        ),
        (
            mavlink,
            &[
                "fcu_url",
                "timesync_estimator",
                "time/time_ref_source",
                "sim/timesync",
            ],
            "5",
            "the integer 5",
        ),
    ];
    tokio::task::spawn_blocking(move || {
        let mut i = 0;
        for (program, names, value, shown) in groups {
            for name in names {
                i += 1;
                let args = vec![
                    format!("_{name}:={value}"),
                    format!("__name:=wrong_type_{i}"),
                ];
                let (out, _) = common::run_briefly(program, &uri, &args);
                let err = String::from_utf8_lossy(&out.stderr);
                let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
                assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
                assert_eq!(lines.len(), 1, "{args:?}: {err}");
                let line = lines[0];
                assert!(
                    line.contains(&format!("/{name} must be")) && line.contains(shown),
                    "{args:?}: {line}"
                );
                assert!(
                    !line.contains("String(") && !line.contains("Double("),
                    "{line}"
                );
            }
        }
    })
    .await
    .unwrap();
}

/// A Ping360's gain by the name its dynamic_reconfigure choice has, and a device given as a
/// bare path, are taken at start (the node runs until stopped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gain_by_name_and_a_bare_device_path_are_taken() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    tokio::task::spawn_blocking(move || {
        for (i, args) in [
            vec!["_device:=sim:ping360", "_gain:=high"],
            vec!["_device:=/dev/udpros-no-such-tty"],
        ]
        .into_iter()
        .enumerate()
        {
            let mut args: Vec<String> = args.into_iter().map(String::from).collect();
            args.push(format!("__name:=taken_{i}"));
            let (out, took) = common::run_briefly(env!("CARGO_BIN_EXE_ping_sonar"), &uri, &args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(took >= Duration::from_secs(4), "{args:?} ended: {err}");
            assert!(
                !err.contains("gain") && !err.contains("is not"),
                "{args:?}: {err}"
            );
        }
    })
    .await
    .unwrap();
}

/// An autopilot that never answers on a UDP link (which is "up" with nobody there) is
/// said, as a dead Ping device is, in a warning naming the link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_autopilot_is_said() {
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    // Nobody listens on the discard port's address, so nobody answers.
    let url = "udp://127.0.0.1:0@127.0.0.1:9";
    let bridge = run_with_warnings(
        env!("CARGO_BIN_EXE_mavlink_bridge"),
        &format!("_fcu_url:={url}"),
        master.uri(),
    );
    tokio::time::sleep(Duration::from_secs(8)).await;
    let stderr = stderr_until_now(bridge);
    let warning = stderr
        .lines()
        .find(|l| l.contains("no MAVLink message from the autopilot"))
        .unwrap_or_else(|| panic!("silence not said: {stderr}"));
    assert!(warning.contains(url), "{warning}");
}
