//! rosparam's YAML: a parameter tree written as `yaml.dump` (PyYAML 6, block style, sorted
//! keys) writes it, so `udpros param dump` and `rosparam dump` print the same text; and the
//! block YAML of rosparam files read back into a tree, with PyYAML's YAML 1.1 scalar types.

use crate::msg::dynamic::pyfmt::{analyze, float_repr, Emitter};
use crate::xmlrpc::Value;
use crate::yaml::{parse_flow, plain_is_not_a_string, Yaml, YamlError};

/// `yaml.dump(value)`: what `rosparam dump` prints.
pub fn dump(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Struct(m) if !m.is_empty() => mapping(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => sequence(&mut out, a, 0),
        _ => {
            let (text, plain) = scalar(value, 0, 0);
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
    let chars: Vec<char> = s.chars().collect();
    let mut e = Emitter::new();
    e.column = column;
    e.indent = indent;
    e.whitespace = column == 0;
    e.indention = column == 0;
    let analysis = analyze(&chars);
    let plain = !chars.is_empty() && analysis.plain && !plain_is_not_a_string(s);
    if plain {
        e.write_plain(&chars);
    } else if chars.is_empty() || analysis.single_quoted {
        e.write_single_quoted(&chars);
    } else {
        e.write_double_quoted(&chars);
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
        let (k, _) = string(key, indent, indent);
        out.push_str(&k);
        out.push(':');
        match value {
            Value::Struct(inner) if !inner.is_empty() => {
                out.push('\n');
                out.push_str(&" ".repeat(indent + 2));
                mapping(out, inner, indent + 2);
            }
            // PyYAML does not indent a sequence inside a mapping.
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                out.push_str(&" ".repeat(indent));
                sequence(out, items, indent);
            }
            scalar_value => {
                let column = indent + k.chars().count() + 2;
                let (text, _) = scalar(scalar_value, column, indent + 2);
                out.push(' ');
                out.push_str(&text);
                out.push('\n');
            }
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
                let (text, _) = scalar(scalar_value, indent + 2, indent + 2);
                out.push_str(&text);
                out.push('\n');
            }
        }
    }
}

/// Reads a rosparam file (block YAML; flow collections and quoted scalars inside it).
pub fn load(text: &str) -> Result<Yaml, YamlError> {
    let lines: Vec<Line> = text
        .lines()
        .enumerate()
        .filter_map(|(n, raw)| Line::new(n + 1, raw))
        .filter(|l| l.text != "---")
        .collect();
    if lines.len() > 100_000 {
        return Err(YamlError("more than 100000 lines".into()));
    }
    let mut pos = 0;
    let value = block(&lines, &mut pos, 0, 0)?;
    match lines.get(pos) {
        Some(l) => Err(YamlError(format!(
            "line {}: unexpected '{}'",
            l.number, l.text
        ))),
        None => Ok(value),
    }
}

/// A line with content: its indentation and text (comments and trailing spaces removed).
struct Line<'a> {
    number: usize,
    indent: usize,
    text: &'a str,
}

impl<'a> Line<'a> {
    fn new(number: usize, raw: &'a str) -> Option<Line<'a>> {
        let trimmed = raw.trim_start_matches(' ');
        let text = strip_comment(trimmed).trim_end();
        (!text.is_empty() && text != "...").then(|| Line {
            number,
            indent: raw.len() - trimmed.len(),
            text,
        })
    }
}

/// The text before a ` #` comment that is outside quotes.
fn strip_comment(s: &str) -> &str {
    let (mut single, mut double, mut previous) = (false, false, ' ');
    for (i, c) in s.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single && previous != '\\' => double = !double,
            '#' if !single && !double && previous.is_whitespace() => return &s[..i],
            _ => {}
        }
        previous = c;
    }
    s
}

/// Where `key: value` splits, for a line that is a mapping entry; the key as YAML types it.
fn mapping_key(text: &str) -> Option<(Yaml, &str)> {
    let (key, rest) = if let Some(q) = text.strip_prefix('\'').or_else(|| text.strip_prefix('"')) {
        let quote = text.as_bytes()[0] as char;
        let end = q.find(quote)? + 2;
        let rest = text[end..].strip_prefix(':')?;
        (parse_flow(&text[..end]).ok()?, rest)
    } else {
        let i = text
            .match_indices(':')
            .find(|(i, _)| text[i + 1..].is_empty() || text[i + 1..].starts_with(' '))?
            .0;
        (crate::yaml::resolve_plain(text[..i].trim()), &text[i + 1..])
    };
    Some((key, rest.trim_start()))
}

