//! Bridges from devices onto ROS topics, built on the [`udpros`] node library: the
//! Blue Robotics Ping sonars (feature `ping`: the `ping_sonar` node) and MAVLink autopilot
//! links (feature `mavlink`: the `mavlink_bridge` node, PING latency and TIMESYNC clock
//! offset). Each bridge has a protocol session without I/O, a thin tokio node around it,
//! and a simulated device ([`sim`] holds the simulated network's faults).

#![warn(missing_docs, unreachable_pub)]

use udpros::node::params::FromParam;
use udpros::node::FecPolicy;
use udpros::node::Node;

pub mod sim;

#[cfg(feature = "ping")]
pub mod ping;

#[cfg(feature = "mavlink")]
pub mod mavlink;

/// The `main` of a bridge binary: `-h`/`--help` prints `help` (and nothing touches the
/// network); otherwise the node from the command line and environment (rosrun and
/// roslaunch style), its configuration from parameters, then `run` until it returns or
/// Ctrl-C; the node unregisters either way. Errors are one line on stderr and a failure
/// status.
pub async fn node_main<C>(
    name: &str,
    help: &str,
    configure: impl AsyncFnOnce(&Node) -> Result<C, String>,
    run: impl AsyncFnOnce(Node, C) -> Result<(), String>,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    let args: Vec<String> = std::env::args().skip(1).collect();
    match command_line(&args) {
        CommandLine::Run => {}
        CommandLine::Help => {
            print!("{help}");
            return ExitCode::SUCCESS;
        }
        CommandLine::Unknown(option) => {
            eprintln!(
                "{name}: unknown option '{option}': arguments are ROS's (__name:=NAME, from:=to, _param:=value); --help lists the parameters"
            );
            return ExitCode::from(2);
        }
    }
    udpros::logging::init();
    let node = match Node::from_env(name).await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    say_parameters_from_the_server(&node, &args).await;
    let result = match configure(&node).await {
        Ok(cfg) => tokio::select! {
            r = run(node.clone(), cfg) => r,
            _ = tokio::signal::ctrl_c() => Ok(()),
        },
        Err(e) => Err(e),
    };
    node.shutdown().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why a bridge refused a parameter: which one, what kind of refusal (for a caller that
/// branches), and the one line a user reads (naming the key and what is allowed).
#[derive(Debug, Clone, PartialEq)]
pub struct ParamError {
    /// The parameter (`~range`), or `~` for the node's parameters as a whole.
    pub key: String,
    /// What is wrong.
    pub kind: ParamErrorKind,
    text: String,
}

/// What is wrong with a bridge's parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamErrorKind {
    /// The parameter server could not be asked.
    Unreachable,
    /// The value is not of the parameter's type.
    WrongType,
    /// A number outside what is allowed.
    OutOfRange,
    /// A name that is none of the choices.
    NotAChoice,
    /// Private parameters the node does not have (misspelt, or another node's).
    Unknown(Vec<String>),
}

impl ParamError {
    fn new(key: &str, kind: ParamErrorKind, text: String) -> ParamError {
        ParamError {
            key: key.to_string(),
            kind,
            text,
        }
    }
}

impl std::fmt::Display for ParamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for ParamError {}

/// A bridge's `configure` and `run` speak in lines of text (see [`node_main`]).
impl From<ParamError> for String {
    fn from(e: ParamError) -> String {
        e.text
    }
}

/// Refuses the node's private parameters that `known` does not name (the first part of a
/// nested name counts), in one line that names them, `whose` parameters they are not,
/// and the ones there are: a misspelt `_rnage:=30` would otherwise be ignored without a
/// word.
pub async fn refuse_unknown_parameters(
    node: &Node,
    known: &[&str],
    whose: &str,
) -> Result<(), ParamError> {
    let names = node.master().get_param_names().await.map_err(|e| {
        ParamError::new(
            "~",
            ParamErrorKind::Unreachable,
            format!("cannot list parameters: {e}"),
        )
    })?;
    let prefix = format!("{}/", node.name());
    let mut unknown: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_prefix(&prefix))
        .filter(|rest| {
            let first = rest.split('/').next().unwrap_or_default();
            !known.contains(&first)
        })
        .collect();
    unknown.sort_unstable();
    match unknown.as_slice() {
        [] => Ok(()),
        names => Err(ParamError::new(
            "~",
            ParamErrorKind::Unknown(names.iter().map(|n| format!("~{n}")).collect()),
            format!(
                "~{} not a parameter of {whose}; it has: {}",
                match names {
                    [one] => format!("{one} is"),
                    many => format!("{} are", many.join(", ~")),
                },
                known.join(", ")
            ),
        )),
    }
}

