//! A node's command line and environment, read as roscpp and rospy read them: remappings
//! (`from:=to`), special arguments (`__name`, `__ns`, `__master`, `__ip`, `__hostname`,
//! `__log`), private parameters (`_rate:=10`, typed as YAML), `ROS_NAMESPACE` and
//! `ROS_MASTER_URI`; and udpros's own special arguments for secure links (`__key_file`,
//! `__security`, `__secure_mode`: [`SecurityArgs`]).

use crate::host::{advertised_host, bind_address, HostOverrides};
use crate::names::{canonicalize, is_legal_base, ns_join, Remappings};
use crate::secure::SecurityArgs;
use crate::xmlrpc::Value;
use std::fmt;
use std::net::IpAddr;

/// What the command line says, before it is combined with the environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeArgs {
    /// `__name:=`.
    pub name: Option<String>,
    /// `__ns:=`.
    pub namespace: Option<String>,
    /// `__master:=`.
    pub master: Option<String>,
    /// `__ip:=`.
    pub ip: Option<String>,
    /// `__hostname:=`.
    pub hostname: Option<String>,
    /// `__log:=` (accepted and ignored, as roslaunch passes it).
    pub log: Option<String>,
    /// `__key_file:=`, `__security:=`, `__secure_mode:=`.
    pub security: SecurityArgs,
    /// `from:=to` remappings and `_param:=value` private parameters, in order.
    pub remaps: Vec<(String, String)>,
    /// Private parameters, without their leading `_`, with YAML-typed values.
    pub params: Vec<(String, Value)>,
    /// Arguments that are not ROS arguments, in order.
    pub rest: Vec<String>,
}

/// A ROS argument that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

impl NodeArgs {
    /// Reads the ROS arguments (`name:=value`) of a command line; other arguments are left for the program.
    pub fn parse<S: AsRef<str>>(args: impl IntoIterator<Item = S>) -> Result<NodeArgs, ArgError> {
        let mut out = NodeArgs::default();
        for arg in args {
            let arg = arg.as_ref();
            let Some((from, to)) = arg.split_once(":=") else {
                out.rest.push(arg.to_string());
                continue;
            };
            let slot = match from {
                "__name" => &mut out.name,
                "__ns" => &mut out.namespace,
                "__master" => &mut out.master,
                "__ip" => &mut out.ip,
                "__hostname" => &mut out.hostname,
                "__log" => &mut out.log,
                "__key_file" => {
                    out.security.key_file = Some(to.into());
                    continue;
                }
                "__security" => &mut out.security.policy,
                "__secure_mode" => &mut out.security.mode,
                _ if from.starts_with("__") => continue, // other special arguments: roslaunch's own
                _ if from.len() > 1 && from.starts_with('_') => {
                    let value = crate::yaml::load(to)
                        .and_then(|y| y.to_xmlrpc())
                        .map_err(|e| ArgError(format!("private parameter {arg}: {e}")))?;
                    out.params.push((from[1..].to_string(), value));
                    continue;
                }
                _ => {
                    out.remaps.push((from.to_string(), to.to_string()));
                    continue;
                }
            };
            *slot = Some(to.to_string());
        }
        Ok(out)
    }
}

/// Where and who a node is.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeIdentity {
    /// Fully qualified: `/ns/name`.
    pub name: String,
    /// With a trailing slash: `/ns/`.
    pub namespace: String,
    /// The master's URI.
    pub master_uri: String,
    /// The host other nodes reach this one by.
    pub host: String,
    /// The address its servers bind.
    pub bind: IpAddr,
    /// The node's remappings, resolved.
    pub remaps: Remappings,
    /// Private parameters, keys resolved (`/ns/name/rate`).
    pub params: Vec<(String, Value)>,
    /// The command line's arguments that are not ROS arguments.
    pub rest: Vec<String>,
    /// What the command line says of security, over the environment.
    pub security: SecurityArgs,
}

/// The default master when neither `__master` nor `ROS_MASTER_URI` says otherwise.
pub const DEFAULT_MASTER_URI: &str = "http://localhost:11311/";

