//! Which host name a node advertises in its URIs, and which address it binds, chosen as
//! roscpp's `network::determineHost` and only-localhost mode do.

use std::net::{IpAddr, Ipv4Addr};

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
}

impl HostOverrides {
    /// `ROS_HOSTNAME` and `ROS_IP` from the environment (no arguments).
    pub fn from_env() -> HostOverrides {
        HostOverrides {
            ros_hostname: std::env::var("ROS_HOSTNAME").ok(),
            ros_ip: std::env::var("ROS_IP").ok(),
            ..HostOverrides::default()
        }
    }
}

/// `__hostname`, `__ip`, `ROS_HOSTNAME`, `ROS_IP`, the machine's host name unless it is
/// `localhost`, then `127.0.0.1`.
pub fn advertised_host(o: &HostOverrides) -> String {
    let chosen = [&o.hostname_arg, &o.ip_arg, &o.ros_hostname, &o.ros_ip]
        .into_iter()
        .flatten()
        .next();
    if let Some(host) = chosen {
        return host.clone();
    }
    match machine_hostname() {
        Some(h) if !h.is_empty() && h != "localhost" => h,
        _ => "127.0.0.1".to_string(),
    }
}

/// roscpp binds to loopback only when ROS_HOSTNAME is `localhost` or ROS_IP is a loopback
/// address; nodes then refuse to reach other hosts.
pub fn only_localhost(o: &HostOverrides) -> bool {
    o.ros_hostname.as_deref() == Some("localhost")
        || o.ros_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("127.") || ip == "::1")
}

/// The address servers bind: loopback in only-localhost mode, every interface otherwise.
pub fn bind_address(o: &HostOverrides) -> IpAddr {
    if only_localhost(o) {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

fn machine_hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The host of an `http://host:port/` URI (brackets of an IPv6 literal removed), or `None`
/// when it has none.
pub fn uri_host(uri: &str) -> Option<String> {
    let parsed: hyper::Uri = uri.parse().ok()?;
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
    }
}
