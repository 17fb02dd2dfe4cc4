//! Generates the Rust types of the messages under `msg/` with the same code generator the
//! library offers its users (the `udpros-codegen` crate).

use udpros_codegen as codegen;

fn main() {
    println!("cargo:rerun-if-changed=msg");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("msgs.rs");
    if let Err(e) = codegen::Generator::new("crate").msg_tree("msg").write(&out) {
        panic!("message code generation failed: {e}");
    }
}
