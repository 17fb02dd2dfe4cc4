//! `udpros param` beside `rosparam` on the same stock rosmaster: the same dump, get and list
//! text for the same tree, and files loaded by one read back identically by the other.

use udpros_testkit as common;

use std::process::Command;

const FILE: &str = r#"# a parameter file as robots carry them
sonar:
  device: udp:192.168.2.2:9090
  range: 10        # m
  gain: 0.5
  tiny: 0.00001
  big: 1.0e+20
  negative: -3
  'on': 'yes'
  count: '10'
  flag: true
  colon: 'a: b'
  empty: ''
  padded: ' lead'
  accent: "café"
  modes: [auto, manual]
  steps:
    - x: 1
      y: 2.5
    - name: second
autopilot:
  fcu_url: 'sim:'
  ids: {system: 1, component: 191}
  rates:
  - 1
  - 10.0
defaults: &defaults
  rate: 10
  frame: sonar
merged:
  <<: *defaults
  rate: 20
description: |
  two lines
  of text
folded: >
  one
  line
long plain: this plain scalar
  goes on
angle: !degrees 90
raw: !!str 010
"#;

/// Whether the tool succeeded, and all it printed.
fn run(cmd: &mut Command) -> (bool, String) {
    let ran = common::run_tool(cmd);
    (ran.ok, ran.stdout + &ran.stderr)
}

#[test]
fn dump_get_list_load_and_delete_match_rosparam() {
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let python = common::ros_python().unwrap();
    let ours = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_udpros"));
        cmd.arg("param").args(args);
        common::ros_env(&mut cmd, &uri);
        run(&mut cmd)
    };
    let theirs = |args: &[&str]| run(common::ros_tool(&python, "rosparam", &uri).args(args));
    let dir = std::env::temp_dir().join(format!("udpros-param-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("params.yaml");
    std::fs::write(&file, FILE).unwrap();
    let file = file.to_str().unwrap();

    // rosparam loads the file under /a, we load it under /b: the trees must be equal.
    assert!(theirs(&["load", file, "/a"]).0);
    let loaded = ours(&["load", file, "/b"]);
    assert!(loaded.0, "{}", loaded.1);
    assert_eq!(
        theirs(&["get", "/a"]),
        theirs(&["get", "/b"]),
        "the same tree"
    );
    // set: YAML typed as rosparam types it.
    for (name, value) in [
        ("/c/int", "10"),
        ("/c/str", "'10'"),
        ("/c/list", "[1, two, 3.5]"),
        ("/c/yes", "yes"),
    ] {
        let r = ours(&["set", name, value]);
        assert!(r.0, "{}", r.1);
    }
    assert_eq!(
        theirs(&["get", "/c"]).1,
        "int: 10\nlist:\n- 1\n- two\n- 3.5\nstr: '10'\n'yes': true\n\n"
    );

    // The same text from both tools.
    assert_eq!(ours(&["dump"]), theirs(&["dump"]), "dump of /");
    for name in [
        "/a",
        "/a/sonar/range",
        "/a/sonar/accent",
        "/a/sonar/on",
        "/b/autopilot/rates",
        "/c/str",
    ] {
        assert_eq!(ours(&["get", name]), theirs(&["get", name]), "get {name}");
    }
    assert_eq!(ours(&["list"]), theirs(&["list"]), "list");
    assert_eq!(
        ours(&["list", "/a/sonar"]),
        theirs(&["list", "/a/sonar"]),
        "list /a/sonar"
    );

    // delete, and errors as one line.
    assert!(ours(&["delete", "/b"]).0);
    assert!(!theirs(&["list"]).1.contains("/b/"));
    let missing = ours(&["get", "/b/sonar"]);
    assert!(!missing.0);
    assert_eq!(missing.1.trim(), "udpros: Parameter [/b/sonar] is not set");
    let _ = std::fs::remove_dir_all(&dir);
}
