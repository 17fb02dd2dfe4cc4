//! `mavlink_bridge`: link latency (PING) and clock offset (TIMESYNC) with a MAVLink
//! autopilot, onto ROS topics.
//!
//! `mavlink_bridge _fcu_url:=udpin:0.0.0.0:14540` (or `udpout:`, `tcpin:`, `tcpout:`,
//! `serial:/dev/ttyACM0:921600`, `sim:`); runs under rosrun and roslaunch like any node.

use udpros_bridges::mavlink::node::{run, Config, HELP};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    udpros_bridges::node_main(
        "mavlink_bridge",
        HELP,
        Config::from_node,
        async |node, cfg: Config| {
            tracing::info!("mavlink_bridge on {}", cfg.fcu_url);
            run(node, cfg).await
        },
    )
    .await
}
