//! `~fcu_url`: where the autopilot is, in mavros's syntax (libmavconn's, with its defaults)
//! or the `mavlink` crate's, both read into one [`Transport`]. Pure parsing; the link opens
//! what it says.
//!
//! mavros's forms: `/dev/ttyACM0[:BAUD]`, `serial:///dev/ttyACM0[:BAUD]`, `serial-hwfc://…`
//! (hardware flow control), `udp://[BIND][:PORT]@[REMOTE][:PORT]`, `udp-b://…` (broadcast
//! until a peer answers), `udp-pb://…` (broadcast always), `tcp://[HOST][:PORT]`,
//! `tcp-l://[BIND][:PORT]`, each with an optional `?ids=SYSID,COMPID`. The `mavlink`
//! crate's: `udpin:HOST:PORT`, `udpout:HOST:PORT`, `tcpin:HOST:PORT`, `tcpout:HOST:PORT`,
//! `serial:PATH:BAUD`. And `sim:`, the built-in simulated autopilot.

use super::protocol::Ids;
use std::fmt;
use std::str::FromStr;

/// libmavconn's defaults, which mavros's launch files rely on.
pub mod defaults {
    /// A serial URL without a device.
    pub const SERIAL_DEVICE: &str = "/dev/ttyACM0";
    /// A serial URL without a rate.
    pub const SERIAL_BAUD: u32 = 57600;
    /// `udp://` without a bind address.
    pub const UDP_BIND_HOST: &str = "0.0.0.0";
    /// `udp://` without a bind port.
    pub const UDP_BIND_PORT: u16 = 14555;
    /// `udp://` without a remote port.
    pub const UDP_REMOTE_PORT: u16 = 14550;
    /// `tcp://` without a host.
    pub const TCP_HOST: &str = "localhost";
    /// `tcp-l://` without a bind address.
    pub const TCP_LISTEN_HOST: &str = "0.0.0.0";
    /// Both TCP forms without a port.
    pub const TCP_PORT: u16 = 5760;
}

/// A host (a name, an IPv4 address or an IPv6 address without brackets) and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// The host.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&udpros::host::authority(&self.host, self.port))
    }
}

/// Whom a UDP link sends to before (and after) a peer has spoken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broadcast {
    /// To the remote given, or to nobody until a datagram arrives; then to whoever sent the
    /// latest one (libmavconn's `udp://`).
    Never,
    /// To 255.255.255.255 at the remote port until a datagram arrives; then as `Never`
    /// (`udp-b://`).
    UntilAnswered,
    /// To 255.255.255.255 at the remote port, always (`udp-pb://`).
    Always,
}

/// How the link reaches the autopilot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A UDP socket bound to `bind`, sending to `remote` (learnt from the first datagram when
    /// absent) or broadcasting.
    Udp {
        /// The local address and port.
        bind: HostPort,
        /// Where to send before anything arrived.
        remote: Option<HostPort>,
        /// Broadcasting, for `udp-b://` and `udp-pb://`.
        broadcast: Broadcast,
    },
    /// A TCP connection to the autopilot (or to a router such as mavlink-router).
    TcpClient(HostPort),
    /// A TCP server the autopilot (or several GCSs) connect to; what is sent goes to all.
    TcpServer(HostPort),
    /// A serial port.
    Serial {
        /// The device file.
        path: String,
        /// Bits per second.
        baud: u32,
        /// RTS/CTS flow control (`serial-hwfc://`).
        hardware_flow: bool,
    },
}

/// `~fcu_url`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FcuUrl {
    /// A real link.
    Device {
        /// How.
        transport: Transport,
        /// `?ids=SYSID,COMPID`: our ids, instead of `~system_id` and `~component_id`.
        ids: Option<Ids>,
        /// The URL as given (diagnostics name the link by it).
        text: String,
    },
    /// `sim:`: a simulated autopilot in this process.
    Sim,
}

