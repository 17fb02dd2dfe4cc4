//! `udpros demo`: the main job on embedded defaults, and the same demo joining a stock
//! rosmaster that stock tools can inspect; both end cleanly with `--duration`.

use udpros_testkit as common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn demo(master_uri: &str, seconds: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.args(["demo", "--plain", "--view-port", "0", "--duration", seconds]);
    common::ros_env(&mut cmd, master_uri);
    cmd
}

/// The value of `key=` in a status line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
}

#[test]
fn on_embedded_defaults_it_shows_sonar_latency_and_offset_then_stops() {
    let port = common::free_port();
    let uri = format!("http://127.0.0.1:{port}/");
    let started = Instant::now();
    let out = demo(&uri, "8").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("embedded master"), "{stdout}");
    assert!(
        stdout.contains("udpros demo: console: http://127.0.0.1:")
            && stdout.contains("ws://127.0.0.1:"),
        "the demo says where its console is: {stdout}"
    );
    let last = stdout
        .lines()
        .rfind(|l| l.starts_with("t="))
        .unwrap_or_else(|| panic!("no status line: {stdout}"));
    let depth: f64 = field(last, "depth")
        .unwrap()
        .trim_end_matches('m')
        .parse()
        .unwrap();
    assert!(depth > 0.0 && depth < 100.0, "{last}");
    assert!(field(last, "rtt").unwrap() != "-", "{last}");
    assert!(field(last, "offset").unwrap().starts_with('+'), "{last}");
    let rates: Vec<f64> = field(last, "rates")
        .unwrap()
        .trim_end_matches("Hz")
        .split('/')
        .map(|r| r.parse().unwrap())
        .collect();
    assert!(rates.iter().all(|r| *r > 0.5), "every topic flows: {last}");
    let angle = field(last, "ping360_angle").unwrap();
    assert!(
        angle.ends_with("deg") && angle.trim_end_matches("deg").parse::<f64>().is_ok(),
        "{last}"
    );
    assert!(
        stdout.contains("counts from its boot"),
        "the offset's size is explained: {stdout}"
    );
    assert!(stdout.trim_end().ends_with("udpros demo: stopped"));
    assert!(started.elapsed() < Duration::from_secs(30));
    // The embedded master went with it.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn joins_a_running_rosmaster_that_stock_tools_see_and_leaves_it_clean() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let python = common::ros_python().unwrap();
    let mut cmd = demo(&uri, "12");
    cmd.stdout(Stdio::piped());
    let (mut child, mut lines) = common::spawn_lines(cmd);
    lines
        .wait_for(Duration::from_secs(30), |l| l.contains("existing master"))
        .expect("the demo uses the running master");
    lines
        .wait_for(Duration::from_secs(15), |l| {
            field(l, "depth").is_some_and(|d| d != "-")
        })
        .expect("sonar data");
    let echo = common::ros_tool(&python, "rostopic", &uri)
        .args(["echo", "-n", "1", "/ping1d/range"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&echo.stdout);
    assert!(
        text.contains("radiation_type: 0") && text.contains("range: "),
        "{text}"
    );
    let nodes = common::ros_tool(&python, "rosnode", &uri)
        .arg("list")
        .output()
        .unwrap();
    let nodes = String::from_utf8_lossy(&nodes.stdout);
    for name in ["/ping1d", "/ping360", "/mavlink_bridge", "/udpros_demo"] {
        assert!(nodes.lines().any(|l| l == name), "{name} in {nodes}");
    }
    assert!(child.0.wait().unwrap().success());
    // Nothing of the demo stays registered.
    let topics = common::ros_tool(&python, "rostopic", &uri)
        .arg("list")
        .output()
        .unwrap();
    let topics = String::from_utf8_lossy(&topics.stdout);
    assert!(
        !topics.contains("/ping1d") && !topics.contains("/mavlink_bridge"),
        "left behind: {topics}"
    );
}

/// SIGTERM (a service manager's stop) and SIGINT (Ctrl-C) each end the demo cleanly, its
/// embedded master with it. (Before: SIGTERM shut its nodes down, and the demo went on
/// printing frozen figures until `--duration`.)
#[test]
fn a_signal_ends_the_demo_and_its_master() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let port = common::free_port();
        let uri = format!("http://127.0.0.1:{port}/");
        let mut child = demo(&uri, "120")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
        // Up once a status line shows.
        assert!(
            lines
                .by_ref()
                .map_while(Result::ok)
                .any(|l| l.starts_with("t=")),
            "no status line"
        );
        unsafe { libc::kill(child.id() as i32, signal) };
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("signal {signal}: the demo did not end within 30 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "signal {signal}: {status}");
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        assert_eq!(
            rest.last().map(String::as_str),
            Some("udpros demo: stopped"),
            "{rest:?}"
        );
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    }
}
