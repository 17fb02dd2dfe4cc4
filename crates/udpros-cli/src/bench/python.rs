//! The bench's Python subscribers: stock rospy (TCPROS), rospy with `import udpros.rospy`,
//! and the `udpros` package's own node. One script (`python_peer.py`, carried in this
//! binary and written into the run's folder) with the bench peers' arguments and output,
//! run by a Python that has rospy and the wheel: `UDPROS_BENCH_PYTHON`, else the
//! repository's `.venv-ros` (which `.ci/run` makes).

use std::path::{Path, PathBuf};
use std::process::Command;

const SCRIPT: &str = include_str!("python_peer.py");

/// The Python subscriber kinds, as pairs and rows name them.
pub(super) const KINDS: [&str; 3] = ["python", "rospy+udpros", "rospy"];

/// Whether `kind` is one of the Python subscribers.
pub(super) fn is_python(kind: &str) -> bool {
    KINDS.contains(&kind)
}

/// A Python that runs the script, and the script.
#[derive(Debug, Clone)]
pub(super) struct PythonPeer {
    python: PathBuf,
    script: PathBuf,
}

impl PythonPeer {
    /// The Python peers, once their Python imports rospy, sensor_msgs and the wheel;
    /// `None` (said on stderr, with why) otherwise.
    pub(super) fn find(folder: &Path) -> Option<PythonPeer> {
        let python = std::env::var_os("UDPROS_BENCH_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-ros/bin/python")
            });
        let check = Command::new(&python)
            .args(["-c", "import rospy, sensor_msgs.msg, udpros._udpros"])
            .output();
        match check {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                let why = String::from_utf8_lossy(&out.stderr);
                let why = why.lines().last().unwrap_or("");
                eprintln!("Python peers left out: {} cannot import rospy and udpros ({why}); set UDPROS_BENCH_PYTHON", python.display());
                return None;
            }
            Err(e) => {
                eprintln!("Python peers left out: {}: {e}; set UDPROS_BENCH_PYTHON to a Python with rospy and the udpros wheel", python.display());
                return None;
            }
        }
        let script = folder.join("python_peer.py");
        if let Err(e) = std::fs::write(&script, SCRIPT) {
            eprintln!("Python peers left out: {}: {e}", script.display());
            return None;
        }
        Some(PythonPeer { python, script })
    }

    /// The Python program, for a command made elsewhere (in a network namespace);
    /// [`args`](Self::args) go first.
    pub(super) fn python(&self) -> &Path {
        &self.python
    }

    /// The arguments that start `kind`'s peer.
    pub(super) fn args(&self, kind: &str) -> [std::ffi::OsString; 2] {
        [self.script.clone().into(), kind.into()]
    }
}
