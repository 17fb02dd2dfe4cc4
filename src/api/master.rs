//! The master and parameter APIs, called by a node or a tool.

use super::{ok_value, strings, ApiError};
use crate::xmlrpc::{Value, XmlRpcClient};

/// `(topic, type)`.
pub type TopicType = (String, String);

/// `getSystemState`: for each topic or service, the nodes that publish, subscribe or
/// provide it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SystemState {
    /// Each published topic with the nodes that publish it.
    pub publishers: Vec<(String, Vec<String>)>,
    /// Each subscribed topic with the nodes that subscribe to it.
    pub subscribers: Vec<(String, Vec<String>)>,
    /// Each service with the nodes that provide it.
    pub services: Vec<(String, Vec<String>)>,
}

impl SystemState {
    /// Every node named anywhere, sorted, once.
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = [&self.publishers, &self.subscribers, &self.services]
            .into_iter()
            .flatten()
            .flat_map(|(_, ns)| ns.iter().cloned())
            .collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }
}

/// The master API call of udpros's master (not rosmaster's) that names the nodes that
/// registered without proof of the graph key: `getUnauthenticatedNodes(caller_id)` →
/// `[1, text, [names]]` ([`Master::unproven_nodes`](crate::master::Master::unproven_nodes)).
pub const UNAUTHENTICATED_NODES: &str = "getUnauthenticatedNodes";

/// Calls to one master as one caller.
#[derive(Debug, Clone)]
pub struct MasterClient {
    uri: String,
    caller_id: String,
    client: XmlRpcClient,
}

impl MasterClient {
    /// A client of the master at `uri`, calling as the node `caller_id`.
    pub fn new(uri: &str, caller_id: &str, client: XmlRpcClient) -> MasterClient {
        MasterClient {
            uri: uri.to_string(),
            caller_id: caller_id.to_string(),
            client,
        }
    }

    /// The master's URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The node name this client calls as.
    pub fn caller_id(&self) -> &str {
        &self.caller_id
    }

    /// The XML-RPC client it calls with (signing as its node's security says): for calls
    /// to other nodes' slave APIs on the same terms.
    pub fn xmlrpc(&self) -> &XmlRpcClient {
        &self.client
    }

    /// A raw call with the caller id prepended; the status triplet checked.
    pub async fn call(&self, method: &str, args: Vec<Value>) -> Result<Value, ApiError> {
        let mut params = Vec::with_capacity(args.len() + 1);
        params.push(Value::from(self.caller_id.as_str()));
        params.extend(args);
        ok_value(self.client.call(&self.uri, method, params).await?)
    }

    /// Registers a publisher; returns the current subscribers' APIs.
    pub async fn register_publisher(
        &self,
        topic: &str,
        ty: &str,
        caller_api: &str,
    ) -> Result<Vec<String>, ApiError> {
        strings(
            &self
                .register("registerPublisher", topic, ty, caller_api)
                .await?,
        )
    }

    /// `unregisterPublisher`: whether the registration existed.
    pub async fn unregister_publisher(
        &self,
        topic: &str,
        caller_api: &str,
    ) -> Result<bool, ApiError> {
        self.unregister("unregisterPublisher", topic, caller_api)
            .await
    }

    /// Registers a subscriber; returns the current publishers' APIs.
    pub async fn register_subscriber(
        &self,
        topic: &str,
        ty: &str,
        caller_api: &str,
    ) -> Result<Vec<String>, ApiError> {
        strings(
            &self
                .register("registerSubscriber", topic, ty, caller_api)
                .await?,
        )
    }

    /// `unregisterSubscriber`: whether the registration existed.
    pub async fn unregister_subscriber(
        &self,
        topic: &str,
        caller_api: &str,
    ) -> Result<bool, ApiError> {
        self.unregister("unregisterSubscriber", topic, caller_api)
            .await
    }

    /// `registerService`: `service` served at the ROSRPC URI `service_api`.
    pub async fn register_service(
        &self,
        service: &str,
        service_api: &str,
        caller_api: &str,
    ) -> Result<(), ApiError> {
        self.register("registerService", service, service_api, caller_api)
            .await
            .map(drop)
    }

    /// `unregisterService`: whether the registration existed.
    pub async fn unregister_service(
        &self,
        service: &str,
        service_api: &str,
    ) -> Result<bool, ApiError> {
        self.unregister("unregisterService", service, service_api)
            .await
    }

    /// A register call: `[caller_id, key, detail, caller_api]`, where the detail is the
    /// topic type or the service's URI.
    async fn register(
        &self,
        method: &str,
        key: &str,
        detail: &str,
        caller_api: &str,
    ) -> Result<Value, ApiError> {
        self.call(method, vec![key.into(), detail.into(), caller_api.into()])
            .await
    }

    /// An unregister call (`[caller_id, key, api]`): whether the registration existed
    /// (rosmaster answers 1, or 0 for none).
    async fn unregister(&self, method: &str, key: &str, api: &str) -> Result<bool, ApiError> {
        Ok(self.call(method, vec![key.into(), api.into()]).await? == Value::Int(1))
    }

