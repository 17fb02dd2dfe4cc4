//! `udpros action`: the actions of the graph, and a goal sent to one from the command line
//! with its feedback and result printed (what `axclient.py` does without a window).

use super::service_cmd::{field_names, message_yaml};
use super::tool_node::{tool_node, tool_node_keeping_signals};
use super::CliResult;
use clap::{Args, Subcommand};
use std::collections::BTreeMap;
use udpros::action::{ActionTypes, GoalEvent, RawActionClient, SimpleState};
use udpros::msg::dynamic::DynamicType;
use udpros::node::Node;
use udpros::wire::header::ConnectionHeader;

#[derive(Subcommand)]
pub enum ActionCommand {
    /// Namespaces that look like actions (a status topic beside goal or result topics),
    /// with their action types.
    List,
    /// Sends a goal given as YAML, prints the feedback and the result; exits 0 when the
    /// goal succeeded, 1 otherwise. Ctrl-C cancels the goal; a second Ctrl-C stops waiting.
    Send(SendArgs),
}

#[derive(Args)]
pub struct SendArgs {
    /// The action's namespace (`/fibonacci`).
    namespace: String,
    /// The goal as YAML: one mapping (`'order: 5'`, `'{order: 5}'`), or one value per
    /// goal field in order (as `udpros service call` takes a request); all defaults when
    /// omitted.
    goal: Vec<String>,
    /// Seconds to wait for the server (0: as long as it takes).
    #[arg(
        long,
        default_value_t = 10.0,
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    wait: f64,
    /// Seconds the goal may take before it is cancelled (0: as long as it takes).
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    timeout: f64,
}

pub fn run(cmd: ActionCommand) -> CliResult {
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        // `send` answers Ctrl-C itself: it cancels the goal before the node leaves.
        let node = match cmd {
            ActionCommand::List => tool_node("udpros_action").await?,
            ActionCommand::Send(_) => tool_node_keeping_signals("udpros_action").await?,
        };
        let result = match cmd {
            ActionCommand::List => list(&node).await,
            ActionCommand::Send(args) => send(&node, args).await,
        };
        node.shutdown().await;
        result
    })
}

/// Action namespaces and their action types (`pkg/Name`), from the master's topic types.
async fn actions(node: &Node) -> Result<BTreeMap<String, String>, String> {
    let types: BTreeMap<String, String> = node
        .master()
        .get_topic_types()
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();
    let mut found = BTreeMap::new();
    for (topic, ty) in &types {
        let Some(ns) = topic.strip_suffix("/status") else {
            continue;
        };
        if ty != "actionlib_msgs/GoalStatusArray" {
            continue;
        }
        let action = ["goal", "result", "feedback"].iter().find_map(|part| {
            let ty = types.get(&format!("{ns}/{part}"))?;
            let suffix = match *part {
                "goal" => "ActionGoal",
                "result" => "ActionResult",
                _ => "ActionFeedback",
            };
            ty.strip_suffix(suffix).map(str::to_string)
        });
        if let Some(action) = action {
            found.insert(ns.to_string(), action);
        }
    }
    Ok(found)
}

async fn list(node: &Node) -> CliResult {
    for (ns, action) in actions(node).await? {
        println!("{ns} {action}");
    }
    Ok(())
}

/// A type of the action, from the definitions installed here (`.msg`, or the `.action`
/// file itself).
fn local_type(name: &str) -> Result<DynamicType, String> {
    udpros::msg::find_type(name).map_err(|e| format!("cannot find {name} here: {e}"))
}

