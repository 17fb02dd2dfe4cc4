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
//!
//! Loggers can be changed while the node runs, as roscpp's can: every node serves
//! `~get_loggers` and `~set_logger_level` (roscpp's logger services, which `rosconsole`,
//! `rosservice` and rqt_logger_level call). A logger is a tracing target or a prefix of
//! one up to a `::` (`udpros`, `udpros::transport`, `my_node`); setting its level
//! (`debug`, `info`, `warn`, `error`, `fatal`; any case) decides, for every target under
//! it, both what is printed and what reaches `/rosout`, overriding `RUST_LOG` there.
//! [`set_level`] and [`loggers`] are the same from code.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata};

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
    fn register_callsite(
        &self,
        metadata: &'static Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        remember_target(metadata.target());
        if self.enabled(metadata) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        let (stderr, rosout) = self.levels_for(metadata.target());
        stderr.max(rosout) >= *metadata.level()
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        let overrides = read(&OVERRIDES).iter().map(|(_, level)| *level).max();
        let max = self.filter.max_level().max(ROSOUT_DEFAULT);
        Some(overrides.map_or(max, |o| o.max(max)))
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed).max(1))
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        let (stderr, rosout) = self.levels_for(meta.target());
        if stderr >= *meta.level() {
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
        if rosout >= *meta.level() {
            if let Some(sink) = ROSOUT_SINK.get() {
                sink(event);
            }
        }
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

impl StderrAndRosout {
    /// What `target` prints on stderr and publishes on `/rosout`: a logger level set at run
    /// time decides both; otherwise `RUST_LOG` decides stderr and `/rosout` takes `INFO`
    /// and above.
    fn levels_for(&self, target: &str) -> (LevelFilter, LevelFilter) {
        match override_for(target) {
            Some(level) => (level, level),
            None => (self.filter.level_for(target), ROSOUT_DEFAULT),
        }
    }
}

/// What reaches `/rosout` from a target no logger level was set for.
const ROSOUT_DEFAULT: LevelFilter = LevelFilter::INFO;

/// Where events at `/rosout`'s level go: [`crate::rosout`] registers its publisher here
/// when a node makes its `/rosout` the target, so that logging needs nothing above it.
static ROSOUT_SINK: OnceLock<fn(&Event<'_>)> = OnceLock::new();

/// Sends events at `/rosout`'s level to `sink` from now on (the first sink stays).
pub(crate) fn set_rosout_sink(sink: fn(&Event<'_>)) {
    let _ = ROSOUT_SINK.set(sink);
}

/// Logger levels set at run time: `(logger, level)`, longest logger first.
static OVERRIDES: RwLock<Vec<(String, LevelFilter)>> = RwLock::new(Vec::new());

/// Every target that has logged (or could: tracing registers each call site once), so
/// `get_loggers` can list them. Call sites are static, so this stays small.
static TARGETS: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn remember_target(target: &'static str) {
    TARGETS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(target);
}

/// The level set for the longest logger that is `target` or a `::` prefix of it.
fn override_for(target: &str) -> Option<LevelFilter> {
    read(&OVERRIDES)
        .iter()
        .find(|(logger, _)| is_under(target, logger))
        .map(|(_, level)| *level)
}

/// Whether `target` is `logger` or below it (`udpros::node` is under `udpros`, not
/// under `udp`).
fn is_under(target: &str, logger: &str) -> bool {
    target
        .strip_prefix(logger)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

/// What reaches `/rosout` from `target`.
#[cfg_attr(not(feature = "tracing-subscriber"), allow(dead_code))]
pub(crate) fn rosout_level(target: &str) -> LevelFilter {
    override_for(target).unwrap_or(ROSOUT_DEFAULT)
}

/// A ROS level name (any case, as roscpp and rospy accept them) as a tracing filter.
/// ROS's `fatal` has no tracing level: it keeps every event out.
pub fn parse_ros_level(level: &str) -> Option<LevelFilter> {
    match level.to_ascii_lowercase().as_str() {
        "debug" => Some(LevelFilter::DEBUG),
        "info" => Some(LevelFilter::INFO),
        "warn" => Some(LevelFilter::WARN),
        "error" => Some(LevelFilter::ERROR),
        "fatal" => Some(LevelFilter::OFF),
        _ => None,
    }
}

/// The lower-case ROS name of a filter, as roscpp's `get_loggers` reports levels.
pub fn ros_level_name(level: LevelFilter) -> &'static str {
    match level {
        LevelFilter::TRACE | LevelFilter::DEBUG => "debug",
        LevelFilter::INFO => "info",
        LevelFilter::WARN => "warn",
        LevelFilter::ERROR => "error",
        _ => "fatal",
    }
}

/// Why [`set_level`] refused a level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LevelError {
    /// Not one of ROS's level names.
    UnknownLevel(String),
    /// A logger name is 1 to 256 characters.
    BadLoggerName,
    /// This many logger levels are set already, the most there can be.
    TooManyLoggers(usize),
}

impl std::fmt::Display for LevelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LevelError::UnknownLevel(level) => write!(
                f,
                "unknown level '{level}' (expected debug, info, warn, error or fatal)"
            ),
            LevelError::BadLoggerName => f.write_str("a logger name is 1 to 256 characters"),
            LevelError::TooManyLoggers(most) => {
                write!(f, "at most {most} logger levels can be set")
            }
        }
    }
}

