//! Messages of genpy classes built in Rust from their bytes, as `deserialize` would build
//! them.
//!
//! Why: genpy's generated `deserialize` is Python, and run once per message after the
//! receiving thread slept (100 kB at 100 Hz) it cost about 100 µs of CPU on the bench's
//! machine, a third of a Python subscriber's whole cost per message, because every
//! bytecode and object it touches has gone cold. Decoding in Rust and setting the fields
//! through the C API touches a fraction of that, and skips the copy of the whole message
//! into a `bytes` that `deserialize` slices again.
//!
//! The objects are those `cls().deserialize(data)` returns: instances of the same classes
//! (nested messages resolved by genpy's own module layout, `pkg.msg.Name`), `genpy.Time`
//! and `genpy.Duration` for times, `bytes` for `uint8` and `char` arrays, tuples for other
//! numeric arrays, lists for the rest (`bool` arrays included), and the top message's own
//! time fields canonicalized as genpy does. Where this cannot promise that, it declines and
//! the caller runs genpy: a class whose layout or md5sum differs from its definition, one
//! whose `deserialize` is not genpy's own (`rospy.numpy_msg`), bytes that are not exactly
//! one message (genpy ignores trailing bytes and truncates strings silently), and strings
//! that are not UTF-8 (genpy replaces them through its own error handler, and logs it).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};
use std::collections::HashMap;
use std::sync::Arc;
use udpros::codegen::spec::{FieldType, Primitive, Shape};
use udpros::msg::dynamic::{DynamicType, Value};

/// How deep nested message classes go before a class is declined (the decoder bounds the
/// values the same way).
const MAX_DEPTH: usize = 64;

/// Builds messages of one genpy class from their bytes (see the module's documentation).
#[pyclass(module = "udpros._udpros", frozen)]
pub(crate) struct GenpyDecoder {
    ty: DynamicType,
    root: Arc<MessagePlan>,
    secs: Py<PyString>,
    nsecs: Py<PyString>,
}

/// How to build one message class's instance.
struct MessagePlan {
    /// The class's `__new__`, called with the class: the fields are all set after it, so
    /// the defaults `__init__` would make are not made.
    new: Py<PyAny>,
    class: Py<PyType>,
    fields: Vec<FieldPlan>,
}

struct FieldPlan {
    name: Py<PyString>,
    element: Element,
    collection: Collection,
}

/// What one value of a field becomes.
enum Element {
    /// A number, `bool`, `str` or, for byte arrays, `bytes`: as the value is.
    Plain,
    /// `genpy.Time` or `genpy.Duration`.
    Stamp(StampPlan),
    Message(Arc<MessagePlan>),
}

/// How to make a `genpy.Time` or `genpy.Duration`: its class and `__new__`, looked up
/// once (a `Header` per message, a time per `JointState`'s point).
struct StampPlan {
    class: Py<PyType>,
    new: Py<PyAny>,
}

impl StampPlan {
    fn of(genpy: &Bound<'_, PyModule>, name: &str) -> PyResult<StampPlan> {
        let class = genpy.getattr(name)?.cast_into::<PyType>()?;
        Ok(StampPlan {
            new: class.getattr("__new__")?.unbind(),
            class: class.unbind(),
        })
    }
}

/// What an array field becomes, as genpy's generated code makes it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Collection {
    Scalar,
    /// `struct.unpack`'s result: numeric arrays other than bytes.
    Tuple,
    /// Appended one by one: strings, times, messages; `bool` arrays (`list(map(bool, ..))`).
    List,
    /// `uint8[]` and `char[]`: a slice of the input.
    Bytes,
}

/// Interned names, looked up once per decoder.
struct Names<'py> {
    secs: Bound<'py, PyString>,
    nsecs: Bound<'py, PyString>,
}

impl GenpyDecoder {
    /// `data` built as the class's message; `None` where genpy must decide (see the
    /// module's documentation).
    pub(crate) fn build<'py>(
        &self,
        py: Python<'py>,
        data: &bytes::Bytes,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Ok(value) = self.ty.decode(data) else {
            return Ok(None);
        };
        let names = Names {
            secs: self.secs.bind(py).clone(),
            nsecs: self.nsecs.bind(py).clone(),
        };
        let Some(message) = build_message(py, &names, &self.root, &value)? else {
            return Ok(None);
        };
        canonicalize_own_times(py, &names, &self.root, &value, &message)?;
        Ok(Some(message))
    }
}

#[pymethods]
impl GenpyDecoder {
    /// A decoder for the genpy class `cls`; `ValueError` when it cannot build that class's
    /// messages as genpy does (then use `cls().deserialize`).
    #[new]
    fn new(cls: &Bound<'_, PyType>) -> PyResult<GenpyDecoder> {
        let type_name: String = cls.getattr("_type")?.extract()?;
        let definition: String = cls.getattr("_full_text")?.extract()?;
        let ty = DynamicType::from_definition(&type_name, &definition)
            .map_err(|e| PyValueError::new_err(format!("{type_name}: {e}")))?;
        let mut plans = HashMap::new();
        let root = plan_for(cls, &ty, &type_name, &mut plans, 0)?;
        let py = cls.py();
        Ok(GenpyDecoder {
            ty,
            root,
            secs: PyString::intern(py, "secs").unbind(),
            nsecs: PyString::intern(py, "nsecs").unbind(),
        })
    }

