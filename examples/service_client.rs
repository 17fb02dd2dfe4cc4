//! A service client: waits for `/switch` (std_srvs/SetBool), calls it once with `~data`
//! and prints the answer, as `rosservice call` would.
//!
//! ```sh
//! cargo run --example service_client -- _data:=true
//! ```
use std::time::Duration;
use udpros::msgs::std_srvs::{SetBool, SetBoolRequest};
use udpros::node::Node;
use udpros::service::{ClientOptions, ServiceError};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::from_env("switch_client").await?;
    let data: bool = node.param("~data", true).await?;
    let options = ClientOptions::default().with_timeout(Duration::from_secs(5));
    let switch = node.service_client::<SetBool>("switch", options);
    switch.wait_for_service(Duration::from_secs(10)).await?;
    match switch.call(&SetBoolRequest { data }).await {
        Ok(answer) => println!("success: {}, message: {}", answer.success, answer.message),
        // The server's handler said no: its text, not a transport failure.
        Err(ServiceError::Failed(why)) => println!("refused: {why}"),
        Err(other) => return Err(other.into()),
    }
    node.shutdown().await;
    Ok(())
}
