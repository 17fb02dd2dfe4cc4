//! `udpros param`: what `rosparam` does, with its YAML.

use super::tool_node::tool_node;
use super::CliResult;
use clap::Subcommand;
use udpros::node::Node;
use udpros::xmlrpc::Value;
use udpros::yaml::params as param_yaml;

#[derive(Subcommand)]
pub enum ParamCommand {
    /// Print a parameter or a namespace as YAML.
    Get { name: String },
    /// Set a parameter from YAML (`10` is an int, `'10'` a string, `[1, 2]` a list).
    Set { name: String, value: String },
    /// The parameter names, optionally under a namespace.
    List { namespace: Option<String> },
    /// Delete a parameter or a namespace.
    Delete { name: String },
    /// Write a namespace (default `/`) as YAML to a file, or to stdout without one (`-`).
    Dump {
        file: Option<String>,
        namespace: Option<String>,
    },
    /// Set the parameters of a YAML file (a mapping) under a namespace (default `/`).
    Load {
        file: String,
        namespace: Option<String>,
    },
}

pub fn run(cmd: ParamCommand) -> CliResult {
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let node = tool_node("udpros_param").await?;
        let result = match cmd {
            ParamCommand::Get { name } => get(&node, &name).await,
            ParamCommand::Set { name, value } => set(&node, &name, &value).await,
            ParamCommand::List { namespace } => list(&node, namespace.as_deref()).await,
            ParamCommand::Delete { name } => delete(&node, &name).await,
            ParamCommand::Dump { file, namespace } => {
                dump(&node, file.as_deref(), namespace.as_deref()).await
            }
            ParamCommand::Load { file, namespace } => {
                load(&node, &file, namespace.as_deref()).await
            }
        };
        node.shutdown().await;
        result
    })
}

async fn fetch(node: &Node, name: &str) -> Result<Value, String> {
    let name = node.resolve_name(name);
    node.master()
        .get_param(&name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("Parameter [{name}] is not set"))
}

async fn get(node: &Node, name: &str) -> CliResult {
    print!("{}", param_yaml::get_text(&fetch(node, name).await?));
    Ok(())
}

async fn set(node: &Node, name: &str, text: &str) -> CliResult {
    let value = udpros::yaml::load(text)
        .and_then(|y| y.to_xmlrpc())
        .map_err(|e| format!("{name}: {e}"))?;
    node.master()
        .set_param(&node.resolve_name(name), value)
        .await
        .map_err(|e| e.to_string())
}

async fn list(node: &Node, namespace: Option<&str>) -> CliResult {
    let mut names = node
        .master()
        .get_param_names()
        .await
        .map_err(|e| e.to_string())?;
    if let Some(ns) = namespace {
        let ns = node.resolve_name(ns);
        let prefix = format!("{}/", ns.trim_end_matches('/'));
        names.retain(|n| *n == ns || n.starts_with(&prefix));
    }
    names.sort();
    for n in names {
        println!("{n}");
    }
    Ok(())
}

async fn delete(node: &Node, name: &str) -> CliResult {
    let name = node.resolve_name(name);
    let deleted = node
        .master()
        .delete_param(&name)
        .await
        .map_err(|e| e.to_string())?;
    if deleted {
        Ok(())
    } else {
        Err(format!("Parameter [{name}] is not set"))
    }
}

async fn dump(node: &Node, file: Option<&str>, namespace: Option<&str>) -> CliResult {
    let text = param_yaml::dump(&fetch(node, namespace.unwrap_or("/")).await?);
    match file {
        None | Some("-") => {
            print!("{text}");
            Ok(())
        }
        Some(path) => std::fs::write(path, text).map_err(|e| format!("cannot write {path}: {e}")),
    }
}

async fn load(node: &Node, file: &str, namespace: Option<&str>) -> CliResult {
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))?;
    // Each document of the file goes into the namespace, as rosparam loads them.
    let documents = udpros::yaml::load_all(&text).map_err(|e| format!("{file}: {e}"))?;
    let mut pairs = Vec::new();
    for document in documents {
        let udpros::yaml::Yaml::Map(entries) = document else {
            return Err(format!("{file}: the file is not a mapping of parameters"));
        };
        pairs.extend(entries);
    }
    let ns = node.resolve_name(namespace.unwrap_or("/"));
    for (key, value) in pairs {
        let value = value
            .to_xmlrpc()
            .map_err(|e| format!("{file}: {key}: {e}"))?;
        let name = format!("{}/{key}", ns.trim_end_matches('/'));
        node.master()
            .set_param(&name, value)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
