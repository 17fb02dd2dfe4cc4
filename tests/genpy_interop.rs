//! The message layer against genpy, ROS's own Python message implementation: md5 sums,
//! full definitions, the wire bytes both ways, and `rostopic echo`'s YAML.

use udpros_testkit as common;

use bytes::Bytes;
use common::random::{random_value, Rng};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use udpros::msg::dynamic::DynamicType;
use udpros::msg::Message;
use udpros::msgs;
use udpros::wire;

/// Types genpy does not ship on Debian (checked against known sums instead).
const NOT_IN_DEBIAN: &[(&str, &str)] = &[(
    "mavros_msgs/TimesyncStatus",
    "021ec8044e747bea518b441f374ba64b",
)];

/// Types of another driver that Debian does not ship, shipped by udpros for drop-in
/// compatibility: genpy's classes are generated from the driver's own field lines (the md5
/// sum depends on them only; udpros's definition text has comments of its own).
const OTHER_DRIVERS: &[(&str, &str, &str)] = &[(
    "ping360_sonar",
    "SonarEcho",
    "Header header\nfloat32 angle\nuint8 gain\nuint16 number_of_samples\n\
     uint16 transmit_frequency\nuint16 speed_of_sound\nuint8 range\nuint8[] intensities\n",
)];

/// The genpy peer, with the classes of [`OTHER_DRIVERS`] on its path.
fn peer(python: &std::path::Path) -> Command {
    static CLASSES: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let classes = CLASSES.get_or_init(|| {
        // Under the build's own scratch directory, which `cargo clean` empties: nothing
        // removes it when the tests end.
        let root = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("genpy-other-{}", std::process::id()));
        for (package, name, fields) in OTHER_DRIVERS {
            common::genpy_messages(python, &root, package, &[(name, fields)]);
        }
        root
    });
    let mut cmd = Command::new(python);
    cmd.arg(common::peer_script("genpy_peer.py"))
        .env("PYTHONPATH", classes);
    cmd
}

#[test]
fn md5_and_full_text_equal_genpy_for_every_shipped_type() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let names: Vec<&str> = msgs::MESSAGES.iter().map(|m| m.type_name).collect();
    let out = peer(&python)
        .arg("info")
        .args(&names)
        .output()
        .expect("run genpy peer");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&out.stdout).expect("json");
    let mut compared = 0;
    for m in msgs::MESSAGES {
        if m.type_name.starts_with("udpros/") {
            assert_eq!(
                m.md5sum,
                genmsg_md5(&python, m.type_name),
                "md5 of {}",
                m.type_name
            );
            compared += 1;
            continue;
        }
        match &info[m.type_name] {
            serde_json::Value::Null => {
                let known = NOT_IN_DEBIAN.iter().find(|(t, _)| *t == m.type_name);
                let (_, md5) =
                    known.unwrap_or_else(|| panic!("genpy does not know {}", m.type_name));
                assert_eq!(m.md5sum, *md5, "{}", m.type_name);
            }
            ros => {
                assert_eq!(m.md5sum, ros["md5"], "md5 of {}", m.type_name);
                let other_driver = OTHER_DRIVERS
                    .iter()
                    .any(|(p, n, _)| m.type_name == format!("{p}/{n}"));
                if !other_driver {
                    assert_eq!(
                        m.definition, ros["full_text"],
                        "full text of {}",
                        m.type_name
                    );
                }
                compared += 1;
            }
        }
    }
    assert_eq!(compared, msgs::MESSAGES.len() - NOT_IN_DEBIAN.len());
}

