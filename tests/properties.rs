//! Property tests of the ROS1 serialization and dynamic messages: round trips through the
//! generated types, and decoders that neither panic nor over-allocate on any input.

use udpros_testkit as common;

use bytes::Bytes;
use common::random::{random_value, Rng};
use proptest::prelude::*;
use udpros::msg::dynamic::DynamicType;
use udpros::msg::Message;
use udpros::msgs;
use udpros::wire;

fn dynamic<M: Message>() -> DynamicType {
    DynamicType::from_definition(M::TYPE, M::DEFINITION).expect("definition")
}

/// Random bytes of `M` from the dynamic encoder must decode into the generated struct and
/// encode back to the same bytes; the struct must survive its own round trip.
fn check_round_trip<M: Message + PartialEq>(seed: u64) {
    let ty = dynamic::<M>();
    let value = random_value(&ty, M::TYPE, &mut Rng::new(seed));
    let bytes = Bytes::from(ty.encode(&value).expect("encode"));
    let typed: M = wire::from_bytes(&bytes).expect("typed decode");
    let again = wire::to_vec(&typed).expect("typed encode");
    assert_eq!(again, bytes.to_vec(), "{}", M::TYPE);
    // The size found without writing is the size written.
    assert_eq!(
        wire::serialized_len(&typed).expect("count"),
        bytes.len(),
        "{}",
        M::TYPE
    );
    let frame = wire::to_frame(&typed).expect("frame");
    assert_eq!(&frame[..4], &(bytes.len() as u32).to_le_bytes());
    assert_eq!(&frame[4..], &bytes[..]);
    // Values hold NaNs, which never compare equal: compare what they encode to.
    let decoded = ty.decode(&bytes).expect("dynamic decode");
    assert_eq!(ty.encode(&decoded).expect("encode"), bytes.to_vec());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_types_round_trip(seed in any::<u64>()) {
        check_round_trip::<msgs::std_msgs::Header>(seed);
        check_round_trip::<msgs::std_msgs::String>(seed);
        check_round_trip::<msgs::std_msgs::Float64MultiArray>(seed);
        check_round_trip::<msgs::sensor_msgs::Image>(seed);
        check_round_trip::<msgs::sensor_msgs::LaserScan>(seed);
        check_round_trip::<msgs::sensor_msgs::CameraInfo>(seed);
        check_round_trip::<msgs::sensor_msgs::PointCloud2>(seed);
        check_round_trip::<msgs::geometry_msgs::PoseWithCovarianceStamped>(seed);
        check_round_trip::<msgs::rosgraph_msgs::Log>(seed);
        check_round_trip::<msgs::diagnostic_msgs::DiagnosticArray>(seed);
    }

    #[test]
    fn decoders_never_panic_on_garbage(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let bytes = Bytes::from(data);
        // Typed: Ok or Err, never a panic.
        let _ = wire::from_bytes::<msgs::sensor_msgs::Image>(&bytes);
        let _ = wire::from_bytes::<msgs::rosgraph_msgs::Log>(&bytes);
        let _ = wire::from_bytes::<msgs::diagnostic_msgs::DiagnosticArray>(&bytes);
        let _ = wire::from_slice::<msgs::sensor_msgs::CameraInfo>(&bytes);
        for info in msgs::MESSAGES {
            let ty = DynamicType::from_definition(info.type_name, info.definition).expect("definition");
            if let Ok(value) = ty.decode(&bytes) {
                // Whatever decodes encodes to bytes that decode to themselves (not always the
                // input: a bool byte of 2 reads as true and is written as 1, as genpy does).
                let again = Bytes::from(ty.encode(&value).expect("encode"));
                let twice = ty.encode(&ty.decode(&again).expect("decode again")).expect("encode");
                prop_assert_eq!(twice, again.to_vec());
                let _ = (value.to_yaml(), value.to_json());
            }
        }
    }

    #[test]
    fn definition_parser_never_panics(text in "[a-zA-Z0-9_/\\[\\] =#\n-]{0,200}") {
        let _ = DynamicType::from_definition("pkg/Type", &text);
        let with_section = format!("{text}\n{}\nMSG: pkg/Other\n{text}", "=".repeat(80));
        let _ = DynamicType::from_definition("pkg/Type", &with_section);
    }
}

#[test]
fn a_huge_length_prefix_is_refused_before_allocating() {
    // uint8[] data with a claimed length of 4 GiB and 3 bytes of payload.
    let mut body = Vec::new();
    body.extend_from_slice(&[0u8; 8]); // layout: no dimensions, data_offset 0
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    body.extend_from_slice(&[1, 2, 3]);
    let bytes = Bytes::from(body);
    let err = wire::from_bytes::<msgs::std_msgs::UInt8MultiArray>(&bytes).unwrap_err();
    assert!(
        matches!(
            err,
            wire::Error::LengthPrefix {
                len: u32::MAX,
                remaining: 3
            }
        ),
        "{err}"
    );
    let ty = dynamic::<msgs::std_msgs::UInt8MultiArray>();
    assert!(ty.decode(&bytes).is_err());
}

#[test]
fn zero_copy_byte_arrays_share_the_input_buffer() {
    let image = msgs::sensor_msgs::Image {
        data: Bytes::from(vec![7u8; 1000]),
        width: 10,
        ..Default::default()
    };
    let body = Bytes::from(wire::to_vec(&image).expect("encode"));
    let decoded: msgs::sensor_msgs::Image = wire::from_bytes(&body).expect("decode");
    assert_eq!(decoded, image);
    let inside = body.as_ptr_range();
    assert!(
        inside.contains(&decoded.data.as_ptr()),
        "uint8[] data was copied"
    );
    // from_slice has no buffer to share, so it copies.
    let copied: msgs::sensor_msgs::Image = wire::from_slice(&body).expect("decode");
    assert!(!inside.contains(&copied.data.as_ptr()));
}

#[test]
fn trailing_bytes_and_truncation_are_errors() {
    let body = wire::to_vec(&msgs::std_msgs::String { data: "hi".into() }).expect("encode");
    let mut longer = body.clone();
    longer.push(0);
    assert_eq!(
        wire::from_slice::<msgs::std_msgs::String>(&longer),
        Err(wire::Error::TrailingBytes(1))
    );
    assert!(wire::from_slice::<msgs::std_msgs::String>(&body[..body.len() - 1]).is_err());
}

#[test]
fn recursive_and_oversized_definitions_are_refused() {
    let recursive = format!("pkg/A a\n{}\nMSG: pkg/A\npkg/A a", "=".repeat(80));
    assert!(DynamicType::from_definition("pkg/A", &recursive).is_err());
    assert!(DynamicType::from_definition("pkg/A", "uint8[99999999999999999999999] x").is_err());
    assert!(DynamicType::from_definition("pkg/A", "pkg/Missing m").is_err());
    // A fixed array of empty messages may not expand into more values than the input holds.
    let empties = format!("pkg/E[1000000] e\n{}\nMSG: pkg/E\n", "=".repeat(80));
    let ty = DynamicType::from_definition("pkg/A", &empties).expect("valid definition");
    assert!(ty.decode(&Bytes::new()).is_err());
}
