//! actionlib's protocol without I/O: the goal table of an action server and the
//! communication state machine of a client's goal, as roscpp's actionlib defines them, and
//! the few wire shapes every action shares.
//!
//! An action `<ns>` is five topics: clients publish `<ns>/goal` (`<A>ActionGoal`: a header,
//! a [`GoalId`], the goal) and `<ns>/cancel` (a bare [`GoalId`]); the server publishes
//! `<ns>/status` (latched [`StatusArray`]s, 5 Hz by default), `<ns>/feedback` and
//! `<ns>/result` (`<A>ActionFeedback` and `<A>ActionResult`: a header, a [`GoalStatus`],
//! the feedback or result). Whatever the action, those messages start with fields of known
//! types and end with the action's own part, so [`split_goal`] and [`split_status_message`]
//! take them apart without knowing the action's types, and [`goal_message`] and
//! [`status_message`] put them together from the encoded part.

pub mod client;
pub mod client_goals;
pub mod server;

use crate::ros1::{self, Error};
use serde::{Deserialize, Serialize};

/// A ROS `time` as actionlib's messages carry it (`GoalID.stamp`, `Header.stamp`).
///
/// Ordered by the instant it names, so that a hostile `nsec` above a second still compares
/// as roscpp's `ros::Time` would after normalizing it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stamp {
    /// Seconds.
    pub sec: u32,
    /// Nanoseconds (normally below a second).
    pub nsec: u32,
}

impl Stamp {
    /// Time zero: "no stamp" in a [`GoalId`].
    pub const ZERO: Stamp = Stamp { sec: 0, nsec: 0 };

    /// Nanoseconds since time zero.
    pub fn as_nanos(self) -> u64 {
        u64::from(self.sec) * 1_000_000_000 + u64::from(self.nsec)
    }

    /// True for time zero (after normalizing, as roscpp compares).
    pub fn is_zero(self) -> bool {
        self.as_nanos() == 0
    }

    /// The stamp `seconds` later, saturating.
    pub fn plus_secs(self, seconds: u32) -> Stamp {
        Stamp {
            sec: self.sec.saturating_add(seconds),
            nsec: self.nsec,
        }
    }
}

impl PartialOrd for Stamp {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Stamp {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_nanos().cmp(&other.as_nanos())
    }
}

/// `actionlib_msgs/GoalID`: who a goal is. Ids are unique per goal; the stamp orders goals
/// for cancel requests ("every goal stamped at or before").
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GoalId {
    /// When the client made the goal (zero: the server stamps it on arrival).
    pub stamp: Stamp,
    /// The goal's id (empty: the server makes one on arrival).
    pub id: String,
}

/// `actionlib_msgs/GoalStatus`: a goal and where it stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalStatus {
    /// The goal.
    pub goal_id: GoalId,
    /// One of the [`status`] codes.
    pub status: u8,
    /// The server's words on it.
    pub text: String,
}

/// `std_msgs/Header`, the first field of every action message but the cancel request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Filled in by the publisher.
    pub seq: u32,
    /// When the message was made.
    pub stamp: Stamp,
    /// Unused by actionlib.
    pub frame_id: String,
}

/// `actionlib_msgs/GoalStatusArray`: what `<ns>/status` carries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusArray {
    /// Stamped when published.
    pub header: Header,
    /// Every goal the server still lists.
    pub status_list: Vec<GoalStatus>,
}

/// `actionlib_msgs/GoalStatus` codes.
pub mod status {
    /// Received, not yet accepted by the server's code.
    pub const PENDING: u8 = 0;
    /// Being worked on.
    pub const ACTIVE: u8 = 1;
    /// Cancelled after it became active; terminal.
    pub const PREEMPTED: u8 = 2;
    /// Done; terminal.
    pub const SUCCEEDED: u8 = 3;
    /// Failed while active; terminal.
    pub const ABORTED: u8 = 4;
    /// Refused while pending; terminal.
    pub const REJECTED: u8 = 5;
    /// Cancel requested while active.
    pub const PREEMPTING: u8 = 6;
    /// Cancel requested while pending.
    pub const RECALLING: u8 = 7;
    /// Cancelled before it became active; terminal.
    pub const RECALLED: u8 = 8;
    /// The client lost track of it (client side only; servers never send it).
    pub const LOST: u8 = 9;

