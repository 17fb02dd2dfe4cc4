//! Which host name a node advertises in its URIs, and which address it binds, chosen as
//! roscpp's `network::determineHost` and only-localhost mode do, and, with `ROS_IPV6=on`,
//! as rospy's `get_bind_address` binds IPv6.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The inputs of the choice: `__hostname:=` / `__ip:=` arguments and the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostOverrides {
    /// `__hostname:=`.
    pub hostname_arg: Option<String>,
    /// `__ip:=`.
    pub ip_arg: Option<String>,
    /// `ROS_HOSTNAME`.
    pub ros_hostname: Option<String>,
    /// `ROS_IP`.
    pub ros_ip: Option<String>,
    /// `ROS_IPV6=on`: servers listen on IPv6 (dual-stack).
    pub ipv6: bool,
}

impl HostOverrides {
    /// `ROS_HOSTNAME` and `ROS_IP` from the environment (no arguments).
    pub fn from_env() -> HostOverrides {
        HostOverrides {
            ros_hostname: std::env::var("ROS_HOSTNAME").ok(),
            ros_ip: std::env::var("ROS_IP").ok(),
            ipv6: ipv6_from_env(),
            ..HostOverrides::default()
        }
    }
}

/// Whether `ROS_IPV6` is `on`, as roscpp and rospy test it.
pub fn ipv6_from_env() -> bool {
    std::env::var("ROS_IPV6").is_ok_and(|v| v == "on")
}

/// `__hostname`, `__ip`, `ROS_HOSTNAME`, `ROS_IP`, the machine's host name unless it is
/// `localhost`, then `127.0.0.1`. An IPv6 literal is kept without brackets (`::1`): URIs
/// get them from [`authority`], and TCPROS and UDPROS host fields carry none.
pub fn advertised_host(o: &HostOverrides) -> String {
    let chosen = [&o.hostname_arg, &o.ip_arg, &o.ros_hostname, &o.ros_ip]
        .into_iter()
        .flatten()
        .next();
    if let Some(host) = chosen {
        return unbracketed(host).to_string();
    }
    match machine_hostname() {
        Some(h) if !h.is_empty() && h != "localhost" => h,
        _ => "127.0.0.1".to_string(),
    }
}

/// Loopback only when ROS_HOSTNAME or ROS_IP names loopback (`localhost`, `127.x`, `::1`),
/// as rospy's `get_bind_address` decides (roscpp looks at `localhost` and ROS_IP only, so
/// `ROS_HOSTNAME=127.0.0.1` bound every interface here before); nodes then refuse to reach
/// other hosts.
pub fn only_localhost(o: &HostOverrides) -> bool {
    [&o.ros_hostname, &o.ros_ip]
        .into_iter()
        .flatten()
        .any(|host| names_loopback(host))
}

/// Whether `host` is `localhost` or a loopback address literal (bracketed or not).
fn names_loopback(host: &str) -> bool {
    let host = unbracketed(host);
    host == "localhost"
        || host
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// The address servers bind: loopback in only-localhost mode, every interface otherwise;
/// with `ROS_IPV6=on`, the IPv6 ones (`::1`, or `::`, which also takes IPv4 on Linux's
/// default dual-stack sockets), as rospy binds.
pub fn bind_address(o: &HostOverrides) -> IpAddr {
    match (o.ipv6, only_localhost(o)) {
        (true, true) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        (true, false) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        (false, true) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        (false, false) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    }
}

/// `host` without the brackets of an IPv6 literal (`[::1]` is `::1`).
pub fn unbracketed(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// `host:port` for a URI: an IPv6 literal in brackets (`[::1]:11311`), as URIs need it.
pub fn authority(host: &str, port: u16) -> String {
    let host = unbracketed(host);
    match host.parse::<Ipv6Addr>() {
        Ok(_) => format!("[{host}]:{port}"),
        Err(_) => format!("{host}:{port}"),
    }
}

fn machine_hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// `uri` with an unbracketed IPv6 literal host put in brackets: rospy writes
/// `http://::1:PORT/` under `ROS_IPV6=on ROS_IP=::1` (Python splits the port at the last
/// colon), which a URI parser does not take. Anything else comes back as it was.
pub fn bracket_ipv6_uri(uri: &str) -> std::borrow::Cow<'_, str> {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.into();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let Some((host, port)) = authority.rsplit_once(':') else {
        return uri.into();
    };
    if authority.starts_with('[') || host.parse::<Ipv6Addr>().is_err() {
        return uri.into();
    }
    format!("{scheme}://[{host}]:{port}{path}").into()
}

