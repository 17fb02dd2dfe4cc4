//! What the node holds registered with the master, listed in one place. Shutdown, the
//! re-registration after a master restart, `Drop` and the handles that unadvertise one
//! topic all walk these [`Registration`]s rather than each enumerating the node's tables
//! (the role of rosrust's RAII `Interactor`; here the tables are the list and this module
//! reads them).

use super::{lock, NodeInner, UNREGISTER_BUDGET};
use crate::api::{ApiError, MasterClient};
use crate::transport::publication::Publication;
use crate::transport::service_endpoint::ServicePublication;
use crate::transport::subscription::Subscription;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Unregistrations of single topics and services still on their way to the master, by
/// kind and name. Advertising or subscribing the same name again waits for them: a handle
/// dropped and made again at once would otherwise have its `register` reach the master
/// before the old `unregister`, which then removes the new registration.
#[derive(Default)]
pub(crate) struct InFlight(Mutex<HashMap<String, watch::Receiver<bool>>>);

impl InFlight {
    fn start(&self, key: &str) -> watch::Sender<bool> {
        let (done, receiver) = watch::channel(false);
        lock(&self.0).insert(key.to_string(), receiver);
        done
    }

    fn finish(&self, key: &str, done: watch::Sender<bool>) {
        done.send_replace(true);
        let mut table = lock(&self.0);
        if table
            .get(key)
            .is_some_and(|r| r.same_channel(&done.subscribe()))
        {
            table.remove(key);
        }
    }

    /// Waits until every unregistration in flight now has been answered (or given up).
    async fn all_settled(&self) {
        let pending: Vec<_> = lock(&self.0).values().cloned().collect();
        for mut pending in pending {
            let _ = pending.wait_for(|done| *done).await;
        }
    }

    /// Waits until no unregistration of `key` is in flight.
    pub(crate) async fn settled(&self, key: &str) {
        let pending = lock(&self.0).get(key).cloned();
        if let Some(mut pending) = pending {
            // An error means the unregistering task is gone: nothing to wait for.
            let _ = pending.wait_for(|done| *done).await;
        }
    }
}

/// Registrations on their way to the master (advertise, subscribe, a service, a cached
/// parameter). A shutdown closes this and waits for them before it unregisters: a
/// `registerPublisher` still in flight when the `unregisterPublisher` is sent may reach the
/// master second (rosmaster answers each request on a thread of its own) and leave the
/// node listed after it is gone. Once closed, nothing registers any more.
pub(crate) struct Registering(watch::Sender<RegisteringState>);

#[derive(Clone, Copy, Default)]
pub(crate) struct RegisteringState {
    closed: bool,
    under_way: usize,
}

impl Default for Registering {
    fn default() -> Self {
        Registering(watch::channel(RegisteringState::default()).0)
    }
}

/// One registration under way; dropping it says it is answered (or abandoned).
pub(crate) struct RegistrationUnderWay<'a>(&'a Registering);

impl Drop for RegistrationUnderWay<'_> {
    fn drop(&mut self) {
        self.0 .0.send_modify(|s| s.under_way -= 1);
    }
}

impl Registering {
    /// Counts one registration about to start; `None` once the node shuts down, when it
    /// must not start (checked and counted at once, so a shutdown either waits for it or
    /// this refuses it).
    pub(crate) fn begin(&self) -> Option<RegistrationUnderWay<'_>> {
        let mut admitted = false;
        self.0.send_if_modified(|s| {
            admitted = !s.closed;
            s.under_way += usize::from(admitted);
            admitted
        });
        // `then`, not `then_some`: a guard made and dropped would count one down.
        admitted.then(|| RegistrationUnderWay(self))
    }

    /// Whether a registration is on its way to the master now.
    pub(crate) fn any_under_way(&self) -> bool {
        self.0.borrow().under_way > 0
    }

    /// Refuses every registration from now on and waits for those under way.
    async fn close_and_settle(&self) {
        self.0.send_modify(|s| s.closed = true);
        let _ = self.0.subscribe().wait_for(|s| s.under_way == 0).await;
    }
}

/// One thing the node is registered with the master for.
#[derive(Clone)]
pub(crate) enum Registration {
    /// An advertised topic (`registerPublisher`).
    Publisher(Arc<Publication>),
    /// A subscribed topic (`registerSubscriber`).
    Subscriber(Arc<Subscription>),
    /// An advertised service (`registerService`).
    Service(Arc<ServicePublication>),
    /// A cached parameter (`subscribeParam`).
    Param(String),
}

