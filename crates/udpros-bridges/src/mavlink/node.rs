//! The `mavlink_bridge` node: PING and TIMESYNC with an autopilot onto ROS topics, the way
//! mavros's `sys_time` plugin publishes them, plus a latency summary and diagnostics. A
//! thin tokio loop around [`Session`]; offsets are estimated on CLOCK_MONOTONIC and turned
//! into ROS time only when published.

use super::clock::{monotonic_ns, ros_minus_monotonic_ns};
use super::estimator::{FitParams, Px4Params};
use super::link::{Link, LinkEvent};
use super::messages::Outgoing;
use super::protocol::Ids;
use super::publish::{advertise, diagnostics, latency, time_reference, timesync_status};
use super::reconfigure::Change;
use super::session::{Event, Session, SessionConfig};
use super::signing::{SigningConfig, SigningKey, SigningPolicy};
use super::sim::{SimAutopilot, SimConfig, TimesyncResponder};
use super::stream;
use super::url::{FcuUrl, Transport, UrlError};
use crate::sim::Faults;
use crate::Params;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use udpros::msgs::{std_msgs, std_srvs};
use udpros::node::{Node, SubscribeOptions};

/// What `--help` prints: every parameter (default, range, meaning), topic and service. A
/// test checks that it names every `~` name this module reads or advertises.
pub const HELP: &str = include_str!("help.txt");

/// The node's private parameters.
#[derive(Debug, Clone)]
pub struct Config {
    /// `~fcu_url`: where the autopilot is (mavros's URL forms).
    pub fcu_url: FcuUrl,
    /// Our ids, the autopilot's, timeouts and the estimators' parameters.
    pub session: SessionConfig,
    /// Hz; 0 turns PING off.
    pub ping_rate: f64,
    /// Hz; 0 turns TIMESYNC off.
    pub timesync_rate: f64,
    /// Publish the PX4/mavros filter's offset on `~timesync_status` instead of ours.
    pub use_px4_filter: bool,
    /// `~time_ref_source`: the `source` of `~time_reference`.
    pub time_ref_source: String,
    /// The simulated autopilot, for `sim:` URLs.
    pub sim: SimConfig,
    /// `~fec`, `~max_rate` and `~max_rate_per_host`: how the topics go to their
    /// subscribers.
    pub links: crate::LinkSettings,
    /// Hz at which SYSTEM_TIME (this host's wall clock) goes to the autopilot, as mavros's
    /// `conn/system_time_rate`; 0, the default, sends none.
    pub system_time_rate: f64,
    /// MAVLink 2 signing on the autopilot's link (`~signing`, `~signing_key_file`,
    /// `~signing_link_id`); `None`: off.
    pub signing: Option<SigningConfig>,
}

impl Config {
    /// Defaults for an autopilot at `fcu_url` (our ids from its `?ids=`, if it has one).
    pub fn new(fcu_url: FcuUrl) -> Config {
        Config {
            session: SessionConfig {
                ours: fcu_url.ids().unwrap_or(Ids::ONBOARD_COMPUTER),
                autopilot: None,
                timeout_ns: 2_000_000_000,
                respond_timesync: false,
                px4: Px4Params::default(),
                fit: FitParams::default(),
            },
            fcu_url,
            ping_rate: 1.0,
            timesync_rate: 10.0,
            use_px4_filter: false,
            time_ref_source: "fcu".into(),
            sim: SimConfig::default(),
            links: crate::LinkSettings::default(),
            system_time_rate: 0.0,
            signing: None,
        }
    }

