//! PyYAML's way of writing values (quoting, escapes, line breaks), which `rostopic echo`
//! output and `rosparam dump` files are made of.

/// PyYAML's emitter width: scalars are folded past this column.
const BEST_WIDTH: usize = 80;
/// The indentation PyYAML gives continuation lines of a top-level scalar or list item.
const SCALAR_INDENT: usize = 2;

fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// The state of PyYAML's emitter that its scalar writers consult, and their output.
pub(crate) struct Emitter {
    pub out: String,
    pub column: usize,
    pub whitespace: bool,
    pub indention: bool,
    /// Where folded continuation lines start.
    pub indent: usize,
    /// Whether long lines may fold (PyYAML's `split`): not in a simple mapping key.
    pub split: bool,
}

impl Emitter {
    /// At the start of a document: the root scalar needs no space before it.
    pub(crate) fn new() -> Emitter {
        Emitter {
            out: String::new(),
            column: 0,
            whitespace: true,
            indention: true,
            indent: SCALAR_INDENT,
            split: true,
        }
    }

    fn write(&mut self, chars: &[char]) {
        self.out.extend(chars);
        self.column += chars.len();
    }

    /// `s`, which is `chars` characters long.
    fn write_counted(&mut self, s: &str, chars: usize) {
        self.out.push_str(s);
        self.column += chars;
    }

    pub(crate) fn write_str(&mut self, s: &str) {
        self.out.push_str(s);
        self.column += s.chars().count();
    }

    fn write_indicator(&mut self, indicator: &str, need_whitespace: bool) {
        if !self.whitespace && need_whitespace {
            self.write_str(" ");
        }
        self.write_str(indicator);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_line_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
        self.whitespace = true;
        self.indention = true;
    }

    fn write_indent(&mut self) {
        if !self.indention
            || self.column > self.indent
            || (self.column == self.indent && !self.whitespace)
        {
            self.write_line_break();
        }
        if self.column < self.indent {
            self.whitespace = true;
            let pad = " ".repeat(self.indent - self.column);
            self.write_str(&pad);
        }
    }

    /// PyYAML's `write_plain` and `write_single_quoted` share this folding of spaces and
    /// line breaks; `quoted` adds the single-quote handling.
    fn write_folded(&mut self, text: &[char], quoted: bool) {
        let (mut spaces, mut breaks) = (false, false);
        let (mut start, mut end) = (0usize, 0usize);
        while end <= text.len() {
            let ch = text.get(end).copied();
            if spaces {
                if ch != Some(' ') {
                    let may_fold = !quoted || (start != 0 && end != text.len());
                    if start + 1 == end && self.column > BEST_WIDTH && may_fold && self.split {
                        self.write_indent();
                        if !quoted {
                            self.whitespace = false;
                            self.indention = false;
                        }
                    } else {
                        self.write(&text[start..end]);
                    }
                    start = end;
                }
            } else if breaks {
                if !ch.is_some_and(is_break) {
                    if text[start] == '\n' {
                        self.write_line_break();
                    }
                    for _ in start..end {
                        self.write_line_break();
                    }
                    self.write_indent();
                    if !quoted {
                        self.whitespace = false;
                        self.indention = false;
                    }
                    start = end;
                }
            } else if ch.is_none_or(|c| c == ' ' || is_break(c) || (quoted && c == '\''))
                && start < end
            {
                self.write(&text[start..end]);
                start = end;
            }
            if quoted && ch == Some('\'') {
                self.write_str("''");
                start = end + 1;
            }
            if let Some(c) = ch {
                spaces = c == ' ';
                breaks = is_break(c);
            }
            end += 1;
        }
    }

    pub(crate) fn write_plain(&mut self, text: &[char]) {
        if !self.whitespace {
            self.write_str(" ");
        }
        self.whitespace = false;
        self.indention = false;
        self.write_folded(text, false);
    }

    pub(crate) fn write_single_quoted(&mut self, text: &[char]) {
        self.write_indicator("'", true);
        self.write_folded(text, true);
        self.write_indicator("'", false);
    }

    /// A double-quoted scalar, folded as PyYAML folds it. It walks `text` in place (char
    /// positions for the columns, byte offsets for the slices): a 100 MB string costs its
    /// output, not a 400 MB copy as `char`s.
    pub(crate) fn write_double_quoted(&mut self, text: &str) {
        self.write_indicator("\"", true);
        let n = text.chars().count();
        // Positions in chars, and the byte offsets of the same places.
        let (mut start, mut end) = (0usize, 0usize);
        let (mut start_b, mut end_b) = (0usize, 0usize);
        while end <= n {
            let ch = text[end_b..].chars().next();
            let needs_escape = ch.is_none_or(|c| {
                matches!(
                    c,
                    '"' | '\\' | '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{FEFF}'
                ) || !(' '..='~').contains(&c)
            });
            if needs_escape {
                if start < end {
                    self.write_counted(&text[start_b..end_b], end - start);
                    (start, start_b) = (end, end_b);
                }
                if let Some(c) = ch {
                    self.write_str(&yaml_escape(c));
                    (start, start_b) = (end + 1, end_b + c.len_utf8());
                }
            }
            if self.split
                && 0 < end
                && end + 1 < n
                && (ch == Some(' ') || start >= end)
                && self.column as isize + end as isize - start as isize > BEST_WIDTH as isize
            {
                // After an escape `start` is one past `end`: nothing to write, as in Python.
                if start < end {
                    self.write_counted(&text[start_b..end_b], end - start);
                    (start, start_b) = (end, end_b);
                }
                self.write_str("\\");
                self.write_indent();
                self.whitespace = false;
                self.indention = false;
                if text[start_b..].starts_with(' ') {
                    self.write_str("\\");
                }
            }
            end += 1;
            end_b += ch.map_or(0, char::len_utf8);
        }
        self.write_indicator("\"", false);
    }
}

