//! Python's text forms of values, which rospy, rostopic, PyYAML and xmlrpclib write and
//! udpros writes the same: `repr` of floats, bytes and strings.

/// `repr(float)` in Python 3: the shortest digits that read back to the same double, in
/// fixed notation when the decimal exponent is in `-4..16`, else `1e-05` style.
pub(crate) fn float_repr(x: f64) -> String {
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
    // Rust's `{:e}` gives the shortest round-trip digits: "d.ddde±x".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    round_half_even(&mut digits, exp, x.abs());
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

/// Where two shortest digit strings read back to `x` and `x` lies exactly halfway between
/// them (`8828964652.1015625`: `…562` and `…563`), Python's repr takes the even one and
/// Rust's formatting may take the other: `digits` (of `x = 0.digits × 10^(exp+1)`, `x > 0`)
/// becomes the even one. Exact integer arithmetic, no formatting: `x` is a tie at the
/// last digit when `2x·10^q` is an odd integer, `q` the digits after the decimal point
/// that the last digit stands for.
fn round_half_even(digits: &mut String, exp: i32, x: f64) {
    let n = digits.len() as i32;
    let q = n - 1 - exp;
    if q < 0
        || digits
            .bytes()
            .last()
            .is_none_or(|d| (d - b'0').is_multiple_of(2))
    {
        return; // only an odd last digit can be the wrong side of a tie
    }
    // x = m·2^e exactly.
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (m, e) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), biased - 1075)
    };
    if m == 0 {
        return;
    }
    // 2x·10^q = m·5^q·2^(e+1+q): an odd integer exactly when m's factors of two cancel
    // the power of two.
    let twos = e + 1 + q;
    if twos > 0 || m.trailing_zeros() as i32 != -twos {
        return;
    }
    let Some(odd) = 5u128
        .checked_pow(q as u32)
        .and_then(|p| u128::from(m >> m.trailing_zeros()).checked_mul(p))
    else {
        return;
    };
    // odd = 2·lower + 1: the two candidates are `lower` and `lower + 1`.
    let lower = (odd - 1) / 2;
    let even = if lower.is_multiple_of(2) {
        lower
    } else {
        lower + 1
    };
    let candidate = even.to_string();
    if candidate.len() == digits.len() {
        *digits = candidate;
    }
}

/// `repr(bytes)` in Python 3: `b'...'`.
pub(crate) fn bytes_repr(data: &[u8]) -> String {
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

/// `repr(str)` in Python 3: quoted as Python picks the quote, with backslashes, quotes and
/// control characters escaped, and other characters as they are.
pub(crate) fn str_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            _ if c == quote => {
                out.push('\\');
                out.push(quote);
            }
            _ if c.is_control() && (c as u32) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            _ if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            _ => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_ties_print_the_even_digit_as_python_does() {
        // Each is exactly halfway between two 17-digit strings that read back to it (the
        // fractions are exact in binary; Python printed the strings).
        for (whole, fraction, python) in [
            (8_828_964_652.0, 13.0 / 128.0, "8828964652.101562"),
            (1_357_068_841.0, 205.0 / 256.0, "1357068841.8007812"),
            (8_720_442_928.0, 5.0 / 128.0, "8720442928.039062"),
            (3_475_466_614.0, 85.0 / 256.0, "3475466614.3320312"),
            (-2_951_650_093.0, -181.0 / 256.0, "-2951650093.7070312"),
        ] {
            assert_eq!(float_repr(whole + fraction), python);
        }
        // Not ties: the shortest digits stay as they are.
        assert_eq!(float_repr(0.1), "0.1");
        assert_eq!(float_repr(1.0 / 3.0), "0.3333333333333333");
        assert_eq!(float_repr(2.0f64.sqrt()), "1.4142135623730951");
    }

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
    fn strings_print_like_python() {
        assert_eq!(str_repr("Small"), "'Small'");
        assert_eq!(str_repr("it's"), "\"it's\"");
        assert_eq!(str_repr("a'\"b"), "'a\\'\"b'");
        assert_eq!(str_repr("x\\y\n\u{1}é"), "'x\\\\y\\n\\x01é'");
    }
}