    /// The code's name as `rostopic echo` users know it (`"UNKNOWN"` past LOST).
    pub fn name(code: u8) -> &'static str {
        const NAMES: [&str; 10] = [
            "PENDING",
            "ACTIVE",
            "PREEMPTED",
            "SUCCEEDED",
            "ABORTED",
            "REJECTED",
            "PREEMPTING",
            "RECALLING",
            "RECALLED",
            "LOST",
        ];
        NAMES.get(usize::from(code)).copied().unwrap_or("UNKNOWN")
    }

    /// True for the codes after which a goal never changes.
    pub fn is_terminal(code: u8) -> bool {
        matches!(
            code,
            PREEMPTED | SUCCEEDED | ABORTED | REJECTED | RECALLED | LOST
        )
    }
}

/// An `<A>ActionGoal` body: a header stamped `stamp`, the goal id, then `goal` (the
/// encoded `<A>Goal`).
pub fn goal_message(stamp: Stamp, goal_id: &GoalId, goal: &[u8]) -> Result<Vec<u8>, Error> {
    let mut out = ros1::to_vec(&(
        Header {
            seq: 0,
            stamp,
            frame_id: String::new(),
        },
        goal_id,
    ))?;
    out.extend_from_slice(goal);
    Ok(out)
}

/// Takes an `<A>ActionGoal` body apart: its header, goal id and the encoded goal.
pub fn split_goal(body: &[u8]) -> Result<(Header, GoalId, &[u8]), Error> {
    let ((header, goal_id), goal) = ros1::from_prefix::<(Header, GoalId)>(body)?;
    Ok((header, goal_id, goal))
}

/// An `<A>ActionResult` or `<A>ActionFeedback` body: a header stamped `stamp`, the goal's
/// status, then `payload` (the encoded `<A>Result` or `<A>Feedback`).
pub fn status_message(stamp: Stamp, status: &GoalStatus, payload: &[u8]) -> Result<Vec<u8>, Error> {
    let mut out = ros1::to_vec(&(
        Header {
            seq: 0,
            stamp,
            frame_id: String::new(),
        },
        status,
    ))?;
    out.extend_from_slice(payload);
    Ok(out)
}

/// Takes an `<A>ActionResult` or `<A>ActionFeedback` body apart: its header, the goal's
/// status and the encoded result or feedback.
pub fn split_status_message(body: &[u8]) -> Result<(Header, GoalStatus, &[u8]), Error> {
    let ((header, status), payload) = ros1::from_prefix::<(Header, GoalStatus)>(body)?;
    Ok((header, status, payload))
}

/// One entry of a status array, borrowed from the message body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusRef<'a> {
    /// The goal's id, as bytes (a hostile server's ids need not be UTF-8).
    pub id: &'a [u8],
    /// The goal's stamp.
    pub stamp: Stamp,
    /// Its status code.
    pub status: u8,
    /// The server's text, as bytes.
    pub text: &'a [u8],
}

impl StatusRef<'_> {
    /// An owned status (invalid UTF-8 replaced, as genpy does).
    pub fn to_owned_status(&self) -> GoalStatus {
        GoalStatus {
            goal_id: GoalId {
                stamp: self.stamp,
                id: String::from_utf8_lossy(self.id).into_owned(),
            },
            status: self.status,
            text: String::from_utf8_lossy(self.text).into_owned(),
        }
    }
}

/// Reads a `GoalStatusArray` body entry by entry without building it: a client looks up
/// the few goals it follows in an array that may list a million (a status array of 64 MB
/// would otherwise become several hundred MB of strings). Returns the array's header stamp
/// and calls `each` for every entry; an error at the first malformed byte.
pub fn for_each_status<'a>(
    body: &'a [u8],
    mut each: impl FnMut(StatusRef<'a>),
) -> Result<Stamp, Error> {
    let mut reader = Reader(body);
    reader.take(4)?; // seq
    let stamp = reader.stamp()?;
    reader.bytes()?; // frame_id
    let count = reader.u32()?;
    for _ in 0..count {
        let stamp = reader.stamp()?;
        let id = reader.bytes()?;
        let status = reader.take(1)?[0];
        let text = reader.bytes()?;
        each(StatusRef {
            id,
            stamp,
            status,
            text,
        });
    }
    match reader.0.len() {
        0 => Ok(stamp),
        n => Err(Error::TrailingBytes(n)),
    }
}

