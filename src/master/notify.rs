//! The driver of the master's fan-out: performs the calls [`Fanout`] decides on, each
//! under its deadline, and feeds their outcomes back. What is called when, on which lane
//! and with which patience is the pure object's; this file only does the I/O and keeps
//! the time.

use super::fanout::{Call, Fanout, Outcome, Pacing, Task};
use crate::xmlrpc::{CallError, Value, XmlRpcClient};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Called when a node answers paramUpdate with -1 (not subscribed): (caller_id, api, key).
pub(super) type Rejected = Arc<dyn Fn(&str, &str, &str) + Send + Sync>;

/// The master's calls to nodes. Cloning it gives another handle to the same fan-out.
#[derive(Clone)]
pub(super) struct Notifier {
    shared: Arc<Shared>,
}

struct Shared {
    client: XmlRpcClient,
    state: Mutex<State>,
    /// Wakes the driver: a task was queued or a call ended.
    wake: Notify,
    on_rejected: Rejected,
}

struct State {
    fanout: Fanout,
    /// A driver task runs; it ends once the fan-out is idle, under this lock, so a queued
    /// task never waits without one.
    driven: bool,
}

impl Notifier {
    pub(super) fn new(
        pacing: Pacing,
        on_rejected: Rejected,
        security: &crate::secure::Security,
    ) -> Notifier {
        // The deadlines are per call; the client's own are only a backstop.
        let client =
            XmlRpcClient::unpooled(pacing.retry_deadline, pacing.retry_deadline).signed(security);
        Notifier {
            shared: Arc::new(Shared {
                client,
                state: Mutex::new(State {
                    fanout: Fanout::new(pacing),
                    driven: false,
                }),
                wake: Notify::new(),
                on_rejected,
            }),
        }
    }

    /// Queues `task` for the node at `api`, merged with a pending one it supersedes.
    pub(super) fn queue(&self, api: &str, task: Task) {
        let mut state = self.shared.lock();
        state.fanout.queue(now(), api, task);
        if state.driven {
            self.shared.wake.notify_one();
        } else {
            state.driven = true;
            tokio::spawn(drive(self.shared.clone()));
        }
    }

    #[cfg(test)]
    /// Updates waiting for the node at `api`.
    pub(super) fn pending(&self, api: &str) -> usize {
        self.shared.lock().fanout.pending(api)
    }