/// FEC links named at most in `/diagnostics`.
const FEC_LINKS_SHOWN: usize = 8;

/// What the node's UDPROS links with FEC are doing, as `/diagnostics` key-values: per
/// link (topic and subscriber), the mode, the loss its subscriber reports, the redundancy
/// of the last message and the repair datagrams sent so far.
pub fn fec_diagnostics(node: &Node) -> Vec<udpros::msgs::diagnostic_msgs::KeyValue> {
    use udpros::msgs::diagnostic_msgs::KeyValue;
    let links: Vec<(String, udpros::transport::SubscriberLinkStats)> = node
        .publication_links()
        .into_iter()
        .filter(|(_, l)| l.fec.is_some())
        .collect();
    let mut values: Vec<KeyValue> = links
        .iter()
        .take(FEC_LINKS_SHOWN)
        .filter_map(|(topic, link)| {
            let fec = link.fec.as_ref()?;
            let mode = match fec.link.target {
                Some(target) => format!("adaptive (target {})", target.get()),
                None => format!("fixed ratio {}", fec.link.floor.get()),
            };
            let reported = fec
                .reported_loss
                .map_or("no loss report yet".to_string(), |p| {
                    format!("loss reported {:.2} %", 100.0 * p)
                });
            Some(KeyValue {
                key: format!("FEC {topic} to {}", link.caller_id),
                value: format!(
                    "{mode}, {reported}, last message {} blocks + {} repair, {} repair datagrams sent",
                    fec.last_blocks, fec.last_repairs, fec.repairs_sent
                ),
            })
        })
        .collect();
    if links.len() > FEC_LINKS_SHOWN {
        values.push(KeyValue {
            key: "FEC links not shown".into(),
            value: (links.len() - FEC_LINKS_SHOWN).to_string(),
        });
    }
    values
}

/// Parameters named at most in the start-up line of [`say_parameters_from_the_server`].
const PARAMETERS_NAMED: usize = 12;

/// Says once, at start, which of the node's private parameters it takes from the
/// parameter server rather than from its command line: one left there by a launch file
/// or an earlier run (a stale `~record` or `~fcu_url`) would otherwise change what the
/// node does without a word.
async fn say_parameters_from_the_server(node: &Node, args: &[String]) {
    let given: std::collections::BTreeSet<String> = udpros::node::args::NodeArgs::parse(args)
        .map(|a| a.params.into_iter().map(|(name, _)| name).collect())
        .unwrap_or_default();
    let Ok(names) = node.master().get_param_names().await else {
        return;
    };
    let prefix = format!("{}/", node.name());
    let mut inherited: Vec<&str> = names
        .iter()
        .filter_map(|name| name.strip_prefix(&prefix))
        .filter(|name| !given.contains(*name))
        .collect();
    if inherited.is_empty() {
        return;
    }
    inherited.sort_unstable();
    let mut said = Vec::new();
    for name in inherited.iter().take(PARAMETERS_NAMED) {
        let value = match node.get_param(&format!("~{name}")).await {
            Ok(Some(value)) => udpros::yaml::params::get_text(&value),
            _ => continue,
        };
        let value: String = value.trim().replace('\n', " ");
        let shown: String = value.chars().take(60).collect();
        let cut = if shown.len() < value.len() { "..." } else { "" };
        said.push(format!("~{name}={shown}{cut}"));
    }
    let more = match inherited.len().saturating_sub(PARAMETERS_NAMED) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    // A warning, so that it shows by default: a parameter left behind changes what the
    // node does.
    tracing::warn!(
        "from the parameter server, not this command line: {}{more} (set by a launch file or an earlier run; `rosparam delete` clears one)",
        said.join(", ")
    );
}

