//! Generates the Rust types of the messages under `msg/` with the same code generator the
//! library offers its users (the `udpros-codegen` crate).

use udpros_codegen as codegen;

fn main() {
    println!("cargo:rerun-if-changed=msg");
    // `links = "udpros"` makes this DEP_UDPROS_MSG_DIR in the build scripts of crates that
    // depend on udpros: their generator links to these types instead of generating them.
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!(
        "cargo:msg_dir={}",
        std::path::Path::new(&manifest).join("msg").display()
    );
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("msgs.rs");
    if let Err(e) = codegen::Generator::new("crate").msg_tree("msg").write(&out) {
        panic!("message code generation failed: {e}");
    }
}
