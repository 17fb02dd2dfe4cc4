//! `ping360_node`: a Ping360 onto ROS topics under the ROS1 `ping360_sonar` driver's names,
//! so its launch files run with only `pkg` changed.

use udpros_bridges::ping::ping360_sonar::{run, Profile, HELP};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    udpros_bridges::node_main(
        "ping360_node",
        HELP,
        Profile::from_node,
        async |node, profile: Profile| {
            tracing::info!("ping360_node on {}", profile.cfg.device);
            run(node, profile).await
        },
    )
    .await
}
