//! `ping_sonar`: a Blue Robotics Ping1D or Ping360 onto ROS topics.
//!
//! `ping_sonar _device:=udp:192.168.2.2:9090` (or `serial:/dev/ttyUSB0:115200`,
//! `sim:ping1d`, `sim:ping360`); runs under rosrun and roslaunch like any node.

use std::process::ExitCode;
use udpros::bridge::ping::node::{run, Config};
use udpros::node::Node;

#[tokio::main]
async fn main() -> ExitCode {
    udpros::logging::init();
    let node = match Node::from_env("ping_sonar").await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("ping_sonar: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cfg = match Config::from_node(&node).await {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("ping_sonar: {e}");
            node.shutdown().await;
            return ExitCode::FAILURE;
        }
    };
    tracing::info!("ping_sonar on {}", cfg.device);
    let result = tokio::select! {
        r = run(node.clone(), cfg) => r,
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    node.shutdown().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ping_sonar: {e}");
            ExitCode::FAILURE
        }
    }
}
