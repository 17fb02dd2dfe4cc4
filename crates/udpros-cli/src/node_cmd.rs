//! `udpros node`: what `rosnode` does, with its output.

use super::tool_node::tool_node;
use super::CliResult;
use clap::{Args, Subcommand};
use std::time::{Duration, Instant};
use udpros::node::Node;
use udpros::xmlrpc::Value;

#[derive(Subcommand)]
pub enum NodeCommand {
    /// The nodes registered with the master.
    List,
    /// A node's publications, subscriptions, services and connections.
    Info { node: String },
    /// Whether a node answers, and how fast (its XML-RPC getPid round trip).
    Ping(PingArgs),
    /// Ask nodes to shut down.
    Kill {
        #[arg(required = true)]
        nodes: Vec<String>,
    },
    /// Unregister nodes that no longer answer.
    Cleanup {
        /// Do not ask before purging.
        #[arg(short, long)]
        yes: bool,
    },
}

#[derive(Args)]
pub struct PingArgs {
    node: String,
    /// Pings to send (default: until Ctrl-C).
    #[arg(short = 'c', long = "count")]
    count: Option<u32>,
}

pub fn run(cmd: NodeCommand) -> CliResult {
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let node = tool_node("udpros_node").await?;
        let result = match cmd {
            NodeCommand::List => list(&node).await,
            NodeCommand::Info { node: name } => info(&node, &name).await,
            NodeCommand::Ping(args) => ping(&node, args).await,
            NodeCommand::Kill { nodes } => kill(&node, &nodes).await,
            NodeCommand::Cleanup { yes } => cleanup(&node, yes).await,
        };
        node.shutdown().await;
        result
    })
}

