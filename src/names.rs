//! ROS graph names: canonical forms, namespaces, and resolution of relative, private (`~`)
//! and global names, with remapping, as `rosgraph.names` and roscpp's `ros::names` do.

use std::collections::BTreeMap;

/// The separator of graph-name parts.
pub const SEP: char = '/';

/// `/a//b/` → `/a/b`; relative names stay relative.
pub fn canonicalize(name: &str) -> String {
    if name.is_empty() || name == "/" {
        return name.to_string();
    }
    let parts: Vec<&str> = name.split(SEP).filter(|p| !p.is_empty()).collect();
    if name.starts_with(SEP) {
        format!("/{}", parts.join("/"))
    } else {
        parts.join("/")
    }
}

/// `/name`: resolved as written.
pub fn is_global(name: &str) -> bool {
    name.starts_with(SEP)
}

/// `~name`: resolved in the node's own namespace.
pub fn is_private(name: &str) -> bool {
    name.starts_with('~')
}

/// The namespace of `name`, with a trailing slash: `/a/b` → `/a/`, `/a` → `/`.
pub fn namespace(name: &str) -> String {
    let trimmed = name.strip_suffix(SEP).unwrap_or(name);
    match trimmed.rfind(SEP) {
        Some(i) => trimmed[..=i].to_string(),
        None => "/".to_string(),
    }
}

/// Joins a namespace and a name, leaving global and private names alone.
pub fn ns_join(ns: &str, name: &str) -> String {
    if is_private(name) || is_global(name) {
        name.to_string()
    } else if ns == "~" {
        format!("~{name}")
    } else if ns.is_empty() {
        name.to_string()
    } else if ns.ends_with(SEP) {
        format!("{ns}{name}")
    } else {
        format!("{ns}/{name}")
    }
}

/// `rosgraph.names.resolve_name`: `name` resolved for the node `node_name` (whose
/// namespace relative names live in, and under which private names live). An empty name
/// resolves to the node's namespace.
pub fn resolve(name: &str, node_name: &str) -> String {
    if name.is_empty() {
        return namespace(node_name);
    }
    let name = canonicalize(name);
    if is_global(&name) {
        name
    } else if let Some(private) = name.strip_prefix('~') {
        canonicalize(&format!("{node_name}/{private}"))
    } else {
        format!("{}{}", namespace(node_name), name)
    }
}

/// Remappings (`from:=to`), both sides resolved for one node, applied after resolution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remappings {
    map: BTreeMap<String, String>,
}

impl Remappings {
    /// Resolves each pair for `node_name`, as roscpp does at init.
    pub fn new<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        node_name: &str,
    ) -> Remappings {
        let map = pairs
            .into_iter()
            .map(|(from, to)| (resolve(from, node_name), resolve(to, node_name)))
            .collect();
        Remappings { map }
    }

    /// Where the resolved name `resolved` is remapped to, if anywhere.
    pub fn get(&self, resolved: &str) -> Option<&str> {
        self.map.get(resolved).map(String::as_str)
    }

    /// Every remapping, `(from, to)`, both resolved.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Resolves `name` for `node_name`, then applies the remapping of the result.
    pub fn resolve(&self, name: &str, node_name: &str) -> String {
        let resolved = resolve(name, node_name);
        self.map.get(&resolved).cloned().unwrap_or(resolved)
    }
}

/// A legal graph resource name: a letter, `/` or `~` first, then letters, digits, `_`, `/`,
/// and no `//` (rosgraph's `is_legal_name`; the empty name is legal).
pub fn is_legal(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        None => true,
        Some(c) if c.is_ascii_alphabetic() || c == '/' || c == '~' => {
            chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/') && !name.contains("//")
        }
        _ => false,
    }
}

/// A legal base name (no namespace): a letter then letters, digits and `_`.
pub fn is_legal_base(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_and_namespaces() {
        assert_eq!(canonicalize("//a//b/"), "/a/b");
        assert_eq!(canonicalize("a/b/"), "a/b");
        assert_eq!(canonicalize("/"), "/");
        assert_eq!(namespace("/a/b"), "/a/");
        assert_eq!(namespace("/a/b/"), "/a/");
        assert_eq!(namespace("/a"), "/");
        assert_eq!(namespace(""), "/");
        assert_eq!(ns_join("/a", "b"), "/a/b");
        assert_eq!(ns_join("/a/", "b"), "/a/b");
        assert_eq!(ns_join("/a", "/b"), "/b");
        assert_eq!(ns_join("~", "b"), "~b");
    }

    #[test]
    fn resolves_like_rosgraph() {
        assert_eq!(resolve("chatter", "/ns/talker"), "/ns/chatter");
        assert_eq!(resolve("/chatter", "/ns/talker"), "/chatter");
        assert_eq!(resolve("~rate", "/ns/talker"), "/ns/talker/rate");
        assert_eq!(resolve("~/rate", "/ns/talker"), "/ns/talker/rate");
        assert_eq!(resolve("a//b/", "/talker"), "/a/b");
        assert_eq!(resolve("", "/ns/talker"), "/ns/");
    }

    #[test]
    fn remaps_after_resolving_both_sides() {
        let r = Remappings::new([("chatter", "/other"), ("~in", "out")], "/ns/node");
        assert_eq!(r.resolve("chatter", "/ns/node"), "/other");
        assert_eq!(r.resolve("/ns/chatter", "/ns/node"), "/other");
        assert_eq!(r.resolve("~in", "/ns/node"), "/ns/out");
        assert_eq!(r.resolve("x", "/ns/node"), "/ns/x");
    }

    #[test]
    fn legal_names() {
        assert!(is_legal("/a/b_1") && is_legal("~p") && is_legal(""));
        assert!(!is_legal("1a") && !is_legal("/a//b") && !is_legal("a b") && !is_legal("a:b"));
        assert!(is_legal_base("talker_2") && !is_legal_base("a/b") && !is_legal_base("_x"));
    }
}
