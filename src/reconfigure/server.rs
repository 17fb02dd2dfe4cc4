//! The reconfigure server on a node: the service, the two latched topics, the parameter
//! server mirror, and one call at a time.

use super::{Config, ConfigSpace, Description, DescriptionError};
use crate::msgs::dynamic_reconfigure as msg;
use crate::node::{AdvertiseOptions, Node, NodeError, Publisher, WeakNode};
use crate::service::ServiceServer;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

type Callback = dyn Fn(Config, u32) -> Pin<Box<dyn Future<Output = Config> + Send>> + Send + Sync;

/// A running dynamic_reconfigure server (see [`crate::reconfigure`]). Dropping it stops
/// serving.
pub struct ReconfigureServer {
    shared: Arc<Shared>,
    _service: ServiceServer<msg::Reconfigure>,
    _descriptions: Publisher<msg::ConfigDescription>,
}

struct Shared {
    space: ConfigSpace,
    /// `<ns>/`, resolved.
    ns: String,
    node: WeakNode,
    updates: Publisher<msg::Config>,
    callback: Box<Callback>,
    /// The applied config; held through a whole change, so changes go one at a time.
    current: tokio::sync::Mutex<Config>,
}

/// Why a reconfigure server could not start.
#[derive(Debug)]
pub enum ReconfigureError {
    /// The description is not valid.
    Description(DescriptionError),
    /// Advertising or registering failed.
    Node(NodeError),
}

impl std::fmt::Display for ReconfigureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReconfigureError::Description(e) => write!(f, "bad reconfigure description: {e}"),
            ReconfigureError::Node(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReconfigureError {}

impl From<NodeError> for ReconfigureError {
    fn from(e: NodeError) -> Self {
        ReconfigureError::Node(e)
    }
}

impl Node {
    /// Serves `description`'s settings under `namespace` (`~` for the node's private
    /// namespace, as C++ and Python servers default to; a relative name is put under `~`, as
    /// rospy does). `callback` gets each new config and the OR of the levels that changed
    /// (`0xFFFFFFFF` for the first call, at start) and returns the config it applied.
    pub async fn reconfigure_server<F, Fut>(
        &self,
        namespace: &str,
        description: Description,
        callback: F,
    ) -> Result<ReconfigureServer, ReconfigureError>
    where
        F: Fn(Config, u32) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Config> + Send + 'static,
    {
        let space = description
            .validate()
            .map_err(ReconfigureError::Description)?;
        let ns = match namespace {
            "" | "~" => "~".to_string(),
            n if n.starts_with('/') || n.starts_with('~') => n.to_string(),
            n => format!("~{n}"),
        };
        let ns = format!("{}/", self.resolve_name(&ns).trim_end_matches('/'));
        let latched = AdvertiseOptions {
            queue_size: 1,
            ..AdvertiseOptions::latched()
        };
        let descriptions = self
            .advertise::<msg::ConfigDescription>(
                &format!("{ns}parameter_descriptions"),
                latched.clone(),
            )
            .await?;
        let updates = self
            .advertise::<msg::Config>(&format!("{ns}parameter_updates"), latched)
            .await?;
        let mut config = space.defaults();
        let mut stored = std::collections::HashMap::new();
        for p in space.params() {
            if let Ok(Some(v)) = self.get_param(&format!("{ns}{}", p.name())).await {
                stored.insert(p.name().to_string(), v);
            }
        }
        for refusal in space.overlay_stored(&mut config, |name| stored.get(name).cloned()) {
            tracing::warn!("{ns}{refusal} on the parameter server; using the default");
        }
        let _ = descriptions.publish(&space.description_msg());
        let shared = Arc::new(Shared {
            space,
            ns: ns.clone(),
            node: self.downgrade(),
            updates,
            callback: Box::new(move |config, level| Box::pin(callback(config, level))),
            current: tokio::sync::Mutex::new(config.clone()),
        });
        shared.change(|_| (config, u32::MAX)).await;
        let handler = {
            let shared = Arc::downgrade(&shared);
            move |request: msg::ReconfigureRequest| {
                let shared = shared.clone();
                async move {
                    let shared = shared.upgrade().ok_or("the reconfigure server stopped")?;
                    Ok(msg::ReconfigureResponse {
                        config: shared.set(&request.config).await,
                    })
                }
            }
        };
        let service = self
            .advertise_service::<msg::Reconfigure, _, _>(&format!("{ns}set_parameters"), handler)
            .await?;
        Ok(ReconfigureServer {
            shared,
            _service: service,
            _descriptions: descriptions,
        })
    }
}

impl Shared {
    /// Applies a request: overlay, clamp, callback with the level of what changed.
    async fn set(&self, request: &msg::Config) -> msg::Config {
        self.change(|current| {
            let (next, report) = self.space.overlay(current, request);
            if report.ignored > 0 {
                tracing::warn!(
                    "{}set_parameters: {} value(s) named no setting of their type; ignored",
                    self.ns,
                    report.ignored
                );
            }
            for refusal in &report.refused {
                tracing::warn!("{}set_parameters: {refusal}; kept as it was", self.ns);
            }
            let level = self.space.level_between(current, &next);
            (next, level)
        })
        .await
    }

    /// One change, with the current config locked throughout: `next` gives the config to
    /// try and its level; the callback's answer is stored, mirrored and published.
    async fn change(&self, next: impl FnOnce(&Config) -> (Config, u32)) -> msg::Config {
        let mut current = self.current.lock().await;
        let (config, level) = next(&current);
        let applied = self.run_callback(config, level).await;
        *current = applied.clone();
        let message = self.publish(&applied).await;
        drop(current);
        message
    }

    async fn run_callback(&self, config: Config, level: u32) -> Config {
        let mut applied = (self.callback)(config, level).await;
        // The callback may only change values within the description's ranges.
        self.space.clamp(&mut applied);
        applied
    }

    /// Writes every setting to the parameter server and publishes the config.
    async fn publish(&self, config: &Config) -> msg::Config {
        if let Some(master) = self.node.master() {
            for (name, value) in config.iter() {
                let _ = master
                    .set_param(&format!("{}{name}", self.ns), value.to_xmlrpc())
                    .await;
            }
        }
        let message = self.space.config_msg(config);
        let _ = self.updates.publish(&message);
        message
    }
}

impl ReconfigureServer {
    /// The config the node applied last.
    pub async fn config(&self) -> Config {
        self.shared.current.lock().await.clone()
    }

    /// The namespace the server serves, with a trailing `/` (`/sonar/`).
    pub fn namespace(&self) -> &str {
        &self.shared.ns
    }

    /// Changes settings from the node's side (C++'s `updateConfig`), for values the node
    /// changed itself: clamped, passed through the callback with the level of what
    /// changed, stored, mirrored and published.
    pub async fn update(&self, config: Config) {
        let space = &self.shared.space;
        self.shared
            .change(|current| {
                let mut next = config;
                space.clamp(&mut next);
                let level = space.level_between(current, &next);
                (next, level)
            })
            .await;
    }
}
