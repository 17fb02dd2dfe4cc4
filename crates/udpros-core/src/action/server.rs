//! An action server's goal table: what roscpp's `ActionServerBase` keeps in its status
//! list, with its rules for new goals, cancel requests and goal handles, and bounds it
//! lacks.
//!
//! The table decides; the caller publishes. Each call returns what has to go out (a goal
//! for the server's code, a result to publish, goals whose cancel the code must hear),
//! and [`GoalTable::next_status_at`] says when the status array is due: at the status rate,
//! and soon after any change, but never more often than every [`MIN_STATUS_GAP`], so a
//! storm of goals or cancels costs one array per gap, not one per message.

use super::{status, GoalId, GoalStatus, Stamp};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// The shortest time between two status arrays.
pub const MIN_STATUS_GAP: Duration = Duration::from_millis(10);

/// How far past the server's clock a cancel-by-stamp may reach for goals still to come: a
/// stamp from a client whose clock runs ahead is honoured, one from the year 2100 does not
/// cancel every goal the server will ever get.
pub const CANCEL_STAMP_LEEWAY_SECS: u32 = 60;

/// The longest goal id the table keeps (bytes). A goal with a longer id is refused; a
/// cancel for a longer unknown id is not remembered.
pub const MAX_ID_LEN: usize = 4096;

/// A server's settings that shape its table.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// The most goals listed at once. When full, the oldest finished goals go first; a new
    /// goal that finds only unfinished ones is rejected at once.
    pub max_goals: usize,
    /// How long a finished goal stays listed (`status_list_timeout`, 5 s in actionlib).
    pub status_list_timeout: Duration,
    /// Status arrays per second when nothing changes (`actionlib_status_frequency`, 5 Hz);
    /// zero or less: only after changes.
    pub status_frequency: f64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_goals: 4096,
            status_list_timeout: Duration::from_secs(5),
            status_frequency: 5.0,
        }
    }
}

/// One goal in the table, as its handle names it. Keys are never reused, so a handle of a
/// goal that left the table cannot touch a later goal with the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GoalKey(u64);

/// What became of a goal that arrived on `<ns>/goal`.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    /// A new goal, PENDING: the server's code decides on it.
    New(GoalKey),
    /// Stamped at or before the last cancel-by-stamp: RECALLED at once, the code never
    /// sees it. Publish this result.
    Recalled(GoalStatus),
    /// Its id is listed already: nothing new. When a cancel for it had come first, it is
    /// now RECALLED: publish that result.
    Duplicate {
        /// The result to publish, if any.
        recalled: Option<GoalStatus>,
    },
    /// The table is full of unfinished goals: the goal is REJECTED and not kept. Publish
    /// this result.
    Refused(GoalStatus),
}

/// A transition that the goal's state does not allow (succeeding a goal that was never
/// accepted, accepting one twice...). The goal is left as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTransition {
    /// The goal's status code.
    pub from: u8,
    /// What was asked.
    pub to: &'static str,
}

impl std::fmt::Display for BadTransition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a goal that is {} cannot be {}",
            status::name(self.from),
            self.to
        )
    }
}

impl std::error::Error for BadTransition {}

#[derive(Debug)]
struct Entry {
    status: GoalStatus,
    /// When it leaves the table (set once it is finished, or abandoned).
    expires: Option<Instant>,
}

/// The status list of one action server. See the module documentation.
#[derive(Debug)]
pub struct GoalTable {
    entries: BTreeMap<u64, Entry>,
    by_id: HashMap<String, u64>,
    /// Unfinished goals (PENDING, ACTIVE, RECALLING, PREEMPTING), the ones a cancel can
    /// reach; cancel requests scan only these.
    live: BTreeSet<u64>,
    /// Finished goals by the time they leave.
    expiring: BTreeSet<(Instant, u64)>,
    next_key: u64,
    last_cancel: Stamp,
    id_prefix: String,
    generated_ids: u64,
    limits: Limits,
    period: Option<Duration>,
    created: Instant,
    last_status: Option<Instant>,
    changed: bool,
}

