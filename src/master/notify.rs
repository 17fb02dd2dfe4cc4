//! Calls the master makes to nodes (publisherUpdate, paramUpdate, shutdown): one FIFO queue
//! per node API, so a node sees its updates in order, while nodes are served concurrently
//! and a slow node delays nobody else.
//!
//! A queue holds what the node has yet to learn, not every message ever meant for it: a
//! publisherUpdate carries the topic's full publisher list, so a newer one replaces a
//! pending one for the same topic, and likewise a paramUpdate for the same key. A node that
//! never answers thus costs one pending update per topic and key, and at most
//! [`MAX_PENDING_PER_NODE`] of those (the oldest dropped beyond it).
//!
//! A fan-out to thousands of subscribers whose APIs are dead ports or tarpits must neither
//! exhaust the master's descriptors nor keep the live subscribers waiting, so calls run in
//! three lanes, each with its own bound on calls in flight ([`Pacing`]):
//! - the *known lane* carries calls to APIs that have answered before and not failed since,
//!   so a node that is there never waits behind thousands of APIs never tried;
//! - the *first lane* carries first calls to APIs never tried, with a short deadline: a
//!   node answers publisherUpdate in milliseconds, and a tarpit then holds a slot for no
//!   longer than that. While more calls wait for this lane than it has slots, the deadline
//!   shrinks to a few times the slowest recent answer (RTO-style, with a floor), so one
//!   round through thousands of never-tried tarpits takes a fraction of a second and a
//!   live node queued behind them still hears within one;
//! - a node that answered before and missed a deadline retries in the known lane (twice at
//!   most, with the retry deadline): a busy machine's live node must not queue behind
//!   thousands of dead APIs;
//! - the *retry lane* carries calls to APIs whose last call failed, after a back-off that
//!   doubles per failure, with a longer deadline (a node that was merely slow gets its
//!   update); after [`Pacing::give_up_after`] failures in a row the API's pending updates
//!   are dropped, and each later one is tried once per longest back-off.
//!
//! A call that fails because the master itself is out of descriptors is not the node's
//! fault: it waits a moment and is tried again, never dropped.
//!
//! One file, just past 500 lines: the queues, the two lanes and their deadlines are one
//! scheduler whose fairness is argued together.

use crate::xmlrpc::{CallError, Value, XmlRpcClient};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Task {
    PublisherUpdate {
        topic: String,
        /// Shared by every subscriber of one fan-out.
        publishers: Arc<Vec<String>>,
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
    /// Whether `newer` makes this task pointless: it tells the node the same thing afresh.
    fn superseded_by(&self, newer: &Task) -> bool {
        match (self, newer) {
            (Task::PublisherUpdate { topic: a, .. }, Task::PublisherUpdate { topic: b, .. }) => {
                a == b
            }
            (
                Task::ParamUpdate {
                    caller_id: a,
                    key: k,
                    ..
                },
                Task::ParamUpdate {
                    caller_id: b,
                    key: l,
                    ..
                },
            ) => a == b && k == l,
            (Task::Shutdown { .. }, Task::Shutdown { .. }) => true,
            _ => false,
        }
    }
}

/// Called when a node answers paramUpdate with -1 (not subscribed): (caller_id, api, key).
pub(super) type Rejected = Arc<dyn Fn(&str, &str, &str) + Send + Sync>;

/// Distinct updates waiting for one node.
pub(super) const MAX_PENDING_PER_NODE: usize = 1000;

/// APIs whose standing is remembered after their queue empties (a failing one must not be
/// tried in the first lane again, a known one must not wait there); beyond this, idle ones
/// are forgotten.
const MAX_REMEMBERED_APIS: usize = 100_000;

/// How long to wait before trying again when the master is out of descriptors.
const DESCRIPTOR_WAIT: Duration = Duration::from_millis(100);

/// Answers remembered for the congested first lane's deadline.
const ANSWERS_REMEMBERED: usize = 32;

/// Failures in a row after which a node that answered before retries in the retry lane,
/// not the known lane.
const KNOWN_RETRIES: u32 = 2;

/// A congested first lane waits this many times the slowest recent answer.
const ANSWER_MARGIN: u32 = 4;

/// Deadlines, back-off and bounds of the master's calls to nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Pacing {
    /// Deadline of a call in the first lane (connect, request and answer), and of the
    /// known lane.
    pub first_deadline: Duration,
    /// The shortest first-lane deadline when the lane is congested.
    pub congested_floor: Duration,
    /// The congested first lane's deadline before the master has seen any answer.
    pub congested_unmeasured: Duration,
    /// Deadline of a call in the retry lane.
    pub retry_deadline: Duration,
    /// The wait after the first failure; it doubles with each further one.
    pub backoff: Duration,
    /// The longest wait between tries.
    pub max_backoff: Duration,
    /// Failures in a row after which an API's pending updates are dropped.
    pub give_up_after: u32,
    /// Calls in flight in the first lane.
    pub first_in_flight: usize,
    /// Calls in flight in the retry lane, and in the known lane.
    pub retry_in_flight: usize,
}

