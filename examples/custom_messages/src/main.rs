//! A package of custom messages: `msg/tutorial_msgs/Reading.msg`, turned into Rust by
//! `build.rs` with the code generator, published on `reading` at 10 Hz. roscpp and rospy
//! nodes that have the same `.msg` (or learn it from the connection header, as
//! `rostopic echo` does) read it like any other type.
//!
//! ```sh
//! cargo run -p custom-messages                        # against $ROS_MASTER_URI
//! cargo run -p custom-messages -- _count:=5
//! ```

// The generated module tree: `tutorial_msgs::Reading`, with `Header` and `Point` from
// `udpros::msgs`.
include!(concat!(env!("OUT_DIR"), "/msgs.rs"));

use std::time::Duration;
use tutorial_msgs::Reading;
use udpros::msg::Time;
use udpros::msgs::{geometry_msgs, std_msgs};
use udpros::node::{AdvertiseOptions, Node};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::from_env("reading_talker").await?;
    // How many readings to send; 0 (the default) sends until Ctrl-C or `rosnode kill`.
    let count: u32 = node.param("~count", 0).await?;
    let readings = node
        .advertise::<Reading>("reading", AdvertiseOptions::default())
        .await?;
    let mut rate = tokio::time::interval(Duration::from_millis(100));
    let mut sent = 0;
    while count == 0 || sent < count {
        tokio::select! {
            _ = rate.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
            _ = node.shutdown_requested() => break,
        }
        let reading = Reading {
            header: std_msgs::Header {
                seq: sent,
                stamp: Time::now(),
                frame_id: "sonar".into(),
            },
            depth: 2.0 + f64::from(sent % 10) * 0.25,
            confidence: 0.9,
            position: geometry_msgs::Point {
                x: 1.0,
                y: -2.0,
                z: 0.0,
            },
            source: Reading::SOURCE_SONAR,
            label: format!("reading {sent}"),
        };
        println!("{} at {:.2} m", reading.label, reading.depth);
        readings.publish(&reading)?;
        sent += 1;
    }
    node.shutdown().await;
    Ok(())
}
