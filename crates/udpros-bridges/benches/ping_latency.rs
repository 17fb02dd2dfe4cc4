//! ping_sonar's own latency: from the last byte of a device frame arriving to the ROS
//! message leaving for its subscribers (decode the frame, build `sensor_msgs/Range` and
//! the profile message, serialize, hand to the publication). Prints p50/p99/max.
//! `-- --quick` runs a few hundred iterations (CI's smoke run).

use std::time::{Duration, Instant};
use udpros::master::Master;
use udpros::msg::Time;
use udpros::msgs::{sensor_msgs, udpros as umsg};
use udpros::node::{AdvertiseOptions, Node};
use udpros_bridges::ping::messages::{Message, Profile};
use udpros_bridges::ping::Decoder;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // A node of its own on an embedded master, as ping_sonar publishes: the path measured
    // is the node's (serialize, hand to each link), with no subscriber to send to.
    let master = Master::start("127.0.0.1:0".parse().unwrap(), "127.0.0.1")
        .await
        .expect("master");
    let args = [
        format!("__master:={}", master.uri()),
        "__ip:=127.0.0.1".to_string(),
    ];
    let node = Node::new("ping_latency_bench", args).await.expect("node");
    let options = AdvertiseOptions::default;
    let range_pub = node
        .advertise::<sensor_msgs::Range>("/ping_sonar/range", options())
        .await
        .expect("advertise");
    let profile_pub = node
        .advertise::<umsg::PingProfile>("/ping_sonar/profile", options())
        .await
        .expect("advertise");
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
        range_pub.publish(&range).expect("serializes");
        let profile = umsg::PingProfile {
            header,
            distance: p.distance as f32 / 1000.0,
            distance_mm: p.distance,
            profile_data: p.profile_data,
            ..Default::default()
        };
        profile_pub.publish(&profile).expect("serializes");
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
    node.shutdown().await;
}
