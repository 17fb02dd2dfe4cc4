//! The master's calls to nodes (publisherUpdate, paramUpdate, shutdown) as a pure object:
//! [`Fanout`] decides which call goes next, on which lane and with which deadline, and what
//! an outcome means; it performs no I/O and reads no clock. Its driver
//! ([`super::notify`]) performs the calls and feeds their outcomes back.
//!
//! **Order.** One FIFO queue per node API, so a node sees its updates in order, while nodes
//! are served concurrently (at most one call in flight per API) and a slow node delays
//! nobody else.
//!
//! **Bounds.** A queue holds what the node has yet to learn, not every message ever meant
//! for it: a publisherUpdate carries the topic's full publisher list, so a newer one
//! replaces a pending one for the same topic, and likewise a paramUpdate for the same key.
//! A node that never answers thus costs one pending update per topic and key, and at most
//! [`MAX_PENDING_PER_NODE`] of those (the oldest dropped beyond it). At most
//! [`MAX_REMEMBERED_APIS`] idle APIs keep their standing.
//!
//! **Lanes.** A fan-out to thousands of subscribers whose APIs are dead ports or tarpits
//! must neither exhaust the master's descriptors nor keep the live subscribers waiting, so
//! calls run in three lanes, each with its own bound on calls in flight ([`Pacing`]):
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
//! fault: the API waits [`DESCRIPTOR_WAIT`] and its update is tried again, never dropped.
//!
//! **Use.** [`Fanout::queue`] what a node should learn; then, until it returns `None`, take
//! [`Fanout::poll_call`] and perform each call before its deadline; hand each outcome to
//! [`Fanout::handle_outcome`]; call [`Fanout::handle_timeout`] at [`Fanout::poll_timeout`].
//! Poll for calls again after any of these.

use crate::xmlrpc::{CallError, Value};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the master tells a node.
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

/// Distinct updates waiting for one node.
pub(super) const MAX_PENDING_PER_NODE: usize = 1000;

/// APIs whose standing is remembered after their queue empties (a failing one must not be
/// tried in the first lane again, a known one must not wait there); beyond this, idle ones
/// are forgotten.
pub(super) const MAX_REMEMBERED_APIS: usize = 100_000;

/// How long an API waits before its update is tried again when the master was out of
/// descriptors.
pub(super) const DESCRIPTOR_WAIT: Duration = Duration::from_millis(100);

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
    /// Lanes sized to a process allowed `descriptors` open files: a quarter of them for the
    /// first lane and a sixteenth each for the known and retry lanes (16 to 1024, 4 to
    /// 256), leaving the rest to the master's own server (which caps its connections at
    /// 512).
    pub(super) fn for_descriptor_limit(descriptors: usize) -> Pacing {
        Pacing {
            first_deadline: Duration::from_millis(250),
            congested_floor: Duration::from_millis(25),
            congested_unmeasured: Duration::from_millis(50),
            retry_deadline: Duration::from_secs(2),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            give_up_after: 6,
            first_in_flight: (descriptors / 4).clamp(16, 1024),
            retry_in_flight: (descriptors / 16).clamp(4, 256),
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

/// How a call went, as far as the schedule cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The node answered: a success, a fault or a reply that was not XML-RPC. It is
    /// there, and asking again would get the same answer.
    Answered,
    /// No answer before the deadline, or no connection: tried again after a back-off.
    NoAnswer,
    /// Not a URI anyone can call: no retry would change that, so the update is dropped.
    Uncallable,
    /// The master itself was out of descriptors: not the node's fault.
    OutOfDescriptors,
}

impl Outcome {
    /// What a call's result means for the schedule.
    pub(super) fn of<T>(result: &Result<T, CallError>) -> Outcome {
        match result {
            Ok(_) | Err(CallError::Fault(_) | CallError::Http(_) | CallError::Parse(_)) => {
                Outcome::Answered
            }
            Err(CallError::InvalidUri(_)) => Outcome::Uncallable,
            Err(CallError::OutOfDescriptors) => Outcome::OutOfDescriptors,
            Err(_) => Outcome::NoAnswer,
        }
    }
}

/// A call to perform: tell `api` about `task` before `deadline`, then hand the call back
/// with its outcome to [`Fanout::handle_outcome`].
#[derive(Debug)]
#[must_use = "a call taken from the fan-out holds a slot until its outcome is handled"]
pub(super) struct Call {
    id: u64,
    pub api: String,
    pub task: Task,
    pub deadline: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Known,
    First,
    Retry,
}

/// Where an API's queue stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Nothing to send, or nothing sendable until something is queued.
    Idle,
    /// Queued in a lane for a slot.
    Waiting(Lane),
    /// A call is in flight.
    Calling,
    /// Waiting out a back-off until then.
    BackingOff(Instant),
}

