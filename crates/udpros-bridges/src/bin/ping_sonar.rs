//! `ping_sonar`: a Blue Robotics Ping1D or Ping360 onto ROS topics.
//!
//! `ping_sonar _device:=udp:192.168.2.2:9090` (or `serial:/dev/ttyUSB0:115200`,
//! `sim:ping1d`, `sim:ping360`); runs under rosrun and roslaunch like any node.

use udpros_bridges::ping::node::{run, Config, HELP};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    udpros_bridges::node_main(
        "ping_sonar",
        HELP,
        Config::from_node,
        async |node, cfg: Config| {
            tracing::info!("ping_sonar on {}", cfg.device);
            run(node, cfg).await
        },
    )
    .await
}