impl FcuUrl {
    /// The ids `?ids=SYSID,COMPID` gives us, if it does.
    pub fn ids(&self) -> Option<Ids> {
        match self {
            FcuUrl::Device { ids, .. } => *ids,
            FcuUrl::Sim => None,
        }
    }
}

impl Transport {
    /// UDP from an ephemeral port to `remote` (the simulated autopilot, say).
    pub fn udp_to(remote: std::net::SocketAddr) -> Transport {
        Transport::Udp {
            bind: HostPort {
                host: if remote.is_ipv4() { "0.0.0.0" } else { "::" }.into(),
                port: 0,
            },
            remote: Some(HostPort {
                host: remote.ip().to_string(),
                port: remote.port(),
            }),
            broadcast: Broadcast::Never,
        }
    }
}

/// Why an `fcu_url` does not parse; its text says what was expected, as the node prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlError {
    /// The URL as given.
    pub url: String,
    /// What is wrong with it.
    pub kind: UrlErrorKind,
}

/// What is wrong with an `fcu_url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlErrorKind {
    /// A scheme neither mavros nor the mavlink crate has (`None`: no scheme at all).
    UnknownScheme(Option<String>),
    /// `udp://`, `udp-b://` or `udp-pb://` without the `@` between bind and remote.
    NoAt(String),
    /// A network URL with a path.
    PathNotAllowed {
        /// The URL's scheme.
        scheme: String,
        /// The path it carried.
        path: String,
    },
    /// `serial://host/...`: a serial URL takes three slashes.
    SerialHost(String),
    /// A baud rate that is not a positive number.
    BadBaud(String),
    /// A port that is not 0-65535.
    BadPort(String),
    /// `[v6` without its `]`.
    UnclosedBracket(String),
    /// Something after `]` other than `:PORT`.
    NoPortAfterBracket(String),
    /// A query other than `ids=SYSID,COMPID` within 0-255.
    BadIds(String),
    /// A mavlink-crate URL without `HOST:PORT` (`PATH:BAUD`).
    NoHostPort(String),
}

impl fmt::Display for UrlErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlErrorKind::UnknownScheme(None) => write!(f, "no scheme: use {SYNTAXES}"),
            UrlErrorKind::UnknownScheme(Some(scheme)) => {
                write!(f, "unknown URL type '{scheme}': use {SYNTAXES}")
            }
            UrlErrorKind::NoAt(scheme) => write!(
                f,
                "a {scheme}:// URL needs '@' between the bind and remote addresses"
            ),
            UrlErrorKind::PathNotAllowed { scheme, path } => {
                write!(f, "a {scheme}:// URL has no path ('{path}')")
            }
            UrlErrorKind::SerialHost(scheme) => write!(
                f,
                "a {scheme}:// URL is {scheme}:///dev/DEVICE[:BAUD] (three slashes)"
            ),
            UrlErrorKind::BadBaud(baud) => write!(f, "'{baud}' is not a baud rate"),
            UrlErrorKind::BadPort(port) => write!(f, "'{port}' is not a port (0-65535)"),
            UrlErrorKind::UnclosedBracket(text) => write!(f, "'{text}' has no closing ']'"),
            UrlErrorKind::NoPortAfterBracket(text) => {
                write!(f, "'{text}': expected :PORT after ']'")
            }
            UrlErrorKind::BadIds(query) => {
                write!(f, "query '{query}' is not ids=SYSID,COMPID (each 0-255)")
            }
            UrlErrorKind::NoHostPort(scheme) => {
                write!(f, "{scheme}: needs HOST:PORT (serial: PATH:BAUD)")
            }
        }
    }
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fcu_url '{}': {}", self.url, self.kind)
    }
}

impl std::error::Error for UrlError {}