    /// Reads `~` parameters (mavros's names for the PX4 filter's).
    pub async fn from_node(node: &Node) -> Result<Config, String> {
        let p = Params(node);
        let url: String = p.get("~fcu_url", "sim:".to_string()).await?;
        let mut cfg = Config::new(url.parse().map_err(|e: UrlError| e.to_string())?);
        cfg.links = p.link_settings().await?;
        let id = async |key: &str, default: i32| -> Result<u8, String> {
            let v = p
                .get(key, default)
                .await
                .map_err(|e| format!("{e} (0 to 255)"))?;
            u8::try_from(v).map_err(|_| format!("{key} {v} is not 0-255"))
        };
        let s = &mut cfg.session;
        s.ours = Ids {
            system: id("~system_id", 1).await?,
            component: id("~component_id", 191).await?,
        };
        // mavros's `?ids=SYSID,COMPID` says who we are, as there.
        if let Some(ids) = cfg.fcu_url.ids() {
            s.ours = ids;
        }
        let target = Ids {
            system: id("~target_system_id", 0).await?,
            component: id("~target_component_id", 0).await?,
        };
        s.autopilot = (target.system != 0).then_some(Ids {
            component: target.component.max(1),
            ..target
        });
        s.timeout_ns = (p.within("~timeout", 2.0f64, 0.01, 60.0).await? * 1e9) as i64;
        s.respond_timesync = p.get("~respond_timesync", false).await?;
        let d = Px4Params::default();
        // The filter's gains are weights of an average, its thresholds ms: a NaN or an
        // infinity would take every sample or none, so they are bounded like the others.
        let gain = async |key: &str, default: f64| p.within(key, default, 0.0, 1.0).await;
        let ms = async |key: &str, default: f64| p.within(key, default, 0.0, 1e6).await;
        s.px4 = Px4Params {
            timesync_alpha_initial: gain("~time/timesync_alpha_initial", d.timesync_alpha_initial)
                .await?,
            timesync_beta_initial: gain("~time/timesync_beta_initial", d.timesync_beta_initial)
                .await?,
            timesync_alpha_final: gain("~time/timesync_alpha_final", d.timesync_alpha_final)
                .await?,
            timesync_beta_final: gain("~time/timesync_beta_final", d.timesync_beta_final).await?,
            convergence_window: p
                .get("~time/convergence_window", d.convergence_window)
                .await?,
            max_rtt_sample: ms("~time/max_rtt_sample", d.max_rtt_sample).await?,
            max_deviation_sample: ms("~time/max_deviation_sample", d.max_deviation_sample).await?,
            max_consecutive_high_rtt: p
                .get("~time/max_consecutive_high_rtt", d.max_consecutive_high_rtt)
                .await?,
            max_consecutive_high_deviation: p
                .get(
                    "~time/max_consecutive_high_deviation",
                    d.max_consecutive_high_deviation,
                )
                .await?,
        };
        let f = FitParams::default();
        s.fit = FitParams {
            window: p
                .within("~fit/window", f.window as u32, 16, 100_000)
                .await? as usize,
            quantile: p.within("~fit/quantile", f.quantile, 0.01, 1.0).await?,
            min_gate: (p
                .within("~fit/min_rtt_gate", f.min_gate as f64 / 1e6, 0.0, 10_000.0)
                .await?
                * 1e6) as i64,
            ..f
        };
        // 0 turns the exchange off.
        cfg.ping_rate = p.rate("~ping_rate", 1.0, 1000.0).await?;
        cfg.timesync_rate = p.rate("~timesync_rate", 10.0, 1000.0).await?;
        // mavros's name for it, where a mavros configuration is reused.
        let mavros_rate = p.rate("~conn/system_time_rate", 0.0, 100.0).await?;
        cfg.system_time_rate = p.rate("~system_time_rate", mavros_rate, 100.0).await?;
        cfg.use_px4_filter = p
            .choice(
                "~timesync_estimator",
                "window",
                &[("window", false), ("px4", true)],
            )
            .await?;
        cfg.time_ref_source = p.get("~time/time_ref_source", "fcu".to_string()).await?;
        cfg.signing = signing_config(&p).await?;
        if cfg.fcu_url == FcuUrl::Sim {
            cfg.sim = sim_config(&p).await?;
            // The simulated autopilot shares the bridge's secret and signs as it does.
            cfg.sim.signing = cfg
                .signing
                .clone()
                .map(|s| SigningConfig { link_id: 0, ..s });
        }
        Ok(cfg)
    }
}