impl std::error::Error for LevelError {}

/// Sets the level of `logger` (a target, or a `::` prefix of targets) and everything under
/// it, live: what is printed and what reaches `/rosout`. `level` is a ROS level name;
/// an unknown one is an error and changes nothing.
pub fn set_level(logger: &str, level: &str) -> Result<(), LevelError> {
    let filter =
        parse_ros_level(level).ok_or_else(|| LevelError::UnknownLevel(level.to_string()))?;
    let logger = logger.trim();
    if logger.is_empty() || logger.len() > 256 {
        return Err(LevelError::BadLoggerName);
    }
    {
        let mut overrides = OVERRIDES.write().unwrap_or_else(|e| e.into_inner());
        let count = overrides.len();
        match overrides.iter_mut().find(|(l, _)| l == logger) {
            Some(entry) => entry.1 = filter,
            // Bounded: a caller inventing names cannot grow this without limit.
            None if count >= MAX_OVERRIDES => {
                return Err(LevelError::TooManyLoggers(MAX_OVERRIDES))
            }
            None => overrides.push((logger.to_string(), filter)),
        }
        overrides.sort_by_key(|(l, _)| std::cmp::Reverse(l.len()));
    }
    // Call sites cache whether they are enabled; this makes them ask again.
    tracing::callsite::rebuild_interest_cache();
    Ok(())
}

/// Most logger levels that may be set at run time.
const MAX_OVERRIDES: usize = 1024;

/// Every logger with its effective level, sorted by name: `udpros`, each target that has
/// a call site registered (by the subscriber [`init`] installs), each `::` prefix of one, and each logger whose level was set. Without a
/// level set, a logger reports the more verbose of `RUST_LOG`'s level for it and `/rosout`'s
/// `INFO`.
pub fn loggers() -> Vec<(String, &'static str)> {
    let filter = std::env::var("RUST_LOG")
        .map(|spec| Filter::parse(&spec))
        .unwrap_or_default();
    // The library's own logger is always there, even before anything logged.
    let mut names: BTreeSet<String> = BTreeSet::from(["udpros".to_string()]);
    for target in TARGETS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        let mut end = 0;
        while let Some(at) = target[end..].find("::") {
            end += at;
            names.insert(target[..end].to_string());
            end += 2;
        }
        names.insert(target.to_string());
    }
    names.extend(read(&OVERRIDES).iter().map(|(l, _)| l.clone()));
    names
        .into_iter()
        .map(|name| {
            let level =
                override_for(&name).unwrap_or_else(|| filter.level_for(&name).max(ROSOUT_DEFAULT));
            (name, ros_level_name(level))
        })
        .collect()
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

    /// Refusals are typed, and say what is allowed; nothing is set by one.
    #[test]
    fn set_level_refuses_with_a_typed_error() {
        assert_eq!(
            set_level("udpros_test_refusals", "loud"),
            Err(LevelError::UnknownLevel("loud".into()))
        );
        assert_eq!(set_level(" ", "info"), Err(LevelError::BadLoggerName));
        assert_eq!(
            set_level(&"x".repeat(257), "info"),
            Err(LevelError::BadLoggerName)
        );
        assert!(LevelError::UnknownLevel("loud".into())
            .to_string()
            .contains("debug, info, warn, error or fatal"));
        assert!(override_for("udpros_test_refusals").is_none());
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
