//! The goals an action client follows, without I/O: which server owns each, their state
//! machines, the events their handles have yet to take, results held for late feedback,
//! and when goals are lost because their server went away.
//!
//! A driver feeds it what arrives ([`ClientGoals::on_status`], [`ClientGoals::on_result`],
//! [`ClientGoals::on_feedback`]) and what it observes of its links
//! ([`ClientGoals::on_status_links`]); it calls [`ClientGoals::handle_timeout`] at
//! [`ClientGoals::poll_timeout`], and after each call wakes the handles of the goals
//! [`ClientGoals::take_woken`] names.

use super::client::{CommState, CommStateMachine, HeldResults, SimpleState};
use super::GoalStatus;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How long a client with goals in flight waits, with no status publisher linked, before
/// it takes the server for gone and its goals for LOST.
pub const SERVER_GONE_AFTER: Duration = Duration::from_secs(2);

/// How often a client with goals in flight and no status publisher linked looks at its
/// links again: the transport says nothing when a link closes.
pub const LINK_CHECK: Duration = Duration::from_millis(250);

/// What happened to a goal, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum GoalEvent<F> {
    /// The goal's communication state changed.
    Transition(CommState),
    /// The server sent feedback.
    Feedback(F),
}

/// Bounds on the feedback a goal keeps for a handle that does not read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedbackBound {
    /// Messages.
    pub count: usize,
    /// Their bytes together (the newest is kept, however large).
    pub bytes: usize,
}

/// One followed goal.
#[derive(Debug)]
struct Goal<P> {
    machine: CommStateMachine,
    result: Option<P>,
    /// Transitions (never dropped; a goal passes through few) and feedback (the oldest go
    /// past the bound), not yet taken by the handle.
    events: VecDeque<GoalEvent<P>>,
    feedback_queued: usize,
    feedback_bytes: usize,
    /// The caller id of the status publisher that first listed the goal: only its arrays
    /// can say the goal is gone (another node publishing on the same status topic, by
    /// mistake or malice, cannot make it LOST).
    server: Option<String>,
    /// Feedback came for the goal: its result is held for
    /// [`RESULT_GRACE`](super::client::RESULT_GRACE).
    had_feedback: bool,
}

/// The goals a client follows, keyed by goal id; `P` is an encoded result or feedback.
#[derive(Debug)]
pub struct ClientGoals<P> {
    goals: HashMap<String, Goal<P>>,
    bound: FeedbackBound,
    held: HeldResults<(GoalStatus, P)>,
    /// The caller id of the last status array's publisher.
    status_caller: Option<String>,
    /// Since when goals have been in flight with no status publisher linked.
    unlinked_since: Option<Instant>,
    /// When the driver should look at its status links again.
    next_link_check: Option<Instant>,
    woken: Vec<String>,
}

impl<P: AsRef<[u8]> + Clone> ClientGoals<P> {
    /// No goals yet; each keeps at most `bound` of unread feedback.
    pub fn new(bound: FeedbackBound) -> ClientGoals<P> {
        ClientGoals {
            goals: HashMap::new(),
            bound,
            held: HeldResults::default(),
            status_caller: None,
            unlinked_since: None,
            next_link_check: None,
            woken: Vec::new(),
        }
    }

    /// Starts following a goal sent at `now`; the driver's links are to be looked at
    /// (see [`ClientGoals::wants_link_check`]) if they are not watched yet.
    pub fn track(&mut self, now: Instant, goal: &str) {
        self.next_link_check.get_or_insert(now);
        let fresh = Goal {
            machine: CommStateMachine::new(),
            result: None,
            events: VecDeque::new(),
            feedback_queued: 0,
            feedback_bytes: 0,
            server: None,
            had_feedback: false,
        };
        self.goals.insert(goal.to_string(), fresh);
    }

    /// Stops following a goal (its handles are gone); a result held for it goes too.
    pub fn forget(&mut self, goal: &str) {
        self.goals.remove(goal);
        self.held.forget(goal);
    }

    /// Whether the goal is followed: only their entries of a status array matter.
    pub fn is_tracked(&self, goal: &str) -> bool {
        self.goals.contains_key(goal)
    }

