use super::CliResult;
use clap::Subcommand;
use std::io::Write;
use udpros::codegen::spec::{FieldType, Shape, SpecSet};

#[derive(Subcommand)]
pub enum MsgCommand {
    /// Print the md5sum of a message type.
    Md5 {
        /// `package/Type`
        type_name: String,
    },
    /// Print a message type's fields, nested types expanded (as `rosmsg show`).
    Show {
        /// `package/Type`
        type_name: String,
        /// Print the full definition text exactly as sent in a connection header.
        #[arg(long)]
        raw: bool,
    },
    /// List the message types udpros ships.
    List,
    /// Write the message packages udpros defines and stock ROS lacks (udpros, mavros_msgs)
    /// as ROS packages with genpy's Python classes into DIR, for rostopic, rosbag and rqt;
    /// prints the two variables to set.
    Export {
        /// Where to write `share/` (for ROS_PACKAGE_PATH) and `python/` (for PYTHONPATH).
        dir: std::path::PathBuf,
    },
}

pub fn run(cmd: MsgCommand) -> CliResult {
    let mut out = std::io::stdout().lock();
    let text = match cmd {
        MsgCommand::Md5 { type_name } => format!("{}\n", find(&type_name)?.md5sum()),
        MsgCommand::Show {
            type_name,
            raw: true,
        } => {
            format!(
                "{}\n",
                find(&type_name)?.definition().map_err(|e| e.to_string())?
            )
        }
        MsgCommand::Show {
            type_name,
            raw: false,
        } => {
            let ty = find(&type_name)?;
            let mut text = String::new();
            expand(ty.specs(), &type_name, "", &mut text);
            format!("{text}\n")
        }
        MsgCommand::Export { dir } => {
            let python = std::env::var_os("UDPROS_ROS_PYTHON")
                .map_or_else(|| "/usr/bin/python3".into(), std::path::PathBuf::from);
            let dir = std::path::absolute(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let exported = crate::msg_export::export(&dir, &python)?;
            if exported.is_empty() {
                "every package udpros defines is already installed: nothing to export\n".to_string()
            } else {
                format!(
                    "# exported {}; for rostopic, rosbag, rosmsg and rqt:\nexport ROS_PACKAGE_PATH={}:$ROS_PACKAGE_PATH\nexport PYTHONPATH={}:$PYTHONPATH\n",
                    exported.join(", "),
                    dir.join("share").display(),
                    dir.join("python").display()
                )
            }
        }
        MsgCommand::List => {
            let mut names: Vec<&str> = udpros::msgs::MESSAGES.iter().map(|m| m.type_name).collect();
            names.sort_unstable();
            names.iter().map(|n| format!("{n}\n")).collect()
        }
    };
    // A closed pipe (`| head`) is not an error worth a message.
    let _ = out.write_all(text.as_bytes());
    Ok(())
}

fn find(type_name: &str) -> Result<udpros::msg::dynamic::DynamicType, String> {
    udpros::msg::find_type(type_name)
        .map_err(|e| format!("cannot find message type {type_name}: {e}"))
}

/// `rosmsg show`'s layout: constants, then fields, nested types indented by two spaces.
fn expand(specs: &SpecSet, type_name: &str, indent: &str, out: &mut String) {
    let Some(spec) = specs.get(type_name) else {
        return;
    };
    for c in &spec.constants {
        out.push_str(&format!(
            "{indent}{} {}={}\n",
            c.ty.ros_name(),
            c.name,
            c.text
        ));
    }
    for f in &spec.fields {
        let base = match &f.ty {
            FieldType::Primitive(p) => p.ros_name().to_string(),
            FieldType::Message(m) => m.clone(),
        };
        let suffix = match f.shape {
            Shape::Scalar => String::new(),
            Shape::Vec => "[]".into(),
            Shape::Array(n) => format!("[{n}]"),
        };
        out.push_str(&format!("{indent}{base}{suffix} {}\n", f.name));
        if let FieldType::Message(m) = &f.ty {
            expand(specs, m, &format!("{indent}  "), out);
        }
    }
}
