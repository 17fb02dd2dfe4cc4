//! What `roscore` adds to a master: the parameters every roscore sets, and the `/rosout`
//! node that gathers every node's log into `/rosout_agg` (what rqt_console listens to).

use super::Master;
use crate::api::MasterClient;
use crate::msg::Message;
use crate::msgs::rosgraph_msgs::Log;
use crate::node::{AdvertiseOptions, Node, NodeError, NodeOptions, SubscribeOptions};
use crate::xmlrpc::{Value, XmlRpcClient};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Log messages waiting for the aggregator (and for each `/rosout_agg` subscriber) before
/// the oldest is dropped: 1000, and at most 4 MiB of them, so that a flood of 64 kB logs
/// holds megabytes, not the 128 MB it once did.
const ROSOUT_QUEUE: usize = 1000;
const ROSOUT_QUEUE_BYTES: usize = 4 << 20;

/// How a [`Roscore`] starts.
#[derive(Debug, Clone)]
pub struct RoscoreOptions {
    /// Run the `/rosout` node (`/rosout` into `/rosout_agg`). Off when a stock `rosout`
    /// node runs against this master instead.
    pub rosout: bool,
    /// `/rosdistro` (roslaunch writes the distribution's name and a newline).
    pub rosdistro: String,
    /// The master's and the `/rosout` node's security; `None` reads it from the
    /// environment as nodes do ([`crate::secure::Security::from_env`]).
    pub security: Option<crate::secure::Security>,
}

impl Default for RoscoreOptions {
    fn default() -> Self {
        RoscoreOptions {
            rosout: true,
            rosdistro: "noetic\n".into(),
            security: None,
        }
    }
}

/// A master as `roscore` starts one: `/rosdistro`, `/rosversion` and a fresh `/run_id` set,
/// and a `/rosout` node aggregating into `/rosout_agg`. Dropping it stops both.
pub struct Roscore {
    master: Master,
    rosout: Option<Node>,
    aggregated: Arc<AtomicU64>,
}

/// The ros_comm release whose behaviour udpros follows, for `/rosversion`.
const ROSVERSION: &str = "1.15.15\n";

impl Roscore {
    /// Starts the master on `addr` (reached as `host`), sets the parameters, and starts the
    /// `/rosout` node unless `options` say otherwise.
    pub async fn start(
        addr: SocketAddr,
        host: &str,
        options: RoscoreOptions,
    ) -> Result<Roscore, NodeError> {
        let security = match options.security.clone() {
            Some(security) => security,
            None => crate::secure::Security::from_env().map_err(NodeError::Security)?,
        };
        let master = Master::start_with(addr, host, &security)
            .await
            .map_err(NodeError::Bind)?;
        let client =
            XmlRpcClient::new(Duration::from_secs(2), Duration::from_secs(10)).signed(&security);
        let api = MasterClient::new(master.uri(), "/roscore", client);
        for (key, value) in [
            ("/rosdistro", options.rosdistro.clone()),
            ("/rosversion", ROSVERSION.to_string()),
            ("/run_id", run_id()),
        ] {
            api.set_param(key, Value::String(value)).await?;
        }
        let aggregated = Arc::new(AtomicU64::new(0));
        let rosout = match options.rosout {
            true => Some(aggregate_rosout(master.uri(), host, aggregated.clone(), security).await?),
            false => None,
        };
        Ok(Roscore {
            master,
            rosout,
            aggregated,
        })
    }

    /// The master.
    pub fn master(&self) -> &Master {
        &self.master
    }

    /// Log messages passed to `/rosout_agg` so far.
    pub fn aggregated(&self) -> u64 {
        self.aggregated.load(Ordering::Relaxed)
    }

    /// Stops the `/rosout` node (unregistered first, as roscore's shutdown does), then the
    /// master.
    pub async fn shutdown(self) {
        if let Some(node) = &self.rosout {
            node.shutdown().await;
        }
    }
}

/// A random version-4 UUID, as text: `/run_id` only has to be fresh per roscore.
fn run_id() -> String {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut bytes = [0u8; 16];
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
        ^ (u128::from(std::process::id()) << 64)
        ^ (u128::from(CALLS.fetch_add(1, Ordering::Relaxed)) << 96);
    // splitmix64 over the seed: no dependency, and fresh enough for an id.
    let mut state = seed as u64 ^ (seed >> 64) as u64;
    for chunk in bytes.chunks_mut(8) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The `/rosout` node: every `rosgraph_msgs/Log` on `/rosout`, as received, onto
/// `/rosout_agg`. Like roscpp's rosout it does not log to `/rosout` itself, and it serves
/// the logger services.
async fn aggregate_rosout(
    master_uri: &str,
    host: &str,
    aggregated: Arc<AtomicU64>,
    security: crate::secure::Security,
) -> Result<Node, NodeError> {
    let args = [
        format!("__master:={master_uri}"),
        "__name:=rosout".to_string(),
        format!("__hostname:={host}"),
    ];
    let id = crate::node::args::NodeIdentity::from_args(
        "rosout",
        &crate::node::args::NodeArgs::parse(args).map_err(NodeError::Args)?,
    )
    .map_err(NodeError::Args)?;
    let options = NodeOptions {
        // The master's program decides what its signals do.
        handle_signals: false,
        rosout: false,
        security: Some(security),
        ..NodeOptions::default()
    };
    let node = Node::with_options(id, options).await?;
    let agg = node
        .advertise_raw(
            "/rosout_agg",
            Log::TYPE,
            Log::MD5SUM,
            Log::DEFINITION,
            AdvertiseOptions {
                latch: false,
                queue_size: ROSOUT_QUEUE,
                max_queued_bytes: ROSOUT_QUEUE_BYTES,
                ..AdvertiseOptions::default()
            },
        )
        .await?;
    let logs = node
        .subscribe_raw_as(
            "/rosout",
            Log::TYPE,
            Log::MD5SUM,
            Log::DEFINITION,
            SubscribeOptions {
                queue_size: ROSOUT_QUEUE,
                max_queued_bytes: ROSOUT_QUEUE_BYTES,
                ..SubscribeOptions::default()
            },
        )
        .await?;
    tokio::spawn(async move {
        while let Some(log) = logs.recv().await {
            agg.publish_body(&log.body);
            aggregated.fetch_add(1, Ordering::Relaxed);
        }
    });
    Ok(node)
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_ids_are_uuids_and_fresh() {
        let (a, b) = (super::run_id(), super::run_id());
        assert_ne!(a, b);
        let groups: Vec<usize> = a.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12]);
        assert_eq!(&a[14..15], "4", "version 4");
    }
}
