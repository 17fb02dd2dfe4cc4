//! Parameters (capabilities `parameters` and `parametersSubscribe`): the master's
//! parameter server as the protocol's JSON values. Reads go to the master; updates come
//! from the node's parameter cache, which the master keeps current (`paramUpdate`), so
//! watching a parameter costs the master nothing after the first read.

use crate::client::Client;
use crate::foxglove::client::ClientParameter;
use crate::foxglove::server::{Level, Parameter, ServerMessage};
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use udpros::node::Node;
use udpros::xmlrpc::Value;

/// A parameter value as the protocol carries it: JSON, typed where JSON cannot tell
/// (`float64` for a whole double, `float64_array`, `byte_array` as base64).
pub(crate) fn to_protocol(name: &str, value: &Value) -> Parameter {
    let value_type = match value {
        Value::Double(d) if d.fract() == 0.0 => Some("float64"),
        Value::Base64(_) => Some("byte_array"),
        Value::Array(items)
            if !items.is_empty() && items.iter().all(|v| matches!(v, Value::Double(_))) =>
        {
            Some("float64_array")
        }
        _ => None,
    };
    Parameter {
        name: name.to_string(),
        value: to_json(value),
        value_type: value_type.map(String::from),
    }
}

fn to_json(value: &Value) -> Json {
    match value {
        Value::Int(i) => json!(i),
        Value::Bool(b) => json!(b),
        Value::String(s) | Value::DateTime(s) => json!(s),
        Value::Double(d) => json!(d),
        Value::Base64(bytes) => json!(udpros::xmlrpc::encode_base64(bytes)),
        Value::Array(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Struct(fields) => Json::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        ),
    }
}

/// A client's value as a parameter server value; `None` when it is null (delete).
pub(crate) fn from_protocol(parameter: &ClientParameter) -> Result<Option<Value>, String> {
    let Some(value) = parameter.value.as_ref().filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let typed = match (parameter.value_type.as_deref(), value) {
        (Some("byte_array"), Json::String(text)) => {
            Value::Base64(udpros::xmlrpc::decode_base64(text.as_bytes()))
        }
        (Some("float64"), Json::Number(n)) => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
        (Some("float64_array"), Json::Array(items)) => Value::Array(
            items
                .iter()
                .map(|v| v.as_f64().map(Value::Double).ok_or("not a number"))
                .collect::<Result<_, _>>()?,
        ),
        (Some(other), _) if !matches!(other, "byte_array" | "float64" | "float64_array") => {
            return Err(format!("unknown parameter type {other:?}"));
        }
        (Some(t), _) => return Err(format!("a {t} parameter needs a value of that type")),
        (None, v) => from_json(v, 0)?,
    };
    Ok(Some(typed))
}

/// How deep a client's value may nest (XML-RPC's own limit is 64).
const MAX_DEPTH: usize = 32;