/// One node API: what it has yet to learn, and how its calls have gone.
#[derive(Debug)]
struct Api {
    tasks: VecDeque<Task>,
    dropped: u64,
    /// Calls failed in a row.
    failures: u32,
    /// It has answered a call (a success or a fault): a node that is there.
    answered: bool,
    /// When the last call failed.
    failed_at: Option<Instant>,
    standing: Standing,
}

impl Api {
    fn new() -> Api {
        Api {
            tasks: VecDeque::new(),
            dropped: 0,
            failures: 0,
            answered: false,
            failed_at: None,
            standing: Standing::Idle,
        }
    }

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

    /// The lane of this API's next call.
    fn lane(&self) -> Lane {
        match (self.failures, self.answered) {
            (0, false) => Lane::First,
            (0, true) => Lane::Known,
            // A node that answered before and then missed a deadline is most likely there
            // and slow (a busy machine): it retries beside the other known nodes rather
            // than queueing in the retry lane behind thousands of APIs that never answered.
            (f, true) if f <= KNOWN_RETRIES => Lane::Known,
            _ => Lane::Retry,
        }
    }
}

/// How long the latest answers took: what a live node needs, seen by this master.
#[derive(Debug, Default)]
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

/// One lane: the APIs waiting for a slot, in order, and the calls in flight.
#[derive(Debug)]
struct Slots {
    waiting: VecDeque<String>,
    in_flight: usize,
    slots: usize,
}

impl Slots {
    fn new(slots: usize) -> Slots {
        Slots {
            waiting: VecDeque::new(),
            in_flight: 0,
            slots: slots.max(1),
        }
    }
}

/// A call in flight: its lane, and when it started (an answer's time feeds the congested
/// first lane's deadline).
#[derive(Debug)]
struct InFlight {
    lane: Lane,
    started: Instant,
}

/// The master's calls to nodes: queues, lanes, deadlines and back-off (see the module's
/// documentation). No I/O and no clock: every method that needs the time takes `now`.
#[derive(Debug)]
pub(super) struct Fanout {
    pacing: Pacing,
    apis: HashMap<String, Api>,
    known: Slots,
    first: Slots,
    retry: Slots,
    in_flight: HashMap<u64, InFlight>,
    next_id: u64,
    answer_times: AnswerTimes,
    /// The ends of back-offs, earliest first; an entry whose API no longer backs off
    /// until then is stale and skipped.
    backoffs: BinaryHeap<Reverse<(Instant, String)>>,
    /// APIs given up on so far.
    gave_up: u64,
}

impl Fanout {
    pub(super) fn new(pacing: Pacing) -> Fanout {
        Fanout {
            pacing,
            apis: HashMap::new(),
            known: Slots::new(pacing.retry_in_flight),
            first: Slots::new(pacing.first_in_flight),
            retry: Slots::new(pacing.retry_in_flight),
            in_flight: HashMap::new(),
            next_id: 0,
            answer_times: AnswerTimes::default(),
            backoffs: BinaryHeap::new(),
            gave_up: 0,
        }
    }

    /// Queues `task` for the node at `api`, merged with a pending one it supersedes.
    /// Poll for calls after.
    pub(super) fn queue(&mut self, now: Instant, api: &str, task: Task) {
        if self.apis.len() >= MAX_REMEMBERED_APIS && !self.apis.contains_key(api) {
            self.apis.retain(|_, a| a.standing != Standing::Idle);
        }
        let entry = self.apis.entry(api.to_string()).or_insert_with(Api::new);
        entry.merge(api, task);
        if entry.standing == Standing::Idle {
            self.schedule(now, api);
        }
    }

    /// The next call to perform, if a lane has a free slot for an API with something to
    /// say. Poll again until `None`, and after every `queue`, `handle_outcome` and
    /// `handle_timeout`.
    #[must_use = "poll after queue, handle_outcome and handle_timeout, until None"]
    pub(super) fn poll_call(&mut self, now: Instant) -> Option<Call> {
        for lane in [Lane::Known, Lane::Retry, Lane::First] {
            while self.slots(lane).in_flight < self.slots(lane).slots {
                let Some(api) = self.slots_mut(lane).waiting.pop_front() else {
                    break;
                };
                if let Some(call) = self.start_call(now, lane, api) {
                    return Some(call);
                }
            }
        }
        None
    }