/// What MAVLink signing's secret is derived from the key file for: one key file can
/// secure the ROS graph and the autopilot's link, and neither key opens the other.
pub const SIGNING_PURPOSE: &str = "mavlink signing";

/// `~signing` (`off`, `sign`, `require`), its key file (`~signing_key_file`, else the
/// graph's, `UDPROS_KEY_FILE`) and `~signing_link_id`. The secret is derived from the
/// key file ([`SIGNING_PURPOSE`]); it is never a parameter, so it is in no
/// `rosparam dump` and no launch file.
async fn signing_config(p: &Params<'_>) -> Result<Option<SigningConfig>, String> {
    let policy: SigningPolicy = p.get("~signing", "off".to_string()).await?.parse()?;
    let file: String = p.get("~signing_key_file", String::new()).await?;
    let link_id: u8 = p.within("~signing_link_id", 0u32, 0, 255).await? as u8;
    if policy == SigningPolicy::Off {
        return Ok(None);
    }
    let file = match file.is_empty() {
        false => std::path::PathBuf::from(file),
        true => std::env::var_os(udpros::secure::KEY_FILE_VAR)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
            .ok_or_else(|| {
                format!(
                    "~signing {policy} needs a key: ~signing_key_file, or the graph's in {}",
                    udpros::secure::KEY_FILE_VAR
                )
            })?,
    };
    let key = udpros::secure::read_key_file(&file).map_err(|e| e.to_string())?;
    Ok(Some(SigningConfig {
        key: SigningKey(key.derive(SIGNING_PURPOSE)),
        policy,
        link_id,
    }))
}

/// `~sim/...`: the simulated autopilot's clock and link.
async fn sim_config(p: &Params<'_>) -> Result<SimConfig, String> {
    let ms = |v: f64| Duration::from_secs_f64(v / 1000.0);
    let delay = async |key: &str| p.within(key, 0.0, 0.0, 10_000.0).await.map(ms);
    let jitter = delay("~sim/jitter").await?;
    let loss = p.within("~sim/loss", 0.0f64, 0.0, 1.0).await?;
    let way = |delay: Duration| Faults {
        loss,
        duplicate: 0.0,
        delay,
        jitter,
    };
    let offset: f64 = p.get("~sim/clock_offset", f64::NAN).await?;
    Ok(SimConfig {
        clock_offset_ns: offset.is_finite().then_some((offset * 1e9) as i64),
        drift_ppm: p.within("~sim/drift_ppm", 0.0, -1e5, 1e5).await?,
        up: way(delay("~sim/delay_up").await?),
        down: way(delay("~sim/delay_down").await?),
        seed: p.get("~sim/seed", 1u32).await?.into(),
        timesync: p
            .choice(
                "~sim/timesync",
                "v2",
                &[
                    ("v2", TimesyncResponder::V2),
                    ("v1", TimesyncResponder::V1),
                    ("silent", TimesyncResponder::Silent),
                ],
            )
            .await?,
        answer_ping: p.get("~sim/answer_ping", true).await?,
        mavlink1: p.get("~sim/mavlink1", false).await?,
        attitude_hz: p.within("~sim/attitude_hz", 50.0, 0.0, 1000.0).await?,
        ..SimConfig::default()
    })
}

