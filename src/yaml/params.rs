//! rosparam's YAML out: a parameter tree written as `yaml.dump` (PyYAML 6, block style,
//! sorted keys) writes it, so `udpros param dump` and `rosparam dump` print the same text.
//! Files are read back with [`load_all`](super::load_all).

use super::emit::{analyze, Emitter};
use super::plain_is_not_a_string;
use crate::python::float_repr;
use crate::xmlrpc::Value;

/// `yaml.dump(value)`: what `rosparam dump` prints.
pub fn dump(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Struct(m) if !m.is_empty() => mapping(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => sequence(&mut out, a, 0),
        _ => {
            // A root scalar continues two columns in (PyYAML indents a flow-level node).
            let (text, plain) = scalar(value, 0, 2);
            out.push_str(&text);
            out.push('\n');
            if plain {
                out.push_str("...\n"); // PyYAML ends a document that is a plain scalar
            }
        }
    }
    out
}

/// `rosparam get`'s text: the dump without a document end, and a blank line after.
pub fn get_text(value: &Value) -> String {
    let d = dump(value);
    let d = d.strip_suffix("\n...\n").unwrap_or(&d);
    format!("{d}\n")
}

/// A scalar at `column` (folding continues at `indent`): its text and whether it is plain.
fn scalar(value: &Value, column: usize, indent: usize) -> (String, bool) {
    match value {
        Value::Int(i) => (i.to_string(), true),
        Value::Bool(b) => (b.to_string(), true),
        Value::Double(d) => (pyyaml_float(*d), true),
        Value::String(s) | Value::DateTime(s) => string(s, column, indent),
        Value::Base64(b) => (binary(b, indent), false),
        Value::Struct(_) => ("{}".into(), false),
        Value::Array(_) => ("[]".into(), false),
    }
}

/// PyYAML's float: `repr` lower-cased, `1e-05` as `1.0e-05`, `.inf`, `.nan`.
fn pyyaml_float(d: f64) -> String {
    if d.is_nan() {
        return ".nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 {
            ".inf".into()
        } else {
            "-.inf".into()
        };
    }
    let r = float_repr(d).to_lowercase();
    if !r.contains('.') && r.contains('e') {
        r.replacen('e', ".0e", 1)
    } else {
        r
    }
}

fn string(s: &str, column: usize, indent: usize) -> (String, bool) {
    styled_string(s, column, indent, true, column == 0)
}

/// `s` written at `column`, which is just after an indicator (`:`, `-`, `?`; the emitter
/// puts the separating space) unless `line_start`; `split` lets long lines fold (not in a
/// simple key).
fn styled_string(
    s: &str,
    column: usize,
    indent: usize,
    split: bool,
    line_start: bool,
) -> (String, bool) {
    let chars: Vec<char> = s.chars().collect();
    let mut e = Emitter::new();
    e.column = column;
    e.indent = indent;
    e.split = split;
    e.whitespace = line_start;
    e.indention = line_start;
    let analysis = analyze(&chars);
    let plain = !chars.is_empty() && analysis.plain && !plain_is_not_a_string(s);
    if plain {
        e.write_plain(&chars);
    } else if chars.is_empty() || analysis.single_quoted {
        e.write_single_quoted(&chars);
    } else {
        e.write_double_quoted(s);
    }
    // The emitter put the separating space itself; the caller writes its own.
    (e.out.trim_start_matches(' ').to_string(), plain)
}

/// Python bytes as PyYAML writes them: a literal block of base64 lines.
fn binary(data: &[u8], indent: usize) -> String {
    let encoded = crate::xmlrpc::encode_base64(data);
    let pad = " ".repeat(indent + 2);
    let mut out = String::from("!!binary |");
    for line in encoded.as_bytes().chunks(76) {
        out.push('\n');
        out.push_str(&pad);
        out.push_str(&String::from_utf8_lossy(line));
    }
    out
}

