//! The commands the README, the book and CONTRIBUTING show are commands the programs
//! take. Most cannot run in a test (a sonar on a serial port, a 20-minute benchmark as
//! root, a master on another machine), so each is checked as far as it can be without
//! running it: `udpros` lines are parsed by the tool's own parser, the nodes' lines name
//! only parameters the node documents in its `--help` (and a device or `fcu_url` that
//! parses), a fuzz target exists. A shown line of any other program must be one of the
//! foreign commands listed here, so that no new line goes unchecked.

use crate::Cli;
use clap::Parser;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use udpros_bridges::mavlink::url::FcuUrl;
use udpros_bridges::ping::link::LinkSpec;

/// Lines of other programs, by their first words: ROS's tools, the shell, cargo's own.
const FOREIGN: &[&str] = &[
    "export",
    "rostopic",
    "rosnode",
    "python3",
    ".",
    "pip install",
    "maturin build",
    "cargo build",
    "cargo test",
    "cargo bench",
    "cargo install",
    "cargo fuzz list",
    "bash .ci/run",
];

/// The nodes of `udpros-bridges` and the help that documents their parameters.
fn node_help(name: &str) -> Option<&'static str> {
    match name {
        "ping_sonar" => Some(udpros_bridges::ping::node::HELP),
        "ping360_node" => Some(udpros_bridges::ping::ping360_sonar::HELP),
        "mavlink_bridge" => Some(udpros_bridges::mavlink::node::HELP),
        _ => None,
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every line of every `sh` block of the documents, with the file it is in.
fn shown_lines() -> Vec<(String, String)> {
    let root = workspace();
    let mut files = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut dirs = vec![root.join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        files.push(entry.path().join("README.md"));
    }
    let mut lines = Vec::new();
    for file in files.into_iter().filter(|f| f.exists()) {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut in_sh = false;
        for line in text.lines() {
            if let Some(fence) = line.strip_prefix("```") {
                in_sh = !in_sh && fence.trim() == "sh";
            } else if in_sh && !line.trim().is_empty() {
                let shown = file.strip_prefix(&root).unwrap_or(&file).display();
                lines.push((shown.to_string(), line.to_string()));
            }
        }
    }
    lines
}

/// A shell line's words: double quotes group, an unquoted `#` after a space starts a
/// comment. Enough for the documents' lines (a test fails on one it cannot split).
fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted, mut started) = (Vec::new(), String::new(), false, false);
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            '#' if !quoted && !started => break,
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    assert!(!quoted, "an unclosed quote in {line:?}");
    if started {
        words.push(word);
    }
    // A command run in the background (`udpros demo &`): the `&` is the shell's.
    if words.last().is_some_and(|w| w == "&") {
        words.pop();
    }
    words
}

/// What a shown line runs.
#[derive(Debug, PartialEq)]
enum Shown {
    /// `udpros` with these arguments.
    Tool(Vec<String>),
    /// A node of `udpros-bridges` with these arguments.
    Node(String, Vec<String>),
    /// `cargo fuzz run` of this target.
    Fuzz(String),
    /// Another program (see [`FOREIGN`]).
    Foreign,
}

fn classify(words: &[String]) -> Result<Shown, String> {
    // Environment assignments and sudo (with its flags) come before the program.
    let mut rest: Vec<&str> = words.iter().map(String::as_str).collect();
    while let Some(first) = rest.first() {
        let assignment = first.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        });
        if assignment || *first == "sudo" || (first.starts_with('-') && rest.len() > 1) {
            rest.remove(0);
        } else {
            break;
        }
    }
    let line = rest.join(" ");
    if FOREIGN
        .iter()
        .any(|f| line == *f || line.starts_with(&format!("{f} ")))
    {
        return Ok(Shown::Foreign);
    }
    let owned = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    match rest.as_slice() {
        ["cargo", "run", after @ ..] => {
            let split = after.iter().position(|w| *w == "--");
            let (options, args) = match split {
                Some(i) => (&after[..i], &after[i + 1..]),
                None => (after, &[][..]),
            };
            let bin = options
                .iter()
                .position(|w| *w == "--bin")
                .and_then(|i| options.get(i + 1));
            match bin {
                None | Some(&"udpros") => Ok(Shown::Tool(owned(args))),
                Some(node) if node_help(node).is_some() => {
                    Ok(Shown::Node(node.to_string(), owned(args)))
                }
                Some(other) => Err(format!("no program {other} in this workspace")),
            }
        }
        ["cargo", "fuzz", "run", "--fuzz-dir", "fuzz", target, ..] => {
            Ok(Shown::Fuzz(target.to_string()))
        }
        [program, args @ ..] => {
            let name = program.rsplit('/').next().unwrap_or(program);
            if name == "udpros" {
                Ok(Shown::Tool(owned(args)))
            } else if node_help(name).is_some() {
                Ok(Shown::Node(name.to_string(), owned(args)))
            } else {
                Err(format!(
                    "{program} is none of udpros's programs nor a foreign one this test knows"
                ))
            }
        }
        [] => Err("an empty command".into()),
    }
}

