//! Finding a Ping360 on Ethernet: the ASCII text `Discovery` broadcast to UDP port 30303,
//! answered by every Ping360 with a few lines of text naming it, its MAC and its address
//! (octets zero-padded: `IP Address:- 192.168.002.002`). Its data is Ping protocol on UDP
//! port 12345 at that address.
//!
//! Broadcasts go to 255.255.255.255 and to each interface's own broadcast address: a robot's
//! tether often has no default route, and then the limited broadcast has nowhere to go.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

/// The port a Ping360 answers discovery on.
pub const DISCOVERY_PORT: u16 = 30303;
/// The port a Ping360 speaks the Ping protocol on.
pub const DATA_PORT: u16 = 12345;
/// What asks every Ping360 to answer.
pub const REQUEST: &[u8] = b"Discovery";
/// Devices listed at most (a reply from each of more is ignored).
pub const MAX_FOUND: usize = 64;
/// The longest reply read (a real one is about 90 bytes).
const MAX_REPLY: usize = 1024;

/// A Ping360 that answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its name, as it says (`SONAR PING360`).
    pub name: String,
    /// Who made it (`Blue Robotics`).
    pub organization: String,
    /// Its MAC address, as it writes it (`54-10-EC-79-7D-C5`).
    pub mac: String,
    /// Its address: where the reply came from. A reply cannot send the node's traffic
    /// elsewhere by naming another address.
    pub address: Ipv4Addr,
    /// The address the reply names, when it names another than it came from (shown, never
    /// used).
    pub says: Option<Ipv4Addr>,
}

impl Found {
    /// Where its Ping protocol is.
    pub fn data_address(&self) -> SocketAddr {
        SocketAddrV4::new(self.address, DATA_PORT).into()
    }
}

/// The longest name, organization or MAC kept from a reply.
const MAX_FIELD: usize = 64;

/// A discovery reply, if it is a Ping360's (ping-viewer's test: the text says `PING360`)
/// from an address a device can have. Its text is kept printable (a reply's escape or
/// bell bytes never reach a terminal).
pub fn parse_reply(reply: &[u8], from: Ipv4Addr) -> Option<Found> {
    if from.is_unspecified() || from.is_broadcast() || from.is_multicast() {
        return None;
    }
    let text = String::from_utf8_lossy(&reply[..reply.len().min(MAX_REPLY)]);
    if !text.contains("PING360") {
        return None;
    }
    let mut lines = text.lines().map(printable);
    let name = lines.next().unwrap_or_default();
    let organization = lines.next().unwrap_or_default();
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(":-")?;
            k.trim().eq_ignore_ascii_case(key).then(|| printable(v))
        })
    };
    let says = field("IP Address")
        .and_then(|a| padded_ipv4(&a))
        .filter(|named| *named != from);
    Some(Found {
        name,
        organization,
        mac: field("MAC Address").unwrap_or_default(),
        address: from,
        says,
    })
}

/// `text` trimmed, without control characters, at most [`MAX_FIELD`] characters.
fn printable(text: &str) -> String {
    text.trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_FIELD)
        .collect()
}

/// `192.168.002.002` (or unpadded) as an address.
fn padded_ipv4(text: &str) -> Option<Ipv4Addr> {
    let octets: Vec<u8> = text
        .split('.')
        .map(|o| o.parse::<u8>().ok())
        .collect::<Option<_>>()?;
    <[u8; 4]>::try_from(octets).ok().map(Ipv4Addr::from)
}

/// The reply a Ping360 at `address` with `mac` sends.
pub fn reply_text(address: Ipv4Addr, mac: &str) -> String {
    let [a, b, c, d] = address.octets();
    format!(
        "SONAR PING360  \r\nBlue Robotics\r\nMAC Address:- {mac}\r\nIP Address:- {a:03}.{b:03}.{c:03}.{d:03}\r\n"
    )
}

/// Where discovery is sent: the limited broadcast and each up interface's broadcast
/// address.
pub fn broadcast_targets() -> Vec<SocketAddr> {
    let mut out = vec![SocketAddrV4::new(Ipv4Addr::BROADCAST, DISCOVERY_PORT).into()];
    for address in interface_broadcasts() {
        let target = SocketAddrV4::new(address, DISCOVERY_PORT).into();
        if !out.contains(&target) {
            out.push(target);
        }
    }
    out
}

/// The broadcast addresses of this host's IPv4 interfaces that are up, from each one's
/// address and netmask (an address added without `brd` has no broadcast address of its own,
/// yet its subnet's still reaches the neighbours).
fn interface_broadcasts() -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list that freeifaddrs releases; each
    // entry is read only while the list lives, and its addresses only when they are IPv4.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return out;
        }
        let ipv4 = |sa: *const libc::sockaddr| -> Option<Ipv4Addr> {
            if sa.is_null() || i32::from((*sa).sa_family) != libc::AF_INET {
                return None;
            }
            let sin = &*(sa as *const libc::sockaddr_in);
            Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
        };
        let mut at = list;
        while let Some(entry) = at.as_ref() {
            let flags = entry.ifa_flags as libc::c_int;
            let up = flags & libc::IFF_UP != 0 && flags & libc::IFF_LOOPBACK == 0;
            if let (true, Some(address), Some(mask)) =
                (up, ipv4(entry.ifa_addr), ipv4(entry.ifa_netmask))
            {
                let broadcast = Ipv4Addr::from(address.to_bits() | !mask.to_bits());
                if broadcast != address {
                    out.push(broadcast);
                }
            }
            at = entry.ifa_next;
        }
        libc::freeifaddrs(list);
    }
    out
}

/// Broadcasts discovery once a second for `listen` and returns every Ping360 that
/// answered, once each, in the order they did.
pub async fn discover(listen: Duration) -> std::io::Result<Vec<Found>> {
    discover_at(&broadcast_targets(), listen).await
}

