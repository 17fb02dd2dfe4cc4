//! The parameter server's tree, as rosmaster's `ParamDictionary`: a dict value replaces a
//! whole subtree, keys under a scalar turn it into a namespace, namespaces read as dicts,
//! and changes notify the subscribers whose keys they touch.

use super::ordered::OrderedMap;
use crate::names::{canonicalize, is_global, is_private, ns_join};
use crate::xmlrpc::Value;
use std::collections::BTreeMap;

/// A parameter: a value, or a namespace of parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// A leaf: any XML-RPC value but a struct.
    Value(Value),
    /// A namespace: child names, in the order they were set, to their parameters.
    Dict(OrderedMap<Param>),
}

impl Param {
    /// XML-RPC structs become namespaces, at any depth.
    pub fn from_value(value: Value) -> Param {
        match value {
            Value::Struct(members) => {
                let mut dict = OrderedMap::default();
                for (k, v) in members {
                    dict.insert(&k, Param::from_value(v));
                }
                Param::Dict(dict)
            }
            other => Param::Value(other),
        }
    }

    /// The parameter as XML-RPC (a namespace becomes a struct).
    pub fn to_value(&self) -> Value {
        match self {
            Param::Value(v) => v.clone(),
            Param::Dict(d) => dict_to_value(d),
        }
    }

    fn as_dict(&self) -> Option<&OrderedMap<Param>> {
        match self {
            Param::Dict(d) => Some(d),
            Param::Value(_) => None,
        }
    }
}

fn dict_to_value(dict: &OrderedMap<Param>) -> Value {
    Value::Struct(
        dict.iter()
            .map(|(k, v)| (k.to_string(), v.to_value()))
            .collect(),
    )
}

fn components(key: &str) -> Vec<&str> {
    key.split('/').filter(|p| !p.is_empty()).collect()
}

/// Where a key leads in the tree.
enum Lookup<'a> {
    Root,
    Param(&'a Param),
}

/// The parameter server's tree, with rosmaster's semantics: setting a struct sets a namespace, reading a namespace returns a struct, subscribers of a key hear of changes below and above it.
#[derive(Debug, Clone, Default)]
pub struct ParamTree {
    root: OrderedMap<Param>,
}

impl ParamTree {
    /// The value at a global key; `/` and namespaces read as structs.
    pub fn get(&self, key: &str) -> Option<Value> {
        match self.lookup(key)? {
            Lookup::Root => Some(dict_to_value(&self.root)),
            Lookup::Param(p) => Some(p.to_value()),
        }
    }

    /// Whether a key is set, without building its value (a namespace can be large).
    pub fn has(&self, key: &str) -> bool {
        self.lookup(key).is_some()
    }

