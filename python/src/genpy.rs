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
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};
use std::collections::HashMap;
use std::sync::Arc;
use udpros::codegen::spec::{FieldType, Primitive, Shape};
use udpros::msg::dynamic::{Cursor, DynamicType, Value};

/// How deep nested message classes go before a class is declined (the decoder bounds the
/// values the same way).
const MAX_DEPTH: usize = 64;

pyo3::create_exception!(
    _udpros,
    UndecodableMessage,
    PyValueError,
    "Bytes that claim more values than they could hold (an array of empty messages \
     with a count in the billions): refused, where genpy's `deserialize` would spend \
     that count's time and memory building them."
);

/// Builds messages of one genpy class from their bytes (see the module's documentation).
///
/// It reads the bytes straight into Python objects as it walks the class's plan: no
/// value tree in between (S3, 100 kB `CompressedImage`s at 100 Hz: the tree's
/// allocations, field names and drop were about 10 µs of a Python subscriber's CPU per
/// message).
#[pyclass(module = "udpros._udpros", frozen)]
pub(crate) struct GenpyDecoder {
    root: Arc<MessagePlan>,
    secs: Py<PyString>,
    nsecs: Py<PyString>,
}

/// How to build one message class's instance.
struct MessagePlan {
    /// Makes the class's instances empty: the fields are all set after, so the defaults
    /// `__init__` would make are not made.
    alloc: Allocator,
    fields: Vec<FieldPlan>,
    /// Whether a message of the class can take no bytes (`std_msgs/Empty`): an array of
    /// them can claim more elements than the bytes left.
    may_be_empty: bool,
}

struct FieldPlan {
    name: Py<PyString>,
    element: Element,
    shape: Shape,
    collection: Collection,
}

/// What one value of a field is read as.
enum Element {
    /// A `bool`, number or `string`: as Python has it.
    Plain(Primitive),
    /// `genpy.Time` or `genpy.Duration`.
    Stamp(StampPlan),
    Message(Arc<MessagePlan>),
}

/// How to make a `genpy.Time` or `genpy.Duration`: its class's allocator, looked up
/// once (a `Header` per message, a time per `JointState`'s point).
struct StampPlan {
    alloc: Allocator,
    /// `Time` or `Duration`: how its bytes read.
    primitive: Primitive,
}

impl Element {
    fn may_be_empty(&self) -> bool {
        matches!(self, Element::Message(plan) if plan.may_be_empty)
    }
}

impl StampPlan {
    fn of(genpy: &Bound<'_, PyModule>, name: &str, primitive: Primitive) -> PyResult<StampPlan> {
        let class = genpy.getattr(name)?.cast_into::<PyType>()?;
        Ok(StampPlan {
            alloc: Allocator::of(&class)?,
            primitive,
        })
    }
}

/// How an empty instance of a class is made: its allocator, called as `object.__new__`
/// calls it. Declined for a class whose `__new__` is not `object.__new__` (genpy's
/// messages and times take it), whose instances `cls.__new__(cls)` would make otherwise.
/// (Called through Python, with its argument handling, `__new__` cost a subscriber woken
/// for a message about a microsecond per object, three per `Header`ed message.)
struct Allocator {
    class: Py<PyType>,
    alloc: AllocFunc,
}

/// CPython's `allocfunc`, the type of a `tp_alloc` slot.
type AllocFunc =
    unsafe extern "C" fn(*mut ffi::PyTypeObject, ffi::Py_ssize_t) -> *mut ffi::PyObject;