/// What a bridge's command line asks for before the node starts.
#[derive(Debug, PartialEq, Eq)]
enum CommandLine {
    Run,
    Help,
    /// An option that is neither help nor a ROS argument (`name:=value`).
    Unknown(String),
}

fn command_line(args: &[String]) -> CommandLine {
    for arg in args {
        if arg == "-h" || arg == "--help" {
            return CommandLine::Help;
        }
        if arg.starts_with('-') && !arg.contains(":=") {
            return CommandLine::Unknown(arg.clone());
        }
    }
    CommandLine::Run
}

/// A bridge's view of its node's `~` parameters: errors are one line of text naming the key,
/// and string parameters can be a choice among names.
pub struct Params<'a>(pub &'a Node);

impl Params<'_> {
    /// `key`'s value, or `default` when it is not set.
    pub async fn get<T: FromParam>(&self, key: &str, default: T) -> Result<T, ParamError> {
        self.0.param(key, default).await.map_err(|e| {
            let kind = match e {
                udpros::api::ApiError::WrongType(_) => ParamErrorKind::WrongType,
                _ => ParamErrorKind::Unreachable,
            };
            ParamError::new(key, kind, e.to_string())
        })
    }

    /// [`get`](Self::get), its refusal saying what is allowed.
    async fn get_allowed<T: FromParam>(
        &self,
        key: &str,
        default: T,
        allowed: impl FnOnce(String) -> String,
    ) -> Result<T, ParamError> {
        self.get(key, default).await.map_err(|mut e| {
            e.text = allowed(e.text);
            e
        })
    }

    /// `key`'s value (`default` when it is not set), which must lie in `min..=max`: a value
    /// outside (or NaN) is refused with one line naming the key and the range, never
    /// clamped silently.
    pub async fn within<T>(&self, key: &str, default: T, min: T, max: T) -> Result<T, ParamError>
    where
        T: FromParam + PartialOrd + std::fmt::Display + Copy,
    {
        let value = self
            .get_allowed(key, default, |e| format!("{e} (from {min} to {max})"))
            .await?;
        if value >= min && value <= max {
            Ok(value)
        } else {
            Err(ParamError::new(
                key,
                ParamErrorKind::OutOfRange,
                format!("{key} {value} is out of range: expected {min} to {max}"),
            ))
        }
    }

    /// A rate in Hz (`default` when it is not set): 0 turns what it paces off, anything else
    /// lies in [`MIN_RATE`]`..=max` (see [`check_rate`]).
    pub async fn rate(&self, key: &str, default: f64, max: f64) -> Result<f64, ParamError> {
        let rate = self
            .get_allowed(key, default, |e| {
                format!("{e} (Hz: 0, off, or {MIN_RATE:.6} to {max})")
            })
            .await?;
        check_rate(key, rate, max)
    }

    /// A string parameter naming one of `choices` (`default` when it is not set): the value
    /// paired with that name.
    pub async fn choice<T: Copy>(
        &self,
        key: &str,
        default: &str,
        choices: &[(&str, T)],
    ) -> Result<T, ParamError> {
        let names = || choices.iter().map(|(n, _)| *n).collect::<Vec<&str>>();
        let name: String = self
            .get_allowed(key, default.to_string(), |e| {
                format!("{e} ({})", either(&names()))
            })
            .await?;
        match choices.iter().find(|(n, _)| *n == name) {
            Some(&(_, value)) => Ok(value),
            None => Err(ParamError::new(
                key,
                ParamErrorKind::NotAChoice,
                format!("{key} '{name}' is not {}", either(&names())),
            )),
        }
    }
}

/// How a bridge's topics go to their subscribers: what `~fec`, `~governor`, `~max_rate`
/// and `~max_rate_per_host` say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSettings {
    /// `~fec`: forward error correction toward udpros subscribers on UDPROS.
    pub fec: FecPolicy,
    /// `~governor`: each UDPROS link to a udpros subscriber on another host is paced just
    /// under what its path carries (see
    /// [`AdvertiseOptions::governor`](udpros::node::AdvertiseOptions::governor)); true by
    /// default.
    pub governor: bool,
    /// `~max_rate`: the most each subscriber link sends, bytes per second (see
    /// [`AdvertiseOptions::max_rate`](udpros::node::AdvertiseOptions::max_rate)); `None`, no cap.
    pub max_rate: Option<f64>,
    /// `~max_rate_per_host`: the most all of the bridge's links to one subscriber host
    /// send together, bytes per second (see
    /// [`NodeOptions::max_rate_per_host`](udpros::node::NodeOptions::max_rate_per_host));
    /// `None`, no cap.
    pub max_rate_per_host: Option<f64>,
}