    /// The caller id of the last status array's publisher: the server, once one spoke.
    pub fn status_caller(&self) -> Option<&str> {
        self.status_caller.as_deref()
    }

    /// A status array from `caller`; `listed` holds its entries for followed goals. A goal
    /// is its first lister's: another publisher's array that leaves it out changes nothing.
    pub fn on_status(&mut self, caller: &str, listed: &HashMap<String, GoalStatus>) {
        self.status_caller = Some(caller.to_string());
        for (id, goal) in self.goals.iter_mut() {
            let found = listed.get(id);
            match (&goal.server, found) {
                (None, Some(_)) => goal.server = Some(caller.to_string()),
                (Some(server), None) if server != caller => continue,
                _ => {}
            }
            let passed = goal.machine.on_status(found);
            push_transitions(&mut self.woken, id, goal, passed);
        }
    }

    /// A result arrived at `now`. A goal that has had feedback may have more on the way on
    /// the other link: its result is held for
    /// [`RESULT_GRACE`](super::client::RESULT_GRACE) (a second result while one is held is
    /// dropped: the first stands); any other is applied at once.
    pub fn on_result(&mut self, now: Instant, status: GoalStatus, result: P) {
        let id = status.goal_id.id.clone();
        let hold = self
            .goals
            .get(&id)
            .is_some_and(|g| g.had_feedback && g.machine.state() != CommState::Done);
        if hold {
            self.held.hold(now, &id, (status, result));
        } else {
            self.apply_result(status, result);
        }
    }

    /// Feedback arrived: queued for the goal's handle unless the goal is done or not
    /// followed.
    pub fn on_feedback(&mut self, status: &GoalStatus, feedback: P) {
        let id = &status.goal_id.id;
        let Some(goal) = self.goals.get_mut(id) else {
            return;
        };
        if goal.machine.state() == CommState::Done {
            return;
        }
        goal.had_feedback = true;
        let size = feedback.as_ref().len();
        while goal.feedback_queued >= self.bound.count
            || goal.feedback_bytes + size > self.bound.bytes
        {
            let Some(i) = goal
                .events
                .iter()
                .position(|e| matches!(e, GoalEvent::Feedback(_)))
            else {
                break; // the newest is kept, however large
            };
            if let Some(GoalEvent::Feedback(old)) = goal.events.remove(i) {
                goal.feedback_queued -= 1;
                goal.feedback_bytes -= old.as_ref().len();
            }
        }
        goal.feedback_queued += 1;
        goal.feedback_bytes += size;
        goal.events.push_back(GoalEvent::Feedback(feedback));
        self.woken.push(id.clone());
    }

    /// The driver looked at its links at `now`: `status_publishers` are linked to its
    /// status subscriber. With goals in flight and none linked for [`SERVER_GONE_AFTER`],
    /// [`ClientGoals::handle_timeout`] loses them. While goals are in flight the links are
    /// looked at every [`LINK_CHECK`].
    pub fn on_status_links(&mut self, now: Instant, status_publishers: usize) {
        if !self.in_flight() {
            self.unlinked_since = None;
            self.next_link_check = None;
            return;
        }
        if status_publishers > 0 {
            self.unlinked_since = None;
        } else {
            self.unlinked_since.get_or_insert(now);
        }
        self.next_link_check = Some(now + LINK_CHECK);
    }

    /// When to call [`ClientGoals::handle_timeout`]: a held result's due time, or when the
    /// links should be looked at again. Ask again after every other call.
    #[must_use = "call handle_timeout at this instant"]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // A look due after the last goal ended costs one wake, at which the look ends.
        [self.held.next_due(), self.next_link_check]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether the driver should look at its status links now, and report them with
    /// [`ClientGoals::on_status_links`]: the last look is [`LINK_CHECK`] old, or a goal was
    /// sent since. A look with no goal in flight ends the looks.
    pub fn wants_link_check(&self, now: Instant) -> bool {
        self.next_link_check.is_some_and(|at| at <= now)
    }

