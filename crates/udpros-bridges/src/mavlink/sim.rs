//! A simulated autopilot on a UDP socket: answers PING and TIMESYNC (v2, or v1 like
//! ArduPilot and older PX4), sends HEARTBEAT and SYSTEM_TIME at 1 Hz and ATTITUDE stamped
//! on its boot clock (50 Hz by default), on a clock with a
//! known offset and drift from this host's CLOCK_MONOTONIC, behind seeded per-direction
//! delay, jitter and loss; its clock can step or restart (a reboot) on command. Timing runs
//! on plain threads and delay lines, so a delay is what was configured, to tens of µs.

use super::clock::monotonic_ns;
use super::messages::{crc_extra, frame, parse_datagram, Incoming, Outgoing, StreamParser};
use super::protocol::{Ids, Ping, Timesync};
use super::signing::{unix_us, Signer, SigningConfig, Verifier, VerifyStats};
use crate::sim::DelayLine;
use crate::sim::{FaultModel, Faults};
use mavlink::MavlinkVersion;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the simulated autopilot answers TIMESYNC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimesyncResponder {
    /// Replies addressed to the requester (PX4 since late 2025).
    V2,
    /// Replies with target 0/0 (ArduPilot, older PX4).
    V1,
    /// No answer.
    Silent,
}

/// How the simulated autopilot behaves.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Its system and component.
    pub ids: Ids,
    /// Its clock minus CLOCK_MONOTONIC at start (ns); `None`: a boot clock starting at 0.
    pub clock_offset_ns: Option<i64>,
    /// Its clock's rate error (parts per million).
    pub drift_ppm: f64,
    /// Requests until the autopilot stamps them.
    pub up: Faults,
    /// Replies from the stamp to the requester.
    pub down: Faults,
    /// The random seed of its faults.
    pub seed: u64,
    /// How it answers TIMESYNC (which firmware it plays).
    pub timesync: TimesyncResponder,
    /// Whether it answers PING.
    pub answer_ping: bool,
    /// Send MAVLink 1 frames (which cannot carry TIMESYNC's target fields).
    pub mavlink1: bool,
    /// MAVLink 2 signing, as an autopilot with `MAV_SIGN_*` set: it signs what it sends
    /// and checks what it hears.
    pub signing: Option<SigningConfig>,
    /// ATTITUDE messages a second (0: none), each sampled on a whole millisecond of its
    /// clock, so that its `time_boot_ms` is exact, and sent through the downlink's faults.
    pub attitude_hz: f64,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            ids: Ids::AUTOPILOT,
            clock_offset_ns: None,
            drift_ppm: 0.0,
            up: Faults::NONE,
            down: Faults::NONE,
            seed: 1,
            timesync: TimesyncResponder::V2,
            answer_ping: true,
            mavlink1: false,
            signing: None,
            attitude_hz: 50.0,
        }
    }
}

/// The simulated clock: monotonic + offset + drift since the start.
#[derive(Debug, Clone, Copy)]
struct SimClock {
    start: i64,
    offset: i64,
    drift_ppm: f64,
}

impl SimClock {
    fn at(&self, local_ns: i64) -> i64 {
        let drift = (local_ns - self.start) as f64 * self.drift_ppm * 1e-6;
        local_ns + self.offset + drift as i64
    }

    /// The CLOCK_MONOTONIC instant at which this clock reads `remote_ns` (the inverse of
    /// [`at`](Self::at), to the nanosecond's rounding).
    fn local_at(&self, remote_ns: i64) -> i64 {
        let rate = 1.0 + self.drift_ppm * 1e-6;
        self.start + ((remote_ns - self.offset - self.start) as f64 / rate) as i64
    }
}

/// What the simulated autopilot did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Messages received.
    pub received: u64,
    /// TIMESYNC requests answered.
    pub timesync_answered: u64,
    /// PING requests answered.
    pub ping_answered: u64,
    /// SYSTEM_TIME messages received (a companion telling its wall clock).
    pub system_time_received: u64,
    /// The last SYSTEM_TIME received: its sender, time_unix_usec and time_boot_ms.
    pub last_system_time: Option<(Ids, u64, u32)>,
    /// What its signature checks took and refused (signing on).
    pub signatures: VerifyStats,
}

struct Shared {
    config: SimConfig,
    clock: Mutex<SimClock>,
    stats: Mutex<SimStats>,
    requester: Mutex<Option<SocketAddr>>,
    sequence: AtomicU8,
    stop: AtomicBool,
    /// Signing on: what signs its frames and checks the bridge's.
    signing: Option<Mutex<(Signer, Verifier)>>,
}

