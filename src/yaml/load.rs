//! Reading YAML: `saphyr-parser` (a maintained YAML 1.2 parser) turns the text into events,
//! and this builder types the scalars as PyYAML's YAML 1.1 resolvers do, which is what
//! ROS's `yaml.safe_load` users (rosparam, roslaunch's `_param:=`, rostopic pub) see.
//!
//! Everything a rosparam file uses is read: block and flow collections, block scalars
//! (`|`, `>`), multi-line plain scalars, anchors and aliases, merge keys (`<<`), explicit
//! tags (`!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!binary`) and rosparam's `!degrees` and
//! `!radians`. Hostile input is bounded: the text's size, the nesting depth, and the
//! values a document expands to through aliases (a "billion laughs" stops at
//! [`MAX_VALUES`]).

use super::{resolve_plain, scalar_text, Yaml, YamlError};
use saphyr_parser::{Event, Parser, ScalarStyle, Tag};
use std::collections::HashMap;

/// Largest text accepted, in bytes.
pub const MAX_TEXT: usize = 16 << 20;
/// Most values one document may expand to, aliases counted at their full size.
pub const MAX_VALUES: usize = 1_000_000;
/// Deepest nesting of collections.
pub const MAX_DEPTH: usize = 64;

/// Reads one YAML document, as `yaml.safe_load` does: an empty text is null, a stream of
/// several documents is an error.
pub fn load(text: &str) -> Result<Yaml, YamlError> {
    let mut documents = load_all(text)?;
    match documents.len() {
        0 => Ok(Yaml::Null),
        1 => Ok(documents.remove(0)),
        n => Err(YamlError(format!("expected a single document, found {n}"))),
    }
}

/// Reads every document of a stream, as `yaml.safe_load_all` does (rosparam files may hold
/// several, separated by `---`).
pub fn load_all(text: &str) -> Result<Vec<Yaml>, YamlError> {
    if text.len() > MAX_TEXT {
        return Err(YamlError(format!(
            "the text is {} bytes, more than {MAX_TEXT}",
            text.len()
        )));
    }
    let mut builder = Builder::default();
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| YamlError(e.to_string()))?;
        builder
            .event(event)
            .map_err(|e| YamlError(format!("line {}: {}", span.start.line(), e.0)))?;
    }
    Ok(builder.documents)
}

/// A collection being read.
enum Frame {
    Seq {
        items: Vec<Yaml>,
        anchor: usize,
    },
    Map {
        entries: Vec<(String, Yaml)>,
        key: Option<Key>,
        anchor: usize,
    },
}

/// A mapping key, read and waiting for its value.
enum Key {
    Name(String),
    /// A plain `<<`: the value's entries merge into the mapping.
    Merge,
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    documents: Vec<Yaml>,
    /// Anchored values, with how many values each counts for.
    anchors: HashMap<usize, (Yaml, usize)>,
    /// Values of the current document so far, aliases at their full size.
    values: usize,
    /// Sizes of the collections on the stack, so an anchor knows its own.
    sizes: Vec<usize>,
}

impl Builder {
    fn event(&mut self, event: Event<'_>) -> Result<(), YamlError> {
        match event {
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
            Event::DocumentStart(_) => self.values = 0,
            Event::Alias(id) => {
                let (value, size) = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| YamlError("an alias to an unknown anchor".into()))?;
                self.count(size)?;
                self.value(value, size, 0)?;
            }
            Event::Scalar(text, style, anchor, tag) => {
                let value = scalar(&text, style, tag.as_deref())?;
                let merge = style == ScalarStyle::Plain && tag.is_none() && text == "<<";
                self.count(1)?;
                if merge && self.awaits_key() {
                    if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
                        *key = Some(Key::Merge);
                    }
                    return Ok(());
                }
                self.value(value, 1, anchor)?;
            }
            Event::SequenceStart(anchor, _) => self.open(Frame::Seq {
                items: Vec::new(),
                anchor,
            })?,
            Event::MappingStart(anchor, _) => self.open(Frame::Map {
                entries: Vec::new(),
                key: None,
                anchor,
            })?,
            Event::SequenceEnd | Event::MappingEnd => {
                let size = self.sizes.pop().unwrap_or(1);
                let (value, anchor) = match self.stack.pop() {
                    Some(Frame::Seq { items, anchor }) => (Yaml::Seq(items), anchor),
                    Some(Frame::Map {
                        entries, anchor, ..
                    }) => (Yaml::Map(entries), anchor),
                    None => return Err(YamlError("a collection ends that never began".into())),
                };
                self.value(value, size, anchor)?;
            }
        }
        Ok(())
    }

    fn count(&mut self, n: usize) -> Result<(), YamlError> {
        self.values = self.values.saturating_add(n);
        if let Some(size) = self.sizes.last_mut() {
            *size = size.saturating_add(n);
        }
        if self.values > MAX_VALUES {
            return Err(YamlError(format!(
                "the document expands to more than {MAX_VALUES} values"
            )));
        }
        Ok(())
    }

    fn open(&mut self, frame: Frame) -> Result<(), YamlError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(YamlError(format!(
                "collections nest deeper than {MAX_DEPTH}"
            )));
        }
        self.count(1)?;
        self.stack.push(frame);
        self.sizes.push(1);
        Ok(())
    }

    fn awaits_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    /// A finished value: anchored if it has an anchor, then placed in its parent.
    fn value(&mut self, value: Yaml, size: usize, anchor: usize) -> Result<(), YamlError> {
        if anchor != 0 {
            self.anchors.insert(anchor, (value.clone(), size));
        }
        match self.stack.last_mut() {
            None => self.documents.push(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => *key = Some(Key::Name(string_key(value)?)),
                Some(Key::Name(name)) => insert(entries, name, value),
                Some(Key::Merge) => merge(entries, value)?,
            },
        }
        Ok(())
    }
}