/// Whether `word` is a word of `help` (split at spaces, commas and brackets).
fn documented(help: &str, word: &str) -> bool {
    help.split(|c: char| c.is_whitespace() || ",()[]".contains(c))
        .any(|w| w == word)
}

fn check_node(node: &str, args: &[String]) -> Result<(), String> {
    let help = node_help(node).expect("a node");
    for arg in args {
        let Some((name, value)) = arg.split_once(":=") else {
            return Err(format!("{arg}: not a ROS argument (NAME:=VALUE)"));
        };
        if let Some(special) = name.strip_prefix("__") {
            if !["name", "ns", "ip", "hostname", "master", "log"].contains(&special) {
                return Err(format!("{name}: no such special argument"));
            }
        } else if let Some(parameter) = name.strip_prefix('_') {
            if !documented(help, parameter) {
                return Err(format!(
                    "~{parameter}: {node}'s --help has no such parameter"
                ));
            }
            match parameter {
                "device" => LinkSpec::from_str(value).map(drop)?,
                "fcu_url" => FcuUrl::from_str(value)
                    .map(drop)
                    .map_err(|e| e.to_string())?,
                _ => {}
            }
        } else if !documented(help, name) {
            return Err(format!(
                "{name}: a remap of a name {node}'s --help does not list"
            ));
        }
    }
    Ok(())
}

fn check(shown: &Shown) -> Result<(), String> {
    match shown {
        Shown::Tool(args) => {
            // The tool takes ROS arguments out first, as rospy's myargv does.
            let own = args.iter().filter(|a| !a.contains(":="));
            let argv = std::iter::once("udpros".to_string()).chain(own.cloned());
            Cli::try_parse_from(argv)
                .map(drop)
                .map_err(|e| e.to_string())
        }
        Shown::Node(node, args) => check_node(node, args),
        Shown::Fuzz(target) => {
            let path = workspace().join(format!("fuzz/fuzz_targets/{target}.rs"));
            match path.exists() {
                true => Ok(()),
                false => Err(format!("no fuzz target {target}")),
            }
        }
        Shown::Foreign => Ok(()),
    }
}

#[test]
fn every_command_shown_is_one_its_program_takes() {
    let lines = shown_lines();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (file, line) in &lines {
        let outcome = classify(&words(line)).and_then(|shown| {
            checked += usize::from(shown != Shown::Foreign);
            check(&shown)
        });
        if let Err(e) = outcome {
            failures.push(format!("{file}: {line}\n    {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The documents show dozens of commands; finding few means the search broke.
    assert!(
        checked >= 25,
        "only {checked} of {} lines checked",
        lines.len()
    );
}

#[test]
fn the_check_refuses_what_its_programs_would() {
    let refused = [
        "udpros topic hertz /depth",
        "cargo run --release -- bench run --sceanrios S8",
        "udpros view --allow-publish",
        "ping_sonar _device:=usb:/dev/ttyUSB0",
        "ping_sonar _rang:=30",
        "mavlink_bridge _fcu_url:=udp://:14540@localhost:notaport",
        "cargo run --bin sonar_node",
        "RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz no_such_target",
        "roslaunch udpros demo.launch",
    ];
    for line in refused {
        let outcome = classify(&words(line)).and_then(|shown| check(&shown));
        assert!(outcome.is_err(), "{line} passed the check");
    }
    assert_eq!(
        words(r#"a "4 Mbit" b # c"#),
        vec!["a".to_string(), "4 Mbit".into(), "b".into()]
    );
}