impl GoalTable {
    /// An empty table made at `now`; ids it makes for goals that came without one start
    /// with `node_name`, as roscpp's do. Its first status array is due at once.
    pub fn new(node_name: &str, mut limits: Limits, now: Instant) -> GoalTable {
        // A year stands for "for ever", and keeps `now + timeout` within what an Instant holds.
        limits.status_list_timeout = limits
            .status_list_timeout
            .min(Duration::from_secs(365 * 86_400));
        // Zero, negative and NaN rates: no periodic arrays; absurdly low ones: one an hour.
        let period = (limits.status_frequency > 0.0).then(|| {
            Duration::try_from_secs_f64(1.0 / limits.status_frequency)
                .unwrap_or(Duration::MAX)
                .clamp(MIN_STATUS_GAP, Duration::from_secs(3600))
        });
        GoalTable {
            entries: BTreeMap::new(),
            by_id: HashMap::new(),
            live: BTreeSet::new(),
            expiring: BTreeSet::new(),
            next_key: 0,
            last_cancel: Stamp::ZERO,
            id_prefix: node_name.to_string(),
            generated_ids: 0,
            limits,
            period,
            created: now,
            last_status: None,
            changed: true,
        }
    }

    /// How many goals are listed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no goal is listed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A goal arrived (its id as sent); `now_stamp` is the server's ROS clock.
    pub fn goal_arrived(&mut self, goal_id: GoalId, now_stamp: Stamp, now: Instant) -> Arrival {
        if let Some(&key) = self.by_id.get(&goal_id.id) {
            let recalled = match self.entries.get(&key) {
                Some(e) if e.status.status == status::RECALLING => self
                    .finish(
                        key,
                        status::RECALLED,
                        "canceled before the goal arrived",
                        now,
                    )
                    .ok(),
                _ => None,
            };
            return Arrival::Duplicate { recalled };
        }
        if goal_id.id.len() > MAX_ID_LEN {
            return Arrival::Refused(GoalStatus {
                text: format!("goal ids longer than {MAX_ID_LEN} bytes are refused"),
                goal_id,
                status: status::REJECTED,
            });
        }
        let cancelled_by_stamp = !goal_id.stamp.is_zero() && goal_id.stamp <= self.last_cancel;
        let mut goal_id = goal_id;
        if goal_id.id.is_empty() {
            self.generated_ids += 1;
            goal_id.id = format!(
                "{}-{}-{}.{}",
                self.id_prefix, self.generated_ids, now_stamp.sec, now_stamp.nsec
            );
        }
        if goal_id.stamp.is_zero() {
            goal_id.stamp = now_stamp;
        }
        let status = GoalStatus {
            goal_id,
            status: status::PENDING,
            text: String::new(),
        };
        if !self.make_room(now) {
            return Arrival::Refused(GoalStatus {
                status: status::REJECTED,
                text: format!(
                    "the server holds {} unfinished goals, its limit",
                    self.limits.max_goals
                ),
                ..status
            });
        }
        let key = self.insert(status, now);
        if cancelled_by_stamp {
            let text = "This goal handle was canceled by the action server because its timestamp is before the timestamp of the last cancel request";
            return match self.finish(key, status::RECALLED, text, now) {
                Ok(result) => Arrival::Recalled(result),
                Err(_) => Arrival::New(GoalKey(key)), // unreachable: it is PENDING
            };
        }
        Arrival::New(GoalKey(key))
    }