    /// Whether a held result is due by `now`: the driver then takes the feedback its links
    /// have read before calling [`ClientGoals::handle_timeout`].
    pub fn results_due(&self, now: Instant) -> bool {
        self.held.next_due().is_some_and(|due| due <= now)
    }

    /// Applies the results due by `now`, and loses every goal in flight if the status
    /// links have been down for [`SERVER_GONE_AFTER`]. A driver takes the feedback its
    /// links have read before this: it is older than a held result.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some((_, (status, result))) = self.held.due(now) {
            self.apply_result(status, result);
        }
        let gone = self
            .unlinked_since
            .is_some_and(|since| now.saturating_duration_since(since) >= SERVER_GONE_AFTER);
        if gone {
            for (id, goal) in self.goals.iter_mut() {
                let passed = goal.machine.lose();
                push_transitions(&mut self.woken, id, goal, passed);
            }
            self.unlinked_since = None;
            self.next_link_check = None;
        }
    }

    /// The client stops: held results are applied, and every goal's handle is woken.
    pub fn finish(&mut self) {
        let held: Vec<_> = self.held.drain().collect();
        for (_, (status, result)) in held {
            self.apply_result(status, result);
        }
        self.woken.extend(self.goals.keys().cloned());
    }

    /// The goals whose handles have something new since the last call.
    pub fn take_woken(&mut self) -> Vec<String> {
        let mut woken = std::mem::take(&mut self.woken);
        woken.sort_unstable();
        woken.dedup();
        woken
    }

    /// The goal's next event, oldest first, for its handle; `None` when there is none
    /// (or the goal is not followed).
    pub fn next_event(&mut self, goal: &str) -> Option<GoalEvent<P>> {
        let goal = self.goals.get_mut(goal)?;
        let event = goal.events.pop_front()?;
        if let GoalEvent::Feedback(bytes) = &event {
            goal.feedback_queued -= 1;
            goal.feedback_bytes -= bytes.as_ref().len();
        }
        Some(event)
    }

    /// The goal's communication state; DONE for a goal not followed.
    pub fn comm_state(&self, goal: &str) -> CommState {
        self.goals
            .get(goal)
            .map_or(CommState::Done, |g| g.machine.state())
    }

    /// The simple client's state; LOST for a goal not followed.
    pub fn simple_state(&self, goal: &str) -> SimpleState {
        self.goals
            .get(goal)
            .map_or(SimpleState::Lost, |g| g.machine.simple_state())
    }

    /// The server's latest status of the goal.
    pub fn latest_status(&self, goal: &str) -> Option<&GoalStatus> {
        self.goals.get(goal)?.machine.latest_status()
    }

    /// The goal's result, once it came.
    pub fn result(&self, goal: &str) -> Option<&P> {
        self.goals.get(goal)?.result.as_ref()
    }

    /// The client asks to cancel the goal: true when a cancel request should be sent.
    pub fn cancel(&mut self, goal: &str) -> bool {
        self.goals.get_mut(goal).is_some_and(|g| g.machine.cancel())
    }

    fn in_flight(&self) -> bool {
        self.goals
            .values()
            .any(|g| g.machine.state() != CommState::Done)
    }

    fn apply_result(&mut self, status: GoalStatus, result: P) {
        let id = status.goal_id.id.clone();
        if let Some(goal) = self.goals.get_mut(&id) {
            let passed = goal.machine.on_result(&status);
            if !passed.is_empty() {
                goal.result = Some(result);
            }
            push_transitions(&mut self.woken, &id, goal, passed);
        }
    }
}