/// Every node in the master's system state, sorted, without the tool itself.
async fn node_names(tool: &Node) -> Result<Vec<String>, String> {
    let state = tool
        .master()
        .get_system_state()
        .await
        .map_err(|e| e.to_string())?;
    let mut names: Vec<String> = state
        .publishers
        .iter()
        .chain(&state.subscribers)
        .chain(&state.services)
        .flat_map(|(_, nodes)| nodes.iter().cloned())
        .filter(|n| n != tool.name())
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

async fn list(tool: &Node) -> CliResult {
    let names = node_names(tool).await?;
    for name in &names {
        println!("{name}");
    }
    // The names stay rosnode's list on standard output; a udpros master under `prefer`
    // also says which of them registered without the graph key (rosmaster has no such
    // call, and says nothing here). The master remembers nodes that left too: only
    // those listed are named.
    if let Ok(mut unproven) = tool.master().unauthenticated_nodes().await {
        // `names` is sorted: up to the master's 10 000 names, each looked up cheaply.
        unproven.retain(|n| names.binary_search(n).is_ok());
        if !unproven.is_empty() {
            eprintln!(
                "registered without proof of the graph key (unauthenticated): {}",
                unproven.join(" ")
            );
        }
    }
    Ok(())
}

/// A slave API call; the value of a [code, status, value] answer with code 1.
async fn slave_call(
    tool: &Node,
    uri: &str,
    method: &str,
    args: Vec<Value>,
) -> Result<Value, String> {
    // The tool's own client: it signs as the tool's security says.
    let client = tool.master().xmlrpc().with_timeout(Duration::from_secs(3));
    let reply = client
        .call(uri, method, args)
        .await
        .map_err(|e| e.to_string())?;
    match reply.as_array() {
        Some([code, status, value]) if code.as_i32() == Some(1) => Ok(value.clone()),
        Some([_, status, _]) => Err(status.as_str().unwrap_or("error").to_string()),
        _ => Err(format!("{method}: a reply of the wrong shape")),
    }
}

async fn lookup(tool: &Node, name: &str) -> Result<(String, String), String> {
    let name = tool.resolve_name(name);
    let uri = tool
        .master()
        .lookup_node(&name)
        .await
        .map_err(|_| format!("Unknown node {name}"))?;
    Ok((name, uri))
}

async fn info(tool: &Node, name: &str) -> CliResult {
    let (name, uri) = lookup(tool, name).await?;
    let master = tool.master();
    let state = master.get_system_state().await.map_err(|e| e.to_string())?;
    let types = master.get_topic_types().await.unwrap_or_default();
    let type_of = |topic: &str| {
        types
            .iter()
            .find(|(t, _)| t == topic)
            .map_or("unknown type".to_string(), |(_, ty)| ty.clone())
    };
    println!("{}", "-".repeat(80));
    println!("Node [{name}]");
    for (title, table, typed) in [
        ("Publications", &state.publishers, true),
        ("Subscriptions", &state.subscribers, true),
        ("Services", &state.services, false),
    ] {
        let mut mine: Vec<&String> = table
            .iter()
            .filter(|(_, nodes)| nodes.contains(&name))
            .map(|(t, _)| t)
            .collect();
        mine.sort();
        if mine.is_empty() {
            println!("{title}: None\n");
            continue;
        }
        println!("{title}: ");
        for t in mine {
            if typed {
                println!(" * {t} [{}]", type_of(t));
            } else {
                println!(" * {t}");
            }
        }
        println!();
    }
    println!("\ncontacting node {uri} ...");
    let pid = slave_call(tool, &uri, "getPid", vec![tool.name().into()])
        .await
        .map_err(|e| format!("ERROR: Communication with node[{uri}] failed! {e}"))?;
    println!("Pid: {}", pid.as_i32().unwrap_or(0));
    let bus = slave_call(tool, &uri, "getBusInfo", vec![tool.name().into()])
        .await
        .unwrap_or(Value::Array(Vec::new()));
    let rows: Vec<Vec<Value>> = bus
        .as_array()
        .unwrap_or(&[])
        .iter()
        .filter_map(|r| r.as_array().map(<[Value]>::to_vec))
        .collect();
    if !rows.is_empty() {
        println!("Connections:");
    }
    for row in rows {
        let text = |i: usize| {
            row.get(i)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        let direction = match text(2).as_str() {
            "o" => "outbound",
            "i" => "inbound",
            _ => "both",
        };
        println!(" * topic: {}", text(4));
        println!("    * to: {}", text(1));
        println!("    * direction: {direction}");
        println!("    * transport: {}", text(3));
        // A udpros link with FEC: what its getBusInfo text says of it.
        if let Some((_, fec)) = text(6).split_once("; FEC") {
            println!("    * FEC{fec}");
        }
    }
    println!();
    Ok(())
}

async fn ping(tool: &Node, args: PingArgs) -> CliResult {
    let (name, uri) = lookup(tool, &args.node).await?;
    println!("rosnode: node is [{name}]");
    println!("pinging {name} with a timeout of 3.0s");
    let mut sent = 0u32;
    loop {
        let start = Instant::now();
        slave_call(tool, &uri, "getPid", vec![tool.name().into()])
            .await
            .map_err(|e| format!("connection to [{name}] timed out or failed: {e}"))?;
        println!(
            "xmlrpc reply from {uri}\ttime={:.6}ms",
            start.elapsed().as_secs_f64() * 1e3
        );
        sent += 1;
        if args.count.is_some_and(|c| sent >= c) {
            return Ok(());
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

async fn kill(tool: &Node, nodes: &[String]) -> CliResult {
    for n in nodes {
        let (name, uri) = lookup(tool, n).await?;
        println!("killing {name}");
        slave_call(
            tool,
            &uri,
            "shutdown",
            vec![
                tool.name().into(),
                format!("user request by {}", tool.name()).into(),
            ],
        )
        .await
        .map_err(|e| format!("ERROR: could not kill {name}: {e}"))?;
    }
    println!("killed");
    Ok(())
}

async fn cleanup(tool: &Node, yes: bool) -> CliResult {
    let master = tool.master();
    let mut dead = Vec::new();
    for name in node_names(tool).await? {
        let uri = master.lookup_node(&name).await.unwrap_or_default();
        if slave_call(tool, &uri, "getPid", vec![tool.name().into()])
            .await
            .is_err()
        {
            dead.push((name, uri));
        }
    }
    if dead.is_empty() {
        println!("All nodes answer: nothing to clean up.");
        return Ok(());
    }
    println!("Unable to contact the following nodes:");
    for (name, _) in &dead {
        println!(" * {name}");
    }
    if !yes {
        print!("Cleanup will purge all information about these nodes from the master.\nPlease type y or n to continue: ");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if answer.trim() != "y" {
            return Ok(());
        }
    }
    let state = master.get_system_state().await.map_err(|e| e.to_string())?;
    for (name, uri) in &dead {
        let as_node = udpros::api::MasterClient::new(master.uri(), name, master.xmlrpc().clone());
        for (topic, nodes) in &state.publishers {
            if nodes.contains(name) {
                let _ = as_node.unregister_publisher(topic, uri).await;
            }
        }
        for (topic, nodes) in &state.subscribers {
            if nodes.contains(name) {
                let _ = as_node.unregister_subscriber(topic, uri).await;
            }
        }
        for (service, nodes) in &state.services {
            if nodes.contains(name) {
                if let Ok(service_uri) = master.lookup_service(service).await {
                    let _ = as_node.unregister_service(service, &service_uri).await;
                }
            }
        }
    }
    Ok(())
}
