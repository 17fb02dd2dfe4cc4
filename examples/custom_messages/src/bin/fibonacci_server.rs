//! An action server for `msg/tutorial_msgs/Fibonacci.action`: computes the sequence one
//! number per step, sends the sequence so far as feedback, and stops when its goal is
//! cancelled or a newer goal comes (the simple server's preemption).
//!
//! ```sh
//! cargo run -p custom-messages --bin fibonacci_server   # serves /fibonacci
//! ```

include!(concat!(env!("OUT_DIR"), "/msgs.rs"));

use std::time::Duration;
use tutorial_msgs::{FibonacciAction, FibonacciFeedback, FibonacciResult};
use udpros::action::{ActionServerOptions, SimpleActionServer};
use udpros::node::Node;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::from_env("fibonacci_server").await?;
    // Seconds per number (`_step:=0.5`).
    let step: f64 = node.param("~step", 0.1).await?;
    let step = Duration::try_from_secs_f64(step.clamp(0.0, 60.0)).unwrap_or(Duration::ZERO);
    let server = SimpleActionServer::<FibonacciAction>::new(
        &node,
        "fibonacci",
        ActionServerOptions::default(),
    )
    .await?;
    loop {
        let goal = tokio::select! {
            goal = server.accept_new_goal() => goal?,
            _ = node.shutdown_requested() => break,
        };
        if goal.order < 1 || goal.order > 46 {
            // Past 46 the numbers overflow an int32.
            let text = format!("order {} is not within 1..=46", goal.order);
            server.set_aborted(&FibonacciResult::default(), &text)?;
            continue;
        }
        let mut sequence = vec![0, 1];
        let preempted = loop {
            if sequence.len() > goal.order as usize {
                break false;
            }
            tokio::select! {
                _ = server.preempt_requested() => break true,
                _ = tokio::time::sleep(step) => {}
            }
            let next = sequence[sequence.len() - 1] + sequence[sequence.len() - 2];
            sequence.push(next);
            server.publish_feedback(&FibonacciFeedback {
                sequence: sequence.clone(),
            })?;
        };
        let result = FibonacciResult { sequence };
        if preempted {
            server.set_preempted(&result, "preempted")?;
        } else {
            println!("order {}: {:?}", goal.order, result.sequence);
            server.set_succeeded(&result, "")?;
        }
    }
    node.shutdown().await;
    Ok(())
}
