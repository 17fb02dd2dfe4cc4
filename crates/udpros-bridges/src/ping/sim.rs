//! Simulated Ping1D and Ping360 devices, as pure state machines (bytes and `now` in, bytes
//! out), behaving like the firmware the reference describes: set commands answered with
//! ACK (or NACK with a reason), unknown ids with silence, measurements answered after the
//! ping, continuous profile streaming, Ping360 `transducer` replies and `auto_transmit`
//! sweeps, `motor_off`, and the 2017 draft dialect for old Ping1D firmware.
//!
//! One file past 500 lines, on purpose: one device model (Ping1D and Ping360, both
//! dialects) whose replies share its state; `serve_udp` and `serve_stream` at the end are
//! its only I/O.

use super::draft2017::{self as draft, DraftMessage};
use super::frame::{encode_frame, Decoder, Frame};
use super::messages::{self as m, Message};
use super::{DeviceKind, Dialect};
use bytes::Bytes;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long a simulated Ping1D takes to ping (the reply to a measurement comes after it).
const PING1D_PING: Duration = Duration::from_millis(15);
/// How long a simulated Ping360 takes per angle at the least (moving the head, sending
/// the data): a short range is not faster than this.
const PING360_STEP: Duration = Duration::from_millis(8);

/// How long a Ping360 takes for one angle: it cannot beat sound. It transmits, listens
/// for `number_of_samples` samples of `sample_period` ticks of 25 ns (at 30 m that is the
/// 40 ms a round trip takes in water), and steps its head.
fn ping360_step(sample_period: u16, number_of_samples: u16, transmit_duration_us: u16) -> Duration {
    let listening_ns = u64::from(sample_period) * u64::from(number_of_samples) * 25;
    PING360_STEP
        + Duration::from_nanos(listening_ns)
        + Duration::from_micros(transmit_duration_us.into())
}
/// The device's own id, written as the source of its frames (a real Ping360 sends 2).
const DEVICE_ID: u8 = 2;

/// A simulated Ping1D or Ping360: bytes and `now` in, bytes out.
#[derive(Debug)]
pub struct Simulator {
    kind: DeviceKind,
    dialect: Dialect,
    decoder: Decoder,
    started: Instant,
    out: VecDeque<(Instant, Vec<u8>)>,
    // Ping1D
    speed_of_sound: u32,
    mode_auto: u8,
    scan_start: u32,
    scan_length: u32,
    gain_setting: u32,
    ping_interval: u16,
    ping_enabled: u8,
    continuous: bool,
    next_ping: Option<Instant>,
    ping_number: u32,
    // Ping360
    auto: Option<m::AutoTransmit>,
    auto_angle: u16,
    auto_direction: i32,
    next_auto: Option<Instant>,
    /// Pings so far (each has its own speckle).
    pings: u64,
}

impl Simulator {
    /// A `kind` device speaking `dialect`, switched on at `now`.
    pub fn new(kind: DeviceKind, dialect: Dialect, now: Instant) -> Simulator {
        Simulator {
            kind,
            dialect: if kind == DeviceKind::Ping360 {
                Dialect::Current
            } else {
                dialect
            },
            decoder: Decoder::default(),
            started: now,
            out: VecDeque::new(),
            speed_of_sound: 1_500_000,
            mode_auto: 1,
            scan_start: 0,
            scan_length: 10_000,
            gain_setting: 1,
            ping_interval: 100,
            ping_enabled: 1,
            continuous: false,
            next_ping: None,
            ping_number: 0,
            auto: None,
            auto_angle: 0,
            auto_direction: 1,
            next_auto: None,
            pings: 0,
        }
    }

    /// Bytes from the host.
    pub fn receive(&mut self, bytes: &[u8], now: Instant) {
        self.decoder.extend(bytes);
        while let Some(frame) = self.decoder.next_frame() {
            match self.dialect {
                Dialect::Current => self.handle(frame, now),
                Dialect::Draft2017 => self.handle_draft(frame, now),
            }
        }
    }

    /// A serial break (or BlueOS's empty datagram): stops auto-transmit.
    pub fn break_signal(&mut self) {
        self.auto = None;
        self.next_auto = None;
    }