fn from_json(value: &Json, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err("the value nests too deep".into());
    }
    Ok(match value {
        Json::Null => return Err("null inside a value".into()),
        Json::Bool(b) => Value::Bool(*b),
        // ROS's integers are XML-RPC's, 32 bits; a larger one is a double, as rospy sends.
        Json::Number(n) => match n.as_i64().and_then(|i| i32::try_from(i).ok()) {
            Some(i) => Value::Int(i),
            None => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::String(s.clone()),
        Json::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| from_json(v, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Json::Object(fields) => Value::Struct(
            fields
                .iter()
                .map(|(k, v)| Ok((k.clone(), from_json(v, depth + 1)?)))
                .collect::<Result<BTreeMap<_, _>, String>>()?,
        ),
    })
}

/// `getParameters`: the values asked for (every parameter when none is named).
pub(crate) async fn get(node: &Node, client: &Client, names: Vec<String>, id: Option<String>) {
    let master = node.master();
    let names = if names.is_empty() {
        match master.get_param_names().await {
            Ok(all) => all,
            Err(e) => {
                client.status(Level::Error, format!("cannot list the parameters: {e}"));
                return;
            }
        }
    } else {
        names
    };
    let mut parameters = Vec::new();
    for name in names {
        match master.get_param(&name).await {
            Ok(Some(value)) => parameters.push(to_protocol(&name, &value)),
            Ok(None) => {} // not set: left out, as the protocol's servers do
            Err(e) => client.status(Level::Warning, format!("cannot read {name}: {e}")),
        }
    }
    client.say(&ServerMessage::ParameterValues { parameters, id });
}

/// `setParameters`: sets (or deletes, for null) each, then answers with the values as
/// they now stand when the request had an id.
pub(crate) async fn set(
    node: &Node,
    client: &Client,
    parameters: Vec<ClientParameter>,
    id: Option<String>,
) {
    let master = node.master();
    let mut names = Vec::new();
    for parameter in parameters {
        let outcome = match from_protocol(&parameter) {
            Ok(Some(value)) => master.set_param(&parameter.name, value).await,
            Ok(None) => master.delete_param(&parameter.name).await.map(|_| ()),
            Err(e) => {
                client.status(Level::Error, format!("{}: {e}", parameter.name));
                continue;
            }
        };
        match outcome {
            Ok(()) => names.push(parameter.name),
            Err(e) => client.status(Level::Error, format!("cannot set {}: {e}", parameter.name)),
        }
    }
    if id.is_some() {
        get(node, client, names, id).await;
    }
}

/// The update a watcher is sent of `name`: its value, or, when it was deleted, no value
/// (the protocol has no word for a deleted parameter).
pub(crate) fn update(name: &str, value: Option<&Value>) -> ServerMessage {
    let parameter = match value {
        Some(v) => to_protocol(name, v),
        None => Parameter {
            name: name.to_string(),
            value: Json::Null,
            value_type: None,
        },
    };
    ServerMessage::ParameterValues {
        parameters: vec![parameter],
        id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(value: Json, value_type: Option<&str>) -> Result<Option<Value>, String> {
        from_protocol(&ClientParameter {
            name: "/p".into(),
            value: Some(value),
            value_type: value_type.map(String::from),
        })
    }

    #[test]
    fn values_cross_both_ways_with_their_types() {
        let tree = Value::Struct(BTreeMap::from([
            ("gain".into(), Value::Double(2.0)),
            ("n".into(), Value::Int(3)),
            ("name".into(), Value::String("sonar".into())),
            ("on".into(), Value::Bool(true)),
            (
                "list".into(),
                Value::Array(vec![Value::Int(1), Value::Double(0.5)]),
            ),
        ]));
        let p = to_protocol("/ping360", &tree);
        assert_eq!(p.value_type, None);
        let back = set(p.value, None).unwrap().unwrap();
        // A whole double inside a struct comes back as an int: JSON cannot tell, and the
        // protocol types only the top level.
        let Value::Struct(fields) = back else {
            panic!()
        };
        assert_eq!(fields["n"], Value::Int(3));
        assert_eq!(fields["name"], Value::String("sonar".into()));
        assert_eq!(fields["on"], Value::Bool(true));
        // At the top level a whole double keeps its type.
        let whole = to_protocol("/range", &Value::Double(20.0));
        assert_eq!(whole.value_type.as_deref(), Some("float64"));
        assert_eq!(
            set(whole.value, whole.value_type.as_deref()).unwrap(),
            Some(Value::Double(20.0))
        );
        let bytes = to_protocol("/blob", &Value::Base64(vec![0, 1, 254, 255]));
        assert_eq!(bytes.value, json!("AAH+/w=="));
        assert_eq!(
            set(bytes.value, Some("byte_array")).unwrap(),
            Some(Value::Base64(vec![0, 1, 254, 255]))
        );
        let doubles = to_protocol("/d", &Value::Array(vec![Value::Double(1.0)]));
        assert_eq!(doubles.value_type.as_deref(), Some("float64_array"));
    }

    #[test]
    fn numbers_past_32_bits_are_doubles_and_bad_values_are_refused() {
        assert_eq!(set(json!(7), None).unwrap(), Some(Value::Int(7)));
        assert_eq!(
            set(json!(5_000_000_000i64), None).unwrap(),
            Some(Value::Double(5e9))
        );
        assert_eq!(set(Json::Null, None).unwrap(), None, "null deletes");
        assert!(set(json!("x"), Some("float64")).is_err());
        assert!(set(json!(1), Some("complex128")).is_err());
        assert!(set(json!([1, null]), None).is_err());
        let mut deep = json!(1);
        for _ in 0..100 {
            deep = json!([deep]);
        }
        assert!(set(deep, None).is_err(), "nesting is bounded");
    }
}
