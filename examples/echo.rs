//! Any topic, whatever its type, printed as `rostopic echo` prints it: the subscriber asks
//! for md5 `*` and decodes each message from the definition its publisher sends in the
//! connection header, so this program was compiled without knowing the type.
//!
//! ```sh
//! cargo run --example echo -- _topic:=/rosout
//! ```
use udpros::msg::dynamic::DynamicType;
use udpros::node::{Node, SubscribeOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let node = Node::from_env("echo").await?;
    let topic: String = node.param("~topic", "/chatter".to_string()).await?;
    let count: u32 = node.param("~count", 0).await?;
    let subscriber = node
        .subscribe_raw(&topic, SubscribeOptions::default())
        .await?;
    // Decoders by definition: publishers of one topic may send different definitions.
    let mut decoders: Vec<(String, DynamicType)> = Vec::new();
    let mut printed = 0;
    while count == 0 || printed < count {
        let received = tokio::select! {
            received = subscriber.recv() => received,
            _ = tokio::signal::ctrl_c() => None,
            _ = node.shutdown_requested() => None,
        };
        let Some(received) = received else { break };
        let header = &received.publisher;
        let definition = header.get("message_definition").unwrap_or("");
        let type_name = header.get("type").unwrap_or("");
        if !decoders.iter().any(|(d, _)| d == definition) {
            let decoder = DynamicType::from_definition(type_name, definition)?;
            decoders.push((definition.to_string(), decoder));
        }
        let Some((_, decoder)) = decoders.iter().find(|(d, _)| d == definition) else {
            continue;
        };
        match decoder.decode(&received.body) {
            Ok(value) => println!("{}---", value.to_yaml()),
            Err(e) => eprintln!("echo: a {type_name} message that does not decode: {e}"),
        }
        printed += 1;
    }
    node.shutdown().await;
    Ok(())
}