    /// When [`Fanout::handle_timeout`] must next be called: the end of the earliest
    /// back-off. Poll again after every other call.
    #[must_use = "call handle_timeout at this instant"]
    pub(super) fn poll_timeout(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, api))) = self.backoffs.peek() {
            if self.apis.get(api).map(|a| a.standing) == Some(Standing::BackingOff(*at)) {
                return Some(*at);
            }
            self.backoffs.pop();
        }
        None
    }

    /// Ends the back-offs due by `now`: their APIs queue for a lane again. Poll for calls
    /// after.
    pub(super) fn handle_timeout(&mut self, now: Instant) {
        while let Some(at) = self.poll_timeout() {
            if at > now {
                break;
            }
            if let Some(Reverse((_, api))) = self.backoffs.pop() {
                if let Some(entry) = self.apis.get_mut(&api) {
                    entry.standing = Standing::Idle;
                }
                self.schedule(now, &api);
            }
        }
    }

    /// Settles a call taken from [`Fanout::poll_call`]: an answer clears the API's
    /// failures; no answer puts the task back for a retry, or drops the API's queue once
    /// it has failed too often. Poll for calls after.
    pub(super) fn handle_outcome(&mut self, now: Instant, call: Call, outcome: Outcome) {
        let Some(flight) = self.in_flight.remove(&call.id) else {
            return;
        };
        let slots = self.slots_mut(flight.lane);
        slots.in_flight = slots.in_flight.saturating_sub(1);
        if outcome == Outcome::Answered {
            self.answer_times
                .record(now.saturating_duration_since(flight.started));
        }
        let Call { api, task, .. } = call;
        let Some(entry) = self.apis.get_mut(&api) else {
            return;
        };
        entry.standing = Standing::Idle;
        match outcome {
            Outcome::Answered => {
                entry.answered = true;
                entry.failures = 0;
                entry.failed_at = None;
            }
            Outcome::Uncallable => {
                tracing::debug!("the master cannot call {api}: not an http:// URI");
            }
            Outcome::OutOfDescriptors => {
                tracing::debug!("out of descriptors calling {api}; trying again shortly");
                entry.put_back(task);
                self.back_off(api, now + DESCRIPTOR_WAIT);
                return;
            }
            Outcome::NoAnswer => {
                entry.failures = entry.failures.saturating_add(1);
                entry.failed_at = Some(now);
                if entry.failures < self.pacing.give_up_after {
                    tracing::debug!("{api} did not answer; trying again later");
                    entry.put_back(task);
                } else {
                    if entry.failures == self.pacing.give_up_after {
                        self.gave_up += 1;
                        // Said at 1, 10, 100, ... APIs: thousands of dead subscribers must
                        // not become thousands of lines.
                        if is_power_of_ten(self.gave_up) {
                            tracing::warn!(
                                "{} node API(s) stopped answering the master; their updates are dropped (latest: {api})",
                                self.gave_up
                            );
                        }
                    }
                    entry.dropped += entry.tasks.len() as u64 + 1;
                    entry.tasks.clear();
                }
            }
        }
        self.schedule(now, &api);
    }

    /// Updates waiting for the node at `api` (not counting one in flight).
    #[cfg(test)]
    pub(super) fn pending(&self, api: &str) -> usize {
        self.apis.get(api).map_or(0, |a| a.tasks.len())
    }

    /// Calls to `api` that failed in a row.
    #[cfg(test)]
    pub(super) fn failures(&self, api: &str) -> u32 {
        self.apis.get(api).map_or(0, |a| a.failures)
    }

    /// Nothing queued, in flight or backing off: a driver may rest until the next `queue`.
    pub(super) fn is_idle(&mut self) -> bool {
        self.in_flight.is_empty()
            && [&self.known, &self.first, &self.retry]
                .iter()
                .all(|s| s.waiting.is_empty())
            && self.poll_timeout().is_none()
    }

    /// Puts an idle API with something to say in its lane, or in back-off until its
    /// next try is due.
    fn schedule(&mut self, now: Instant, api: &str) {
        let Some(entry) = self.apis.get_mut(api) else {
            return;
        };
        if entry.standing != Standing::Idle || entry.tasks.is_empty() {
            return;
        }
        let due = entry
            .failed_at
            .map(|at| at + self.pacing.backoff_after(entry.failures));
        if let Some(due) = due.filter(|due| *due > now) {
            self.back_off(api.to_string(), due);
            return;
        }
        let lane = entry.lane();
        entry.standing = Standing::Waiting(lane);
        self.slots_mut(lane).waiting.push_back(api.to_string());
    }

    fn back_off(&mut self, api: String, until: Instant) {
        if let Some(entry) = self.apis.get_mut(&api) {
            entry.standing = Standing::BackingOff(until);
            self.backoffs.push(Reverse((until, api)));
        }
    }

    /// Takes `api`'s next task as a call in `lane`, which has a free slot.
    fn start_call(&mut self, now: Instant, lane: Lane, api: String) -> Option<Call> {
        // The first lane's demand: calls waiting for it (this one among them) and in
        // flight. More than it has slots is congestion.
        let congested = self.first.waiting.len() + 1 + self.first.in_flight > self.first.slots;
        let entry = self.apis.get_mut(&api)?;
        if entry.standing != Standing::Waiting(lane) {
            return None;
        }
        let Some(task) = entry.tasks.pop_front() else {
            entry.standing = Standing::Idle;
            return None;
        };
        entry.standing = Standing::Calling;
        let p = &self.pacing;
        let patience = match lane {
            Lane::Known if entry.failures > 0 => p.retry_deadline,
            Lane::Known => p.first_deadline,
            Lane::Retry => p.retry_deadline,
            Lane::First if congested => p.congested_deadline(self.answer_times.slowest()),
            Lane::First => p.first_deadline,
        };
        let id = self.next_id;
        self.next_id += 1;
        self.in_flight.insert(id, InFlight { lane, started: now });
        self.slots_mut(lane).in_flight += 1;
        Some(Call {
            id,
            api,
            task,
            deadline: now + patience,
        })
    }

    fn slots(&self, lane: Lane) -> &Slots {
        match lane {
            Lane::Known => &self.known,
            Lane::First => &self.first,
            Lane::Retry => &self.retry,
        }
    }

    fn slots_mut(&mut self, lane: Lane) -> &mut Slots {
        match lane {
            Lane::Known => &mut self.known,
            Lane::First => &mut self.first,
            Lane::Retry => &mut self.retry,
        }
    }
}

