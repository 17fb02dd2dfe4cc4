//! The ROS tutorial's talker: "hello world N" on `chatter` at 10 Hz, sent over UDPROS to
//! subscribers that ask for it and over TCPROS to the others (rospy has no UDPROS).
//!
//! ```sh
//! cargo run --example talker                          # against $ROS_MASTER_URI
//! cargo run --example talker -- _count:=20 chatter:=/other
//! ```
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, Node};
use udpros::time::ClockError;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Log events go to stderr (filtered by RUST_LOG) and, once the node is up, to /rosout.
    udpros::logging::init();
    // Name, namespace, master, host, remappings and _private:=params from argv and the
    // environment, as roscpp reads them.
    let node = Node::from_env("talker").await?;
    // How many messages to send; 0 (the default) sends until Ctrl-C or `rosnode kill`.
    let count: u32 = node.param("~count", 0).await?;
    let chatter = node
        .advertise::<std_msgs::String>("chatter", AdvertiseOptions::default())
        .await?;
    udpros::tracing::info!("publishing on {}", chatter.topic());
    // 10 Hz of ROS time: the wall clock, or /clock when /use_sim_time is true (then the
    // loop follows a simulator or `rosbag play --clock`, and waits while it is paused).
    let mut rate = node.rate(10.0);
    let mut sent = 0;
    // `ok()` turns false on Ctrl-C, SIGTERM or `rosnode kill` (and `rate.sleep()` returns).
    while node.ok() && (count == 0 || sent < count) {
        let data = format!("hello world {sent}");
        println!("{data}");
        chatter.publish(&std_msgs::String { data })?;
        sent += 1;
        if let Err(ClockError::MovedBackwards { .. }) = rate.sleep().await {
            // A bag played again: the rate has restarted from the new time.
            udpros::tracing::warn!("ROS time moved backwards");
        }
    }
    node.shutdown().await; // unregisters everything (also done on drop)
    Ok(())
}
