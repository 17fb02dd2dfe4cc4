//! Python's and PyYAML's ways of writing values, which `rostopic echo` output is made of.

/// `repr(float)` in Python 3: the shortest digits that read back to the same double, in
/// fixed notation when the decimal exponent is in `-4..16`, else `1e-05` style.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: "d.ddde±x".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if x < 0.0 { "-" } else { "" };
    if !(-4..16).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{body}")
}

/// `repr(bytes)` in Python 3: `b'...'`.
pub fn bytes_repr(data: &[u8]) -> String {
    let quote = if data.contains(&b'\'') && !data.contains(&b'"') {
        '"'
    } else {
        '\''
    };
    let mut out = format!("b{quote}");
    for &b in data {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            _ if b == quote as u8 => {
                out.push('\\');
                out.push(quote);
            }
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push(quote);
    out
}

/// PyYAML's emitter width: double-quoted scalars are folded past this column.
const BEST_WIDTH: usize = 80;
/// The indentation PyYAML gives continuation lines of a top-level scalar.
const SCALAR_INDENT: usize = 2;

/// `yaml.dump(s, default_style='"')` without the trailing newline: a double-quoted scalar,
/// escaped as PyYAML does with `allow_unicode=False`, folded at 80 columns.
pub fn yaml_double_quoted(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::from("\"");
    let mut column = 1;
    let (mut start, mut end) = (0usize, 0usize);
    while end <= chars.len() {
        let ch = chars.get(end).copied();
        let needs_escape = match ch {
            None => true,
            Some(c) => {
                matches!(
                    c,
                    '"' | '\\' | '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{FEFF}'
                ) || !(' '..='~').contains(&c)
            }
        };
        if needs_escape {
            if start < end {
                out.extend(&chars[start..end]);
                column += end - start;
                start = end;
            }
            if let Some(c) = ch {
                let escaped = yaml_escape(c);
                column += escaped.len();
                out.push_str(&escaped);
                start = end + 1;
            }
        }
        if 0 < end
            && end + 1 < chars.len()
            && (ch == Some(' ') || start >= end)
            && column as isize + end as isize - start as isize > BEST_WIDTH as isize
        {
            // After an escape `start` is one past `end`: the slice is then empty, as in Python.
            out.extend(chars.get(start..end).unwrap_or(&[]));
            out.push('\\');
            if start < end {
                start = end;
            }
            out.push('\n');
            out.push_str(&" ".repeat(SCALAR_INDENT));
            column = SCALAR_INDENT;
            if chars[start] == ' ' {
                out.push('\\');
                column += 1;
            }
        }
        end += 1;
    }
    out.push('"');
    out
}

fn yaml_escape(c: char) -> String {
    let short = match c {
        '\0' => "0",
        '\x07' => "a",
        '\x08' => "b",
        '\t' => "t",
        '\n' => "n",
        '\x0b' => "v",
        '\x0c' => "f",
        '\r' => "r",
        '\x1b' => "e",
        '"' => "\"",
        '\\' => "\\",
        '\u{85}' => "N",
        '\u{a0}' => "_",
        '\u{2028}' => "L",
        '\u{2029}' => "P",
        _ => "",
    };
    let code = c as u32;
    match (short, code) {
        ("", 0..=0xff) => format!("\\x{code:02X}"),
        ("", 0x100..=0xffff) => format!("\\u{code:04X}"),
        ("", _) => format!("\\U{code:08X}"),
        _ => format!("\\{short}"),
    }
}

/// One string as `yaml.dump` writes it inside a block sequence: plain when PyYAML would,
/// else single-quoted, else double-quoted.
pub fn yaml_block_scalar(s: &str) -> String {
    if s.is_empty() {
        return "''".into();
    }
    if is_plain_safe(s) && !resolves_to_non_string(s) {
        return s.to_string();
    }
    if s.chars().all(|c| (' '..='~').contains(&c)) && !s.starts_with(' ') && !s.ends_with(' ') {
        return format!("'{}'", s.replace('\'', "''"));
    }
    yaml_double_quoted(s)
}

/// The subset of PyYAML's scalar analysis that decides whether a plain scalar is allowed
/// in block context (printable ASCII, no indicators where they would be read as syntax).
fn is_plain_safe(s: &str) -> bool {
    let b = s.as_bytes();
    if !s.chars().all(|c| (' '..='~').contains(&c)) || b[0] == b' ' || b[b.len() - 1] == b' ' {
        return false;
    }
    if s.starts_with("---") || s.starts_with("...") {
        return false;
    }
    let first = b[0];
    if b"#,[]{}&*!|>'\"%@`".contains(&first) {
        return false;
    }
    if matches!(first, b'-' | b'?' | b':') && (b.len() == 1 || b[1] == b' ') {
        return false;
    }
    if s.contains(": ") || s.contains(" #") || s.ends_with(':') {
        return false;
    }
    true
}

/// Whether PyYAML's implicit resolvers would read the plain scalar as a bool, null, number,
/// timestamp or merge key (then it must be quoted to stay a string).
fn resolves_to_non_string(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
        "on", "On", "ON", "off", "Off", "OFF", "~", "null", "Null", "NULL", "<<", "=", ".inf",
        ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN",
        ".NAN",
    ];
    if WORDS.contains(&s) {
        return true;
    }
    let digits_or_underscores =
        |t: &str, radix: u32| t.chars().all(|c| c == '_' || c.is_digit(radix));
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let is_int = match unsigned.as_bytes() {
        [b'0', b'b', rest @ ..] => !rest.is_empty() && digits_or_underscores(&unsigned[2..], 2),
        [b'0', b'x', rest @ ..] => !rest.is_empty() && digits_or_underscores(&unsigned[2..], 16),
        [b'0'] => true,
        [b'0', ..] => digits_or_underscores(&unsigned[1..], 8),
        [b'1'..=b'9', ..] => digits_or_underscores(unsigned, 10) || is_sexagesimal(unsigned, false),
        _ => false,
    };
    is_int || is_yaml_float(s) || is_timestamp(s)
}