/// Parameter names are strings: rosparam refuses `on:` (a bool) or `1:` as keys.
fn string_key(key: Yaml, number: usize) -> Result<String, YamlError> {
    match key {
        Yaml::Str(s) => Ok(s),
        other => Err(YamlError(format!(
            "line {number}: YAML dictionaries must have string keys, not {}",
            crate::yaml::scalar_text(&other)
        ))),
    }
}

const MAX_DEPTH: usize = 64;

/// The block starting at `lines[*pos]`, whose lines are indented `indent` or more.
fn block(lines: &[Line], pos: &mut usize, indent: usize, depth: usize) -> Result<Yaml, YamlError> {
    if depth > MAX_DEPTH {
        return Err(YamlError("nested too deep".into()));
    }
    let Some(first) = lines.get(*pos) else {
        return Ok(Yaml::Null);
    };
    if first.indent < indent {
        return Ok(Yaml::Null);
    }
    let at = first.indent;
    if first.text == "-" || first.text.starts_with("- ") {
        let mut items = Vec::new();
        while let Some(l) = lines.get(*pos) {
            if l.indent != at || !(l.text == "-" || l.text.starts_with("- ")) {
                break;
            }
            let rest = l.text[1..].trim_start();
            *pos += 1;
            if rest.is_empty() {
                items.push(block(lines, pos, at + 1, depth + 1)?);
            } else {
                items.push(inline(lines, pos, rest, at + 2, l.number, depth)?);
            }
        }
        return Ok(Yaml::Seq(items));
    }
    if mapping_key(first.text).is_some() {
        return entries(lines, pos, at, Vec::new(), depth);
    }
    *pos += 1;
    parse_flow(first.text).map_err(|e| YamlError(format!("line {}: {}", first.number, e.0)))
}

/// The rest of a `- ` item: a scalar, or the first entry of a mapping whose other entries
/// follow at `indent`.
fn inline(
    lines: &[Line],
    pos: &mut usize,
    text: &str,
    indent: usize,
    number: usize,
    depth: usize,
) -> Result<Yaml, YamlError> {
    match mapping_key(text) {
        Some((key, rest)) if !text.starts_with('[') && !text.starts_with('{') => {
            let key = string_key(key, number)?;
            let value = entry_value(lines, pos, rest, indent, number, depth)?;
            entries(lines, pos, indent, vec![(key, value)], depth)
        }
        _ => parse_flow(text).map_err(|e| YamlError(format!("line {number}: {}", e.0))),
    }
}

/// Mapping entries at exactly `indent`.
fn entries(
    lines: &[Line],
    pos: &mut usize,
    indent: usize,
    mut pairs: Vec<(String, Yaml)>,
    depth: usize,
) -> Result<Yaml, YamlError> {
    while let Some(l) = lines.get(*pos) {
        if l.indent != indent {
            break;
        }
        let Some((key, rest)) = mapping_key(l.text) else {
            break;
        };
        let key = string_key(key, l.number)?;
        *pos += 1;
        let value = entry_value(lines, pos, rest, indent, l.number, depth)?;
        pairs.retain(|(k, _)| *k != key); // a repeated key: the last one wins, as in PyYAML
        pairs.push((key, value));
    }
    Ok(Yaml::Map(pairs))
}

/// The value after `key:`: inline, or the block below it (deeper, or a sequence at the
/// same indentation).
fn entry_value(
    lines: &[Line],
    pos: &mut usize,
    rest: &str,
    indent: usize,
    number: usize,
    depth: usize,
) -> Result<Yaml, YamlError> {
    if !rest.is_empty() {
        return parse_flow(rest).map_err(|e| YamlError(format!("line {number}: {}", e.0)));
    }
    match lines.get(*pos) {
        Some(n) if n.indent > indent => block(lines, pos, indent + 1, depth + 1),
        Some(n) if n.indent == indent && (n.text == "-" || n.text.starts_with("- ")) => {
            block(lines, pos, indent, depth + 1)
        }
        _ => Ok(Yaml::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