impl Default for LinkSettings {
    /// Adaptive FEC, governed links, no caps: the library's defaults.
    fn default() -> Self {
        LinkSettings {
            fec: FecPolicy::default(),
            governor: true,
            max_rate: None,
            max_rate_per_host: None,
        }
    }
}

impl LinkSettings {
    /// Gives `node` the per-host cap: called before the bridge advertises, so that every
    /// link of its topics shares it.
    pub fn apply(&self, node: &udpros::node::Node) {
        node.set_max_rate_per_host(self.max_rate_per_host);
    }

    /// Advertise options with these settings and the defaults for the rest.
    pub fn options(&self) -> udpros::node::AdvertiseOptions {
        let defaults = udpros::node::AdvertiseOptions::default();
        udpros::node::AdvertiseOptions {
            fec: self.fec,
            governor: defaults.governor.filter(|_| self.governor),
            max_rate: self.max_rate,
            ..defaults
        }
    }
}

impl Params<'_> {
    /// `~fec`, `~governor` (true or false), `~max_rate` and `~max_rate_per_host` (bytes
    /// per second, 0 for none, the default: caps for a radio narrower than what the bridge
    /// publishes, toward roscpp and rospy subscribers too), refused with their names and
    /// what is allowed.
    pub async fn link_settings(&self) -> Result<LinkSettings, ParamError> {
        Ok(LinkSettings {
            fec: self.fec().await?,
            governor: self
                .get_allowed("~governor", true, |e| {
                    format!("~governor: {e} (true or false)")
                })
                .await?,
            max_rate: self.rate_cap("~max_rate").await?,
            max_rate_per_host: self.rate_cap("~max_rate_per_host").await?,
        })
    }

    /// A rate cap in bytes per second (0, the default, for none), checked by
    /// [`udpros::node::max_rate_from`].
    async fn rate_cap(&self, key: &str) -> Result<Option<f64>, ParamError> {
        let rate: f64 = self
            .get_allowed(key, 0.0, |e| format!("{key}: {e} (bytes per second)"))
            .await?;
        udpros::node::max_rate_from(rate)
            .map_err(|e| ParamError::new(key, ParamErrorKind::OutOfRange, format!("{key}: {e}")))
    }

    /// `~fec`: forward error correction toward udpros subscribers of the bridge's topics
    /// on UDPROS (`adaptive`, the default; `adaptive:TARGET`; a fixed repair ratio from 0
    /// to 1; `off`), refused with its name and what is allowed.
    pub async fn fec(&self) -> Result<FecPolicy, ParamError> {
        use udpros::xmlrpc::Value;
        let default = Value::from(FecPolicy::default().to_string());
        // `_fec:=0.25` arrives as a double and `_fec:=1` as an integer, `_fec:=off` as a
        // string: the text of each is what is read.
        let text = match self.get("~fec", default).await? {
            Value::String(text) => text,
            Value::Double(ratio) => ratio.to_string(),
            Value::Int(ratio) => ratio.to_string(),
            other => {
                return Err(ParamError::new(
                    "~fec",
                    ParamErrorKind::WrongType,
                    format!("~fec: {other:?} is not a FEC setting"),
                ))
            }
        };
        text.parse()
            .map_err(|e| ParamError::new("~fec", ParamErrorKind::NotAChoice, format!("~fec: {e}")))
    }
}

/// The slowest rate a bridge paces anything at, Hz (one a quarter hour): below it the period
/// is no longer a useful number (a subnormal rate's period is infinite), so such a rate is
/// refused rather than turned into a timer.
pub const MIN_RATE: f64 = 1.0 / 900.0;

