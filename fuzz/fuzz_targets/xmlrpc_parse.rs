//! The XML-RPC parser on arbitrary bytes: no panic, and whatever parses as a call or a
//! response writes back to XML that parses to the same thing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udpros::xmlrpc::{
    parse_call, parse_response, write_call, write_fault, write_response, ParseLimits, Value,
};

/// NaN never equals itself; compare what the values write.
fn same(a: &[Value], b: &[Value]) -> bool {
    write_call("m", a) == write_call("m", b)
}

fuzz_target!(|data: &[u8]| {
    let limits = ParseLimits {
        max_body: 1 << 16,
        max_depth: 32,
        max_values: 10_000,
    };
    if let Ok(call) = parse_call(data, &limits) {
        let again = parse_call(
            write_call(&call.method, &call.params).as_bytes(),
            &ParseLimits::default(),
        );
        let again = again.expect("what we write parses");
        assert!(same(&again.params, &call.params));
    }
    match parse_response(data, &limits) {
        Ok(Ok(value)) => {
            let again = parse_response(write_response(&value).as_bytes(), &ParseLimits::default());
            let Ok(Ok(again)) = again else {
                panic!("what we write parses")
            };
            assert!(same(&[again], &[value]));
        }
        Ok(Err(fault)) => {
            let again = parse_response(write_fault(&fault).as_bytes(), &ParseLimits::default());
            assert_eq!(again, Ok(Err(fault)));
        }
        Err(_) => {}
    }
});