impl Registration {
    /// Registers again with a master that lost it: a subscriber learns the publishers, a
    /// cached parameter its value.
    async fn register(&self, node: &NodeInner, uri: &str) -> Result<(), ApiError> {
        let master = &node.master;
        match self {
            Registration::Publisher(p) => {
                master
                    .register_publisher(&p.info.topic, &p.info.msg_type, uri)
                    .await?;
                Ok(())
            }
            Registration::Subscriber(s) => {
                let updates_before = s.update_count();
                let publishers = master
                    .register_subscriber(&s.config.topic, &s.config.msg_type, uri)
                    .await?;
                s.registered(&publishers, updates_before);
                Ok(())
            }
            Registration::Service(s) => {
                master
                    .register_service(&s.identity.service, &s.uri, uri)
                    .await
            }
            Registration::Param(key) => {
                let value = master.subscribe_param(key, uri).await?;
                node.params.update(key, value);
                Ok(())
            }
        }
    }

    /// The name [`InFlight`] knows it by; `None` for parameters, which nothing re-registers
    /// at once.
    pub(crate) fn in_flight_key(&self) -> Option<String> {
        match self {
            Registration::Publisher(p) => Some(format!("pub {}", p.info.topic)),
            Registration::Subscriber(s) => Some(format!("sub {}", s.config.topic)),
            Registration::Service(s) => Some(format!("srv {}", s.identity.service)),
            Registration::Param(_) => None,
        }
    }

    async fn unregister(&self, master: &MasterClient, uri: &str) -> Result<(), ApiError> {
        // Whether the master knew it does not matter: it does not now.
        let _known: bool = match self {
            Registration::Publisher(p) => master.unregister_publisher(&p.info.topic, uri).await,
            Registration::Subscriber(s) => master.unregister_subscriber(&s.config.topic, uri).await,
            Registration::Service(s) => {
                master.unregister_service(&s.identity.service, &s.uri).await
            }
            Registration::Param(key) => return master.unsubscribe_param(key, uri).await,
        }?;
        Ok(())
    }

    /// Stops serving it here: a publication tells its udpros subscribers (ERR) and drops its
    /// links, a subscription closes its queues (every `recv()` returns `None`), a service
    /// its connections.
    fn close(&self) {
        match self {
            Registration::Publisher(p) => p.close(),
            Registration::Subscriber(s) => s.close(),
            Registration::Service(s) => s.close(),
            Registration::Param(_) => {}
        }
    }
}

impl NodeInner {
    /// Everything registered now: publications, subscriptions, services, then cached
    /// parameters, each sorted by name.
    pub(super) fn registrations(&self) -> Vec<Registration> {
        let publications = self.publication_list().into_iter();
        let subscriptions = self.subscription_list().into_iter();
        let services = self.service_list().into_iter();
        let mut params = self.params.keys();
        params.sort();
        publications
            .map(Registration::Publisher)
            .chain(subscriptions.map(Registration::Subscriber))
            .chain(services.map(Registration::Service))
            .chain(params.into_iter().map(Registration::Param))
            .collect()
    }

    /// Takes everything out of the node's tables, so that nothing answers for it any more
    /// and a handle dropped later has nothing left to unregister.
    fn take_registrations(&self) -> Vec<Registration> {
        // Each table emptied under its lock: one advertised meanwhile is either taken here
        // or registered after, never dropped from the table without being unregistered.
        let publications = std::mem::take(&mut *lock(&self.topics.publications));
        let subscriptions = std::mem::take(&mut *lock(&self.topics.subscriptions));
        let services = std::mem::take(&mut *lock(&self.services.0));
        let params = self.params.keys();
        params.iter().for_each(|key| self.params.remove(key));
        let publications = publications.into_values().map(|a| a.publication);
        publications
            .map(Registration::Publisher)
            .chain(subscriptions.into_values().map(Registration::Subscriber))
            .chain(services.into_values().map(Registration::Service))
            .chain(params.into_iter().map(Registration::Param))
            .collect()
    }