    /// The next bytes due by `now`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.generate(now);
        match self.out.front() {
            Some((due, _)) if *due <= now => self.out.pop_front().map(|(_, bytes)| bytes),
            _ => None,
        }
    }

    /// When something is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let queued = self.out.front().map(|(due, _)| *due);
        [queued, self.next_ping, self.next_auto]
            .into_iter()
            .flatten()
            .min()
    }

    fn send(&mut self, at: Instant, message: impl Into<Message>) {
        let message = message.into();
        self.out.push_back((
            at,
            encode_frame(message.id(), DEVICE_ID, 0, &message.encode()),
        ));
    }

    fn send_draft(&mut self, at: Instant, message: impl Into<DraftMessage>) {
        let message = message.into();
        self.out.push_back((
            at,
            encode_frame(message.id(), DEVICE_ID, 0, &message.encode()),
        ));
    }

    fn ack(&mut self, now: Instant, id: u16) {
        self.send(now, m::Ack { acked_id: id });
    }

    fn nack(&mut self, now: Instant, id: u16, why: &str) {
        self.send(
            now,
            m::Nack {
                nacked_id: id,
                nack_message: why.to_string(),
            },
        );
    }

    fn seconds(&self, now: Instant) -> f64 {
        now.saturating_duration_since(self.started).as_secs_f64()
    }

    fn handle(&mut self, frame: Frame, now: Instant) {
        // general_request(X) is executed as X itself, as the firmware does.
        let (id, payload) = match Message::decode(frame.id, &frame.payload) {
            Ok(Message::GeneralRequest(r)) => (r.requested_id, Bytes::new()),
            _ => (frame.id, frame.payload),
        };
        let request = payload.is_empty();
        match (self.kind, Message::decode(id, &payload)) {
            (_, _) if id == m::ProtocolVersion::ID => self.send(
                now,
                m::ProtocolVersion {
                    version_major: 1,
                    version_minor: 1,
                    version_patch: 0,
                    reserved: 0,
                },
            ),
            (kind, _) if id == m::DeviceInformation::ID => {
                let device_type = if kind == DeviceKind::Ping1d { 1 } else { 2 };
                let info = m::DeviceInformation {
                    device_type,
                    device_revision: 1,
                    firmware_version_major: 3,
                    firmware_version_minor: 3,
                    firmware_version_patch: 1,
                    reserved: 0,
                };
                self.send(now, info)
            }
            (DeviceKind::Ping1d, _) => self.handle_ping1d(id, &payload, request, now),
            (DeviceKind::Ping360, _) => self.handle_ping360(id, &payload, now),
        }
    }

    fn handle_ping1d(&mut self, id: u16, payload: &[u8], request: bool, now: Instant) {
        let after_ping = now + PING1D_PING;
        let message = Message::decode(id, payload);
        match message {
            Ok(Message::SetSpeedOfSound(s)) if !request => {
                self.speed_of_sound = s.speed_of_sound;
                self.ack(now, id)
            }
            Ok(Message::SetModeAuto(s)) if !request => {
                self.mode_auto = s.mode_auto;
                self.ack(now, id)
            }
            Ok(Message::SetRange(s)) if !request => {
                if s.scan_length < 1000 {
                    return self.nack(now, id, "Range scan length out of range");
                }
                self.scan_start = s.scan_start;
                self.scan_length = s.scan_length;
                self.ack(now, id)
            }
            Ok(Message::SetGainSetting(s)) if !request => {
                if s.gain_setting > 6 {
                    return self.nack(now, id, "Gain setting out of range");
                }
                self.gain_setting = u32::from(s.gain_setting);
                self.ack(now, id)
            }
            Ok(Message::SetPingInterval(s)) if !request => {
                self.ping_interval = s.ping_interval.max(20);
                self.ack(now, id)
            }
            Ok(Message::SetPingEnable(s)) if !request => {
                self.ping_enabled = s.ping_enabled;
                self.ack(now, id)
            }
            Ok(Message::ContinuousStart(c)) if c.id == m::Profile::ID => {
                self.continuous = true;
                self.next_ping = Some(now + Duration::from_millis(u64::from(self.ping_interval)));
                self.ack(now, id)
            }
            Ok(Message::ContinuousStop(_)) => {
                self.continuous = false;
                self.next_ping = None;
                self.ack(now, id)
            }
            _ if !request => {} // set or control commands the simulator does not model: silence
            _ => match id {
                m::FirmwareVersion::ID => self.send(
                    now,
                    m::FirmwareVersion {
                        device_type: 1,
                        device_model: 1,
                        firmware_version_major: 3,
                        firmware_version_minor: 29,
                    },
                ),
                m::SpeedOfSound::ID => self.send(
                    now,
                    m::SpeedOfSound {
                        speed_of_sound: self.speed_of_sound,
                    },
                ),
                m::Range::ID => self.send(
                    now,
                    m::Range {
                        scan_start: self.scan_start,
                        scan_length: self.scan_length,
                    },
                ),
                m::ModeAuto::ID => self.send(
                    now,
                    m::ModeAuto {
                        mode_auto: self.mode_auto,
                    },
                ),
                m::PingInterval::ID => self.send(
                    now,
                    m::PingInterval {
                        ping_interval: self.ping_interval,
                    },
                ),
                m::GainSetting::ID => self.send(
                    now,
                    m::GainSetting {
                        gain_setting: self.gain_setting,
                    },
                ),
                m::PingEnable::ID => self.send(
                    now,
                    m::PingEnable {
                        ping_enabled: self.ping_enabled,
                    },
                ),
                m::ProcessorTemperature::ID => self.send(
                    now,
                    m::ProcessorTemperature {
                        processor_temperature: 4150,
                    },
                ),
                m::PcbTemperature::ID => self.send(
                    now,
                    m::PcbTemperature {
                        pcb_temperature: 3575,
                    },
                ),
                m::Voltage5::ID => self.send(now, m::Voltage5 { voltage_5: 5010 }),
                m::GeneralInfo::ID => {
                    let info = m::GeneralInfo {
                        firmware_version_major: 3,
                        firmware_version_minor: 29,
                        voltage_5: 5010,
                        ping_interval: self.ping_interval,
                        gain_setting: self.gain_setting as u8,
                        mode_auto: self.mode_auto,
                    };
                    self.send(now, info)
                }
                m::DistanceSimple::ID => {
                    let p = self.measure(after_ping);
                    self.send(
                        after_ping,
                        m::DistanceSimple {
                            distance: p.distance,
                            confidence: p.confidence as u8,
                        },
                    )
                }
                m::Distance::ID => {
                    let p = self.measure(after_ping);
                    let d = m::Distance {
                        distance: p.distance,
                        confidence: p.confidence,
                        transmit_duration: p.transmit_duration,
                        ping_number: p.ping_number,
                        scan_start: p.scan_start,
                        scan_length: p.scan_length,
                        gain_setting: p.gain_setting,
                    };
                    self.send(after_ping, d)
                }
                m::Profile::ID => {
                    let p = self.measure(after_ping);
                    self.send(after_ping, p)
                }
                _ => {} // unknown ids: silence, as the firmware
            },
        }
    }

    /// One simulated ping: a bottom moving slowly through the scan window.
    fn measure(&mut self, at: Instant) -> m::Profile {
        self.ping_number = self.ping_number.wrapping_add(1);
        let t = self.seconds(at);
        let fraction = 0.5 + 0.3 * (t * 0.5).sin();
        let distance = self.scan_start + (f64::from(self.scan_length) * fraction) as u32;
        let data = super::scene::ping1d_profile(
            f64::from(distance) / 1000.0,
            f64::from(self.scan_start) / 1000.0,
            f64::from(self.scan_length) / 1000.0,
            200,
            self.gain_setting,
            u64::from(self.ping_number),
        );
        m::Profile {
            distance,
            confidence: 95,
            transmit_duration: 100,
            ping_number: self.ping_number,
            scan_start: self.scan_start,
            scan_length: self.scan_length,
            gain_setting: self.gain_setting,
            profile_data: Bytes::from(data),
        }
    }

    fn handle_ping360(&mut self, id: u16, payload: &[u8], now: Instant) {
        match Message::decode(id, payload) {
            Ok(Message::Transducer(t)) => {
                self.auto = None;
                self.next_auto = None;
                if t.transmit == 1 {
                    let reply = self.echo(
                        t.mode,
                        t.gain_setting,
                        t.angle,
                        t.transmit_duration,
                        t.sample_period,
                        t.transmit_frequency,
                        t.number_of_samples,
                    );
                    let step =
                        ping360_step(t.sample_period, t.number_of_samples, t.transmit_duration);
                    self.send(now + step, reply);
                } else {
                    let reply = m::DeviceData {
                        angle: t.angle,
                        ..Default::default()
                    };
                    self.send(now + PING360_STEP, reply);
                }
            }
            Ok(Message::AutoTransmit(a)) => {
                self.auto_angle = a.start_angle;
                self.auto_direction = 1;
                self.next_auto = Some(now + PING360_STEP);
                self.auto = Some(a);
            }
            Ok(Message::MotorOff(_)) => {
                self.break_signal();
                self.ack(now, id)
            }
            _ => {} // silence
        }
    }

    /// One ping of the scene (see [`super::scene`]) at the sampling asked for.
    #[allow(clippy::too_many_arguments)]
    fn echo(
        &mut self,
        mode: u8,
        gain: u8,
        angle: u16,
        tx: u16,
        period: u16,
        freq: u16,
        samples: u16,
    ) -> m::DeviceData {
        // A sample period is in 25 ns ticks; sound goes out and back.
        let sample_m = f64::from(period) * 25e-9 * f64::from(self.speed_of_sound) / 1000.0 / 2.0;
        let n = usize::from(samples.min(1200));
        self.pings = self.pings.wrapping_add(1);
        let data = super::scene::ping360_echo(angle, sample_m, n, gain, self.pings);
        m::DeviceData {
            mode,
            gain_setting: gain,
            angle,
            transmit_duration: tx,
            sample_period: period,
            transmit_frequency: freq,
            number_of_samples: n as u16,
            data: Bytes::from(data),
        }
    }

    /// Streams due by `now`: continuous Ping1D profiles, Ping360 auto-transmit sweeps.
    fn generate(&mut self, now: Instant) {
        while let Some(due) = self.next_ping.filter(|due| *due <= now) {
            let profile = self.measure(due);
            match self.dialect {
                Dialect::Current => self.send(due, profile),
                Dialect::Draft2017 => {
                    let p = draft::EsProfile {
                        distance: profile.distance,
                        confidence: profile.confidence as u8,
                        pulse_usec: profile.transmit_duration,
                        ping_number: profile.ping_number,
                        start_mm: profile.scan_start,
                        length_mm: profile.scan_length,
                        gain_index: profile.gain_setting,
                        data: profile.profile_data,
                    };
                    self.send_draft(due, p)
                }
            }
            self.next_ping =
                Some(due + Duration::from_millis(u64::from(self.ping_interval.max(20))));
        }
        while let (Some(due), Some(a)) =
            (self.next_auto.filter(|due| *due <= now), self.auto.clone())
        {
            let e = self.echo(
                a.mode,
                a.gain_setting,
                self.auto_angle,
                a.transmit_duration,
                a.sample_period,
                a.transmit_frequency,
                a.number_of_samples,
            );
            let reply = m::AutoDeviceData {
                mode: e.mode,
                gain_setting: e.gain_setting,
                angle: e.angle,
                transmit_duration: e.transmit_duration,
                sample_period: e.sample_period,
                transmit_frequency: e.transmit_frequency,
                start_angle: a.start_angle,
                stop_angle: a.stop_angle,
                num_steps: a.num_steps,
                delay: a.delay,
                number_of_samples: e.number_of_samples,
                data: e.data,
            };
            self.send(due, reply);
            self.auto_angle = super::sweep_step(
                self.auto_angle,
                a.start_angle,
                a.stop_angle,
                a.num_steps,
                super::SweepPattern::Natural,
                &mut self.auto_direction,
            );
            let step = ping360_step(a.sample_period, a.number_of_samples, a.transmit_duration);
            self.next_auto = Some(due + step + Duration::from_millis(u64::from(a.delay)));
        }
    }

    fn handle_draft(&mut self, frame: Frame, now: Instant) {
        let Ok(message) = DraftMessage::decode(frame.id, &frame.payload) else {
            return;
        };
        let after_ping = now + PING1D_PING;
        match message {
            DraftMessage::SonarSetVelocity(v) => self.speed_of_sound = v.c_water,
            DraftMessage::EsRange(r) if r.length_mm >= 1000 => {
                self.scan_start = r.start_mm;
                self.scan_length = r.length_mm;
            }
            DraftMessage::EsMode(mode) => self.mode_auto = mode.auto_manual,
            DraftMessage::EsRate(r) => {
                self.ping_interval = r.msec_per_ping;
                self.continuous = r.msec_per_ping > 0;
                self.next_ping = self
                    .continuous
                    .then(|| now + Duration::from_millis(u64::from(r.msec_per_ping.max(20))));
            }
            DraftMessage::EsGain(g) => self.gain_setting = g.gain_index,
            DraftMessage::GenCmdRequest(r) => match r.request_id {
                101 => self.send_draft(
                    now,
                    draft::GenGetVersion {
                        device_type: 1,
                        device_model: 1,
                        fw_version_major: 1,
                        fw_version_minor: 7,
                    },
                ),
                1110 => self.send_draft(
                    now,
                    draft::EsRange {
                        start_mm: self.scan_start,
                        length_mm: self.scan_length,
                    },
                ),
                1115 => self.send_draft(now, draft::EsVoltage { voltage: 5010 }),
                1100 => {
                    let p = self.measure(after_ping);
                    self.send_draft(
                        after_ping,
                        draft::EsDistanceSimple {
                            distance: p.distance,
                            confidence: p.confidence as u8,
                        },
                    )
                }
                1102 => {
                    let p = self.measure(after_ping);
                    let e = draft::EsProfile {
                        distance: p.distance,
                        confidence: p.confidence as u8,
                        pulse_usec: p.transmit_duration,
                        ping_number: p.ping_number,
                        start_mm: p.scan_start,
                        length_mm: p.scan_length,
                        gain_index: p.gain_setting,
                        data: p.profile_data,
                    };
                    self.send_draft(after_ping, e)
                }
                _ => {}
            },
            _ => {}
        }
    }
}