    /// One message's bytes as the class's instance, or `None` where genpy's
    /// `deserialize` must decide.
    fn decode<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.build(py, &bytes::Bytes::copy_from_slice(data))
    }
}

fn decline(why: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(why.to_string())
}

/// The plan for `cls`, the class of `type_name`, checked against the definition: its
/// md5sum, its fields' names in order, and that its `deserialize` is genpy's generated one.
fn plan_for(
    cls: &Bound<'_, PyType>,
    ty: &DynamicType,
    type_name: &str,
    plans: &mut HashMap<String, Arc<MessagePlan>>,
    depth: usize,
) -> PyResult<Arc<MessagePlan>> {
    if let Some(plan) = plans.get(type_name) {
        return Ok(plan.clone());
    }
    if depth > MAX_DEPTH {
        return Err(decline("messages nested too deep"));
    }
    let py = cls.py();
    let spec = ty
        .specs()
        .get(type_name)
        .ok_or_else(|| decline(format!("{type_name} is not defined")))?;
    let md5 = ty.specs().md5sum(type_name).map_err(decline)?;
    let class_md5: String = cls.getattr("_md5sum")?.extract()?;
    let class_type: String = cls.getattr("_type")?.extract()?;
    if class_md5 != md5 || class_type != type_name {
        return Err(decline(format!(
            "{} is {class_type} {class_md5}, not {type_name} {md5}",
            cls.name()?
        )));
    }
    // genpy's own `deserialize` is defined in the class's body, in its generated module;
    // another one (rospy.numpy_msg's) builds other objects.
    let deserialize = cls.getattr("deserialize")?;
    let module: String = cls.getattr("__module__")?.extract()?;
    let qualname: String = cls.getattr("__qualname__")?.extract()?;
    if deserialize.getattr("__module__")?.extract::<String>()? != module
        || deserialize.getattr("__qualname__")?.extract::<String>()?
            != format!("{qualname}.deserialize")
    {
        return Err(decline(format!(
            "{} has a deserialize of its own",
            cls.name()?
        )));
    }
    let slots: Vec<String> = cls.getattr("__slots__")?.extract()?;
    let names: Vec<&str> = spec.fields.iter().map(|f| f.name.as_str()).collect();
    if slots != names {
        return Err(decline(format!(
            "{}'s slots are not its fields",
            cls.name()?
        )));
    }
    let genpy = py.import("genpy")?;
    let mut fields = Vec::with_capacity(spec.fields.len());
    for field in &spec.fields {
        let (element, collection) = match &field.ty {
            FieldType::Primitive(p) => {
                let element = match p {
                    Primitive::Time => Element::Stamp(StampPlan::of(&genpy, "Time")?),
                    Primitive::Duration => Element::Stamp(StampPlan::of(&genpy, "Duration")?),
                    _ => Element::Plain,
                };
                let collection = match field.shape {
                    Shape::Scalar => Collection::Scalar,
                    _ if p.is_byte_like() => Collection::Bytes,
                    _ if matches!(
                        p,
                        Primitive::Bool | Primitive::String | Primitive::Time | Primitive::Duration
                    ) =>
                    {
                        Collection::List
                    }
                    _ => Collection::Tuple,
                };
                (element, collection)
            }
            FieldType::Message(nested) => {
                let (package, name) = nested
                    .split_once('/')
                    .ok_or_else(|| decline(format!("{nested} has no package")))?;
                let class = py
                    .import(format!("{package}.msg").as_str())?
                    .getattr(name)?
                    .cast_into::<PyType>()?;
                let plan = plan_for(&class, ty, nested, plans, depth + 1)?;
                let collection = match field.shape {
                    Shape::Scalar => Collection::Scalar,
                    _ => Collection::List,
                };
                (Element::Message(plan), collection)
            }
        };
        fields.push(FieldPlan {
            name: PyString::intern(py, &field.name).unbind(),
            element,
            collection,
        });
    }
    let plan = Arc::new(MessagePlan {
        new: cls.getattr("__new__")?.unbind(),
        class: cls.clone().unbind(),
        fields,
    });
    plans.insert(type_name.to_string(), plan.clone());
    Ok(plan)
}

fn build_message<'py>(
    py: Python<'py>,
    names: &Names<'py>,
    plan: &MessagePlan,
    value: &Value,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Value::Message(values) = value else {
        return Ok(None);
    };
    if values.len() != plan.fields.len() {
        return Ok(None);
    }
    let message = plan.new.bind(py).call1((plan.class.bind(py),))?;
    for (field, (_, value)) in plan.fields.iter().zip(values) {
        let Some(built) = build_field(py, names, field, value)? else {
            return Ok(None);
        };
        message.setattr(field.name.bind(py), built)?;
    }
    Ok(Some(message))
}