    /// A cancel request arrived on `<ns>/cancel`. Returns the goals whose cancel the
    /// server's code must hear (now RECALLING or PREEMPTING), as actionlib's rules pick
    /// them: an empty id and a zero stamp cancel every goal; an id cancels that goal; a
    /// stamp cancels every goal stamped at or before it, and goals still to come that are.
    /// A cancel for an id not (yet) listed is remembered, so that the goal is recalled
    /// when it arrives.
    pub fn cancel_requested(
        &mut self,
        cancel: &GoalId,
        now_stamp: Stamp,
        now: Instant,
    ) -> Vec<GoalKey> {
        let all = cancel.id.is_empty() && cancel.stamp.is_zero();
        let by_id = (!cancel.id.is_empty())
            .then(|| self.by_id.get(&cancel.id).copied())
            .flatten();
        let matched: Vec<u64> = if all || !cancel.stamp.is_zero() {
            self.live
                .iter()
                .copied()
                .filter(|key| {
                    all || Some(*key) == by_id
                        || self
                            .entries
                            .get(key)
                            .is_some_and(|e| e.status.goal_id.stamp <= cancel.stamp)
                })
                .collect()
        } else {
            by_id.into_iter().collect()
        };
        let mut to_tell = Vec::new();
        for key in matched {
            let Some(entry) = self.entries.get_mut(&key) else {
                continue;
            };
            let next = match entry.status.status {
                status::PENDING => status::RECALLING,
                status::ACTIVE => status::PREEMPTING,
                _ => continue,
            };
            entry.status.status = next;
            self.changed = true;
            to_tell.push(GoalKey(key));
        }
        let rememberable = !cancel.id.is_empty() && cancel.id.len() <= MAX_ID_LEN;
        if rememberable && by_id.is_none() && self.make_room(now) {
            // Remembered as RECALLING; it leaves like a finished goal if its goal never
            // comes.
            let key = self.insert(
                GoalStatus {
                    goal_id: cancel.clone(),
                    status: status::RECALLING,
                    text: String::new(),
                },
                now,
            );
            self.live.remove(&key);
            self.expire_later(key, now);
        }
        let reach = now_stamp.plus_secs(CANCEL_STAMP_LEEWAY_SECS);
        self.last_cancel = self.last_cancel.max(cancel.stamp.min(reach));
        to_tell
    }

    /// The goal's id and status, while it is listed.
    pub fn status(&self, key: GoalKey) -> Option<&GoalStatus> {
        self.entries.get(&key.0).map(|e| &e.status)
    }

    /// The server's code accepts the goal: PENDING becomes ACTIVE, RECALLING (a cancel came
    /// first) becomes PREEMPTING.
    pub fn accept(&mut self, key: GoalKey, text: &str) -> Result<(), BadTransition> {
        let entry = self.entries.get_mut(&key.0).ok_or(BadTransition {
            from: status::LOST,
            to: "accepted",
        })?;
        entry.status.status = match entry.status.status {
            status::PENDING => status::ACTIVE,
            status::RECALLING => status::PREEMPTING,
            from => {
                return Err(BadTransition {
                    from,
                    to: "accepted",
                })
            }
        };
        entry.status.text = text.to_string();
        self.changed = true;
        Ok(())
    }

    /// The goal ends cancelled (RECALLED if it was never accepted, else PREEMPTED).
    /// Returns the status its result carries.
    pub fn set_canceled(
        &mut self,
        key: GoalKey,
        text: &str,
        now: Instant,
    ) -> Result<GoalStatus, BadTransition> {
        let to = match self.code(key, "canceled")? {
            status::PENDING | status::RECALLING => status::RECALLED,
            status::ACTIVE | status::PREEMPTING => status::PREEMPTED,
            from => {
                return Err(BadTransition {
                    from,
                    to: "canceled",
                })
            }
        };
        self.finish(key.0, to, text, now)
    }

    /// The server's code refuses a goal it has not accepted.
    pub fn reject(
        &mut self,
        key: GoalKey,
        text: &str,
        now: Instant,
    ) -> Result<GoalStatus, BadTransition> {
        match self.code(key, "rejected")? {
            status::PENDING | status::RECALLING => self.finish(key.0, status::REJECTED, text, now),
            from => Err(BadTransition {
                from,
                to: "rejected",
            }),
        }
    }

    /// An accepted goal failed.
    pub fn abort(
        &mut self,
        key: GoalKey,
        text: &str,
        now: Instant,
    ) -> Result<GoalStatus, BadTransition> {
        self.end_accepted(key, status::ABORTED, "aborted", text, now)
    }

