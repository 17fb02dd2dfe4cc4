//! One client's send buffer. A browser on a tablet over a vehicle's Wi-Fi falls behind a
//! 1 MB image at 20 Hz; what it wants then is the newest image, not a queue of old ones
//! that grows until the server runs out of memory. So messages are kept newest-only per
//! subscription, within a byte bound shared by all of them; the control frames
//! (advertisements, statuses, answers) are kept in order, and a client that lets them pile
//! up past the bound is behind for good: the server closes it.

use super::server::{message_data_header, time, MESSAGE_DATA_HEADER_LEN};
use super::SubscriptionId;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A frame to write to the client, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// A text frame.
    Text(String),
    /// A binary frame other than a message (a Time frame, a service response).
    Binary(Vec<u8>),
    /// A Message Data frame: `header` then `body`, written as one binary frame.
    Message {
        /// Opcode, subscription id, receipt time.
        header: [u8; MESSAGE_DATA_HEADER_LEN],
        /// The message as the publisher serialized it.
        body: Bytes,
    },
}

impl Outgoing {
    /// The frame's payload size.
    pub fn len(&self) -> usize {
        match self {
            Outgoing::Text(text) => text.len(),
            Outgoing::Binary(frame) => frame.len(),
            Outgoing::Message { body, .. } => MESSAGE_DATA_HEADER_LEN + body.len(),
        }
    }

    /// Whether the frame is empty (none is).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The client let control frames pile up past its buffer: close it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow;

/// What an [`Outbox`] did to keep within its bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxStats {
    /// Messages replaced by a newer one of the same subscription before they left.
    pub replaced: u64,
    /// Messages dropped to make room for other subscriptions' newer ones.
    pub dropped: u64,
    /// Messages handed out to be written.
    pub sent: u64,
}

/// One client's frames waiting to be written (see the module documentation).
#[derive(Debug)]
pub struct Outbox {
    limit: usize,
    control: VecDeque<Outgoing>,
    control_bytes: usize,
    /// The newest pending Time frame, sent before any message.
    time: Option<u64>,
    /// Pending messages by arrival, and each subscription's one pending message.
    by_arrival: BTreeMap<u64, SubscriptionId>,
    pending: HashMap<SubscriptionId, (u64, u64, Bytes)>,
    message_bytes: usize,
    next_arrival: u64,
    stats: OutboxStats,
}

impl Outbox {
    /// A buffer that holds at most `limit` bytes of control frames, and at most `limit`
    /// bytes of messages (one message larger than that is kept while it is alone).
    pub fn new(limit: usize) -> Outbox {
        Outbox {
            limit,
            control: VecDeque::new(),
            control_bytes: 0,
            time: None,
            by_arrival: BTreeMap::new(),
            pending: HashMap::new(),
            message_bytes: 0,
            next_arrival: 0,
            stats: OutboxStats::default(),
        }
    }

    /// Queues a text frame.
    pub fn push_text(&mut self, text: String) -> Result<(), Overflow> {
        self.push_control(Outgoing::Text(text))
    }

    /// Queues a binary frame other than a message or the time.
    pub fn push_binary(&mut self, frame: Vec<u8>) -> Result<(), Overflow> {
        self.push_control(Outgoing::Binary(frame))
    }

    fn push_control(&mut self, frame: Outgoing) -> Result<(), Overflow> {
        if self.control_bytes + frame.len() > self.limit && !self.control.is_empty() {
            return Err(Overflow);
        }
        self.control_bytes += frame.len();
        self.control.push_back(frame);
        Ok(())
    }

    /// Sets the time to send next (only the newest matters).
    pub fn push_time(&mut self, now_ns: u64) {
        self.time = Some(now_ns);
    }

    /// Queues a message on `subscription`, received at `received_ns`, in place of any of
    /// that subscription's still pending; then drops the oldest pending messages while
    /// they hold more than the limit.
    pub fn push_message(&mut self, subscription: SubscriptionId, received_ns: u64, body: Bytes) {
        if self.forget(subscription) {
            self.stats.replaced += 1;
        }
        let arrival = self.next_arrival;
        self.next_arrival += 1;
        self.message_bytes += body.len();
        self.by_arrival.insert(arrival, subscription);
        self.pending
            .insert(subscription, (arrival, received_ns, body));
        while self.message_bytes > self.limit && self.pending.len() > 1 {
            let Some((_, oldest)) = self.by_arrival.first_key_value() else {
                break;
            };
            let oldest = *oldest;
            self.forget(oldest);
            self.stats.dropped += 1;
        }
    }