/// Runs the node until it is shut down; fails only when it cannot start.
pub async fn run(node: Node, mut cfg: Config) -> Result<(), String> {
    let pubs = advertise(&node, cfg.links)
        .await
        .map_err(|e| e.to_string())?;
    // The simulator lives as long as the node.
    let (sim, transport) = match &cfg.fcu_url {
        FcuUrl::Device { transport, .. } => (None, transport.clone()),
        FcuUrl::Sim => {
            let sim = SimAutopilot::start(([127, 0, 0, 1], 0).into(), cfg.sim.clone())
                .map_err(|e| format!("simulated autopilot: {e}"))?;
            let transport = Transport::udp_to(sim.local_addr());
            (Some(sim), transport)
        }
    };
    // `~sim/command` ("reboot", "step SECONDS") disturbs the simulated autopilot's clock.
    let mut sim_commands = match &sim {
        Some(_) => Some(
            node.subscribe::<std_msgs::String>("~sim/command", SubscribeOptions::default())
                .await
                .map_err(|e| e.to_string())?,
        ),
        None => None,
    };
    // `~reset_timesync` asks the loop, which owns the session, and waits for its word.
    let (reset_tx, mut resets) = tokio::sync::mpsc::channel::<tokio::sync::oneshot::Sender<()>>(4);
    let _reset_service = node
        .advertise_service::<std_srvs::Trigger, _, _>("~reset_timesync", move |_| {
            let reset_tx = reset_tx.clone();
            async move {
                let (done, restarted) = tokio::sync::oneshot::channel();
                reset_tx
                    .send(done)
                    .await
                    .map_err(|_| "the bridge is shutting down".to_string())?;
                restarted
                    .await
                    .map_err(|_| "the bridge is shutting down".to_string())?;
                Ok(std_srvs::TriggerResponse {
                    success: true,
                    message: "both TIMESYNC estimators restarted".into(),
                })
            }
        })
        .await
        .map_err(|e| e.to_string())?;
    // dynamic_reconfigure changes go to the loop, which owns the session and the timers.
    let (changes_tx, mut changes) = tokio::sync::mpsc::channel(4);
    serve_settings(&node, &cfg, changes_tx);
    let mut link = Link::spawn(transport, cfg.session.ours, cfg.signing.as_ref());
    let mut session = Session::new(cfg.session.clone());
    let mut link_state = LinkState::default();
    let mut trouble = crate::Trouble::new(cfg.fcu_url.to_string());
    // A UDP link is "up" with nobody at the other end: silence is the trouble to report.
    let mut last_heard = std::time::Instant::now();
    let mut heartbeat = tokio::time::interval(Duration::from_secs(1));
    let mut ping = every(cfg.ping_rate);
    let mut timesync = every(cfg.timesync_rate);
    let mut system_time = every(cfg.system_time_rate);
    let mut report = tokio::time::interval(Duration::from_secs(1));
    report.reset(); // the first report after a second of data
    let clock = node.clock();
    let mut shutdown = std::pin::pin!(node.shutdown_requested());
    loop {
        tokio::select! {
            event = link.events.recv() => {
                let Some(event) = event else { break };
                match event {
                    LinkEvent::Connected => link_state.connected = true,
                    LinkEvent::TimesyncSent { ts1, at_ns } => session.departed(ts1, at_ns),
                    LinkEvent::Disconnected(why) => {
                        trouble.failed(&why, std::time::Instant::now());
                        link_state.connected = false;
                        link_state.last_error = why;
                    }
                    LinkEvent::Message { from, msg, at_ns, frame } => {
                        trouble.recovered();
                        last_heard = std::time::Instant::now();
                        if pubs.messages.num_subscribers() > 0 {
                            // Only the autopilot's own clock is the one TIMESYNC measured.
                            let offset_ns = (session.autopilot() == Some(from))
                                .then(|| session.offset_at(at_ns, cfg.use_px4_filter))
                                .flatten();
                            let how = stream::Stamping {
                                offset_ns,
                                ros_minus_mono_ns: ros_minus_monotonic_ns(&clock),
                                wall_clock: !clock.is_sim_time(),
                            };
                            let _ = pubs.messages.publish(&stream::message(&frame, from, at_ns, how));
                        }
                        match session.on_message(from, msg, at_ns) {
                            Some(Event::Send(out)) => { link.send(out); }
                            Some(Event::Timesync(sample)) => {
                                if let Some(status) = timesync_status(&cfg, &sample, &clock) {
                                    let _ = pubs.timesync_status.publish(&status);
                                }
                            }
                            Some(Event::SystemTime { unix_usec, at_ns }) => {
                                if let Some(msg) = time_reference(&cfg, unix_usec, at_ns, &clock) {
                                    let _ = pubs.time_reference.publish(&msg);
                                }
                            }
                            Some(Event::AutopilotFound(ids)) => {
                                tracing::info!("autopilot {}/{} found", ids.system, ids.component);
                            }
                            None => {}
                        }
                    }
                }
            }
            _ = heartbeat.tick() => { link.send(Outgoing::Heartbeat); }
            _ = tick(&mut ping) => { link.send(session.ping_request(monotonic_ns())); }
            _ = tick(&mut timesync) => { link.send(session.timesync_request(monotonic_ns())); }
            _ = tick(&mut system_time) => { link.send(system_time_now()); }
            _ = report.tick() => {
                if last_heard.elapsed() >= SILENCE_IS_TROUBLE {
                    trouble.failed("no MAVLink message from the autopilot", std::time::Instant::now());
                }
                let now = monotonic_ns();
                session.expire(now);
                let r = session.report(now);
                let _ = pubs.latency.publish(&latency(&r, now, &clock));
                let _ = pubs.diagnostics.publish(&diagnostics(&node, &cfg, &link, &link_state, &r));
            }
            Some(done) = resets.recv() => {
                session.reset_estimators();
                tracing::info!("TIMESYNC estimators restarted on request");
                let _ = done.send(());
            }
            Some((change, done)) = changes.recv() => {
                apply_change(&mut cfg, &mut session, &mut ping, &mut timesync, change);
                let _ = done.send(());
            }
            Some(command) = next_command(&mut sim_commands) => {
                if let Some(sim) = &sim {
                    sim_command(sim, &command.data);
                }
            }
            _ = &mut shutdown => break,
        }
    }
    Ok(())
}