/// Whether a count is 1, 10, 100, ...: when a growing count is worth a line.
fn is_power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn ms(m: u64) -> Duration {
        Duration::from_millis(m)
    }

    fn pacing() -> Pacing {
        Pacing {
            first_deadline: ms(200),
            congested_floor: ms(25),
            congested_unmeasured: ms(50),
            retry_deadline: ms(400),
            backoff: ms(100),
            max_backoff: ms(400),
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

    /// How a simulated node API takes a call.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Node {
        /// Answers after this long (too late, if the call's deadline comes first).
        Live(Duration),
        /// Answers with a fault at once.
        Faults,
        /// Refuses the connection: fails at once.
        Dead,
        /// Accepts and never answers: fails at the deadline.
        Tarpit,
    }

    /// A fan-out on a fake clock, with simulated nodes taking its calls.
    struct Sim {
        fanout: Fanout,
        now: Instant,
        nodes: HashMap<String, Node>,
        /// Calls in flight by when they end (and a sequence number: two end at once).
        ending: BTreeMap<(Instant, u64), (Call, Outcome)>,
        sequence: u64,
        /// When each API took each call it was given (a slow node takes one it answers
        /// after the deadline: the master stopped waiting, the node still heard).
        heard: HashMap<String, Vec<Instant>>,
        calls: usize,
    }

    impl Sim {
        fn new(pacing: Pacing) -> Sim {
            Sim {
                fanout: Fanout::new(pacing),
                // Any origin does: the fan-out only compares instants it was given.
                now: Instant::now(),
                nodes: HashMap::new(),
                ending: BTreeMap::new(),
                sequence: 0,
                heard: HashMap::new(),
                calls: 0,
            }
        }

        fn node(&mut self, api: &str, node: Node) {
            self.nodes.insert(api.to_string(), node);
        }

        fn queue(&mut self, api: &str, task: Task) {
            self.fanout.queue(self.now, api, task);
        }

        /// Performs every call the fan-out hands out now, deciding how each ends.
        fn start_calls(&mut self) {
            let now = self.now;
            while let Some(call) = self.fanout.poll_call(now) {
                self.calls += 1;
                let node = self.nodes.get(&call.api).copied().unwrap_or(Node::Dead);
                let (at, outcome, heard) = match node {
                    Node::Live(took) if now + took <= call.deadline => {
                        (now + took, Outcome::Answered, Some(now + took))
                    }
                    Node::Live(took) => (call.deadline, Outcome::NoAnswer, Some(now + took)),
                    Node::Faults => (now, Outcome::Answered, Some(now)),
                    Node::Dead => (now, Outcome::NoAnswer, None),
                    Node::Tarpit => (call.deadline, Outcome::NoAnswer, None),
                };
                if let Some(heard) = heard {
                    self.heard.entry(call.api.clone()).or_default().push(heard);
                }
                self.ending.insert((at, self.sequence), (call, outcome));
                self.sequence += 1;
            }
            let f = &self.fanout;
            for lane in [&f.known, &f.first, &f.retry] {
                assert!(lane.in_flight <= lane.slots, "{lane:?}");
            }
            assert_eq!(f.in_flight.len(), self.ending.len());
        }

        /// Moves the clock to the next event no later than `end` and handles it; false if
        /// there is none.
        fn step(&mut self, end: Instant) -> bool {
            self.start_calls();
            let next_end = self.ending.keys().next().map(|(at, _)| *at);
            let next = next_end.into_iter().chain(self.fanout.poll_timeout()).min();
            let Some(next) = next.filter(|next| *next <= end) else {
                return false;
            };
            self.now = self.now.max(next);
            while let Some(entry) = self.ending.first_entry() {
                if entry.key().0 > self.now {
                    break;
                }
                let (call, outcome) = entry.remove();
                self.fanout.handle_outcome(self.now, call, outcome);
            }
            self.fanout.handle_timeout(self.now);
            true
        }

        fn run_for(&mut self, span: Duration) {
            let end = self.now + span;
            while self.step(end) {}
            self.now = end;
            self.start_calls();
        }

        /// Runs until nothing is queued, in flight or backing off.
        fn run_until_idle(&mut self) {
            let end = self.now + Duration::from_secs(24 * 3600);
            while self.step(end) {}
            assert!(self.fanout.is_idle(), "still busy a simulated day later");
        }

        /// When `api` took the calls it took from `since` on, measured from then.
        fn heard_since(&self, api: &str, since: Instant) -> Vec<Duration> {
            let heard = self.heard.get(api).map_or(&[][..], |h| &h[..]);
            heard
                .iter()
                .filter_map(|at| at.checked_duration_since(since))
                .collect()
        }
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
        for limit in [0, 64, 1024, 1 << 20] {
            let real = Pacing::for_descriptor_limit(limit);
            assert!(real.first_in_flight >= 16 && real.retry_in_flight >= 4);
            assert!(real.first_in_flight + 2 * real.retry_in_flight <= limit.max(24));
            assert!(real.first_deadline < real.retry_deadline);
        }
    }

    #[test]
    fn a_congested_first_lane_waits_a_few_times_the_slowest_answer_within_bounds() {
        let p = pacing();
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

    /// A node that never answers: its updates merge per topic and stay bounded.
    #[test]
    fn updates_for_a_silent_node_merge_and_stay_bounded() {
        let mut sim = Sim::new(pacing());
        sim.node("http://silent:1/", Node::Tarpit);
        let mut publishers = Vec::new();
        for i in 0..1500 {
            publishers.push(format!("http://host:{i}/"));
            sim.queue("http://silent:1/", update("/crowded", publishers.clone()));
            sim.start_calls();
        }
        // One in flight, one waiting: the newest list.
        assert_eq!(sim.fanout.pending("http://silent:1/"), 1);
        for i in 0..1500 {
            sim.queue("http://silent:1/", update(&format!("/t{i}"), vec![]));
        }
        assert_eq!(sim.fanout.pending("http://silent:1/"), MAX_PENDING_PER_NODE);
    }

    /// A node that answers with a fault is there: its update is not retried.
    #[test]
    fn a_fault_is_an_answer_not_a_failure() {
        let mut sim = Sim::new(pacing());
        sim.node("http://refuses:1/", Node::Faults);
        sim.queue("http://refuses:1/", update("/t", vec![]));
        sim.run_until_idle();
        assert_eq!(sim.calls, 1);
        assert_eq!(sim.fanout.failures("http://refuses:1/"), 0);
        assert_eq!(sim.fanout.pending("http://refuses:1/"), 0);
    }

    /// A node slower than the first deadline still gets its update, from the retry lane:
    /// timed out at 200 ms, tried again after the 100 ms back-off with the retry lane's
    /// 400 ms, answered 300 ms later.
    #[test]
    fn a_slow_node_gets_its_update_on_the_retry() {
        let mut sim = Sim::new(pacing());
        let start = sim.now;
        sim.node("http://slow:1/", Node::Live(ms(300)));
        sim.queue("http://slow:1/", update("/t", vec!["http://a:1/".into()]));
        sim.run_until_idle();
        assert_eq!(sim.heard_since("http://slow:1/", start), [ms(300), ms(600)]);
        assert_eq!(sim.fanout.failures("http://slow:1/"), 0);
        assert_eq!(sim.fanout.pending("http://slow:1/"), 0);
    }

    /// Updates to one node go one at a time and in order; a newer update for a topic
    /// replaces the one waiting, not the one in flight.
    #[test]
    fn one_node_hears_one_call_at_a_time_in_order() {
        let mut sim = Sim::new(pacing());
        sim.node("http://n:1/", Node::Live(ms(10)));
        sim.queue("http://n:1/", update("/a", vec!["1".into()]));
        sim.queue("http://n:1/", update("/b", vec!["1".into()]));
        sim.start_calls();
        sim.queue("http://n:1/", update("/a", vec!["2".into()]));
        sim.queue("http://n:1/", update("/b", vec!["2".into()]));
        assert_eq!(sim.fanout.in_flight.len(), 1);
        let mut told = Vec::new();
        while let Some((_, (call, _))) = sim.ending.first_key_value() {
            told.push(call.task.clone());
            sim.step(sim.now + Duration::from_secs(1));
            sim.start_calls();
        }
        assert_eq!(
            told,
            [
                update("/a", vec!["1".into()]),
                update("/b", vec!["2".into()]),
                update("/a", vec!["2".into()]),
            ]
        );
    }

    /// The worst case of a first fan-out: a live node never tried by the master, queued
    /// behind 400 never-tried tarpits. With a fixed 250 ms deadline the round would take
    /// 400 × 250 ms / 20 = 5 s; the congested lane's deadline follows the answers the
    /// master has seen (1 ms here, so its 25 ms floor): 20 rounds, 0.5 s.
    #[test]
    fn a_never_tried_live_node_behind_never_tried_tarpits_hears_within_a_short_round() {
        let mut sim = Sim::new(Pacing {
            first_deadline: ms(250),
            first_in_flight: 20,
            ..pacing()
        });
        sim.node("http://known:1/", Node::Live(ms(1)));
        sim.queue("http://known:1/", update("/rosout", vec![]));
        sim.run_for(ms(10));
        let start = sim.now;
        for i in 0..400 {
            let api = format!("http://tarpit:{i}/");
            sim.node(&api, Node::Tarpit);
            sim.queue(&api, update("/t", vec!["http://p1:1/".into()]));
        }
        sim.node("http://live:1/", Node::Live(ms(1)));
        sim.queue("http://live:1/", update("/t", vec!["http://p1:1/".into()]));
        sim.run_for(Duration::from_secs(1));
        assert_eq!(sim.heard_since("http://live:1/", start), [ms(20 * 25 + 1)]);
        assert_eq!(sim.fanout.failures("http://live:1/"), 0);
    }

    /// Tarpits fill the first lane once, then wait in the retry lane: a live node queued
    /// behind 200 of them is served at once by the next fan-out, and the tarpits'
    /// updates are dropped after `give_up_after` failures.
    #[test]
    fn failing_apis_move_to_the_retry_lane_and_leave_the_first_lane_to_live_nodes() {
        let mut sim = Sim::new(Pacing {
            first_in_flight: 50,
            retry_in_flight: 100,
            ..pacing()
        });
        let tarpits: Vec<String> = (0..200).map(|i| format!("http://tarpit:{i}/")).collect();
        for api in &tarpits {
            sim.node(api, Node::Tarpit);
            sim.queue(api, update("/t", vec!["http://p1:1/".into()]));
        }
        // 200 tarpits, 50 at a time: three rounds of 50 ms (congested, nothing measured
        // yet), then the last 50 with the lane's whole 200 ms (no longer congested).
        sim.run_for(ms(350));
        assert!(tarpits.iter().all(|a| sim.fanout.failures(a) == 1));
        sim.node("http://live:1/", Node::Live(ms(1)));
        let start = sim.now;
        for api in tarpits.iter().chain([&"http://live:1/".to_string()]) {
            sim.queue(api, update("/t", vec!["http://p2:1/".into()]));
        }
        sim.run_for(ms(10));
        assert_eq!(sim.heard_since("http://live:1/", start), [ms(1)]);
        sim.run_until_idle();
        assert!(tarpits.iter().all(|a| sim.fanout.pending(a) == 0));
        assert!(tarpits.iter().all(|a| sim.fanout.failures(a) == 3));
        // Once given up on, a tarpit's next update is tried once per longest back-off.
        let before = sim.calls;
        sim.queue(&tarpits[0], update("/t", vec!["http://p3:1/".into()]));
        sim.run_until_idle();
        assert_eq!(sim.calls, before + 1);
    }

    /// A known node that missed one deadline (a busy machine) is not queued behind a
    /// retry lane full of tarpits: its retry goes beside the known nodes. Behind 100
    /// tarpits, 2 at a time and 400 ms each, it would wait 20 s.
    #[test]
    fn a_known_node_that_missed_a_deadline_is_not_queued_behind_dead_apis() {
        let mut sim = Sim::new(Pacing {
            give_up_after: 50,
            ..pacing()
        });
        sim.node("http://busy:1/", Node::Live(ms(1)));
        sim.queue("http://busy:1/", update("/t", vec![]));
        for i in 0..100 {
            let api = format!("http://tarpit:{i}/");
            sim.node(&api, Node::Tarpit);
            sim.queue(&api, update("/t", vec![]));
        }
        sim.run_for(Duration::from_secs(2));
        // The node misses a deadline once.
        sim.node("http://busy:1/", Node::Tarpit);
        sim.queue("http://busy:1/", update("/t", vec!["http://p1:1/".into()]));
        sim.run_for(ms(250));
        assert_eq!(sim.fanout.failures("http://busy:1/"), 1);
        sim.node("http://busy:1/", Node::Live(ms(1)));
        let start = sim.now;
        sim.run_for(Duration::from_secs(1));
        // Its back-off (100 ms from the failure) ends before `start`'s plus a millisecond.
        let heard = sim.heard_since("http://busy:1/", start);
        assert!(heard.len() == 1 && heard[0] <= ms(101), "{heard:?}");
        assert_eq!(sim.fanout.failures("http://busy:1/"), 0);
        assert!(
            sim.fanout.retry.waiting.len() > 50,
            "the tarpits still wait"
        );
    }

    /// A master out of descriptors is not the node's fault: the update waits a moment
    /// and is tried again, never dropped, and the node's standing is unchanged.
    #[test]
    fn running_out_of_descriptors_delays_an_update_and_never_drops_it() {
        let mut sim = Sim::new(pacing());
        sim.queue("http://n:1/", update("/t", vec![]));
        for _ in 0..20 {
            let call = sim.fanout.poll_call(sim.now).expect("a call");
            assert!(sim.fanout.poll_call(sim.now).is_none());
            sim.fanout
                .handle_outcome(sim.now, call, Outcome::OutOfDescriptors);
            assert_eq!(sim.fanout.poll_timeout(), Some(sim.now + DESCRIPTOR_WAIT));
            sim.now += DESCRIPTOR_WAIT;
            sim.fanout.handle_timeout(sim.now);
        }
        assert_eq!(sim.fanout.failures("http://n:1/"), 0);
        sim.node("http://n:1/", Node::Live(ms(1)));
        sim.run_until_idle();
        assert_eq!(sim.heard["http://n:1/"].len(), 1);
    }

    /// An update to a URI nobody can call is dropped; the next one is still tried.
    #[test]
    fn an_uncallable_api_drops_the_update_not_the_queue() {
        let mut fanout = Fanout::new(pacing());
        let now = Instant::now();
        fanout.queue(now, "ftp://x/", update("/a", vec![]));
        fanout.queue(now, "ftp://x/", update("/b", vec![]));
        let call = fanout.poll_call(now).expect("a call");
        fanout.handle_outcome(now, call, Outcome::Uncallable);
        let next = fanout.poll_call(now).expect("the next update");
        assert_eq!(next.task, update("/b", vec![]));
        fanout.handle_outcome(now, next, Outcome::Uncallable);
        assert!(fanout.is_idle());
        assert_eq!(fanout.failures("ftp://x/"), 0);
    }

    /// A call the fan-out did not hand out, or handed back twice, changes nothing.
    #[test]
    fn a_stale_or_forged_outcome_is_ignored() {
        let mut fanout = Fanout::new(pacing());
        let now = Instant::now();
        fanout.queue(now, "http://n:1/", update("/a", vec![]));
        let call = fanout.poll_call(now).expect("a call");
        let forged = Call {
            id: call.id + 7,
            api: call.api.clone(),
            task: call.task.clone(),
            deadline: call.deadline,
        };
        fanout.handle_outcome(now, forged, Outcome::NoAnswer);
        assert_eq!(fanout.failures("http://n:1/"), 0);
        assert_eq!(fanout.first.in_flight, 1);
        fanout.handle_outcome(now, call, Outcome::Answered);
        assert!(fanout.is_idle());
    }

    /// Beyond [`MAX_REMEMBERED_APIS`], idle APIs are forgotten and busy ones kept.
    #[test]
    fn remembered_apis_are_bounded() {
        let mut sim = Sim::new(pacing());
        for i in 0..MAX_REMEMBERED_APIS {
            sim.queue(&format!("http://n:{i}/"), update("/t", vec![]));
            if i % 1000 == 999 {
                // Dead: they fail once and back off, which keeps them remembered.
                sim.start_calls();
                sim.step(sim.now);
            }
        }
        sim.run_until_idle();
        assert_eq!(sim.fanout.apis.len(), MAX_REMEMBERED_APIS);
        sim.queue("http://new:1/", update("/t", vec![]));
        assert_eq!(sim.fanout.apis.len(), 1);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 6, ..Default::default() })]

        /// 10,000 subscriber APIs of a topic, never tried before, told in a random order
        /// with the master's real pacing under `ulimit -n 1024`: dead ports, tarpits, nodes
        /// slower than the first deadline, nodes that fault, and live nodes. Each live node
        /// hears the first fan-out once every API queued before it has had its turn in the
        /// first lane (rounds of the lane's slots, each no longer than the congested
        /// deadline) and the second fan-out as soon as the known lane reaches it; slow
        /// nodes hear in the end; dead APIs are given up on; no lane is ever over its
        /// slots; and nothing stays queued.
        #[test]
        fn ten_thousand_apis_live_ones_hear_within_the_bound(
            seed in 1u64..u64::MAX,
            live in 1usize..400,
            slow in proptest::prop_oneof![proptest::strategy::Just(0usize), 1usize..200],
            faults in 0usize..100,
            dead_share in 0u64..=100,
        ) {
            const APIS: usize = 10_000;
            let pacing = Pacing::for_descriptor_limit(1024);
            let mut rng = udpros_testkit::random::Rng::new(seed);
            let mut sim = Sim::new(pacing);
            let mut apis: Vec<(String, Node)> = (0..APIS)
                .map(|i| {
                    let node = if i < live {
                        Node::Live(ms(rng.below(21)))
                    } else if i < live + slow {
                        // Slower than the first lane's deadline, faster than the retry's.
                        Node::Live(ms(300 + rng.below(1500)))
                    } else if i < live + slow + faults {
                        Node::Faults
                    } else if rng.below(100) < dead_share {
                        Node::Dead
                    } else {
                        Node::Tarpit
                    };
                    (format!("http://10.0.{}.{}:{}/", i / 250, i % 250, 40000 + i), node)
                })
                .collect();
            for i in (1..APIS).rev() {
                apis.swap(i, rng.below(i as u64 + 1) as usize);
            }
            for (api, node) in &apis {
                sim.node(api, *node);
            }
            // The longest a first-lane call lasts while the lane is congested: a few times
            // the slowest answer the master has seen, which may be a slow node's answer
            // to a retry.
            let slowest_answer = apis
                .iter()
                .filter_map(|(_, n)| match n {
                    Node::Live(t) => Some(*t),
                    _ => None,
                })
                .max();
            let round = pacing
                .congested_deadline(None)
                .max(pacing.congested_deadline(slowest_answer));

            let start = sim.now;
            for (api, _) in &apis {
                sim.queue(api, update("/crowded", vec!["http://pub1:1/".into()]));
            }
            sim.run_for(Duration::from_secs(12));
            for (position, (api, node)) in apis.iter().enumerate() {
                let Node::Live(took) = node else { continue };
                if *took > ms(20) {
                    continue;
                }
                let rounds = (position / pacing.first_in_flight) as u32;
                let bound = round * rounds + *took;
                let heard = sim.heard_since(api, start);
                proptest::prop_assert!(
                    heard.first().is_some_and(|h| *h <= bound),
                    "{api}, {position}th in line, heard {heard:?}, bound {bound:?}"
                );
            }

            // The second fan-out: the nodes that answered are known, the ghosts wait in
            // the retry lane or give up. A live node waits for the known nodes queued
            // before it, in rounds of the known lane's slots; a round lasts as long as the
            // slowest of them takes (a slow node: the lane's deadline).
            let known: Vec<bool> = apis
                .iter()
                .map(|(api, _)| {
                    let entry = &sim.fanout.apis[api];
                    entry.answered && entry.failures == 0 && entry.standing == Standing::Idle
                })
                .collect();
            let known_round = apis
                .iter()
                .zip(&known)
                .filter(|(_, known)| **known)
                .map(|((_, node), _)| match node {
                    Node::Live(took) => (*took).min(pacing.first_deadline),
                    _ => Duration::ZERO,
                })
                .max()
                .unwrap_or_default();
            let second = sim.now;
            for (api, _) in &apis {
                sim.queue(api, update("/crowded", vec!["http://pub2:1/".into()]));
            }
            sim.run_for(Duration::from_secs(5));
            let mut known_ahead = 0;
            for ((api, node), known) in apis.iter().zip(&known) {
                if !known {
                    continue;
                }
                let rounds = (known_ahead / pacing.retry_in_flight) as u32;
                known_ahead += 1;
                let Node::Live(took) = node else { continue };
                if *took > ms(20) {
                    continue;
                }
                let bound = known_round * rounds + *took;
                let heard = sim.heard_since(api, second);
                proptest::prop_assert!(
                    heard.first().is_some_and(|h| *h <= bound),
                    "{api} (known) heard {heard:?}, bound {bound:?}"
                );
            }
            if slow == 0 {
                // Without slow nodes, the bar of the hostile test (a second, from the
                // publisher's start) holds with room to spare.
                proptest::prop_assert!(known_round * (known_ahead / pacing.retry_in_flight) as u32 <= ms(200));
            }

            sim.run_until_idle();
            for (api, node) in &apis {
                let (pending, failures) = (sim.fanout.pending(api), sim.fanout.failures(api));
                proptest::prop_assert_eq!(pending, 0);
                match node {
                    Node::Live(_) | Node::Faults => {
                        proptest::prop_assert_eq!(failures, 0, "{}", api);
                        proptest::prop_assert!(!sim.heard_since(api, start).is_empty());
                    }
                    Node::Dead | Node::Tarpit => {
                        proptest::prop_assert_eq!(failures, pacing.give_up_after, "{}", api);
                    }
                }
            }
        }
    }
}