impl NodeIdentity {
    /// Combines the arguments with the process environment.
    pub fn from_args(default_name: &str, args: &NodeArgs) -> Result<NodeIdentity, ArgError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        NodeIdentity::resolve(default_name, args, &env)
    }

    /// Combines the arguments with an environment given as a lookup (for tests).
    pub fn resolve(
        default_name: &str,
        args: &NodeArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<NodeIdentity, ArgError> {
        let base = args
            .name
            .clone()
            .unwrap_or_else(|| default_name.to_string());
        let base = base.strip_prefix('/').unwrap_or(&base).to_string();
        if !is_legal_base(&base) {
            return Err(ArgError(format!(
                "node name '{base}' is not a legal base name (a letter, then letters, digits or _)"
            )));
        }
        let ns = args
            .namespace
            .clone()
            .or_else(|| env("ROS_NAMESPACE"))
            .unwrap_or_default();
        let ns = canonicalize(&format!("/{ns}"));
        let name = ns_join(&ns, &base);
        let namespace = crate::names::namespace(&name);
        let master_uri = args
            .master
            .clone()
            .or_else(|| env("ROS_MASTER_URI"))
            .unwrap_or_else(|| DEFAULT_MASTER_URI.into());
        let overrides = HostOverrides {
            hostname_arg: args.hostname.clone(),
            ip_arg: args.ip.clone(),
            ros_hostname: env("ROS_HOSTNAME"),
            ros_ip: env("ROS_IP"),
            ipv6: env("ROS_IPV6").as_deref() == Some("on"),
        };
        let remaps = Remappings::new(
            args.remaps.iter().map(|(f, t)| (f.as_str(), t.as_str())),
            &name,
        );
        let params = args
            .params
            .iter()
            .map(|(k, v)| (crate::names::resolve(&format!("~{k}"), &name), v.clone()))
            .collect();
        Ok(NodeIdentity {
            name,
            namespace,
            master_uri,
            host: advertised_host(&overrides),
            bind: bind_address(&overrides),
            remaps,
            params,
            rest: args.rest.clone(),
            security: args.security.clone(),
        })
    }

    /// Resolves a topic, service or parameter name for this node, remappings applied.
    pub fn resolve_name(&self, name: &str) -> String {
        self.remaps.resolve(name, &self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn special_arguments_remaps_and_private_parameters() {
        let args = NodeArgs::parse([
            "__name:=sonar",
            "__ns:=/boat",
            "chatter:=/talk",
            "_rate:=10",
            "_frame:=base",
            "_gains:=[1.5, 2]",
            "_on:=true",
            "--verbose",
            "__log:=/tmp/x.log",
            "__master:=http://m:1/",
        ])
        .unwrap();
        assert_eq!(args.rest, ["--verbose"]);
        let id = NodeIdentity::resolve(
            "default",
            &args,
            &env(&[("ROS_IP", "10.1.2.3"), ("ROS_NAMESPACE", "ignored")]),
        )
        .unwrap();
        assert_eq!(id.name, "/boat/sonar");
        assert_eq!(id.namespace, "/boat/");
        assert_eq!(id.master_uri, "http://m:1/");
        assert_eq!(id.host, "10.1.2.3");
        assert_eq!(id.resolve_name("chatter"), "/talk");
        assert_eq!(id.resolve_name("~range"), "/boat/sonar/range");
        assert_eq!(
            id.params,
            [
                ("/boat/sonar/rate".to_string(), Value::Int(10)),
                ("/boat/sonar/frame".to_string(), Value::from("base")),
                (
                    "/boat/sonar/gains".to_string(),
                    Value::from(vec![Value::Double(1.5), Value::Int(2)])
                ),
                ("/boat/sonar/on".to_string(), Value::Bool(true)),
            ]
        );
    }

    #[test]
    fn environment_fills_in_and_names_are_checked() {
        let id = NodeIdentity::resolve(
            "talker",
            &NodeArgs::default(),
            &env(&[
                ("ROS_NAMESPACE", "robot1"),
                ("ROS_MASTER_URI", "http://h:2/"),
            ]),
        )
        .unwrap();
        assert_eq!(id.name, "/robot1/talker");
        assert_eq!(id.master_uri, "http://h:2/");
        let bad = NodeArgs::parse(["__name:=a/b"]).unwrap();
        assert!(NodeIdentity::resolve("x", &bad, &env(&[])).is_err());
        assert!(NodeArgs::parse(["_p:=[1,"]).is_err());
    }

    /// Secure links' special arguments name the key file (never the key), the policy and
    /// the mode; roslaunch's own special arguments are still passed over.
    #[test]
    fn security_arguments_are_read_and_carried_to_the_identity() {
        let args = NodeArgs::parse([
            "__key_file:=/etc/robot/graph.key",
            "__security:=require",
            "__secure_mode:=auth",
            "__id:=/roslaunch_id",
        ])
        .unwrap();
        let expected = SecurityArgs {
            key_file: Some("/etc/robot/graph.key".into()),
            policy: Some("require".into()),
            mode: Some("auth".into()),
        };
        assert_eq!(args.security, expected);
        assert!(args.rest.is_empty() && args.remaps.is_empty() && args.params.is_empty());
        let id = NodeIdentity::resolve("n", &args, &env(&[])).unwrap();
        assert_eq!(id.security, expected);
    }
}
