//! Generates Rust types for `msg/tutorial_msgs/*.msg`; the types they use from packages
//! udpros ships (`std_msgs/Header`, `geometry_msgs/Point`) are udpros's own.

fn main() {
    println!("cargo:rerun-if-changed=msg");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"))
        .join("msgs.rs");
    let generated = udpros_codegen::Generator::for_udpros_dependents()
        .and_then(|generator| generator.msg_tree("msg").write(&out));
    if let Err(e) = generated {
        panic!("generating the messages of msg/: {e}");
    }
}
