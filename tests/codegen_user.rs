//! The code generator as a user's `build.rs` drives it: their own messages, linked to the
//! types udpros ships, with md5 sums as genmsg computes them.

use udpros_testkit as common;

use std::path::Path;
use std::process::Command;

const CUSTOM: &str = "# a user's message\nHeader header\ngeometry_msgs/Point[] points\nuint8 KIND=3\nstring NAME=a # b\nstring type\nOther[2] others\nuint8[] blob\n";
const OTHER: &str = "float64 x\nbool flag\n";

fn write_package(root: &Path) {
    let dir = root.join("my_pkg");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("Custom.msg"), CUSTOM).expect("write");
    std::fs::write(dir.join("Other.msg"), OTHER).expect("write");
}

fn generated_md5(code: &str, type_name: &str) -> String {
    let at = code
        .find(&format!("const TYPE: &'static str = \"{type_name}\""))
        .expect("type generated");
    let rest = &code[at..];
    let start = rest.find("MD5SUM: &'static str = \"").expect("md5") + 24;
    rest[start..start + 32].to_string()
}

#[test]
fn user_messages_reuse_shipped_types() {
    let root = std::env::temp_dir().join(format!("udpros-codegen-{}", std::process::id()));
    write_package(&root);
    let code = udpros::msg::generator()
        .msg_tree(&root)
        .generate()
        .expect("generate");
    assert!(code.contains("pub mod my_pkg {"));
    assert!(
        !code.contains("pub mod std_msgs"),
        "shipped packages must not be generated again"
    );
    assert!(code.contains("pub header: ::udpros::msgs::std_msgs::Header,"));
    assert!(code.contains("pub points: ::std::vec::Vec<::udpros::msgs::geometry_msgs::Point>,"));
    assert!(code.contains("pub r#type: ::std::string::String,"));
    assert!(code.contains("pub others: [Other; 2],"));
    assert!(code.contains("pub blob: ::udpros::__private::bytes::Bytes,"));
    assert!(code.contains("pub const KIND: u8 = 3;"));
    assert!(code.contains("pub const NAME: &'static str = \"a # b\";"));
    assert!(code.contains("#[serde(crate = \"::udpros::__private::serde\")]"));

    // genmsg's own md5 of the same files.
    if let Some(python) = common::ros_python() {
        let script = r#"
import sys, genmsg, genmsg.msg_loader as ml
ctx = ml.MsgContext.create_default()
search = {p: ['/usr/share/%s/msg' % p] for p in ('std_msgs', 'geometry_msgs')}
search['my_pkg'] = [sys.argv[1]]
for t in ('my_pkg/Custom', 'my_pkg/Other'):
    spec = ml.load_msg_by_type(ctx, t, search)
    ml.load_depends(ctx, spec, search)
    print(genmsg.compute_md5(ctx, spec))
"#;
        let out = Command::new(python)
            .args(["-c", script, root.join("my_pkg").to_str().expect("path")])
            .output()
            .expect("genmsg");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let sums = String::from_utf8(out.stdout).expect("utf8");
        let sums: Vec<&str> = sums.lines().collect();
        assert_eq!(generated_md5(&code, "my_pkg/Custom"), sums[0]);
        assert_eq!(generated_md5(&code, "my_pkg/Other"), sums[1]);
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn missing_dependencies_are_reported_by_name() {
    let root = std::env::temp_dir().join(format!("udpros-codegen-missing-{}", std::process::id()));
    std::fs::create_dir_all(root.join("pkg_a")).expect("mkdir");
    std::fs::write(root.join("pkg_a/A.msg"), "pkg_b/Nowhere n\n").expect("write");
    let err = udpros::msg::generator()
        .msg_tree(&root)
        .generate()
        .unwrap_err();
    assert!(err.to_string().contains("pkg_b/Nowhere"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}
