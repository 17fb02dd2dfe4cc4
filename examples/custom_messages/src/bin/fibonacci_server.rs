//! An action server for `msg/tutorial_msgs/Fibonacci.action`: computes the sequence one
//! number per step, sends the sequence so far as feedback, and stops when its goal is
//! cancelled or a newer goal comes (the simple server's preemption).
//!
//! ```sh
//! cargo run -p custom-messages --bin fibonacci_server   # serves /fibonacci
//! ```

include!(concat!(env!("OUT_DIR"), "/msgs.rs"));

use std::time::Duration;
use tutorial_msgs::{FibonacciAction, FibonacciFeedback, FibonacciGoal, FibonacciResult};
use udpros::action::{ActionError, ActionServerOptions, SimpleActionServer};
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
    let served = serve(&server, step).await;
    // Ctrl-C (or `rosnode kill`) ends the server's goals: that is the way out, not an
    // error. The node unregisters either way.
    node.shutdown().await;
    match served {
        Err(ActionError::Shutdown) => Ok(()),
        other => Ok(other?),
    }
}

/// Takes goals until the node shuts down.
async fn serve(
    server: &SimpleActionServer<FibonacciAction>,
    step: Duration,
) -> Result<(), ActionError> {
    loop {
        let goal = server.accept_new_goal().await?;
        if goal.order < 1 || goal.order > 46 {
            // Past 46 the numbers overflow an int32.
            let text = format!("order {} is not within 1..=46", goal.order);
            server.set_aborted(&FibonacciResult::default(), &text)?;
            continue;
        }
        compute(server, &goal, step).await?;
    }
}

/// One goal: a number per step, the sequence so far as feedback, until done or preempted.
async fn compute(
    server: &SimpleActionServer<FibonacciAction>,
    goal: &FibonacciGoal,
    step: Duration,
) -> Result<(), ActionError> {
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
        server.set_preempted(&result, "preempted")
    } else {
        println!("order {}: {:?}", goal.order, result.sequence);
        server.set_succeeded(&result, "")
    }
}
