//! A service server: `/switch` (std_srvs/SetBool) turns a pretend light on and refuses to
//! turn it off. rosservice, rospy and roscpp clients call it as they call their own.
//!
//! ```sh
//! cargo run --example service_server                  # against $ROS_MASTER_URI
//! rosservice call /switch "data: true"                # success: True, message: "light on"
//! ```
use udpros::msgs::std_srvs::{SetBool, SetBoolRequest, SetBoolResponse};
use udpros::node::Node;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::from_env("switch_server").await?;
    // Each call runs the handler; an Err is the failed call's text for the client.
    let server = node
        .advertise_service::<SetBool, _, _>("switch", |request: SetBoolRequest| async move {
            if request.data {
                Ok(SetBoolResponse {
                    success: true,
                    message: "light on".into(),
                })
            } else {
                Err("this light stays on".into())
            }
        })
        .await?;
    println!("serving {}", server.service());
    // Serves until Ctrl-C, SIGTERM or `rosnode kill`, then leaves the graph (ros::spin()).
    node.spin().await;
    Ok(())
}