    fn lookup(&self, key: &str) -> Option<Lookup<'_>> {
        let parts = components(key);
        let Some((last, namespaces)) = parts.split_last() else {
            return Some(Lookup::Root);
        };
        let mut dict = &self.root;
        for ns in namespaces {
            dict = dict.get(ns)?.as_dict()?;
        }
        dict.get(last).map(Lookup::Param)
    }

    /// Sets a global key. `/` takes only a struct (which replaces the whole tree).
    pub fn set(&mut self, key: &str, value: Value) -> Result<(), &'static str> {
        self.set_param(key, Param::from_value(value))
    }

    /// [`ParamTree::set`] with the value already converted (outside any lock).
    pub fn set_param(&mut self, key: &str, param: Param) -> Result<(), &'static str> {
        if key == "/" {
            return match param {
                Param::Dict(d) => {
                    self.root = d;
                    Ok(())
                }
                Param::Value(_) => Err("cannot set root of parameter tree to non-dictionary"),
            };
        }
        let parts = components(key);
        let Some((last, namespaces)) = parts.split_last() else {
            return Ok(());
        };
        let mut dict = &mut self.root;
        for ns in namespaces {
            let slot = dict.get_or_insert_with(ns, || Param::Dict(OrderedMap::default()));
            if let Param::Value(_) = slot {
                *slot = Param::Dict(OrderedMap::default()); // a scalar becomes a namespace
            }
            match slot {
                Param::Dict(next) => dict = next,
                Param::Value(_) => return Ok(()),
            }
        }
        dict.insert(last, param);
        Ok(())
    }

    /// Deletes a global key. Fails when it was not set (`/` is never deletable), or, as in
    /// rosmaster, with Python's own TypeError text when the key's parent is a number.
    pub fn delete(&mut self, key: &str) -> Result<(), DeleteError> {
        let parts = components(key);
        let Some((last, namespaces)) = parts.split_last() else {
            return Err(DeleteError::NotSet);
        };
        let mut dict = &mut self.root;
        for (i, ns) in namespaces.iter().enumerate() {
            match dict.get_mut(ns) {
                Some(Param::Dict(next)) => dict = next,
                // rosmaster steps into a scalar parent and then tests `key in scalar`.
                Some(Param::Value(v)) if i + 1 == namespaces.len() => return Err(not_iterable(v)),
                _ => return Err(DeleteError::NotSet),
            }
        }
        dict.remove(last).map(|_| ()).ok_or(DeleteError::NotSet)
    }

    /// Every leaf key (empty namespaces are not listed), in insertion order.
    pub fn names(&self) -> Vec<String> {
        fn walk(dict: &OrderedMap<Param>, prefix: &str, out: &mut Vec<String>) {
            for (k, v) in dict.iter() {
                let key = ns_join(prefix, k);
                match v {
                    Param::Dict(d) => walk(d, &key, out),
                    Param::Value(_) => out.push(key),
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, "/", &mut out);
        out
    }

    /// rosmaster's `searchParam`: the caller's private namespace first, then each parent,
    /// matching on the key's first component; returns the full key even if the rest of it
    /// does not exist.
    pub fn search(&self, ns: &str, key: &str) -> Result<Option<String>, &'static str> {
        if key.is_empty() || is_private(key) {
            return Err("invalid key");
        }
        if !is_global(ns) {
            return Err("namespace must be global");
        }
        if is_global(key) {
            return Ok(self.has(key).then(|| key.to_string()));
        }
        let key_parts = components(key);
        let first = key_parts.first().copied().unwrap_or("");
        if self.has(&ns_join(ns, first)) {
            return Ok(Some(ns_join(ns, key)));
        }
        let namespaces = components(ns);
        for i in 1..=namespaces.len() {
            let base = &namespaces[..namespaces.len() - i];
            let candidate = format!(
                "/{}",
                base.iter()
                    .chain([&first])
                    .copied()
                    .collect::<Vec<_>>()
                    .join("/")
            );
            if self.has(&candidate) {
                return Ok(Some(format!(
                    "/{}",
                    base.iter()
                        .chain([&key])
                        .copied()
                        .collect::<Vec<_>>()
                        .join("/")
                )));
            }
        }
        Ok(None)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteError {
    NotSet,
    /// Python's `TypeError` message, which rosmaster returns as "invalid arguments".
    TypeError(String),
}

fn not_iterable(v: &Value) -> DeleteError {
    let python_type = match v {
        Value::Int(_) => "int",
        Value::Double(_) => "float",
        Value::Bool(_) => "bool",
        Value::Base64(_) => "Binary",
        Value::DateTime(_) => "DateTime",
        // Strings and lists support `in`: rosmaster then reports the key as not set.
        Value::String(_) | Value::Array(_) | Value::Struct(_) => return DeleteError::NotSet,
    };
    DeleteError::TypeError(format!("argument of type '{python_type}' is not iterable"))
}

/// Parameter subscribers: key (with trailing slash) → (caller_id, caller_api) pairs.
pub(super) type ParamSubscribers = OrderedMap<Vec<(String, String)>>;

/// One notification: who, which key (with trailing slash), what value.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamUpdate {
    /// The subscribed nodes to notify: `(caller_id, caller_api)`.
    pub nodes: Vec<(String, String)>,
    /// The key whose value changed, as each node subscribed to it.
    pub key: String,
    /// Its new value (an empty struct once deleted, as rosmaster sends).
    pub value: Value,
}

fn empty_struct() -> Value {
    Value::Struct(BTreeMap::new())
}

/// rosmaster's `compute_param_updates`: subscribers of the changed key or of a namespace
/// above it get the new value; subscribers below it get their part of a new dict, or `{}`
/// when the change removed them. The setter (`ignore`) is not told of its own change to a
/// key it subscribes to at or above.
pub fn compute_updates(
    subscribers: &ParamSubscribers,
    key: &str,
    value: &Value,
    ignore: Option<&str>,
) -> Vec<ParamUpdate> {
    if subscribers.is_empty() {
        return Vec::new();
    }
    let param_key = if key == "/" {
        key.to_string()
    } else {
        format!("{}/", canonicalize(key))
    };
    let all_keys = value.as_struct().map(|dict| {
        let mut keys = Vec::new();
        all_subkeys(&param_key, dict, &mut keys);
        keys
    });
    let mut updates = Vec::new();
    for (sub_key, nodes) in subscribers.iter() {
        let ns_key = if sub_key.ends_with('/') {
            sub_key.to_string()
        } else {
            format!("{sub_key}/")
        };
        if param_key.starts_with(&ns_key) {
            let nodes = nodes
                .iter()
                .filter(|(id, _)| Some(id.as_str()) != ignore)
                .cloned()
                .collect();
            updates.push(ParamUpdate {
                nodes,
                key: param_key.clone(),
                value: value.clone(),
            });
        } else if let Some(all) = &all_keys {
            if ns_key.starts_with(&param_key) && !all.iter().any(|k| k == sub_key) {
                updates.push(ParamUpdate {
                    nodes: nodes.clone(),
                    key: sub_key.to_string(),
                    value: empty_struct(),
                });
            }
        }
    }
    for key in all_keys.iter().flatten() {
        if let Some(nodes) = subscribers.get(key) {
            let mut val = value.clone();
            for ns in components(&key[param_key.len()..]) {
                val = val
                    .as_struct()
                    .and_then(|d| d.get(ns))
                    .cloned()
                    .unwrap_or_else(empty_struct);
            }
            updates.push(ParamUpdate {
                nodes: nodes.clone(),
                key: key.clone(),
                value: val,
            });
        }
    }
    updates
}

fn all_subkeys(prefix: &str, dict: &BTreeMap<String, Value>, out: &mut Vec<String>) {
    for (k, v) in dict {
        let key = format!("{}/", ns_join(prefix, k));
        out.push(key.clone());
        if let Some(sub) = v.as_struct() {
            all_subkeys(&key, sub, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(pairs: &[(&str, Value)]) -> Value {
        Value::Struct(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn dicts_replace_subtrees_and_scalars_become_namespaces() {
        let mut t = ParamTree::default();
        t.set("/a/x", Value::Int(1)).unwrap();
        t.set("/a/y", Value::Int(2)).unwrap();
        t.set("/a", dict(&[("z", Value::Int(3))])).unwrap();
        assert_eq!(t.get("/a"), Some(dict(&[("z", Value::Int(3))])));
        assert_eq!(t.get("/a/x"), None);
        t.set("/a/z/deeper", Value::Bool(true)).unwrap();
        assert_eq!(t.get("/a/z"), Some(dict(&[("deeper", Value::Bool(true))])));
        assert_eq!(t.names(), ["/a/z/deeper"]);
        assert!(t.set("/", Value::Int(1)).is_err());
        assert_eq!(t.delete("/a/z"), Ok(()));
        assert_eq!(t.delete("/a/z"), Err(DeleteError::NotSet));
        assert_eq!(t.delete("/"), Err(DeleteError::NotSet));
        assert_eq!(t.get("/"), Some(dict(&[("a", dict(&[]))])));
        assert!(t.names().is_empty(), "empty namespaces are not listed");
    }

    #[test]
    fn search_walks_up_from_the_private_namespace() {
        let mut t = ParamTree::default();
        t.set("/ns/q", Value::Int(1)).unwrap();
        t.set("/top", Value::Int(2)).unwrap();
        assert_eq!(
            t.search("/ns/sub/node", "q/deeper"),
            Ok(Some("/ns/q/deeper".into()))
        );
        assert_eq!(t.search("/ns/node", "top"), Ok(Some("/top".into())));
        assert_eq!(t.search("/ns/node", "/top"), Ok(Some("/top".into())));
        assert_eq!(t.search("/ns/node", "missing"), Ok(None));
        assert_eq!(t.search("/ns/node", "~p"), Err("invalid key"));
    }

    #[test]
    fn updates_follow_rosmaster() {
        let mut subs = ParamSubscribers::default();
        subs.insert("/robot/", vec![("/a".into(), "http://a/".into())]);
        subs.insert("/robot/arm/x/", vec![("/b".into(), "http://b/".into())]);
        subs.insert("/robot/arm/gone/", vec![("/c".into(), "http://c/".into())]);
        let arm = dict(&[("x", Value::Int(1)), ("y", Value::Int(2))]);
        let updates = compute_updates(&subs, "/robot/arm", &arm, Some("/setter"));
        assert_eq!(updates.len(), 3);
        assert_eq!(
            updates[0],
            ParamUpdate {
                nodes: vec![("/a".into(), "http://a/".into())],
                key: "/robot/arm/".into(),
                value: arm.clone()
            }
        );
        assert_eq!(updates[1].key, "/robot/arm/gone/");
        assert_eq!(updates[1].value, dict(&[]));
        assert_eq!(updates[2].key, "/robot/arm/x/");
        assert_eq!(updates[2].value, Value::Int(1));
        // The setter is not told of its own change.
        let own = compute_updates(&subs, "/robot/z", &Value::Int(5), Some("/a"));
        assert!(own[0].nodes.is_empty());
    }
}
