//! rosmaster's registration tables: who publishes, subscribes, provides services and
//! subscribes to parameters, per key and per node, with node replacement.

use super::ordered::OrderedMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Publisher,
    Subscriber,
    Service,
    ParamSubscriber,
}

/// One table: key → (caller_id, caller_api) in registration order.
#[derive(Debug, Default)]
pub(super) struct Registrations {
    pub map: OrderedMap<Vec<(String, String)>>,
    /// Services only: service → (caller_id, service_api).
    service_apis: OrderedMap<(String, String)>,
}

/// rosmaster's `[code, message, value]` for unregister calls.
pub(super) type Status = (i32, String, i32);

impl Registrations {
    pub(super) fn apis(&self, key: &str) -> Vec<String> {
        self.map
            .get(key)
            .map(|v| v.iter().map(|(_, api)| api.clone()).collect())
            .unwrap_or_default()
    }

    /// `[[key, [caller_id...]]...]` as getSystemState lists it.
    pub(super) fn state(&self) -> Vec<(String, Vec<String>)> {
        self.map
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|(id, _)| id.clone()).collect()))
            .collect()
    }

    pub(super) fn service_api(&self, service: &str) -> Option<&str> {
        self.service_apis.get(service).map(|(_, api)| api.as_str())
    }

    fn register(
        &mut self,
        key: &str,
        caller_id: &str,
        caller_api: &str,
        service_api: Option<&str>,
    ) {
        let entry = (caller_id.to_string(), caller_api.to_string());
        match (self.map.get_mut(key), service_api) {
            (Some(providers), None) => {
                if !providers.contains(&entry) {
                    providers.push(entry);
                }
            }
            _ => self.map.insert(key, vec![entry]),
        }
        if let Some(api) = service_api {
            self.service_apis
                .insert(key, (caller_id.to_string(), api.to_string()));
        }
    }

    fn unregister_all(&mut self, caller_id: &str) {
        self.map.retain(|_, providers| {
            providers.retain(|(id, _)| id != caller_id);
            !providers.is_empty()
        });
        self.service_apis.retain(|_, (id, _)| id != caller_id);
    }

    fn unregister(
        &mut self,
        key: &str,
        caller_id: &str,
        caller_api: &str,
        service_api: Option<&str>,
    ) -> Status {
        if let Some(api) = service_api {
            if self.service_apis.is_empty() {
                return (1, format!("[{caller_id}] is not a provider of [{key}]"), 0);
            }
            if self.service_apis.get(key) != Some(&(caller_id.to_string(), api.to_string())) {
                return (
                    1,
                    format!("[{api}] is no longer the current service api handle for [{key}]"),
                    0,
                );
            }
            self.service_apis.remove(key);
            self.map.remove(key);
            return (
                1,
                format!("Unregistered [{caller_id}] as provider of [{key}]"),
                1,
            );
        }
        let entry = (caller_id.to_string(), caller_api.to_string());
        match self.map.get_mut(key) {
            Some(providers) if providers.contains(&entry) => {
                providers.retain(|p| p != &entry);
                if providers.is_empty() {
                    self.map.remove(key);
                }
                (
                    1,
                    format!("Unregistered [{caller_id}] as provider of [{key}]"),
                    1,
                )
            }
            _ => (
                1,
                format!("[{caller_id}] is not a known provider of [{key}]"),
                0,
            ),
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct NodeRef {
    pub api: String,
    keys: Vec<(Kind, String)>,
}

#[derive(Debug, Default)]
pub(super) struct RegistrationManager {
    pub nodes: OrderedMap<NodeRef>,
    pub publishers: Registrations,
    pub subscribers: Registrations,
    pub services: Registrations,
    pub param_subscribers: Registrations,
}

impl RegistrationManager {
    fn table(&mut self, kind: Kind) -> &mut Registrations {
        match kind {
            Kind::Publisher => &mut self.publishers,
            Kind::Subscriber => &mut self.subscribers,
            Kind::Service => &mut self.services,
            Kind::ParamSubscriber => &mut self.param_subscribers,
        }
    }

    /// Registers `key` for a node. When the same caller_id registers from another API the
    /// old node is replaced: every registration of that caller_id is dropped, and its old
    /// API is returned so the caller can tell it to shut down.
    pub(super) fn register(
        &mut self,
        kind: Kind,
        key: &str,
        caller_id: &str,
        caller_api: &str,
        service_api: Option<&str>,
    ) -> Option<String> {
        let bumped = match self.nodes.get(caller_id) {
            Some(node) if node.api == caller_api => None,
            Some(node) => Some(node.api.clone()),
            None => None,
        };
        if bumped.is_some() || !self.nodes.contains(caller_id) {
            self.nodes.insert(
                caller_id,
                NodeRef {
                    api: caller_api.to_string(),
                    keys: Vec::new(),
                },
            );
        }
        if let Some(node) = self.nodes.get_mut(caller_id) {
            if !node.keys.contains(&(kind, key.to_string())) {
                node.keys.push((kind, key.to_string()));
            }
        }
        if bumped.is_some() {
            for k in [
                Kind::Publisher,
                Kind::Subscriber,
                Kind::Service,
                Kind::ParamSubscriber,
            ] {
                self.table(k).unregister_all(caller_id);
            }
        }
        self.table(kind)
            .register(key, caller_id, caller_api, service_api);
        bumped
    }

    pub(super) fn unregister(
        &mut self,
        kind: Kind,
        key: &str,
        caller_id: &str,
        caller_api: &str,
        service_api: Option<&str>,
    ) -> Status {
        if !self.nodes.contains(caller_id) {
            return (1, format!("[{caller_id}] is not a registered node"), 0);
        }
        let status = self
            .table(kind)
            .unregister(key, caller_id, caller_api, service_api);
        if let Some(node) = self.nodes.get_mut(caller_id) {
            if status.2 == 1 {
                node.keys.retain(|k| k != &(kind, key.to_string()));
            }
            if node.keys.is_empty() {
                self.nodes.remove(caller_id);
            }
        }
        status
    }
}
