//! A client's view of one goal: roscpp actionlib's communication state machine, fed the
//! server's status arrays and results, and the simple client's three states on top.

use super::{status, GoalStatus};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Where a goal stands as its client sees it (roscpp's `CommState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommState {
    /// Sent; the server has not listed it yet.
    WaitingForGoalAck,
    /// The server listed it, not yet accepted.
    Pending,
    /// The server works on it.
    Active,
    /// The server finished it; its result has not come yet.
    WaitingForResult,
    /// The client asked to cancel; the server has not answered yet.
    WaitingForCancelAck,
    /// The server will cancel it before accepting it.
    Recalling,
    /// The server is cancelling it.
    Preempting,
    /// Finished: the result came, or the goal was lost.
    Done,
}

impl CommState {
    /// The name roscpp prints (`WAITING_FOR_GOAL_ACK`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CommState::WaitingForGoalAck => "WAITING_FOR_GOAL_ACK",
            CommState::Pending => "PENDING",
            CommState::Active => "ACTIVE",
            CommState::WaitingForResult => "WAITING_FOR_RESULT",
            CommState::WaitingForCancelAck => "WAITING_FOR_CANCEL_ACK",
            CommState::Recalling => "RECALLING",
            CommState::Preempting => "PREEMPTING",
            CommState::Done => "DONE",
        }
    }
}

impl std::fmt::Display for CommState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The simple client's coarse state (roscpp's `SimpleClientGoalState`): what
/// `get_state()` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimpleState {
    /// Not yet accepted.
    Pending,
    /// Being worked on.
    Active,
    /// Cancelled before it was accepted.
    Recalled,
    /// Refused.
    Rejected,
    /// Cancelled while active.
    Preempted,
    /// Failed.
    Aborted,
    /// Done.
    Succeeded,
    /// Lost track of: the server forgot it or went away.
    Lost,
}

impl SimpleState {
    /// True once the goal has finished, one way or another.
    pub fn is_done(self) -> bool {
        !matches!(self, SimpleState::Pending | SimpleState::Active)
    }

    /// The name roscpp and rospy print.
    pub fn name(self) -> &'static str {
        match self {
            SimpleState::Pending => "PENDING",
            SimpleState::Active => "ACTIVE",
            SimpleState::Recalled => "RECALLED",
            SimpleState::Rejected => "REJECTED",
            SimpleState::Preempted => "PREEMPTED",
            SimpleState::Aborted => "ABORTED",
            SimpleState::Succeeded => "SUCCEEDED",
            SimpleState::Lost => "LOST",
        }
    }

    /// The terminal state a goal status code stands for (`LOST` for codes that are not
    /// terminal, as roscpp's `getTerminalState` answers for them).
    pub fn terminal(code: u8) -> SimpleState {
        match code {
            status::RECALLED => SimpleState::Recalled,
            status::REJECTED => SimpleState::Rejected,
            status::PREEMPTED => SimpleState::Preempted,
            status::ABORTED => SimpleState::Aborted,
            status::SUCCEEDED => SimpleState::Succeeded,
            _ => SimpleState::Lost,
        }
    }
}

impl std::fmt::Display for SimpleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One goal's communication state machine. Every method returns the states it passed
/// through, in order (several for one message, as roscpp reports them), so a caller can
/// tell its user each transition.
#[derive(Debug, Clone)]
pub struct CommStateMachine {
    state: CommState,
    latest: Option<GoalStatus>,
    /// The simple client's view: PENDING until the goal is first seen active.
    seen_active: bool,
    /// Status codes that made no sense for the state (roscpp logs them): a misbehaving
    /// server, counted.
    invalid: u64,
}

impl Default for CommStateMachine {
    fn default() -> Self {
        Self::new()
    }
}

impl CommStateMachine {
    /// A goal just sent.
    pub fn new() -> CommStateMachine {
        CommStateMachine {
            state: CommState::WaitingForGoalAck,
            latest: None,
            seen_active: false,
            invalid: 0,
        }
    }

    /// The current state.
    pub fn state(&self) -> CommState {
        self.state
    }

    /// The server's latest word on the goal (LOST when the client lost it).
    pub fn latest_status(&self) -> Option<&GoalStatus> {
        self.latest.as_ref()
    }

    /// Status codes that did not fit the state, so far.
    pub fn invalid_transitions(&self) -> u64 {
        self.invalid
    }

