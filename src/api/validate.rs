//! The argument checks of rospy's and rosmaster's `apivalidate`: arity, a string caller_id,
//! then one validator per argument that checks and canonicalises it, each failing with the
//! exact message those implementations send.

use crate::names::resolve;
use crate::xmlrpc::Value;

/// rosmaster's argument validators, by the parameter name they report.
#[derive(Clone, Copy)]
pub(crate) enum Check {
    Any,
    NonEmptyStr(&'static str),
    /// Anything Python finds true (a non-empty list, say).
    NonEmpty(&'static str),
    NotNone,
    IsApi(&'static str),
    /// A resolved name that may not be `/` (topics and services).
    IsResource(&'static str),
    ValidName(&'static str),
    EmptyOrValidName(&'static str),
    ValidTypeName(&'static str),
    /// A non-empty string starting with `/` (rospy's `global_name`).
    GlobalName(&'static str),
    /// A list of URLs with scheme and host (rospy's `is_publishers_list`).
    PublishersList(&'static str),
}

fn invalid(message: String) -> (i32, String) {
    (-1, message)
}

impl Check {
    /// Validates and canonicalises one argument, as the validator of the same name does.
    pub(crate) fn apply(self, value: Value, caller_id: &str) -> Result<Value, (i32, String)> {
        let text = value.as_str().filter(|s| !s.is_empty());
        let valid_name = |name: &str| -> Result<String, (i32, String)> {
            let Some(s) = text else {
                return Err(invalid(format!(
                    "ERROR: parameter [{name}] must be a non-empty string"
                )));
            };
            if s.contains(':') || s.contains(' ') {
                return Err(invalid(format!(
                    "ERROR: parameter [{name}] contains illegal chars"
                )));
            }
            Ok(resolve(s, caller_id))
        };
        Ok(match self {
            Check::Any => value,
            Check::NonEmptyStr(name) => {
                if !value.is_truthy() {
                    return Err(invalid(format!(
                        "ERROR: parameter [{name}] must be specified and non-empty"
                    )));
                }
                if value.as_str().is_none() {
                    return Err(invalid(format!(
                        "ERROR: parameter [{name}] must be a string"
                    )));
                }
                value
            }
            Check::NonEmpty(name) => {
                if !value.is_truthy() {
                    return Err(invalid(format!(
                        "ERROR: parameter [{name}] must be specified and non-empty"
                    )));
                }
                value
            }
            Check::NotNone => value, // XML-RPC without <nil/> cannot carry None
            Check::IsApi(name) => {
                let Some(s) = text else {
                    return Err(invalid(format!(
                        "ERROR: parameter [{name}] is not an XMLRPC URI"
                    )));
                };
                if !s.starts_with("http://") && !s.starts_with("rosrpc://") {
                    return Err(invalid(format!(
                        "ERROR: parameter [{name}] is not an RPC URI"
                    )));
                }
                value
            }
            Check::IsResource(name) => {
                let resolved = valid_name(name)?;
                if value.as_str() == Some("/") {
                    return Err(invalid(format!(
                        "ERROR: parameter [{name}] cannot be the global namespace"
                    )));
                }
                Value::String(resolved)
            }
            Check::ValidName(name) => Value::String(valid_name(name)?),
            Check::EmptyOrValidName(name) => match value.as_str() {
                None => {
                    return Err(invalid(format!(
                        "ERROR: parameter [{name}] must be a string"
                    )))
                }
                Some("") => Value::from(""),
                Some(s) => Value::String(resolve(s, caller_id)),
            },
            Check::GlobalName(name) => {
                let Some(s) = text else {
                    return Err(invalid(format!(
                        "ERROR: parameter [{name}] must be a non-empty string"
                    )));
                };
                if !s.starts_with('/') {
                    return Err(invalid(format!(
                        "ERROR: parameter [{name}] must be a globally referenced name"
                    )));
                }
                value
            }
            Check::PublishersList(name) => {
                let Some(items) = value.as_array() else {
                    return Err(invalid(format!("ERROR: param [{name}] must be a list")));
                };
                for item in items {
                    let Some(url) = item.as_str() else {
                        return Err(invalid(format!(
                            "ERROR: param [{name}] must be a list of strings"
                        )));
                    };
                    let valid = url.split_once("://").is_some_and(|(scheme, rest)| {
                        !scheme.is_empty() && !rest.split('/').next().unwrap_or("").is_empty()
                    });
                    if !valid {
                        return Err(invalid(format!(
                            "ERROR: param [{name}] does not contain valid URLs [{url}]"
                        )));
                    }
                }
                value
            }
            Check::ValidTypeName(name) => {
                if value.as_str() == Some("*") {
                    return Ok(value);
                }
                let Some(s) = text else {
                    return Err(invalid(format!(
                        "ERROR: parameter [{name}] must be a non-empty string"
                    )));
                };
                if s.split('/').count() != 2 {
                    return Err(invalid(format!(
                        "ERROR: parameter [{name}] is not a valid package resource name"
                    )));
                }
                value
            }
        })
    }
}

/// rosmaster's `apivalidate`: arity, a string caller_id, then each validator in order.
pub(crate) fn validate(
    params: Vec<Value>,
    checks: &[Check],
) -> Result<(String, Vec<Value>), (i32, String)> {
    if params.is_empty() {
        return Err((-1, "missing required caller_id parameter".into()));
    }
    if params.len() != checks.len() + 1 {
        return Err((-1, "Error: bad call arity".into()));
    }
    let mut params = params.into_iter();
    let Some(Value::String(caller_id)) = params.next() else {
        return Err((-1, "caller_id must be a string".into()));
    };
    let args = params
        .zip(checks)
        .map(|(v, check)| check.apply(v, &caller_id))
        .collect::<Result<_, _>>()?;
    Ok((caller_id, args))
}