/// Serves a simulated device on a UDP socket (as BlueOS's bridges expose a real one),
/// answering whoever sent the last datagram. `seen` records the ids the host sent. Runs
/// until aborted.
pub async fn serve_udp(
    socket: tokio::net::UdpSocket,
    kind: DeviceKind,
    dialect: Dialect,
    seen: Option<std::sync::Arc<std::sync::Mutex<Vec<u16>>>>,
) {
    let mut sim = Simulator::new(kind, dialect, Instant::now());
    let mut ids = Decoder::default();
    let mut peer = None;
    let mut buf = vec![0u8; 65536];
    loop {
        while let Some(bytes) = sim.poll_transmit(Instant::now()) {
            if let Some(p) = peer {
                let _ = socket.send_to(&bytes, p).await;
            }
        }
        let wake = sim
            .poll_timeout()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
        tokio::select! {
            _ = tokio::time::sleep_until(wake.into()) => {}
            received = socket.recv_from(&mut buf) => {
                let Ok((n, from)) = received else { continue };
                peer = Some(from);
                if n == 0 {
                    sim.break_signal();
                    continue;
                }
                if let Some(seen) = &seen {
                    ids.extend(&buf[..n]);
                    while let Some(f) = ids.next_frame() {
                        seen.lock().unwrap_or_else(|e| e.into_inner()).push(f.id);
                    }
                }
                sim.receive(&buf[..n], Instant::now());
            }
        }
    }
}

