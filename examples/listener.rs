//! The ROS tutorial's listener: prints what arrives on `chatter`. It offers UDPROS first
//! and TCPROS as the fallback, so it takes roscpp, rospy and udpros talkers alike.
//!
//! ```sh
//! cargo run --example listener                        # against $ROS_MASTER_URI
//! cargo run --example listener -- _count:=5           # exit after 5 messages
//! ```
use udpros::msgs::std_msgs;
use udpros::node::{Node, SubscribeOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::from_env("listener").await?;
    // How many messages to print; 0 (the default) prints until Ctrl-C or `rosnode kill`.
    let count: u32 = node.param("~count", 0).await?;
    let mut chatter = node
        .subscribe::<std_msgs::String>("chatter", SubscribeOptions::default())
        .await?;
    let mut heard = 0;
    while count == 0 || heard < count {
        let message = tokio::select! {
            message = chatter.recv() => message,
            _ = tokio::signal::ctrl_c() => None,
            _ = node.shutdown_requested() => None,
        };
        let Some(message) = message else { break };
        println!("I heard: [{}]", message.data);
        heard += 1;
    }
    node.shutdown().await;
    Ok(())
}