    #[cfg(test)]
    /// Calls to `api` that failed in a row.
    pub(super) fn failures(&self, api: &str) -> u32 {
        self.shared.lock().fanout.failures(api)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

/// Starts the calls the fan-out hands out and sleeps until its next back-off ends or a
/// call ends; returns once nothing is queued, in flight or backing off.
async fn drive(shared: Arc<Shared>) {
    loop {
        let next = {
            let mut state = shared.lock();
            let now = now();
            state.fanout.handle_timeout(now);
            while let Some(call) = state.fanout.poll_call(now) {
                tokio::spawn(perform(shared.clone(), call));
            }
            if state.fanout.is_idle() {
                state.driven = false;
                return;
            }
            state.fanout.poll_timeout()
        };
        tokio::select! {
            _ = shared.wake.notified() => {}
            _ = crate::time::sleep_until_due(next) => {}
        }
    }
}

/// Makes one call within its deadline and hands the outcome back.
async fn perform(shared: Arc<Shared>, call: Call) {
    let result = tokio::time::timeout_at(
        Instant::from_std(call.deadline),
        request(&shared, &call.api, &call.task),
    )
    .await
    .unwrap_or(Err(CallError::Timeout));
    if let Err(e) = &result {
        tracing::debug!("calling {}: {e}", call.api);
    }
    let outcome = Outcome::of(&result);
    shared.lock().fanout.handle_outcome(now(), call, outcome);
    shared.wake.notify_one();
}

/// The XML-RPC call that tells a node `task`.
async fn request(shared: &Shared, api: &str, task: &Task) -> Result<(), CallError> {
    let master = Value::from("/master");
    match task {
        Task::PublisherUpdate { topic, publishers } => {
            let publishers =
                Value::Array(publishers.iter().map(|p| Value::from(p.as_str())).collect());
            let params = vec![master, Value::from(topic.as_str()), publishers];
            shared.client.call(api, "publisherUpdate", params).await?;
        }
        Task::ParamUpdate {
            caller_id,
            key,
            value,
        } => {
            let params = vec![master, Value::from(key.as_str()), value.clone()];
            let reply = shared.client.call(api, "paramUpdate", params).await?;
            if matches!(&reply, Value::Array(r) if r.first() == Some(&Value::Int(-1))) {
                (shared.on_rejected)(caller_id, api, key);
            }
        }
        Task::Shutdown { message } => {
            let params = vec![master, Value::from(message.as_str())];
            shared.client.call(api, "shutdown", params).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xmlrpc::{Fault, Handler, HandlerFuture, XmlRpcServer};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn pacing() -> Pacing {
        Pacing {
            first_deadline: Duration::from_millis(200),
            congested_floor: Duration::from_millis(25),
            congested_unmeasured: Duration::from_millis(50),
            retry_deadline: Duration::from_millis(400),
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(400),
            give_up_after: 3,
            first_in_flight: 4,
            retry_in_flight: 2,
        }
    }

    /// A node API that counts its calls and answers each with `reply`.
    struct Node {
        calls: Arc<AtomicUsize>,
        reply: Result<Value, Fault>,
    }

    impl Handler for Node {
        fn call(&self, _: &str, _: Vec<Value>) -> HandlerFuture {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let reply = self.reply.clone();
            Box::pin(async move { reply })
        }
    }

    async fn node_api(reply: Result<Value, Fault>) -> (XmlRpcServer, String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = format!("http://{}/", listener.local_addr().unwrap());
        let calls = Arc::new(AtomicUsize::new(0));
        let node = Node {
            calls: calls.clone(),
            reply,
        };
        (
            XmlRpcServer::serve(listener, Arc::new(node)).unwrap(),
            api,
            calls,
        )
    }

    /// Waits (at most 10 s, polling) until `done` holds.
    async fn until(done: impl Fn() -> bool) -> bool {
        for _ in 0..1000 {
            if done() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        done()
    }

    fn driven(notifier: &Notifier) -> bool {
        notifier.shared.lock().driven
    }

    /// The driver performs each kind of call, reads a paramUpdate's -1 as "not
    /// subscribed", and rests once the fan-out is idle.
    #[tokio::test]
    async fn the_driver_performs_calls_and_rests_when_idle() {
        let not_subscribed = Value::Array(vec![Value::Int(-1), Value::from(""), Value::Int(0)]);
        let (_server, api, calls) = node_api(Ok(not_subscribed)).await;
        let rejected = Arc::new(Mutex::new(Vec::new()));
        let on_rejected: Rejected = {
            let rejected = rejected.clone();
            Arc::new(move |caller: &str, api: &str, key: &str| {
                rejected
                    .lock()
                    .unwrap()
                    .push(format!("{caller} {api} {key}"));
            })
        };
        let notifier = Notifier::new(pacing(), on_rejected, &Default::default());
        let publishers = Arc::new(vec!["http://p:1/".to_string()]);
        let topic = "/t".to_string();
        notifier.queue(&api, Task::PublisherUpdate { topic, publishers });
        let (caller_id, key, value) = ("/n".to_string(), "/k".to_string(), Value::Int(1));
        notifier.queue(
            &api,
            Task::ParamUpdate {
                caller_id,
                key,
                value,
            },
        );
        let message = "bye".to_string();
        notifier.queue(&api, Task::Shutdown { message });
        assert!(
            until(|| !driven(&notifier)).await,
            "the driver never rested"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(*rejected.lock().unwrap(), [format!("/n {api} /k")]);
        assert_eq!((notifier.failures(&api), notifier.pending(&api)), (0, 0));
    }

    /// A fault is an answer (called once, no failure); a listener that never answers is
    /// timed out by the driver, retried, and given up on.
    #[tokio::test]
    async fn faults_are_answers_and_silence_times_out() {
        let (_server, refusing, calls) = node_api(Err(Fault::new(1, "no such topic"))).await;
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let silent = format!("http://{}/", silent.local_addr().unwrap());
        let notifier = Notifier::new(
            pacing(),
            Arc::new(|_: &str, _: &str, _: &str| {}),
            &Default::default(),
        );
        for api in [&refusing, &silent] {
            let publishers = Arc::new(Vec::new());
            notifier.queue(
                api,
                Task::PublisherUpdate {
                    topic: "/t".into(),
                    publishers,
                },
            );
        }
        assert!(
            until(|| !driven(&notifier)).await,
            "the driver never rested"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(notifier.failures(&refusing), 0);
        assert_eq!(notifier.failures(&silent), pacing().give_up_after);
        assert_eq!(notifier.pending(&silent), 0);
    }
}
