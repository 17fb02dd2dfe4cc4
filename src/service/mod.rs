//! Services: request/response calls between nodes (ROSRPC), byte-compatible with roscpp's
//! and rospy's.
//!
//! A service type is generated from a `.srv` file like a message type from a `.msg`
//! file: `std_srvs/SetBool` becomes [`crate::msgs::std_srvs::SetBool`], a marker type
//! implementing [`Service`], with the messages `SetBoolRequest` and `SetBoolResponse`.
//!
//! A server is a [`Node::advertise_service`](crate::node::Node::advertise_service) with an async
//! handler; a client is a [`Node::service_client`](crate::node::Node::service_client):
//!
//! ```no_run
//! # async fn demo(node: udpros::node::Node) -> Result<(), Box<dyn std::error::Error>> {
//! use udpros::msgs::std_srvs::{SetBool, SetBoolRequest, SetBoolResponse};
//! let _server = node
//!     .advertise_service::<SetBool, _, _>("~enable", |req: SetBoolRequest| async move {
//!         Ok(SetBoolResponse { success: true, message: format!("enabled: {}", req.data) })
//!     })
//!     .await?;
//! let client = node.service_client::<SetBool>("~enable", Default::default());
//! let answer = client.call(&SetBoolRequest { data: true }).await?;
//! assert!(answer.success);
//! # Ok(()) }
//! ```
//!
//! Services always run over TCP (a connection per call, or one kept for many calls with
//! [`ClientOptions::persistent`]): a call needs its answer, so a transport that may drop
//! a message has nothing to offer it, and no ROS implementation carries services over
//! UDPROS, so a udpros service over UDP would reach no other client.
//!
//! Every node also serves `~get_loggers` and `~set_logger_level`
//! (see [`crate::logging`]), as every roscpp and rospy node does.

mod client;

pub use crate::msg::Service;
pub use crate::node::{RawServiceServer, ServiceServer};
pub use crate::transport::service_endpoint::{ServerOptions, DEFAULT_REQUEST_RATE_FLOOR};
pub use client::{ClientOptions, RawServiceClient, ServiceClient, ServiceError};

use crate::msg::MessageInfo;

/// What is known of a service type without its Rust types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceInfo {
    /// `pkg/Srv`.
    pub type_name: &'static str,
    /// The service md5sum.
    pub md5sum: &'static str,
    /// The `.srv` text.
    pub text: &'static str,
    /// The request message, `pkg/SrvRequest`.
    pub request: MessageInfo,
    /// The response message, `pkg/SrvResponse`.
    pub response: MessageInfo,
}

impl ServiceInfo {
    /// The facts of the service type `S`.
    pub const fn of<S: Service>() -> ServiceInfo {
        ServiceInfo {
            type_name: S::TYPE,
            md5sum: S::MD5SUM,
            text: S::TEXT,
            request: MessageInfo::of::<S::Request>(),
            response: MessageInfo::of::<S::Response>(),
        }
    }
}

/// The service types udpros ships (std_srvs, roscpp's logger services), by name.
pub fn builtin(type_name: &str) -> Option<&'static ServiceInfo> {
    crate::msgs::SERVICES
        .iter()
        .find(|s| s.type_name == type_name)
}

/// A service type known at run time: its request and response as dynamic message types.
#[derive(Debug, Clone)]
pub struct DynamicService {
    /// `pkg/Srv`.
    pub type_name: String,
    /// The service md5sum.
    pub md5sum: String,
    /// The request message type.
    pub request: crate::msg::dynamic::DynamicType,
    /// The response message type.
    pub response: crate::msg::dynamic::DynamicType,
}

/// A run-time description of the service `type_name`: from the services udpros ships,
/// else from the `.srv` files where ROS installs them (`<package>/srv/<Srv>.srv` under
/// `ROS_PACKAGE_PATH`, `CMAKE_PREFIX_PATH` and `/usr/share`).
pub fn find_type(type_name: &str) -> Result<DynamicService, crate::msg::dynamic::DynamicError> {
    crate::codegen::spec::split_type_name(type_name)?;
    let text = match builtin(type_name) {
        Some(info) => info.text.to_string(),
        None => find_srv_text(type_name)?,
    };
    DynamicService::from_text(type_name, &text)
}