impl Pacing {
    /// Lanes sized to this process's descriptor limit: a quarter of it for the first
    /// lane and a sixteenth each for the known and retry lanes (16 to 1024, 4 to 256),
    /// leaving the rest to the master's own server (which caps its connections at 512).
    pub(super) fn for_this_process() -> Pacing {
        let limit = crate::connections::descriptor_limit().unwrap_or(1024);
        Pacing {
            first_deadline: Duration::from_millis(250),
            congested_floor: Duration::from_millis(25),
            congested_unmeasured: Duration::from_millis(50),
            retry_deadline: Duration::from_secs(2),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            give_up_after: 6,
            first_in_flight: (limit / 4).clamp(16, 1024),
            retry_in_flight: (limit / 16).clamp(4, 256),
        }
    }

    /// The first lane's deadline while more calls wait for it than it has slots:
    /// [`ANSWER_MARGIN`] times the slowest recent answer, within `congested_floor` and
    /// `first_deadline`. A node slower than that is not lost: it gets its update from the
    /// retry lane.
    fn congested_deadline(&self, slowest_answer: Option<Duration>) -> Duration {
        slowest_answer
            .map_or(self.congested_unmeasured, |t| {
                t.saturating_mul(ANSWER_MARGIN)
            })
            .clamp(
                self.congested_floor,
                self.first_deadline.max(self.congested_floor),
            )
    }

    /// The wait before the next try after `failures` failures in a row.
    fn backoff_after(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let doublings = (failures - 1).min(16);
        self.backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff)
    }
}

/// Whether a failed call still had the node answer (with a fault, or a reply that was not
/// XML-RPC): it is there, and asking again would get the same answer.
fn is_answer(error: &CallError) -> bool {
    matches!(
        error,
        CallError::Fault(_) | CallError::Http(_) | CallError::Parse(_)
    )
}

/// Whether a count is 1, 10, 100, ...: when a growing count is worth a line.
fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
}

/// One node API: what it has yet to learn, and how its calls have gone.
#[derive(Default)]
struct Api {
    tasks: VecDeque<Task>,
    dropped: u64,
    /// Calls failed in a row.
    failures: u32,
    /// It has answered a call (a success or a fault): a node that is there.
    answered: bool,
    /// When the last call failed.
    failed_at: Option<Instant>,
    /// A worker serves this queue.
    working: bool,
}

impl Api {
    /// Adds `task` unless a queued one is superseded by it, which takes its place.
    fn merge(&mut self, api: &str, task: Task) {
        if let Some(queued) = self.tasks.iter_mut().find(|t| t.superseded_by(&task)) {
            *queued = task;
            return;
        }
        if self.tasks.len() >= MAX_PENDING_PER_NODE {
            self.tasks.pop_front();
            self.dropped += 1;
            if self.dropped == 1 {
                tracing::warn!(
                    "{api} is not taking the master's updates; dropping the oldest of {MAX_PENDING_PER_NODE}"
                );
            }
        }
        self.tasks.push_back(task);
    }

    /// Puts a task that was not delivered back in front, unless a newer one for the same
    /// subject arrived meanwhile.
    fn put_back(&mut self, task: Task) {
        if !self.tasks.iter().any(|newer| task.superseded_by(newer)) {
            self.tasks.push_front(task);
        }
    }
}

