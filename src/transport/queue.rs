//! A bounded queue that drops its oldest entry when full: a slow reader loses stale data
//! and never slows the writer, which is what teleoperation wants.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::Notify;

#[derive(Debug)]
pub struct DropOldest<T> {
    items: Mutex<VecDeque<T>>,
    capacity: usize,
    ready: Notify,
    /// Woken when the reader takes items, for writers that wait for room.
    room: Notify,
    closed: AtomicBool,
    dropped: AtomicU64,
}

impl<T> DropOldest<T> {
    pub fn new(capacity: usize) -> DropOldest<T> {
        DropOldest {
            items: Mutex::new(VecDeque::with_capacity(capacity.clamp(1, 1024))),
            capacity: capacity.max(1),
            ready: Notify::new(),
            room: Notify::new(),
            closed: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<T>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an item, dropping the oldest when full. Never blocks on the reader.
    pub fn push(&self, item: T) {
        if self.is_closed() {
            return;
        }
        {
            let mut items = self.lock();
            if items.len() >= self.capacity {
                items.pop_front();
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            items.push_back(item);
        }
        self.ready.notify_one();
    }

    /// Waits for items and takes them all; `None` once closed and empty.
    pub async fn pop_all(&self, into: &mut Vec<T>) -> Option<()> {
        loop {
            let notified = self.ready.notified();
            {
                let mut items = self.lock();
                if !items.is_empty() {
                    into.extend(items.drain(..));
                    drop(items);
                    self.room.notify_waiters();
                    return Some(());
                }
            }
            if self.is_closed() {
                return None;
            }
            notified.await;
        }
    }

    /// Waits for one item; `None` once closed and empty.
    pub async fn pop(&self) -> Option<T> {
        loop {
            let notified = self.ready.notified();
            let item = self.lock().pop_front();
            if let Some(item) = item {
                self.room.notify_waiters();
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
    pub async fn wait_for_room(&self) {
        loop {
            let notified = self.room.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_closed() || self.lock().len() < self.capacity {
                return;
            }
            notified.await;
        }
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.notify_waiters();
        self.ready.notify_one();
        self.room.notify_waiters();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        q.pop_all(&mut out).await.unwrap();
        assert_eq!((out, q.dropped()), (vec![2, 3], 0));
    }

    #[tokio::test]
    async fn drops_the_oldest_and_closes() {
        let q = DropOldest::new(2);
        q.push(1);
        q.push(2);
        q.push(3);
        assert_eq!(q.dropped(), 1);
        let mut out = Vec::new();
        q.pop_all(&mut out).await.unwrap();
        assert_eq!(out, [2, 3]);
        q.close();
        assert_eq!(q.pop().await, None);
        q.push(4);
        assert!(q.is_empty(), "a closed queue takes nothing");
    }
}