/// A cursor over a ROS1 body, for the fields [`for_each_status`] reads.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if n > self.0.len() {
            return Err(Error::UnexpectedEnd {
                needed: n,
                remaining: self.0.len(),
            });
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, Error> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn stamp(&mut self) -> Result<Stamp, Error> {
        Ok(Stamp {
            sec: self.u32()?,
            nsec: self.u32()?,
        })
    }

    fn bytes(&mut self) -> Result<&'a [u8], Error> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_arrays_are_read_entry_by_entry_as_serde_reads_them_whole() {
        let array = StatusArray {
            header: Header {
                seq: 3,
                stamp: Stamp { sec: 9, nsec: 8 },
                frame_id: "f".into(),
            },
            status_list: (0..5)
                .map(|i| GoalStatus {
                    goal_id: GoalId {
                        stamp: Stamp {
                            sec: i,
                            nsec: u32::MAX,
                        },
                        id: format!("goal {i}"),
                    },
                    status: i as u8 * 50,
                    text: "t".repeat(i as usize),
                })
                .collect(),
        };
        let body = ros1::to_vec(&array).unwrap();
        let mut seen = Vec::new();
        let stamp = for_each_status(&body, |s| seen.push(s.to_owned_status())).unwrap();
        assert_eq!(stamp, array.header.stamp);
        assert_eq!(seen, array.status_list);
        for cut in 0..body.len() {
            assert!(
                for_each_status(&body[..cut], |_| {}).is_err(),
                "cut at {cut}"
            );
        }
        // A count of four billion entries in a short body: an error, not a long loop.
        let mut lying = body.clone();
        lying[17..21].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(for_each_status(&lying, |_| {}).is_err());
    }

    #[test]
    fn a_goal_message_comes_apart_into_what_made_it() {
        let id = GoalId {
            stamp: Stamp { sec: 7, nsec: 9 },
            id: "/n-1-7.9".into(),
        };
        let body = goal_message(Stamp { sec: 1, nsec: 2 }, &id, &[5, 0, 0, 0]).unwrap();
        // header: seq, stamp, "" ; goal id: stamp, "/n-1-7.9"; then the goal.
        assert_eq!(body.len(), 4 + 8 + 4 + 8 + 4 + 8 + 4);
        let (header, back, goal) = split_goal(&body).unwrap();
        assert_eq!(header.stamp, Stamp { sec: 1, nsec: 2 });
        assert_eq!(back, id);
        assert_eq!(goal, [5, 0, 0, 0]);
    }

    #[test]
    fn a_result_message_comes_apart_and_short_bodies_are_errors() {
        let st = GoalStatus {
            goal_id: GoalId {
                stamp: Stamp::ZERO,
                id: "g".into(),
            },
            status: status::SUCCEEDED,
            text: "fine".into(),
        };
        let body = status_message(Stamp::ZERO, &st, b"xyz").unwrap();
        let (_, back, payload) = split_status_message(&body).unwrap();
        assert_eq!(back, st);
        assert_eq!(payload, b"xyz");
        for cut in 0..body.len() - 3 {
            assert!(split_status_message(&body[..cut]).is_err(), "cut at {cut}");
        }
        // A string length far past the body is an error, not an allocation.
        let mut bad = body.clone();
        bad[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(split_status_message(&bad).is_err());
    }

    #[test]
    fn stamps_compare_as_instants() {
        let a = Stamp {
            sec: 1,
            nsec: 1_500_000_000,
        };
        let b = Stamp {
            sec: 2,
            nsec: 400_000_000,
        };
        assert!(a > b);
        assert!(Stamp { sec: 0, nsec: 0 }.is_zero());
        assert_eq!(status::name(status::RECALLED), "RECALLED");
        assert_eq!(status::name(200), "UNKNOWN");
        assert!(status::is_terminal(status::LOST) && !status::is_terminal(status::PREEMPTING));
    }
}