fn push_transitions<P>(
    woken: &mut Vec<String>,
    id: &str,
    goal: &mut Goal<P>,
    passed: Vec<CommState>,
) {
    if passed.is_empty() {
        return;
    }
    goal.events
        .extend(passed.into_iter().map(GoalEvent::Transition));
    woken.push(id.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::client::RESULT_GRACE;
    use crate::action::{status, GoalId};

    fn st(goal: &str, code: u8) -> GoalStatus {
        GoalStatus {
            goal_id: GoalId {
                id: goal.into(),
                ..GoalId::default()
            },
            status: code,
            text: String::new(),
        }
    }

    fn listed(entries: &[(&str, u8)]) -> HashMap<String, GoalStatus> {
        entries
            .iter()
            .map(|(id, code)| (id.to_string(), st(id, *code)))
            .collect()
    }

    fn goals() -> ClientGoals<Vec<u8>> {
        ClientGoals::new(FeedbackBound {
            count: 3,
            bytes: 100,
        })
    }

    fn events(goals: &mut ClientGoals<Vec<u8>>, goal: &str) -> Vec<GoalEvent<Vec<u8>>> {
        std::iter::from_fn(|| goals.next_event(goal)).collect()
    }

    fn t(origin: Instant, ms: u64) -> Instant {
        origin + Duration::from_millis(ms)
    }

    /// Only the server that first listed a goal can make it LOST by leaving it out.
    #[test]
    fn a_goal_belongs_to_the_server_that_first_listed_it() {
        let now = Instant::now();
        let mut g = goals();
        g.track(now, "a");
        g.on_status("/server", &listed(&[("a", status::ACTIVE)]));
        g.on_status("/stranger", &listed(&[]));
        assert_eq!(g.comm_state("a"), CommState::Active);
        assert_eq!(g.status_caller(), Some("/stranger"));
        g.on_status("/server", &listed(&[]));
        assert_eq!(g.comm_state("a"), CommState::Done);
        assert_eq!(g.simple_state("a"), SimpleState::Lost);
        assert_eq!(
            events(&mut g, "a"),
            [CommState::Active, CommState::Done].map(GoalEvent::Transition)
        );
        assert_eq!(g.take_woken(), ["a"]);
    }

    /// Unread feedback is bounded by count and bytes, oldest first out; transitions stay.
    #[test]
    fn unread_feedback_is_bounded_and_transitions_are_kept() {
        let now = Instant::now();
        let mut g = goals();
        g.track(now, "a");
        g.on_status("/s", &listed(&[("a", status::ACTIVE)]));
        for i in 0..10u8 {
            g.on_feedback(&st("a", status::ACTIVE), vec![i; 10]);
        }
        g.on_feedback(&st("a", status::ACTIVE), vec![99; 90]);
        assert_eq!(
            events(&mut g, "a"),
            [
                GoalEvent::Transition(CommState::Active),
                GoalEvent::Feedback(vec![9; 10]),
                GoalEvent::Feedback(vec![99; 90]),
            ]
        );
        // The newest is kept however large; taking events frees the room.
        g.on_feedback(&st("a", status::ACTIVE), vec![1; 1 << 20]);
        g.on_feedback(&st("a", status::ACTIVE), vec![2; 1 << 20]);
        assert_eq!(events(&mut g, "a"), [GoalEvent::Feedback(vec![2; 1 << 20])]);
        g.on_feedback(&st("a", status::ACTIVE), vec![3; 10]);
        assert_eq!(events(&mut g, "a"), [GoalEvent::Feedback(vec![3; 10])]);
        // Feedback for goals not followed is ignored.
        g.on_feedback(&st("b", status::ACTIVE), vec![0; 10]);
        assert!(events(&mut g, "b").is_empty());
    }

    /// After feedback, a result waits RESULT_GRACE so that feedback read just after it on
    /// the other link comes first; a repeated result is dropped; without feedback a
    /// result is applied at once.
    #[test]
    fn a_result_after_feedback_waits_for_the_late_feedback() {
        let origin = Instant::now();
        let mut g = goals();
        g.track(origin, "a");
        g.track(origin, "b");
        g.on_status_links(origin, 1);
        g.on_status(
            "/s",
            &listed(&[("a", status::ACTIVE), ("b", status::ACTIVE)]),
        );
        events(&mut g, "a");
        events(&mut g, "b");
        g.on_feedback(&st("a", status::ACTIVE), vec![1]);
        g.on_result(t(origin, 100), st("a", status::SUCCEEDED), vec![7]);
        g.on_result(t(origin, 101), st("a", status::ABORTED), vec![8]);
        g.on_result(t(origin, 100), st("b", status::SUCCEEDED), vec![9]);
        assert_eq!(g.comm_state("b"), CommState::Done);
        assert_eq!(g.comm_state("a"), CommState::Active);
        assert_eq!(g.poll_timeout(), Some(t(origin, 100) + RESULT_GRACE));
        assert!(!g.results_due(t(origin, 105)));
        g.on_feedback(&st("a", status::ACTIVE), vec![2]);
        assert!(g.results_due(t(origin, 110)));
        g.handle_timeout(t(origin, 110));
        assert_eq!(g.result("a"), Some(&vec![7]));
        assert_eq!(g.simple_state("a"), SimpleState::Succeeded);
        assert_eq!(
            events(&mut g, "a"),
            [
                GoalEvent::Feedback(vec![1]),
                GoalEvent::Feedback(vec![2]),
                GoalEvent::Transition(CommState::WaitingForResult),
                GoalEvent::Transition(CommState::Done),
            ]
        );
        // Done: later feedback is not queued.
        g.on_feedback(&st("a", status::ACTIVE), vec![3]);
        assert!(events(&mut g, "a").is_empty());
    }

    /// With goals in flight and no status publisher linked for SERVER_GONE_AFTER, looked
    /// at every LINK_CHECK, every goal in flight is lost; a link seen meanwhile restarts
    /// the wait; with nothing in flight there is no timer.
    #[test]
    fn goals_are_lost_two_seconds_after_the_server_unlinked() {
        let origin = Instant::now();
        let mut g = goals();
        assert_eq!(g.poll_timeout(), None);
        g.track(origin, "a");
        assert!(g.wants_link_check(origin));
        let mut now = origin;
        let mut linked = 1;
        let mut checks = 0;
        loop {
            if g.wants_link_check(now) {
                checks += 1;
                // The server goes away once 1 s has passed.
                if now >= t(origin, 1000) {
                    linked = 0;
                }
                g.on_status_links(now, linked);
            }
            g.handle_timeout(now);
            if g.comm_state("a") == CommState::Done || checks > 100 {
                break;
            }
            now = g.poll_timeout().expect("a timer while in flight");
        }
        assert_eq!(now, t(origin, 3000));
        assert_eq!(checks, 13);
        assert_eq!(g.simple_state("a"), SimpleState::Lost);
        assert_eq!(g.latest_status("a").map(|s| s.status), Some(status::LOST));
        assert_eq!(g.poll_timeout(), None);
        g.on_status_links(now, 0);
        assert_eq!(g.poll_timeout(), None);
    }

    /// Forgetting a goal drops its held result; finishing applies held results and wakes
    /// every goal.
    #[test]
    fn forget_and_finish() {
        let now = Instant::now();
        let mut g = goals();
        for id in ["a", "b", "c"] {
            g.track(now, id);
            g.on_feedback(&st(id, status::ACTIVE), vec![1]);
            g.on_result(now, st(id, status::SUCCEEDED), vec![2]);
        }
        g.take_woken();
        g.forget("a");
        assert!(!g.is_tracked("a"));
        g.finish();
        assert_eq!(g.take_woken(), ["b", "c"]);
        assert_eq!(g.result("b"), Some(&vec![2]));
        assert_eq!(g.comm_state("a"), CommState::Done);
        assert!(!g.results_due(now + Duration::from_secs(1)));
    }

    /// A client may follow thousands of goals; one status array listing them all moves
    /// each once, and a cancel is asked once per goal.
    #[test]
    fn thousands_of_goals() {
        let now = Instant::now();
        let mut g = goals();
        let ids: Vec<String> = (0..5000).map(|i| format!("g{i}")).collect();
        for id in &ids {
            g.track(now, id);
        }
        let all: HashMap<String, GoalStatus> = ids
            .iter()
            .map(|id| (id.clone(), st(id, status::ACTIVE)))
            .collect();
        g.on_status("/s", &all);
        assert_eq!(g.take_woken().len(), 5000);
        assert!(ids.iter().all(|id| g.cancel(id)));
        assert!(ids
            .iter()
            .all(|id| !g.cancel(id) || g.comm_state(id) != CommState::Done));
        assert!(ids
            .iter()
            .all(|id| g.comm_state(id) == CommState::WaitingForCancelAck));
    }
}