    /// The XML-RPC URI of a node.
    pub async fn lookup_node(&self, name: &str) -> Result<String, ApiError> {
        let v = self.call("lookupNode", vec![name.into()]).await?;
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| ApiError::Shape("node URI is not a string".into()))
    }

    /// `lookupService`: the ROSRPC URI of the node that provides `name`.
    pub async fn lookup_service(&self, name: &str) -> Result<String, ApiError> {
        let v = self.call("lookupService", vec![name.into()]).await?;
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| ApiError::Shape("service URI is not a string".into()))
    }

    /// `getPublishedTopics`: topics with publishers under `subgraph` (`""` for all), with their types.
    pub async fn get_published_topics(&self, subgraph: &str) -> Result<Vec<TopicType>, ApiError> {
        pairs(
            &self
                .call("getPublishedTopics", vec![subgraph.into()])
                .await?,
        )
    }

    /// `getTopicTypes`: every known topic with its type.
    pub async fn get_topic_types(&self) -> Result<Vec<TopicType>, ApiError> {
        pairs(&self.call("getTopicTypes", vec![]).await?)
    }

    /// The nodes that registered without proof of the graph key, when the master is
    /// udpros's and checks proofs under `prefer` ([`UNAUTHENTICATED_NODES`]); an error
    /// from a master that has no such call (rosmaster's).
    pub async fn unauthenticated_nodes(&self) -> Result<Vec<String>, ApiError> {
        strings(&self.call(UNAUTHENTICATED_NODES, vec![]).await?)
    }

    /// `getSystemState`: every publisher, subscriber and service registration.
    pub async fn get_system_state(&self) -> Result<SystemState, ApiError> {
        let v = self.call("getSystemState", vec![]).await?;
        let parts = v
            .as_array()
            .filter(|p| p.len() == 3)
            .ok_or_else(|| ApiError::Shape("system state".into()))?;
        let table = |v: &Value| -> Result<Vec<(String, Vec<String>)>, ApiError> {
            let rows = v
                .as_array()
                .ok_or_else(|| ApiError::Shape("system state table".into()))?;
            rows.iter()
                .map(|row| match row.as_array() {
                    Some([name, nodes]) => {
                        Ok((name.as_str().unwrap_or("").to_string(), strings(nodes)?))
                    }
                    _ => Err(ApiError::Shape("system state row".into())),
                })
                .collect()
        };
        Ok(SystemState {
            publishers: table(&parts[0])?,
            subscribers: table(&parts[1])?,
            services: table(&parts[2])?,
        })
    }

    /// `getUri`: the URI the master gives for itself.
    pub async fn get_uri(&self) -> Result<String, ApiError> {
        let v = self.call("getUri", vec![]).await?;
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| ApiError::Shape("master URI is not a string".into()))
    }

    /// `getPid`: the master's process id.
    pub async fn get_pid(&self) -> Result<i32, ApiError> {
        self.call("getPid", vec![])
            .await?
            .as_i32()
            .ok_or_else(|| ApiError::Shape("pid is not an int".into()))
    }

    /// `getParam`: `Ok(None)` when the parameter is not set.
    pub async fn get_param(&self, key: &str) -> Result<Option<Value>, ApiError> {
        match self.call("getParam", vec![key.into()]).await {
            Ok(v) => Ok(Some(v)),
            Err(ApiError::Status { code: -1, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `setParam`: sets `key` (a struct value sets a dictionary of parameters).
    pub async fn set_param(&self, key: &str, value: Value) -> Result<(), ApiError> {
        self.call("setParam", vec![key.into(), value])
            .await
            .map(drop)
    }

    /// `Ok(false)` when it was not set.
    pub async fn delete_param(&self, key: &str) -> Result<bool, ApiError> {
        match self.call("deleteParam", vec![key.into()]).await {
            Ok(_) => Ok(true),
            Err(ApiError::Status { code: -1, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `hasParam`: whether `key` is set.
    pub async fn has_param(&self, key: &str) -> Result<bool, ApiError> {
        self.call("hasParam", vec![key.into()])
            .await?
            .as_bool()
            .ok_or_else(|| ApiError::Shape("hasParam".into()))
    }

    /// `searchParam`: the closest key upwards from the caller's namespace, if any.
    pub async fn search_param(&self, key: &str) -> Result<Option<String>, ApiError> {
        match self.call("searchParam", vec![key.into()]).await {
            Ok(v) => Ok(v.as_str().map(str::to_string)),
            Err(ApiError::Status { code: -1, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `getParamNames`: every parameter's full name.
    pub async fn get_param_names(&self) -> Result<Vec<String>, ApiError> {
        strings(&self.call("getParamNames", vec![]).await?)
    }

    /// Subscribes to updates of `key` (delivered to `caller_api` as `paramUpdate`); returns
    /// its current value, or `{}` when unset.
    pub async fn subscribe_param(&self, key: &str, caller_api: &str) -> Result<Value, ApiError> {
        self.call("subscribeParam", vec![caller_api.into(), key.into()])
            .await
    }

    /// `unsubscribeParam`: stops the master's `paramUpdate` calls for `key` to `caller_api`.
    pub async fn unsubscribe_param(&self, key: &str, caller_api: &str) -> Result<(), ApiError> {
        self.call("unsubscribeParam", vec![caller_api.into(), key.into()])
            .await
            .map(drop)
    }
}

fn pairs(v: &Value) -> Result<Vec<TopicType>, ApiError> {
    let rows = v
        .as_array()
        .ok_or_else(|| ApiError::Shape("expected [[topic, type]...]".into()))?;
    rows.iter()
        .map(|row| match row.as_array() {
            Some([a, b]) => Ok((
                a.as_str().unwrap_or("").to_string(),
                b.as_str().unwrap_or("").to_string(),
            )),
            _ => Err(ApiError::Shape("expected [topic, type]".into())),
        })
        .collect()
}