/// A scalar, typed by its tag, else by its style: plain scalars as YAML 1.1 resolves them,
/// quoted and block scalars as strings.
fn scalar(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Yaml, YamlError> {
    let Some(tag) = tag else {
        return Ok(if style == ScalarStyle::Plain {
            resolve_plain(text)
        } else {
            Yaml::Str(text.to_string())
        });
    };
    let typed = |want: fn(&Yaml) -> bool, what: &str| {
        let value = resolve_plain(text.trim());
        if want(&value) {
            Ok(value)
        } else {
            Err(YamlError(format!("'{text}' is not {what}")))
        }
    };
    let number = || match resolve_plain(text.trim()) {
        Yaml::Int(i) => Ok(i as f64),
        Yaml::Float(f) => Ok(f),
        _ => Err(YamlError(format!("'{text}' is not a number"))),
    };
    let handle = match tag.handle.as_str() {
        "tag:yaml.org,2002:" => "!!",
        other => other,
    };
    match (handle, tag.suffix.as_str()) {
        ("!!", "str") => Ok(Yaml::Str(text.to_string())),
        ("!!", "int") => typed(|v| matches!(v, Yaml::Int(_)), "an integer"),
        ("!!", "float") => match resolve_plain(text.trim()) {
            Yaml::Int(i) => Ok(Yaml::Float(i as f64)),
            float @ Yaml::Float(_) => Ok(float),
            _ => Err(YamlError(format!("'{text}' is not a float"))),
        },
        ("!!", "bool") => typed(|v| matches!(v, Yaml::Bool(_)), "a boolean"),
        ("!!", "null") => typed(|v| matches!(v, Yaml::Null), "null"),
        // What `rosparam dump` writes for a base64 parameter (PyYAML's `binary`): the
        // base64 alphabet, line breaks and spaces skipped as Python's decoder skips them.
        ("!!", "binary") => Ok(Yaml::Binary(crate::xmlrpc::decode_base64(text.as_bytes()))),
        // rosparam's own constructors.
        // As rosparam computes it (`value * math.pi / 180.0`), to the last bit.
        ("!", "degrees") => Ok(Yaml::Float(number()? * std::f64::consts::PI / 180.0)),
        ("!", "radians") => Ok(Yaml::Float(number()?)),
        (handle, suffix) => Err(YamlError(format!(
            "the tag {handle}{suffix} is not one safe_load reads"
        ))),
    }
}

/// Parameter names are strings: rosparam refuses `on:` (a bool) or `1:` as keys.
fn string_key(key: Yaml) -> Result<String, YamlError> {
    match key {
        Yaml::Str(s) => Ok(s),
        Yaml::Seq(_) | Yaml::Map(_) => Err(YamlError("a collection as a mapping key".into())),
        other => Err(YamlError(format!(
            "YAML dictionaries must have string keys, not {}",
            scalar_text(&other)
        ))),
    }
}

/// A later value for a key replaces the earlier, as PyYAML's constructor does.
fn insert(entries: &mut Vec<(String, Yaml)>, key: String, value: Yaml) {
    match entries.iter_mut().find(|(k, _)| *k == key) {
        Some(entry) => entry.1 = value,
        None => entries.push((key, value)),
    }
}

/// `<<: *base` (or a list of bases): their entries, where the mapping has none of its own.
fn merge(entries: &mut Vec<(String, Yaml)>, value: Yaml) -> Result<(), YamlError> {
    let bases = match value {
        Yaml::Map(base) => vec![base],
        Yaml::Seq(items) => items
            .into_iter()
            .map(|item| match item {
                Yaml::Map(base) => Ok(base),
                _ => Err(YamlError("a merge key takes mappings".into())),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(YamlError("a merge key takes mappings".into())),
    };
    for base in bases {
        for (key, value) in base {
            if !entries.iter().any(|(k, _)| *k == key) {
                entries.push((key, value));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, Yaml)]) -> Yaml {
        Yaml::Map(
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    fn s(text: &str) -> Yaml {
        Yaml::Str(text.into())
    }

    #[test]
    fn rosparam_files_with_block_scalars_anchors_and_merges() {
        let text = "\
# a rosparam file
defaults: &defaults
  rate: 10
  frame: sonar
sonar:
  <<: *defaults
  rate: 20          # overrides the merged one
description: |
  two lines
  of text
folded: >
  one
  line
long plain: this plain scalar
  goes on
quoted: \"a # b\"
angle: !degrees 180
raw: !!str 010
modes: [a, 'b', {c: 1.5}]
";
        let y = load(text).unwrap();
        let defaults = map(&[("rate", Yaml::Int(10)), ("frame", s("sonar"))]);
        assert_eq!(
            y,
            map(&[
                ("defaults", defaults),
                (
                    "sonar",
                    map(&[("rate", Yaml::Int(20)), ("frame", s("sonar"))])
                ),
                ("description", s("two lines\nof text\n")),
                ("folded", s("one line\n")),
                ("long plain", s("this plain scalar goes on")),
                ("quoted", s("a # b")),
                ("angle", Yaml::Float(std::f64::consts::PI)),
                ("raw", s("010")),
                (
                    "modes",
                    Yaml::Seq(vec![s("a"), s("b"), map(&[("c", Yaml::Float(1.5))])])
                ),
            ])
        );
    }

    #[test]
    fn binary_parameters_read_back_as_rosparam_dump_wrote_them() {
        use crate::xmlrpc::Value;
        let blob: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let param = Value::Struct([("blob".to_string(), Value::Base64(blob.clone()))].into());
        let text = crate::yaml::params::dump(&param);
        assert!(text.contains("!!binary |"), "{text}");
        let back = load(&text).unwrap();
        assert_eq!(back, map(&[("blob", Yaml::Binary(blob.clone()))]));
        assert_eq!(back.to_xmlrpc().unwrap(), param);
        // In lists and nested maps, and empty, as the fuzz target's round trip meets them.
        let nested = Value::Array(vec![
            Value::Base64(Vec::new()),
            Value::Base64(b"x".to_vec()),
            Value::Struct([("a".to_string(), Value::Base64(blob))].into()),
        ]);
        let text = crate::yaml::params::dump(&nested);
        assert_eq!(load(&text).unwrap().to_xmlrpc().unwrap(), nested, "{text}");
    }

    #[test]
    fn command_line_values_are_typed_as_pyyaml_types_them() {
        assert_eq!(load("10").unwrap(), Yaml::Int(10));
        assert_eq!(load("yes").unwrap(), Yaml::Bool(true));
        assert_eq!(load("'10'").unwrap(), s("10"));
        assert_eq!(load("http://host:11311/").unwrap(), s("http://host:11311/"));
        assert_eq!(load("hello world # note").unwrap(), s("hello world"));
        assert_eq!(load("").unwrap(), Yaml::Null);
        assert_eq!(load("{}").unwrap(), Yaml::Map(vec![]));
        assert_eq!(load_all("a: 1\n---\nb: 2\n").unwrap().len(), 2);
        assert!(
            load("a: 1\n---\nb: 2\n").is_err(),
            "safe_load takes one document"
        );
    }

    #[test]
    fn bad_documents_are_errors() {
        for text in [
            "[1, 2",
            "a: 1\n  b: 2\n",
            "on: 1\n",
            "1: one\n",
            "[a]: 1\n",
            "x: *nowhere\n",
            "x: !!python/object:os.system ls\n",
            "x: !!int abc\n",
            "\"unterminated\n",
        ] {
            assert!(load(text).is_err(), "{text:?} was accepted");
        }
        assert_eq!(load("'on': 1\n").unwrap(), map(&[("on", Yaml::Int(1))]));
    }

    #[test]
    fn deep_nesting_and_alias_bombs_stop_at_their_bounds() {
        let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(load(&deep).is_err());
        // Nine levels of ten aliases each: 10^9 values if expanded.
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..9 {
            let prev = (b'a' + level - 1) as char;
            let this = (b'a' + level) as char;
            bomb.push_str(&format!(
                "{this}: &{this} [{}]\n",
                vec![format!("*{prev}"); 10].join(", ")
            ));
        }
        let started = std::time::Instant::now();
        let err = load(&bomb).unwrap_err();
        assert!(err.0.contains("values"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let huge = "a".repeat(MAX_TEXT + 1);
        assert!(load(&huge).is_err());
    }
}