/// Serves a simulated device on a byte stream (a pseudo-terminal, say).
pub async fn serve_stream<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut stream: S,
    kind: DeviceKind,
    dialect: Dialect,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut sim = Simulator::new(kind, dialect, Instant::now());
    let mut buf = vec![0u8; 4096];
    loop {
        while let Some(bytes) = sim.poll_transmit(Instant::now()) {
            if stream.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let wake = sim
            .poll_timeout()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
        tokio::select! {
            _ = tokio::time::sleep_until(wake.into()) => {}
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => sim.receive(&buf[..n], Instant::now()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(sim: &mut Simulator, now: Instant) -> Vec<Message> {
        let mut out = Vec::new();
        let mut d = Decoder::default();
        while let Some(bytes) = sim.poll_transmit(now) {
            d.extend(&bytes);
        }
        while let Some(f) = d.next_frame() {
            out.push(Message::decode(f.id, &f.payload).expect("simulator frames decode"));
        }
        out
    }

    fn request(id: u16) -> Vec<u8> {
        Message::GeneralRequest(m::GeneralRequest { requested_id: id }).to_frame()
    }

    #[test]
    fn ping1d_acks_sets_nacks_bad_values_and_answers_after_the_ping() {
        let t0 = Instant::now();
        let mut sim = Simulator::new(DeviceKind::Ping1d, Dialect::Current, t0);
        sim.receive(
            &Message::SetSpeedOfSound(m::SetSpeedOfSound {
                speed_of_sound: 1_480_000,
            })
            .to_frame(),
            t0,
        );
        sim.receive(
            &Message::SetGainSetting(m::SetGainSetting { gain_setting: 9 }).to_frame(),
            t0,
        );
        sim.receive(&request(m::Profile::ID), t0);
        sim.receive(&encode_frame(4321, 0, 0, &[]), t0); // unknown: silence
        let now = drain(&mut sim, t0);
        assert!(matches!(now[0], Message::Ack(m::Ack { acked_id: 1002 })));
        assert!(matches!(&now[1], Message::Nack(n) if n.nacked_id == 1005));
        assert_eq!(now.len(), 2, "the profile comes after the ping");
        let later = drain(&mut sim, t0 + PING1D_PING);
        assert!(matches!(&later[..], [Message::Profile(p)] if p.profile_data.len() == 200));
    }

    #[test]
    fn ping1d_streams_profiles_once_started() {
        let t0 = Instant::now();
        let mut sim = Simulator::new(DeviceKind::Ping1d, Dialect::Current, t0);
        sim.receive(
            &Message::ContinuousStart(m::ContinuousStart { id: 1300 }).to_frame(),
            t0,
        );
        let profiles = drain(&mut sim, t0 + Duration::from_millis(1000))
            .into_iter()
            .filter(|m| matches!(m, Message::Profile(_)))
            .count();
        assert_eq!(profiles, 10, "every 100 ms");
    }

    #[test]
    fn a_simulated_ping360_cannot_beat_sound() {
        // 30 m: sound's round trip is 40 ms; 1200 samples of 1333 ticks of 25 ns listen
        // that long.
        let t0 = Instant::now();
        let mut sim = Simulator::new(DeviceKind::Ping360, Dialect::Current, t0);
        let a = m::AutoTransmit {
            mode: 1,
            sample_period: 1333,
            transmit_frequency: 750,
            number_of_samples: 1200,
            start_angle: 0,
            stop_angle: 399,
            num_steps: 1,
            ..Default::default()
        };
        sim.receive(&Message::AutoTransmit(a).to_frame(), t0);
        let echoes = drain(&mut sim, t0 + Duration::from_secs(1))
            .iter()
            .filter(|m| matches!(m, Message::AutoDeviceData(_)))
            .count();
        assert!(
            (15..=22).contains(&echoes),
            "{echoes} echoes in a second at 30 m"
        );
    }

    #[test]
    fn ping360_answers_transducer_and_sweeps_in_auto_transmit() {
        let t0 = Instant::now();
        let mut sim = Simulator::new(DeviceKind::Ping360, Dialect::Current, t0);
        let t = m::Transducer {
            mode: 1,
            angle: 50,
            sample_period: 80,
            transmit_frequency: 750,
            number_of_samples: 1200,
            transmit: 1,
            ..Default::default()
        };
        sim.receive(&Message::Transducer(t).to_frame(), t0);
        let replies = drain(
            &mut sim,
            t0 + ping360_step(80, 1200, 0) + Duration::from_millis(1),
        );
        assert!(
            matches!(&replies[..], [Message::DeviceData(d)] if d.angle == 50 && d.data.len() == 1200)
        );
        let a = m::AutoTransmit {
            mode: 1,
            sample_period: 80,
            transmit_frequency: 750,
            number_of_samples: 600,
            start_angle: 0,
            stop_angle: 399,
            num_steps: 1,
            ..Default::default()
        };
        sim.receive(&Message::AutoTransmit(a).to_frame(), t0);
        let sweep = drain(&mut sim, t0 + Duration::from_millis(800));
        let angles: Vec<u16> = sweep
            .iter()
            .filter_map(|m| {
                if let Message::AutoDeviceData(d) = m {
                    Some(d.angle)
                } else {
                    None
                }
            })
            .collect();
        assert!(
            angles.len() > 50 && angles.windows(2).all(|w| w[1] == (w[0] + 1) % 400),
            "{angles:?}"
        );
        sim.receive(
            &Message::MotorOff(m::MotorOff {}).to_frame(),
            t0 + Duration::from_millis(800),
        );
        assert!(
            matches!(
                drain(&mut sim, t0 + Duration::from_millis(2000))[..],
                [Message::Ack(_)]
            ),
            "motor_off stops the sweep"
        );
    }

    #[test]
    fn draft_device_answers_only_draft_requests() {
        let t0 = Instant::now();
        let mut sim = Simulator::new(DeviceKind::Ping1d, Dialect::Draft2017, t0);
        sim.receive(&request(m::ProtocolVersion::ID), t0);
        assert!(
            sim.poll_transmit(t0 + Duration::from_secs(1)).is_none(),
            "current requests get silence"
        );
        sim.receive(
            &DraftMessage::GenCmdRequest(draft::GenCmdRequest { request_id: 1102 }).to_frame(),
            t0,
        );
        let bytes = sim.poll_transmit(t0 + PING1D_PING).expect("an es_profile");
        let mut d = Decoder::default();
        d.extend(&bytes);
        let f = d.next_frame().unwrap();
        assert!(matches!(
            DraftMessage::decode(f.id, &f.payload),
            Ok(DraftMessage::EsProfile(_))
        ));
    }
}