impl Shared {
    fn next_frame(&self, out: &Outgoing) -> Vec<u8> {
        let version = if self.config.mavlink1 {
            MavlinkVersion::V1
        } else {
            MavlinkVersion::V2
        };
        let seq = self.sequence.fetch_add(1, Ordering::Relaxed);
        let mut bytes = frame(self.config.ids, seq, version, out);
        if let Some(signing) = &self.signing {
            lock(signing).0.sign(&mut bytes, unix_us(), crc_extra(out));
        }
        bytes
    }

    /// The frames of a datagram its signature checks let in (all, with signing off).
    fn admitted(&self, bytes: &[u8]) -> Vec<(Ids, Incoming)> {
        let Some(signing) = &self.signing else {
            return parse_datagram(bytes);
        };
        let mut signing = lock(signing);
        let mut frames = Vec::new();
        StreamParser::default().push(bytes, |raw, from, msg| {
            if signing.1.check(raw, unix_us()).is_ok() {
                frames.push((from, msg));
            }
        });
        lock(&self.stats).signatures = signing.1.stats();
        frames
    }

    fn now_remote(&self) -> i64 {
        lock(&self.clock).at(monotonic_ns())
    }

    /// The answers to one datagram, stamped now (when the request "arrives" at the autopilot).
    fn answers(&self, bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for (from, msg) in self.admitted(bytes) {
            match msg {
                Incoming::Timesync(t) if t.tc1 == 0 => {
                    let target = match self.config.timesync {
                        TimesyncResponder::V2 => from,
                        TimesyncResponder::V1 => Ids::BROADCAST,
                        TimesyncResponder::Silent => continue,
                    };
                    let reply = Outgoing::Timesync(Timesync {
                        tc1: self.now_remote(),
                        ts1: t.ts1,
                        target,
                    });
                    lock(&self.stats).timesync_answered += 1;
                    out.push(self.next_frame(&reply));
                }
                Incoming::SystemTime { unix_usec, boot_ms } => {
                    let mut stats = lock(&self.stats);
                    stats.system_time_received += 1;
                    stats.last_system_time = Some((from, unix_usec, boot_ms));
                }
                Incoming::Ping(p) if p.target == Ids::BROADCAST && self.config.answer_ping => {
                    lock(&self.stats).ping_answered += 1;
                    out.push(self.next_frame(&Outgoing::Ping(Ping { target: from, ..p })));
                }
                _ => {}
            }
        }
        out
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running simulated autopilot; dropping it stops it.
pub struct SimAutopilot {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Drop for SimAutopilot {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

/// Replies waiting in the down delay line at most.
const IN_FLIGHT: usize = 4096;

impl SimAutopilot {
    /// Binds `bind` (port 0 picks one) and answers whoever sends to it.
    pub fn start(bind: SocketAddr, config: SimConfig) -> std::io::Result<SimAutopilot> {
        let socket = UdpSocket::bind(bind)?;
        socket.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = socket.local_addr()?;
        let now = monotonic_ns();
        let clock = SimClock {
            start: now,
            offset: config.clock_offset_ns.unwrap_or(-now),
            drift_ppm: config.drift_ppm,
        };
        let signing = config
            .signing
            .as_ref()
            .and_then(SigningConfig::start)
            .map(Mutex::new);
        let shared = Arc::new(Shared {
            config,
            signing,
            clock: Mutex::new(clock),
            stats: Mutex::default(),
            requester: Mutex::new(None),
            sequence: AtomicU8::new(0),
            stop: AtomicBool::new(false),
        });
        let sender = socket.try_clone()?;
        let down = DelayLine::spawn("sim-fcu-down", IN_FLIGHT, move |(d, to): (Vec<u8>, _)| {
            let _ = sender.send_to(&d, to);
        })?;
        let replies = Replies {
            shared: shared.clone(),
            socket: socket.try_clone()?,
            down,
            model: FaultModel::new(shared.config.seed ^ 0xd0_d0),
        };
        let up_shared = shared.clone();
        let up_replies = Arc::new(Mutex::new(replies));
        if shared.config.attitude_hz > 0.0 {
            let (shared, replies) = (shared.clone(), up_replies.clone());
            std::thread::Builder::new()
                .name("sim-fcu-attitude".into())
                .spawn(move || attitude(shared, replies))?;
        }
        let up = {
            let replies = up_replies.clone();
            DelayLine::spawn("sim-fcu-up", IN_FLIGHT, move |(d, from): (Vec<u8>, _)| {
                lock(&replies).answer(&d, from);
            })?
        };
        std::thread::Builder::new()
            .name("sim-fcu".into())
            .spawn(move || receive(socket, up_shared, up, up_replies))?;
        Ok(SimAutopilot { addr, shared })
    }

    /// The UDP address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The autopilot clock at a CLOCK_MONOTONIC instant: the truth an estimate is scored on.
    pub fn remote_at(&self, local_ns: i64) -> i64 {
        lock(&self.shared.clock).at(local_ns)
    }

    /// Steps its clock by `delta_ns`.
    pub fn step_clock(&self, delta_ns: i64) {
        lock(&self.shared.clock).offset += delta_ns;
    }

    /// A reboot: its boot clock starts again from zero.
    pub fn reboot(&self) {
        let now = monotonic_ns();
        let mut clock = lock(&self.shared.clock);
        *clock = SimClock {
            start: now,
            offset: -now,
            drift_ppm: clock.drift_ppm,
        };
    }

    /// Sends its HEARTBEAT and SYSTEM_TIME to `to` until someone else speaks to it: an
    /// autopilot that speaks first, for a link that learns its peer from the first datagram.
    pub fn introduce(&self, to: SocketAddr) {
        *lock(&self.shared.requester) = Some(to);
    }

    /// Its counts so far.
    pub fn stats(&self) -> SimStats {
        *lock(&self.shared.stats)
    }
}

/// Sends answers through the downlink's faults.
struct Replies {
    shared: Arc<Shared>,
    socket: UdpSocket,
    down: DelayLine<(Vec<u8>, SocketAddr)>,
    model: FaultModel,
}

impl Replies {
    fn answer(&mut self, bytes: &[u8], to: SocketAddr) {
        for reply in self.shared.answers(bytes) {
            self.send_down(reply, to);
        }
    }

    /// Sends `frame` through the downlink's delay, jitter, loss and duplication.
    fn send_down(&mut self, frame: Vec<u8>, to: SocketAddr) {
        for delay in self.model.fate(&self.shared.config.down) {
            if delay.is_zero() {
                let _ = self.socket.send_to(&frame, to);
            } else {
                self.down.push(delay, (frame.clone(), to));
            }
        }
    }
}

/// Sends ATTITUDE to whoever spoke last, each sampled on a whole millisecond of the
/// autopilot's clock (read afresh each time, so a step or a reboot carries through): a
/// gentle roll, pitch and turn that are functions of that clock alone.
fn attitude(shared: Arc<Shared>, replies: Arc<Mutex<Replies>>) {
    let period_ms = (1000.0 / shared.config.attitude_hz).round().max(1.0) as i64;
    let period_ns = period_ms * 1_000_000;
    while !shared.stop.load(Ordering::Relaxed) {
        let clock = *lock(&shared.clock);
        let now = monotonic_ns();
        let sample = (clock.at(now).div_euclid(period_ns) + 1) * period_ns;
        let wait = clock.local_at(sample) - now;
        std::thread::sleep(Duration::from_nanos(wait.clamp(0, 1_000_000_000) as u64));
        let Some(to) = *lock(&shared.requester) else {
            continue;
        };
        let t = sample as f64 * 1e-9;
        let tau = std::f64::consts::TAU;
        let out = Outgoing::Attitude {
            boot_ms: (sample / 1_000_000).max(0) as u32,
            roll: (0.1 * (tau * t / 8.0).sin()) as f32,
            pitch: (0.05 * (tau * t / 11.0).sin()) as f32,
            yaw: ((0.2 * t + std::f64::consts::PI).rem_euclid(tau) - std::f64::consts::PI) as f32,
        };
        let frame = shared.next_frame(&out);
        lock(&replies).send_down(frame, to);
    }
}

fn receive(
    socket: UdpSocket,
    shared: Arc<Shared>,
    up: DelayLine<(Vec<u8>, SocketAddr)>,
    replies: Arc<Mutex<Replies>>,
) {
    let mut model = FaultModel::new(shared.config.seed);
    let mut buf = vec![0u8; 2048];
    let mut next_heartbeat = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            *lock(&shared.requester) = Some(from);
            lock(&shared.stats).received += 1;
            for delay in model.fate(&shared.config.up) {
                if delay.is_zero() {
                    lock(&replies).answer(&buf[..n], from);
                } else {
                    up.push(delay, (buf[..n].to_vec(), from));
                }
            }
        }
        if Instant::now() >= next_heartbeat {
            next_heartbeat += Duration::from_secs(1);
            let Some(to) = *lock(&shared.requester) else {
                continue;
            };
            let unix_usec = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64);
            let boot_ms = (shared.now_remote() / 1_000_000).max(0) as u32;
            for out in [
                Outgoing::AutopilotHeartbeat,
                Outgoing::SystemTime { unix_usec, boot_ms },
            ] {
                let _ = socket.send_to(&shared.next_frame(&out), to);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(ts1: i64) -> Vec<u8> {
        frame(
            Ids::ONBOARD_COMPUTER,
            0,
            MavlinkVersion::V2,
            &Outgoing::Timesync(Timesync {
                tc1: 0,
                ts1,
                target: Ids::BROADCAST,
            }),
        )
    }

    /// A simulated autopilot on loopback, and a socket to talk to it that waits 5 s at most.
    fn started(config: SimConfig) -> (SimAutopilot, UdpSocket) {
        let sim = SimAutopilot::start("127.0.0.1:0".parse().unwrap(), config).unwrap();
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        (sim, socket)
    }

    fn exchange(sim: &SimAutopilot, socket: &UdpSocket, ts1: i64) -> (Timesync, i64) {
        socket.send_to(&request(ts1), sim.local_addr()).unwrap();
        let mut buf = [0u8; 512];
        loop {
            let n = socket.recv(&mut buf).unwrap();
            let t3 = monotonic_ns();
            for (_, msg) in parse_datagram(&buf[..n]) {
                if let Incoming::Timesync(t) = msg {
                    if t.ts1 == ts1 {
                        return (t, t3);
                    }
                }
            }
        }
    }

    #[test]
    fn answers_timesync_on_its_own_clock_after_the_configured_delays() {
        let config = SimConfig {
            clock_offset_ns: Some(5_000_000_000),
            up: Faults {
                delay: Duration::from_millis(3),
                ..Faults::NONE
            },
            down: Faults {
                delay: Duration::from_millis(1),
                ..Faults::NONE
            },
            ..SimConfig::default()
        };
        let (sim, socket) = started(config);
        let t1 = monotonic_ns();
        let (reply, t3) = exchange(&sim, &socket, t1);
        assert_eq!(reply.target, Ids::ONBOARD_COMPUTER);
        let rtt = t3 - t1;
        assert!(rtt >= 4_000_000, "rtt {rtt}");
        // The stamp lies 3 ms after the request left, in a clock 5 s ahead.
        let stamped_local = reply.tc1 - 5_000_000_000;
        assert!(
            stamped_local - t1 >= 3_000_000 && t3 - stamped_local >= 1_000_000,
            "{} / {}",
            stamped_local - t1,
            t3 - stamped_local
        );
        sim.step_clock(1_000_000_000);
        let (after, _) = exchange(&sim, &socket, t1 + 1);
        assert!(after.tc1 - reply.tc1 > 1_000_000_000);
        sim.reboot();
        let (rebooted, _) = exchange(&sim, &socket, t1 + 2);
        assert!(rebooted.tc1 < 1_000_000_000, "boot clock {}", rebooted.tc1);
        assert_eq!(sim.stats().timesync_answered, 3);
    }

    #[test]
    fn attitude_is_sampled_on_whole_milliseconds_of_its_clock() {
        let config = SimConfig {
            clock_offset_ns: Some(-1_000_000_000),
            drift_ppm: 25.0,
            attitude_hz: 100.0,
            ..SimConfig::default()
        };
        let (sim, socket) = started(config);
        socket.send_to(&request(1), sim.local_addr()).unwrap();
        let mut buf = [0u8; 512];
        let mut seen = 0;
        while seen < 20 {
            let n = socket.recv(&mut buf).unwrap();
            let arrived = monotonic_ns();
            let decoded = crate::mavlink::messages::decode(&buf[..n]);
            let Some(mavlink::dialects::common::MavMessage::ATTITUDE(a)) = decoded else {
                continue;
            };
            assert_eq!(a.time_boot_ms % 10, 0, "on the 100 Hz grid");
            // Sampled before it arrived, and not long before.
            let age = sim.remote_at(arrived) - i64::from(a.time_boot_ms) * 1_000_000;
            assert!((0..1_000_000_000).contains(&age), "age {age} ns");
            seen += 1;
        }
    }

    #[test]
    fn a_v1_responder_answers_to_everybody() {
        let config = SimConfig {
            timesync: TimesyncResponder::V1,
            ..SimConfig::default()
        };
        let (sim, socket) = started(config);
        let (reply, _) = exchange(&sim, &socket, 42);
        assert_eq!(reply.target, Ids::BROADCAST);
    }
}
