//! actionlib's messages and state machines fed arbitrary bytes: the goal, result and
//! status-array readers never panic and agree with serde where both read; a goal table
//! driven by decoded goals and cancels stays within its bound, and a client's state
//! machine fed the decoded statuses only ever walks roscpp's transitions to DONE.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant};
use udpros::wire::action::client::{CommState, CommStateMachine};
use udpros::wire::action::server::{Arrival, GoalTable, Limits};
use udpros::wire::action::{self as action, Stamp};

fuzz_target!(|data: &[u8]| {
    let _ = action::split_goal(data);
    let _ = action::split_status_message(data);
    let mut listed = Vec::new();
    let whole = udpros::wire::from_slice::<action::StatusArray>(data);
    let streamed = action::for_each_status(data, |s| listed.push(s.to_owned_status()));
    if let (Ok(array), Ok(_)) = (&whole, &streamed) {
        assert_eq!(array.status_list, listed);
    }

    let t0 = Instant::now();
    let limits = Limits {
        max_goals: 8,
        status_list_timeout: Duration::from_millis(5),
        status_frequency: 5.0,
    };
    let mut table = GoalTable::new("/fuzz", limits, t0);
    let mut machine = CommStateMachine::new();
    let mut keys = Vec::new();
    for (i, chunk) in data.chunks(7).enumerate() {
        let now = t0 + Duration::from_millis(i as u64);
        let stamp = Stamp {
            sec: u32::from(chunk.first().copied().unwrap_or(0)),
            nsec: 0,
        };
        let id = match chunk.get(1).copied().unwrap_or(0) % 4 {
            0 => String::new(),
            n => format!("g{n}"),
        };
        let goal_id = action::GoalId { stamp, id };
        match chunk.get(2).copied().unwrap_or(0) % 8 {
            0 | 1 => {
                if let Arrival::New(key) = table.goal_arrived(goal_id, stamp, now) {
                    keys.push(key);
                }
            }
            2 => keys.extend(table.cancel_requested(&goal_id, stamp, now)),
            3 => {
                if let Some(&key) = keys.last() {
                    let _ = table.accept(key, "");
                }
            }
            4 => {
                if let Some(key) = keys.pop() {
                    let _ = table.succeed(key, "", now);
                    let _ = table.set_canceled(key, "", now);
                    let _ = table.abandon(key, now);
                }
            }
            5 => {
                let list = table.status_list(now);
                machine.on_status(list.iter().find(|s| s.goal_id.id == "g1"));
            }
            6 => {
                machine.cancel();
            }
            _ => {
                let st = action::GoalStatus {
                    status: chunk.get(3).copied().unwrap_or(0),
                    ..Default::default()
                };
                machine.on_result(&st);
                assert_eq!(machine.state(), CommState::Done);
            }
        }
        assert!(table.len() <= 8);
    }
});