/// The host of an `http://host:port/` URI (brackets of an IPv6 literal removed), or `None`
/// when it has none.
pub fn uri_host(uri: &str) -> Option<String> {
    let parsed: hyper::Uri = bracket_ipv6_uri(uri).parse().ok()?;
    let host = parsed.host()?;
    Some(
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_beat_environment_and_loopback_binds_locally() {
        let env = HostOverrides {
            ros_hostname: Some("robot".into()),
            ros_ip: Some("10.0.0.2".into()),
            ..Default::default()
        };
        assert_eq!(advertised_host(&env), "robot");
        let with_arg = HostOverrides {
            ip_arg: Some("192.168.1.5".into()),
            ..env.clone()
        };
        assert_eq!(advertised_host(&with_arg), "192.168.1.5");
        assert!(!only_localhost(&env));
        let local = HostOverrides {
            ros_ip: Some("127.0.0.1".into()),
            ..Default::default()
        };
        assert_eq!(advertised_host(&local), "127.0.0.1");
        assert_eq!(bind_address(&local), IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(only_localhost(&HostOverrides {
            ros_hostname: Some("localhost".into()),
            ..Default::default()
        }));
        for loopback in ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1"] {
            for o in [
                HostOverrides {
                    ros_hostname: Some(loopback.into()),
                    ..Default::default()
                },
                HostOverrides {
                    ros_ip: Some(loopback.into()),
                    ..Default::default()
                },
            ] {
                assert!(only_localhost(&o), "{o:?}");
                assert!(bind_address(&o).is_loopback(), "{o:?}");
            }
        }
        for wide in ["robot", "192.168.2.10", "127.example.com", "fd00::1"] {
            let o = HostOverrides {
                ros_hostname: Some(wide.into()),
                ..Default::default()
            };
            assert!(!only_localhost(&o), "{wide}");
        }
    }

    #[test]
    fn ipv6_binds_as_rospy_and_uris_bracket_literals() {
        let v6_local = HostOverrides {
            ros_ip: Some("[::1]".into()),
            ipv6: true,
            ..Default::default()
        };
        assert_eq!(advertised_host(&v6_local), "::1", "kept without brackets");
        assert_eq!(bind_address(&v6_local), IpAddr::V6(Ipv6Addr::LOCALHOST));
        let v6_any = HostOverrides {
            ros_ip: Some("fd00::2".into()),
            ipv6: true,
            ..Default::default()
        };
        assert_eq!(bind_address(&v6_any), IpAddr::V6(Ipv6Addr::UNSPECIFIED));
        assert_eq!(authority("::1", 11311), "[::1]:11311");
        assert_eq!(authority("[fd00::2]", 5), "[fd00::2]:5");
        assert_eq!(authority("robot", 5), "robot:5");
        assert_eq!(authority("10.0.0.2", 5), "10.0.0.2:5");
        assert_eq!(bracket_ipv6_uri("http://::1:4567/"), "http://[::1]:4567/");
        assert_eq!(bracket_ipv6_uri("http://[::1]:4567/"), "http://[::1]:4567/");
        assert_eq!(bracket_ipv6_uri("http://host:4567/"), "http://host:4567/");
        assert_eq!(
            bracket_ipv6_uri("rosrpc://fd00::2:99"),
            "rosrpc://[fd00::2]:99"
        );
        assert_eq!(uri_host("http://::1:4567/").as_deref(), Some("::1"));
    }
}
