//! The dynamic message layer on arbitrary input: the first line-delimited part is a message
//! definition (as a connection header would carry it), the rest a message of that type;
//! also every shipped type decodes the whole input. Nothing may panic, and whatever decodes
//! must encode to bytes that decode to themselves.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use udpros::msg::dynamic::DynamicType;

fn shipped() -> &'static [DynamicType] {
    static TYPES: OnceLock<Vec<DynamicType>> = OnceLock::new();
    TYPES.get_or_init(|| {
        let infos = udpros::msgs::MESSAGES.iter().step_by(5);
        infos
            .map(|m| DynamicType::from_definition(m.type_name, m.definition).expect("shipped"))
            .collect()
    })
}

fn check(ty: &DynamicType, body: &Bytes) {
    if let Ok(value) = ty.decode(body) {
        let _ = value.to_yaml();
        let _ = value.to_json();
        let again = Bytes::from(ty.encode(&value).expect("a decoded value encodes"));
        let twice = ty
            .encode(&ty.decode(&again).expect("re-encoded decodes"))
            .expect("encodes");
        assert_eq!(twice, again.to_vec());
    }
}

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let definition = String::from_utf8_lossy(&data[..split]);
    let body = Bytes::copy_from_slice(data.get(split + 1..).unwrap_or(&[]));
    if let Ok(ty) = DynamicType::from_definition("fuzz/Type", &definition) {
        check(&ty, &body);
    }
    let whole = Bytes::copy_from_slice(data);
    for ty in shipped() {
        check(ty, &whole);
    }
});
