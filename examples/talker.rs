//! The ROS tutorial's talker: "hello world N" on `chatter` at 10 Hz, sent over UDPROS to
//! subscribers that ask for it and over TCPROS to the others (rospy has no UDPROS).
//!
//! ```sh
//! cargo run --example talker                          # against $ROS_MASTER_URI
//! cargo run --example talker -- _count:=20 chatter:=/other
//! ```
use std::time::Duration;
use udpros::msgs::std_msgs;
use udpros::node::{AdvertiseOptions, Node};

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
    let mut rate = tokio::time::interval(Duration::from_millis(100));
    let mut sent = 0;
    while count == 0 || sent < count {
        tokio::select! {
            _ = rate.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
            _ = node.shutdown_requested() => break,
        }
        let data = format!("hello world {sent}");
        println!("{data}");
        chatter.publish(&std_msgs::String { data })?;
        sent += 1;
    }
    node.shutdown().await; // unregisters everything (also done on drop)
    Ok(())
}
