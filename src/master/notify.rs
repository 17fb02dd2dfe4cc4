//! Calls the master makes to nodes (publisherUpdate, paramUpdate, shutdown): one FIFO queue
//! per node API, so a node sees its updates in order, while nodes are served concurrently
//! and a slow node delays nobody else.

use crate::xmlrpc::{Value, XmlRpcClient};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Debug, Clone)]
pub enum Task {
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

/// Called when a node answers paramUpdate with -1 (not subscribed): (caller_id, api, key).
pub type Rejected = Arc<dyn Fn(&str, &str, &str) + Send + Sync>;

/// How long an idle queue's worker waits before it exits.
const IDLE: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub struct Notifier {
    client: XmlRpcClient,
    queues: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Task>>>>,
    on_rejected: Rejected,
}

impl Notifier {
    pub fn new(client: XmlRpcClient, on_rejected: Rejected) -> Notifier {
        Notifier {
            client,
            queues: Arc::default(),
            on_rejected,
        }
    }

    /// Queues `task` for the node at `api`.
    pub fn queue(&self, api: &str, task: Task) {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let task = match queues.get(api) {
            Some(tx) => match tx.send(task) {
                Ok(()) => return,
                Err(mpsc::error::SendError(task)) => task, // the worker has just exited
            },
            None => task,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(task);
        queues.insert(api.to_string(), tx.clone());
        tokio::spawn(self.clone().work(api.to_string(), tx, rx));
    }

    async fn work(
        self,
        api: String,
        me: mpsc::UnboundedSender<Task>,
        mut rx: mpsc::UnboundedReceiver<Task>,
    ) {
        loop {
            match tokio::time::timeout(IDLE, rx.recv()).await {
                Ok(Some(task)) => self.run(&api, task).await,
                Ok(None) => return,
                Err(_) => {
                    let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
                    if rx.is_empty() {
                        if queues.get(&api).is_some_and(|tx| tx.same_channel(&me)) {
                            queues.remove(&api);
                        }
                        return;
                    }
                }
            }
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
