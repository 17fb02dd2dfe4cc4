//! One connected client's side of the I/O: its send buffer and the wake-up of the task
//! that writes it, shared by the session's reader and writer, the forwards and the hub.
//! What the client holds of the view (subscriptions, watches, requests) is in the table.

use crate::foxglove::server::{Level, ServerMessage};
use crate::foxglove::Outbox;
use crate::table::Refusal;
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use tokio::sync::Notify;

/// One connected client.
pub(crate) struct Client {
    outbox: Mutex<Outbox>,
    wake: Notify,
    closed: AtomicBool,
    /// The payload of the last ping not answered yet (one is enough: a pong answers the
    /// latest ping).
    pending_pong: Mutex<Option<Bytes>>,
}

impl Client {
    /// A client whose send buffer holds `send_limit` bytes (see [`Outbox`]).
    pub(crate) fn new(send_limit: usize) -> Client {
        Client {
            outbox: Mutex::new(Outbox::new(send_limit)),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            pending_pong: Mutex::new(None),
        }
    }

    pub(crate) fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A ping arrived: its pong goes out before anything else waiting.
    pub(crate) fn pong(&self, payload: Bytes) {
        *self.pending_pong.lock().unwrap_or_else(|e| e.into_inner()) = Some(payload);
        self.wake.notify_one();
    }

    pub(crate) fn take_pong(&self) -> Option<Bytes> {
        self.pending_pong
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Tells the writer to look again (something to send or flush).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Waits until there may be something to send (or the client was closed).
    pub(crate) async fn notified(&self) {
        self.wake.notified().await;
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Ends the client's session (its writer sees it next).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.wake.notify_one();
    }

    pub(crate) fn say(&self, message: &ServerMessage) {
        self.say_text(message.to_json());
    }

    /// Sends a text frame already serialized (one message said to every client is
    /// serialized once).
    pub(crate) fn say_text(&self, text: String) {
        let pushed = self.outbox().push_text(text);
        self.pushed(pushed.is_ok());
    }

    pub(crate) fn send_binary(&self, frame: Vec<u8>) {
        let pushed = self.outbox().push_binary(frame);
        self.pushed(pushed.is_ok());
    }

    fn pushed(&self, fits: bool) {
        if fits {
            self.wake.notify_one();
        } else {
            // Control frames piled up past the buffer: the client is behind for good.
            self.close();
        }
    }

    pub(crate) fn status(&self, level: Level, message: impl Into<String>) {
        self.say(&ServerMessage::Status {
            level,
            message: message.into(),
            id: None,
        });
    }

    /// Tells the client why its request was refused.
    pub(crate) fn refuse(&self, refusal: &Refusal) {
        self.say(&refusal.status());
    }
}
