//! The README and the book under `docs/`: the code they show is the examples CI builds and
//! runs, verbatim, and every link between them and to the repository's files resolves.

use std::collections::BTreeSet;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every page of the book, with their paths.
fn documents() -> Vec<(PathBuf, String)> {
    let mut pages = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    pages
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// The examples the README and the book show (under `examples/`), with the language of
/// their blocks; the Python package's under `python/examples/`, which its tests run.
const SHOWN: [(&str, &str); 13] = [
    ("../python/examples/talker.py", "python"),
    ("../python/examples/listener.py", "python"),
    ("../python/examples/callback_listener.py", "python"),
    ("../python/examples/rospy_listener.py", "python"),
    ("../python/examples/ping1d_depth.py", "python"),
    ("talker.rs", "rust"),
    ("listener.rs", "rust"),
    ("service_server.rs", "rust"),
    ("service_client.rs", "rust"),
    ("custom_messages/Cargo.toml", "toml"),
    ("custom_messages/build.rs", "rust"),
    ("custom_messages/src/bin/fibonacci_server.rs", "rust"),
    ("custom_messages/src/bin/fibonacci_client.rs", "rust"),
];

/// Every Rust, TOML or Python block of the README and the book is an example (which CI builds and
/// runs) verbatim, and each example is shown somewhere: no snippet nobody executed.
#[test]
fn the_code_shown_is_the_examples_verbatim() {
    let documents = documents();
    let mut sources = Vec::new();
    for (file, language) in SHOWN {
        let source = std::fs::read_to_string(root().join("examples").join(file)).unwrap();
        let block = format!("```{language}\n{source}```");
        assert!(
            documents.iter().any(|(_, text)| text.contains(&block)),
            "examples/{file} is shown nowhere verbatim"
        );
        sources.push(source);
    }
    for (path, text) in &documents {
        for (language, body) in fenced_blocks(text) {
            if ["rust", "toml", "python"].contains(&language.as_str()) {
                assert!(
                    sources.contains(&body),
                    "{}: a {language} block that is no example:\n{body}",
                    path.display()
                );
            }
        }
    }
}

/// The book's contents list every page, and nothing it lists is missing.
#[test]
fn the_book_lists_every_page() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = links(&summary)
        .into_iter()
        .map(|target| src.join(target))
        .collect();
    for (path, _) in documents() {
        if path.starts_with(&src) && !path.ends_with("SUMMARY.md") {
            assert!(
                listed.contains(&path),
                "{} is in no chapter of SUMMARY.md",
                path.display()
            );
        }
    }
    for path in &listed {
        assert!(
            path.is_file(),
            "SUMMARY.md lists {}, which is missing",
            path.display()
        );
    }
}

/// Every relative link of the README and the book reaches a file of the repository, and
/// every `#anchor` a heading of its page.
#[test]
fn every_link_resolves() {
    let mut checked = 0;
    for (path, text) in documents() {
        let dir = path.parent().unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let linked = if file.is_empty() {
                path.clone()
            } else {
                dir.join(file)
            };
            assert!(
                linked.exists(),
                "{}: the link to {target} reaches nothing",
                path.display()
            );
            if let Some(anchor) = anchor {
                let page = std::fs::read_to_string(&linked).unwrap();
                assert!(
                    headings(&page).iter().any(|h| slug(h) == anchor),
                    "{}: {target} names no heading of {}",
                    path.display(),
                    linked.display()
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: the reader is broken"
    );
}

/// A link's target reads back through `slug` and `links` as written.
#[test]
fn links_and_slugs_read_as_markdown_does() {
    assert_eq!(
        links("see [a](x.md), ![b](y.svg) and [c](https://e.org/) `[d](no)`"),
        ["x.md", "y.svg", "https://e.org/"]
    );
    assert_eq!(slug("The `udpros` tool"), "the-udpros-tool");
    assert_eq!(
        slug("S10, the narrow radio (one run)"),
        "s10-the-narrow-radio-one-run"
    );
}

/// The targets of the markdown links of `text`, outside code blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans are not links.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, part)| part)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    targets
}

/// The headings of a page, outside code blocks.
fn headings(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            found.push(line.trim_start_matches('#').trim().to_string());
        }
    }
    found
}

/// A heading's anchor as mdBook and GitHub make it: lower case, spaces to dashes, other
/// punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The fenced blocks of a markdown text, with their info strings; fails on a fence left
/// open or one that opens inside a block.
fn fenced_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        match &mut open {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    open = Some((info.trim().to_string(), String::new()));
                }
            }
            Some(_) if line == "```" => blocks.extend(open.take()),
            Some(_) if line.starts_with("```") => {
                panic!("a fence opens inside a block (one before it was not closed): {line}")
            }
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    assert!(open.is_none(), "a fence left open: {open:?}");
    blocks
}
