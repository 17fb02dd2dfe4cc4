//! `topic echo`: messages of any type, decoded with the publisher's own definition and
//! printed as rostopic prints them (or as JSON lines).

use super::measure::{udp_failures, udp_report};
use super::{valid_now, EchoArgs, TopicError};
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;
use udpros::msg::dynamic::DynamicType;
use udpros::node::{Node, SubscribeOptions};
use udpros::wire::header::ConnectionHeader;

/// Decoders by the publisher's type and definition.
#[derive(Default)]
struct Decoders(HashMap<(String, String), Arc<DynamicType>>);

impl Decoders {
    fn get(&mut self, header: &ConnectionHeader) -> Result<Arc<DynamicType>, TopicError> {
        let ty = header.get("type").unwrap_or("").to_string();
        let definition = header.get("message_definition").unwrap_or("").to_string();
        if let Some(d) = self.0.get(&(ty.clone(), definition.clone())) {
            return Ok(d.clone());
        }
        let decoder = if definition.is_empty() {
            // roscpp's UDPROS answers carry the definition; a peer without one: ask ROS.
            udpros::msg::find_type(&ty)
        } else {
            DynamicType::from_definition(&ty, &definition)
        }
        .map_err(|error| TopicError::Undecodable {
            msg_type: ty.clone(),
            error,
        })?;
        let decoder = Arc::new(decoder);
        self.0.insert((ty, definition), decoder.clone());
        Ok(decoder)
    }
}

pub(super) async fn echo(node: &Node, args: EchoArgs) -> Result<(), TopicError> {
    let options = SubscribeOptions {
        transports: args.transport.0.clone(),
        fec: args.fec,
        ..SubscribeOptions::default()
    };
    let sub = node.subscribe_raw(&args.topic, options).await?;
    let mut decoders = Decoders::default();
    let mut printed = 0u64;
    let mut out = std::io::stdout();
    // UDP losses go to stderr (stdout stays what rostopic echo prints), when they change.
    let mut failures = 0u64;
    let mut report_losses = |sub: &udpros::node::RawSubscriber| {
        let links = sub.links();
        let now = udp_failures(&links);
        if now != failures {
            failures = now;
            for line in udp_report(&links) {
                eprintln!("udpros: {line}");
            }
        }
    };
    let mut check = tokio::time::interval(Duration::from_secs(1));
    loop {
        let received = tokio::select! {
            r = sub.recv() => r,
            _ = check.tick() => {
                report_losses(&sub);
                continue;
            }
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(received) = received else {
            report_losses(&sub);
            return Ok(());
        };
        let decoder = decoders.get(&received.publisher)?;
        let mut value = match decoder.decode(&received.body) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("udpros: skipping a message that does not decode: {e}");
                continue;
            }
        };
        if args.offset {
            value.offset_times(valid_now(node).await?);
        }
        let text = if args.json {
            format!("{}\n", value.to_json())
        } else {
            format!("{}\n---\n", value.to_yaml())
        };
        if out
            .write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            return Ok(()); // the reader went away
        }
        printed += 1;
        if args.count.is_some_and(|n| printed >= n) {
            report_losses(&sub);
            return Ok(());
        }
    }
}