fn mapping(out: &mut String, m: &std::collections::BTreeMap<String, Value>, indent: usize) {
    for (i, (key, value)) in m.iter().enumerate() {
        if i > 0 {
            out.push_str(&" ".repeat(indent));
        }
        // PyYAML's simple keys are under 128 characters and on one line; others are
        // written as `? key` then `: value`, the value one level in.
        if key.chars().count() < 128
            && !key.contains(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}'])
        {
            let (k, _) = styled_string(key, indent, indent, false, true);
            out.push_str(&k);
            out.push(':');
            mapping_value(out, value, indent, indent + k.chars().count() + 1, true);
        } else {
            let (k, _) = string(key, indent + 1, indent + 2);
            out.push_str("? ");
            out.push_str(&k);
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            out.push(':');
            mapping_value(out, value, indent + 2, indent + 1, false);
        }
    }
}

/// A mapping's value, after its `:` (at `column`). A simple key's nested collections start
/// on the next line (a sequence not indented, as PyYAML writes it); after a complex key's
/// `:` they start on the same line.
fn mapping_value(out: &mut String, value: &Value, indent: usize, column: usize, simple: bool) {
    match value {
        Value::Struct(inner) if !inner.is_empty() => {
            if simple {
                out.push('\n');
                out.push_str(&" ".repeat(indent + 2));
                mapping(out, inner, indent + 2);
            } else {
                out.push(' ');
                mapping(out, inner, indent);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            if simple {
                out.push('\n');
                out.push_str(&" ".repeat(indent));
            } else {
                out.push(' ');
            }
            sequence(out, items, indent);
        }
        scalar_value => {
            let (text, _) = scalar(scalar_value, column, indent + 2);
            out.push(' ');
            out.push_str(&text);
            out.push('\n');
        }
    }
}

fn sequence(out: &mut String, items: &[Value], indent: usize) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str("- ");
        match item {
            Value::Struct(inner) if !inner.is_empty() => mapping(out, inner, indent + 2),
            Value::Array(inner) if !inner.is_empty() => sequence(out, inner, indent + 2),
            scalar_value => {
                let (text, _) = scalar(scalar_value, indent + 1, indent + 2);
                out.push_str(&text);
                out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{load, Yaml};
    use std::collections::BTreeMap;

    fn tree() -> Value {
        let mut inner = BTreeMap::new();
        inner.insert("rate".to_string(), Value::Double(10.0));
        inner.insert("name".to_string(), Value::String("sonar 1".into()));
        inner.insert("on".to_string(), Value::String("yes".into()));
        inner.insert(
            "list".to_string(),
            Value::Array(vec![Value::Int(1), Value::String("two: 2".into())]),
        );
        inner.insert("empty".to_string(), Value::Struct(BTreeMap::new()));
        let mut root = BTreeMap::new();
        root.insert("b".to_string(), Value::Struct(inner));
        root.insert("a".to_string(), Value::Bool(true));
        root.insert("tiny".to_string(), Value::Double(1e-5));
        Value::Struct(root)
    }

    #[test]
    fn dumps_as_pyyaml_does() {
        assert_eq!(
            dump(&tree()),
            "a: true\nb:\n  empty: {}\n  list:\n  - 1\n  - 'two: 2'\n  name: sonar 1\n  'on': 'yes'\n  rate: 10.0\ntiny: 1.0e-05\n"
        );
        assert_eq!(dump(&Value::Int(3)), "3\n...\n");
        assert_eq!(dump(&Value::String("true".into())), "'true'\n");
        assert_eq!(get_text(&Value::Int(3)), "3\n");
        let nested = Value::Array(vec![
            Value::Struct(
                [
                    ("a".to_string(), Value::Int(1)),
                    (
                        "b".to_string(),
                        Value::Array(vec![Value::Int(1), Value::Int(2)]),
                    ),
                ]
                .into(),
            ),
            Value::Array(vec![Value::Int(3), Value::Int(4)]),
        ]);
        assert_eq!(dump(&nested), "- a: 1\n  b:\n  - 1\n  - 2\n- - 3\n  - 4\n");
    }

    #[test]
    fn long_values_fold_where_pyyaml_folds_them() {
        let words = |w: &str, n: usize| vec![w; n].join(" ");
        let v = Value::Struct(
            [
                (
                    "a".to_string(),
                    Value::Struct([("bb".to_string(), Value::String(words("word", 30)))].into()),
                ),
                ("c".to_string(), Value::String(words("w", 50))),
            ]
            .into(),
        );
        assert_eq!(
            dump(&v),
            "a:\n  bb: word word word word word word word word word word word word word word word word\n    word word word word word word word word word word word word word word\nc: w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w w\n  w w w w w w w w w w\n"
        );
    }

    #[test]
    fn root_scalars_continue_two_columns_in() {
        // PyYAML 6: yaml.dump(s).
        let words = ["w"; 50].join(" ");
        assert_eq!(
            dump(&Value::String(words)),
            format!("{}\n  {}\n...\n", ["w"; 41].join(" "), ["w"; 9].join(" "))
        );
        let marker = "1,,\n\n\n---     )                       >";
        assert_eq!(
            dump(&Value::String(marker.into())),
            "'1,,\n\n\n\n  ---     )                       >'\n"
        );
    }

    #[test]
    fn keys_follow_pyyaml_simple_key_rules() {
        // Expected texts printed by PyYAML 6 (`yaml.dump(d, default_flow_style=False)`).
        let tree = |pairs: Vec<(String, Value)>| Value::Struct(pairs.into_iter().collect());
        let inner = tree(vec![
            (
                "x\ny".into(),
                Value::Array(vec![Value::Int(1), Value::Int(2)]),
            ),
            ("z".into(), Value::String("q".into())),
        ]);
        let v = tree(vec![("a".repeat(130), Value::Int(1)), ("b".into(), inner)]);
        assert_eq!(
            dump(&v),
            format!(
                "? {}\n: 1\nb:\n  ? 'x\n\n    y'\n  : - 1\n    - 2\n  z: q\n",
                "a".repeat(130)
            )
        );
        let escaped = tree(vec![(
            format!("A{}", "\u{13}".repeat(30)),
            Value::String("v".into()),
        )]);
        assert_eq!(dump(&escaped), format!("\"A{}\": v\n", "\\x13".repeat(30)));
        let long = tree(vec![(
            "k ".repeat(70),
            tree(vec![("n".into(), Value::Int(1))]),
        )]);
        assert_eq!(
            dump(&long),
            format!(
                "? '{}\n  {}'\n: n: 1\n",
                "k ".repeat(40).trim_end(),
                "k ".repeat(30)
            )
        );
    }

    #[test]
    fn loads_what_it_dumps_and_rosparam_files() {
        let back = load(&dump(&tree())).unwrap().to_xmlrpc().unwrap();
        assert_eq!(back, tree());
        let file = "# a rosparam file\nsonar:\n  range: 10   # m\n  modes: [a, b]\n  steps:\n    - x: 1\n      y: 2\n    - 3\nname: \"quoted # not a comment\"\n";
        let y = load(file).unwrap();
        assert_eq!(
            y,
            Yaml::Map(vec![
                (
                    "sonar".into(),
                    Yaml::Map(vec![
                        ("range".into(), Yaml::Int(10)),
                        (
                            "modes".into(),
                            Yaml::Seq(vec![Yaml::Str("a".into()), Yaml::Str("b".into())])
                        ),
                        (
                            "steps".into(),
                            Yaml::Seq(vec![
                                Yaml::Map(vec![
                                    ("x".into(), Yaml::Int(1)),
                                    ("y".into(), Yaml::Int(2))
                                ]),
                                Yaml::Int(3)
                            ])
                        ),
                    ])
                ),
                ("name".into(), Yaml::Str("quoted # not a comment".into())),
            ])
        );
        assert!(load("a: 1\n  b: 2\n").is_err());
        assert!(load("on: 1\n").is_err(), "a bool key");
        assert!(load("'on': 1\n").is_ok());
    }
}
