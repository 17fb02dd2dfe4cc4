//! Rust code generation for ROS1 `.msg` and `.srv` files, with md5 sums and full
//! definitions computed exactly as genmsg computes them.
//!
//! `udpros`'s own build script uses this crate to generate `udpros::msgs`; a user's
//! `build.rs` uses it for their own message folders, with
//! [`Generator::for_udpros_dependents`], which links the generated code to the message
//! types udpros already ships:
//!
//! ```no_run
//! // build.rs of a crate that depends on udpros, with udpros-codegen as its one
//! // build-dependency
//! let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("msgs.rs");
//! udpros_codegen::Generator::for_udpros_dependents()
//!     .unwrap()
//!     .msg_tree("msg") // msg/<package>/<Type>.msg and <Srv>.srv, all generated
//!     .search_env() // other dependencies from ROS_PACKAGE_PATH, CMAKE_PREFIX_PATH
//!     .write(&out)
//!     .unwrap();
//! println!("cargo:rerun-if-changed=msg");
//! // then in src/main.rs or lib.rs:  include!(concat!(env!("OUT_DIR"), "/msgs.rs"));
//! ```
//!
//! It depends on `std` and `md-5` only, so a build script that uses it does not compile
//! the node library (the repository's `examples/custom_messages` is such a crate).
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod action;
pub mod spec;

mod emit;

use spec::{SpecError, SpecSet};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Collects `.msg` sources and writes one Rust module tree for them.
#[derive(Debug, Clone)]
pub struct Generator {
    crate_path: String,
    /// Folders whose messages are all generated.
    trees: Vec<PathBuf>,
    /// Whole packages to generate, found on the search paths.
    packages: Vec<String>,
    /// Folders searched only for the dependencies of generated messages.
    search: Vec<PathBuf>,
    /// Messages already generated elsewhere: package → Rust module path.
    external: BTreeMap<String, String>,
    external_specs: Vec<(String, String)>,
}

impl Generator {
    /// A generator whose output refers to the udpros library as `crate_path` (`crate`
    /// inside udpros, `::udpros` elsewhere).
    pub fn new(crate_path: &str) -> Generator {
        Generator {
            crate_path: crate_path.to_string(),
            trees: Vec::new(),
            packages: Vec::new(),
            search: Vec::new(),
            external: BTreeMap::new(),
            external_specs: Vec::new(),
        }
    }

    /// The generator for a user's build script, in a crate that depends on udpros: the
    /// output refers to the library as `::udpros`, and the messages udpros ships are linked
    /// to `::udpros::msgs` instead of generated again. It learns them from the
    /// `DEP_UDPROS_MSG_DIR` variable that cargo sets for build scripts of crates that depend
    /// on udpros (udpros declares `links = "udpros"` and exports its `msg/` folder), so the
    /// build script needs this crate only, not the library.
    pub fn for_udpros_dependents() -> Result<Generator, SpecError> {
        let dir = std::env::var_os("DEP_UDPROS_MSG_DIR").ok_or_else(|| {
            SpecError(
                "DEP_UDPROS_MSG_DIR is not set: call this from the build script of a crate that depends on udpros".into(),
            )
        })?;
        let mut shipped = SpecSet::new();
        shipped.load_tree(Path::new(&dir))?;
        let specs: Vec<(String, String)> = shipped
            .iter()
            .map(|s| (s.name.clone(), s.text.clone()))
            .collect();
        Ok(Generator::new("::udpros").external(
            "::udpros::msgs",
            specs.iter().map(|(n, t)| (n.as_str(), t.as_str())),
        ))
    }

    /// Generates every message of a folder laid out as `dir/<package>/<Type>.msg` (or
    /// `dir/<package>/msg/<Type>.msg`, or `dir` itself a package with `msg/`).
    pub fn msg_tree(mut self, dir: impl AsRef<Path>) -> Self {
        self.trees.push(dir.as_ref().to_path_buf());
        self
    }

    /// Generates every message of `package`, found on the search paths.
    pub fn package(mut self, package: &str) -> Self {
        self.packages.push(package.to_string());
        self
    }

    /// Searches `dir` (same layouts as [`Generator::msg_tree`]) for dependencies.
    pub fn search_path(mut self, dir: impl AsRef<Path>) -> Self {
        self.search.push(dir.as_ref().to_path_buf());
        self
    }

    /// Searches where ROS installs messages: each `ROS_PACKAGE_PATH` entry, each
    /// `CMAKE_PREFIX_PATH` entry's `share` folder, and `/usr/share` (Debian's ROS packages).
    pub fn search_env(mut self) -> Self {
        self.search.extend(ros_search_paths());
        self
    }