/// genmsg's md5 of one of udpros's own messages (from `msg/udpros`).
fn genmsg_md5(python: &std::path::Path, type_name: &str) -> String {
    let script = r#"
import sys, genmsg, genmsg.msg_loader as ml
ctx = ml.MsgContext.create_default()
search = {p: ['/usr/share/%s/msg' % p] for p in ('std_msgs', 'sensor_msgs', 'geometry_msgs')}
search['udpros'] = [sys.argv[1]]
spec = ml.load_msg_by_type(ctx, sys.argv[2], search)
ml.load_depends(ctx, spec, search)
print(genmsg.compute_md5(ctx, spec))
"#;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("msg/udpros");
    let out = Command::new(python)
        .args(["-c", script, dir.to_str().unwrap(), type_name])
        .output()
        .expect("genmsg");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Typed (generated struct) decode and re-encode of one message body.
type TypedRoundTrip = fn(&Bytes) -> Result<Vec<u8>, wire::Error>;

fn typed<M: Message>(bytes: &Bytes) -> Result<Vec<u8>, wire::Error> {
    wire::to_vec(&wire::from_bytes::<M>(bytes)?)
}

macro_rules! typed_table {
    ($($t:ty),* $(,)?) => { vec![$((<$t as Message>::TYPE, typed::<$t> as TypedRoundTrip)),*] };
}

fn typed_round_trips() -> Vec<(&'static str, TypedRoundTrip)> {
    typed_table![
        msgs::std_msgs::Header,
        msgs::std_msgs::String,
        msgs::std_msgs::Bool,
        msgs::std_msgs::Byte,
        msgs::std_msgs::Char,
        msgs::std_msgs::Empty,
        msgs::std_msgs::Time,
        msgs::std_msgs::Duration,
        msgs::std_msgs::UInt64,
        msgs::std_msgs::Float64MultiArray,
        msgs::std_msgs::UInt8MultiArray,
        msgs::std_msgs::Int8MultiArray,
        msgs::std_msgs::ColorRGBA,
        msgs::sensor_msgs::Image,
        msgs::sensor_msgs::CompressedImage,
        msgs::sensor_msgs::LaserScan,
        msgs::sensor_msgs::Range,
        msgs::sensor_msgs::Imu,
        msgs::sensor_msgs::JointState,
        msgs::sensor_msgs::PointCloud2,
        msgs::sensor_msgs::CameraInfo,
        msgs::sensor_msgs::NavSatFix,
        msgs::sensor_msgs::BatteryState,
        msgs::sensor_msgs::TimeReference,
        msgs::sensor_msgs::Temperature,
        msgs::geometry_msgs::PoseWithCovarianceStamped,
        msgs::geometry_msgs::TwistStamped,
        msgs::geometry_msgs::PolygonStamped,
        msgs::rosgraph_msgs::Log,
        msgs::rosgraph_msgs::Clock,
        msgs::diagnostic_msgs::DiagnosticArray,
        msgs::mavros_msgs::TimesyncStatus,
    ]
}

/// Every shipped message genpy has, service halves included (genpy_peer.py finds those in
/// the package's `srv` module).
fn genpy_types() -> Vec<&'static str> {
    msgs::MESSAGES
        .iter()
        .map(|m| m.type_name)
        .filter(|t| !NOT_IN_DEBIAN.iter().any(|(n, _)| n == t) && !t.starts_with("udpros/"))
        .collect()
}

/// Random messages of every shipped type, encoded by udpros (the dynamic encoder, and the
/// generated struct where the table has it): genpy must read them and write back the same
/// bytes, and print the same YAML as udpros.
#[test]
fn udpros_bytes_read_back_identically_by_genpy_with_same_yaml() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let typed: BTreeMap<_, _> = typed_round_trips().into_iter().collect();
    let mut rng = Rng::new(0x5eed);
    let mut cases = Vec::new();
    for type_name in genpy_types() {
        let info = udpros::msg::builtin(type_name).expect("builtin");
        let ty =
            DynamicType::from_definition(type_name, info.definition).expect("definition parses");
        for _ in 0..12 {
            let value = random_value(&ty, type_name, &mut rng);
            let bytes = Bytes::from(ty.encode(&value).expect("encode"));
            assert_eq!(
                ty.decode(&bytes).expect("decode").to_yaml(),
                value.to_yaml(),
                "{type_name}"
            );
            if let Some(round_trip) = typed.get(type_name) {
                assert_eq!(
                    round_trip(&bytes).expect("typed decode"),
                    bytes.to_vec(),
                    "typed {type_name}"
                );
            }
            cases.push((type_name, bytes, value.to_yaml()));
        }
    }
    let mut child = peer(&python)
        .arg("roundtrip")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let input: String = cases
        .iter()
        .map(|(t, b, _)| format!("{t} {}\n", common::to_hex(b)))
        .collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let replies: Vec<serde_json::Value> = BufReader::new(child.stdout.take().expect("stdout"))
        .lines()
        .map(|l| serde_json::from_str(&l.expect("line")).expect("json"))
        .collect();
    writer.join().expect("writer").expect("write");
    assert!(child.wait().expect("wait").success());
    assert_eq!(replies.len(), cases.len());
    for ((type_name, bytes, yaml), reply) in cases.iter().zip(&replies) {
        assert!(
            reply.get("error").is_none(),
            "genpy could not read {type_name} {}: {reply}",
            common::to_hex(bytes)
        );
        assert_eq!(reply["hex"], common::to_hex(bytes), "bytes of {type_name}");
        assert_eq!(
            reply["yaml"].as_str().expect("yaml"),
            yaml,
            "YAML of {type_name}"
        );
    }
}

