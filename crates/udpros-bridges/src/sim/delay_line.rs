//! Items released at their own deadlines, in deadline order, by a thread of their own.
//!
//! Tokio's timer wheel rounds every sleep up to the next millisecond, which would add up to
//! a millisecond of unmodelled, uneven delay to a fault proxy or a simulated link; a
//! condition-variable wait on a plain thread wakes within tens of microseconds.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A handle to the delay line; dropping it stops the thread (items still waiting are dropped).
pub struct DelayLine<T> {
    tx: mpsc::SyncSender<(Instant, T)>,
}

impl<T> Clone for DelayLine<T> {
    fn clone(&self) -> Self {
        DelayLine {
            tx: self.tx.clone(),
        }
    }
}

struct Entry<T> {
    due: Instant,
    order: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.order) == (other.due, other.order)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.order).cmp(&(other.due, other.order))
    }
}

impl<T: Send + 'static> DelayLine<T> {
    /// Starts the thread; `release` runs on it for each item at its deadline. At most
    /// `capacity` items wait at once: more are dropped, as a full queue drops.
    pub fn spawn(
        name: &str,
        capacity: usize,
        mut release: impl FnMut(T) + Send + 'static,
    ) -> std::io::Result<DelayLine<T>> {
        let (tx, rx) = mpsc::sync_channel::<(Instant, T)>(capacity.max(1));
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let mut waiting: BinaryHeap<Reverse<Entry<T>>> = BinaryHeap::new();
                let mut order = 0u64;
                loop {
                    let now = Instant::now();
                    while waiting.peek().is_some_and(|Reverse(e)| e.due <= now) {
                        if let Some(Reverse(e)) = waiting.pop() {
                            release(e.item);
                        }
                    }
                    let next = match waiting.peek() {
                        Some(Reverse(e)) => rx.recv_timeout(e.due.saturating_duration_since(now)),
                        None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    };
                    match next {
                        Ok((due, item)) if waiting.len() < capacity => {
                            order += 1;
                            waiting.push(Reverse(Entry { due, order, item }));
                        }
                        Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })?;
        Ok(DelayLine { tx })
    }

    /// Queues `item` for release after `delay`; false if the line is full or stopped.
    pub fn push(&self, delay: Duration, item: T) -> bool {
        self.tx.try_send((Instant::now() + delay, item)).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_in_deadline_order_close_to_the_deadline() {
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        let line = DelayLine::spawn("test-delay", 16, move |i: u32| {
            let _ = tx.send((i, start.elapsed()));
        })
        .unwrap();
        assert!(line.push(Duration::from_millis(30), 3));
        assert!(line.push(Duration::from_millis(10), 1));
        assert!(line.push(Duration::from_millis(20), 2));
        let got: Vec<(u32, Duration)> = (0..3)
            .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [1, 2, 3]);
        for (i, at) in got {
            assert!(
                at >= Duration::from_millis(10 * u64::from(i)),
                "{i} at {at:?}"
            );
        }
    }

    #[test]
    fn a_full_line_refuses_instead_of_growing() {
        let line = DelayLine::spawn("test-full", 2, |_: u32| {}).unwrap();
        let accepted = (0..100)
            .filter(|i| line.push(Duration::from_secs(60), *i))
            .count();
        // The channel holds `capacity` and the heap `capacity` more; nothing beyond.
        assert!(accepted <= 4, "{accepted} accepted");
    }
}
