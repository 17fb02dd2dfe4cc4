//! ping_sonar's own latency: from the last byte of a device frame arriving to the ROS
//! message leaving for its subscribers (decode the frame, build `sensor_msgs/Range` and
//! the profile message, serialize, hand to the publication). Prints p50/p99/max.
//! `-- --quick` runs a few hundred iterations (CI's smoke run).

use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::{Duration, Instant};
use udpros::msg::{Message as RosMessage, Time};
use udpros::msgs::{sensor_msgs, udpros as umsg};
use udpros::transport::publication::{Publication, TopicInfo};
use udpros_bridges::ping::messages::{Message, Profile};
use udpros_bridges::ping::Decoder;

fn publication<M: RosMessage>(topic: &str) -> Publication {
    let info = TopicInfo {
        topic: topic.into(),
        msg_type: M::TYPE.into(),
        md5sum: M::MD5SUM.into(),
        definition: M::DEFINITION.into(),
    };
    Publication::new(info, false, 100, "/bench", Arc::new(AtomicU32::new(0)))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let iterations = if quick { 300 } else { 100_000 };
    let frames: Vec<Vec<u8>> = (0..64u32)
        .map(|i| {
            let p = Profile {
                distance: 1000 + i * 37,
                confidence: 97,
                transmit_duration: 100,
                ping_number: i,
                scan_start: 0,
                scan_length: 10_000,
                gain_setting: 1,
                profile_data: (0..200)
                    .map(|k| (k * 7 + i) as u8)
                    .collect::<Vec<u8>>()
                    .into(),
            };
            Message::Profile(p).to_frame()
        })
        .collect();
    let range_pub = publication::<sensor_msgs::Range>("/ping_sonar/range");
    let profile_pub = publication::<umsg::PingProfile>("/ping_sonar/profile");
    let mut decoder = Decoder::default();
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let frame = &frames[i % frames.len()];
        let arrived = Instant::now();
        decoder.extend(frame);
        let f = decoder.next_frame().expect("frame");
        let Ok(Message::Profile(p)) = Message::decode(f.id, &f.payload) else {
            panic!("profile")
        };
        let stamp = Time::now();
        let header = udpros::msgs::std_msgs::Header {
            seq: 0,
            stamp,
            frame_id: "sonar".into(),
        };
        let range = sensor_msgs::Range {
            header: header.clone(),
            radiation_type: 0,
            field_of_view: 0.52,
            min_range: 0.0,
            max_range: p.scan_length as f32 / 1000.0,
            range: p.distance as f32 / 1000.0,
        };
        range_pub.publish_frame(udpros::wire::to_frame(&range).expect("serializes"));
        let profile = umsg::PingProfile {
            header,
            distance: p.distance as f32 / 1000.0,
            distance_mm: p.distance,
            profile_data: p.profile_data,
            ..Default::default()
        };
        profile_pub.publish_frame(udpros::wire::to_frame(&profile).expect("serializes"));
        samples.push(arrived.elapsed());
    }
    samples.sort();
    println!("ping_sonar: frame's last byte to ROS messages handed to their links ({iterations} profiles)");
    println!();
    println!("| p50 | p99 | max | target p99 |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {:.1?} | {:.1?} | {:.1?} | < 200 µs |",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples[samples.len() - 1]
    );
}