/// `1:30` (int) or `1:30.5` (float), as PyYAML's YAML 1.1 resolvers read them.
fn is_sexagesimal(t: &str, float: bool) -> bool {
    let (head, frac) = match t.split_once('.') {
        Some((h, f)) if float => (h, f),
        Some(_) => return false,
        None if float => return false,
        None => (t, ""),
    };
    let mut parts = head.split(':');
    let first = parts.next().unwrap_or("");
    let mut rest = parts.peekable();
    rest.peek().is_some()
        && first.starts_with(|c: char| c.is_ascii_digit())
        && first.chars().all(|c| c == '_' || c.is_ascii_digit())
        && rest.all(|p| {
            let b = p.as_bytes();
            matches!(b, [d] if d.is_ascii_digit())
                || matches!(b, [b'0'..=b'5', d] if d.is_ascii_digit())
        })
        && frac.chars().all(|c| c == '_' || c.is_ascii_digit())
}

fn is_yaml_float(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        e.strip_prefix(['+', '-'])
            .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
    });
    let digits_or_underscores = |t: &str| t.chars().all(|c| c == '_' || c.is_ascii_digit());
    if let Some(frac) = mantissa.strip_prefix('.') {
        return exponent_ok && !frac.is_empty() && digits_or_underscores(frac);
    }
    let unsigned = mantissa.strip_prefix(['+', '-']).unwrap_or(mantissa);
    if exponent.is_none() && is_sexagesimal(unsigned, true) {
        return true;
    }
    match unsigned.split_once('.') {
        Some((int, frac)) => {
            exponent_ok
                && int.starts_with(|c: char| c.is_ascii_digit())
                && digits_or_underscores(int)
                && digits_or_underscores(frac)
        }
        None => false,
    }
}

fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 8 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[5].is_ascii_digit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_python() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (123456789.0, "123456789.0"),
            (f64::from(0.1f32), "0.10000000149011612"),
            (1.5e300, "1.5e+300"),
            (-0.0, "-0.0"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
            (2.2250738585072014e-308, "2.2250738585072014e-308"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "{x:e}");
        }
    }

    #[test]
    fn bytes_print_like_python() {
        assert_eq!(bytes_repr(b"ab\x00'"), "b\"ab\\x00'\"");
        assert_eq!(bytes_repr(b"a\\\n"), "b'a\\\\\\n'");
    }

    #[test]
    fn double_quoted_escapes_and_folds() {
        assert_eq!(
            yaml_double_quoted("hi \"x\"\n\u{e9}"),
            "\"hi \\\"x\\\"\\n\\xE9\""
        );
        let long = "word ".repeat(20);
        let folded = yaml_double_quoted(long.trim_end());
        assert!(folded.contains("\\\n  "), "{folded}");
    }

    #[test]
    fn block_scalars_are_quoted_when_plain_would_change_type() {
        assert_eq!(yaml_block_scalar("joint1"), "joint1");
        assert_eq!(yaml_block_scalar("yes"), "'yes'");
        assert_eq!(yaml_block_scalar("12"), "'12'");
        assert_eq!(yaml_block_scalar("1.5"), "'1.5'");
        assert_eq!(yaml_block_scalar("a: b"), "'a: b'");
        assert_eq!(yaml_block_scalar(""), "''");
    }
}
