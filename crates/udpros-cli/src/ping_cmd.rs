//! `udpros ping`: Blue Robotics Ping sonars without ROS: find Ping360s on Ethernet, and
//! record what a device sends as a Ping Viewer log.

use super::{seconds_or_none, CliResult};
use clap::Subcommand;
use std::path::PathBuf;
use std::time::Duration;
use udpros_bridges::ping::discovery;
use udpros_bridges::ping::link::LinkSpec;
use udpros_bridges::ping::messages::{self as m, Message};
use udpros_bridges::ping::node::{record_device, Config};
use udpros_bridges::ping::Decoder;

#[derive(Subcommand)]
pub enum PingCommand {
    /// Broadcast Ping360 discovery (UDP port 30303) on every IPv4 network of this host and
    /// list what answers: address, MAC, name and firmware (asked over UDP port 12345).
    Discover {
        /// Seconds to listen for answers (discovery is sent once a second meanwhile).
        #[arg(long, default_value_t = 3.0, allow_negative_numbers = true)]
        wait: f64,
    },
    /// Drive a device as `ping_sonar` does and write everything it sends to FILE as a Ping
    /// Viewer sensor log, until Ctrl-C or --duration.
    Record {
        /// The device, as `ping_sonar`'s ~device: serial:PATH:BAUD, udp:HOST:PORT, discover,
        /// sim:ping1d, sim:ping360.
        device: String,
        /// The log to write (Ping Viewer opens it; `ping_sonar _device:=replay:FILE` plays it).
        file: PathBuf,
        /// Seconds to record; 0 records until Ctrl-C.
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
        duration: f64,
    },
}

pub fn run(cmd: PingCommand) -> CliResult {
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        match cmd {
            PingCommand::Discover { wait } => discover(wait).await,
            PingCommand::Record {
                device,
                file,
                duration,
            } => record(&device, &file, duration).await,
        }
    })
}

async fn discover(wait: f64) -> CliResult {
    let wait = seconds_or_none("--wait", wait)?.ok_or("--wait must be more than 0 seconds")?;
    let found = discovery::discover(wait)
        .await
        .map_err(|e| format!("discovery: {e}"))?;
    if found.is_empty() {
        return Err(format!(
            "no Ping360 answered discovery within {} s",
            wait.as_secs_f64()
        ));
    }
    // Each asked at once: a second for all, however many answered.
    let mut asked = tokio::task::JoinSet::new();
    for (i, device) in found.iter().enumerate() {
        let address = device.data_address();
        asked.spawn(async move { (i, firmware(address).await) });
    }
    let mut firmwares = vec![None; found.len()];
    while let Some(Ok((i, answer))) = asked.join_next().await {
        firmwares[i] = answer;
    }
    for (device, firmware) in found.iter().zip(firmwares) {
        let firmware =
            firmware.unwrap_or_else(|| "firmware unknown (no answer on UDP 12345)".into());
        let says = device
            .says
            .map(|named| format!(" (its reply names {named})"))
            .unwrap_or_default();
        println!(
            "{}{says}\t{}\t{}\t{firmware}",
            device.address, device.mac, device.name
        );
    }
    Ok(())
}

/// The firmware a Ping device at `address` reports in device_information, if it answers
/// within a second.
async fn firmware(address: std::net::SocketAddr) -> Option<String> {
    let socket = tokio::net::UdpSocket::bind(("0.0.0.0", 0)).await.ok()?;
    socket.connect(address).await.ok()?;
    let request = Message::GeneralRequest(m::GeneralRequest {
        requested_id: m::DeviceInformation::ID,
    })
    .to_frame();
    let mut decoder = Decoder::default();
    let mut buf = vec![0u8; 65536];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    socket.send(&request).await.ok()?;
    loop {
        let n = tokio::time::timeout_at(deadline, socket.recv(&mut buf))
            .await
            .ok()?
            .ok()?;
        decoder.extend(&buf[..n]);
        while let Some(frame) = decoder.next_frame() {
            if let Ok(Message::DeviceInformation(i)) = Message::decode(frame.id, &frame.payload) {
                return Some(format!(
                    "firmware {}.{}.{}",
                    i.firmware_version_major, i.firmware_version_minor, i.firmware_version_patch
                ));
            }
        }
    }
}

async fn record(device: &str, file: &std::path::Path, duration: f64) -> CliResult {
    let device: LinkSpec = device.parse()?;
    if matches!(device, LinkSpec::Replay(_)) {
        return Err("a replay is already a log: copy the file".into());
    }
    let limit = seconds_or_none("--duration", duration)?;
    let until = async move {
        match limit {
            Some(limit) => {
                tokio::select! {
                    _ = tokio::time::sleep(limit) => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    let recorded = record_device(Config::new(device), file, until).await?;
    eprintln!(
        "{} frames written to {}{}",
        recorded.frames,
        recorded.path.display(),
        match recorded.dropped {
            0 => String::new(),
            n => format!(" ({n} dropped: the disk fell behind)"),
        }
    );
    Ok(())
}
