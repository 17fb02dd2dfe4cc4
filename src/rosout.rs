//! A tracing layer that publishes log events on `/rosout` as `rosgraph_msgs/Log`, so
//! `rqt_console`, `rosout` and `/rosout_agg` see udpros nodes like any other.
//!
//! [`crate::logging::init`] sends events here; with the `tracing-subscriber` feature,
//! `layer()` does the same from inside a program's own subscriber stack
//! (`tracing_subscriber::registry().with(udpros::rosout::layer())`).

use crate::logging::EventText;
use crate::msgs::rosgraph_msgs::Log;
use crate::time::Clock;
use crate::transport::publication::Publication;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, Weak};
use tracing::{Event, Level};

struct Target {
    node: String,
    publication: Weak<Publication>,
    topics: Vec<String>,
    clock: Clock,
}

static TARGET: Mutex<Option<Target>> = Mutex::new(None);
static SEQ: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// Set while publishing, so log events raised by publishing are not published again.
    static PUBLISHING: Cell<bool> = const { Cell::new(false) };
}

/// Makes `publication` (a node's `/rosout`) where log events go; the node's topics are
/// listed in each message, stamped with the node's `clock` (sim time in sim time).
pub(crate) fn set_target(
    node: &str,
    publication: Weak<Publication>,
    topics: Vec<String>,
    clock: Clock,
) {
    crate::logging::set_rosout_sink(publish);
    if let Ok(mut target) = TARGET.lock() {
        *target = Some(Target {
            node: node.to_string(),
            publication,
            topics,
            clock,
        });
    }
}

/// Publishes `event` on the node's `/rosout` when a node has made its `/rosout` the
/// target (the caller decided the level); events raised while publishing are dropped,
/// not looped.
pub(crate) fn publish(event: &Event<'_>) {
    if PUBLISHING.with(Cell::get) {
        return;
    }
    let Ok(target) = TARGET.try_lock() else {
        return;
    };
    let Some(t) = target.as_ref() else { return };
    let Some(publication) = t.publication.upgrade() else {
        return;
    };
    let mut message = EventText::default();
    event.record(&mut message);
    let meta = event.metadata();
    let mut log = Log {
        level: ros_level(meta.level()),
        name: t.node.clone(),
        msg: message.0,
        file: meta.file().unwrap_or("").to_string(),
        function: meta.module_path().unwrap_or("").to_string(),
        line: meta.line().unwrap_or(0),
        topics: t.topics.clone(),
        ..Default::default()
    };
    log.header.seq = SEQ.fetch_add(1, Ordering::Relaxed);
    log.header.stamp = t.clock.now();
    drop(target);
    PUBLISHING.with(|p| p.set(true));
    if let Ok(frame) = crate::wire::to_frame(&log) {
        publication.publish_frame(frame);
    }
    PUBLISHING.with(|p| p.set(false));
}

/// rosgraph_msgs/Log levels.
fn ros_level(level: &Level) -> i8 {
    match *level {
        Level::TRACE | Level::DEBUG => Log::DEBUG,
        Level::INFO => Log::INFO,
        Level::WARN => Log::WARN,
        Level::ERROR => Log::ERROR,
    }
}

/// The `/rosout` layer for a `tracing-subscriber` stack (feature `tracing-subscriber`),
/// for programs that install their own subscriber instead of [`crate::logging::init`].
#[cfg(feature = "tracing-subscriber")]
pub fn layer() -> RosoutLayer {
    RosoutLayer
}

/// Publishes events on the node's `/rosout` (`INFO` and above, or what a logger level
/// set at run time says); see [`layer`].
#[cfg(feature = "tracing-subscriber")]
#[derive(Debug, Clone, Copy, Default)]
pub struct RosoutLayer;

#[cfg(feature = "tracing-subscriber")]
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RosoutLayer {
    fn on_event(&self, event: &Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if crate::logging::rosout_level(event.metadata().target()) >= *event.metadata().level() {
            publish(event);
        }
    }
}