    /// Drops `subscription`'s pending message, if any (it ended); whether there was one.
    pub fn forget(&mut self, subscription: SubscriptionId) -> bool {
        let Some((arrival, _, body)) = self.pending.remove(&subscription) else {
            return false;
        };
        self.by_arrival.remove(&arrival);
        self.message_bytes -= body.len();
        true
    }

    /// The next frame to write: control frames first, then the time, then messages in the
    /// order they arrived.
    pub fn pop(&mut self) -> Option<Outgoing> {
        if let Some(frame) = self.control.pop_front() {
            self.control_bytes -= frame.len();
            return Some(frame);
        }
        if let Some(now) = self.time.take() {
            return Some(Outgoing::Binary(time(now).to_vec()));
        }
        let (_, subscription) = self.by_arrival.pop_first()?;
        let (_, received_ns, body) = self.pending.remove(&subscription)?;
        self.message_bytes -= body.len();
        self.stats.sent += 1;
        Some(Outgoing::Message {
            header: message_data_header(subscription, received_ns),
            body,
        })
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.control.is_empty() && self.time.is_none() && self.pending.is_empty()
    }

    /// Bytes waiting, control frames and messages.
    pub fn bytes(&self) -> usize {
        self.control_bytes + self.message_bytes
    }

    /// What it did to stay within its bound.
    pub fn stats(&self) -> OutboxStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(n: usize) -> Bytes {
        Bytes::from(vec![n as u8; n])
    }

    fn drain(outbox: &mut Outbox) -> Vec<Outgoing> {
        std::iter::from_fn(|| outbox.pop()).collect()
    }

    #[test]
    fn a_slow_client_gets_the_newest_message_of_each_subscription_in_arrival_order() {
        let mut outbox = Outbox::new(1 << 20);
        outbox.push_message(1, 10, body(10));
        outbox.push_message(2, 11, body(20));
        outbox.push_message(1, 12, body(30));
        outbox.push_text("{}".into()).unwrap();
        outbox.push_time(5);
        outbox.push_time(6);
        let frames = drain(&mut outbox);
        assert_eq!(frames[0], Outgoing::Text("{}".into()));
        assert_eq!(frames[1], Outgoing::Binary(time(6).to_vec()));
        assert_eq!(
            frames[2],
            Outgoing::Message {
                header: message_data_header(2, 11),
                body: body(20)
            }
        );
        assert_eq!(
            frames[3],
            Outgoing::Message {
                header: message_data_header(1, 12),
                body: body(30)
            }
        );
        assert_eq!(frames.len(), 4);
        assert_eq!(outbox.stats().replaced, 1);
        assert!(outbox.is_empty());
        assert_eq!(outbox.bytes(), 0);
    }

    #[test]
    fn megabytes_pushed_at_a_client_that_reads_nothing_stay_within_the_bound() {
        let limit = 10 << 20;
        let mut outbox = Outbox::new(limit);
        let image = Bytes::from(vec![7u8; 1 << 20]);
        // 100 subscriptions of 1 MB images, 20 rounds: 2 GB offered.
        for round in 0..20u64 {
            for subscription in 0..100 {
                outbox.push_message(subscription, round, image.clone());
                assert!(outbox.bytes() <= limit);
            }
        }
        assert_eq!(outbox.bytes(), limit);
        let stats = outbox.stats();
        assert_eq!(stats.replaced + stats.dropped, 2000 - 10);
        // The ones left are the newest round's last ten subscriptions.
        let left: Vec<[u8; 13]> = drain(&mut outbox)
            .into_iter()
            .map(|frame| match frame {
                Outgoing::Message { header, .. } => header,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            left,
            (90..100)
                .map(|s| message_data_header(s, 19))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_message_larger_than_the_bound_still_goes_when_alone() {
        let mut outbox = Outbox::new(1000);
        outbox.push_message(1, 0, body(5000));
        assert_eq!(outbox.bytes(), 5000);
        outbox.push_message(2, 0, body(10));
        assert_eq!(outbox.bytes(), 10, "the large one made room");
        assert_eq!(outbox.stats().dropped, 1);
    }

    #[test]
    fn control_frames_past_the_bound_are_an_overflow_and_forgetting_drops_a_message() {
        let mut outbox = Outbox::new(100);
        outbox.push_text("x".repeat(1000)).unwrap(); // alone: taken
        assert_eq!(outbox.push_text("y".into()), Err(Overflow));
        drain(&mut outbox);
        for _ in 0..10 {
            outbox.push_binary(vec![0; 10]).unwrap();
        }
        assert_eq!(outbox.push_binary(vec![0; 1]), Err(Overflow));
        drain(&mut outbox);
        outbox.push_message(4, 0, body(10));
        assert!(outbox.forget(4));
        assert!(!outbox.forget(4));
        assert!(outbox.is_empty());
    }
}
