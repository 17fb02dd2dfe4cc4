//! A bounded queue that drops its oldest entry when full: a slow reader loses stale data
//! and never slows the writer, which is what teleoperation wants. It is bounded by count
//! and, for queues of messages, by bytes too: a hundred 64 MB messages are not a queue.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::Notify;

#[derive(Debug)]
struct Queued<T> {
    items: VecDeque<T>,
    /// What `weigh` says the items weigh together.
    bytes: usize,
}

#[derive(Debug)]
pub(crate) struct DropOldest<T> {
    items: Mutex<Queued<T>>,
    capacity: usize,
    /// The oldest items are dropped while the queue weighs more, though never the last one.
    max_bytes: usize,
    weigh: fn(&T) -> usize,
    ready: Notify,
    /// Woken when the reader takes items, for writers that wait for room.
    room: Notify,
    closed: AtomicBool,
    dropped: AtomicU64,
}

impl<T> DropOldest<T> {
    /// A queue of at most `capacity` items, whatever they weigh.
    #[cfg(test)]
    pub(crate) fn new(capacity: usize) -> DropOldest<T> {
        Self::bounded(capacity, usize::MAX, |_| 0)
    }

    /// A queue of at most `capacity` items weighing at most `max_bytes` by `weigh`, but
    /// always room for the newest item, however heavy.
    pub(crate) fn bounded(capacity: usize, max_bytes: usize, weigh: fn(&T) -> usize) -> Self {
        DropOldest {
            items: Mutex::new(Queued {
                items: VecDeque::with_capacity(capacity.clamp(1, 1024)),
                bytes: 0,
            }),
            capacity: capacity.max(1),
            max_bytes,
            weigh,
            ready: Notify::new(),
            room: Notify::new(),
            closed: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queued<T>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an item, dropping the oldest while full. Never blocks on the reader.
    pub(crate) fn push(&self, item: T) {
        if self.is_closed() {
            return;
        }
        {
            let mut q = self.lock();
            q.bytes = q.bytes.saturating_add((self.weigh)(&item));
            q.items.push_back(item);
            while q.items.len() > self.capacity || (q.bytes > self.max_bytes && q.items.len() > 1) {
                if let Some(old) = q.items.pop_front() {
                    q.bytes = q.bytes.saturating_sub((self.weigh)(&old));
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.ready.notify_one();
    }

    /// Takes every item there is, without waiting; false when there was none.
    pub(crate) fn take_all(&self, into: &mut Vec<T>) -> bool {
        let mut q = self.lock();
        if q.items.is_empty() {
            return false;
        }
        into.extend(q.items.drain(..));
        q.bytes = 0;
        drop(q);
        self.room.notify_waiters();
        true
    }

    /// Waits until there are items, the queue is closed, or the reader is
    /// [kicked](Self::kick). It may return early: readers check what they find.
    pub(crate) async fn wait_ready(&self) {
        let notified = self.ready.notified();
        if !self.is_empty() || self.is_closed() {
            return;
        }
        notified.await;
    }

    /// Wakes the reader waiting in [`wait_ready`](Self::wait_ready) though nothing was
    /// pushed: the writer left it other work.
    pub(crate) fn kick(&self) {
        self.ready.notify_one();
    }

    /// The oldest item, if there is one, without waiting.
    pub(crate) fn try_pop(&self) -> Option<T> {
        let item = {
            let mut q = self.lock();
            let item = q.items.pop_front();
            if let Some(item) = &item {
                q.bytes = q.bytes.saturating_sub((self.weigh)(item));
            }
            item
        };
        if item.is_some() {
            self.room.notify_waiters();
        }
        item
    }

    /// Waits for one item; `None` once closed and empty.
    pub(crate) async fn pop(&self) -> Option<T> {
        loop {
            let notified = self.ready.notified();
            if let Some(item) = self.try_pop() {
                return Some(item);
            }
            if self.is_closed() {
                return None;
            }
            notified.await;
        }
    }

    /// Waits until a push would not drop anything (or the queue is closed): for writers
    /// that prefer waiting to losing data, such as a flood that must arrive whole.
    pub(crate) async fn wait_for_room(&self) {
        loop {
            let notified = self.room.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_closed() || self.has_room() {
                return;
            }
            notified.await;
        }
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.notify_waiters();
        self.ready.notify_one();
        self.room.notify_waiters();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Whether a push would drop nothing: neither bound is reached.
    fn has_room(&self) -> bool {
        let q = self.lock();
        q.items.is_empty() || (q.items.len() < self.capacity && q.bytes < self.max_bytes)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_kick_wakes_the_reader_with_nothing_queued() {
        let q = std::sync::Arc::new(DropOldest::<u8>::new(2));
        let reader = {
            let q = q.clone();
            tokio::spawn(async move { q.wait_ready().await })
        };
        tokio::task::yield_now().await;
        assert!(!reader.is_finished(), "empty and open: the reader waits");
        q.kick();
        tokio::time::timeout(std::time::Duration::from_secs(5), reader)
            .await
            .expect("the kick wakes the reader")
            .unwrap();
    }

    #[tokio::test]
    async fn a_writer_can_wait_for_room_instead_of_dropping() {
        let q = std::sync::Arc::new(DropOldest::new(2));
        q.push(1);
        q.push(2);
        let writer = {
            let q = q.clone();
            tokio::spawn(async move {
                q.wait_for_room().await;
                q.push(3);
            })
        };
        tokio::task::yield_now().await;
        assert!(!writer.is_finished(), "full: the writer waits");
        assert_eq!(q.pop().await, Some(1));
        writer.await.unwrap();
        let mut out = Vec::new();
        assert!(q.take_all(&mut out));
        assert_eq!((out, q.dropped()), (vec![2, 3], 0));
    }

    #[test]
    fn a_byte_bound_drops_the_oldest_but_keeps_the_newest_however_heavy() {
        let q = DropOldest::bounded(100, 10 << 20, Vec::<u8>::len);
        for _ in 0..50 {
            q.push(vec![0u8; 1 << 20]); // 50 MB offered, 10 MB kept
        }
        assert_eq!((q.len(), q.dropped()), (10, 40));
        q.push(vec![0u8; 64 << 20]);
        assert_eq!(q.len(), 1, "the newest stays alone");
        let mut out = Vec::new();
        assert!(q.take_all(&mut out));
        assert_eq!(out[0].len(), 64 << 20);
        q.push(vec![1u8; 3]);
        assert_eq!(q.len(), 1);
    }

    #[tokio::test]
    async fn drops_the_oldest_and_closes() {
        let q = DropOldest::new(2);
        q.push(1);
        q.push(2);
        q.push(3);
        assert_eq!(q.dropped(), 1);
        let mut out = Vec::new();
        q.wait_ready().await;
        assert!(q.take_all(&mut out));
        assert_eq!(out, [2, 3]);
        assert!(!q.take_all(&mut out), "nothing left");
        q.close();
        q.wait_ready().await; // returns at once: closed
        assert_eq!(q.pop().await, None);
        q.push(4);
        assert!(q.is_empty(), "a closed queue takes nothing");
    }
}
