//! Builds a roscpp program from one C++ file: the bench's roscpp peer and the interop tests'
//! (the tests include this file by path, so both build their peers the same way).

use std::path::Path;
use std::process::Command;

/// Compiles `source` against the pkg-config `packages` into `binary`. The compiler writes
/// beside it first and the result is renamed into place, so a concurrent reader never sees a
/// half-written program.
pub fn build(source: &Path, binary: &Path, packages: &[&str]) -> Result<(), String> {
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs"])
        .args(packages)
        .output()
        .map_err(|e| format!("pkg-config: {e}"))?;
    if !flags.status.success() {
        return Err(format!(
            "pkg-config does not find {} (install the ROS development packages, see .ci/run)",
            packages.join(", ")
        ));
    }
    let flags = String::from_utf8_lossy(&flags.stdout).to_string();
    let partial = binary.with_extension(format!("partial.{}", std::process::id()));
    let status = Command::new("g++")
        .args(["-O2", "-std=c++17", "-o"])
        .arg(&partial)
        .arg(source)
        .args(flags.split_whitespace())
        .status()
        .map_err(|e| format!("g++: {e}"))?;
    if !status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(format!("g++ could not build {}", source.display()));
    }
    std::fs::rename(&partial, binary).map_err(|e| format!("{}: {e}", binary.display()))
}
