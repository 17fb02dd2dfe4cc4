//! Logging for udpros programs: [`tracing`]'s macros, printed on stderr and published on
//! `/rosout`.
//!
//! A node logs with `udpros::tracing::info!` (or `warn!`, `error!`, `debug!`). [`init`]
//! installs a small global subscriber that prints each enabled event on stderr, filtered
//! by `RUST_LOG` (warnings by default), and publishes events at `INFO` and above on the
//! node's `/rosout` as `rosgraph_msgs/Log`, where `rqt_console`, `rosout` and
//! `/rosout_agg` see them as they see roscpp's `ROS_INFO`. The library's own events go
//! the same way.
//!
//! `RUST_LOG` takes a level (`debug`) or comma-separated `target=level` directives
//! (`warn,udpros::transport=debug`); the directive with the longest matching target
//! prefix decides. Programs that already build a `tracing-subscriber` stack enable the
//! `tracing-subscriber` feature and add `udpros::rosout::layer()` to it instead.
//! Spans are accepted and not printed.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata};

/// Installs the global subscriber (once; later calls, or a subscriber installed
/// elsewhere first, leave the existing one in place).
pub fn init() {
    let filter = std::env::var("RUST_LOG")
        .map(|spec| Filter::parse(&spec))
        .unwrap_or_default();
    let _ = tracing::subscriber::set_global_default(StderrAndRosout {
        filter,
        next_span: AtomicU64::new(1),
    });
}

/// `RUST_LOG`'s directives: a default level and per-target levels.
#[derive(Debug, Clone, PartialEq)]
struct Filter {
    default: LevelFilter,
    /// `(target prefix, level)`, longest prefix first.
    targets: Vec<(String, LevelFilter)>,
}

impl Default for Filter {
    fn default() -> Filter {
        Filter {
            default: LevelFilter::WARN,
            targets: Vec::new(),
        }
    }
}

impl Filter {
    /// Reads `level` and `target=level` directives; a directive that does not parse is
    /// ignored, as `tracing-subscriber`'s `EnvFilter` ignores it.
    fn parse(spec: &str) -> Filter {
        let mut filter = Filter::default();
        for directive in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            match directive.split_once('=') {
                Some((target, level)) => {
                    if let Ok(level) = level.trim().parse::<LevelFilter>() {
                        filter.targets.push((target.trim().to_string(), level));
                    }
                }
                None => match directive.parse::<LevelFilter>() {
                    Ok(level) => filter.default = level,
                    // A bare target means "everything from it".
                    Err(_) => filter
                        .targets
                        .push((directive.to_string(), LevelFilter::TRACE)),
                },
            }
        }
        filter
            .targets
            .sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
        filter
    }

    fn level_for(&self, target: &str) -> LevelFilter {
        self.targets
            .iter()
            .find(|(prefix, _)| target.starts_with(prefix.as_str()))
            .map_or(self.default, |(_, level)| *level)
    }

    fn max_level(&self) -> LevelFilter {
        let targets = self.targets.iter().map(|(_, level)| *level);
        targets.fold(self.default, LevelFilter::max)
    }
}

/// The subscriber [`init`] installs.
struct StderrAndRosout {
    filter: Filter,
    next_span: AtomicU64,
}

impl tracing::Subscriber for StderrAndRosout {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        // INFO and above also feed /rosout, whatever stderr's filter says.
        *metadata.level() <= Level::INFO
            || self.filter.level_for(metadata.target()) >= *metadata.level()
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.filter.max_level().max(LevelFilter::INFO))
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed).max(1))
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        if self.filter.level_for(meta.target()) >= *meta.level() {
            let mut text = EventText::default();
            event.record(&mut text);
            let now = crate::msg::Time::now();
            let line = format!(
                "[{:>5}] [{}.{:09}] {}: {}\n",
                meta.level(),
                now.sec,
                now.nsec,
                meta.target(),
                text.0
            );
            // One write per line, so lines from several threads do not interleave.
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
        crate::rosout::publish(event);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// An event's message followed by its other fields as ` name=value`.
#[derive(Default)]
pub(crate) struct EventText(pub(crate) String);

impl Visit for EventText {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.insert_str(0, value);
        } else {
            self.0.push_str(&format!(" {}={value}", field.name()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_directives_pick_the_longest_matching_target() {
        let f = Filter::parse("info, udpros::transport=debug ,udpros=error,bogus=loud");
        assert_eq!(f.level_for("udpros::transport::sender"), LevelFilter::DEBUG);
        assert_eq!(f.level_for("udpros::node"), LevelFilter::ERROR);
        assert_eq!(f.level_for("hyper"), LevelFilter::INFO);
        assert_eq!(f.max_level(), LevelFilter::DEBUG);
        assert_eq!(Filter::parse("").default, LevelFilter::WARN);
        assert_eq!(
            Filter::parse("udpros").level_for("udpros::x"),
            LevelFilter::TRACE
        );
    }

    /// Records the text of each event.
    struct Capture(std::sync::Mutex<Vec<String>>);

    impl tracing::Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut text = EventText::default();
            event.record(&mut text);
            self.0.lock().unwrap().push(text.0);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    #[test]
    fn the_message_comes_first_and_fields_follow() {
        let capture = std::sync::Arc::new(Capture(Default::default()));
        tracing::subscriber::with_default(capture.clone(), || {
            tracing::warn!(peer = "a", count = 3, "link {} lost", 7);
        });
        assert_eq!(*capture.0.lock().unwrap(), ["link 7 lost peer=a count=3"]);
    }
}
