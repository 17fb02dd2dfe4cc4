//! The Ping codec against brping 0.1.5 (bluerobotics-ping on PyPI), the vendor's Python
//! library: random frames brping builds decode to the same fields and re-encode byte for
//! byte, and frames udpros encodes decode in brping to the same fields.

use udpros_testkit as common;

use std::io::Write;
use std::process::{Command, Stdio};
use udpros_bridges::ping::messages::{AsciiText, Nack};
use udpros_bridges::ping::{Decoder, Message};

/// Our message's fields as JSON, without the serde tag, for comparison with brping's.
fn fields(m: &Message) -> serde_json::Value {
    let mut v = serde_json::to_value(m).expect("serialises");
    v.as_object_mut().expect("object").remove("message");
    v
}

fn decode_frame(bytes: &[u8]) -> Message {
    let mut d = Decoder::default();
    d.extend(bytes);
    let frame = d.next_frame().expect("one frame");
    assert!(d.next_frame().is_none());
    Message::decode(frame.id, &frame.payload).expect("decodes")
}

#[test]
fn brping_frames_decode_and_reencode_identically() {
    let Some(python) = common::venv_python("brping") else {
        return;
    };
    let out = Command::new(python)
        .arg(common::peer_script("brping_peer.py"))
        .args(["random", "6", "7"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut ids = std::collections::BTreeSet::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let case: serde_json::Value = serde_json::from_str(line).unwrap();
        let hex = case["hex"].as_str().unwrap();
        let bytes = common::from_hex(hex);
        let msg = decode_frame(&bytes);
        assert_eq!(u64::from(msg.id()), case["id"].as_u64().unwrap());
        assert_eq!(fields(&msg), case["fields"], "fields of {}", msg.id());
        assert_eq!(
            common::to_hex(&msg.to_frame()),
            hex,
            "re-encoding {}",
            msg.id()
        );
        ids.insert(msg.id());
    }
    // Every message brping 0.1.5 can build (all but nack, ascii_text, auto_device_data).
    assert_eq!(ids.len(), 37, "{ids:?}");
}

#[test]
fn udpros_frames_decode_in_brping() {
    let Some(python) = common::venv_python("brping") else {
        return;
    };
    let out = Command::new(&python)
        .arg(common::peer_script("brping_peer.py"))
        .args(["random", "3", "11"])
        .output()
        .unwrap();
    let hex_of = |line: &str| {
        serde_json::from_str::<serde_json::Value>(line).unwrap()["hex"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let mut messages: Vec<Message> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| decode_frame(&common::from_hex(&hex_of(l))))
        .collect();
    // And the two brping cannot build, with text it must read back.
    messages.push(Message::Nack(Nack {
        nacked_id: 1005,
        nack_message: "Gain setting out of range".into(),
    }));
    messages.push(Message::AsciiText(AsciiText {
        ascii_message: "hello sonar".into(),
    }));
    let mut child = Command::new(&python)
        .arg(common::peer_script("brping_peer.py"))
        .arg("decode")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = messages
        .iter()
        .map(|m| format!("{}\n", common::to_hex(&m.to_frame())))
        .collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let replies: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), messages.len());
    for (m, r) in messages.iter().zip(&replies) {
        assert_eq!(u64::from(m.id()), r["id"].as_u64().unwrap_or(0), "{r}");
        assert_eq!(fields(m), r["fields"], "brping read {} differently", m.id());
    }
}