/// `yaml.dump(s, default_style='"')` without the trailing newline: a double-quoted scalar,
/// escaped as PyYAML does with `allow_unicode=False`, folded at 80 columns.
#[cfg(test)]
pub(crate) fn yaml_double_quoted(text: &str) -> String {
    let mut out = String::new();
    push_yaml_double_quoted(text, &mut out);
    out
}

/// [`yaml_double_quoted`] appended to `out` (columns counted as if it began a line).
pub(crate) fn push_yaml_double_quoted(text: &str, out: &mut String) {
    let mut e = Emitter::new();
    e.out = std::mem::take(out);
    e.write_double_quoted(text);
    *out = e.out;
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

/// The styles PyYAML's `analyze_scalar` allows for a non-empty string in block context.
pub(crate) struct Analysis {
    pub plain: bool,
    pub single_quoted: bool,
}

pub(crate) fn analyze(s: &[char]) -> Analysis {
    let is_ws = |c: Option<&char>| {
        c.is_none_or(|c| {
            matches!(
                c,
                '\0' | ' ' | '\t' | '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}'
            )
        })
    };
    let text: String = s.iter().collect();
    let mut block_indicators = text.starts_with("---") || text.starts_with("...");
    let (mut line_breaks, mut special) = (false, false);
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) =
        (false, false, false, false);
    let (mut break_space, mut space_break, mut previous_space, mut previous_break) =
        (false, false, false, false);
    let mut preceded_by_whitespace = true;
    for (i, &ch) in s.iter().enumerate() {
        let followed_by_whitespace = is_ws(s.get(i + 1));
        if i == 0 {
            if "#,[]{}&*!|>'\"%@`".contains(ch) || ("?:-".contains(ch) && followed_by_whitespace) {
                block_indicators = true;
            }
        } else if (ch == ':' && followed_by_whitespace) || (ch == '#' && preceded_by_whitespace) {
            block_indicators = true;
        }
        line_breaks |= is_break(ch);
        special |= !(ch == '\n' || (' '..='~').contains(&ch));
        if ch == ' ' {
            leading_space |= i == 0;
            trailing_space |= i == s.len() - 1;
            break_space |= previous_break;
            (previous_space, previous_break) = (true, false);
        } else if is_break(ch) {
            leading_break |= i == 0;
            trailing_break |= i == s.len() - 1;
            space_break |= previous_space;
            (previous_space, previous_break) = (false, true);
        } else {
            (previous_space, previous_break) = (false, false);
        }
        preceded_by_whitespace = is_ws(Some(&ch));
    }
    let edges = leading_space || leading_break || trailing_space || trailing_break;
    Analysis {
        plain: !(edges || break_space || space_break || special || line_breaks || block_indicators),
        single_quoted: !(break_space || space_break || special),
    }
}

/// `yaml.dump([s])` for one string: the list item as PyYAML writes it (`- text`, possibly
/// over several lines), plain when it may be, else single-quoted, else double-quoted.
pub(crate) fn yaml_list_item(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut e = Emitter::new();
    e.write_indicator("-", true);
    e.indention = true;
    let analysis = analyze(&chars);
    if !chars.is_empty() && analysis.plain && !crate::yaml::plain_is_not_a_string(s) {
        e.write_plain(&chars);
    } else if chars.is_empty() || analysis.single_quoted {
        e.write_single_quoted(&chars);
    } else {
        e.write_double_quoted(s);
    }
    e.out
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn list_items_are_styled_as_pyyaml_does() {
        // Expected values printed by PyYAML 6.0 for yaml.dump([s]).
        let cases = [
            ("joint1", "- joint1"),
            (" ", "- ' '"),
            ("- a", "- '- a'"),
            ("a: b", "- 'a: b'"),
            ("x#y", "- x#y"),
            ("x #y", "- 'x #y'"),
            ("?a", "- ?a"),
            ("09", "- 09"),
            ("012", "- '012'"),
            ("1:20", "- '1:20'"),
            ("1e5", "- 1e5"),
            ("1.0e+5", "- '1.0e+5'"),
            ("Yes", "- 'Yes'"),
            ("2001-01-01", "- '2001-01-01'"),
            ("'q", "- '''q'"),
            ("q'", "- q'"),
            ("a\tb", "- \"a\\tb\""),
            ("\u{e9}", "- \"\\xE9\""),
            ("a\nb", "- 'a\n\n  b'"),
            ("", "- ''"),
        ];
        for (s, want) in cases {
            assert_eq!(yaml_list_item(s), want, "{s:?}");
        }
        let long = format!("{} {}", "a".repeat(100), "b".repeat(10));
        assert_eq!(
            yaml_list_item(&long),
            format!("- {}\n  {}", "a".repeat(100), "b".repeat(10))
        );
    }
}