/// How long the autopilot may say nothing before the bridge says so (it sends a
/// heartbeat every second).
const SILENCE_IS_TROUBLE: Duration = Duration::from_secs(5);

/// A reconfiguration, applied in the loop: timers restart at their new rates, the timeout
/// and the estimator published change at once, the window estimator starts afresh.
fn apply_change(
    cfg: &mut Config,
    session: &mut Session,
    ping: &mut Option<tokio::time::Interval>,
    timesync: &mut Option<tokio::time::Interval>,
    change: Change,
) {
    match change {
        Change::Main {
            ping_rate,
            timesync_rate,
            timeout,
            use_px4_filter,
        } => {
            if ping_rate != cfg.ping_rate {
                cfg.ping_rate = ping_rate;
                *ping = every(ping_rate);
            }
            if timesync_rate != cfg.timesync_rate {
                cfg.timesync_rate = timesync_rate;
                *timesync = every(timesync_rate);
            }
            cfg.session.timeout_ns = (timeout * 1e9) as i64;
            session.set_timeout(cfg.session.timeout_ns);
            cfg.use_px4_filter = use_px4_filter;
        }
        Change::Fit(fit) => {
            cfg.session.fit = fit;
            session.set_fit(fit);
        }
    }
}

/// Serves the settings to dynamic_reconfigure, `~` and `~fit`, for as long as the node
/// runs, in a task of its own: each callback waits for the loop to apply its change.
fn serve_settings(
    node: &Node,
    cfg: &Config,
    changes: tokio::sync::mpsc::Sender<(Change, tokio::sync::oneshot::Sender<()>)>,
) {
    use super::reconfigure::{fit_change, fit_description, main_change, main_description};
    let node = node.clone();
    let (main, fit_settings, base_fit) = (
        main_description(cfg),
        fit_description(&cfg.session.fit),
        cfg.session.fit,
    );
    let send = move |change: Change| {
        let changes = changes.clone();
        async move {
            let (done, applied) = tokio::sync::oneshot::channel();
            if changes.send((change, done)).await.is_ok() {
                let _ = applied.await;
            }
        }
    };
    // What a refused change answers: the settings applied last (at first, the node's own).
    let node_own = |d: &udpros::reconfigure::Description| {
        Arc::new(Mutex::new(d.clone().validate().ok().map(|s| s.defaults())))
    };
    let (applied_main, applied_fit) = (node_own(&main), node_own(&fit_settings));
    tokio::spawn(async move {
        let send_main = send.clone();
        let main = node
            .reconfigure_server("~", main, move |settings, _level| {
                let (send, applied) = (send_main.clone(), applied_main.clone());
                async move { apply_or_refuse(settings, main_change, send, &applied, "~").await }
            })
            .await;
        let fit = node
            .reconfigure_server("~fit", fit_settings, move |settings, _level| {
                let (send, applied) = (send.clone(), applied_fit.clone());
                let change = move |s: &udpros::reconfigure::Config| fit_change(&base_fit, s);
                async move { apply_or_refuse(settings, change, send, &applied, "~fit/").await }
            })
            .await;
        match (main, fit) {
            (Ok(main), Ok(fit)) => {
                node.shutdown_requested().await;
                drop((main, fit));
            }
            (Err(e), _) | (_, Err(e)) => tracing::error!("cannot serve dynamic_reconfigure: {e}"),
        }
    });
}

