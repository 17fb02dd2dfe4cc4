//! The ROS1 serde deserializer on arbitrary bytes, through array-heavy generated types:
//! it may refuse, never panic; whatever it accepts must re-encode to bytes that decode to
//! themselves (not always the input: invalid UTF-8 is replaced, as genpy does, and any
//! non-zero bool byte reads as true).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use udpros::msgs;
use udpros::wire;

fn check<M: udpros::msg::Message>(data: &Bytes) {
    if let Ok(msg) = wire::from_bytes::<M>(data) {
        let again = Bytes::from(wire::to_vec(&msg).expect("a decoded message encodes"));
        let twice = wire::to_vec(&wire::from_bytes::<M>(&again).expect("re-encoded decodes"))
            .expect("encodes");
        assert_eq!(twice, again.to_vec(), "{}", M::TYPE);
    }
}

fuzz_target!(|data: &[u8]| {
    let data = Bytes::copy_from_slice(data);
    check::<msgs::sensor_msgs::PointCloud2>(&data);
    check::<msgs::sensor_msgs::CameraInfo>(&data);
    check::<msgs::diagnostic_msgs::DiagnosticArray>(&data);
    check::<msgs::rosgraph_msgs::Log>(&data);
    check::<msgs::geometry_msgs::PolygonStamped>(&data);
    check::<msgs::std_msgs::Float64MultiArray>(&data);
});