/// How long the latest answers took: what a live node needs, seen by this master.
#[derive(Default)]
struct AnswerTimes {
    recent: VecDeque<Duration>,
}

impl AnswerTimes {
    fn record(&mut self, took: Duration) {
        if self.recent.len() == ANSWERS_REMEMBERED {
            self.recent.pop_front();
        }
        self.recent.push_back(took);
    }

    fn slowest(&self) -> Option<Duration> {
        self.recent.iter().max().copied()
    }
}

#[derive(Clone)]
pub(super) struct Notifier {
    client: XmlRpcClient,
    pacing: Pacing,
    /// An API's entry has `working` set while its worker runs; the worker clears it when it
    /// finds the queue empty, under the same lock, so a task is never left without a worker.
    apis: Arc<Mutex<HashMap<String, Api>>>,
    first_lane: Arc<Semaphore>,
    /// Calls waiting for the first lane or in flight there: more than its slots is
    /// congestion.
    first_lane_demand: Arc<AtomicUsize>,
    answer_times: Arc<Mutex<AnswerTimes>>,
    /// APIs that answered before and have not failed since: never behind new ones.
    known_lane: Arc<Semaphore>,
    retry_lane: Arc<Semaphore>,
    /// APIs given up on so far.
    gave_up: Arc<AtomicU64>,
    on_rejected: Rejected,
}

impl Notifier {
    pub(super) fn new(pacing: Pacing, on_rejected: Rejected) -> Notifier {
        // The deadlines are per call; the client's own are only a backstop.
        let client = XmlRpcClient::unpooled(pacing.retry_deadline, pacing.retry_deadline);
        Notifier {
            client,
            pacing,
            apis: Arc::default(),
            first_lane: Arc::new(Semaphore::new(pacing.first_in_flight.max(1))),
            first_lane_demand: Arc::default(),
            answer_times: Arc::default(),
            known_lane: Arc::new(Semaphore::new(pacing.retry_in_flight.max(1))),
            retry_lane: Arc::new(Semaphore::new(pacing.retry_in_flight.max(1))),
            gave_up: Arc::default(),
            on_rejected,
        }
    }

    fn apis(&self) -> std::sync::MutexGuard<'_, HashMap<String, Api>> {
        self.apis.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `task` for the node at `api`, merged with a pending one it supersedes.
    pub(super) fn queue(&self, api: &str, task: Task) {
        let mut apis = self.apis();
        if apis.len() >= MAX_REMEMBERED_APIS && !apis.contains_key(api) {
            apis.retain(|_, a| a.working);
        }
        let entry = apis.entry(api.to_string()).or_default();
        entry.merge(api, task);
        if !entry.working {
            entry.working = true;
            tokio::spawn(self.clone().work(api.to_string()));
        }
    }

    #[cfg(test)]
    /// Updates waiting for the node at `api`.
    pub(super) fn pending(&self, api: &str) -> usize {
        self.apis().get(api).map_or(0, |a| a.tasks.len())
    }

    #[cfg(test)]
    /// Calls to `api` that failed in a row.
    pub(super) fn failures(&self, api: &str) -> u32 {
        self.apis().get(api).map_or(0, |a| a.failures)
    }

    async fn work(self, api: String) {
        loop {
            let next = {
                let mut apis = self.apis();
                let Some(entry) = apis.get_mut(&api) else {
                    return;
                };
                if entry.tasks.is_empty() {
                    // The entry stays: its standing decides the lane of its next update.
                    entry.working = false;
                    return;
                }
                let due = entry
                    .failed_at
                    .map(|at| at + self.pacing.backoff_after(entry.failures));
                match due.filter(|due| *due > Instant::now()) {
                    Some(due) => Err(due),
                    None => Ok((entry.tasks.pop_front(), entry.failures, entry.answered)),
                }
            };
            let (task, failures, answered) = match next {
                Err(due) => {
                    // Newer tasks may merge into the queue meanwhile: look again after.
                    tokio::time::sleep_until(due).await;
                    continue;
                }
                Ok((Some(task), failures, answered)) => (task, failures, answered),
                Ok((None, ..)) => continue,
            };
            let (lane, deadline) = if failures > 0 && answered && failures <= KNOWN_RETRIES {
                // A node that answered before and then missed a deadline is most likely
                // there and slow (a busy machine): it retries beside the other known
                // nodes, with the retry lane's patience, rather than queueing there behind
                // thousands of APIs that never answered.
                (&self.known_lane, self.pacing.retry_deadline)
            } else if failures > 0 {
                (&self.retry_lane, self.pacing.retry_deadline)
            } else if answered {
                (&self.known_lane, self.pacing.first_deadline)
            } else {
                match self.first_call(&api, &task).await {
                    Some(outcome) => {
                        self.settle(&api, task, outcome).await;
                        continue;
                    }
                    None => return,
                }
            };
            let Ok(_slot) = lane.acquire().await else {
                return;
            };
            let outcome = self.call_within(deadline, &api, &task).await;
            drop(_slot);
            self.settle(&api, task, outcome).await;
        }
    }

