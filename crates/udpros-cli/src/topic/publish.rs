//! `topic pub`: messages from YAML, once and latched or at a rate.

use super::{valid_now, PubArgs, TopicError};
use std::time::Duration;
use udpros::node::{AdvertiseOptions, Node};

pub(super) async fn publish(node: &Node, args: PubArgs) -> Result<(), TopicError> {
    let ty = udpros::msg::find_type(&args.msg_type).map_err(|error| TopicError::UnknownType {
        msg_type: args.msg_type.clone(),
        error,
    })?;
    let yaml = match args.yaml.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) if text.starts_with('{') || text.starts_with('[') => {
            Some(udpros::yaml::load(text))
        }
        // `data: hi` and `x: 1, y: 2`: a block mapping on one line.
        Some(text) => Some(udpros::yaml::load(&format!("{{{text}}}"))),
    };
    let yaml = yaml.transpose().map_err(TopicError::Yaml)?;
    // `now` and `header: auto` take the node's ROS time (sim time under /use_sim_time).
    let body_at = |now| {
        let value = ty
            .value_from_yaml_at(yaml.as_ref(), now)
            .map_err(TopicError::Message)?;
        ty.encode(&value).map_err(TopicError::Message)
    };
    let mut body = body_at(valid_now(node).await?)?;
    let definition = ty.definition().map_err(TopicError::Message)?;
    let latch = args.latch || args.rate.is_none();
    // Checked before the node started, as --max-rate below.
    node.set_max_rate_per_host(udpros::node::max_rate_from(args.max_rate_per_host).unwrap_or(None));
    let publisher = node
        .advertise_raw(&args.topic, ty.type_name(), ty.md5sum(), &definition, {
            let defaults = AdvertiseOptions::default();
            AdvertiseOptions {
                latch,
                fec: args.fec,
                governor: defaults.governor.filter(|_| !args.no_governor),
                // Checked before the node started.
                max_rate: udpros::node::max_rate_from(args.max_rate).unwrap_or(None),
                ..defaults
            }
        })
        .await?;
    let mut sent = 0u64;
    let period = args.rate.map(|r| Duration::from_secs_f64(1.0 / r));
    let mut tick = tokio::time::interval(period.unwrap_or(Duration::from_secs(3600)));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = node.shutdown_requested() => return Ok(()),
        }
        if period.is_some() || sent == 0 {
            if args.substitute_keywords && sent > 0 {
                body = body_at(node.now())?;
            }
            publisher.publish_body(&body);
            sent += 1;
        }
        if args.count.is_some_and(|n| sent >= n) {
            // Give subscribers a moment to take the last messages.
            tokio::time::sleep(Duration::from_millis(500)).await;
            return Ok(());
        }
    }
}
