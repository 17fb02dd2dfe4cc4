//! The node's registry of advertised services: names to handlers, the `rosrpc://` URI
//! they are registered under, and the unregistration when one goes away.

use super::{lock, Node, NodeError, NodeInner};
use crate::service::{ServerOptions, ServicePublication};
use crate::wire::service::ServiceIdentity;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// Advertised services by resolved name.
#[derive(Default)]
pub(crate) struct Services(pub(crate) Mutex<HashMap<String, Arc<ServicePublication>>>);

/// A service's place in the node's registry, held by its server handle: dropping it takes
/// the service out and unregisters it (if it is still this one).
pub(crate) struct ServiceRegistration {
    node: Weak<NodeInner>,
    publication: Arc<ServicePublication>,
}

impl Drop for ServiceRegistration {
    fn drop(&mut self) {
        if let Some(node) = self.node.upgrade() {
            node.remove_service(&self.publication);
        }
    }
}

impl Node {
    /// Adds a service to the node's registry (before it is registered with the master,
    /// so the first client finds it) and registers it. One node serves a name once, as in
    /// roscpp.
    pub(crate) async fn add_service(
        &self,
        identity: ServiceIdentity,
        options: ServerOptions,
        handler: crate::service::RawHandler,
    ) -> Result<(Arc<ServicePublication>, ServiceRegistration), NodeError> {
        let Some(_registering) = self.inner.registering.begin() else {
            // As roscpp after shutdown: a server that is registered nowhere and serves
            // nothing.
            let uri = self.inner.rosrpc_uri();
            let publication = Arc::new(ServicePublication::new(identity, uri, handler, options));
            publication.close();
            let registration = ServiceRegistration {
                node: Weak::new(),
                publication: publication.clone(),
            };
            return Ok((publication, registration));
        };
        let publication = self.inner.insert_service(identity, options, handler)?;
        let registration = ServiceRegistration {
            node: Arc::downgrade(&self.inner),
            publication: publication.clone(),
        };
        let in_flight = format!("srv {}", publication.identity.service);
        self.inner.in_flight.settled(&in_flight).await;
        self.inner
            .master
            .register_service(&publication.identity.service, &publication.uri, self.uri())
            .await?;
        Ok((publication, registration))
    }
}

impl NodeInner {
    /// The node's `rosrpc://host:port` URI: its TCPROS port, which topics and services share.
    pub(crate) fn rosrpc_uri(&self) -> String {
        let port = self.tcp_port.get().copied().unwrap_or(0);
        format!("rosrpc://{}", crate::host::authority(&self.id.host, port))
    }

    /// Puts a service in the table; refused if this node serves the name already.
    fn insert_service(
        &self,
        identity: ServiceIdentity,
        options: ServerOptions,
        handler: crate::service::RawHandler,
    ) -> Result<Arc<ServicePublication>, NodeError> {
        let mut services = lock(&self.services.0);
        if services.contains_key(&identity.service) {
            return Err(NodeError::ServiceExists(identity.service));
        }
        let name = identity.service.clone();
        let publication = Arc::new(ServicePublication::new(
            identity,
            self.rosrpc_uri(),
            handler,
            options,
        ));
        services.insert(name, publication.clone());
        Ok(publication)
    }

    /// Removes a service (if it is still this one) and unregisters it in the background.
    fn remove_service(&self, publication: &Arc<ServicePublication>) {
        if !super::registry::remove_if_same(
            &self.services.0,
            &publication.identity.service,
            publication,
        ) {
            return;
        }
        self.spawn_unregister(super::registry::Registration::Service(publication.clone()));
    }

    pub(crate) fn service(&self, name: &str) -> Option<Arc<ServicePublication>> {
        lock(&self.services.0).get(name).cloned()
    }

    /// Every advertised service, sorted by name.
    pub(crate) fn service_list(&self) -> Vec<Arc<ServicePublication>> {
        let mut v: Vec<_> = lock(&self.services.0).values().cloned().collect();
        v.sort_by(|a, b| a.identity.service.cmp(&b.identity.service));
        v
    }
}
