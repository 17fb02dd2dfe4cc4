//! A Ping device session without I/O: identify the device, configure it, confirm each
//! setting (ACK, else read back), keep it streaming (poll a Ping1D whose stream stalled,
//! step a Ping360 without auto-transmit through its sweep), and ask for its health, all
//! driven by frames in, `now` and deadlines. The node feeds it link events and sends what
//! [`Session::poll_action`] returns; the session is tested with simulated time.
//!
//! One file, past 500 lines, on purpose: one state machine whose transitions (identify,
//! configure, confirm, stream, settle a change, health) share its state and deadlines; the
//! settings it applies are in `settings.rs`.

use super::frame::Frame;
use super::link::LinkSpec;
use super::messages::{self as m, Message};
use super::settings::{angle_grad, ping1d_settings, revert, setting_of};
pub use super::settings::{Config, DeviceType, Ping360Settings};
use super::{draft2017 as draft, Decoded, DeviceKind, Dialect};
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// What the session knows of its device, for diagnostics.
#[derive(Debug, Default, Clone)]
pub struct DeviceState {
    /// Whether the link is up.
    pub connected: bool,
    /// What the device said it is, once it answered.
    pub kind: Option<DeviceKind>,
    /// Its firmware version, as text.
    pub firmware: String,
    /// Its protocol version, as text.
    pub protocol: String,
    /// °C, once asked.
    pub processor_temperature: Option<f64>,
    /// °C, once asked.
    pub pcb_temperature: Option<f64>,
    /// V, once asked.
    pub voltage: Option<f64>,
    /// Frames received.
    pub messages: u64,
    /// Why the link last went down.
    pub last_error: String,
    /// Settings the device confirmed (ACK, or read back as sent).
    pub confirmed: u32,
    /// Settings the device refused (NACK, read back otherwise, or no answer).
    pub refused: u32,
    /// (major, minor, patch) from device_information.
    firmware_version: Option<(u8, u8, u8)>,
    /// The set messages refused since [`Session::take_refused`] last took them (the
    /// newest [`REFUSED_KEPT`]).
    refused_ids: Vec<u16>,
    /// Settings sent and not yet confirmed by ACK or read-back.
    pending: Vec<PendingSet>,
}

/// A setting sent to the device: confirmed by its ACK, refused by its NACK, else read back
/// (as brping does) and compared.
#[derive(Debug, Clone)]
struct PendingSet {
    set_id: u16,
    /// What reading the setting back must return.
    expected: Message,
    deadline: Instant,
    read_back: bool,
}

/// How many refused settings are kept for [`Session::take_refused`].
const REFUSED_KEPT: usize = 32;
/// How long the device has to ACK a setting, or to answer its read-back.
const SET_TIMEOUT: Duration = Duration::from_millis(250);
/// How often an unidentified device is asked again.
const IDENTIFY_EVERY: Duration = Duration::from_millis(300);
/// How often health is asked for and diagnostics are due.
const DIAGNOSTICS_EVERY: Duration = Duration::from_secs(1);
/// How long a Ping360 transmit may go unanswered before the next.
const PING360_REPLY_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long an auto-transmitting Ping360 may stay silent before it is configured again.
const AUTO_TRANSMIT_SILENCE: Duration = Duration::from_secs(2);

/// How long a change of settings waits for the device's confirmations at most; a setting
/// still unconfirmed then counts as applied, since the device has not refused it.
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(2);

/// The session's settings as they change ([`Session::watch_config`]): what the node's fast
/// path publishes with and what dynamic_reconfigure's changes start from.
pub type ConfigWatch = watch::Receiver<Arc<Config>>;

/// A change of settings sent to the device and not yet settled.
#[derive(Debug)]
struct Change {
    /// The settings before it, for what the device refuses.
    before: Config,
    deadline: Instant,
}

/// What the session asks of the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this frame.
    Send(Vec<u8>),
    /// Send a serial break (Ping360 auto-baud; also stops auto-transmit).
    Break,
}

/// One Ping360 transmit's echo, from `device_data` or `auto_device_data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Echo {
    /// Bearing, gradians (400 a turn).
    pub angle: u16,
    /// Gain index.
    pub gain_setting: u8,
    /// kHz.
    pub transmit_frequency: u16,
    /// µs.
    pub transmit_duration: u16,
    /// 25 ns ticks.
    pub sample_period: u16,
    /// Intensities, nearest first.
    pub data: Bytes,
}

impl DeviceState {
    /// Whether the firmware streams `auto_transmit` (newer than 3.3.0).
    fn has_auto_transmit(&self) -> bool {
        self.firmware_version.is_some_and(|v| v > (3, 3, 0))
    }

