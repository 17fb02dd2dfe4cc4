//! `ping360_node` as a drop-in for the ROS1 `ping360_sonar` driver: its example launch file
//! with only `pkg` changed runs under Debian's roslaunch against a simulated Ping360 on
//! `/dev/ttyUSB0` (a pseudo terminal), and what the graph sees is what the driver gives it:
//! the same node, the same topics with the same types, the same services,
//! dynamic_reconfigure's sonar.cfg settings; `rostopic echo` decodes `sonar/data` with
//! classes genpy makes from the driver's own message definition. Its emulator switch plays
//! the simulated Ping360; what it does not support is refused by name.

use udpros_testkit as common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use udpros_bridges::ping::sim::serve_stream;
use udpros_bridges::ping::{DeviceKind, Dialect};

/// The driver's message, field for field as its `msg/SonarEcho.msg` declares it (the
/// md5sum depends on these lines only).
const THEIR_SONAR_ECHO: &str = "Header header
float32 angle
uint8 gain
uint16 number_of_samples
uint16 transmit_frequency
uint16 speed_of_sound
uint8 range
uint8[] intensities
";

/// The driver's example launch file (`launch/example.launch`, 1.4): a static transform and
/// the node with its parameters, under `pkg`, with the emulator switch as given.
fn their_example_launch(pkg: &str, emulated: &str) -> String {
    format!(
        r#"<launch>
    <node pkg="tf" type="static_transform_publisher" name="transform_sonar_frame" args="0 0 0 0 0 0 1 map sonar_frame 10" />
    <env name="emulated_sonar" value="{emulated}" />
    <node pkg="{pkg}" type="ping360_node" name="ping360_node" output="screen">
        <param name="device" value="/dev/ttyUSB0"/>
        <param name="baudrate" value="115200"/>
        <param name="debug" value="False"/>
        <param name="imgSize" value="500"/>
        <param name="gain" value="0"/>
        <param name="step" value="1"/>
        <param name="numberOfSamples" value="200"/>
        <param name="transmitFrequency" value="740"/>
        <param name="sonarRange" value="10"/>
        <param name="speedOfSound" value="1500"/>
        <param name="queueSize" value="1"/>
        <param name="threshold" value="100"/>
        <param name="enableImageTopic" value="True"/>
        <param name="enableScanTopic" value="True"/>
        <param name="enableDataTopic" value="True"/>
        <param name="maxAngle" value="400"/>
        <param name="minAngle" value="0"/>
        <param name="oscillate" value="True"/>
    </node>
</launch>
"#
    )
}

