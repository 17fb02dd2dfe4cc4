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
