//! dynamic_reconfigure against Debian's python3-dynamic-reconfigure: `dynparam list`, `get`,
//! `set` (single values, enums by name, a YAML dict), `dump` and `load`, a rospy `Client`
//! with a config callback, and a differential test: dynamic_reconfigure's own Test.cfg
//! served by udpros and by the reference Python server gives the same descriptions, the
//! same `dynparam get` output after the same `dynparam set`s, and the same levels.

use udpros_testkit as common;

use common::Dynparam;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use udpros::reconfigure::{Choice, Config, Description, GroupId, GroupKind, Param};

/// dynamic_reconfigure's `cfg/Test.cfg`, as Debian's `dynamic_reconfigure.cfg.TestConfig`
/// has it.
fn test_cfg() -> Description {
    let size = || {
        [
            Choice::new("Small", 0, "A small constant"),
            Choice::new("Medium", 1, "A medium value"),
            Choice::new("Large", 2, "A large value"),
            Choice::new("ExtraLarge", 3, "An extra large value"),
        ]
    };
    let (inf, full) = (f64::INFINITY, (i32::MIN, i32::MAX));
    let mut d = Description::new();
    d.add(
        Param::int("int_enum_", 0, 0, 3)
            .level(1)
            .description("Int enum")
            .choices("An enum to set the size.", size()),
    );
    d.add(
        Param::int("int_", 0, -10, 10)
            .level(1)
            .description("Int parameter"),
    );
    d.add(
        Param::double("double_", 0.0, -2.0, 10.0)
            .level(2)
            .description("double parameter"),
    );
    d.add(
        Param::double("double_no_minmax", 1.0, -inf, inf)
            .level(2)
            .description("double parameter without boundaries"),
    );
    d.add(
        Param::double("double_no_max", 2.0, 0.0, inf)
            .level(2)
            .description("double parameter without max value"),
    );
    d.add(
        Param::str("str_", "foo")
            .level(4)
            .description("String parameter"),
    );
    d.add(
        Param::str("mstr_", "bar")
            .level(4)
            .description("Multibyte String parameter"),
    );
    d.add(
        Param::bool("bool_", false)
            .level(8)
            .description("Boolean parameter"),
    );
    d.add(
        Param::int("level", 0, full.0, full.1)
            .level(16)
            .description("Contains the level of the previous change"),
    );
    d.add(
        Param::int("int_nodefault", 0, full.0, full.1)
            .description("Checks against regression of #4499"),
    );
    d.add(Param::int("i", 0, full.0, full.1).description(
        "Checks against regression of https://github.com/ros/dynamic_reconfigure/issues/6",
    ));
    let one = d.group(GroupId::DEFAULT, "Group_One", GroupKind::Box, true);
    d.add_in(
        one,
        Param::int("group1_int", 2, full.0, full.1)
            .level(1)
            .description("A second level group parameter"),
    );
    let two = d.group(one, "GROUP2", GroupKind::Collapse, false);
    d.add_in(
        two,
        Param::double("group2_double", 3.333, -inf, inf)
            .description("A third level group parameter"),
    );
    d.add_in(
        two,
        Param::str("group2_string", "test string").description("A third level group parameter"),
    );
    d.add_in(
        two,
        Param::str("some_other", "AAAAAAGGHH").description("Something"),
    );
    d.add_in(two, Param::bool("variable", true).description("A boolean"));
    let three = d.group(two, "Group3", GroupKind::Box, true);
    d.add_in(
        three,
        Param::int("deep_var_int", 0, 0, 3)
            .description("Were very far down now")
            .choices("An enum to set the size.", size()),
    );
    d.add_in(
        three,
        Param::bool("deep_var_bool", true).description("Were even farther down now!!"),
    );
    d.add_in(
        three,
        Param::double("deep_var_double", -1.0, -inf, inf).description("Were super far down now!!"),
    );
    let upper = d.group(GroupId::DEFAULT, "Upper_Group_2", GroupKind::Box, true);
    d.add_in(
        upper,
        Param::int("some_param", 20, full.0, full.1).description("Some param"),
    );
    d
}

