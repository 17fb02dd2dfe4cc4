//! One setting's value and its conversions from Rust, XML-RPC and the message arrays.

use super::*;

/// One setting's value: the four types dynamic_reconfigure knows.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// `bool`.
    Bool(bool),
    /// `int` (32 bits on the wire).
    Int(i32),
    /// `double`.
    Double(f64),
    /// `str`.
    Str(String),
}

impl ParamValue {
    /// The type's name in a `ParamDescription`: `bool`, `int`, `double` or `str`.
    pub fn type_name(&self) -> &'static str {
        match self {
            ParamValue::Bool(_) => "bool",
            ParamValue::Int(_) => "int",
            ParamValue::Double(_) => "double",
            ParamValue::Str(_) => "str",
        }
    }

    pub(super) fn same_type(&self, other: &ParamValue) -> bool {
        self.type_name() == other.type_name()
    }

    /// As the parameter server stores it.
    pub fn to_xmlrpc(&self) -> Value {
        match self {
            ParamValue::Bool(b) => Value::Bool(*b),
            ParamValue::Int(i) => Value::Int(*i),
            ParamValue::Double(d) => Value::Double(*d),
            ParamValue::Str(s) => Value::String(s.clone()),
        }
    }

    /// A parameter-server value read as a value of `like`'s type: an int is taken for a
    /// double, as rospy and XmlRpc++ take it; anything else of another type is not.
    pub fn from_xmlrpc(value: &Value, like: &ParamValue) -> Option<ParamValue> {
        Some(match (like, value) {
            (ParamValue::Bool(_), Value::Bool(b)) => ParamValue::Bool(*b),
            (ParamValue::Int(_), Value::Int(i)) => ParamValue::Int(*i),
            (ParamValue::Double(_), Value::Double(d)) => ParamValue::Double(*d),
            (ParamValue::Double(_), Value::Int(i)) => ParamValue::Double(f64::from(*i)),
            (ParamValue::Str(_), Value::String(s)) => ParamValue::Str(s.clone()),
            _ => return None,
        })
    }

    /// Python's `repr`, as the generator writes values into `edit_method`.
    pub(super) fn python_repr(&self) -> String {
        match self {
            ParamValue::Bool(true) => "True".into(),
            ParamValue::Bool(false) => "False".into(),
            ParamValue::Int(i) => i.to_string(),
            ParamValue::Double(d) => float_repr(*d),
            ParamValue::Str(s) => str_repr(s),
        }
    }

    /// `self` within `[min, max]` (numbers and bools; strings are never clamped). NaN stays
    /// NaN, as the reference servers leave it.
    pub(super) fn clamped(self, min: &ParamValue, max: &ParamValue) -> ParamValue {
        match (self, min, max) {
            (ParamValue::Int(v), ParamValue::Int(lo), ParamValue::Int(hi)) => {
                ParamValue::Int(v.min(*hi).max(*lo))
            }
            (ParamValue::Double(v), ParamValue::Double(lo), ParamValue::Double(hi)) => {
                ParamValue::Double(if v > *hi {
                    *hi
                } else if v < *lo {
                    *lo
                } else {
                    v
                })
            }
            (ParamValue::Bool(v), ParamValue::Bool(lo), ParamValue::Bool(hi)) => {
                ParamValue::Bool(v.min(*hi).max(*lo))
            }
            (v, _, _) => v,
        }
    }
}

impl From<bool> for ParamValue {
    fn from(v: bool) -> Self {
        ParamValue::Bool(v)
    }
}

impl From<i32> for ParamValue {
    fn from(v: i32) -> Self {
        ParamValue::Int(v)
    }
}

impl From<f64> for ParamValue {
    fn from(v: f64) -> Self {
        ParamValue::Double(v)
    }
}

impl From<&str> for ParamValue {
    fn from(v: &str) -> Self {
        ParamValue::Str(v.to_string())
    }
}