/// `rate` (Hz) if it is 0 (off) or a finite number in [`MIN_RATE`]`..=max`; otherwise one line
/// naming `key`, the value and what is allowed. Checked where a rate enters (parameters at
/// start, dynamic_reconfigure), so the period derived from it is always a finite duration.
pub fn check_rate(key: &str, rate: f64, max: f64) -> Result<f64, ParamError> {
    if rate == 0.0 || (MIN_RATE..=max).contains(&rate) {
        Ok(rate)
    } else {
        Err(ParamError::new(
            key,
            ParamErrorKind::OutOfRange,
            format!("{key} {rate} Hz is out of range: expected 0 (off) or {MIN_RATE:.6} to {max}"),
        ))
    }
}

/// Says what is wrong with a device link once when it starts, again with growing pauses
/// while it lasts (10 s, 20 s, ... up to 5 min, with the latest reason: a link can fail in
/// turns on sending and on receiving), and once when it ends: a device that never answers
/// must be visible without flooding the console and /rosout.
#[derive(Debug)]
pub struct Trouble {
    device: String,
    current: Option<String>,
    repeats: u64,
    next_report: std::time::Instant,
    pause: std::time::Duration,
}

impl Trouble {
    const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_secs(10);
    const MAX_PAUSE: std::time::Duration = std::time::Duration::from_secs(300);

    /// Backs off the log for `device` (named in each line).
    pub fn new(device: impl Into<String>) -> Trouble {
        Trouble {
            device: device.into(),
            current: None,
            repeats: 0,
            next_report: std::time::Instant::now(),
            pause: Self::FIRST_PAUSE,
        }
    }

    /// The link failed with `why` (again, perhaps).
    pub fn failed(&mut self, why: &str, now: std::time::Instant) {
        if self.current.is_none() {
            tracing::warn!("{}: {why}; retrying", self.device);
            self.current = Some(why.to_string());
            self.repeats = 0;
            self.pause = Self::FIRST_PAUSE;
            self.next_report = now + self.pause;
            return;
        }
        self.current = Some(why.to_string());
        self.repeats += 1;
        if now >= self.next_report {
            tracing::warn!(
                "{}: still {why} ({} more failures); retrying",
                self.device,
                self.repeats
            );
            self.repeats = 0;
            self.pause = (self.pause * 2).min(Self::MAX_PAUSE);
            self.next_report = now + self.pause;
        }
    }

    /// The device answered: the trouble, if any, is over.
    pub fn recovered(&mut self) {
        if self.current.take().is_some() {
            tracing::info!("{}: answering again", self.device);
        }
    }
}

/// `a`, `a or b`, `a, b or c`.
fn either(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::{check_rate, either, LinkSettings, ParamErrorKind, MIN_RATE};

    /// A bridge's links are governed as the library's are, and `~governor:=false` takes
    /// the governor off and nothing else.
    #[test]
    fn the_governor_is_on_unless_turned_off() {
        let on = LinkSettings::default();
        assert_eq!(
            on.options().governor,
            udpros::node::AdvertiseOptions::default().governor
        );
        assert!(on.options().governor.is_some());
        let off = LinkSettings {
            governor: false,
            ..on
        }
        .options();
        assert_eq!(off.governor, None);
        assert_eq!((off.fec, off.max_rate), (on.fec, on.max_rate));
    }

    #[test]
    fn rates_are_off_or_have_a_finite_period() {
        for ok in [0.0, MIN_RATE, 1.0, 1000.0] {
            assert_eq!(check_rate("~r", ok, 1000.0), Ok(ok));
            if ok > 0.0 {
                assert!(std::time::Duration::try_from_secs_f64(1.0 / ok).is_ok());
            }
        }
        for bad in [
            5e-324,
            1e-300,
            MIN_RATE / 2.0,
            -0.5,
            1000.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
        ] {
            let e = check_rate("~ping_rate", bad, 1000.0).unwrap_err();
            assert_eq!(
                (e.key.as_str(), &e.kind),
                ("~ping_rate", &ParamErrorKind::OutOfRange)
            );
            let e = String::from(e);
            assert!(e.starts_with("~ping_rate ") && e.contains("0 (off)"), "{e}");
        }
    }

    #[test]
    fn choices_are_listed_as_a_sentence() {
        assert_eq!(either(&["v2"]), "v2");
        assert_eq!(either(&["window", "px4"]), "window or px4");
        assert_eq!(
            either(&["auto", "ping1d", "ping360"]),
            "auto, ping1d or ping360"
        );
    }
}
