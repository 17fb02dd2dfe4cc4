//! Parameter values as Rust types, and the cache that `subscribeParam` keeps fresh.

use crate::xmlrpc::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// A Rust type a parameter value converts to.
pub trait FromParam: Sized {
    /// What a value must be to convert, for the error that says it was not ("a number").
    const EXPECTED: &'static str = "a value of another type";

    /// The value as `Self`, if it is of a kind that converts.
    fn from_param(value: &Value) -> Option<Self>;
}

/// A parameter value as a user would recognise it in an error: its kind and, for a scalar,
/// the value (`the string 'abc'`, `the number 1.5`), cut short when long.
pub fn describe_value(value: &Value) -> String {
    const SHOWN: usize = 64;
    match value {
        Value::String(s) if s.chars().count() > SHOWN => {
            let cut: String = s.chars().take(SHOWN).collect();
            format!("the string '{cut}...' ({} bytes)", s.len())
        }
        Value::String(s) => format!("the string '{s}'"),
        Value::Int(i) => format!("the integer {i}"),
        Value::Double(d) => format!("the number {d}"),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Array(a) => format!("a list of {}", a.len()),
        Value::Struct(_) => "a dictionary".to_string(),
        other => format!("a {}", other.kind()),
    }
}

impl FromParam for Value {
    fn from_param(value: &Value) -> Option<Self> {
        Some(value.clone())
    }
}

impl FromParam for i32 {
    const EXPECTED: &'static str = "an integer";

    fn from_param(value: &Value) -> Option<Self> {
        value.as_i32()
    }
}

impl FromParam for i64 {
    const EXPECTED: &'static str = "an integer";

    fn from_param(value: &Value) -> Option<Self> {
        match value {
            Value::Int(i) => Some(i64::from(*i)),
            // Integers past 32 bits travel as doubles; take them back when exact.
            Value::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e15 => Some(*d as i64),
            _ => None,
        }
    }
}

impl FromParam for u32 {
    const EXPECTED: &'static str = "a non-negative integer";

    fn from_param(value: &Value) -> Option<Self> {
        i64::from_param(value).and_then(|i| u32::try_from(i).ok())
    }
}

impl FromParam for f64 {
    const EXPECTED: &'static str = "a number";

    fn from_param(value: &Value) -> Option<Self> {
        value.as_f64()
    }
}

impl FromParam for f32 {
    const EXPECTED: &'static str = "a number";

    fn from_param(value: &Value) -> Option<Self> {
        value.as_f64().map(|d| d as f32)
    }
}

impl FromParam for bool {
    const EXPECTED: &'static str = "a boolean";

    fn from_param(value: &Value) -> Option<Self> {
        value.as_bool()
    }
}

impl FromParam for String {
    const EXPECTED: &'static str = "a string";

    fn from_param(value: &Value) -> Option<Self> {
        value.as_str().map(str::to_string)
    }
}

impl<T: FromParam> FromParam for Vec<T> {
    const EXPECTED: &'static str = "a list";

    fn from_param(value: &Value) -> Option<Self> {
        value.as_array()?.iter().map(T::from_param).collect()
    }
}

impl<T: FromParam> FromParam for BTreeMap<String, T> {
    const EXPECTED: &'static str = "a dictionary";

    fn from_param(value: &Value) -> Option<Self> {
        value
            .as_struct()?
            .iter()
            .map(|(k, v)| Some((k.clone(), T::from_param(v)?)))
            .collect()
    }
}

/// Values of subscribed parameters, by key without trailing slash. `None` records a key
/// known to be unset, so reads of it cost no call either.
#[derive(Debug, Default)]
pub struct ParamCache {
    values: Mutex<HashMap<String, Option<Value>>>,
}

fn clean(key: &str) -> String {
    let key = crate::names::canonicalize(key);
    if key.is_empty() {
        "/".into()
    } else {
        key
    }
}

impl ParamCache {
    /// `Some(cached)` when `key` is subscribed (the inner `None`: known unset).
    pub fn get(&self, key: &str) -> Option<Option<Value>> {
        self.lock().get(&clean(key)).cloned()
    }

    /// Whether `key` (resolved) is cached and kept current by `paramUpdate`.
    pub fn is_subscribed(&self, key: &str) -> bool {
        self.lock().contains_key(&clean(key))
    }

    /// Records a subscription's first value (`{}` from the master means unset).
    pub fn insert(&self, key: &str, value: Value) {
        let value = (!is_empty_struct(&value)).then_some(value);
        self.lock().insert(clean(key), value);
    }

    /// A `paramUpdate` from the master; false when `key` is not subscribed. Cached entries
    /// above and below the key are dropped (they are read again when asked for).
    pub fn update(&self, key: &str, value: Value) -> bool {
        let key = clean(key);
        let mut values = self.lock();
        if !values.contains_key(&key) {
            return false;
        }
        let related = |other: &str| {
            other != key
                && (other.starts_with(&format!("{key}/")) || key.starts_with(&format!("{other}/")))
        };
        values.retain(|k, _| !related(k));
        values.insert(key, (!is_empty_struct(&value)).then_some(value));
        true
    }