    /// A status array arrived; `found` is this goal's entry in it, if listed. A goal the
    /// server no longer lists, once it had listed it, is lost.
    pub fn on_status(&mut self, found: Option<&GoalStatus>) -> Vec<CommState> {
        if self.state == CommState::Done {
            return Vec::new(); // late arrays after the result: irrelevant
        }
        let Some(goal_status) = found else {
            return match self.state {
                CommState::WaitingForGoalAck | CommState::WaitingForResult => Vec::new(),
                _ => self.lose(),
            };
        };
        self.latest = Some(goal_status.clone());
        let path = self.path_for(goal_status.status);
        self.walk(path)
    }

    /// The goal's result arrived with this status: the state machine passes through what
    /// the status implies, then DONE.
    pub fn on_result(&mut self, result_status: &GoalStatus) -> Vec<CommState> {
        if self.state == CommState::Done {
            return Vec::new();
        }
        let mut passed = self.on_status(Some(result_status));
        self.latest = Some(result_status.clone());
        passed.extend(self.walk(&[CommState::Done]));
        passed
    }

    /// The client wants the goal cancelled. True when a cancel request should be sent
    /// (the goal is not already finished or being cancelled); the state becomes
    /// WAITING_FOR_CANCEL_ACK.
    pub fn cancel(&mut self) -> bool {
        match self.state {
            CommState::WaitingForGoalAck
            | CommState::Pending
            | CommState::Active
            | CommState::WaitingForCancelAck => {
                self.state = CommState::WaitingForCancelAck;
                true
            }
            _ => false,
        }
    }

    /// The client lost the goal (its server went away): LOST, DONE.
    pub fn lose(&mut self) -> Vec<CommState> {
        if self.state == CommState::Done {
            return Vec::new();
        }
        let mut lost = self.latest.take().unwrap_or_default();
        lost.status = status::LOST;
        self.latest = Some(lost);
        self.walk(&[CommState::Done])
    }

    /// The simple client's state, as roscpp's `SimpleActionClient::getState` derives it.
    pub fn simple_state(&self) -> SimpleState {
        match self.state {
            CommState::WaitingForGoalAck | CommState::Pending | CommState::Recalling => {
                SimpleState::Pending
            }
            CommState::Active | CommState::Preempting => SimpleState::Active,
            CommState::Done => {
                SimpleState::terminal(self.latest.as_ref().map_or(status::LOST, |s| s.status))
            }
            CommState::WaitingForResult | CommState::WaitingForCancelAck => {
                if self.seen_active {
                    SimpleState::Active
                } else {
                    SimpleState::Pending
                }
            }
        }
    }

    fn walk(&mut self, path: &[CommState]) -> Vec<CommState> {
        for &next in path {
            // roscpp's simple client turns ACTIVE on the first of these.
            self.seen_active |= matches!(
                next,
                CommState::Active | CommState::Preempting | CommState::Recalling
            );
            self.state = next;
        }
        path.to_vec()
    }

    /// The states a status code leads through from the current state (roscpp's
    /// `updateStatus` table); an empty path for codes that change nothing, and for codes
    /// that make no sense here, which are counted.
    fn path_for(&mut self, code: u8) -> &'static [CommState] {
        use status::*;
        use CommState::*;
        let path: Option<&'static [CommState]> = match (self.state, code) {
            (WaitingForGoalAck, PENDING) => Some(&[Pending]),
            (WaitingForGoalAck, ACTIVE) => Some(&[Active]),
            (WaitingForGoalAck, PREEMPTED) => Some(&[Active, Preempting, WaitingForResult]),
            (WaitingForGoalAck, SUCCEEDED | ABORTED) => Some(&[Active, WaitingForResult]),
            (WaitingForGoalAck, REJECTED | RECALLED) => Some(&[Pending, WaitingForResult]),
            (WaitingForGoalAck, PREEMPTING) => Some(&[Active, Preempting]),
            (WaitingForGoalAck, RECALLING) => Some(&[Pending, Recalling]),

            (Pending, PENDING) => Some(&[]),
            (Pending, ACTIVE) => Some(&[Active]),
            (Pending, PREEMPTED) => Some(&[Active, Preempting, WaitingForResult]),
            (Pending, SUCCEEDED | ABORTED) => Some(&[Active, WaitingForResult]),
            (Pending, REJECTED) => Some(&[WaitingForResult]),
            (Pending, RECALLED) => Some(&[Recalling, WaitingForResult]),
            (Pending, PREEMPTING) => Some(&[Active, Preempting]),
            (Pending, RECALLING) => Some(&[Recalling]),

            (Active, ACTIVE) => Some(&[]),
            (Active, PREEMPTED) => Some(&[Preempting, WaitingForResult]),
            (Active, SUCCEEDED | ABORTED) => Some(&[WaitingForResult]),
            (Active, PREEMPTING) => Some(&[Preempting]),