/// The settings a dynamic_reconfigure call asks for, applied by the loop when the node can
/// take them; otherwise the settings applied last, with one line naming what was refused.
async fn apply_or_refuse<F: Future<Output = ()>>(
    settings: udpros::reconfigure::Config,
    change: impl Fn(&udpros::reconfigure::Config) -> Result<Change, String>,
    send: impl Fn(Change) -> F,
    applied: &Mutex<Option<udpros::reconfigure::Config>>,
    ns: &str,
) -> udpros::reconfigure::Config {
    match change(&settings) {
        Ok(change) => {
            send(change).await;
            *applied.lock().unwrap_or_else(|e| e.into_inner()) = Some(settings.clone());
            settings
        }
        Err(why) => {
            tracing::warn!("set_parameters: {ns}{why}; kept as it was");
            let last = applied.lock().unwrap_or_else(|e| e.into_inner()).clone();
            last.unwrap_or(settings)
        }
    }
}

/// SYSTEM_TIME as mavros's sys_time plugin sends it: this host's wall clock (an autopilot
/// without GPS takes it as its time), and where mavros leaves time_boot_ms 0, our
/// CLOCK_MONOTONIC in ms (the time since this host booted, which is what the field means).
fn system_time_now() -> Outgoing {
    let unix_usec = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    Outgoing::SystemTime {
        unix_usec,
        boot_ms: (monotonic_ns() / 1_000_000) as u32,
    }
}

async fn next_command(
    sub: &mut Option<udpros::node::Subscriber<std_msgs::String>>,
) -> Option<std_msgs::String> {
    match sub {
        Some(sub) => sub.recv().await,
        None => std::future::pending().await,
    }
}

fn sim_command(sim: &SimAutopilot, command: &str) {
    let words: Vec<&str> = command.split_whitespace().collect();
    match words.as_slice() {
        ["reboot"] => {
            tracing::info!("simulated autopilot: reboot");
            sim.reboot();
        }
        ["step", seconds] => match seconds.parse::<f64>() {
            Ok(s) if s.is_finite() && s.abs() < 1e9 => {
                tracing::info!("simulated autopilot: clock step of {s} s");
                sim.step_clock((s * 1e9) as i64);
            }
            _ => tracing::warn!("~sim/command: '{seconds}' is not a number of seconds"),
        },
        _ => tracing::warn!("~sim/command '{command}': use 'reboot' or 'step SECONDS'"),
    }
}

#[derive(Debug, Default)]
pub(super) struct LinkState {
    pub(super) connected: bool,
    pub(super) last_error: String,
}

/// A timer at `rate` Hz, or none for 0 (or for a rate whose period is no duration, which
/// [`crate::check_rate`] keeps from getting here).
fn every(rate: f64) -> Option<tokio::time::Interval> {
    let period = Duration::try_from_secs_f64(1.0 / rate.min(1000.0)).ok()?;
    (rate > 0.0).then(|| {
        let mut i = tokio::time::interval(period);
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        i
    })
}

async fn tick(timer: &mut Option<tokio::time::Interval>) {
    match timer {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}