/// As [`discover`], sending to `targets`.
pub async fn discover_at(targets: &[SocketAddr], listen: Duration) -> std::io::Result<Vec<Found>> {
    let socket = tokio::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).await?;
    socket.set_broadcast(true)?;
    let mut found: Vec<Found> = Vec::new();
    let deadline = tokio::time::Instant::now() + listen;
    let mut ask = tokio::time::interval(Duration::from_secs(1));
    let mut buf = vec![0u8; MAX_REPLY];
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => return Ok(found),
            _ = ask.tick() => {
                let mut sent = false;
                for target in targets {
                    // A target without a route (the limited broadcast on a host without a
                    // default route) fails alone.
                    sent |= socket.send_to(REQUEST, target).await.is_ok();
                }
                if !sent {
                    return Err(std::io::Error::other(
                        "discovery could not be sent anywhere (no IPv4 interface up?)",
                    ));
                }
            }
            received = socket.recv_from(&mut buf) => {
                let Ok((n, SocketAddr::V4(from))) = received else { continue };
                let Some(device) = parse_reply(&buf[..n], *from.ip()) else { continue };
                if found.len() < MAX_FOUND && !found.iter().any(|f| f.address == device.address) {
                    found.push(device);
                }
            }
        }
    }
}

/// Answers discovery as a Ping360 at `address` would, on `socket` (bound to port 30303),
/// until dropped: a stand-in for tests and demos.
pub async fn respond(socket: tokio::net::UdpSocket, address: Ipv4Addr, mac: String) {
    let reply = reply_text(address, &mac);
    let mut buf = vec![0u8; 64];
    loop {
        let Ok((n, from)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        if &buf[..n] == REQUEST {
            let _ = socket.send_to(reply.as_bytes(), from).await;
        }
    }
}

/// A simulated Ping360 on Ethernet at `address`: discovery answered on port 30303 of every
/// local address, the simulated device on port 12345, until dropped. For tests (on a host of
/// a namespace network) and demos.
pub async fn serve_simulated(address: Ipv4Addr, mac: String) -> std::io::Result<()> {
    use super::sim::serve_udp;
    use super::{DeviceKind, Dialect};
    let answer = tokio::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, DISCOVERY_PORT)).await?;
    let data = tokio::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, DATA_PORT)).await?;
    tokio::join!(
        respond(answer, address, mac),
        serve_udp(data, DeviceKind::Ping360, Dialect::Current, None)
    );
    Ok(())
}

/// [`serve_simulated`] on the calling thread (a runtime of its own) until `stop` says so or
/// is dropped: how a test puts a Ping360 on a host of a namespace network.
pub fn run_simulated(address: Ipv4Addr, mac: &str, stop: std::sync::mpsc::Receiver<()>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let mac = mac.to_string();
    rt.block_on(async move {
        let device = tokio::spawn(serve_simulated(address, mac));
        // The sockets close with the runtime once told to stop.
        let _ = tokio::task::spawn_blocking(move || stop.recv()).await;
        device.abort();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ping360_reply_reads_with_its_padded_address_and_others_do_not() {
        let reply = b"SONAR PING360  \r\nBlue Robotics\r\nMAC Address:- 54-10-EC-79-7D-C5\r\nIP Address:- 192.168.000.111\r\n";
        let from = Ipv4Addr::new(192, 168, 0, 111);
        assert_eq!(
            parse_reply(reply, from),
            Some(Found {
                name: "SONAR PING360".into(),
                organization: "Blue Robotics".into(),
                mac: "54-10-EC-79-7D-C5".into(),
                address: from,
                says: None,
            })
        );
        // Its own text, round trip; a reply naming another address than it came from is
        // answered where it came from (the name is only shown).
        let ours = reply_text(Ipv4Addr::new(10, 77, 0, 2), "02-00-00-00-00-01");
        assert!(ours.contains("IP Address:- 010.077.000.002"), "{ours}");
        let found = parse_reply(ours.as_bytes(), Ipv4Addr::new(10, 0, 0, 9)).unwrap();
        assert_eq!(found.address, Ipv4Addr::new(10, 0, 0, 9));
        assert_eq!(found.says, Some(Ipv4Addr::new(10, 77, 0, 2)));
        // Control bytes never reach a terminal; no device at a broadcast address.
        let rude = b"SONAR PING360\x1b[2J\x07\r\nBlue\x1b]0;pwned\x07 Robotics\r\nMAC Address:- 54\x0710\r\n";
        let found = parse_reply(rude, from).unwrap();
        assert!(
            [&found.name, &found.organization, &found.mac]
                .iter()
                .all(|t| !t.chars().any(char::is_control)),
            "{found:?}"
        );
        assert_eq!(parse_reply(reply, Ipv4Addr::BROADCAST), None);
        assert_eq!(parse_reply(reply, Ipv4Addr::UNSPECIFIED), None);
        // No address line, or a broken one: where it came from.
        assert_eq!(
            parse_reply(b"SONAR PING360\r\nX\r\n", from)
                .unwrap()
                .address,
            from
        );
        assert_eq!(
            parse_reply(b"SONAR PING360\r\nX\r\nIP Address:- 300.1.1.1\r\n", from)
                .unwrap()
                .address,
            from
        );
        assert_eq!(parse_reply(b"some other device", from), None);
        assert_eq!(parse_reply(&[0xff; 100_000], from), None);
    }

    #[test]
    fn the_limited_broadcast_is_always_a_target() {
        let targets = broadcast_targets();
        assert_eq!(targets[0], "255.255.255.255:30303".parse().unwrap());
        assert!(targets.iter().all(|t| t.port() == DISCOVERY_PORT));
    }
}
