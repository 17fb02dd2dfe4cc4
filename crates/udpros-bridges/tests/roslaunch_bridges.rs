//! Both bridge binaries under Debian's `roslaunch`, against a stock rosmaster: private
//! parameters and remaps from a launch file, and `rostopic hz` sees their topics.

use udpros_testkit as common;

use std::process::Stdio;
use std::time::Duration;

/// A ROS package folder named `udpros` holding the two binaries, as roslaunch finds nodes.
fn package(dir: &std::path::Path) -> std::path::PathBuf {
    common::ros_package(
        dir,
        "udpros",
        &[
            ("ping_sonar", env!("CARGO_BIN_EXE_ping_sonar")),
            ("mavlink_bridge", env!("CARGO_BIN_EXE_mavlink_bridge")),
        ],
    )
}

const LAUNCH: &str = r#"<launch>
  <node pkg="udpros" type="ping_sonar" name="sonar">
    <param name="device" value="sim:ping1d"/>
    <param name="frame_id" value="sonar_link"/>
    <remap from="~range" to="/depth"/>
  </node>
  <node pkg="udpros" type="mavlink_bridge" name="fcu" ns="vehicle">
    <param name="fcu_url" value="sim:"/>
    <param name="timesync_rate" value="20"/>
  </node>
</launch>
"#;

fn hz(python: &std::path::Path, uri: &str, topic: &str) -> String {
    let mut cmd = common::ros_tool(python, "rostopic", uri);
    cmd.args(["hz", "-w", "5", topic])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (child, mut lines) = common::spawn_lines(cmd);
    let rate = lines.wait_for(Duration::from_secs(20), |l| l.contains("average rate"));
    drop(child);
    rate.unwrap_or_else(|| format!("no rate for {topic}: {:?}", lines.seen))
}

#[test]
fn roslaunch_starts_both_bridges_and_rostopic_hz_sees_them() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let python = common::ros_python().unwrap();
    let dir = std::env::temp_dir().join(format!("udpros-roslaunch-{}", std::process::id()));
    package(&dir);
    let launch = dir.join("bridges.launch");
    std::fs::write(&launch, LAUNCH).unwrap();
    let mut cmd = common::ros_tool(&python, "roslaunch", &uri);
    cmd.arg(&launch)
        .env("ROS_PACKAGE_PATH", &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null()); // nodes it leaves behind must not hold the test's output open
    let (launched, _lines) = common::spawn_lines(cmd);
    let mut launched = common::Launched(launched);
    let depth = hz(&python, &uri, "/depth");
    assert!(depth.contains("average rate"), "{depth}");
    // rostopic needs the message class, and Debian has no mavros_msgs: the autopilot's
    // clock as sensor_msgs/TimeReference (from SYSTEM_TIME, 1 Hz) stands for the bridge.
    let reference = hz(&python, &uri, "/vehicle/fcu/time_reference");
    assert!(reference.contains("average rate"), "{reference}");
    // Private parameters reached the nodes: the remapped range carries the frame id.
    let echo = common::ros_tool(&python, "rostopic", &uri)
        .args(["echo", "-n", "1", "/depth/header/frame_id"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&echo.stdout).contains("sonar_link"),
        "{}",
        String::from_utf8_lossy(&echo.stdout)
    );
    let stopped = launched.stop();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(stopped, "roslaunch stops with its nodes");
}
