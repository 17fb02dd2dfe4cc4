//! Datagrams with a forged source, as an attacker on a host or its path sends them: a raw
//! socket (the tests run as root, as CI does) that writes UDP packets from any port on
//! loopback, and reads a copy of every UDP datagram to learn what a link carries.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

/// A raw IPv4 UDP socket; std's `recv` and `send_to` are plain recv and sendto on it.
pub fn raw_socket() -> UdpSocket {
    // SAFETY: a plain socket(2) call; the descriptor is owned by the UdpSocket from here.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP) };
    assert!(
        fd >= 0,
        "a raw socket (the test runs as root, as CI does): {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `fd` is a fresh, valid descriptor that nothing else owns.
    let socket = unsafe { <UdpSocket as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("a read timeout");
    socket
}

/// A UDP packet from port `from` to port `to` on loopback, as a raw socket sends it (the
/// kernel writes the IP header; a zero checksum means none, as IPv4 allows).
pub fn udp_packet(from: u16, to: u16, payload: &[u8]) -> Vec<u8> {
    let mut packet = Vec::with_capacity(8 + payload.len());
    packet.extend_from_slice(&from.to_be_bytes());
    packet.extend_from_slice(&to.to_be_bytes());
    packet.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    packet.extend_from_slice(&[0, 0]);
    packet.extend_from_slice(payload);
    packet
}

/// Sends `payload` to 127.0.0.1:`to` as if from 127.0.0.1:`from`.
pub fn send_spoofed(raw: &UdpSocket, from: u16, to: u16, payload: &[u8]) {
    let loopback: SocketAddr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0).into();
    let _ = raw.send_to(&udp_packet(from, to, payload), loopback);
}

/// The payloads of the next `count` UDP datagrams from port `from` to port `to` on
/// loopback, read off the wire within 10 s (fewer if they do not come).
pub fn sniff(raw: &UdpSocket, from: u16, to: u16, count: usize) -> Vec<Vec<u8>> {
    let mut buf = [0u8; 65536];
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < count && Instant::now() < deadline {
        let Ok(n) = raw.recv(&mut buf) else { continue };
        let bytes = &buf[..n];
        let ihl = usize::from(bytes[0] & 0x0f) * 4;
        let Some(udp) = bytes.get(ihl..).filter(|udp| udp.len() >= 8) else {
            continue;
        };
        let (src, dst) = (
            u16::from_be_bytes([udp[0], udp[1]]),
            u16::from_be_bytes([udp[2], udp[3]]),
        );
        if (src, dst) == (from, to) {
            seen.push(udp[8..].to_vec());
        }
    }
    seen
}