    /// Drops `key` from the cache.
    pub fn remove(&self, key: &str) {
        self.lock().remove(&clean(key));
    }

    /// The cached keys.
    pub fn keys(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<Value>>> {
        self.values.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn is_empty_struct(v: &Value) -> bool {
    v.as_struct().is_some_and(BTreeMap::is_empty)
}

use crate::api::ApiError;

impl super::Node {
    /// A parameter, fresh from the master; `None` when unset.
    pub async fn get_param(&self, key: &str) -> Result<Option<Value>, ApiError> {
        self.inner.master.get_param(&self.resolve_name(key)).await
    }

    /// A parameter of type `T`, or `default` when unset; a value of another type is an error.
    pub async fn param<T: FromParam>(&self, key: &str, default: T) -> Result<T, ApiError> {
        let resolved = self.resolve_name(key);
        match self.inner.master.get_param(&resolved).await? {
            None => Ok(default),
            Some(v) => T::from_param(&v).ok_or_else(|| {
                ApiError::WrongType(format!(
                    "parameter {resolved} must be {}, not {}",
                    T::EXPECTED,
                    describe_value(&v)
                ))
            }),
        }
    }

    /// A parameter from the cache that subscribeParam keeps fresh (subscribing on first use).
    pub async fn get_param_cached(&self, key: &str) -> Result<Option<Value>, ApiError> {
        let resolved = self.resolve_name(key);
        if let Some(cached) = self.inner.params.get(&resolved) {
            return Ok(cached);
        }
        // A node shutting down subscribes to nothing more: it asks once instead.
        let Some(_registering) = self.inner.registering.begin() else {
            return self.inner.master.get_param(&resolved).await;
        };
        let value = self
            .inner
            .master
            .subscribe_param(&resolved, self.uri())
            .await?;
        self.inner.params.insert(&resolved, value);
        Ok(self.inner.params.get(&resolved).flatten())
    }

    /// Stops caching `key` (resolved): the master stops telling this node of its changes
    /// (unsubscribeParam), and the next [`get_param_cached`](super::Node::get_param_cached) asks it afresh. For
    /// nodes that cache what others name (a viewer's watched parameters), so that the
    /// cache holds only what is wanted now.
    pub async fn forget_cached_param(&self, key: &str) -> Result<(), ApiError> {
        let resolved = self.resolve_name(key);
        if !self.inner.params.is_subscribed(&resolved) {
            return Ok(());
        }
        self.inner.params.remove(&resolved);
        self.inner
            .master
            .unsubscribe_param(&resolved, self.uri())
            .await
    }

    /// Sets a parameter; `key` is resolved as a node name (`~key` is private).
    pub async fn set_param(&self, key: &str, value: Value) -> Result<(), ApiError> {
        let resolved = self.resolve_name(key);
        self.inner
            .master
            .set_param(&resolved, value.clone())
            .await?;
        // The master does not tell the setter of its own change.
        if self.inner.params.is_subscribed(&resolved) {
            self.inner.params.update(&resolved, value);
        }
        Ok(())
    }

    /// Whether the parameter `key` (resolved) is set.
    pub async fn has_param(&self, key: &str) -> Result<bool, ApiError> {
        self.inner.master.has_param(&self.resolve_name(key)).await
    }

    /// Deletes the parameter `key` (resolved); whether it existed.
    pub async fn delete_param(&self, key: &str) -> Result<bool, ApiError> {
        self.inner
            .master
            .delete_param(&self.resolve_name(key))
            .await
    }

    /// `searchParam` from this node's namespace upwards.
    pub async fn search_param(&self, key: &str) -> Result<Option<String>, ApiError> {
        self.inner.master.search_param(key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_conversions() {
        assert_eq!(i64::from_param(&Value::Double(1e10)), Some(10_000_000_000));
        assert_eq!(f64::from_param(&Value::Int(3)), Some(3.0));
        assert_eq!(
            Vec::<i32>::from_param(&Value::from(vec![1, 2])),
            Some(vec![1, 2])
        );
        assert_eq!(
            Vec::<i32>::from_param(&Value::from(vec![Value::Int(1), Value::from("x")])),
            None
        );
        assert_eq!(u32::from_param(&Value::Int(-1)), None);
    }

    #[test]
    fn cache_follows_updates() {
        let cache = ParamCache::default();
        cache.insert("/a/", Value::Struct(BTreeMap::new()));
        assert_eq!(cache.get("/a"), Some(None), "subscribed, unset");
        assert!(cache.update("/a/", Value::Int(5)));
        assert_eq!(cache.get("/a"), Some(Some(Value::Int(5))));
        assert!(!cache.update("/b/", Value::Int(1)), "not subscribed");
        cache.insert("/a/x", Value::Int(1));
        assert!(cache.update("/a", Value::Int(6)));
        assert_eq!(
            cache.get("/a/x"),
            None,
            "entries below a changed key are dropped"
        );
    }
}