    /// An accepted goal is done.
    pub fn succeed(
        &mut self,
        key: GoalKey,
        text: &str,
        now: Instant,
    ) -> Result<GoalStatus, BadTransition> {
        self.end_accepted(key, status::SUCCEEDED, "succeeded", text, now)
    }

    /// The server's code let go of an unfinished goal: it ends as the client would least
    /// be misled by (REJECTED or RECALLED before it was accepted, ABORTED or PREEMPTED
    /// after), so no client waits for it forever. `None` if it had finished.
    pub fn abandon(&mut self, key: GoalKey, now: Instant) -> Option<GoalStatus> {
        self.end_unfinished(
            key.0,
            "the action server let go of this goal without an answer",
            now,
        )
    }

    /// The server is going away: every unfinished goal ends as [`abandon`](Self::abandon)
    /// ends one, with `text`. Returns the results to publish.
    pub fn abandon_all(&mut self, text: &str, now: Instant) -> Vec<GoalStatus> {
        let live: Vec<u64> = self.live.iter().copied().collect();
        live.into_iter()
            .filter_map(|key| self.end_unfinished(key, text, now))
            .collect()
    }

    fn end_unfinished(&mut self, key: u64, text: &str, now: Instant) -> Option<GoalStatus> {
        let to = match self.entries.get(&key)?.status.status {
            status::PENDING => status::REJECTED,
            status::RECALLING => status::RECALLED,
            status::ACTIVE => status::ABORTED,
            status::PREEMPTING => status::PREEMPTED,
            _ => return None,
        };
        self.finish(key, to, text, now).ok()
    }

