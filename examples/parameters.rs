//! Parameters as a ROS node uses them: private (`~`) parameters with defaults, values set
//! from the command line (`_rate:=5`), writing back, and a cached read the master keeps
//! fresh with paramUpdate.
//!
//! ```sh
//! cargo run --example parameters -- _rate:=5 _frame_id:=sonar_link
//! ```
use udpros::node::Node;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::from_env("parameters").await?;
    // `_rate:=5` on the command line is set on the master as `~rate` before this runs.
    let rate: f64 = node.param("~rate", 10.0).await?;
    let frame_id: String = node.param("~frame_id", "base_link".to_string()).await?;
    println!("rate: {rate}");
    println!("frame_id: {frame_id}");
    // Written back, so `rosparam get` shows what the node runs with.
    node.set_param("~rate", rate.into()).await?;
    // A parameter of the graph, found by rosmaster's upward search from our namespace.
    match node.search_param("robot_description").await? {
        Some(key) => println!("robot_description is at {key}"),
        None => println!("no robot_description"),
    }
    // Cached: the first read subscribes; later reads need no call to the master.
    let cached = node.get_param_cached("~frame_id").await?;
    println!("cached frame_id: {cached:?}");
    node.shutdown().await;
    Ok(())
}