            (WaitingForResult, ACTIVE | PREEMPTED | SUCCEEDED | ABORTED | REJECTED | RECALLED) => {
                Some(&[])
            }

            (WaitingForCancelAck, PENDING | ACTIVE) => Some(&[]),
            (WaitingForCancelAck, SUCCEEDED | ABORTED | PREEMPTED) => {
                Some(&[Preempting, WaitingForResult])
            }
            (WaitingForCancelAck, RECALLED) => Some(&[Recalling, WaitingForResult]),
            (WaitingForCancelAck, REJECTED) => Some(&[WaitingForResult]),
            (WaitingForCancelAck, PREEMPTING) => Some(&[Preempting]),
            (WaitingForCancelAck, RECALLING) => Some(&[Recalling]),

            (Recalling, SUCCEEDED | ABORTED | PREEMPTED) => Some(&[Preempting, WaitingForResult]),
            (Recalling, RECALLED | REJECTED) => Some(&[WaitingForResult]),
            (Recalling, PREEMPTING) => Some(&[Preempting]),
            (Recalling, RECALLING) => Some(&[]),

            (Preempting, PREEMPTED | SUCCEEDED | ABORTED) => Some(&[WaitingForResult]),
            (Preempting, PREEMPTING) => Some(&[]),
            _ => None,
        };
        path.unwrap_or_else(|| {
            self.invalid += 1;
            &[]
        })
    }
}

/// How long a result waits, for a goal that has had feedback, before the client applies it:
/// feedback and results travel on two links, each read on its own, so feedback the server
/// published just before the result can be read just after it, and a goal that is DONE
/// takes no feedback (roscpp's client drops it; a udpros client of any server keeps it when
/// it is this late at most).
pub const RESULT_GRACE: Duration = Duration::from_millis(10);

/// Results held for [`RESULT_GRACE`], oldest first: the client's task applies each when
/// it is [`due`](Self::due), having taken the goal's late feedback meanwhile. One per
/// goal (a second result for a goal already held is the server repeating itself), and the
/// caller holds only goals it follows, so the goals it tracks bound it.
#[derive(Debug)]
pub struct HeldResults<T> {
    held: VecDeque<Held<T>>,
}

#[derive(Debug)]
struct Held<T> {
    due: Instant,
    goal: String,
    result: T,
}

impl<T> Default for HeldResults<T> {
    fn default() -> Self {
        HeldResults {
            held: VecDeque::new(),
        }
    }
}

impl<T> HeldResults<T> {
    /// Holds `goal`'s `result`, arrived at `now`, until [`RESULT_GRACE`] later. False (and
    /// the result dropped) when the goal's result is held already.
    pub fn hold(&mut self, now: Instant, goal: &str, result: T) -> bool {
        if self.is_held(goal) {
            return false;
        }
        self.held.push_back(Held {
            due: now + RESULT_GRACE,
            goal: goal.to_string(),
            result,
        });
        true
    }

    /// Whether `goal`'s result is held.
    pub fn is_held(&self, goal: &str) -> bool {
        self.held.iter().any(|h| h.goal == goal)
    }

    /// When the oldest held result is due (`None`: nothing held).
    pub fn next_due(&self) -> Option<Instant> {
        self.held.front().map(|h| h.due)
    }

    /// The next result due by `now`, with its goal id, oldest first.
    pub fn due(&mut self, now: Instant) -> Option<(String, T)> {
        if self.held.front()?.due > now {
            return None;
        }
        self.held.pop_front().map(|h| (h.goal, h.result))
    }

    /// Drops `goal`'s held result (its client stopped following it).
    pub fn forget(&mut self, goal: &str) {
        self.held.retain(|h| h.goal != goal);
    }