    /// Declares messages that are already generated elsewhere, under the Rust module path
    /// `module_prefix::<package>::<Type>`; their texts are needed for md5 sums and
    /// definitions but no code is written for them.
    pub fn external<'a>(
        mut self,
        module_prefix: &str,
        specs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        for (name, text) in specs {
            if let Some((package, _)) = name.split_once('/') {
                self.external
                    .insert(package.to_string(), format!("{module_prefix}::{package}"));
            }
            self.external_specs
                .push((name.to_string(), text.to_string()));
        }
        self
    }

    /// Resolves everything and returns the generated Rust source.
    pub fn generate(&self) -> Result<String, SpecError> {
        let mut set = SpecSet::new();
        for (name, text) in &self.external_specs {
            set.insert(spec::MsgSpec::parse(name, text)?);
        }
        let mut own = SpecSet::new();
        for tree in &self.trees {
            own.load_tree(tree)?;
        }
        for package in &self.packages {
            let dir = self.find_package(package).ok_or_else(|| {
                SpecError(format!("package {package} not found on the search paths"))
            })?;
            own.load_package_dir(package, &dir)?;
        }
        let mut wanted: BTreeSet<String> = own.iter().map(|s| s.name.clone()).collect();
        for spec in own.iter() {
            set.insert(spec.clone());
        }
        for srv in own.services() {
            set.insert_service(srv.clone());
        }
        set.actions.extend(own.actions.iter().cloned());
        for dep in resolve_dependencies(&mut set, &self.search_and_trees())? {
            if !self
                .external
                .contains_key(dep.split('/').next().unwrap_or(""))
            {
                wanted.insert(dep);
            }
        }
        emit::emit(&set, &wanted, &self.external, &self.crate_path)
    }

    /// Generates and writes the source to `path` (only when it changed, to spare rebuilds).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), SpecError> {
        let code = self.generate()?;
        let path = path.as_ref();
        if std::fs::read_to_string(path).ok().as_deref() != Some(code.as_str()) {
            std::fs::write(path, code)
                .map_err(|e| SpecError(format!("cannot write {}: {e}", path.display())))?;
        }
        Ok(())
    }

    fn search_and_trees(&self) -> Vec<PathBuf> {
        self.search
            .iter()
            .chain(self.trees.iter())
            .cloned()
            .collect()
    }

    fn find_package(&self, package: &str) -> Option<PathBuf> {
        find_package(&self.search_and_trees(), package)
    }
}

fn find_package(search: &[PathBuf], package: &str) -> Option<PathBuf> {
    search
        .iter()
        .find_map(|root| spec::find_package_dir(root, package))
}

/// Loads the messages `set` depends on but lacks from the `search` folders until it is
/// closed; returns the names added.
pub fn resolve_dependencies(
    set: &mut SpecSet,
    search: &[PathBuf],
) -> Result<Vec<String>, SpecError> {
    let mut added = Vec::new();
    loop {
        let missing: BTreeSet<String> = set
            .iter()
            .flat_map(|s| s.direct_dependencies().into_iter().map(str::to_string))
            .filter(|d| !set.contains(d))
            .collect();
        if missing.is_empty() {
            return Ok(added);
        }
        for dep in missing {
            load_message(set, search, &dep)?;
            added.push(dep);
        }
    }
}

/// Finds `pkg/Type.msg` in the `search` folders and adds it to `set`; a message an action
/// makes (`pkg/NameActionGoal`, `pkg/NameFeedback`...) comes from `pkg/action/Name.action`
/// when no `.msg` file has it, with the action's other six messages.
pub fn load_message(set: &mut SpecSet, search: &[PathBuf], name: &str) -> Result<(), SpecError> {
    let (package, short) = spec::split_type_name(name)?;
    let file = find_package(search, package)
        .map(|d| d.join(format!("{short}.msg")))
        .filter(|f| f.is_file());
    let Some(file) = file else {
        if let Some((action, file)) = find_action_file(search, package, short) {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| SpecError(format!("cannot read {}: {e}", file.display())))?;
            return set.insert_action(&action, &text);
        }
        return Err(SpecError(format!(
            "message {name} not found on the search paths"
        )));
    };
    let text = std::fs::read_to_string(&file)
        .map_err(|e| SpecError(format!("cannot read {}: {e}", file.display())))?;
    set.insert(spec::MsgSpec::parse(name, &text)?);
    Ok(())
}

/// The action (`pkg/Name`) whose `.action` file makes the message `short` of `package`,
/// and that file, looked for as `<root>/<package>/action/Name.action` or
/// `<root>/<package>/Name.action`.
fn find_action_file(search: &[PathBuf], package: &str, short: &str) -> Option<(String, PathBuf)> {
    const SUFFIXES: [&str; 7] = [
        "ActionGoal",
        "ActionResult",
        "ActionFeedback",
        "Action",
        "Goal",
        "Result",
        "Feedback",
    ];
    SUFFIXES
        .iter()
        .filter_map(|suffix| short.strip_suffix(suffix).filter(|b| !b.is_empty()))
        .find_map(|base| {
            search.iter().find_map(|root| {
                let dir = root.join(package);
                [dir.join("action"), dir]
                    .into_iter()
                    .map(|d| d.join(format!("{base}.action")))
                    .find(|f| f.is_file())
                    .map(|f| (format!("{package}/{base}"), f))
            })
        })
}

/// Folders where ROS installs message packages, in the order roslib searches them.
pub fn ros_search_paths() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(paths) = std::env::var("ROS_PACKAGE_PATH") {
        out.extend(
            paths
                .split(':')
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
        );
    }
    if let Ok(paths) = std::env::var("CMAKE_PREFIX_PATH") {
        out.extend(
            paths
                .split(':')
                .filter(|p| !p.is_empty())
                .map(|p| Path::new(p).join("share")),
        );
    }
    out.push(PathBuf::from("/usr/share"));
    out
}
