//! `topic list`, `info`, `type` and `find`: questions to the master and, for `info`'s
//! connections, to each node's slave API.

use super::say_line;
use super::TopicError;
use udpros::node::Node;

pub(super) async fn list(node: &Node) -> Result<(), TopicError> {
    let state = node.master().get_system_state().await?;
    let mut topics: Vec<&String> = state
        .publishers
        .iter()
        .chain(&state.subscribers)
        .map(|(t, _)| t)
        .collect();
    topics.sort();
    topics.dedup();
    for t in topics {
        say!("{t}");
    }
    Ok(())
}

pub(super) async fn info(node: &Node, topic: &str) -> Result<(), TopicError> {
    let topic = node.resolve_name(topic);
    let master = node.master();
    let types = master.get_topic_types().await?;
    let ty = types
        .iter()
        .find(|(t, _)| *t == topic)
        .map_or("<unknown>", |(_, ty)| ty.as_str());
    let state = master.get_system_state().await?;
    say!("Type: {ty}\n");
    let client = master.xmlrpc().clone();
    for (title, table) in [
        ("Publishers", &state.publishers),
        ("Subscribers", &state.subscribers),
    ] {
        let nodes = table
            .iter()
            .find(|(t, _)| *t == topic)
            .map(|(_, n)| n.clone())
            .unwrap_or_default();
        if nodes.is_empty() {
            say!("{title}: None\n");
            continue;
        }
        say!("{title}: ");
        for n in nodes {
            let uri = master.lookup_node(&n).await.unwrap_or_default();
            say!(" * {n} ({uri})");
            // Each connection of that node on this topic, with its transport.
            if let Ok(reply) = client
                .call(&uri, "getBusInfo", vec![node.name().into()])
                .await
            {
                let rows = reply
                    .as_array()
                    .and_then(|r| r.get(2))
                    .and_then(|v| v.as_array())
                    .unwrap_or(&[])
                    .to_vec();
                for row in rows.iter().filter_map(|r| r.as_array()) {
                    if row.get(4).and_then(|v| v.as_str()) == Some(topic.as_str()) {
                        let peer = row.get(1).and_then(|v| v.as_str()).unwrap_or("");
                        let transport = row.get(3).and_then(|v| v.as_str()).unwrap_or("");
                        let dir = if row.get(2).and_then(|v| v.as_str()) == Some("o") {
                            "to"
                        } else {
                            "from"
                        };
                        // A udpros link with FEC says how it fares in getBusInfo's text.
                        let fec = row
                            .get(6)
                            .and_then(|v| v.as_str())
                            .and_then(|info| info.split_once("; FEC"))
                            .map(|(_, rest)| format!(" (FEC{rest})"))
                            .unwrap_or_default();
                        say!("     {transport} {dir} {peer}{fec}");
                    }
                }
            }
        }
        say!();
    }
    Ok(())
}

pub(super) async fn topic_type(node: &Node, topic: &str) -> Result<(), TopicError> {
    let topic = node.resolve_name(topic);
    let types = node.master().get_topic_types().await?;
    let (_, ty) = types
        .iter()
        .find(|(t, _)| *t == topic)
        .ok_or_else(|| TopicError::UnknownTopic(topic.clone()))?;
    say!("{ty}");
    Ok(())
}

pub(super) async fn find(node: &Node, msg_type: &str) -> Result<(), TopicError> {
    let types = node.master().get_topic_types().await?;
    let mut topics: Vec<&String> = types
        .iter()
        .filter(|(_, ty)| ty == msg_type)
        .map(|(t, _)| t)
        .collect();
    topics.sort();
    for t in topics {
        say!("{t}");
    }
    Ok(())
}
