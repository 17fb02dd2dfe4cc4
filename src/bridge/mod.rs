//! Bridges from devices onto ROS topics.

use crate::node::Node;

#[cfg(feature = "ping")]
pub mod ping;

#[cfg(feature = "mavlink")]
pub mod mavlink;

/// The `main` of a bridge binary: the node from the command line and environment (rosrun
/// and roslaunch style), its configuration from parameters, then `run` until it returns or
/// Ctrl-C; the node unregisters either way. Errors are one line on stderr and a failure
/// status.
pub async fn node_main<C>(
    name: &str,
    configure: impl AsyncFnOnce(&Node) -> Result<C, String>,
    run: impl AsyncFnOnce(Node, C) -> Result<(), String>,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    crate::logging::init();
    let node = match Node::from_env(name).await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match configure(&node).await {
        Ok(cfg) => tokio::select! {
            r = run(node.clone(), cfg) => r,
            _ = tokio::signal::ctrl_c() => Ok(()),
        },
        Err(e) => Err(e),
    };
    node.shutdown().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}
