//! An action client for `msg/tutorial_msgs/Fibonacci.action`: sends one goal of order
//! `~order` (10 by default), prints each feedback and the result.
//!
//! ```sh
//! cargo run -p custom-messages --bin fibonacci_client -- _order:=5
//! ```

include!(concat!(env!("OUT_DIR"), "/msgs.rs"));

use std::time::Duration;
use tutorial_msgs::{FibonacciAction, FibonacciGoal};
use udpros::action::{SimpleActionClient, SimpleState};
use udpros::node::Node;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::from_env("fibonacci_client").await?;
    let order: i32 = node.param("~order", 10).await?;
    let mut client = SimpleActionClient::<FibonacciAction>::new(&node, "fibonacci").await?;
    if !client.wait_for_server(Some(Duration::from_secs(10))).await {
        return Err("no fibonacci server".into());
    }
    client.send_goal(&FibonacciGoal { order })?;
    while let Some(feedback) = client.next_feedback().await {
        println!("so far: {:?}", feedback.sequence);
    }
    let state = client.get_state();
    match client.get_result() {
        Some(result) if state == SimpleState::Succeeded => {
            println!("result: {:?}", result.sequence)
        }
        _ => println!("the goal ended {state}: {}", client.get_state_text()),
    }
    node.shutdown().await;
    Ok(())
}
