//! A string-keyed map that keeps insertion order, as Python dicts do: rosmaster's answers
//! (getSystemState, getParamNames, ...) list entries in the order they were added.
//!
//! Lookups go through a hash index, so building a dict of n keys is O(n), not O(n²): a
//! `setParam` of one 50,000-entry dict used to spend seconds searching linearly while
//! every other call waited. Removal leaves a tombstone that keeps the other positions
//! valid; tombstones are compacted away once they are half the entries.

use std::collections::HashMap;

#[derive(Debug, Clone)]
pub struct OrderedMap<V> {
    /// In insertion order; `None` where an entry was removed.
    entries: Vec<Option<(String, V)>>,
    index: HashMap<String, usize>,
}

impl<V> Default for OrderedMap<V> {
    fn default() -> Self {
        OrderedMap {
            entries: Vec::new(),
            index: HashMap::new(),
        }
    }
}

impl<V: PartialEq> PartialEq for OrderedMap<V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<V> OrderedMap<V> {
    pub fn get(&self, key: &str) -> Option<&V> {
        let &i = self.index.get(key)?;
        self.entries[i].as_ref().map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        let &i = self.index.get(key)?;
        self.entries[i].as_mut().map(|(_, v)| v)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// Replaces in place, or appends.
    pub fn insert(&mut self, key: &str, value: V) {
        match self.get_mut(key) {
            Some(slot) => *slot = value,
            None => {
                self.push(key, value);
            }
        }
    }

    fn push(&mut self, key: &str, value: V) -> usize {
        let i = self.entries.len();
        self.entries.push(Some((key.to_string(), value)));
        self.index.insert(key.to_string(), i);
        i
    }

    /// The value at `key`, inserted by `make` when absent.
    pub fn get_or_insert_with(&mut self, key: &str, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.index.get(key) {
            Some(&i) => i,
            None => {
                self.index.insert(key.to_string(), self.entries.len());
                self.entries.push(None);
                self.entries.len() - 1
            }
        };
        // The slot is filled already unless it was just added.
        &mut self.entries[i]
            .get_or_insert_with(|| (key.to_string(), make()))
            .1
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        let i = self.index.remove(key)?;
        let (_, value) = self.entries[i].take()?;
        self.compact_if_sparse();
        Some(value)
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&str, &mut V) -> bool) {
        for slot in &mut self.entries {
            if let Some((k, v)) = slot {
                if !keep(k, v) {
                    self.index.remove(k.as_str());
                    *slot = None;
                }
            }
        }
        self.compact_if_sparse();
    }

    /// Drops tombstones once they are at least half the entries, so memory and iteration
    /// follow the live entries (amortised O(1) per removal).
    fn compact_if_sparse(&mut self) {
        if self.index.len() * 2 > self.entries.len() {
            return;
        }
        self.entries.retain(Option::is_some);
        for (i, (k, _)) in self.entries.iter().flatten().enumerate() {
            if let Some(slot) = self.index.get_mut(k.as_str()) {
                *slot = i;
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.entries.iter().flatten().map(|(k, v)| (k.as_str(), v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|(k, _)| k)
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_insertion_order_through_replacement_and_removal() {
        let mut m = OrderedMap::default();
        for (i, k) in ["c", "a", "b", "d"].iter().enumerate() {
            m.insert(k, i);
        }
        m.insert("a", 10);
        assert_eq!(m.remove("c"), Some(0));
        assert_eq!(m.remove("c"), None);
        m.insert("c", 20);
        let seen: Vec<_> = m.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(
            seen,
            [
                ("a".into(), 10),
                ("b".into(), 2),
                ("d".into(), 3),
                ("c".into(), 20)
            ]
        );
        m.retain(|k, _| k != "b");
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "d", "c"]);
        assert_eq!(m.len(), 3);
        assert_eq!(*m.get_or_insert_with("e", || 5), 5);
        assert_eq!(m.get("d"), Some(&3));
    }

    #[test]
    fn many_removals_compact_and_lookups_stay_right() {
        let mut m = OrderedMap::default();
        for i in 0..10_000 {
            m.insert(&i.to_string(), i);
        }
        for i in (0..10_000).filter(|i| i % 3 != 0) {
            assert_eq!(m.remove(&i.to_string()), Some(i));
        }
        assert!(
            m.entries.len() < 2 * m.len() + 1,
            "tombstones were compacted"
        );
        for i in 0..10_000 {
            assert_eq!(m.get(&i.to_string()).copied(), (i % 3 == 0).then_some(i));
        }
        let order: Vec<i32> = m.iter().map(|(_, v)| *v).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]));
    }
}
