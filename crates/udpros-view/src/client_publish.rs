//! Client publishing (capability `clientPublish`): a client advertises a channel on a topic
//! the operator allowed (`udpros view --allow-publish TOPIC`), and the view publishes its
//! messages in ROS with the client's type. Off unless topics are allowed; each message is
//! decoded against the type before it goes out, so a browser's bad bytes never reach a
//! ROS subscriber.

use crate::foxglove::client::ClientChannel;
use bytes::Bytes;
use udpros::msg::dynamic::DynamicType;
use udpros::node::{AdvertiseOptions, Node, RawPublisher};

/// One channel a client publishes on.
pub(crate) struct ClientPublication {
    pub(crate) topic: String,
    kind: DynamicType,
    publisher: RawPublisher,
}

impl ClientPublication {
    /// Advertises the client's channel in ROS, if its topic is allowed and its type known
    /// (from the client's definition, else the types udpros and ROS know).
    pub(crate) async fn advertise(
        node: &Node,
        allowed: &[String],
        channel: &ClientChannel,
    ) -> Result<ClientPublication, String> {
        let topic = node.resolve_name(&channel.topic);
        if !allowed.iter().any(|a| node.resolve_name(a) == topic) {
            return Err(format!(
                "{topic} is not open to clients (udpros view --allow-publish {topic})"
            ));
        }
        if channel.encoding != "ros1" {
            return Err(format!(
                "encoding {:?}: this server takes ros1 only",
                channel.encoding
            ));
        }
        let type_name = channel.schema_name.clone();
        let definition = channel.schema.clone().filter(|s| !s.trim().is_empty());
        let kind = tokio::task::spawn_blocking(move || match definition {
            Some(text) => DynamicType::from_definition(&type_name, &text),
            None => udpros::msg::find_type(&type_name),
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("type {}: {e}", channel.schema_name))?;
        // A topic keeps the type its publishers gave it: a client's channel of another
        // type would re-type it at the master, and subscribers of the real type would
        // hear nothing.
        let listed = node
            .master()
            .get_topic_types()
            .await
            .map_err(|e| format!("cannot check {topic}'s type with the master: {e}"))?;
        if let Some((_, existing)) = listed.iter().find(|(t, _)| *t == topic) {
            if existing != kind.type_name() {
                return Err(format!(
                    "{topic} is a {existing}: a client cannot publish it as {}",
                    kind.type_name()
                ));
            }
        }
        let definition = kind.definition().map_err(|e| e.to_string())?;
        let publisher = node
            .advertise_raw(
                &topic,
                kind.type_name(),
                kind.md5sum(),
                &definition,
                AdvertiseOptions::default(),
            )
            .await
            .map_err(|e| format!("cannot advertise {topic}: {e}"))?;
        Ok(ClientPublication {
            topic,
            kind,
            publisher,
        })
    }

    /// Publishes one message the client sent, if it decodes as the channel's type.
    pub(crate) fn publish(&self, payload: &[u8]) -> Result<(), String> {
        let body = Bytes::copy_from_slice(payload);
        self.kind.decode(&body).map_err(|e| {
            format!(
                "a message on {} that is not a {}: {e}",
                self.topic,
                self.kind.type_name()
            )
        })?;
        self.publisher.publish_body(&body);
        Ok(())
    }
}