fn build_field<'py>(
    py: Python<'py>,
    names: &Names<'py>,
    field: &FieldPlan,
    value: &Value,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match (field.collection, value) {
        (Collection::Scalar, value) => build_element(py, names, &field.element, value),
        (Collection::Bytes, Value::Bytes(b) | Value::Chars(b)) => {
            Ok(Some(PyBytes::new(py, b).into_any()))
        }
        (Collection::Tuple | Collection::List, Value::Array(items)) => {
            let mut built = Vec::with_capacity(items.len());
            for item in items {
                let Some(one) = build_element(py, names, &field.element, item)? else {
                    return Ok(None);
                };
                built.push(one);
            }
            Ok(Some(if field.collection == Collection::Tuple {
                PyTuple::new(py, built)?.into_any()
            } else {
                PyList::new(py, built)?.into_any()
            }))
        }
        _ => Ok(None),
    }
}

fn build_element<'py>(
    py: Python<'py>,
    names: &Names<'py>,
    element: &Element,
    value: &Value,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(Some(match (element, value) {
        (Element::Message(plan), value) => return build_message(py, names, plan, value),
        (Element::Stamp(plan), Value::Time(t)) => stamp(py, names, plan, t.sec, t.nsec)?,
        (Element::Stamp(plan), Value::Duration(d)) => stamp(py, names, plan, d.sec, d.nsec)?,
        (Element::Plain, value) => match value {
            // The decoder replaced bytes that are no UTF-8; genpy's handler does that its
            // own way, and logs it: let genpy have such a message.
            Value::String(text) if text.contains(char::REPLACEMENT_CHARACTER) => return Ok(None),
            Value::String(text) => PyString::new(py, text).into_any(),
            value => return number(py, value),
        },
        _ => return Ok(None),
    }))
}

/// A `bool` or number as Python has it (`float32` widened, as `struct` widens it);
/// `None` for any other value.
pub(crate) fn number<'py>(py: Python<'py>, value: &Value) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(Some(match value {
        Value::Bool(b) => pyo3::types::PyBool::new(py, *b).to_owned().into_any(),
        Value::I8(v) => v.into_pyobject(py)?.into_any(),
        Value::I16(v) => v.into_pyobject(py)?.into_any(),
        Value::I32(v) => v.into_pyobject(py)?.into_any(),
        Value::I64(v) => v.into_pyobject(py)?.into_any(),
        Value::U8(v) => v.into_pyobject(py)?.into_any(),
        Value::U16(v) => v.into_pyobject(py)?.into_any(),
        Value::U32(v) => v.into_pyobject(py)?.into_any(),
        Value::U64(v) => v.into_pyobject(py)?.into_any(),
        Value::F32(v) => f64::from(*v).into_pyobject(py)?.into_any(),
        Value::F64(v) => v.into_pyobject(py)?.into_any(),
        _ => return Ok(None),
    }))
}

/// A `genpy.Time` or `genpy.Duration` with its slots set as `deserialize` sets them.
fn stamp<'py>(
    py: Python<'py>,
    names: &Names<'py>,
    plan: &StampPlan,
    secs: impl IntoPyObject<'py>,
    nsecs: impl IntoPyObject<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let stamp = plan.new.bind(py).call1((plan.class.bind(py),))?;
    stamp.setattr(&names.secs, secs)?;
    stamp.setattr(&names.nsecs, nsecs)?;
    Ok(stamp)
}

/// genpy calls `canon()` on the top message's own `time` and `duration` fields (not on
/// nested ones, nor on arrays): nanoseconds of a second or more, or negative ones, move
/// into the seconds. Done here with Python's floor division.
fn canonicalize_own_times<'py>(
    py: Python<'py>,
    names: &Names<'py>,
    plan: &MessagePlan,
    value: &Value,
    message: &Bound<'py, PyAny>,
) -> PyResult<()> {
    const BILLION: i64 = 1_000_000_000;
    let Value::Message(values) = value else {
        return Ok(());
    };
    for (field, (_, value)) in plan.fields.iter().zip(values) {
        if field.collection != Collection::Scalar {
            continue;
        }
        let (secs, nsecs) = match value {
            Value::Time(t) => (i64::from(t.sec), i64::from(t.nsec)),
            Value::Duration(d) => (i64::from(d.sec), i64::from(d.nsec)),
            _ => continue,
        };
        if (0..BILLION).contains(&nsecs) {
            continue;
        }
        let stamp = message.getattr(field.name.bind(py))?;
        stamp.setattr(&names.secs, secs + nsecs.div_euclid(BILLION))?;
        stamp.setattr(&names.nsecs, nsecs.rem_euclid(BILLION))?;
    }
    Ok(())
}