    /// Leaves the graph: registrations under way answered (see [`Registering`]), then
    /// everything taken out and unregistered all at once, the whole within
    /// [`UNREGISTER_BUDGET`] (a master that is gone or slow must not hold a node that is
    /// leaving, nor the process when a second signal waits for this), then closed.
    ///
    /// The unregistrations that dropped handles started in the background are waited for
    /// within the same budget: a program that drops a subscriber and then shuts down
    /// usually ends its runtime next, which would cancel them unsent and leave the
    /// master listing a node that is gone.
    pub(super) async fn unregister_everything(&self) {
        // One budget for the whole: registrations under way, then the unregistrations.
        let deadline = tokio::time::Instant::now() + UNREGISTER_BUDGET;
        let settled = self.registering.close_and_settle();
        if tokio::time::timeout_at(deadline, settled).await.is_err() {
            tracing::warn!(
                "the master did not answer every registration within {UNREGISTER_BUDGET:?}"
            );
        }
        let registrations = self.take_registrations();
        let dropped_handles = self.in_flight.all_settled();
        unregister_all(
            self.master.clone(),
            self.api_uri(),
            &registrations,
            dropped_handles,
            deadline,
        )
        .await;
        registrations.iter().for_each(Registration::close);
    }

    /// [`Self::unregister_everything`] from `Drop`: closed at once, unregistered in the
    /// background if a runtime is still there to do it.
    pub(super) fn unregister_everything_in_background(&self) {
        let registrations = self.take_registrations();
        registrations.iter().for_each(Registration::close);
        let (master, uri) = (self.master.clone(), self.api_uri());
        self.spawn_background(async move {
            let deadline = tokio::time::Instant::now() + UNREGISTER_BUDGET;
            unregister_all(
                master,
                uri,
                &registrations,
                std::future::ready(()),
                deadline,
            )
            .await
        });
    }

    /// Unregisters one thing that went away (its last handle was dropped), in the
    /// background.
    pub(crate) fn spawn_unregister(&self, what: Registration) {
        let (master, uri) = (self.master.clone(), self.api_uri());
        let key = what.in_flight_key();
        let done = key.as_deref().map(|k| self.in_flight.start(k));
        let in_flight = self.in_flight.clone();
        self.spawn_background(async move {
            let _ = what.unregister(&master, &uri).await;
            if let (Some(key), Some(done)) = (key, done) {
                in_flight.finish(&key, done);
            }
        });
    }

    /// Registers everything again with a master that restarted: the private parameters
    /// from the command line first, then every registration.
    pub(super) async fn register_again(&self) {
        let uri = self.api_uri();
        for (key, value) in self.id.params.clone() {
            let _ = self.master.set_param(&key, value).await;
        }
        for registration in self.registrations() {
            // A shutdown waits for this: it ends at the next registration.
            if self.shutdown.borrow().is_some() {
                return;
            }
            let _ = registration.register(self, &uri).await;
        }
    }

    /// The node's slave API URI, which every registration names.
    fn api_uri(&self) -> String {
        self.uri.get().cloned().unwrap_or_default()
    }
}

/// Removes `name` from `table` if it still holds `entry`, not a newer one of that name (or
/// none, after a shutdown emptied the table); whether it did.
pub(super) fn remove_if_same<T>(
    table: &Mutex<HashMap<String, Arc<T>>>,
    name: &str,
    entry: &Arc<T>,
) -> bool {
    let mut table = lock(table);
    match table.get(name) {
        Some(current) if Arc::ptr_eq(current, entry) => table.remove(name).is_some(),
        _ => false,
    }
}

/// Unregisters `registrations` all at once and waits, until `deadline` (the end of an
/// [`UNREGISTER_BUDGET`]), for their answers and for `also` (unregistrations already under
/// way).
async fn unregister_all(
    master: MasterClient,
    uri: String,
    registrations: &[Registration],
    also: impl std::future::Future<Output = ()>,
    deadline: tokio::time::Instant,
) {
    let mut calls = tokio::task::JoinSet::new();
    for registration in registrations {
        let (registration, master, uri) = (registration.clone(), master.clone(), uri.clone());
        calls.spawn(async move {
            let _ = registration.unregister(&master, &uri).await;
        });
    }
    let all = async {
        let ours = async { while calls.join_next().await.is_some() {} };
        tokio::join!(ours, also);
    };
    if tokio::time::timeout_at(deadline, all).await.is_err() {
        tracing::warn!(
            "the master did not answer every unregistration within {UNREGISTER_BUDGET:?}"
        );
    }
}