/// How long the action server has to say its goal type.
const LEARN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The action's goal and action-goal types: from the definitions installed here, else
/// from the server. A udpros or rospy server's subscription to `<ns>/goal` sends the full
/// definition in its connection header, which a short publication of any type learns (as
/// the view learns a topic's type from its publisher's header).
async fn goal_types(
    node: &Node,
    ns: &str,
    action: &str,
) -> Result<(DynamicType, DynamicType), String> {
    let wanted = format!("{action}ActionGoal");
    let here =
        local_type(&format!("{action}Goal")).and_then(|goal| Ok((goal, local_type(&wanted)?)));
    let not_here = match here {
        Ok(types) => return Ok(types),
        Err(e) => e,
    };
    let options = udpros::node::AdvertiseOptions {
        max_links: 8,
        ..udpros::node::AdvertiseOptions::default()
    };
    let probe = node
        .advertise_raw(&format!("{ns}/goal"), &wanted, "*", "", options)
        .await
        .map_err(|e| format!("{not_here}; cannot ask the server: {e}"))?;
    let deadline = tokio::time::Instant::now() + LEARN_TIMEOUT;
    let (ty, definition) = loop {
        if let Some(learned) = probe.links().into_iter().find_map(|l| l.subscriber_type) {
            break learned;
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "{not_here}, and the action server did not say it (a roscpp server does not send its definition): add its package to ROS_PACKAGE_PATH"
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    drop(probe);
    let action_goal = DynamicType::from_definition(&ty, &definition)
        .map_err(|e| format!("the action server's {ty} does not read: {e}"))?;
    // The goal is the action goal's last field (header, goal_id, goal).
    let goal_name = match action_goal.specs().get(&ty).and_then(|s| s.fields.last()) {
        Some(field) => match &field.ty {
            udpros::codegen::spec::FieldType::Message(name) => name.clone(),
            _ => return Err(format!("the action server's {ty} has no goal field")),
        },
        None => return Err(format!("the action server's {ty} has no fields")),
    };
    let goal = DynamicType::from_specs(&goal_name, action_goal.specs().clone())
        .map_err(|e| format!("the action server's {goal_name} does not read: {e}"))?;
    Ok((goal, action_goal))
}

/// Decodes a result or feedback body with its publisher's definition and prints it as
/// YAML under `label`.
fn print_part(label: &str, header: Option<&ConnectionHeader>, body: &bytes::Bytes) {
    let decoded = header
        .and_then(|h| {
            let ty = h.get("type")?;
            let definition = h.get("message_definition").unwrap_or("");
            let full = if definition.is_empty() {
                udpros::msg::find_type(ty).ok()?
            } else {
                DynamicType::from_definition(ty, definition).ok()?
            };
            // The publisher describes the wrapper; the part is its last field's type.
            let part = full.specs().get(ty)?.fields.last()?.clone();
            let udpros::codegen::spec::FieldType::Message(name) = &part.ty else {
                return None;
            };
            DynamicType::from_specs(name, full.specs().clone()).ok()
        })
        .and_then(|ty| ty.decode(body).ok());
    match decoded {
        Some(value) => {
            println!("{label}:");
            for line in value.to_yaml().lines() {
                println!("  {line}");
            }
        }
        None => println!("{label}: ({} bytes not decoded)", body.len()),
    }
}

async fn send(node: &Node, args: SendArgs) -> CliResult {
    let ns = node.resolve_name(&args.namespace);
    let action = actions(node)
        .await?
        .remove(&ns)
        .ok_or_else(|| format!("no action at {ns} (see `udpros action list`)"))?;
    let (goal_type, action_goal) = goal_types(node, &ns, &action).await?;
    let any = || ("*".to_string(), "*".to_string(), String::new());
    let types = ActionTypes {
        goal: (
            action_goal.type_name().to_string(),
            action_goal.md5sum().to_string(),
            action_goal.definition().map_err(|e| e.to_string())?,
        ),
        result: any(),
        feedback: any(),
    };
    // Every argument is checked before the client joins the graph: a refusal then leaves
    // no half-made links behind (and prints nothing but its one line).
    let wait = crate::seconds_or_none("--wait", args.wait)?;
    let timeout = crate::seconds_or_none("--timeout", args.timeout)?;
    let yaml = message_yaml("goal", &field_names(&goal_type), &args.goal)?;
    let goal = goal_type
        .value_from_yaml_at(yaml.as_ref(), node.now())
        .and_then(|v| goal_type.encode(&v))
        .map_err(|e| format!("the goal does not fit {action}Goal: {e}"))?;
    let client = RawActionClient::new(node, &ns, &types)
        .await
        .map_err(|e| e.to_string())?;
    if !client.wait_for_server(wait).await {
        return Err(format!("the action server of {ns} did not connect"));
    }
    let mut handle = client.send_goal(&goal).map_err(|e| e.to_string())?;
    println!("goal id: {}", handle.goal_id().id);
    let mut state = SimpleState::Pending;
    let deadline = timeout.and_then(|t| tokio::time::Instant::now().checked_add(t));
    let mut cancelled = false;
    loop {
        let expired = async {
            match deadline {
                Some(d) if !cancelled => tokio::time::sleep_until(d).await,
                _ => std::future::pending().await,
            }
        };
        let event = tokio::select! {
            event = handle.next_event() => event,
            _ = tokio::signal::ctrl_c() => {
                if cancelled {
                    // A second Ctrl-C: stop waiting for the server's answer.
                    return Err("interrupted while the goal was being cancelled".into());
                }
                cancelled = true;
                println!("interrupted: cancelling (Ctrl-C again to stop waiting)");
                handle.cancel();
                continue;
            }
            _ = expired => {
                cancelled = true;
                println!("timed out: cancelling");
                handle.cancel();
                continue;
            }
        };
        match event {
            None => break,
            Some(GoalEvent::Feedback(body)) => {
                print_part("feedback", client.last_headers().feedback.as_deref(), &body);
                println!("---");
            }
            Some(GoalEvent::Transition(_)) => {
                let now = handle.simple_state();
                if now != state && !now.is_done() {
                    println!("state: {now}");
                }
                state = now;
            }
        }
    }
    if let Some(body) = handle.result_bytes() {
        print_part("result", client.last_headers().result.as_deref(), &body);
    }
    let end = handle.simple_state();
    let text = handle.goal_status().map(|s| s.text).unwrap_or_default();
    println!("state: {end} {text:?}");
    match end {
        SimpleState::Succeeded => Ok(()),
        _ => Err(format!("the goal ended {end}")),
    }
}
