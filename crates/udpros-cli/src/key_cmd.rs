//! `udpros key`: the graph key that secure links share (see `udpros::secure`).

use super::CliResult;
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum KeyCommand {
    /// Make a new graph key in FILE (readable by its owner only; an existing file is never
    /// replaced), and print its id. Give every node of the graph the file's path
    /// (UDPROS_KEY_FILE=FILE); copy the file only over a channel you trust.
    New {
        /// Where to write the key.
        file: PathBuf,
    },
    /// Print the id of the key in FILE: nodes with the same id share the key. The id
    /// tells nothing of the key.
    Id {
        /// The key file.
        file: PathBuf,
    },
    /// Print the MAVLink 2 signing secret that mavlink_bridge derives from the key in FILE
    /// (`~signing`), as 64 hex digits, for the autopilot's side (SETUP_SIGNING from a
    /// ground station, or pymavlink's `setup_signing(bytes.fromhex(...))`). It is a
    /// secret: print it only where nobody else reads.
    Mavlink {
        /// The key file.
        file: PathBuf,
    },
}

pub fn run(command: KeyCommand) -> CliResult {
    match command {
        KeyCommand::New { file } => {
            let key = udpros::secure::new_key().map_err(|e| e.to_string())?;
            udpros::secure::write_new_key_file(&file, &key).map_err(|e| e.to_string())?;
            println!("{}: a new graph key, id {}", file.display(), key.id());
        }
        KeyCommand::Id { file } => {
            let key = udpros::secure::read_key_file(&file).map_err(|e| e.to_string())?;
            println!("{}", key.id());
        }
        KeyCommand::Mavlink { file } => {
            let key = udpros::secure::read_key_file(&file).map_err(|e| e.to_string())?;
            let secret = key.derive(udpros_bridges::mavlink::node::SIGNING_PURPOSE);
            let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
            println!("{hex}");
        }
    }
    Ok(())
}