/// What an unknown URL is told.
const SYNTAXES: &str = "mavros's /dev/ttyACM0:57600, serial://, serial-hwfc://, udp://BIND:PORT@REMOTE:PORT, udp-b://, udp-pb://, tcp://HOST:PORT, tcp-l://BIND:PORT (each with ?ids=SYSID,COMPID), the mavlink crate's udpin:, udpout:, tcpin:, tcpout:, serial:PATH:BAUD, or sim:";

impl FromStr for FcuUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> Result<FcuUrl, UrlError> {
        if s == "sim" || s == "sim:" {
            return Ok(FcuUrl::Sim);
        }
        let (transport, ids) = if let Some((scheme, rest)) = s.split_once("://") {
            mavros(&scheme.to_ascii_lowercase(), rest)
        } else if s.starts_with('/') {
            // A bare path is a serial port, as in mavros's launch files.
            serial(s, false).map(|t| (t, None))
        } else {
            mavlink_crate(s).map(|t| (t, None))
        }
        .map_err(|kind| UrlError {
            url: s.to_string(),
            kind,
        })?;
        Ok(FcuUrl::Device {
            transport,
            ids,
            text: s.to_string(),
        })
    }
}

impl fmt::Display for FcuUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FcuUrl::Device { text, .. } => f.write_str(text),
            FcuUrl::Sim => f.write_str("sim:"),
        }
    }
}

/// A URL with `://`, libmavconn's way: the host part runs to the first `/`, the path from
/// there to `?`, the query after it.
fn mavros(scheme: &str, rest: &str) -> Result<(Transport, Option<Ids>), UrlErrorKind> {
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let ids = query.map(parse_ids).transpose()?;
    let (host, path) = match before_query.find('/') {
        Some(i) => before_query.split_at(i),
        None => (before_query, ""),
    };
    let network = |t: Transport| {
        if path.is_empty() || path == "/" {
            Ok((t, ids))
        } else {
            Err(UrlErrorKind::PathNotAllowed {
                scheme: scheme.to_string(),
                path: path.to_string(),
            })
        }
    };
    match scheme {
        "udp" | "udp-b" | "udp-pb" => {
            let (bind, remote) = host
                .split_once('@')
                .ok_or_else(|| UrlErrorKind::NoAt(scheme.to_string()))?;
            let bind = host_port(bind, defaults::UDP_BIND_HOST, defaults::UDP_BIND_PORT)?;
            let remote = host_port(remote, "", defaults::UDP_REMOTE_PORT)?;
            let (remote, broadcast) = match scheme {
                "udp" => (
                    (!remote.host.is_empty()).then_some(remote),
                    Broadcast::Never,
                ),
                _ => {
                    let broadcast = if scheme == "udp-b" {
                        Broadcast::UntilAnswered
                    } else {
                        Broadcast::Always
                    };
                    let to = HostPort {
                        host: "255.255.255.255".into(),
                        port: remote.port,
                    };
                    (Some(to), broadcast)
                }
            };
            network(Transport::Udp {
                bind,
                remote,
                broadcast,
            })
        }
        "tcp" => network(Transport::TcpClient(host_port(
            host,
            defaults::TCP_HOST,
            defaults::TCP_PORT,
        )?)),
        "tcp-l" => network(Transport::TcpServer(host_port(
            host,
            defaults::TCP_LISTEN_HOST,
            defaults::TCP_PORT,
        )?)),
        "serial" | "serial-hwfc" => {
            if !host.is_empty() {
                return Err(UrlErrorKind::SerialHost(scheme.to_string()));
            }
            Ok((serial(path, scheme == "serial-hwfc")?, ids))
        }
        other => Err(UrlErrorKind::UnknownScheme(Some(format!("{other}://")))),
    }
}