    /// Every held result, due or not, oldest first (the client is shutting down).
    pub fn drain(&mut self) -> impl Iterator<Item = (String, T)> + '_ {
        self.held.drain(..).map(|h| (h.goal, h.result))
    }

    /// How many results are held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether no result is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::GoalId;

    fn st(code: u8) -> GoalStatus {
        GoalStatus {
            goal_id: GoalId {
                id: "g".into(),
                ..GoalId::default()
            },
            status: code,
            text: String::new(),
        }
    }

    #[test]
    fn a_goal_that_succeeds_passes_every_state_roscpp_reports() {
        let mut m = CommStateMachine::new();
        assert_eq!(m.simple_state(), SimpleState::Pending);
        assert_eq!(
            m.on_status(Some(&st(status::PENDING))),
            [CommState::Pending]
        );
        assert_eq!(m.on_status(Some(&st(status::ACTIVE))), [CommState::Active]);
        assert_eq!(m.simple_state(), SimpleState::Active);
        assert_eq!(
            m.on_status(Some(&st(status::SUCCEEDED))),
            [CommState::WaitingForResult]
        );
        assert_eq!(m.simple_state(), SimpleState::Active);
        assert_eq!(m.on_result(&st(status::SUCCEEDED)), [CommState::Done]);
        assert_eq!(m.simple_state(), SimpleState::Succeeded);
        assert!(m.on_status(None).is_empty(), "late arrays change nothing");
        assert!(!m.cancel());
    }

    #[test]
    fn a_result_alone_walks_the_whole_way() {
        let mut m = CommStateMachine::new();
        assert_eq!(
            m.on_result(&st(status::PREEMPTED)),
            [
                CommState::Active,
                CommState::Preempting,
                CommState::WaitingForResult,
                CommState::Done
            ]
        );
        assert_eq!(m.simple_state(), SimpleState::Preempted);
        let mut r = CommStateMachine::new();
        r.on_result(&st(status::RECALLED));
        assert_eq!(r.simple_state(), SimpleState::Recalled);
    }

    #[test]
    fn a_goal_the_server_stops_listing_is_lost() {
        let mut m = CommStateMachine::new();
        assert!(m.on_status(None).is_empty(), "not acknowledged yet: wait");
        m.on_status(Some(&st(status::ACTIVE)));
        assert_eq!(m.on_status(None), [CommState::Done]);
        assert_eq!(m.simple_state(), SimpleState::Lost);
        assert_eq!(m.latest_status().unwrap().status, status::LOST);
    }

    #[test]
    fn cancel_waits_for_the_server_s_answer() {
        let mut m = CommStateMachine::new();
        m.on_status(Some(&st(status::ACTIVE)));
        assert!(m.cancel());
        assert_eq!(m.state(), CommState::WaitingForCancelAck);
        assert_eq!(m.simple_state(), SimpleState::Active);
        assert_eq!(
            m.on_status(Some(&st(status::PREEMPTING))),
            [CommState::Preempting]
        );
        assert!(!m.cancel(), "already being cancelled");
        m.on_result(&st(status::PREEMPTED));
        assert_eq!(m.simple_state(), SimpleState::Preempted);
    }

    #[test]
    fn nonsense_from_the_server_is_counted_not_followed() {
        let mut m = CommStateMachine::new();
        m.on_status(Some(&st(status::ACTIVE)));
        assert!(m.on_status(Some(&st(status::PENDING))).is_empty());
        assert!(m.on_status(Some(&st(200))).is_empty());
        assert!(m.on_status(Some(&st(status::LOST))).is_empty());
        assert_eq!(m.state(), CommState::Active);
        assert_eq!(m.invalid_transitions(), 3);
    }

    #[test]
    fn every_state_and_code_is_handled_without_panic() {
        for first in 0..=10u8 {
            for second in 0..=10u8 {
                let mut m = CommStateMachine::new();
                m.on_status(Some(&st(first)));
                m.cancel();
                m.on_status(Some(&st(second)));
                m.on_result(&st(second));
                assert_eq!(m.state(), CommState::Done);
            }
        }
    }

    #[test]
    fn a_held_result_is_due_after_the_grace_and_not_before() {
        let t0 = Instant::now();
        let mut held = HeldResults::default();
        assert!(held.hold(t0, "a", 1));
        assert!(held.hold(t0 + Duration::from_millis(4), "b", 2));
        assert_eq!(held.next_due(), Some(t0 + RESULT_GRACE));
        assert_eq!(held.due(t0 + RESULT_GRACE - Duration::from_micros(1)), None);
        assert_eq!(held.due(t0 + RESULT_GRACE), Some(("a".to_string(), 1)));
        assert_eq!(held.due(t0 + RESULT_GRACE), None, "b is due 4 ms later");
        assert_eq!(
            held.due(t0 + Duration::from_millis(4) + RESULT_GRACE),
            Some(("b".to_string(), 2))
        );
        assert!(held.is_empty());
    }

    #[test]
    fn a_repeated_result_is_dropped_and_a_forgotten_goal_never_comes_due() {
        let t0 = Instant::now();
        let mut held = HeldResults::default();
        assert!(held.hold(t0, "a", 1));
        assert!(!held.hold(t0, "a", 2), "the first result stands");
        // A server repeating results for one goal grows nothing.
        for _ in 0..10_000 {
            held.hold(t0, "a", 3);
        }
        assert_eq!(held.len(), 1);
        assert!(held.hold(t0, "b", 4));
        held.forget("a");
        assert_eq!(held.due(t0 + RESULT_GRACE), Some(("b".to_string(), 4)));
        assert_eq!(held.next_due(), None);
    }
}
