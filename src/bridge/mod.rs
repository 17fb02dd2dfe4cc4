//! Bridges from devices onto ROS topics.

use crate::node::params::FromParam;
use crate::node::Node;

#[cfg(feature = "ping")]
pub mod ping;

#[cfg(feature = "mavlink")]
pub mod mavlink;

/// The `main` of a bridge binary: the node from the command line and environment (rosrun
/// and roslaunch style), its configuration from parameters, then `run` until it returns or
/// Ctrl-C; the node unregisters either way. Errors are one line on stderr and a failure
/// status.
pub async fn node_main<C>(
    name: &str,
    configure: impl AsyncFnOnce(&Node) -> Result<C, String>,
    run: impl AsyncFnOnce(Node, C) -> Result<(), String>,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    crate::logging::init();
    let node = match Node::from_env(name).await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match configure(&node).await {
        Ok(cfg) => tokio::select! {
            r = run(node.clone(), cfg) => r,
            _ = tokio::signal::ctrl_c() => Ok(()),
        },
        Err(e) => Err(e),
    };
    node.shutdown().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A bridge's view of its node's `~` parameters: errors are one line of text naming the key,
/// and string parameters can be a choice among names.
pub struct Params<'a>(pub &'a Node);

impl Params<'_> {
    /// `key`'s value, or `default` when it is not set.
    pub async fn get<T: FromParam>(&self, key: &str, default: T) -> Result<T, String> {
        self.0.param(key, default).await.map_err(|e| e.to_string())
    }

    /// A string parameter naming one of `choices` (`default` when it is not set): the value
    /// paired with that name.
    pub async fn choice<T: Copy>(
        &self,
        key: &str,
        default: &str,
        choices: &[(&str, T)],
    ) -> Result<T, String> {
        let name: String = self.get(key, default.to_string()).await?;
        match choices.iter().find(|(n, _)| *n == name) {
            Some(&(_, value)) => Ok(value),
            None => {
                let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
                Err(format!("{key} '{name}' is not {}", either(&names)))
            }
        }
    }
}

/// `a`, `a or b`, `a, b or c`.
fn either(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::either;

    #[test]
    fn choices_are_listed_as_a_sentence() {
        assert_eq!(either(&["v2"]), "v2");
        assert_eq!(either(&["window", "px4"]), "window or px4");
        assert_eq!(
            either(&["auto", "ping1d", "ping360"]),
            "auto, ping1d or ping360"
        );
    }
}