/// `PATH[:BAUD]`, libmavconn's defaults for what is missing. A path may hold colons
/// (`/dev/serial/by-id/…`): only digits after the last one are a rate.
fn serial(text: &str, hardware_flow: bool) -> Result<Transport, UrlErrorKind> {
    let (path, baud) = match text.rsplit_once(':') {
        Some((path, baud)) if !baud.is_empty() && baud.bytes().all(|b| b.is_ascii_digit()) => {
            let baud = baud
                .parse::<u32>()
                .ok()
                .filter(|b| *b > 0)
                .ok_or_else(|| UrlErrorKind::BadBaud(baud.to_string()))?;
            (path, baud)
        }
        _ => (text, defaults::SERIAL_BAUD),
    };
    Ok(Transport::Serial {
        path: if path.is_empty() {
            defaults::SERIAL_DEVICE.into()
        } else {
            path.into()
        },
        baud,
        hardware_flow,
    })
}

/// `HOST[:PORT]`, `:PORT`, `[V6][:PORT]` or nothing, with the defaults for what is missing.
fn host_port(text: &str, default_host: &str, default_port: u16) -> Result<HostPort, UrlErrorKind> {
    let (host, port) = if let Some(v6) = text.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| UrlErrorKind::UnclosedBracket(text.to_string()))?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| UrlErrorKind::NoPortAfterBracket(text.to_string()))?,
            ),
        };
        (host, port)
    } else {
        match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        None => default_port,
        Some(p) => p
            .parse()
            .map_err(|_| UrlErrorKind::BadPort(p.to_string()))?,
    };
    Ok(HostPort {
        host: if host.is_empty() {
            default_host.into()
        } else {
            host.into()
        },
        port,
    })
}

/// `ids=SYSID,COMPID`. libmavconn only warns about another query; here it is an error, so a
/// typo cannot leave the ids unchanged unnoticed.
fn parse_ids(query: &str) -> Result<Ids, UrlErrorKind> {
    let bad = || UrlErrorKind::BadIds(query.to_string());
    let (system, component) = query
        .strip_prefix("ids=")
        .and_then(|ids| ids.split_once(','))
        .ok_or_else(bad)?;
    Ok(Ids {
        system: system.trim().parse().map_err(|_| bad())?,
        component: component.trim().parse().map_err(|_| bad())?,
    })
}