    /// Calls `api` within `deadline`, remembering how long an answer took.
    async fn call_within(
        &self,
        deadline: Duration,
        api: &str,
        task: &Task,
    ) -> Result<(), CallError> {
        let started = Instant::now();
        let outcome = tokio::time::timeout(deadline, self.run(api, task))
            .await
            .unwrap_or(Err(CallError::Timeout));
        if outcome.as_ref().err().is_none_or(is_answer) {
            let mut times = self.answer_times.lock().unwrap_or_else(|e| e.into_inner());
            times.record(started.elapsed());
        }
        outcome
    }

    /// A first call to a never-tried API in the first lane, with the deadline that the
    /// lane's congestion sets once a slot is granted; `None` if the lane is closed.
    async fn first_call(&self, api: &str, task: &Task) -> Option<Result<(), CallError>> {
        /// Counts a call as first-lane demand from queueing until it ends.
        struct Demand<'a>(&'a AtomicUsize);
        impl Drop for Demand<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.first_lane_demand.fetch_add(1, Ordering::Relaxed);
        let _demand = Demand(&self.first_lane_demand);
        let _slot = self.first_lane.acquire().await.ok()?;
        let congested =
            self.first_lane_demand.load(Ordering::Relaxed) > self.pacing.first_in_flight;
        let deadline = if congested {
            let slowest = self
                .answer_times
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .slowest();
            self.pacing.congested_deadline(slowest)
        } else {
            self.pacing.first_deadline
        };
        Some(self.call_within(deadline, api, task).await)
    }

    /// Records how a call went: an answer (a success, or a fault: the node is there) clears
    /// the API's failures; no answer (unreachable, timed out) puts the task back for a
    /// retry, or drops the queue once the API has failed too often.
    async fn settle(&self, api: &str, task: Task, outcome: Result<(), CallError>) {
        let error = match outcome {
            // Not a URI anyone can call: no retry will change that.
            Err(CallError::InvalidUri(uri)) => {
                tracing::debug!("the master cannot call {uri}: not an http:// URI");
                return;
            }
            Err(CallError::OutOfDescriptors) => {
                tracing::debug!("out of descriptors calling {api}; trying again shortly");
                if let Some(entry) = self.apis().get_mut(api) {
                    entry.put_back(task);
                }
                tokio::time::sleep(DESCRIPTOR_WAIT).await;
                return;
            }
            Err(e) if !is_answer(&e) => e,
            answered => {
                if let Err(e) = answered {
                    tracing::debug!("{api} answered the master's call with {e}");
                }
                if let Some(entry) = self.apis().get_mut(api) {
                    entry.answered = true;
                    entry.failures = 0;
                    entry.failed_at = None;
                }
                return;
            }
        };
        let mut apis = self.apis();
        let Some(entry) = apis.get_mut(api) else {
            return;
        };
        entry.failures = entry.failures.saturating_add(1);
        entry.failed_at = Some(Instant::now());
        if entry.failures < self.pacing.give_up_after {
            tracing::debug!("{api}: {error}; trying again later");
            entry.put_back(task);
        } else {
            if entry.failures == self.pacing.give_up_after {
                // Said at 1, 10, 100, ... APIs: thousands of dead subscribers must not
                // become thousands of lines.
                let gave_up = self.gave_up.fetch_add(1, Ordering::Relaxed) + 1;
                if is_power_of_ten(gave_up) {
                    tracing::warn!(
                        "{gave_up} node API(s) stopped answering the master; their updates are dropped (latest: {api}, {error})"
                    );
                } else {
                    tracing::debug!(
                        "{api} failed {} calls in a row: dropping its updates",
                        entry.failures
                    );
                }
            }
            entry.dropped += entry.tasks.len() as u64 + 1;
            entry.tasks.clear();
        }
    }

    async fn run(&self, api: &str, task: &Task) -> Result<(), CallError> {
        let master = Value::from("/master");
        match task {
            Task::PublisherUpdate { topic, publishers } => {
                let publishers =
                    Value::Array(publishers.iter().map(|p| Value::from(p.as_str())).collect());
                let params = vec![master, Value::from(topic.as_str()), publishers];
                self.client.call(api, "publisherUpdate", params).await?;
            }
            Task::ParamUpdate {
                caller_id,
                key,
                value,
            } => {
                let params = vec![master, Value::from(key.as_str()), value.clone()];
                let reply = self.client.call(api, "paramUpdate", params).await?;
                if matches!(&reply, Value::Array(r) if r.first() == Some(&Value::Int(-1))) {
                    (self.on_rejected)(caller_id, api, key);
                }
            }
            Task::Shutdown { message } => {
                let params = vec![master, Value::from(message.as_str())];
                self.client.call(api, "shutdown", params).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn update(topic: &str, publishers: Vec<String>) -> Task {
        Task::PublisherUpdate {
            topic: topic.into(),
            publishers: Arc::new(publishers),
        }
    }

    fn notifier(pacing: Pacing) -> Notifier {
        Notifier::new(pacing, Arc::new(|_: &str, _: &str, _: &str| {}))
    }

    /// A node that never answers: its updates merge per topic and stay bounded.
    #[tokio::test]
    async fn updates_for_a_silent_node_merge_and_stay_bounded() {
        // Connections wait in the backlog: calls neither fail nor finish in time.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = format!("http://{}/", silent.local_addr().unwrap());
        let notifier = notifier(Pacing {
            first_deadline: Duration::from_secs(30),
            ..pacing()
        });
        let mut publishers = Vec::new();
        for i in 0..1500 {
            publishers.push(format!("http://host:{i}/"));
            notifier.queue(&api, update("/crowded", publishers.clone()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(notifier.pending(&api) <= 1, "{}", notifier.pending(&api));
        for i in 0..1500 {
            notifier.queue(&api, update(&format!("/t{i}"), vec![]));
        }
        assert_eq!(notifier.pending(&api), MAX_PENDING_PER_NODE);
    }

    #[test]
    fn powers_of_ten_are_when_a_count_is_said() {
        let said: Vec<u64> = (0..=2000).filter(|&n| is_power_of_ten(n)).collect();
        assert_eq!(said, [1, 10, 100, 1000]);
    }

    #[test]
    fn backoff_doubles_to_its_ceiling_and_never_overflows() {
        let p = pacing();
        let waits: Vec<u128> = [0, 1, 2, 3, 4, u32::MAX]
            .iter()
            .map(|&f| p.backoff_after(f).as_millis())
            .collect();
        assert_eq!(waits, [0, 100, 200, 400, 400, 400]);
        let real = Pacing::for_this_process();
        assert!(real.first_in_flight >= 16 && real.retry_in_flight >= 4);
        assert!(real.first_deadline < real.retry_deadline);
    }

    #[test]
    fn a_congested_first_lane_waits_a_few_times_the_slowest_answer_within_bounds() {
        let p = pacing();
        let ms = |m| Duration::from_millis(m);
        let deadlines: Vec<u128> = [None, Some(ms(1)), Some(ms(10)), Some(ms(30)), Some(ms(900))]
            .into_iter()
            .map(|slowest| p.congested_deadline(slowest).as_millis())
            .collect();
        assert_eq!(deadlines, [50, 25, 40, 120, 200]);
        let mut times = AnswerTimes::default();
        for m in (1..=100).rev() {
            times.record(ms(m));
        }
        // Only the latest answers count: the slow ones from long ago are forgotten.
        assert_eq!(times.slowest(), Some(ms(ANSWERS_REMEMBERED as u64)));
    }

    /// A node API answering every call with `[1, "", 0]` after `delay`, counting calls.
    struct SlowNode {
        delay: Duration,
        calls: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl crate::xmlrpc::Handler for SlowNode {
        fn call(&self, _: &str, _: Vec<Value>) -> crate::xmlrpc::HandlerFuture {
            let (delay, calls) = (self.delay, self.calls.clone());
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(Value::Array(vec![
                    Value::Int(1),
                    Value::from(""),
                    Value::Int(0),
                ]))
            })
        }
    }

    async fn node_api(
        delay: Duration,
    ) -> (
        crate::xmlrpc::XmlRpcServer,
        String,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = format!("http://{}/", listener.local_addr().unwrap());
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let handler = Arc::new(SlowNode {
            delay,
            calls: calls.clone(),
        });
        let server = crate::xmlrpc::XmlRpcServer::serve(listener, handler).unwrap();
        (server, api, calls)
    }

    /// How long after `start` a node counted its first answered call (at most `limit`).
    async fn first_call_after(
        start: Instant,
        calls: &std::sync::atomic::AtomicUsize,
        limit: Duration,
    ) -> Duration {
        while calls.load(std::sync::atomic::Ordering::SeqCst) == 0 && start.elapsed() < limit {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        start.elapsed()
    }

    /// A node that answers with a fault is there: its update is not retried.
    #[tokio::test]
    async fn a_fault_is_an_answer_not_a_failure() {
        struct Refuses(Arc<std::sync::atomic::AtomicUsize>);
        impl crate::xmlrpc::Handler for Refuses {
            fn call(&self, _: &str, _: Vec<Value>) -> crate::xmlrpc::HandlerFuture {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Box::pin(async { Err(crate::xmlrpc::Fault::new(1, "no such topic")) })
            }
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = format!("http://{}/", listener.local_addr().unwrap());
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let _server =
            crate::xmlrpc::XmlRpcServer::serve(listener, Arc::new(Refuses(calls.clone()))).unwrap();
        let notifier = notifier(pacing());
        notifier.queue(&api, update("/t", vec![]));
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!((notifier.failures(&api), notifier.pending(&api)), (0, 0));
    }

    /// A node slower than the first deadline still gets its update, from the retry lane.
    #[tokio::test]
    async fn a_slow_node_gets_its_update_on_the_retry() {
        let (_server, api, answered) = node_api(Duration::from_millis(300)).await;
        let notifier = notifier(pacing());
        notifier.queue(&api, update("/t", vec!["http://a:1/".into()]));
        first_call_after(Instant::now(), &answered, Duration::from_secs(5)).await;
        // The first try answers after its deadline (counted by the server, not by us); the
        // retry is in time and clears the failure.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(answered.load(std::sync::atomic::Ordering::SeqCst) >= 1);
        assert_eq!(notifier.failures(&api), 0);
        assert_eq!(notifier.pending(&api), 0);
    }

    /// The worst case of a first fan-out: a live node never tried by the master, queued
    /// behind hundreds of never-tried tarpits. With a fixed 250 ms deadline the round would
    /// take 400 × 250 ms / 20 = 5 s; the congested lane's deadline follows the answers the
    /// master has seen (milliseconds here, so its 25 ms floor: 20 rounds, 0.5 s), so the
    /// live node hears in about 0.8 s. The bar, 4.5 s, is under the fixed deadline's round
    /// with margin for a loaded machine: beside the other unit tests with two busy loops on
    /// both cores it took 2.7 s (the master's fan-out tells the newest registrations first,
    /// so this order is the worst case, not the common one).
    #[tokio::test]
    async fn a_never_tried_live_node_behind_never_tried_tarpits_hears_long_before_a_fixed_round() {
        let mut tarpits = Vec::new();
        for _ in 0..400 {
            tarpits.push(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let notifier = notifier(Pacing {
            first_deadline: Duration::from_millis(250),
            first_in_flight: 20,
            ..pacing()
        });
        // A node the master told something before: what an answer takes here.
        let (_known, known_api, known_answered) = node_api(Duration::ZERO).await;
        notifier.queue(&known_api, update("/rosout", vec!["http://p0:1/".into()]));
        first_call_after(Instant::now(), &known_answered, Duration::from_secs(5)).await;
        let (_server, live, answered) = node_api(Duration::ZERO).await;
        let start = Instant::now();
        for tarpit in &tarpits {
            let api = format!("http://{}/", tarpit.local_addr().unwrap());
            notifier.queue(&api, update("/t", vec!["http://p1:1/".into()]));
        }
        notifier.queue(&live, update("/t", vec!["http://p1:1/".into()]));
        let took = first_call_after(start, &answered, Duration::from_secs(10)).await;
        assert!(
            took < Duration::from_millis(4500),
            "the live node waited {took:?}"
        );
        assert_eq!(notifier.failures(&live), 0);
    }

    /// Tarpits fill the first lane once, then wait in the retry lane: a live node queued
    /// behind hundreds of them is served at once by the next fan-out, and the tarpits'
    /// updates are dropped after `give_up_after` failures.
    #[tokio::test]
    async fn failing_apis_move_to_the_retry_lane_and_leave_the_first_lane_to_live_nodes() {
        let mut tarpits = Vec::new();
        for _ in 0..200 {
            tarpits.push(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let tarpit_apis: Vec<String> = tarpits
            .iter()
            .map(|l| format!("http://{}/", l.local_addr().unwrap()))
            .collect();
        let notifier = notifier(Pacing {
            first_in_flight: 50,
            retry_in_flight: 100,
            ..pacing()
        });
        for api in &tarpit_apis {
            notifier.queue(api, update("/t", vec!["http://p1:1/".into()]));
        }
        // 200 tarpits, 50 at a time, 200 ms each: the first round takes about 0.8 s.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(tarpit_apis.iter().all(|a| notifier.failures(a) >= 1));
        let (_server, live, answered) = node_api(Duration::ZERO).await;
        let start = Instant::now();
        for api in tarpit_apis.iter().chain([&live]) {
            notifier.queue(api, update("/t", vec!["http://p2:1/".into()]));
        }
        let took = first_call_after(start, &answered, Duration::from_secs(5)).await;
        assert!(
            took < Duration::from_millis(2500),
            "the live node waited {took:?}"
        );
        // The tarpits give up after three failures (rounds of about 0.8 s, 100 at a time
        // and 400 ms each); nothing stays queued for them.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let pending: usize = tarpit_apis.iter().map(|a| notifier.pending(a)).sum();
        assert_eq!(pending, 0);
        assert!(tarpit_apis
            .iter()
            .all(|a| notifier.failures(a) >= pacing().give_up_after));
    }

    /// A known node that missed one deadline (a busy machine) is not queued behind a retry
    /// lane full of tarpits: its retry goes beside the known nodes. Behind 100 tarpits, 2
    /// at a time and 400 ms each, it would wait 20 s.
    #[tokio::test]
    async fn a_known_node_that_missed_a_deadline_is_not_queued_behind_dead_apis() {
        let mut tarpits = Vec::new();
        for _ in 0..100 {
            tarpits.push(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let notifier = notifier(Pacing {
            give_up_after: 50,
            ..pacing()
        });
        let failed_long_ago = Some(Instant::now() - Duration::from_secs(10));
        let mark = |api: &str, answered: bool| {
            let mut apis = notifier.apis();
            let entry = apis.entry(api.to_string()).or_default();
            entry.failures = 1;
            entry.failed_at = failed_long_ago;
            entry.answered = answered;
        };
        for tarpit in &tarpits {
            let api = format!("http://{}/", tarpit.local_addr().unwrap());
            mark(&api, false);
            notifier.queue(&api, update("/t", vec!["http://p1:1/".into()]));
        }
        let (_server, live, answered) = node_api(Duration::ZERO).await;
        mark(&live, true);
        let start = Instant::now();
        notifier.queue(&live, update("/t", vec!["http://p1:1/".into()]));
        let took = first_call_after(start, &answered, Duration::from_secs(10)).await;
        assert!(
            took < Duration::from_secs(2),
            "the live node waited {took:?}"
        );
        // Its answer clears the failure it was marked with: the call reached the node
        // above, and the notifier reads the reply after (at once on an idle machine, but
        // not before the assertion on a loaded one).
        let answered_by = Instant::now() + Duration::from_secs(5);
        while notifier.failures(&live) != 0 && Instant::now() < answered_by {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(notifier.failures(&live), 0);
    }
}