impl Allocator {
    fn of(class: &Bound<'_, PyType>) -> PyResult<Allocator> {
        let object_new = class.py().get_type::<PyAny>().getattr("__new__")?;
        // SAFETY: a live type object; its flags, and for a heap type (every class a
        // `class` statement makes) its `tp_alloc` slot, which the limited API gives for
        // heap types.
        let slot = unsafe {
            let ty = class.as_type_ptr();
            let flags = ffi::PyType_GetFlags(ty);
            let heap = flags & ffi::Py_TPFLAGS_HEAPTYPE != 0;
            let abstract_ = flags & ffi::Py_TPFLAGS_IS_ABSTRACT != 0;
            match heap && !abstract_ {
                true => ffi::PyType_GetSlot(ty, ffi::Py_tp_alloc),
                false => std::ptr::null_mut(),
            }
        };
        if slot.is_null() || !class.getattr("__new__")?.is(&object_new) {
            return Err(decline(format!(
                "{} is not made by object.__new__",
                class.name()?
            )));
        }
        Ok(Allocator {
            class: class.clone().unbind(),
            // SAFETY: a `tp_alloc` slot holds an `allocfunc`.
            alloc: unsafe { std::mem::transmute::<*mut std::ffi::c_void, AllocFunc>(slot) },
        })
    }

    /// An empty instance of the class.
    fn make<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: the class's own allocator (`Allocator::of`), which returns a new
        // reference, or null with an exception set.
        unsafe {
            Bound::from_owned_ptr_or_err(py, (self.alloc)(self.class.bind(py).as_type_ptr(), 0))
        }
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

/// Why bytes were not built into a message.
enum Unbuilt {
    /// genpy must decide (see the module's documentation).
    Declined,
    /// More values than the bytes could hold: refused outright.
    TooManyValues,
    /// Python raised while the objects were made.
    Python(PyErr),
}

impl From<PyErr> for Unbuilt {
    fn from(error: PyErr) -> Unbuilt {
        Unbuilt::Python(error)
    }
}

/// One message's bytes as they are read into Python objects.
struct Reader<'a, 'py> {
    py: Python<'py>,
    cursor: Cursor<'a>,
    secs: &'a Bound<'py, PyString>,
    nsecs: &'a Bound<'py, PyString>,
}

impl<'a, 'py> Reader<'a, 'py> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Unbuilt> {
        self.cursor.take(n).ok_or(Unbuilt::Declined)
    }

    fn spend(&mut self, values: usize) -> Result<(), Unbuilt> {
        match self.cursor.spend(values) {
            true => Ok(()),
            false => Err(Unbuilt::TooManyValues),
        }
    }

    /// A `u32` count of elements; genpy reads past no end, and neither does this.
    fn count(&mut self) -> Result<usize, Unbuilt> {
        self.cursor.count().ok_or(Unbuilt::Declined)
    }

