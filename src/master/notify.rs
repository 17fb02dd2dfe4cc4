//! Calls the master makes to nodes (publisherUpdate, paramUpdate, shutdown): one FIFO queue
//! per node API, so a node sees its updates in order, while nodes are served concurrently
//! and a slow node delays nobody else.
//!
//! A queue holds what the node has yet to learn, not every message ever meant for it: a
//! publisherUpdate carries the topic's full publisher list, so a newer one replaces a
//! pending one for the same topic, and likewise a paramUpdate for the same key. A node that
//! never answers thus costs one pending update per topic and key, and at most
//! [`MAX_PENDING_PER_NODE`] of those (the oldest dropped beyond it).

use crate::xmlrpc::{Value, XmlRpcClient};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Task {
    PublisherUpdate {
        topic: String,
        publishers: Vec<String>,
    },
    ParamUpdate {
        caller_id: String,
        key: String,
        value: Value,
    },
    Shutdown {
        message: String,
    },
}

impl Task {
    /// Takes `newer`'s content when it supersedes this task; false when it does not.
    fn absorb(&mut self, newer: &mut Option<Task>) -> bool {
        let supersedes = match (&*self, newer.as_ref()) {
            (
                Task::PublisherUpdate { topic: a, .. },
                Some(Task::PublisherUpdate { topic: b, .. }),
            ) => a == b,
            (
                Task::ParamUpdate {
                    caller_id: a,
                    key: k,
                    ..
                },
                Some(Task::ParamUpdate {
                    caller_id: b,
                    key: l,
                    ..
                }),
            ) => a == b && k == l,
            (Task::Shutdown { .. }, Some(Task::Shutdown { .. })) => true,
            _ => false,
        };
        if supersedes {
            if let Some(task) = newer.take() {
                *self = task;
            }
        }
        supersedes
    }
}

/// Called when a node answers paramUpdate with -1 (not subscribed): (caller_id, api, key).
pub(super) type Rejected = Arc<dyn Fn(&str, &str, &str) + Send + Sync>;

/// Distinct updates waiting for one node.
pub(super) const MAX_PENDING_PER_NODE: usize = 1000;

#[derive(Default)]
struct Pending {
    tasks: VecDeque<Task>,
    dropped: u64,
}

#[derive(Clone)]
pub(super) struct Notifier {
    client: XmlRpcClient,
    /// A node's entry exists while its worker runs; the worker removes it when it finds
    /// the queue empty, under the same lock, so a task is never left without a worker.
    queues: Arc<Mutex<HashMap<String, Pending>>>,
    on_rejected: Rejected,
}

impl Notifier {
    pub(super) fn new(client: XmlRpcClient, on_rejected: Rejected) -> Notifier {
        Notifier {
            client,
            queues: Arc::default(),
            on_rejected,
        }
    }

    fn queues(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `task` for the node at `api`, merged with a pending one it supersedes.
    pub(super) fn queue(&self, api: &str, task: Task) {
        let mut queues = self.queues();
        let start_worker = !queues.contains_key(api);
        let pending = queues.entry(api.to_string()).or_default();
        let mut task = Some(task);
        if !pending.tasks.iter_mut().any(|t| t.absorb(&mut task)) {
            if pending.tasks.len() >= MAX_PENDING_PER_NODE {
                pending.tasks.pop_front();
                pending.dropped += 1;
                if pending.dropped == 1 {
                    tracing::warn!(
                        "{api} is not taking the master's updates; dropping the oldest of {MAX_PENDING_PER_NODE}"
                    );
                }
            }
            pending.tasks.extend(task);
        }
        if start_worker {
            tokio::spawn(self.clone().work(api.to_string()));
        }
    }

    #[cfg(test)]
    /// Updates waiting for the node at `api`.
    pub(super) fn pending(&self, api: &str) -> usize {
        self.queues().get(api).map_or(0, |p| p.tasks.len())
    }

    async fn work(self, api: String) {
        loop {
            let task = {
                let mut queues = self.queues();
                match queues.get_mut(&api).and_then(|p| p.tasks.pop_front()) {
                    Some(task) => task,
                    None => {
                        queues.remove(&api);
                        return;
                    }
                }
            };
            self.run(&api, task).await;
        }
    }

    async fn run(&self, api: &str, task: Task) {
        let master = Value::from("/master");
        match task {
            Task::PublisherUpdate { topic, publishers } => {
                let params = vec![master, Value::from(topic.as_str()), Value::from(publishers)];
                if let Err(e) = self.client.call(api, "publisherUpdate", params).await {
                    tracing::debug!("publisherUpdate[{topic}] -> {api}: {e}");
                }
            }
            Task::ParamUpdate {
                caller_id,
                key,
                value,
            } => {
                let params = vec![master, Value::from(key.as_str()), value];
                match self.client.call(api, "paramUpdate", params).await {
                    Ok(Value::Array(reply)) if reply.first() == Some(&Value::Int(-1)) => {
                        (self.on_rejected)(&caller_id, api, &key)
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!("paramUpdate[{key}] -> {api}: {e}"),
                }
            }
            Task::Shutdown { message } => {
                let _ = self
                    .client
                    .call(api, "shutdown", vec![master, Value::from(message)])
                    .await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A node that never answers: its updates merge per topic and stay bounded.
    #[tokio::test]
    async fn updates_for_a_silent_node_merge_and_stay_bounded() {
        // Connections wait in the backlog: calls neither fail nor finish.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = format!("http://{}/", silent.local_addr().unwrap());
        let client = XmlRpcClient::new(Duration::from_secs(30), Duration::from_secs(30));
        let notifier = Notifier::new(client, Arc::new(|_: &str, _: &str, _: &str| {}));
        let mut publishers = Vec::new();
        for i in 0..1500 {
            publishers.push(format!("http://host:{i}/"));
            notifier.queue(
                &api,
                Task::PublisherUpdate {
                    topic: "/crowded".into(),
                    publishers: publishers.clone(),
                },
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(notifier.pending(&api) <= 1, "{}", notifier.pending(&api));
        for i in 0..1500 {
            notifier.queue(
                &api,
                Task::PublisherUpdate {
                    topic: format!("/t{i}"),
                    publishers: vec![],
                },
            );
        }
        assert_eq!(notifier.pending(&api), MAX_PENDING_PER_NODE);
    }
}