fn describe(python: &std::path::Path, uri: &str, ns: &str) -> String {
    let mut cmd = Command::new(python);
    cmd.arg(common::peer_script("reconfigure_peer.py"))
        .args(["describe", ns]);
    common::ros_env(&mut cmd, uri);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The levels a udpros server's callback was called with, and what it applied.
type Calls = Arc<Mutex<Vec<(u32, Config)>>>;

async fn serve(node: &udpros::node::Node, calls: Calls) -> udpros::reconfigure::ReconfigureServer {
    node.reconfigure_server("~", test_cfg(), move |config: Config, level| {
        let calls = calls.clone();
        async move {
            // A value the "device" refuses: the applied config keeps the old one.
            let mut applied = config;
            if applied.str("str_") == Some("refused") {
                let before = calls.lock().unwrap().last().map(|(_, c)| c.clone());
                let old = before.and_then(|c| c.str("str_").map(str::to_string));
                applied.set("str_", old.as_deref().unwrap_or("foo"));
            }
            calls.lock().unwrap().push((level, applied.clone()));
            applied
        }
    })
    .await
    .expect("reconfigure server starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_cfg_served_by_udpros_and_by_rospy_looks_and_behaves_the_same() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    let (_py, mut py_lines) = common::reconfigure_peer(&python, &uri, &["server"]);
    assert!(
        tokio::task::block_in_place(|| py_lines.wait_for(Duration::from_secs(30), |l| l == "READY"))
            .is_some(),
        "the rospy server starts"
    );
    let node = common::node(&uri, "udpros_server").await;
    let calls = Calls::default();
    let _server = serve(&node, calls.clone()).await;
    assert_eq!(
        calls.lock().unwrap()[0].0,
        u32::MAX,
        "the first call has every level"
    );

    let dynparam = Dynparam::new(&python, &uri, "differential");
    tokio::task::block_in_place(|| {
        let (ours, theirs) = (
            describe(&python, &uri, "/udpros_server"),
            describe(&python, &uri, "/reconfigure_peer"),
        );
        assert_eq!(ours, theirs, "parameter_descriptions differ");
        let listed = dynparam.run(&["list"]);
        assert!(listed.lines().any(|l| l == "/udpros_server"), "{listed}");
        assert!(listed.lines().any(|l| l == "/reconfigure_peer"), "{listed}");
        let get = |node: &str| dynparam.run(&["get", node]);
        assert_eq!(get("/udpros_server"), get("/reconfigure_peer"));
        for set in [
            &["int_", "50"][..],         // clamped to 10
            &["int_enum_", "Large"][..], // an enum by name
            &["int_enum_", "1"][..],     // and by value
            &["bool_", "yes"][..],
            &["{'double_': 3, 'str_': 'hi'}"][..], // a YAML dict: int cast to float
            &["double_", "-100"][..],              // clamped to -2
        ] {
            for server in ["/udpros_server", "/reconfigure_peer"] {
                let mut args = vec!["set", server];
                args.extend_from_slice(set);
                dynparam.run(&args);
            }
            assert_eq!(
                get("/udpros_server"),
                get("/reconfigure_peer"),
                "after dynparam set {set:?}"
            );
        }
    });
    let ours: Vec<u32> = calls.lock().unwrap()[1..].iter().map(|(l, _)| *l).collect();
    assert_eq!(ours, [1, 1, 1, 8, 6, 2]);
    let callbacks = tokio::task::block_in_place(|| {
        py_lines.count(7, Duration::from_secs(10), |l| l.starts_with("CALLBACK"))
    });
    assert_eq!(callbacks, 7, "{:?}", py_lines.seen);
    let theirs: Vec<i64> = py_lines
        .seen
        .iter()
        .filter_map(|l| {
            l.strip_prefix("CALLBACK level=")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    // The Python server starts with ~0 as a signed int; udpros passes it as u32::MAX.
    assert_eq!(theirs[0], -1);
    let theirs: Vec<u32> = theirs[1..].iter().map(|l| *l as u32).collect();
    assert_eq!(theirs, ours, "the Python server's levels");
    let mirrored = tokio::task::block_in_place(|| {
        let mut get = common::ros_tool(&python, "rosparam", &uri);
        get.args(["get", "/udpros_server/int_"]);
        get.output().unwrap()
    });
    assert_eq!(String::from_utf8_lossy(&mirrored.stdout).trim(), "10");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynparam_dump_load_and_a_rospy_client_follow_a_udpros_server() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let Some((_master, uri)) = common::start_rosmaster() else {
        return;
    };
    // A value preset on the parameter server wins over the default, clamped.
    let setter = common::node(&uri, "setter").await;
    setter
        .set_param("/udpros_server/int_", udpros::xmlrpc::Value::Int(70))
        .await
        .unwrap();
    let node = common::node(&uri, "udpros_server").await;
    let calls = Calls::default();
    let server = serve(&node, calls.clone()).await;
    assert_eq!(server.config().await.int("int_"), Some(10));
    let (_client, mut client) =
        common::reconfigure_peer(&python, &uri, &["client", "/udpros_server"]);
    let sees = |lines: &mut common::Lines, what: &str| {
        tokio::task::block_in_place(|| {
            lines.wait_for(Duration::from_secs(30), |l| {
                l.starts_with("CONFIG") && l.contains(what)
            })
        })
        .unwrap_or_else(|| panic!("the rospy client did not see {what}: {:?}", lines.seen))
    };
    sees(&mut client, "int_=10 ");
    let dynparam = Dynparam::new(&python, &uri, "dump");
    let dump = std::env::temp_dir().join(format!("udpros-dynparam-{}.yaml", std::process::id()));
    let dump_arg = dump.to_str().unwrap().to_string();
    tokio::task::block_in_place(|| {
        dynparam.run(&["set", "/udpros_server", "int_", "7"]);
    });
    sees(&mut client, "int_=7 ");
    tokio::task::block_in_place(|| {
        dynparam.run(&["dump", "/udpros_server", &dump_arg]);
        dynparam.run(&["set", "/udpros_server", "{'int_': -3, 'str_': 'changed'}"]);
    });
    sees(&mut client, "int_=-3 double_=0.0 str_=changed");
    // `load` sends every value and every group state, which the Python server cannot take.
    tokio::task::block_in_place(|| dynparam.run(&["load", "/udpros_server", &dump_arg]));
    sees(&mut client, "int_=7 double_=0.0 str_=foo");
    // A value the node refuses comes back as it was, to the caller and to every client.
    let answer = tokio::task::block_in_place(|| {
        dynparam.run(&["set", "/udpros_server", "str_", "refused"]);
        dynparam.run(&["get", "/udpros_server"])
    });
    assert!(answer.contains("'str_': 'foo'"), "{answer}");
    assert_eq!(server.config().await.str("str_"), Some("foo"));
    let _ = std::fs::remove_file(&dump);
}
