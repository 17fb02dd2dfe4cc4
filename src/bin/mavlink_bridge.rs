//! `mavlink_bridge`: link latency (PING) and clock offset (TIMESYNC) with a MAVLink
//! autopilot, onto ROS topics.
//!
//! `mavlink_bridge _fcu_url:=udpin:0.0.0.0:14540` (or `udpout:`, `tcpin:`, `tcpout:`,
//! `serial:/dev/ttyACM0:921600`, `sim:`); runs under rosrun and roslaunch like any node.

use std::process::ExitCode;
use udpros::bridge::mavlink::node::{run, Config};
use udpros::node::Node;

#[tokio::main]
async fn main() -> ExitCode {
    udpros::logging::init();
    let node = match Node::from_env("mavlink_bridge").await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("mavlink_bridge: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cfg = match Config::from_node(&node).await {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("mavlink_bridge: {e}");
            node.shutdown().await;
            return ExitCode::FAILURE;
        }
    };
    tracing::info!("mavlink_bridge on {}", cfg.fcu_url);
    let result = tokio::select! {
        r = run(node.clone(), cfg) => r,
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    node.shutdown().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mavlink_bridge: {e}");
            ExitCode::FAILURE
        }
    }
}
