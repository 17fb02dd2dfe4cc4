//! The recording's file names, as rosbag chooses them: `-O NAME`, `-o PREFIX_` and a local
//! date and time, `_N` per split. A file is written as `NAME.active` and renamed when it
//! is closed; neither name may exist before (nothing of the user's is overwritten).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

/// How the recording's files are named.
pub(super) struct Naming {
    /// The name without its extension (`dive`, `logs/dive_2026-11-30-07-00-00`).
    stem: String,
    extension: &'static str,
    split: bool,
}

impl Naming {
    pub(super) fn new(
        name: Option<&str>,
        prefix: Option<&str>,
        bag: bool,
        split: bool,
    ) -> Result<Naming, String> {
        let extension = if bag { "bag" } else { "mcap" };
        let stem = match (name, prefix) {
            (Some(name), _) => {
                let name = name.strip_suffix(&format!(".{extension}")).unwrap_or(name);
                if name.is_empty() || name.ends_with('/') {
                    return Err(format!("-O {name:?}: a file name"));
                }
                name.to_string()
            }
            (None, Some(prefix)) => format!("{prefix}_{}", local_stamp()),
            (None, None) => local_stamp(),
        };
        Ok(Naming {
            stem,
            extension,
            split,
        })
    }

    /// The `index`th file's final name (`NAME.mcap`, or `NAME_3.mcap` when splitting).
    pub(super) fn path(&self, index: u64) -> PathBuf {
        if self.split {
            PathBuf::from(format!("{}_{index}.{}", self.stem, self.extension))
        } else {
            PathBuf::from(format!("{}.{}", self.stem, self.extension))
        }
    }
}

/// The name a file has while it is written.
pub(super) fn active(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".active");
    PathBuf::from(name)
}

/// Creates `path`'s `.active` file, refusing if it or `path` exists.
pub(super) fn create(path: &Path) -> Result<File, String> {
    if path.exists() {
        return Err(format!(
            "{} exists; choose another name (-O) or move it away",
            path.display()
        ));
    }
    let active = active(path);
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&active)
        .map_err(|e| format!("cannot create {}: {e}", active.display()))
}

/// Gives the closed file its final name.
pub(super) fn close(path: &Path) -> Result<(), String> {
    if path.exists() {
        return Err(format!(
            "{} appeared while recording; the recording stays {}",
            path.display(),
            active(path).display()
        ));
    }
    std::fs::rename(active(path), path)
        .map_err(|e| format!("cannot rename {}: {e}", active(path).display()))
}

/// The local date and time as rosbag names files: `2026-11-30-07-00-00`.
fn local_stamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as libc::time_t)
        .unwrap_or(0);
    // SAFETY: `localtime_r` writes only into the `tm` it is given; both live here.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let converted = unsafe { !libc::localtime_r(&now, &mut tm).is_null() };
    if !converted {
        return format!("{now}");
    }
    format!(
        "{:04}-{:02}-{:02}-{:02}-{:02}-{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}
