//! The node's advertised services: [`Node::advertise_service`] and its handles, the
//! registry of names to handlers, the `rosrpc://` URI they are registered under, and the
//! unregistration when one goes away. Calls reach them through the node's TCPROS server
//! ([`crate::transport::service_endpoint`]).

use super::{lock, Node, NodeError, NodeInner};
use crate::msg::Service;
use crate::transport::service_endpoint::{RawHandler, ServerOptions, ServicePublication};
use crate::wire::service::ServiceIdentity;
use bytes::Bytes;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
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
        handler: RawHandler,
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
        handler: RawHandler,
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

/// An advertised service of serialized requests and responses; dropping the last handle
/// unadvertises it (unregisters it from the master and closes its connections).
pub struct RawServiceServer {
    publication: Arc<ServicePublication>,
    /// Dropped after the connections are closed: takes the service out of the node.
    _registration: ServiceRegistration,
}

impl RawServiceServer {
    /// The resolved service name.
    pub fn service(&self) -> &str {
        &self.publication.identity.service
    }

    /// The `rosrpc://` URI clients reach it at.
    pub fn uri(&self) -> &str {
        &self.publication.uri
    }

    /// Calls answered or being answered so far.
    pub fn calls(&self) -> u64 {
        self.publication.calls.load(Ordering::Relaxed)
    }
}

impl Drop for RawServiceServer {
    fn drop(&mut self) {
        self.publication.close();
    }
}

/// An advertised service of type `S`; dropping it unadvertises the service.
pub struct ServiceServer<S: Service> {
    raw: RawServiceServer,
    _type: std::marker::PhantomData<fn() -> S>,
}

impl<S: Service> ServiceServer<S> {
    /// The resolved service name.
    pub fn service(&self) -> &str {
        self.raw.service()
    }

    /// The `rosrpc://` URI clients reach it at.
    pub fn uri(&self) -> &str {
        self.raw.uri()
    }

    /// Calls answered or being answered so far.
    pub fn calls(&self) -> u64 {
        self.raw.calls()
    }

    /// The untyped handle, which keeps the service advertised the same way.
    pub fn into_raw(self) -> RawServiceServer {
        self.raw
    }
}

impl Node {
    /// Advertises the service `name` of type `S`. Each call runs `handler`; its `Err`
    /// text reaches the client as a failed call (roscpp's `call()` returns false, rospy
    /// raises `ServiceException` with it). Calls from different connections run
    /// concurrently: a slow call delays only its own client.
    pub async fn advertise_service<S, F, Fut>(
        &self,
        name: &str,
        handler: F,
    ) -> Result<ServiceServer<S>, NodeError>
    where
        S: Service,
        F: Fn(S::Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<S::Response, String>> + Send + 'static,
    {
        self.advertise_service_with::<S, F, Fut>(name, ServerOptions::default(), handler)
            .await
    }

    /// [`Node::advertise_service`] with limits of its own.
    pub async fn advertise_service_with<S, F, Fut>(
        &self,
        name: &str,
        options: ServerOptions,
        handler: F,
    ) -> Result<ServiceServer<S>, NodeError>
    where
        S: Service,
        F: Fn(S::Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<S::Response, String>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let raw: RawHandler = Arc::new(move |body: Bytes| {
            let request = crate::wire::from_bytes::<S::Request>(&body);
            let handler = handler.clone();
            Box::pin(async move {
                let request = request.map_err(|e| format!("bad request: {e}"))?;
                let response = handler(request).await?;
                crate::wire::to_vec(&response).map_err(|e| format!("bad response: {e}"))
            })
        });
        let raw = self
            .advertise_service_handler(name, S::TYPE, S::MD5SUM, options, raw)
            .await?;
        Ok(ServiceServer {
            raw,
            _type: std::marker::PhantomData,
        })
    }

    /// Advertises a service whose handler takes and returns serialized messages, of the
    /// type `service_type` with the service md5sum `md5sum` (`*` takes any client).
    pub async fn advertise_service_raw<F, Fut>(
        &self,
        name: &str,
        service_type: &str,
        md5sum: &str,
        options: ServerOptions,
        handler: F,
    ) -> Result<RawServiceServer, NodeError>
    where
        F: Fn(Bytes) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<u8>, String>> + Send + 'static,
    {
        let handler: RawHandler = Arc::new(move |body| Box::pin(handler(body)));
        self.advertise_service_handler(name, service_type, md5sum, options, handler)
            .await
    }

    async fn advertise_service_handler(
        &self,
        name: &str,
        service_type: &str,
        md5sum: &str,
        options: ServerOptions,
        handler: RawHandler,
    ) -> Result<RawServiceServer, NodeError> {
        let identity = ServiceIdentity {
            node: self.name().to_string(),
            service: self.resolve_name(name),
            service_type: service_type.to_string(),
            md5sum: md5sum.to_string(),
        };
        let (publication, registration) = self.add_service(identity, options, handler).await?;
        Ok(RawServiceServer {
            publication,
            _registration: registration,
        })
    }
}