    fn settle(&mut self, set_id: u16, ok: bool, why: &str) {
        if let Some(i) = self.pending.iter().position(|p| p.set_id == set_id) {
            self.pending.remove(i);
            if ok {
                self.confirmed += 1;
            } else {
                self.refused += 1;
                if self.refused_ids.len() == REFUSED_KEPT {
                    self.refused_ids.remove(0);
                }
                self.refused_ids.push(set_id);
                tracing::warn!("the device did not take setting {set_id}: {why}");
            }
        }
    }

    /// A reply that may be the read-back of a pending setting.
    fn read_back(&mut self, reply: &Message) {
        let Some(i) = self
            .pending
            .iter()
            .position(|p| p.read_back && p.expected.id() == reply.id())
        else {
            return;
        };
        let pending = self.pending[i].clone();
        let same = &pending.expected == reply;
        self.settle(pending.set_id, same, &format!("it reads back {reply:?}"));
    }
}

/// The session with one device.
#[derive(Debug)]
pub struct Session {
    cfg: Config,
    /// `cfg` as readers elsewhere see it (the fast path, dynamic_reconfigure); only the
    /// session writes it.
    published: watch::Sender<Arc<Config>>,
    /// The change of settings in progress.
    change: Option<Change>,
    settings: Ping360Settings,
    device: DeviceState,
    out: VecDeque<Action>,
    configured: bool,
    identify_at: Instant,
    last_data: Instant,
    next_poll: Instant,
    next_diagnostics: Instant,
    /// When the last Ping360 transmit was sent, while its echo has not come.
    awaiting_echo: Option<Instant>,
    angle: u16,
    direction: i32,
}

impl Session {
    /// A session for `cfg`, before the link is up.
    pub fn new(cfg: Config, now: Instant) -> Session {
        Session {
            settings: Ping360Settings::of(&cfg),
            angle: angle_grad(cfg.start_angle),
            published: watch::Sender::new(Arc::new(cfg.clone())),
            change: None,
            cfg,
            device: DeviceState::default(),
            out: VecDeque::new(),
            configured: false,
            identify_at: now,
            last_data: now,
            next_poll: now,
            next_diagnostics: now + DIAGNOSTICS_EVERY,
            awaiting_echo: None,
            direction: 1,
        }
    }

    /// What is known of the device.
    pub fn device(&self) -> &DeviceState {
        &self.device
    }

