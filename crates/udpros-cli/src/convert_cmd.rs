//! `udpros convert`: a Ping Viewer sensor log (`.bin`) into MCAP, each frame a
//! `udpros/PingFrame` on one channel, so that a sonar's own bytes sit in the same kind of
//! file as a ROS recording (and open in Foxglove beside one).

use clap::Args;
use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};
use udpros::msg::Message;
use udpros::msgs::udpros::PingFrame;
use udpros_bridges::ping::log::LogReader;
use udpros_bridges::ping::DeviceKind;
use udpros_record::{Compression, Connection, McapWriter, Writer};

#[derive(Args)]
pub struct ConvertArgs {
    /// The Ping Viewer log (`.bin`).
    input: PathBuf,
    /// The MCAP file to write (never an existing one).
    output: PathBuf,
    /// The channel's topic.
    #[arg(long, default_value = "/ping/frames")]
    topic: String,
    /// When the log began, in seconds since the epoch (default: the log file's
    /// modification time less the time of its last record).
    #[arg(long)]
    start: Option<f64>,
}

pub fn run(args: ConvertArgs) -> crate::CliResult {
    let shown = |path: &PathBuf| path.display().to_string();
    let open = |path: &PathBuf| {
        udpros_bridges::ping::log::open(path).map_err(|e| format!("{}: {e}", shown(path)))
    };
    let start = match args.start {
        Some(seconds) => Duration::try_from_secs_f64(seconds)
            .map_err(|_| format!("--start {seconds}: seconds since the epoch"))?,
        None => {
            // A log's times count from its start; its file was last written at its end.
            let file = open(&args.input)?;
            let modified = file
                .metadata()
                .and_then(|m| m.modified())
                .map_err(|e| format!("{}: {e}", shown(&args.input)))?;
            let mut reader = LogReader::new(std::io::BufReader::new(file))
                .map_err(|e| format!("{}: {e}", shown(&args.input)))?;
            let mut last = Duration::ZERO;
            while let Some(record) = reader
                .next_record()
                .map_err(|e| format!("{}: {e}", shown(&args.input)))?
            {
                last = record.at;
            }
            let ended = modified.duration_since(UNIX_EPOCH).unwrap_or_default();
            ended.saturating_sub(last)
        }
    };
    let mut reader = LogReader::new(std::io::BufReader::new(open(&args.input)?))
        .map_err(|e| format!("{}: {e}", shown(&args.input)))?;
    let device = match reader.header().and_then(|h| h.device()) {
        Some(DeviceKind::Ping1d) => "ping1d",
        Some(DeviceKind::Ping360) => "ping360",
        None => "ping",
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&args.output)
        .map_err(|e| format!("cannot create {}: {e}", shown(&args.output)))?;
    let mut writer = McapWriter::new(std::io::BufWriter::new(file), Compression::Zstd)
        .map(|w| Writer::Mcap(Box::new(w)))
        .map_err(|e| format!("{}: {e}", shown(&args.output)))?;
    let channel = writer
        .add_connection(&Connection {
            topic: args.topic.clone(),
            msg_type: PingFrame::TYPE.into(),
            md5sum: PingFrame::MD5SUM.into(),
            definition: PingFrame::DEFINITION.into(),
            callerid: "/udpros_convert".into(),
            latching: false,
        })
        .map_err(|e| format!("{}: {e}", shown(&args.output)))?;
    let (mut frames, mut skipped) = (0u64, 0u64);
    while let Some(record) = reader
        .next_record()
        .map_err(|e| format!("{}: {e}", shown(&args.input)))?
    {
        let frame = &record.frame;
        // A record that is not a frame (a damaged log) is counted, not converted.
        if frame.len() < 10 || !frame.starts_with(b"BR") {
            skipped += 1;
            continue;
        }
        let at = start + record.at;
        let message = PingFrame {
            header: udpros::msgs::std_msgs::Header {
                seq: frames as u32,
                stamp: udpros::msg::Time {
                    sec: at.as_secs().min(u64::from(u32::MAX)) as u32,
                    nsec: at.subsec_nanos(),
                },
                frame_id: device.into(),
            },
            message_id: u16::from_le_bytes([frame[4], frame[5]]),
            src_device_id: frame[6],
            dst_device_id: frame[7],
            frame: frame.clone().into(),
        };
        let body = udpros::wire::to_vec(&message).map_err(|e| e.to_string())?;
        let ns = at.as_nanos().min(u128::from(u64::MAX)) as u64;
        writer
            .write(channel, ns, &body)
            .map_err(|e| format!("{}: {e}", shown(&args.output)))?;
        frames += 1;
    }
    writer
        .finish()
        .map_err(|e| format!("{}: {e}", shown(&args.output)))?;
    let problem = reader
        .problem()
        .map(|p| format!(" ({p})"))
        .unwrap_or_default();
    eprintln!(
        "udpros: convert: {frames} frames of a {device} log into {} on {}, {skipped} records not frames{problem}",
        shown(&args.output),
        args.topic
    );
    Ok(())
}
