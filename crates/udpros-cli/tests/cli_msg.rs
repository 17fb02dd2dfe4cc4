//! `udpros msg`: md5 sums, definitions and the type list, against `rosmsg` where it exists.

use udpros_testkit as common;

use std::process::Command;

fn udpros(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_udpros"))
        .args(args)
        .output()
        .expect("run udpros")
}

fn stdout(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf8")
}

#[test]
fn md5_of_range_is_rosmsgs() {
    assert_eq!(
        stdout(&udpros(&["msg", "md5", "sensor_msgs/Range"])),
        "c005c34273dc426c67a020a87bc24148\n"
    );
}

#[test]
fn show_raw_prints_the_connection_header_definition() {
    let want = udpros::msg::builtin("std_msgs/Header")
        .expect("builtin")
        .definition;
    assert_eq!(
        stdout(&udpros(&["msg", "show", "--raw", "std_msgs/Header"])),
        format!("{want}\n")
    );
}

#[test]
fn list_names_every_shipped_type_sorted() {
    let text = stdout(&udpros(&["msg", "list"]));
    let names: Vec<&str> = text.lines().collect();
    assert_eq!(names.len(), udpros::msgs::MESSAGES.len());
    assert!(names.windows(2).all(|w| w[0] < w[1]));
    assert!(names.contains(&"mavros_msgs/TimesyncStatus"));
}

#[test]
fn unknown_types_fail_with_one_line() {
    let out = udpros(&["msg", "md5", "no_such_pkg/Nothing"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no_such_pkg/Nothing"), "{err}");
    let out = udpros(&["msg", "md5", "not a type"]);
    assert_eq!(out.status.code(), Some(1));
}

/// `udpros msg show` and `rosmsg show` print the same text, for every shipped type ROS has.
#[test]
fn show_matches_rosmsg_show() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let types = [
        "sensor_msgs/Range",
        "sensor_msgs/CameraInfo",
        "diagnostic_msgs/DiagnosticArray",
        "std_msgs/Empty",
    ];
    for t in types {
        let script =
            format!("import rosmsg, sys; sys.stdout.write(rosmsg.get_msg_text('{t}') + '\\n')");
        let ros = Command::new(&python)
            .args(["-c", &script])
            .output()
            .expect("rosmsg");
        assert!(
            ros.status.success(),
            "{}",
            String::from_utf8_lossy(&ros.stderr)
        );
        assert_eq!(
            stdout(&udpros(&["msg", "show", t])),
            String::from_utf8_lossy(&ros.stdout),
            "{t}"
        );
    }
}

/// `udpros msg export DIR`: with its two variables set, stock `rostopic echo`, `rosmsg
/// show` and `rosbag record` read the types udpros's bridges publish (`udpros/Ping360Echo`,
/// `udpros/MavlinkLatency`, `mavros_msgs/TimesyncStatus`), which rostopic cannot without
/// them, and Debian's `dynparam` finds its package.
#[test]
fn exported_packages_let_stock_tools_read_udpros_types() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("exported_msgs");
    let _ = std::fs::remove_dir_all(&dir);
    let printed = stdout(&udpros(&["msg", "export", dir.to_str().unwrap()]));
    let var = |name: &str| -> String {
        printed
            .lines()
            .find_map(|l| l.strip_prefix(&format!("export {name}=")))
            .and_then(|v| v.split(':').next())
            .unwrap_or_else(|| panic!("no {name} in {printed}"))
            .to_string()
    };
    let (package_path, python_path) = (var("ROS_PACKAGE_PATH"), var("PYTHONPATH"));
    assert!(
        printed.contains("udpros") && printed.contains("mavros_msgs"),
        "{printed}"
    );
    let tool = |name: &str, exported: bool| {
        let mut cmd = common::ros_tool(&python, name, &uri);
        if exported {
            cmd.env("ROS_PACKAGE_PATH", &package_path)
                .env("PYTHONPATH", &python_path);
        }
        cmd
    };
    let mut demo = Command::new(env!("CARGO_BIN_EXE_udpros"));
    demo.args(["demo", "--plain", "--duration", "40"])
        .stdout(std::process::Stdio::null());
    common::ros_env(&mut demo, &uri);
    let _demo = common::Child(demo.spawn().unwrap());
    let echo = |topic: &str, exported: bool| {
        let mut cmd = tool("rostopic", exported);
        cmd.args(["echo", "-n", "1", topic]);
        let mut child = common::Child(
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while child.0.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.0.kill();
        let out = std::mem::replace(&mut child.0, Command::new("true").spawn().unwrap())
            .wait_with_output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    // Stock rostopic cannot read the type without the exported package...
    let without = echo("/ping360/echo", false);
    assert!(without.contains("Cannot load message class"), "{without}");
    // ...and reads each with it.
    for (topic, field) in [
        ("/ping360/echo", "intensities:"),
        ("/mavlink_bridge/latency", "timesync_rtt:"),
        ("/mavlink_bridge/timesync_status", "observed_offset_ns:"),
    ] {
        let text = echo(topic, true);
        assert!(text.contains(field), "rostopic echo {topic}: {text}");
    }
    let show = tool("rosmsg", true)
        .args(["show", "udpros/Ping360Echo"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("uint8[] intensities"),
        "{}",
        String::from_utf8_lossy(&show.stderr)
    );
    // Debian's dynparam finds its package through the exported manifest, and sets a
    // setting of the demo's Ping360.
    let dynparam = |args: &[&str]| {
        let mut cmd = Command::new("timeout");
        cmd.args(["-s", "KILL", "60"])
            .arg(&python)
            .arg("/usr/lib/dynamic_reconfigure/dynparam")
            .args(args);
        common::ros_env(&mut cmd, &uri);
        let out = cmd
            .env("ROS_PACKAGE_PATH", &package_path)
            .env("PYTHONPATH", &python_path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "dynparam {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    dynparam(&["set", "/ping360", "range", "30"]);
    let settings = dynparam(&["get", "/ping360"]);
    assert!(settings.contains("'range': 30.0"), "{settings}");
    // rosbag records both, and reads them back as the types they are.
    let bag = dir.join("bridges.bag");
    let status = tool("rosbag", true)
        .args(["record", "-O"])
        .arg(&bag)
        .args(["--duration=4", "/ping360/echo", "/mavlink_bridge/latency"])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success() && bag.exists());
    let info = tool("rosbag", true).arg("info").arg(&bag).output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.contains("udpros/Ping360Echo") && info.contains("udpros/MavlinkLatency"),
        "{info}"
    );
    let from_bag = tool("rostopic", true)
        .args(["echo", "-n", "1", "-b"])
        .arg(&bag)
        .arg("/mavlink_bridge/latency")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&from_bag.stdout).contains("ping_rtt:"),
        "{}",
        String::from_utf8_lossy(&from_bag.stderr)
    );
}