    /// A message of `plan`'s class; `canonical`: its own `time` and `duration` fields
    /// canonicalized as genpy's `deserialize` does for the top message (nanoseconds of a
    /// second or more, or negative ones, moved into the seconds; not nested ones, nor
    /// arrays).
    fn message(
        &mut self,
        plan: &MessagePlan,
        canonical: bool,
        depth: usize,
    ) -> Result<Bound<'py, PyAny>, Unbuilt> {
        if depth > MAX_DEPTH {
            return Err(Unbuilt::TooManyValues);
        }
        self.spend(1)?;
        let py = self.py;
        let message = plan.alloc.make(py)?;
        for field in &plan.fields {
            let value = match (field.shape, field.collection) {
                (Shape::Scalar, _) => self.element(&field.element, canonical, depth)?,
                (Shape::Vec, collection) => {
                    let n = self.count()?;
                    self.sequence(&field.element, collection, n, depth)?
                }
                (Shape::Array(n), collection) => {
                    self.sequence(&field.element, collection, n, depth)?
                }
            };
            message.setattr(field.name.bind(py), value)?;
        }
        Ok(message)
    }

    fn sequence(
        &mut self,
        element: &Element,
        collection: Collection,
        n: usize,
        depth: usize,
    ) -> Result<Bound<'py, PyAny>, Unbuilt> {
        let py = self.py;
        if collection == Collection::Bytes {
            return Ok(PyBytes::new(py, self.take(n)?).into_any());
        }
        let left = self.cursor.left();
        if n > left && !element.may_be_empty() {
            // Fewer bytes than elements: genpy raises, its way.
            return Err(Unbuilt::Declined);
        }
        self.spend(n)?;
        let mut built = Vec::with_capacity(n.min(left + 1));
        for _ in 0..n {
            built.push(self.element(element, false, depth)?);
        }
        Ok(match collection {
            Collection::Tuple => PyTuple::new(py, built)?.into_any(),
            _ => PyList::new(py, built)?.into_any(),
        })
    }

    fn element(
        &mut self,
        element: &Element,
        canonical: bool,
        depth: usize,
    ) -> Result<Bound<'py, PyAny>, Unbuilt> {
        let py = self.py;
        Ok(match element {
            Element::Message(plan) => return self.message(plan, false, depth + 1),
            Element::Stamp(plan) => {
                let (secs, nsecs) = match self.cursor.fixed(plan.primitive) {
                    Some(Value::Time(t)) => (i64::from(t.sec), i64::from(t.nsec)),
                    Some(Value::Duration(d)) => (i64::from(d.sec), i64::from(d.nsec)),
                    _ => return Err(Unbuilt::Declined),
                };
                const BILLION: i64 = 1_000_000_000;
                let (secs, nsecs) = if canonical {
                    (secs + nsecs.div_euclid(BILLION), nsecs.rem_euclid(BILLION))
                } else {
                    (secs, nsecs)
                };
                let stamp = plan.alloc.make(py)?;
                stamp.setattr(self.secs, secs)?;
                stamp.setattr(self.nsecs, nsecs)?;
                stamp
            }
            Element::Plain(Primitive::String) => {
                let n = self.count()?;
                // Text that is no UTF-8 genpy replaces through its own error handler, and
                // logs: it gets such a message.
                let text = std::str::from_utf8(self.take(n)?).map_err(|_| Unbuilt::Declined)?;
                PyString::new(py, text).into_any()
            }
            Element::Plain(primitive) => self.number(*primitive)?,
        })
    }

    /// A `bool` or number, as [`number`] makes it.
    fn number(&mut self, primitive: Primitive) -> Result<Bound<'py, PyAny>, Unbuilt> {
        let value = self.cursor.fixed(primitive).ok_or(Unbuilt::Declined)?;
        number(self.py, &value)?.ok_or(Unbuilt::Declined)
    }
}

impl GenpyDecoder {
    /// `data` built as the class's message; `None` where genpy must decide (see the
    /// module's documentation); `UndecodableMessage` for bytes that claim more values
    /// than they could hold.
    pub(crate) fn build<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut reader = Reader {
            py,
            cursor: Cursor::new(data),
            secs: self.secs.bind(py),
            nsecs: self.nsecs.bind(py),
        };
        match reader.message(&self.root, true, 0) {
            // genpy ignores trailing bytes; such a message is its to decide.
            Ok(message) if reader.cursor.left() == 0 => Ok(Some(message)),
            Ok(_) | Err(Unbuilt::Declined) => Ok(None),
            Err(Unbuilt::TooManyValues) => Err(UndecodableMessage::new_err(format!(
                "{} bytes that claim more values than they could hold",
                data.len()
            ))),
            Err(Unbuilt::Python(error)) => Err(error),
        }
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
            root,
            secs: PyString::intern(py, "secs").unbind(),
            nsecs: PyString::intern(py, "nsecs").unbind(),
        })
    }

    /// One message's bytes as the class's instance, or `None` where genpy's
    /// `deserialize` must decide; `UndecodableMessage` for bytes that claim more values
    /// than they could hold.
    fn decode<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.build(py, data)
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
                    Primitive::Time => Element::Stamp(StampPlan::of(&genpy, "Time", *p)?),
                    Primitive::Duration => Element::Stamp(StampPlan::of(&genpy, "Duration", *p)?),
                    primitive => Element::Plain(*primitive),
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
            shape: field.shape,
            collection,
        });
    }
    let may_be_empty = ty.can_be_empty(&FieldType::Message(type_name.to_string()));
    let plan = Arc::new(MessagePlan {
        alloc: Allocator::of(cls)?,
        fields,
        may_be_empty,
    });
    plans.insert(type_name.to_string(), plan.clone());
    Ok(plan)
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
