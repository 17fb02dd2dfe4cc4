//! A listener that takes `chatter` over UDPROS only, as roscpp's
//! `TransportHints().unreliable()` does: a publisher without UDPROS (rospy) is refused
//! rather than served over TCP.
//!
//! ```sh
//! cargo run --example listener_udp -- _count:=5
//! ```
use udpros::msgs::std_msgs;
use udpros::node::{Node, SubscribeOptions};
use udpros::transport::Protocol;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::from_env("listener_udp").await?;
    let count: u32 = node.param("~count", 0).await?;
    let options = SubscribeOptions {
        transports: vec![Protocol::Udp],
        ..SubscribeOptions::default()
    };
    let mut chatter = node
        .subscribe::<std_msgs::String>("chatter", options)
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
