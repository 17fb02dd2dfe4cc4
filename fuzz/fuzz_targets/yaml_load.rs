//! The YAML reader on arbitrary text: no panic, no run-away memory or time (aliases,
//! nesting), and whatever loads as parameters dumps as rosparam does and loads back to the
//! same parameters.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udpros::xmlrpc::{write_call, Value};

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Struct(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}
use udpros::yaml::{load, load_all, params};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = load_all(text);
    let Ok(Ok(value)) = load(text).map(|y| y.to_xmlrpc()) else {
        return;
    };
    // Nested so deep that its indentation passes PyYAML's 80-column width, a long string
    // folds at every space, and PyYAML's own dump does not read back (a space escape
    // meets a fold); the dump copies PyYAML byte for byte, so it is left at that.
    if depth(&value) > 30 {
        return;
    }
    let dumped = params::dump(&value);
    let back = load(&dumped)
        .unwrap_or_else(|e| panic!("{dumped:?} does not load back: {e}"))
        .to_xmlrpc()
        .expect("a dump converts back");
    // NaN never equals itself; compare what the values write.
    assert_eq!(
        write_call("m", &[back]),
        write_call("m", &[value]),
        "{dumped:?}"
    );
});
