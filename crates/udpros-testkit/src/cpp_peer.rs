//! Builds a roscpp program from one C++ file: the bench's roscpp peer and the interop
//! tests', the same way.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where built peers go: `udpros-peers/` in the target folder of the running program (a
/// test binary in `target/<profile>/deps`, or the `udpros` tool in `target/<profile>`).
pub fn out_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut dir = exe.parent().ok_or("no folder for the running program")?;
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir.parent().ok_or("no profile folder")?;
    }
    Ok(dir.join("udpros-peers"))
}

/// [`build`]s `source` into [`out_dir`]`/name` unless a build newer than the source is
/// there; parallel test binaries build it once (the first takes a lock directory, the
/// others wait up to three minutes for it).
pub fn build_once(source: &Path, name: &str, packages: &[&str]) -> Result<PathBuf, String> {
    let out_dir = out_dir()?;
    let binary = out_dir.join(name);
    let fresh = |b: &PathBuf| {
        let built = std::fs::metadata(b).and_then(|m| m.modified());
        let src = std::fs::metadata(source).and_then(|m| m.modified());
        matches!((built, src), (Ok(b), Ok(s)) if b >= s)
    };
    if fresh(&binary) {
        return Ok(binary);
    }
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let lock = out_dir.join(format!("{name}.lock"));
    let got_lock = crate::wait_for(Duration::from_secs(180), || {
        std::fs::create_dir(&lock).is_ok()
    });
    if fresh(&binary) {
        let _ = std::fs::remove_dir(&lock);
        return Ok(binary);
    }
    if !got_lock {
        return Err(format!("timed out waiting for another build of {name}"));
    }
    let result = build(source, &binary, packages).map(|()| binary);
    let _ = std::fs::remove_dir(&lock);
    result
}

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
