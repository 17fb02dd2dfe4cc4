//! `udpros key`: a new key file is its owner's only, never replaces a file, and a key file
//! others may read is refused.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use udpros_testkit::{run_tool, Ran};

fn udpros(args: &[&str]) -> Ran {
    run_tool(Command::new(env!("CARGO_BIN_EXE_udpros")).args(args))
}

#[test]
fn a_new_key_is_the_owners_only_never_replaces_a_file_and_says_its_id() {
    let dir = std::env::temp_dir().join(format!("udpros-cli-key-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("graph.key");
    let file = path.to_str().unwrap();
    let made = udpros(&["key", "new", file]);
    assert!(made.ok, "{}", made.stderr);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let id = udpros(&["key", "id", file]);
    assert!(id.ok, "{}", id.stderr);
    let id = id.stdout.trim().to_string();
    assert_eq!(id.len(), 16);
    assert!(
        made.stdout.contains(&id),
        "new says the id: {}",
        made.stdout
    );
    // The key itself is printed nowhere.
    let text = std::fs::read_to_string(&path).unwrap();
    let key = text.lines().last().unwrap().split(' ').nth(1).unwrap();
    assert!(!made.stdout.contains(key) && !made.stderr.contains(key));

    let again = udpros(&["key", "new", file]);
    assert!(!again.ok);
    assert!(again.stderr.contains("never replaces"), "{}", again.stderr);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        text,
        "the file is as it was"
    );

    // The MAVLink signing secret derived from it: 32 bytes in hex, neither the key nor its id.
    let mavlink = udpros(&["key", "mavlink", file]);
    assert!(mavlink.ok, "{}", mavlink.stderr);
    let secret = mavlink.stdout.trim();
    assert_eq!(secret.len(), 64);
    assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()), "{secret}");
    assert!(secret != key && !secret.contains(&id), "{secret}");
    assert_eq!(
        udpros(&["key", "mavlink", file]).stdout.trim(),
        secret,
        "derived, not drawn"
    );

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let open = udpros(&["key", "id", file]);
    assert!(!open.ok);
    assert!(open.stderr.contains("chmod 600"), "{}", open.stderr);
    let open = udpros(&["key", "mavlink", file]);
    assert!(
        !open.ok && open.stderr.contains("chmod 600"),
        "{}",
        open.stderr
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