/// `udpin:`, `udpout:`, `tcpin:`, `tcpout:` and `serial:` with `HOST:PORT` (`PATH:BAUD`).
fn mavlink_crate(s: &str) -> Result<Transport, UrlErrorKind> {
    let (scheme, rest) = s.split_once(':').ok_or(UrlErrorKind::UnknownScheme(None))?;
    if !matches!(scheme, "udpin" | "udpout" | "tcpin" | "tcpout" | "serial") {
        return Err(UrlErrorKind::UnknownScheme(Some(format!("{scheme}:"))));
    }
    let (host, port) = rest
        .rsplit_once(':')
        .filter(|(host, _)| !host.is_empty())
        .ok_or_else(|| UrlErrorKind::NoHostPort(scheme.to_string()))?;
    if scheme == "serial" {
        let baud = port
            .parse::<u32>()
            .ok()
            .filter(|b| *b > 0)
            .ok_or_else(|| UrlErrorKind::BadBaud(port.to_string()))?;
        return Ok(Transport::Serial {
            path: host.into(),
            baud,
            hardware_flow: false,
        });
    }
    let at = HostPort {
        host: udpros::host::unbracketed(host).into(),
        port: port
            .parse()
            .map_err(|_| UrlErrorKind::BadPort(port.to_string()))?,
    };
    Ok(match scheme {
        // Bound where it says, answering whoever sent last: libmavconn's udp:// with an
        // empty remote.
        "udpin" => Transport::Udp {
            bind: at,
            remote: None,
            broadcast: Broadcast::Never,
        },
        "udpout" => Transport::Udp {
            bind: HostPort {
                host: if at.host.contains(':') {
                    "::"
                } else {
                    "0.0.0.0"
                }
                .into(),
                port: 0,
            },
            remote: Some(at),
            broadcast: Broadcast::Never,
        },
        "tcpin" => Transport::TcpServer(at),
        _ => Transport::TcpClient(at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(host: &str, port: u16) -> HostPort {
        HostPort {
            host: host.into(),
            port,
        }
    }

    fn transport(url: &str) -> (Transport, Option<Ids>) {
        match url.parse::<FcuUrl>() {
            Ok(FcuUrl::Device {
                transport,
                ids,
                text,
            }) => {
                assert_eq!(text, url);
                (transport, ids)
            }
            other => panic!("{url}: {other:?}"),
        }
    }

    fn serial(path: &str, baud: u32, hardware_flow: bool) -> Transport {
        Transport::Serial {
            path: path.into(),
            baud,
            hardware_flow,
        }
    }

    fn udp(bind: HostPort, remote: Option<HostPort>, broadcast: Broadcast) -> Transport {
        Transport::Udp {
            bind,
            remote,
            broadcast,
        }
    }

    #[test]
    fn mavros_urls_read_with_libmavconn_s_defaults() {
        let cases = [
            ("/dev/ttyACM0:57600", serial("/dev/ttyACM0", 57600, false)),
            ("/dev/ttyUSB0", serial("/dev/ttyUSB0", 57600, false)),
            (
                "serial:///dev/ttyAMA0:921600",
                serial("/dev/ttyAMA0", 921600, false),
            ),
            ("serial://", serial("/dev/ttyACM0", 57600, false)),
            (
                "serial-hwfc:///dev/ttyTHS1:1500000",
                serial("/dev/ttyTHS1", 1_500_000, true),
            ),
            (
                "/dev/serial/by-id/usb-ArduPilot_fmuv3_3E0031-if00:115200",
                serial(
                    "/dev/serial/by-id/usb-ArduPilot_fmuv3_3E0031-if00",
                    115200,
                    false,
                ),
            ),
            (
                "udp://:14540@localhost:14557",
                udp(
                    hp("0.0.0.0", 14540),
                    Some(hp("localhost", 14557)),
                    Broadcast::Never,
                ),
            ),
            (
                "udp://0.0.0.0:14555@",
                udp(hp("0.0.0.0", 14555), None, Broadcast::Never),
            ),
            ("udp://@", udp(hp("0.0.0.0", 14555), None, Broadcast::Never)),
            (
                "udp://127.0.0.1@192.168.1.5",
                udp(
                    hp("127.0.0.1", 14555),
                    Some(hp("192.168.1.5", 14550)),
                    Broadcast::Never,
                ),
            ),
            (
                "udp-b://@:14550",
                udp(
                    hp("0.0.0.0", 14555),
                    Some(hp("255.255.255.255", 14550)),
                    Broadcast::UntilAnswered,
                ),
            ),
            (
                "udp-pb://:14556@:14551",
                udp(
                    hp("0.0.0.0", 14556),
                    Some(hp("255.255.255.255", 14551)),
                    Broadcast::Always,
                ),
            ),
            (
                "udp://[::1]:14555@[fd00::2]:14550",
                udp(
                    hp("::1", 14555),
                    Some(hp("fd00::2", 14550)),
                    Broadcast::Never,
                ),
            ),
            ("tcp://", Transport::TcpClient(hp("localhost", 5760))),
            ("tcp://10.0.0.2", Transport::TcpClient(hp("10.0.0.2", 5760))),
            ("TCP://host:5762/", Transport::TcpClient(hp("host", 5762))),
            ("tcp-l://", Transport::TcpServer(hp("0.0.0.0", 5760))),
            ("tcp-l://:5761", Transport::TcpServer(hp("0.0.0.0", 5761))),
        ];
        for (url, want) in cases {
            assert_eq!(transport(url), (want, None), "{url}");
        }
        let ids = Some(Ids {
            system: 1,
            component: 240,
        });
        assert_eq!(transport("udp://:14540@:14557/?ids=1,240").1, ids);
        assert_eq!(transport("tcp://localhost?ids=1,240").1, ids);
        assert_eq!(
            transport("serial:///dev/ttyACM0:57600?ids=1,240"),
            (serial("/dev/ttyACM0", 57600, false), ids)
        );
    }

    #[test]
    fn the_mavlink_crate_s_addresses_and_sim_still_read() {
        assert_eq!("sim:".parse(), Ok(FcuUrl::Sim));
        assert_eq!("sim".parse(), Ok(FcuUrl::Sim));
        assert_eq!(
            transport("udpin:0.0.0.0:14540").0,
            udp(hp("0.0.0.0", 14540), None, Broadcast::Never)
        );
        assert_eq!(
            transport("udpout:127.0.0.1:14557").0,
            udp(
                hp("0.0.0.0", 0),
                Some(hp("127.0.0.1", 14557)),
                Broadcast::Never
            )
        );
        assert_eq!(
            transport("udpout:[::1]:14557").0,
            udp(hp("::", 0), Some(hp("::1", 14557)), Broadcast::Never)
        );
        assert_eq!(
            transport("tcpout:127.0.0.1:5760").0,
            Transport::TcpClient(hp("127.0.0.1", 5760))
        );
        assert_eq!(
            transport("tcpin:0.0.0.0:5760").0,
            Transport::TcpServer(hp("0.0.0.0", 5760))
        );
        assert_eq!(
            transport("serial:/dev/ttyACM0:921600").0,
            serial("/dev/ttyACM0", 921600, false)
        );
        assert_eq!(
            Transport::udp_to("127.0.0.1:4000".parse().unwrap()),
            transport("udpout:127.0.0.1:4000").0
        );
    }

    #[test]
    fn what_is_not_a_url_is_one_line_naming_it_and_both_syntaxes() {
        use UrlErrorKind as K;
        let s = |text: &str| text.to_string();
        for (bad, kind, says) in [
            ("", K::UnknownScheme(None), "no scheme"),
            (
                "file://x",
                K::UnknownScheme(Some(s("file://"))),
                "unknown URL type 'file://'",
            ),
            (
                "foo:x:1",
                K::UnknownScheme(Some(s("foo:"))),
                "unknown URL type 'foo:'",
            ),
            ("udp://:14540", K::NoAt(s("udp")), "needs '@'"),
            (
                "udp://:port@",
                K::BadPort(s("port")),
                "'port' is not a port",
            ),
            ("udp://:70000@", K::BadPort(s("70000")), "not a port"),
            (
                "tcp://h:5760/x",
                K::PathNotAllowed {
                    scheme: s("tcp"),
                    path: s("/x"),
                },
                "has no path",
            ),
            (
                "udp://@?ids=1",
                K::BadIds(s("ids=1")),
                "not ids=SYSID,COMPID",
            ),
            (
                "udp://@?ids=1,256",
                K::BadIds(s("ids=1,256")),
                "not ids=SYSID,COMPID",
            ),
            (
                "udp://@?sysid=1",
                K::BadIds(s("sysid=1")),
                "not ids=SYSID,COMPID",
            ),
            (
                "serial://dev/ttyS0",
                K::SerialHost(s("serial")),
                "three slashes",
            ),
            ("/dev/ttyS0:0", K::BadBaud(s("0")), "not a baud rate"),
            ("udpin:14540", K::NoHostPort(s("udpin")), "needs HOST:PORT"),
            (
                "serial:/dev/ttyS0:fast",
                K::BadBaud(s("fast")),
                "not a baud rate",
            ),
            (
                "udp://[::1@",
                K::UnclosedBracket(s("[::1")),
                "no closing ']'",
            ),
        ] {
            let e = bad.parse::<FcuUrl>().unwrap_err();
            assert_eq!((e.url.as_str(), &e.kind), (bad, &kind));
            let e = e.to_string();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains('\n'), "{e}");
            if says.starts_with("unknown") || says == "no scheme" {
                assert!(
                    e.contains("udp-pb://") && e.contains("udpout:") && e.contains("sim:"),
                    "{e}"
                );
            }
        }
    }
}
