//! `udpros msg export DIR`: the message packages udpros defines and stock ROS lacks
//! (`udpros`, and the part of `mavros_msgs` the bridges publish) as ROS packages, with the
//! Python classes genpy generates for them, so that `rostopic echo`, `rosbag`, `rosmsg` and
//! rqt read udpros's topics; and the manifests of packages whose Python ROS installed
//! without one (dynamic_reconfigure on Debian), so that `dynparam` finds its package.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use udpros::msg::MessageInfo;

/// Where a ROS installation keeps a package's `.msg` files, if this machine has it.
fn installed_msg_dir(package: &str) -> Option<PathBuf> {
    let mut roots: Vec<PathBuf> = std::env::var("ROS_PACKAGE_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect();
    roots.push(PathBuf::from("/usr/share"));
    roots.extend(
        std::fs::read_dir("/opt/ros")
            .into_iter()
            .flatten()
            .flatten()
            .map(|d| d.path().join("share")),
    );
    roots
        .into_iter()
        .map(|root| root.join(package))
        .find(|dir| dir.join("package.xml").is_file())
        .map(|dir| dir.join("msg"))
}

/// The packages udpros ships messages of, each with its messages.
fn packages() -> BTreeMap<&'static str, Vec<&'static MessageInfo>> {
    let mut packages: BTreeMap<&str, Vec<&MessageInfo>> = BTreeMap::new();
    for m in udpros::msgs::MESSAGES {
        if let Some((package, _)) = m.type_name.split_once('/') {
            packages.entry(package).or_default().push(m);
        }
    }
    packages
}

fn package_xml(package: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\n<package format=\"2\">\n  <name>{package}</name>\n  <version>0.1.0</version>\n  <description>Exported by `udpros msg export` for stock ROS tools.</description>\n  <maintainer email=\"udpros@example.com\">udpros</maintainer>\n  <license>MIT OR Apache-2.0</license>\n  <buildtool_depend>catkin</buildtool_depend>\n  <depend>std_msgs</depend>\n</package>\n"
    )
}

/// Whether `python` already imports a Python package of this name (Debian's python3-*-msgs,
/// dynamic_reconfigure's, std_srvs's): such a package is never exported, or our classes
/// would shadow the installed module and what else it holds.
fn importable(python: &Path, package: &str) -> bool {
    Command::new(python)
        .args(["-c", &format!("import {package}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Writes `DIR/share/PKG/{package.xml,msg/*.msg}` for every package udpros defines whose
/// messages `python` cannot import, then `DIR/python/PKG/msg/` with genpy (run by `python`,
/// which must have genpy: Debian's `/usr/bin/python3` with python3-genpy). Returns the
/// packages exported.
pub fn export(dir: &Path, python: &Path) -> Result<Vec<String>, String> {
    let genpy_works = Command::new(python)
        .args(["-c", "import genpy.genpy_main"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !genpy_works {
        return Err(format!(
            "{} has no genpy: install python3-genpy, or set UDPROS_ROS_PYTHON to a Python that has it",
            python.display()
        ));
    }
    let all = packages();
    let exported: BTreeSet<&str> = all
        .keys()
        .copied()
        .filter(|p| !importable(python, p))
        .collect();
    // Packages Python has but rospack cannot find (Debian installs dynamic_reconfigure's
    // Python without its package.xml, which dynparam asks rospack for): their manifest and
    // .msg files only, no Python.
    let manifest_only: BTreeSet<&str> = all
        .keys()
        .copied()
        .filter(|p| !exported.contains(p) && installed_msg_dir(p).is_none())
        .collect();
    let share = dir.join("share");
    let io = |what: &Path, e: std::io::Error| format!("{}: {e}", what.display());
    for package in exported.iter().chain(&manifest_only) {
        let msg_dir = share.join(package).join("msg");
        std::fs::create_dir_all(&msg_dir).map_err(|e| io(&msg_dir, e))?;
        let xml = share.join(package).join("package.xml");
        std::fs::write(&xml, package_xml(package)).map_err(|e| io(&xml, e))?;
        for m in &all[package] {
            let name = m.type_name.split_once('/').map_or(m.type_name, |(_, n)| n);
            let file = msg_dir.join(format!("{name}.msg"));
            std::fs::write(&file, m.text).map_err(|e| io(&file, e))?;
        }
    }
    // genpy resolves dependencies through -I package:dir, for every package a message may
    // name: the exported ones here, the others where ROS installed them.
    let includes: Vec<String> = all
        .keys()
        .filter_map(|p| {
            let dir = if exported.contains(p) || manifest_only.contains(p) {
                share.join(p).join("msg")
            } else {
                installed_msg_dir(p)?
            };
            Some(format!("{p}:{}", dir.display()))
        })
        .collect();
    const GENPY: &str = "import sys, genpy.genpy_main, genpy.generator; \
                         genpy.genpy_main.genmain(sys.argv[1:], 'genmsg_py.py', genpy.generator.MsgGenerator())";
    for package in &exported {
        let out = dir.join("python").join(package).join("msg");
        let mut files: Vec<PathBuf> = all[package]
            .iter()
            .map(|m| {
                let name = m.type_name.split_once('/').map_or(m.type_name, |(_, n)| n);
                share.join(package).join("msg").join(format!("{name}.msg"))
            })
            .collect();
        files.sort();
        let mut genpy = Command::new(python);
        genpy.args(["-c", GENPY, "genmsg_py.py", "-p", package, "-o"]);
        genpy.arg(&out);
        for include in &includes {
            genpy.args(["-I", include]);
        }
        genpy.args(&files);
        run(genpy, package)?;
        let mut init = Command::new(python);
        init.args(["-c", GENPY, "genmsg_py.py", "--initpy", "-p", package, "-o"]);
        init.arg(&out);
        run(init, package)?;
        let top = dir.join("python").join(package).join("__init__.py");
        std::fs::write(&top, "").map_err(|e| io(&top, e))?;
    }
    Ok(exported
        .iter()
        .map(|p| p.to_string())
        .chain(manifest_only.iter().map(|p| format!("{p} (manifest only)")))
        .collect())
}

fn run(mut cmd: Command, package: &str) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run genpy for {package}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "genpy failed for {package}: {}",
            err.trim().lines().last().unwrap_or("")
        ))
    }
}
