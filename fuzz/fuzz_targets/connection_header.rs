//! Connection headers from arbitrary bytes, both forms: no panic, and whatever parses
//! re-encodes to a header that parses to the same fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udpros::wire::header::{ConnectionHeader, HeaderLimits};

fuzz_target!(|data: &[u8]| {
    let limits = HeaderLimits {
        max_total: 1 << 16,
        max_field: 1 << 12,
        max_fields: 64,
    };
    for parsed in [
        ConnectionHeader::decode_fields(data, &limits),
        ConnectionHeader::decode_tcp(data, &limits),
    ] {
        if let Ok(header) = parsed {
            let again =
                ConnectionHeader::decode_tcp(&header.encode_tcp(), &HeaderLimits::default());
            assert_eq!(again.as_ref(), Ok(&header));
        }
    }
});