    /// When the next status array is due.
    pub fn next_status_at(&self) -> Option<Instant> {
        let Some(last) = self.last_status else {
            return Some(self.created); // never sent: at once
        };
        let soon = self.changed.then(|| last + MIN_STATUS_GAP);
        let periodic = self.period.map(|p| last + p);
        match (soon, periodic) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Every listed goal's status, in the order they came.
    pub fn statuses(&self) -> impl Iterator<Item = &GoalStatus> {
        self.entries.values().map(|e| &e.status)
    }

    /// The status list to publish now; finished goals past their time leave first.
    pub fn status_list(&mut self, now: Instant) -> Vec<GoalStatus> {
        while let Some(&(at, key)) = self.expiring.first() {
            if at > now {
                break;
            }
            self.expiring.pop_first();
            if let Some(entry) = self.entries.remove(&key) {
                self.by_id.remove(&entry.status.goal_id.id);
            }
        }
        self.last_status = Some(now);
        self.changed = false;
        self.entries.values().map(|e| e.status.clone()).collect()
    }

    fn code(&self, key: GoalKey, to: &'static str) -> Result<u8, BadTransition> {
        self.entries
            .get(&key.0)
            .map(|e| e.status.status)
            .ok_or(BadTransition {
                from: status::LOST,
                to,
            })
    }

    fn end_accepted(
        &mut self,
        key: GoalKey,
        code: u8,
        to: &'static str,
        text: &str,
        now: Instant,
    ) -> Result<GoalStatus, BadTransition> {
        match self.code(key, to)? {
            status::ACTIVE | status::PREEMPTING => self.finish(key.0, code, text, now),
            from => Err(BadTransition { from, to }),
        }
    }

    fn finish(
        &mut self,
        key: u64,
        code: u8,
        text: &str,
        now: Instant,
    ) -> Result<GoalStatus, BadTransition> {
        let entry = self.entries.get_mut(&key).ok_or(BadTransition {
            from: status::LOST,
            to: status::name(code),
        })?;
        entry.status.status = code;
        entry.status.text = text.to_string();
        let result = entry.status.clone();
        self.live.remove(&key);
        self.expire_later(key, now);
        self.changed = true;
        Ok(result)
    }

    fn expire_later(&mut self, key: u64, now: Instant) {
        if let Some(entry) = self.entries.get_mut(&key) {
            if let Some(old) = entry.expires.take() {
                self.expiring.remove(&(old, key));
            }
            let at = now + self.limits.status_list_timeout;
            entry.expires = Some(at);
            self.expiring.insert((at, key));
        }
    }

    fn insert(&mut self, status: GoalStatus, _now: Instant) -> u64 {
        let key = self.next_key;
        self.next_key += 1;
        self.by_id.insert(status.goal_id.id.clone(), key);
        self.entries.insert(
            key,
            Entry {
                status,
                expires: None,
            },
        );
        self.live.insert(key);
        self.changed = true;
        key
    }

    /// Makes room for one more entry, dropping the finished goal that leaves soonest;
    /// false when every listed goal is unfinished.
    fn make_room(&mut self, _now: Instant) -> bool {
        while self.entries.len() >= self.limits.max_goals.max(1) {
            let Some((_, key)) = self.expiring.pop_first() else {
                return false;
            };
            if let Some(entry) = self.entries.remove(&key) {
                self.by_id.remove(&entry.status.goal_id.id);
            }
            self.changed = true;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str, sec: u32) -> GoalId {
        GoalId {
            stamp: Stamp { sec, nsec: 0 },
            id: name.into(),
        }
    }

    fn table(max_goals: usize) -> GoalTable {
        GoalTable::new(
            "/srv",
            Limits {
                max_goals,
                ..Limits::default()
            },
            Instant::now(),
        )
    }

    fn new_key(arrival: Arrival) -> GoalKey {
        match arrival {
            Arrival::New(key) => key,
            other => panic!("expected a new goal, got {other:?}"),
        }
    }

    const NOW: Stamp = Stamp { sec: 100, nsec: 0 };

    #[test]
    fn a_goal_goes_pending_active_succeeded_and_leaves_after_the_timeout() {
        let t0 = Instant::now();
        let mut t = table(10);
        let key = new_key(t.goal_arrived(id("a", 5), NOW, t0));
        assert_eq!(t.status(key).unwrap().status, status::PENDING);
        t.accept(key, "on it").unwrap();
        assert_eq!(t.status(key).unwrap().status, status::ACTIVE);
        assert!(t.accept(key, "").is_err(), "accepted twice");
        let result = t.succeed(key, "done", t0).unwrap();
        assert_eq!(
            (result.status, result.text.as_str()),
            (status::SUCCEEDED, "done")
        );
        assert!(
            t.abort(key, "", t0).is_err(),
            "finished goals stay finished"
        );
        assert_eq!(t.status_list(t0 + Duration::from_secs(4)).len(), 1);
        assert!(t.status_list(t0 + Duration::from_secs(6)).is_empty());
        assert!(t.status(key).is_none());
    }

    #[test]
    fn goals_without_id_or_stamp_get_the_server_s() {
        let mut t = table(10);
        let key = new_key(t.goal_arrived(GoalId::default(), NOW, Instant::now()));
        let st = t.status(key).unwrap();
        assert_eq!(st.goal_id.id, "/srv-1-100.0");
        assert_eq!(st.goal_id.stamp, NOW);
        let key2 = new_key(t.goal_arrived(GoalId::default(), NOW, Instant::now()));
        assert_ne!(t.status(key2).unwrap().goal_id.id, "/srv-1-100.0");
    }

    #[test]
    fn cancels_by_id_by_stamp_and_for_all_reach_the_goals_actionlib_says() {
        let t0 = Instant::now();
        let mut t = table(10);
        let a = new_key(t.goal_arrived(id("a", 1), NOW, t0));
        let b = new_key(t.goal_arrived(id("b", 2), NOW, t0));
        let c = new_key(t.goal_arrived(id("c", 3), NOW, t0));
        t.accept(b, "").unwrap();
        assert_eq!(t.cancel_requested(&id("a", 0), NOW, t0), vec![a]);
        assert_eq!(t.status(a).unwrap().status, status::RECALLING);
        // By stamp: b (2 ≤ 2) is reached, c (3) is not; a is already being recalled.
        assert_eq!(t.cancel_requested(&id("", 2), NOW, t0), vec![b]);
        assert_eq!(t.status(b).unwrap().status, status::PREEMPTING);
        assert_eq!(t.status(c).unwrap().status, status::PENDING);
        assert_eq!(t.cancel_requested(&GoalId::default(), NOW, t0), vec![c]);
        // Recalling, then accepted: preempting; then cancelled: preempted.
        t.accept(a, "").unwrap();
        assert_eq!(t.status(a).unwrap().status, status::PREEMPTING);
        assert_eq!(
            t.set_canceled(a, "ok", t0).unwrap().status,
            status::PREEMPTED
        );
        assert_eq!(
            t.set_canceled(c, "ok", t0).unwrap().status,
            status::RECALLED
        );
        // A goal stamped before the last cancel is recalled on arrival.
        match t.goal_arrived(id("old", 2), NOW, t0) {
            Arrival::Recalled(st) => assert_eq!(st.status, status::RECALLED),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            t.goal_arrived(id("new", 4), NOW, t0),
            Arrival::New(_)
        ));
    }

    #[test]
    fn a_cancel_before_its_goal_recalls_the_goal_when_it_comes() {
        let t0 = Instant::now();
        let mut t = table(10);
        assert!(t.cancel_requested(&id("early", 0), NOW, t0).is_empty());
        assert_eq!(t.status_list(t0)[0].status, status::RECALLING);
        match t.goal_arrived(id("early", 0), NOW, t0) {
            Arrival::Duplicate { recalled: Some(st) } => assert_eq!(st.status, status::RECALLED),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            t.goal_arrived(id("early", 0), NOW, t0),
            Arrival::Duplicate { recalled: None }
        );
    }

    #[test]
    fn a_far_future_cancel_stamp_does_not_cancel_every_goal_to_come() {
        let t0 = Instant::now();
        let mut t = table(10);
        t.cancel_requested(&id("", u32::MAX), NOW, t0);
        // Within the leeway: recalled. Past it: a new goal.
        assert!(matches!(
            t.goal_arrived(id("x", 150), NOW, t0),
            Arrival::Recalled(_)
        ));
        assert!(matches!(
            t.goal_arrived(id("y", 200), NOW, t0),
            Arrival::New(_)
        ));
    }

    #[test]
    fn a_full_table_drops_finished_goals_first_then_refuses() {
        let t0 = Instant::now();
        let mut t = table(3);
        let keys: Vec<GoalKey> = (0..3)
            .map(|i| new_key(t.goal_arrived(id(&format!("g{i}"), 1), NOW, t0)))
            .collect();
        t.reject(keys[1], "no", t0).unwrap();
        assert!(matches!(
            t.goal_arrived(id("g3", 1), NOW, t0),
            Arrival::New(_)
        ));
        assert!(t.status(keys[1]).is_none(), "the finished goal made room");
        match t.goal_arrived(id("g4", 1), NOW, t0) {
            Arrival::Refused(st) => {
                assert_eq!(
                    (st.status, st.goal_id.id.as_str()),
                    (status::REJECTED, "g4")
                )
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(t.len(), 3);
        // A cancel for an unknown id is not remembered when there is no room.
        t.cancel_requested(&id("nowhere", 0), NOW, t0);
        assert_eq!(t.len(), 3);
        // Nor is a goal or a cancel with a megabyte id, whatever the room.
        let mut roomy = table(10);
        let huge = "x".repeat(1 << 20);
        assert!(matches!(
            roomy.goal_arrived(id(&huge, 1), NOW, t0),
            Arrival::Refused(_)
        ));
        roomy.cancel_requested(&id(&huge, 0), NOW, t0);
        assert!(roomy.is_empty());
    }

    #[test]
    fn a_hundred_thousand_goals_and_cancels_stay_within_the_bound() {
        let t0 = Instant::now();
        let mut t = table(1000);
        let mut refused = 0;
        for i in 0..100_000u32 {
            match t.goal_arrived(id(&i.to_string(), i), NOW, t0) {
                Arrival::New(key) => {
                    if i % 2 == 0 {
                        t.reject(key, "", t0).unwrap();
                    }
                }
                Arrival::Refused(_) => refused += 1,
                other => panic!("{other:?}"),
            }
            t.cancel_requested(&id(&format!("c{i}"), 0), NOW, t0);
            assert!(t.len() <= 1000);
        }
        assert!(refused > 90_000, "{refused}");
        // Cancel-all reaches the 1000 unfinished goals; the list stays bounded.
        assert_eq!(t.cancel_requested(&GoalId::default(), NOW, t0).len(), 1000);
        assert_eq!(t.status_list(t0).len(), 1000);
    }

    #[test]
    fn abandoned_goals_end_so_clients_stop_waiting() {
        let t0 = Instant::now();
        let mut t = table(10);
        let a = new_key(t.goal_arrived(id("a", 1), NOW, t0));
        let b = new_key(t.goal_arrived(id("b", 1), NOW, t0));
        t.accept(b, "").unwrap();
        assert_eq!(t.abandon(a, t0).unwrap().status, status::REJECTED);
        assert_eq!(t.abandon(b, t0).unwrap().status, status::ABORTED);
        assert_eq!(t.abandon(b, t0), None);
        let c = new_key(t.goal_arrived(id("c", 1), NOW, t0));
        let d = new_key(t.goal_arrived(id("d", 1), NOW, t0));
        t.accept(d, "").unwrap();
        t.cancel_requested(&id("d", 0), NOW, t0);
        let ended = t.abandon_all("bye", t0);
        let codes: Vec<u8> = ended.iter().map(|s| s.status).collect();
        assert_eq!(codes, [status::REJECTED, status::PREEMPTED]);
        assert!(ended.iter().all(|s| s.text == "bye"));
        assert!(t.status(c).is_some_and(|s| status::is_terminal(s.status)));
    }

    #[test]
    fn status_arrays_follow_the_rate_and_changes_but_not_faster_than_the_gap() {
        let t0 = Instant::now();
        let mut t = table(10);
        assert!(
            t.next_status_at().unwrap() <= Instant::now(),
            "first at once"
        );
        t.status_list(t0);
        assert_eq!(t.next_status_at(), Some(t0 + Duration::from_millis(200)));
        t.goal_arrived(id("a", 1), NOW, t0);
        assert_eq!(t.next_status_at(), Some(t0 + MIN_STATUS_GAP));
        let quiet = GoalTable::new(
            "/n",
            Limits {
                status_frequency: 0.0,
                ..Limits::default()
            },
            t0,
        );
        let mut quiet = quiet;
        quiet.status_list(t0);
        assert_eq!(quiet.next_status_at(), None);
        let fast = GoalTable::new(
            "/n",
            Limits {
                status_frequency: 1e12,
                ..Limits::default()
            },
            t0,
        );
        let mut fast = fast;
        fast.status_list(t0);
        assert_eq!(fast.next_status_at(), Some(t0 + MIN_STATUS_GAP));
        let mut forever = GoalTable::new(
            "/n",
            Limits {
                status_list_timeout: Duration::MAX,
                ..Limits::default()
            },
            t0,
        );
        if let Arrival::New(key) = forever.goal_arrived(id("f", 1), NOW, t0) {
            forever.reject(key, "", t0).unwrap();
        }
        assert_eq!(forever.status_list(t0).len(), 1);
        for odd in [f64::NAN, f64::INFINITY, 1e-320, -1.0] {
            let limits = Limits {
                status_frequency: odd,
                ..Limits::default()
            };
            let mut t = GoalTable::new("/n", limits, t0);
            t.status_list(t0);
            assert!(t
                .next_status_at()
                .is_none_or(|at| at <= t0 + Duration::from_secs(3600)));
        }
    }
}