/// Random messages made and encoded by genpy decode in udpros (dynamic and typed) and
/// encode back to the same bytes.
#[test]
fn genpy_bytes_read_back_identically_by_udpros() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let typed: BTreeMap<_, _> = typed_round_trips().into_iter().collect();
    let mut checked = 0;
    for (i, type_name) in genpy_types().into_iter().enumerate() {
        let out = peer(&python)
            .args(["random", type_name, "6", &i.to_string()])
            .output()
            .expect("run peer");
        assert!(
            out.status.success(),
            "{type_name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let info = udpros::msg::builtin(type_name).expect("builtin");
        let ty = DynamicType::from_definition(type_name, info.definition).expect("definition");
        for line in String::from_utf8(out.stdout).expect("utf8").lines() {
            let bytes = Bytes::from(common::from_hex(line));
            let value = ty
                .decode(&bytes)
                .unwrap_or_else(|e| panic!("{type_name} {line}: {e}"));
            assert_eq!(
                ty.encode(&value).expect("encode"),
                bytes.to_vec(),
                "{type_name}"
            );
            if let Some(round_trip) = typed.get(type_name) {
                assert_eq!(
                    round_trip(&bytes).expect("typed decode"),
                    bytes.to_vec(),
                    "typed {type_name}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 6 * 90, "only {checked} messages checked");
}

/// The `.msg` parser against genmsg's: every message Debian's ROS packages install, plus
/// definitions written to hit genmsg's line rules (comments after constants, `#` and `=`
/// inside string constants, `Header` shorthand, same-package types, arrays of messages,
/// `byte`/`char`, blank and comment-only lines, odd spacing).
#[test]
fn md5_of_every_installed_message_and_of_tricky_definitions_equals_genmsg() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let tricky = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("tricky_msgs");
    let dir = tricky.join("tricky/msg");
    std::fs::create_dir_all(&dir).unwrap();
    let files = [
        (
            "Consts",
            "# leading comment\n\nint32 A = 5 # five\nuint8 B=7\nstring S = has # and = inside  \n\
             string EMPTY=\nfloat64 PI=3.14159\nbool T=True\nbyte BY=1\nchar CH=2\n\
             int32   x   # trailing\n  Header header\n",
        ),
        (
            "Nested",
            "Consts[] many\nConsts[2] two\ntricky/Consts one\ngeometry_msgs/Point[] points\n\
             byte[] raw\nchar[4] chars\ntime t\nduration d\nstd_msgs/Header h\n",
        ),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(format!("{name}.msg")), text).unwrap();
    }
    let mut set = udpros::codegen::spec::SpecSet::new();
    set.load_tree(std::path::Path::new("/usr/share")).unwrap();
    set.load_tree(&tricky).unwrap();
    // Messages, then services (Debian installs a few `.srv` files: diagnostic_msgs,
    // sensor_msgs); a service's halves are checked through the service's md5.
    let halves: Vec<String> = set
        .services()
        .flat_map(|s| [s.request.name.clone(), s.response.name.clone()])
        .collect();
    let services: Vec<String> = set.services().map(|s| s.name.clone()).collect();
    let names: Vec<String> = set
        .iter()
        .map(|s| s.name.clone())
        .filter(|n| !halves.contains(n))
        .collect();
    assert!(names.len() > 50, "only {} messages installed", names.len());
    assert!(!services.is_empty(), "no services installed");
    let script = r#"
import sys, glob, os, genmsg, genmsg.msg_loader as ml
ctx = ml.MsgContext.create_default()
search = {}
for d in glob.glob('/usr/share/*/msg') + [sys.argv[1] + '/tricky/msg']:
    search.setdefault(os.path.basename(os.path.dirname(d)), []).append(d)
srv_search = {}
for d in glob.glob('/usr/share/*/srv'):
    srv_search.setdefault(os.path.basename(os.path.dirname(d)), []).append(d)
for line in sys.stdin.read().splitlines():
    kind, t = line.split()
    try:
        if kind == 'srv':
            spec = ml.load_srv_by_type(ctx, t, srv_search)
        else:
            spec = ml.load_msg_by_type(ctx, t, search)
        ml.load_depends(ctx, spec, search)
    except (genmsg.MsgNotFound, genmsg.InvalidMsgSpec) as e:
        # Debian ships some .msg files whose dependencies it does not ship (actionlib's
        # need actionlib_msgs): genmsg itself cannot load them.
        print(t, 'UNLOADABLE', str(e).replace('\n', ' '))
        continue
    print(t, genmsg.compute_md5(ctx, spec))
"#;
    let mut child = Command::new(&python)
        .args(["-c", script, tricky.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("genmsg");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            names
                .iter()
                .map(|n| format!("msg {n}\n"))
                .chain(services.iter().map(|n| format!("srv {n}\n")))
                .collect::<String>()
                .as_bytes(),
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut genmsg: BTreeMap<String, String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(t, m)| (t.to_string(), m.to_string()))
        .collect();
    assert_eq!(genmsg.len(), names.len() + services.len());
    // What genmsg cannot load is no udpros failure: named by package, left out of the
    // comparison.
    let unloadable: BTreeMap<String, String> = genmsg
        .iter()
        .filter_map(|(t, m)| {
            let why = m.strip_prefix("UNLOADABLE ")?;
            let why = why.split(" on search path").next().unwrap_or(why);
            Some((t.clone(), why.to_string()))
        })
        .collect();
    let mut by_package: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    for (name, why) in &unloadable {
        genmsg.remove(name);
        let package = name.split('/').next().unwrap_or(name);
        by_package.entry(package).or_insert((0, why)).0 += 1;
    }
    for (package, (count, why)) in &by_package {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "genmsg cannot load {count} types of {package} ({why}): not compared"
        );
    }
    assert!(
        unloadable.len() * 2 < names.len(),
        "genmsg could load too few: {by_package:?}"
    );
    for name in names.iter().filter(|n| !unloadable.contains_key(*n)) {
        assert_eq!(set.md5sum(name).unwrap(), genmsg[name], "md5 of {name}");
    }
    for name in services.iter().filter(|n| !unloadable.contains_key(*n)) {
        assert_eq!(
            set.service_md5sum(name).unwrap(),
            genmsg[name],
            "md5 of service {name}"
        );
    }
    let consts = set.get("tricky/Consts").unwrap();
    let s = consts.constants.iter().find(|c| c.name == "S").unwrap();
    assert_eq!(s.text, "has # and = inside");
    assert!(!consts.has_header(), "header is not the first field");
}

/// `.action` files make the messages genaction makes: for actionlib's own Test and
/// TwoInts actions (libactionlib-dev installs the files, ros-actionlib-msgs the messages
/// they name, python3-actionlib their genpy classes), every one of the seven has genpy's
/// md5 sum and full definition.
#[test]
fn action_messages_equal_genaction_s_for_actionlib_s_test_and_two_ints() {
    let Some(python) = common::ros_python() else {
        return;
    };
    let mut set = udpros::codegen::spec::SpecSet::new();
    set.load_tree(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("msg"))
        .unwrap();
    let mut names = Vec::new();
    for action in ["Test", "TwoInts"] {
        let file = format!("/usr/share/actionlib/action/{action}.action");
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{file}: {e} (libactionlib-dev installs it)"));
        let full_name = format!("actionlib/{action}");
        set.insert_action(&full_name, &text).unwrap();
        names.extend(
            udpros::codegen::action::action_messages(&full_name, &text)
                .unwrap()
                .into_iter()
                .map(|spec| spec.name),
        );
    }
    assert_eq!(names.len(), 14);
    // actionlib_msgs (GoalID, GoalStatus) from where Debian installs them.
    udpros::codegen::resolve_dependencies(&mut set, &[std::path::PathBuf::from("/usr/share")])
        .unwrap();
    let out = peer(&python)
        .arg("info")
        .args(&names)
        .output()
        .expect("run genpy peer");
    let info: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&out.stdout).expect("json");
    for name in &names {
        let ros = &info[name];
        assert!(
            !ros.is_null(),
            "genpy has no {name} (python3-actionlib installs it)"
        );
        assert_eq!(set.md5sum(name).unwrap(), ros["md5"], "md5 of {name}");
        assert_eq!(
            set.full_text(name).unwrap(),
            ros["full_text"],
            "full text of {name}"
        );
    }
}
