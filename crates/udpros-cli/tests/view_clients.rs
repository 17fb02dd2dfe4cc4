//! The demo's view against the clients operators use: Foxglove's own npm packages (its
//! WebSocket client and ROS1 decoder) under Node.js, and the console page in headless
//! Chromium. Both are installed by `.ci/run`; with UDPROS_REQUIRE_INTEROP=1 a missing one
//! is a failure.

use udpros_testkit as common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The demo, running on its own master and a free view port, and its view's address
/// (`host:port`).
struct Demo {
    _child: common::Child,
    address: String,
    /// Its master.
    master: String,
}

fn start_demo() -> Demo {
    let port = common::free_port();
    let master = format!("http://127.0.0.1:{port}/");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
    cmd.args(["demo", "--plain", "--view-port", "0", "--duration", "120"]);
    common::ros_env(&mut cmd, &master);
    cmd.stdout(Stdio::piped());
    let (child, mut lines) = common::spawn_lines(cmd);
    let line = lines
        .wait_for(Duration::from_secs(30), |l| l.contains("ws://"))
        .unwrap_or_else(|| panic!("the demo names no view address: {:?}", lines.seen));
    let address = line
        .rsplit("ws://")
        .next()
        .map(|a| a.trim().to_string())
        .unwrap();
    Demo {
        _child: child,
        address,
        master,
    }
}

/// The Node.js test's folder, if Node and the test's packages are installed.
fn node_test() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../udpros-view/node-test");
    let node = Command::new("node").arg("--version").output();
    let ready = node.is_ok_and(|o| o.status.success())
        && dir.join("node_modules/@foxglove/ws-protocol").is_dir();
    ready.then_some(dir)
}

/// Debian's chromium: UDPROS_CHROMIUM, or `chromium` on the PATH.
fn chromium() -> Option<String> {
    let program = std::env::var("UDPROS_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let answers = Command::new(&program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    answers.then_some(program)
}

/// Runs one of the Node test files against `demo`, with `env`; asserts that all of its
/// `tests` ran and passed.
fn run_node_test(dir: &Path, file: &str, demo: &Demo, env: &[(&str, &str)], tests: usize) {
    let out = Command::new("node")
        .arg("--test")
        .arg(file)
        .current_dir(dir)
        .env("UDPROS_VIEW_URL", format!("ws://{}", demo.address))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Node's runner ends with its counts: every test ran and passed.
    assert!(report.contains(&format!("# pass {tests}")), "{report}");
    assert!(report.contains("# fail 0"), "{report}");
}

#[test]
fn foxglove_s_client_and_decoder_read_the_demo_s_topics() {
    let Some(dir) = node_test() else {
        common::skip_or_fail(
            "node, or the Node test's packages (npm ci in crates/udpros-view/node-test)",
        );
        return;
    };
    let demo = start_demo();
    run_node_test(&dir, "view.test.js", &demo, &[], 4);
}

/// The console page in headless chromium shows the demo live (the checks are in
/// `console.test.js`); its screenshot is left in the target folder.
#[test]
fn the_console_page_is_live_in_headless_chromium() {
    let (Some(dir), Some(chromium)) = (node_test(), chromium()) else {
        common::skip_or_fail("node with the Node test's packages, or chromium");
        return;
    };
    let demo = start_demo();
    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("udpros-console.png");
    let _ = std::fs::remove_file(&screenshot);
    run_node_test(
        &dir,
        "console.test.js",
        &demo,
        &[
            ("UDPROS_CHROMIUM", &chromium),
            ("UDPROS_SCREENSHOT", &screenshot.to_string_lossy()),
        ],
        1,
    );
    let png = std::fs::read(&screenshot).expect("the test saved a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 50_000,
        "{} bytes",
        png.len()
    );
    println!("screenshot: {}", screenshot.display());
}

/// The console draws the ROS1 ping360_sonar driver's drop-in (`ping360_node`, SonarEcho)
/// and the Ping1D's sensor_msgs/Range once they are picked (the checks are in
/// `console_sources.test.js`).
#[test]
fn the_console_draws_the_ping360_drop_in_and_a_range_picked_by_hand() {
    let (Some(dir), Some(chromium)) = (node_test(), chromium()) else {
        common::skip_or_fail("node with the Node test's packages, or chromium");
        return;
    };
    let demo = start_demo();
    // The drop-in, emulated, on the demo's master, in a runtime of its own.
    let master = demo.master.clone();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _drop_in = runtime.spawn(async move {
        use udpros_bridges::ping::ping360_sonar::{run, Profile};
        use udpros_bridges::ping::{link::LinkSpec, DeviceKind};
        let node = udpros::node::Node::new(
            "ping360_node",
            [format!("__master:={master}"), "__ip:=127.0.0.1".into()],
        )
        .await
        .unwrap();
        let mut profile = Profile::new(LinkSpec::Sim(DeviceKind::Ping360));
        profile.debug = false;
        let _ = run(node, profile).await;
    });
    run_node_test(
        &dir,
        "console_sources.test.js",
        &demo,
        &[("UDPROS_CHROMIUM", &chromium)],
        1,
    );
}
