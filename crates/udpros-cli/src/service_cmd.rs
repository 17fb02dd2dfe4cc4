//! `udpros service`: what `rosservice` does, with its output.

use super::tool_node::tool_node;
use super::CliResult;
use clap::{Args, Subcommand};
use udpros::node::Node;
use udpros::service::{ClientOptions, DynamicService, ServiceError};
use udpros::yaml::Yaml;

#[derive(Subcommand)]
pub enum ServiceCommand {
    /// The services registered with the master.
    List(ListArgs),
    /// A service's node, URI, type and request fields.
    Info { service: String },
    /// A service's type (asked of the server, as rosservice does).
    Type { service: String },
    /// The fields of a service's request.
    Args { service: String },
    /// A service's `rosrpc://` URI.
    Uri { service: String },
    /// The services of a type.
    Find { srv_type: String },
    /// Calls a service and prints the response as YAML.
    Call(CallArgs),
}

#[derive(Args)]
pub struct ListArgs {
    /// Print the node of each service too.
    #[arg(short = 'n', long = "nodes")]
    nodes: bool,
}

#[derive(Args)]
pub struct CallArgs {
    service: String,
    /// The request: one YAML mapping (`'{data: true}'`, `'data: true'`), or one YAML value
    /// per request field, in order (as rosservice takes them).
    args: Vec<String>,
    /// Wait until the service is there before calling.
    #[arg(long)]
    wait: bool,
    /// Print the request before the response.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Seconds the service may take to answer (0: wait as long as it takes). Connecting
    /// and the header exchange have 5 s of their own, and a response that has begun must
    /// keep coming.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    timeout: f64,
}

/// At most this much of a server's error text is printed (a server may send megabytes).
const MAX_ERROR_TEXT: usize = 4096;

/// `text`, cut to [`MAX_ERROR_TEXT`] bytes on a character boundary, saying how much more.
fn shortened(text: &str) -> String {
    if text.len() <= MAX_ERROR_TEXT {
        return text.to_string();
    }
    let mut end = MAX_ERROR_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} more bytes)", &text[..end], text.len() - end)
}

pub fn run(cmd: ServiceCommand) -> CliResult {
    let runtime =
        tokio::runtime::Runtime::new().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let node = tool_node("udpros_service").await?;
        let result = match cmd {
            ServiceCommand::List(args) => list(&node, args.nodes).await,
            ServiceCommand::Info { service } => info(&node, &service).await,
            ServiceCommand::Type { service } => {
                println!("{}", probe_type(&node, &service).await?);
                Ok(())
            }
            ServiceCommand::Args { service } => {
                let srv = service_type(&node, &service).await?;
                println!("{}", request_fields(&srv).join(" "));
                Ok(())
            }
            ServiceCommand::Uri { service } => {
                println!("{}", lookup(&node, &service).await?);
                Ok(())
            }
            ServiceCommand::Find { srv_type } => find(&node, &srv_type).await,
            ServiceCommand::Call(args) => call(&node, args).await,
        };
        node.shutdown().await;
        result
    })
}

/// Registered services with their nodes, sorted by name.
async fn services(node: &Node) -> Result<Vec<(String, Vec<String>)>, String> {
    let state = node
        .master()
        .get_system_state()
        .await
        .map_err(|e| e.to_string())?;
    let mut services = state.services;
    services.sort();
    Ok(services)
}

async fn list(node: &Node, with_nodes: bool) -> CliResult {
    for (service, providers) in services(node).await? {
        match with_nodes {
            true => println!("{service} {}", providers.join(" ")),
            false => println!("{service}"),
        }
    }
    Ok(())
}

async fn lookup(node: &Node, service: &str) -> Result<String, String> {
    let service = node.resolve_name(service);
    node.master()
        .lookup_service(&service)
        .await
        .map_err(|_| format!("service [{service}] is not available"))
}

/// The type a server declares in its reply to a probe.
async fn probe_type(node: &Node, service: &str) -> Result<String, String> {
    let client = node.service_client_raw(service, "*", ClientOptions::default());
    let header = client.probe().await.map_err(|e| match e {
        ServiceError::NotFound(s) => format!("unknown service [{s}]"),
        // A server's error= header may be megabytes long too.
        other => format!(
            "unable to communicate with service [{}]: {}",
            client.service(),
            shortened(&other.to_string())
        ),
    })?;
    header
        .get("type")
        .map(str::to_string)
        .ok_or_else(|| format!("service [{}] did not say its type", client.service()))
}

