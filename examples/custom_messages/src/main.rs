//! A package of custom messages and services: `msg/tutorial_msgs/Reading.msg`, turned into
//! Rust by `build.rs` with the code generator, published on `reading` at 10 Hz, and
//! `msg/tutorial_msgs/SetDepthOffset.srv`, served as `~set_depth_offset`. roscpp and rospy
//! nodes that have the same `.msg` (or learn it from the connection header, as
//! `rostopic echo` does) read it like any other type, and call the service with the same
//! `.srv`.
//!
//! ```sh
//! cargo run -p custom-messages                        # against $ROS_MASTER_URI
//! cargo run -p custom-messages -- _count:=5
//! ```

// The generated module tree: `tutorial_msgs::Reading`, with `Header` and `Point` from
// `udpros::msgs`.
include!(concat!(env!("OUT_DIR"), "/msgs.rs"));

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tutorial_msgs::{Reading, SetDepthOffset, SetDepthOffsetRequest, SetDepthOffsetResponse};
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
    // A service of the package's own type: the offset added to every depth from now on.
    let offset = Arc::new(Mutex::new(0.0));
    let shared = offset.clone();
    let _service = node
        .advertise_service::<SetDepthOffset, _, _>(
            "~set_depth_offset",
            move |request: SetDepthOffsetRequest| {
                let shared = shared.clone();
                async move {
                    if !request.offset.is_finite() {
                        return Err(format!("offset {} is not a number", request.offset));
                    }
                    *shared.lock().unwrap() = request.offset;
                    Ok(SetDepthOffsetResponse {
                        success: true,
                        message: format!("depths offset by {} m", request.offset),
                    })
                }
            },
        )
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
            depth: 2.0 + f64::from(sent % 10) * 0.25 + *offset.lock().unwrap(),
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