    /// The next thing to send, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.out.pop_front()
    }

    /// The link came up: identify the device (a Ping360 first gets a break for its
    /// auto-baud), then configure it.
    pub fn connected(&mut self, now: Instant) {
        self.device.connected = true;
        self.configured = false;
        self.identify_at = now;
        if self.device.kind == Some(DeviceKind::Ping360)
            || self.cfg.device_type == DeviceType::Ping360
        {
            self.out.push_back(Action::Break);
        }
    }

    /// The link went down.
    pub fn disconnected(&mut self, why: String) {
        self.device.connected = false;
        self.device.last_error = why;
        self.awaiting_echo = None;
    }

    /// A frame from the device, decoded here: [`Session::handle_message`] for callers that
    /// hold raw frames.
    pub fn handle_frame(&mut self, frame: &Frame, now: Instant) -> Option<Echo> {
        self.handle_message(&Decoded::of(frame, self.cfg.dialect), now)
    }

    /// A message from the device; the echo to publish when it carries Ping360 data. (Ping1D
    /// data is published by the link's fast path, not here.)
    pub fn handle_message(&mut self, message: &Decoded, now: Instant) -> Option<Echo> {
        self.device.messages += 1;
        self.last_data = now;
        let msg = match message {
            Decoded::Draft(draft::DraftMessage::GenGetVersion(v)) => {
                self.device.kind = Some(DeviceKind::Ping1d);
                self.device.firmware = format!(
                    "{}.{} (2017 draft protocol)",
                    v.fw_version_major, v.fw_version_minor
                );
                return None;
            }
            Decoded::Current(msg) => msg,
            // Another family's message, or damaged (counted by the decoder): nothing to do.
            Decoded::Draft(_) | Decoded::Unknown => return None,
        };
        let echo =
            |angle, gain_setting, transmit_frequency, transmit_duration, sample_period, data| {
                Echo {
                    angle,
                    gain_setting,
                    transmit_frequency,
                    transmit_duration,
                    sample_period,
                    data,
                }
            };
        let device = &mut self.device;
        match msg {
            Message::ProtocolVersion(v) => {
                device.protocol = format!(
                    "{}.{}.{}",
                    v.version_major, v.version_minor, v.version_patch
                );
                if self.cfg.dialect == Dialect::Draft2017 {
                    tracing::error!(
                        "the device answers the current Ping protocol ({}); ~dialect draft2017 refused",
                        device.protocol
                    );
                }
            }
            Message::DeviceInformation(i) => {
                let version = (
                    i.firmware_version_major,
                    i.firmware_version_minor,
                    i.firmware_version_patch,
                );
                device.firmware = format!("{}.{}.{}", version.0, version.1, version.2);
                device.firmware_version = Some(version);
                device.kind = Some(match (self.cfg.device_type, i.device_type) {
                    (DeviceType::Ping360, _) | (DeviceType::Auto, 2) => DeviceKind::Ping360,
                    _ => DeviceKind::Ping1d,
                });
            }
            Message::FirmwareVersion(v) if device.kind.is_none() => {
                device.firmware =
                    format!("{}.{}", v.firmware_version_major, v.firmware_version_minor);
                device.kind = Some(if self.cfg.device_type == DeviceType::Ping360 {
                    DeviceKind::Ping360
                } else {
                    DeviceKind::Ping1d
                });
            }
            Message::ProcessorTemperature(t) => {
                device.processor_temperature = Some(f64::from(t.processor_temperature) / 100.0)
            }
            Message::PcbTemperature(t) => {
                device.pcb_temperature = Some(f64::from(t.pcb_temperature) / 100.0)
            }
            Message::Voltage5(v) => device.voltage = Some(f64::from(v.voltage_5) / 1000.0),
            Message::Ack(a) => device.settle(a.acked_id, true, ""),
            Message::Nack(n) => {
                tracing::warn!("device refused message {}: {}", n.nacked_id, n.nack_message);
                device.settle(n.nacked_id, false, &n.nack_message);
            }
            reply @ (Message::SpeedOfSound(_)
            | Message::ModeAuto(_)
            | Message::PingInterval(_)
            | Message::Range(_)
            | Message::GainSetting(_)) => device.read_back(reply),
            Message::DeviceData(d) => {
                self.awaiting_echo = None;
                return Some(echo(
                    d.angle,
                    d.gain_setting,
                    d.transmit_frequency,
                    d.transmit_duration,
                    d.sample_period,
                    d.data.clone(),
                ));
            }
            Message::AutoDeviceData(d) => {
                return Some(echo(
                    d.angle,
                    d.gain_setting,
                    d.transmit_frequency,
                    d.transmit_duration,
                    d.sample_period,
                    d.data.clone(),
                ));
            }
            _ => {}
        }
        None
    }

    /// When [`handle_timeout`](Session::handle_timeout) is next due. It may be called
    /// earlier (after every event, say); it does only what is due.
    pub fn poll_timeout(&self) -> Instant {
        let mut due = self.next_diagnostics;
        if !self.device.connected {
            return due;
        }
        let Some(kind) = self.device.kind else {
            return due.min(self.identify_at);
        };
        if !self.configured {
            return self.last_data.min(due);
        }
        for p in &self.device.pending {
            due = due.min(p.deadline);
        }
        if let Some(change) = &self.change {
            due = due.min(change.deadline);
        }
        match kind {
            DeviceKind::Ping1d => due.min(self.next_poll.max(self.last_data + self.poll_stall())),
            DeviceKind::Ping360 if !self.use_auto_transmit() => match self.awaiting_echo {
                Some(sent) => due.min(sent + PING360_REPLY_TIMEOUT),
                None => self.last_data.min(due),
            },
            DeviceKind::Ping360 => due.min(self.last_data + AUTO_TRANSMIT_SILENCE),
        }
    }

    /// Does what is due at `now`; returns whether diagnostics are due (the node publishes
    /// them: they also tell a device that does not answer).
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        let diagnostics = now >= self.next_diagnostics;
        if diagnostics {
            self.next_diagnostics = now + DIAGNOSTICS_EVERY;
        }
        if !self.device.connected {
            return diagnostics;
        }
        let Some(kind) = self.device.kind else {
            if now >= self.identify_at {
                self.identify();
                self.identify_at = now + IDENTIFY_EVERY;
            }
            return diagnostics;
        };
        if !self.configured {
            self.configure(kind, now);
            self.configured = true;
            self.next_poll = now + self.poll_stall() + Duration::from_millis(100);
            self.last_data = now;
        }
        self.expire_settings(now);
        match kind {
            // Streaming stalled (or a device without continuous mode): poll.
            DeviceKind::Ping1d => {
                if now >= self.next_poll
                    && now.saturating_duration_since(self.last_data) > self.poll_stall()
                {
                    self.poll_ping1d();
                    self.next_poll = now + Duration::from_millis(u64::from(self.cfg.ping_interval));
                }
            }
            DeviceKind::Ping360 if !self.use_auto_transmit() => {
                let waiting = self.awaiting_echo.is_some_and(|sent| {
                    now.saturating_duration_since(sent) < PING360_REPLY_TIMEOUT
                });
                if !waiting {
                    self.transmit_ping360(now);
                }
            }
            DeviceKind::Ping360 => {
                if now.saturating_duration_since(self.last_data) > AUTO_TRANSMIT_SILENCE {
                    self.configured = false; // restart auto-transmit
                }
            }
        }
        if diagnostics && kind == DeviceKind::Ping1d && self.cfg.dialect == Dialect::Current {
            for id in [
                m::ProcessorTemperature::ID,
                m::PcbTemperature::ID,
                m::Voltage5::ID,
            ] {
                self.send(
                    Message::GeneralRequest(m::GeneralRequest { requested_id: id }).to_frame(),
                );
            }
        }
        diagnostics
    }

    /// The settings in force (the node's parameters as the session applies them).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The settings in force as they change, for readers outside the session's loop.
    pub fn watch_config(&self) -> ConfigWatch {
        self.published.subscribe()
    }

    fn set_config(&mut self, cfg: Config) {
        self.settings = Ping360Settings::of(&cfg);
        self.published.send_replace(Arc::new(cfg.clone()));
        self.cfg = cfg;
    }

    /// Starts a change of settings (dynamic_reconfigure): `tried` is in force at once, and
    /// what the device refuses goes back once it has answered ([`Session::poll_change`]).
    /// False, and nothing done, while another change is in progress.
    pub fn begin_change(&mut self, tried: Config, now: Instant) -> bool {
        if self.change.is_some() {
            return false;
        }
        // Refusals of settings sent before belong to no change.
        self.device.refused_ids.clear();
        self.change = Some(Change {
            before: self.cfg.clone(),
            deadline: now + CHANGE_TIMEOUT,
        });
        self.reconfigure(tried, now);
        true
    }

    /// The settings a change ends with, once the device has confirmed or refused each of
    /// them or [`CHANGE_TIMEOUT`] has passed: what it refused is put back as it was (and said
    /// in the log; diagnostics count it). `None` while no change is due.
    pub fn poll_change(&mut self, now: Instant) -> Option<Config> {
        let due = self.change.as_ref()?.deadline <= now || self.settled();
        if !due {
            return None;
        }
        let change = self.change.take()?;
        let mut applied = self.cfg.clone();
        for id in self.take_refused() {
            tracing::warn!("the device refused {}; it stays as it was", setting_of(id));
            revert(&mut applied, &change.before, id);
        }
        self.set_config(applied.clone());
        Some(applied)
    }

    /// New settings while running (dynamic_reconfigure). A configured Ping1D gets the
    /// settings that changed, each confirmed by ACK or read-back as at start (the 2017
    /// draft gets them all again); a Ping360 uses them from its next transmit, or, when it
    /// transmits by itself, is configured again. Before the device is configured they are
    /// simply what it will be configured with.
    pub fn reconfigure(&mut self, cfg: Config, now: Instant) {
        let old = self.cfg.clone();
        self.set_config(cfg);
        if (old.start_angle, old.stop_angle) != (self.cfg.start_angle, self.cfg.stop_angle) {
            self.angle = angle_grad(self.cfg.start_angle);
            self.direction = 1;
        }
        if !self.configured {
            return;
        }
        match (self.device.kind, self.cfg.dialect) {
            (Some(DeviceKind::Ping1d), Dialect::Current) => {
                let before = ping1d_settings(&old);
                for (set, expected) in ping1d_settings(&self.cfg) {
                    if before.contains(&(set.clone(), expected.clone())) {
                        continue;
                    }
                    self.send(set.to_frame());
                    self.device.pending.retain(|p| p.set_id != set.id());
                    self.device.pending.push(PendingSet {
                        set_id: set.id(),
                        expected,
                        deadline: now + SET_TIMEOUT,
                        read_back: false,
                    });
                }
            }
            (Some(DeviceKind::Ping360), _) if self.use_auto_transmit() => self.configured = false,
            (Some(DeviceKind::Ping1d), Dialect::Draft2017) => self.configured = false,
            _ => {}
        }
    }

    /// Whether every setting sent has been confirmed or refused.
    pub fn settled(&self) -> bool {
        self.device.pending.is_empty()
    }

    /// The ids of the set messages the device refused since the last call.
    pub fn take_refused(&mut self) -> Vec<u16> {
        std::mem::take(&mut self.device.refused_ids)
    }

    /// What to send before the link closes: a Ping360's motor is switched off.
    pub fn stop(&mut self) {
        if self.device.kind == Some(DeviceKind::Ping360) {
            self.send(Message::MotorOff(m::MotorOff {}).to_frame());
        }
    }

    fn send(&mut self, frame: Vec<u8>) {
        self.out.push_back(Action::Send(frame));
    }

    /// How long a Ping1D stream may be silent before the session polls.
    fn poll_stall(&self) -> Duration {
        Duration::from_millis(u64::from(self.cfg.ping_interval) * 3 + 200)
    }

    /// Auto-transmit needs firmware newer than 3.3.0 and a link fast enough for its stream
    /// (UDP, or serial at 921600 baud or more).
    fn use_auto_transmit(&self) -> bool {
        let fast_link = !matches!(self.cfg.device, LinkSpec::Serial { baud, .. } if baud < 921_600);
        self.cfg.use_auto_transmit && fast_link && self.device.has_auto_transmit()
    }

    /// Identification: protocol_version and device_information (harmless on every
    /// firmware); very old firmware answers only the legacy firmware_version request, the
    /// 2017 draft its own version request.
    fn identify(&mut self) {
        let request =
            |id| Message::GeneralRequest(m::GeneralRequest { requested_id: id }).to_frame();
        self.send(request(m::ProtocolVersion::ID));
        self.send(request(m::DeviceInformation::ID));
        let legacy = match self.cfg.dialect {
            Dialect::Current => super::encode_frame(m::FirmwareVersion::ID, 0, 0, &[]),
            Dialect::Draft2017 => {
                draft::DraftMessage::GenCmdRequest(draft::GenCmdRequest { request_id: 101 })
                    .to_frame()
            }
        };
        self.send(legacy);
    }

    /// Sends the configuration for `kind`; the current protocol's settings wait for
    /// confirmation.
    fn configure(&mut self, kind: DeviceKind, now: Instant) {
        let cfg = self.cfg.clone();
        let mm = |metres: f64| (metres * 1000.0).round().max(0.0) as u32;
        match (kind, cfg.dialect) {
            (DeviceKind::Ping1d, Dialect::Current) => {
                for (set, expected) in ping1d_settings(&cfg) {
                    self.send(set.to_frame());
                    self.device.pending.push(PendingSet {
                        set_id: set.id(),
                        expected,
                        deadline: now + SET_TIMEOUT,
                        read_back: false,
                    });
                }
                self.send(
                    Message::ContinuousStart(m::ContinuousStart { id: m::Profile::ID }).to_frame(),
                );
            }
            (DeviceKind::Ping1d, Dialect::Draft2017) => {
                let sets: [draft::DraftMessage; 3] = [
                    draft::SonarSetVelocity {
                        c_water: mm(cfg.speed_of_sound),
                    }
                    .into(),
                    draft::EsMode {
                        auto_manual: u8::from(cfg.mode_auto),
                    }
                    .into(),
                    draft::EsRate {
                        msec_per_ping: cfg.ping_interval,
                    }
                    .into(),
                ];
                for message in sets {
                    self.send(message.to_frame());
                }
            }
            (DeviceKind::Ping360, _) if self.use_auto_transmit() => {
                self.out.push_back(Action::Break);
                let a = m::AutoTransmit {
                    mode: 1,
                    gain_setting: cfg.gain.min(2) as u8,
                    transmit_duration: self.settings.transmit_duration,
                    sample_period: self.settings.sample_period,
                    transmit_frequency: cfg.transmit_frequency,
                    number_of_samples: self.settings.number_of_samples,
                    start_angle: angle_grad(cfg.start_angle),
                    stop_angle: angle_grad(cfg.stop_angle).max(1)
                        - u16::from(cfg.stop_angle >= 360.0),
                    num_steps: cfg.num_steps,
                    delay: 0,
                };
                self.send(Message::AutoTransmit(a).to_frame());
            }
            (DeviceKind::Ping360, _) => {}
        }
    }

    /// Read-backs for settings past their ACK deadline; gives up on the silent.
    fn expire_settings(&mut self, now: Instant) {
        let mut silent = Vec::new();
        let mut read_backs = Vec::new();
        for p in self.device.pending.iter_mut().filter(|p| p.deadline <= now) {
            if p.read_back {
                silent.push(p.set_id);
            } else {
                p.read_back = true;
                p.deadline = now + SET_TIMEOUT;
                read_backs.push(p.expected.id());
            }
        }
        for requested_id in read_backs {
            self.send(Message::GeneralRequest(m::GeneralRequest { requested_id }).to_frame());
        }
        for id in silent {
            self.device
                .settle(id, false, "no ACK and no answer to reading it back");
        }
    }

    fn poll_ping1d(&mut self) {
        let request = match self.cfg.dialect {
            Dialect::Current => Message::GeneralRequest(m::GeneralRequest {
                requested_id: m::Profile::ID,
            })
            .to_frame(),
            Dialect::Draft2017 => {
                draft::DraftMessage::GenCmdRequest(draft::GenCmdRequest { request_id: 1102 })
                    .to_frame()
            }
        };
        self.send(request);
    }

    /// One Ping360 transmit at the current angle, then a step along the sweep.
    fn transmit_ping360(&mut self, now: Instant) {
        let t = m::Transducer {
            mode: 1,
            gain_setting: self.cfg.gain.min(2) as u8,
            angle: self.angle,
            transmit_duration: self.settings.transmit_duration,
            sample_period: self.settings.sample_period,
            transmit_frequency: self.cfg.transmit_frequency,
            number_of_samples: self.settings.number_of_samples,
            transmit: 1,
            reserved: 0,
        };
        self.send(Message::Transducer(t).to_frame());
        self.awaiting_echo = Some(now);
        self.angle = super::sweep_step(
            self.angle,
            angle_grad(self.cfg.start_angle),
            angle_grad(self.cfg.stop_angle),
            self.cfg.num_steps,
            self.cfg.sweep,
            &mut self.direction,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ping::sim::Simulator;
    use crate::ping::Decoder;

    /// The session and a simulated device, wired back to back in simulated time.
    struct Bench {
        session: Session,
        sim: Simulator,
        decoder: Decoder,
        now: Instant,
        sent: Vec<Message>,
        echoes: Vec<Echo>,
        diagnostics: u32,
    }

    impl Bench {
        fn new(kind: DeviceKind, cfg: Config) -> Bench {
            let now = Instant::now();
            let mut session = Session::new(cfg, now);
            session.connected(now);
            Bench {
                session,
                sim: Simulator::new(kind, Dialect::Current, now),
                decoder: Decoder::default(),
                now,
                sent: Vec::new(),
                echoes: Vec::new(),
                diagnostics: 0,
            }
        }

        /// Runs for `span` in steps of at most 5 ms, as the node's loop would.
        fn run(&mut self, span: Duration) {
            let end = self.now + span;
            while self.now < end {
                if self.session.handle_timeout(self.now) {
                    self.diagnostics += 1;
                }
                while let Some(action) = self.session.poll_action() {
                    match action {
                        Action::Send(frame) => {
                            let mut d = Decoder::default();
                            d.extend(&frame);
                            if let Some(f) = d.next_frame() {
                                if let Ok(m) = Message::decode(f.id, &f.payload) {
                                    self.sent.push(m);
                                }
                            }
                            self.sim.receive(&frame, self.now);
                        }
                        Action::Break => self.sim.break_signal(),
                    }
                }
                while let Some(bytes) = self.sim.poll_transmit(self.now) {
                    self.decoder.extend(&bytes);
                }
                while let Some(frame) = self.decoder.next_frame() {
                    if let Some(echo) = self.session.handle_frame(&frame, self.now) {
                        self.echoes.push(echo);
                    }
                }
                let next = [
                    self.session.poll_timeout(),
                    self.sim.poll_timeout().unwrap_or(end),
                ]
                .into_iter()
                .min()
                .unwrap_or(end);
                self.now = next.clamp(
                    self.now + Duration::from_micros(100),
                    self.now + Duration::from_millis(5),
                );
            }
        }

        fn sent(&self, pred: impl Fn(&Message) -> bool) -> usize {
            self.sent.iter().filter(|m| pred(m)).count()
        }
    }

    fn udp() -> Config {
        Config::new("udp:127.0.0.1:9090".parse().unwrap())
    }

    #[test]
    fn a_ping1d_is_identified_configured_and_its_settings_confirmed() {
        let mut cfg = udp();
        cfg.mode_auto = false; // range and gain are set too
        let mut b = Bench::new(DeviceKind::Ping1d, cfg);
        b.run(Duration::from_secs(3));
        let d = b.session.device();
        assert_eq!(d.kind, Some(DeviceKind::Ping1d));
        assert_eq!(d.firmware, "3.3.1");
        assert_eq!((d.confirmed, d.refused), (5, 0), "{d:?}");
        assert_eq!(b.sent(|m| matches!(m, Message::ContinuousStart(_))), 1);
        assert!(b.diagnostics >= 2, "diagnostics are due every second");
        assert!(
            d.processor_temperature.is_some() && d.voltage.is_some(),
            "health asked"
        );
    }

    #[test]
    fn a_reconfigured_ping1d_gets_only_what_changed_and_a_refusal_is_reported() {
        let mut cfg = udp();
        cfg.mode_auto = false;
        let mut b = Bench::new(DeviceKind::Ping1d, cfg.clone());
        b.run(Duration::from_secs(1));
        assert!(b.session.settled());
        let sets_before = b.sent.len();
        cfg.range = 20.0;
        b.session.reconfigure(cfg.clone(), b.now);
        assert!(!b.session.settled());
        b.run(Duration::from_millis(500));
        let new: Vec<&Message> = b.sent[sets_before..]
            .iter()
            .filter(|m| !matches!(m, Message::GeneralRequest(_)))
            .collect();
        assert_eq!(
            new,
            [&Message::SetRange(m::SetRange {
                scan_start: 0,
                scan_length: 20_000
            })],
            "only the range is sent again"
        );
        assert!(b.session.settled() && b.session.take_refused().is_empty());
        cfg.range = 0.5; // a Ping1D scans 1 m and more
        b.session.reconfigure(cfg, b.now);
        b.run(Duration::from_millis(500));
        assert!(b.session.settled());
        assert_eq!(b.session.take_refused(), [m::SetRange::ID]);
        assert!(b.session.take_refused().is_empty(), "taken once");
    }

    #[test]
    fn a_change_puts_back_what_the_device_refuses_and_keeps_the_rest() {
        let mut cfg = udp();
        cfg.mode_auto = false; // the range is the node's to set
        let mut b = Bench::new(DeviceKind::Ping1d, cfg);
        b.run(Duration::from_secs(1));
        let watched = b.session.watch_config();
        let before = b.session.config().clone();
        let mut tried = before.clone();
        tried.range = 0.5; // refused: a Ping1D scans 1 m and more
        tried.ping_interval = 50;
        assert!(b.session.begin_change(tried.clone(), b.now));
        assert_eq!(**watched.borrow(), tried, "in force at once");
        assert!(
            !b.session.begin_change(before.clone(), b.now),
            "one at a time"
        );
        assert_eq!(b.session.poll_change(b.now), None, "not answered yet");
        assert!(b.session.poll_timeout() <= b.now + CHANGE_TIMEOUT);
        b.run(Duration::from_millis(500));
        let applied = b.session.poll_change(b.now).expect("settled");
        assert_eq!((applied.range, applied.ping_interval), (before.range, 50));
        assert_eq!(b.session.config(), &applied);
        assert_eq!(**watched.borrow(), applied);
        assert_eq!(b.session.poll_change(b.now), None, "answered once");
    }

    #[test]
    fn a_change_the_device_never_answers_ends_at_its_deadline_as_tried() {
        let mut session = Session::new(udp(), Instant::now());
        let t0 = Instant::now();
        let mut tried = session.config().clone();
        tried.gain = 3;
        assert!(session.begin_change(tried.clone(), t0));
        // Unconfigured: nothing is pending, so the change settles at once.
        assert_eq!(session.poll_change(t0), Some(tried.clone()));
        session.connected(t0);
        assert!(session.begin_change(udp(), t0));
        assert_eq!(session.poll_change(t0 + CHANGE_TIMEOUT), Some(udp()));
    }

    #[test]
    fn an_unidentified_device_is_asked_again_every_300_ms() {
        let mut session = Session::new(udp(), Instant::now());
        let t0 = Instant::now();
        session.connected(t0);
        let mut asked = 0;
        let mut now = t0;
        while now < t0 + Duration::from_millis(1000) {
            session.handle_timeout(now);
            while let Some(a) = session.poll_action() {
                asked += usize::from(a != Action::Break);
            }
            now = session.poll_timeout().max(now + Duration::from_millis(1));
        }
        // Three requests per round, rounds at 0, 300, 600 and 900 ms.
        assert_eq!(asked, 12);
        assert_eq!(session.device().kind, None);
    }

    #[test]
    fn a_setting_without_ack_is_read_back_and_a_silent_one_refused() {
        let t0 = Instant::now();
        let mut session = Session::new(udp(), t0);
        session.connected(t0);
        let info = Message::DeviceInformation(m::DeviceInformation {
            device_type: 1,
            firmware_version_major: 3,
            firmware_version_minor: 29,
            ..Default::default()
        });
        let frame = |msg: &Message| {
            let mut d = Decoder::default();
            d.extend(&msg.to_frame());
            d.next_frame().unwrap()
        };
        session.handle_frame(&frame(&info), t0);
        session.handle_timeout(t0);
        while session.poll_action().is_some() {}
        // No ACKs: after the deadline each setting is read back.
        let t1 = t0 + SET_TIMEOUT;
        session.handle_timeout(t1);
        let mut read_backs = Vec::new();
        while let Some(Action::Send(f)) = session.poll_action() {
            let mut d = Decoder::default();
            d.extend(&f);
            if let Ok(Message::GeneralRequest(r)) = d
                .next_frame()
                .map(|f| Message::decode(f.id, &f.payload))
                .unwrap()
            {
                read_backs.push(r.requested_id);
            }
        }
        assert_eq!(
            read_backs,
            [m::SpeedOfSound::ID, m::ModeAuto::ID, m::PingInterval::ID]
        );
        // One reads back as sent, one otherwise, one never answers.
        session.handle_frame(
            &frame(
                &m::SpeedOfSound {
                    speed_of_sound: 1_500_000,
                }
                .into(),
            ),
            t1,
        );
        session.handle_frame(&frame(&m::ModeAuto { mode_auto: 0 }.into()), t1);
        session.handle_timeout(t1 + SET_TIMEOUT);
        let d = session.device();
        assert_eq!((d.confirmed, d.refused), (1, 2));
    }

    #[test]
    fn a_stalled_ping1d_stream_is_polled() {
        let t0 = Instant::now();
        let mut cfg = udp();
        cfg.ping_interval = 100;
        let mut session = Session::new(cfg, t0);
        session.connected(t0);
        let mut d = Decoder::default();
        d.extend(
            &Message::DeviceInformation(m::DeviceInformation {
                device_type: 1,
                ..Default::default()
            })
            .to_frame(),
        );
        session.handle_frame(&d.next_frame().unwrap(), t0);
        let mut polls = Vec::new();
        let mut now = t0;
        while now < t0 + Duration::from_secs(2) {
            session.handle_timeout(now);
            while let Some(Action::Send(f)) = session.poll_action() {
                let mut d = Decoder::default();
                d.extend(&f);
                let f = d.next_frame().unwrap();
                if matches!(Message::decode(f.id, &f.payload), Ok(Message::GeneralRequest(r)) if r.requested_id == m::Profile::ID)
                {
                    polls.push(now - t0);
                }
            }
            now = session.poll_timeout().max(now + Duration::from_millis(1));
        }
        // Silent for 3 intervals + 200 ms (500 ms), then one poll per interval.
        assert!(polls.len() >= 10, "{polls:?}");
        assert!(polls[0] >= Duration::from_millis(500), "{polls:?}");
        assert!(
            polls
                .windows(2)
                .all(|w| w[1] - w[0] >= Duration::from_millis(100)),
            "{polls:?}"
        );
    }

    #[test]
    fn a_ping360_with_auto_transmit_firmware_sweeps_by_itself() {
        let mut b = Bench::new(DeviceKind::Ping360, udp());
        b.run(Duration::from_secs(2));
        assert_eq!(b.sent(|m| matches!(m, Message::AutoTransmit(_))), 1);
        assert_eq!(b.sent(|m| matches!(m, Message::Transducer(_))), 0);
        assert!(b.echoes.len() > 20, "{} echoes", b.echoes.len());
    }

    #[test]
    fn a_ping360_on_a_slow_serial_link_is_stepped_one_transmit_per_echo() {
        let cfg = Config::new("serial:/dev/ttyUSB0:115200".parse().unwrap());
        let mut b = Bench::new(DeviceKind::Ping360, cfg);
        b.run(Duration::from_secs(2));
        let transmits = b.sent(|m| matches!(m, Message::Transducer(_)));
        assert_eq!(b.sent(|m| matches!(m, Message::AutoTransmit(_))), 0);
        assert!(transmits > 10, "{transmits} transmits");
        assert!(
            transmits <= b.echoes.len() + 1,
            "one transmit in flight at a time"
        );
        let angles: Vec<u16> = b.echoes.iter().map(|e| e.angle).collect();
        assert!(
            angles.windows(2).all(|w| w[1] == (w[0] + 1) % 400),
            "{angles:?}"
        );
    }
}