impl DynamicService {
    /// The service `type_name` from its `.srv` text; message types it names come from the
    /// messages udpros ships and from where ROS installs messages.
    pub fn from_text(
        type_name: &str,
        text: &str,
    ) -> Result<DynamicService, crate::msg::dynamic::DynamicError> {
        use crate::codegen::{self, spec};
        let srv = spec::SrvSpec::parse(type_name, text)?;
        let mut set = spec::SpecSet::new();
        for m in crate::msgs::MESSAGES {
            set.insert(spec::MsgSpec::parse(m.type_name, m.text)?);
        }
        set.insert_service(srv.clone());
        codegen::resolve_dependencies(&mut set, &codegen::ros_search_paths())?;
        let md5sum = set.service_md5sum(type_name)?;
        Ok(DynamicService {
            type_name: type_name.to_string(),
            md5sum,
            request: crate::msg::dynamic::DynamicType::from_specs(&srv.request.name, set.clone())?,
            response: crate::msg::dynamic::DynamicType::from_specs(&srv.response.name, set)?,
        })
    }
}

fn find_srv_text(type_name: &str) -> Result<String, crate::msg::dynamic::DynamicError> {
    let (package, short) = crate::codegen::spec::split_type_name(type_name)?;
    crate::codegen::ros_search_paths()
        .iter()
        .flat_map(|root| {
            [
                root.join(package).join("srv"),
                root.join(package),
                root.join("srv"),
            ]
        })
        .map(|dir| dir.join(format!("{short}.srv")))
        .find(|file| file.is_file())
        .and_then(|file| std::fs::read_to_string(file).ok())
        .ok_or_else(|| {
            crate::codegen::spec::SpecError(format!(
                "service type {type_name} is not shipped with udpros and no {short}.srv was found on the ROS paths"
            ))
            .into()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::Message;
    use crate::msgs::{roscpp, std_srvs};

    #[test]
    fn shipped_services_have_genmsg_md5sums() {
        // As Debian's generated classes say (`_md5sum` of the service and its halves).
        for (info, srv, req, resp) in [
            (
                ServiceInfo::of::<std_srvs::SetBool>(),
                "09fb03525b03e7ea1fd3992bafd87e16",
                "8b94c1b53db61fb6aed406028ad6332a",
                "937c9679a518e3a18d831e57125ea522",
            ),
            (
                ServiceInfo::of::<std_srvs::Trigger>(),
                "937c9679a518e3a18d831e57125ea522",
                "d41d8cd98f00b204e9800998ecf8427e",
                "937c9679a518e3a18d831e57125ea522",
            ),
            (
                ServiceInfo::of::<std_srvs::Empty>(),
                "d41d8cd98f00b204e9800998ecf8427e",
                "d41d8cd98f00b204e9800998ecf8427e",
                "d41d8cd98f00b204e9800998ecf8427e",
            ),
            (
                ServiceInfo::of::<roscpp::GetLoggers>(),
                "32e97e85527d4678a8f9279894bb64b0",
                "d41d8cd98f00b204e9800998ecf8427e",
                "32e97e85527d4678a8f9279894bb64b0",
            ),
            (
                ServiceInfo::of::<roscpp::SetLoggerLevel>(),
                "51da076440d78ca1684d36c868df61ea",
                "51da076440d78ca1684d36c868df61ea",
                "d41d8cd98f00b204e9800998ecf8427e",
            ),
        ] {
            assert_eq!(
                (info.md5sum, info.request.md5sum, info.response.md5sum),
                (srv, req, resp),
                "{}",
                info.type_name
            );
            assert_eq!(info.request.type_name, format!("{}Request", info.type_name));
        }
        assert_eq!(
            std_srvs::SetBoolResponse::DEFINITION,
            "bool success   # indicate successful run of triggered service\nstring message # informational, e.g. for error messages\n\n"
        );
    }

    #[test]
    fn a_dynamic_service_agrees_with_the_generated_one() {
        let dynamic = find_type("roscpp/GetLoggers").unwrap();
        assert_eq!(dynamic.md5sum, roscpp::GetLoggers::MD5SUM);
        let response = roscpp::GetLoggersResponse {
            loggers: vec![roscpp::Logger {
                name: "udpros".into(),
                level: "info".into(),
            }],
        };
        let bytes = bytes::Bytes::from(crate::wire::to_vec(&response).unwrap());
        let value = dynamic.response.decode(&bytes).unwrap();
        assert_eq!(dynamic.response.encode(&value).unwrap(), bytes);
        assert!(find_type("no_such/Srv").is_err());
        assert!(find_type("not a name").is_err());
    }
}