async fn service_type(node: &Node, service: &str) -> Result<DynamicService, String> {
    let type_name = probe_type(node, service).await?;
    udpros::service::find_type(&type_name).map_err(|e| format!("cannot load {type_name}: {e}"))
}

fn request_fields(srv: &DynamicService) -> Vec<String> {
    field_names(&srv.request)
}

/// The names of a message type's fields, in order.
pub(crate) fn field_names(ty: &udpros::msg::dynamic::DynamicType) -> Vec<String> {
    ty.specs()
        .get(ty.type_name())
        .map(|spec| spec.fields.iter().map(|f| f.name.clone()).collect())
        .unwrap_or_default()
}

async fn info(node: &Node, service: &str) -> CliResult {
    let resolved = node.resolve_name(service);
    let provider = services(node)
        .await?
        .into_iter()
        .find(|(s, _)| *s == resolved)
        .and_then(|(_, nodes)| nodes.into_iter().next())
        .ok_or_else(|| format!("service [{resolved}] is not available"))?;
    println!("Node: {provider}");
    println!("URI: {}", lookup(node, service).await?);
    let srv = service_type(node, service).await?;
    println!("Type: {}", srv.type_name);
    println!("Args: {}", request_fields(&srv).join(" "));
    Ok(())
}

async fn find(node: &Node, srv_type: &str) -> CliResult {
    for (service, _) in services(node).await? {
        if probe_type(node, &service).await.ok().as_deref() == Some(srv_type) {
            println!("{service}");
        }
    }
    Ok(())
}

/// A message's YAML from the command line (a service request, an action goal): one mapping
/// taken whole, or one value per field in order.
/// `what` names the message in errors ("request", "goal").
pub(crate) fn message_yaml(
    what: &str,
    fields: &[String],
    args: &[String],
) -> Result<Option<Yaml>, String> {
    let parse = |text: &str| udpros::yaml::load(text).map_err(|e| format!("{what} YAML: {e}"));
    match args {
        [] => Ok(None),
        [one] => {
            let text = one.trim();
            let value = match text.starts_with('{') {
                true => parse(text)?,
                false => parse(&format!("{{{text}}}")).or_else(|_| parse(text))?,
            };
            match value {
                Yaml::Map(_) | Yaml::Null => Ok(Some(value)),
                single if fields.len() == 1 => {
                    Ok(Some(Yaml::Map(vec![(fields[0].clone(), single)])))
                }
                _ => Err(format!(
                    "the {what} has {} fields ({}); give one YAML mapping or a value for each",
                    fields.len(),
                    fields.join(", ")
                )),
            }
        }
        many if many.len() == fields.len() => {
            let values: Result<Vec<Yaml>, String> = many.iter().map(|a| parse(a)).collect();
            Ok(Some(Yaml::Map(
                fields.iter().cloned().zip(values?).collect(),
            )))
        }
        many => Err(format!(
            "{} arguments for a {what} of {} fields ({})",
            many.len(),
            fields.len(),
            fields.join(", ")
        )),
    }
}

async fn call(node: &Node, args: CallArgs) -> CliResult {
    if args.wait {
        node.wait_for_service(&args.service, std::time::Duration::MAX)
            .await
            .map_err(|e| e.to_string())?;
    }
    let srv = service_type(node, &args.service).await?;
    let yaml = message_yaml("request", &request_fields(&srv), &args.args)?;
    let request = srv
        .request
        .value_from_yaml(yaml.as_ref())
        .map_err(|e| format!("bad request: {e}"))?;
    let body = srv.request.encode(&request).map_err(|e| e.to_string())?;
    let wait = crate::seconds_or_none("--timeout", args.timeout)?;
    let options = ClientOptions::default().with_response_timeout(wait);
    let client = node.service_client_raw(&args.service, &srv.md5sum, options);
    let response = client.call(&body).await.map_err(|e| match e {
        ServiceError::Failed(text) => format!(
            "service [{}] responded with an error: {}",
            client.service(),
            shortened(&text)
        ),
        other => shortened(&other.to_string()),
    })?;
    let value = srv
        .response
        .decode(&response)
        .map_err(|e| format!("cannot decode the response: {e}"))?;
    // The response's bytes are not needed while its YAML is printed.
    drop(response);
    if args.verbose {
        println!("{}", request.to_yaml());
        println!("---");
    }
    println!("{}", value.to_yaml());
    Ok(())
}
