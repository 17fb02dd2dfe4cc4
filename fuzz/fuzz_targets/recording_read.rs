//! Both recording readers (a ROS bag front to back, MCAP through Foxglove's sans-io
//! reader) on arbitrary bytes, behind either format's magic: no panic, and nothing they
//! return is over the limits they were given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udpros_record::{bag, Item, Limits, McapReader};

const LIMITS: Limits = Limits {
    max_record: 1 << 20,
    max_chunk: 4 << 20,
    max_connections: 64,
};

fn check(items: impl Iterator<Item = Result<Item, udpros_record::RecordError>>) {
    let mut connections = 0;
    for item in items {
        match item {
            Ok(Item::Message { data, .. }) => assert!(data.len() <= LIMITS.max_chunk),
            Ok(Item::Connection { .. }) => {
                connections += 1;
                assert!(connections <= LIMITS.max_connections);
            }
            Err(_) => break,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut as_bag = bag::MAGIC.to_vec();
    as_bag.extend_from_slice(data);
    if let Ok(reader) = bag::Reader::new(&as_bag[..], LIMITS) {
        check(reader);
    }
    let mut as_mcap = mcap_magic();
    as_mcap.extend_from_slice(data);
    check(McapReader::new(&as_mcap[..], LIMITS));
});

/// MCAP's magic, as its files start.
fn mcap_magic() -> Vec<u8> {
    b"\x89MCAP0\r\n".to_vec()
}