/// What the driver's node (rospy) publishes and serves, as `rosnode info` lists them.
const THEIR_PUBLICATIONS: &[&str] = &[
    "/ping360_node/parameter_descriptions [dynamic_reconfigure/ConfigDescription]",
    "/ping360_node/parameter_updates [dynamic_reconfigure/Config]",
    "/ping360_node/sonar/data [ping360_sonar/SonarEcho]",
    "/ping360_node/sonar/images [sensor_msgs/Image]",
    "/ping360_node/sonar/scan [sensor_msgs/LaserScan]",
    "/rosout [rosgraph_msgs/Log]",
];
const THEIR_SERVICES: &[&str] = &[
    "/ping360_node/get_loggers",
    "/ping360_node/set_logger_level",
    "/ping360_node/set_parameters",
];

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("udpros-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The lines of one section (`Publications:`, `Services:`) of `rosnode info`, sorted.
fn section(info: &str, title: &str) -> Vec<String> {
    let mut lines: Vec<String> = info
        .lines()
        .skip_while(|l| !l.starts_with(title))
        .skip(1)
        .take_while(|l| l.starts_with(" * "))
        .map(|l| l.trim_start_matches(" * ").to_string())
        .collect();
    lines.sort();
    lines
}

/// Runs `launch` under roslaunch on a fresh rosmaster with the udpros package and the
/// driver's message classes; checks the graph against the driver's; returns the
/// `rostopic echo` of one `sonar/data` message.
fn launch_and_compare(dir: &Path, launch: &str) -> String {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return String::new();
    };
    let python = common::ros_python().unwrap();
    common::ros_package(
        dir,
        "udpros",
        &[("ping360_node", env!("CARGO_BIN_EXE_ping360_node"))],
    );
    let classes = dir.join("python");
    common::genpy_messages(
        &python,
        &classes,
        "ping360_sonar",
        &[("SonarEcho", THEIR_SONAR_ECHO)],
    );
    let file = dir.join("example.launch");
    std::fs::write(&file, launch).unwrap();
    let package_path = format!("{}:/usr/share", dir.display());
    let mut cmd = common::ros_tool(&python, "roslaunch", &uri);
    cmd.arg(&file)
        .env("ROS_PACKAGE_PATH", &package_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let (launched, _lines) = common::spawn_lines(cmd);
    let mut launched = common::Launched(launched);
    let tool = |name: &str, args: &[&str]| -> String {
        let out = common::ros_tool(&python, name, &uri)
            .args(args)
            .env("ROS_PACKAGE_PATH", &package_path)
            .env("PYTHONPATH", &classes)
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // `rostopic echo` with the driver's own class: the first message decoded.
    let echo = tool(
        "rostopic",
        &["echo", "-n", "1", "--noarr", "/ping360_node/sonar/data"],
    );
    let info = tool("rosnode", &["info", "/ping360_node"]);
    assert_eq!(
        section(&info, "Publications:"),
        THEIR_PUBLICATIONS,
        "{info}"
    );
    assert_eq!(section(&info, "Services:"), THEIR_SERVICES, "{info}");
    let topics = tool("rostopic", &["list"]);
    for topic in [
        "/ping360_node/sonar/images",
        "/ping360_node/sonar/data",
        "/ping360_node/sonar/scan",
        "/tf",
    ] {
        assert!(topics.lines().any(|l| l == topic), "{topic} in {topics}");
    }
    for (topic, kind) in [
        ("/ping360_node/sonar/images", "sensor_msgs/Image"),
        ("/ping360_node/sonar/data", "ping360_sonar/SonarEcho"),
        ("/ping360_node/sonar/scan", "sensor_msgs/LaserScan"),
    ] {
        assert_eq!(tool("rostopic", &["type", topic]).trim(), kind);
    }
    // One beam a step, over the sector the parameters give.
    let scan = tool("rostopic", &["echo", "-n", "1", "/ping360_node/sonar/scan"]);
    assert!(scan.contains("frame_id: \"sonar_frame\""), "{scan}");
    assert!(scan.contains("angle_max: 6.28318"), "{scan}");
    assert!(scan.contains("range_max: 10.0"), "{scan}");
    let ranges = scan
        .lines()
        .find(|l| l.starts_with("ranges:"))
        .unwrap_or_default();
    assert_eq!(ranges.matches(',').count(), 0, "one beam: {ranges}");
    // sonar.cfg's settings, as dynparam reads them.
    let dynparam = common::Dynparam::new(&python, &uri, "ping360-compat");
    let settings = dynparam.run(&["get", "/ping360_node"]);
    for name in [
        "'debug'",
        "'range'",
        "'gain'",
        "'numberOfSamples': 200",
        "'transmitFrequency': 740",
        "'speedOfSound'",
        "'step'",
        "'queueSize'",
        "'threshold': 100",
    ] {
        assert!(settings.contains(name), "{name} in {settings}");
    }
    assert!(launched.stop(), "roslaunch stops with its nodes");
    echo
}

/// `rostopic echo` of a SonarEcho: the settings the launch file gave.
fn assert_sonar_echo(echo: &str) {
    assert!(echo.contains("frame_id: \"sonar_frame\""), "{echo}");
    assert!(echo.contains("number_of_samples: 200"), "{echo}");
    assert!(echo.contains("transmit_frequency: 740"), "{echo}");
    assert!(echo.contains("speed_of_sound: 1500"), "{echo}");
    assert!(echo.contains("range: 10"), "{echo}");
    assert!(echo.contains("angle: "), "{echo}");
}

#[test]
fn their_example_launch_with_only_pkg_changed_runs_on_a_simulated_ping360_at_dev_ttyusb0() {
    if Command::new("socat").arg("-V").output().is_err() {
        return common::skip_or_fail("socat");
    }
    let port = Path::new("/dev/ttyUSB0");
    if port.exists() {
        // A real adapter is plugged in here: the test will not take it over.
        return common::skip_or_fail("a free /dev/ttyUSB0 (one exists on this machine)");
    }
    let dir = scratch("ping360-compat");
    let device_side = dir.join("ping360");
    // /dev/ttyUSB0 is one end of a pseudo terminal, the simulated Ping360 the other;
    // socat removes the link when it ends.
    let mut socat = Command::new("socat");
    socat
        .arg(format!("pty,raw,echo=0,link={}", device_side.display()))
        .arg(format!("pty,raw,echo=0,link={}", port.display()));
    let _socat = common::Child(socat.spawn().unwrap());
    // Killed, socat cannot remove its link: the link goes when the test ends, however.
    let _unlink = Unlink(port.to_path_buf());
    assert!(common::wait_for(Duration::from_secs(10), || {
        device_side.exists() && port.exists()
    }));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _in_runtime = rt.enter();
    let serial =
        tokio_serial::SerialStream::open(&tokio_serial::new(device_side.to_str().unwrap(), 115200))
            .unwrap();
    let _device = rt.spawn(serve_stream(serial, DeviceKind::Ping360, Dialect::Current));
    let echo = launch_and_compare(&dir, &their_example_launch("udpros", "false"));
    assert_sonar_echo(&echo);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Removes a link this test made, when the test ends (passed or not).
struct Unlink(PathBuf);

impl Drop for Unlink {
    fn drop(&mut self) {
        if self.0.is_symlink() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[test]
fn their_emulator_switch_plays_the_simulated_ping360() {
    let dir = scratch("ping360-emulated");
    let echo = launch_and_compare(&dir, &their_example_launch("udpros", "true"));
    assert_sonar_echo(&echo);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_driver_would_not_run_with_or_does_not_have_is_refused_by_name() {
    let master = udpros::master::Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .unwrap();
    let uri = master.uri().to_string();
    let cases: Vec<common::BadCase> = vec![
        (
            env!("CARGO_BIN_EXE_ping360_node"),
            vec!["_fallback_emulated:=true"],
            "~fallback_emulated is not a parameter of ping360_sonar",
        ),
        (
            env!("CARGO_BIN_EXE_ping360_node"),
            vec!["_minAngle:=300", "_maxAngle:=100"],
            "~minAngle 300 must be below ~maxAngle 100",
        ),
        (
            env!("CARGO_BIN_EXE_ping360_node"),
            vec!["_minAngle:=100", "_maxAngle:=105", "_step:=5"],
            "~step 5 must be below the sector's width",
        ),
        (
            env!("CARGO_BIN_EXE_ping360_node"),
            vec!["_numberOfSamples:=2000"],
            "~numberOfSamples",
        ),
    ];
    tokio::task::spawn_blocking(move || common::assert_each_fails_in_one_line(&uri, cases))
        .await
        .unwrap();
}
