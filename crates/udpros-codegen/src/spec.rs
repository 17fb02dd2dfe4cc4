//! Message specifications: `.msg` texts parsed into fields, with the md5sum and the full
//! definition text computed exactly as genmsg computes them.
//!
//! The line rules are genmsg's (`msg_loader.py`): `#` starts a comment except in the value
//! of a `string` constant, a line with `=` is a constant, any other line is `TYPE NAME`,
//! a type without a package is of the message's own package (`Header` is
//! `std_msgs/Header`).
//!
//! One file, past 500 lines, on purpose: the line rules, the md5 text and the full definition
//! are one reading of genmsg's grammar, and each depends on the others' details.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Longest fixed-array length accepted in a definition. Definitions arrive from the network
/// (the `message_definition` header field), so sizes that no real message uses are refused
/// before anything is allocated for them.
pub const MAX_FIXED_ARRAY_LEN: usize = 1 << 24;
/// Deepest nesting of message types accepted (also bounds recursion while decoding).
pub const MAX_NESTING: usize = 64;
/// Largest definition text accepted, in bytes.
pub const MAX_DEFINITION_LEN: usize = 4 << 20;

/// The separator genmsg puts between the sections of a full definition.
pub const SECTION_SEPARATOR: &str =
    "================================================================================";

/// Why a message specification could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

fn err<T>(msg: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError(msg.into()))
}

/// The builtin field types of ROS1. `Byte` and `Char` are the deprecated aliases of `int8`
/// and `uint8`: same wire form, but genpy treats `char[]` like `uint8[]` (as bytes), and the
/// md5 text keeps the name as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Primitive {
    /// `bool`: one byte, 0 or 1.
    Bool,
    /// `int8`.
    Int8,
    /// `byte`, the deprecated alias of `int8`.
    Byte,
    /// `int16`.
    Int16,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `uint8`.
    UInt8,
    /// `char`, the deprecated alias of `uint8`.
    Char,
    /// `uint16`.
    UInt16,
    /// `uint32`.
    UInt32,
    /// `uint64`.
    UInt64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `string`: a `u32` length, then the bytes.
    String,
    /// `time`: seconds and nanoseconds, two `u32`.
    Time,
    /// `duration`: seconds and nanoseconds, two `i32`.
    Duration,
}

impl Primitive {
    /// The name as written in a `.msg` file.
    pub fn ros_name(self) -> &'static str {
        match self {
            Primitive::Bool => "bool",
            Primitive::Int8 => "int8",
            Primitive::Byte => "byte",
            Primitive::Int16 => "int16",
            Primitive::Int32 => "int32",
            Primitive::Int64 => "int64",
            Primitive::UInt8 => "uint8",
            Primitive::Char => "char",
            Primitive::UInt16 => "uint16",
            Primitive::UInt32 => "uint32",
            Primitive::UInt64 => "uint64",
            Primitive::Float32 => "float32",
            Primitive::Float64 => "float64",
            Primitive::String => "string",
            Primitive::Time => "time",
            Primitive::Duration => "duration",
        }
    }

    /// Size on the wire, `None` for strings.
    pub fn wire_size(self) -> Option<usize> {
        Some(match self {
            Primitive::Bool
            | Primitive::Int8
            | Primitive::Byte
            | Primitive::UInt8
            | Primitive::Char => 1,
            Primitive::Int16 | Primitive::UInt16 => 2,
            Primitive::Int32 | Primitive::UInt32 | Primitive::Float32 => 4,
            Primitive::Int64
            | Primitive::UInt64
            | Primitive::Float64
            | Primitive::Time
            | Primitive::Duration => 8,
            Primitive::String => return None,
        })
    }

    /// Arrays of these are carried as raw bytes (`uint8[]`, and `char[]` as genpy does).
    pub fn is_byte_like(self) -> bool {
        matches!(self, Primitive::UInt8 | Primitive::Char)
    }

    /// A number of fixed size other than the byte-like ones: its arrays are written and
    /// read as one block (`udpros::wire::numeric_array`).
    pub fn is_fixed_size_number(self) -> bool {
        matches!(
            self,
            Primitive::Int8
                | Primitive::Byte
                | Primitive::Int16
                | Primitive::Int32
                | Primitive::Int64
                | Primitive::UInt16
                | Primitive::UInt32
                | Primitive::UInt64
                | Primitive::Float32
                | Primitive::Float64
        )
    }

    /// The builtin type named `name` as written in a `.msg` file.
    pub fn from_ros_name(name: &str) -> Option<Primitive> {
        Some(match name {
            "bool" => Primitive::Bool,
            "int8" => Primitive::Int8,
            "byte" => Primitive::Byte,
            "int16" => Primitive::Int16,
            "int32" => Primitive::Int32,
            "int64" => Primitive::Int64,
            "uint8" => Primitive::UInt8,
            "char" => Primitive::Char,
            "uint16" => Primitive::UInt16,
            "uint32" => Primitive::UInt32,
            "uint64" => Primitive::UInt64,
            "float32" => Primitive::Float32,
            "float64" => Primitive::Float64,
            "string" => Primitive::String,
            "time" => Primitive::Time,
            "duration" => Primitive::Duration,
            _ => return None,
        })
    }
}

/// What a field holds, before its array shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// A builtin type.
    Primitive(Primitive),
    /// Another message, by full name (`pkg/Type`).
    Message(String),
}

/// Scalar, variable-length array (`T[]`) or fixed-length array (`T[N]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// One value.
    Scalar,
    /// `T[]`: a `u32` count, then the elements.
    Vec,
    /// `T[N]`: exactly `N` elements, no count.
    Array(usize),
}

/// A field of a message: `TYPE NAME` in the `.msg` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field's name as written.
    pub name: String,
    /// What it holds.
    pub ty: FieldType,
    /// Scalar or array.
    pub shape: Shape,
}

/// A constant of a message: `TYPE NAME=VALUE` in the `.msg` text.
#[derive(Debug, Clone, PartialEq)]
pub struct Constant {
    /// The constant's name as written.
    pub name: String,
    /// Its type (constants are builtin types).
    pub ty: Primitive,
    /// The value as written (trimmed), as genmsg keeps it for the md5 text.
    pub text: String,
}

/// One message type: its raw text and what was parsed out of it.
#[derive(Debug, Clone)]
pub struct MsgSpec {
    /// `pkg/Type`.
    pub name: String,
    /// The `.msg` text exactly as written; it decides the md5 and the full definition.
    pub text: String,
    /// Its fields, in order.
    pub fields: Vec<Field>,
    /// Its constants, in order.
    pub constants: Vec<Constant>,
}

impl MsgSpec {
    /// Parses `text` as the message `full_name` (`pkg/Type`).
    pub fn parse(full_name: &str, text: &str) -> Result<MsgSpec, SpecError> {
        let (package, _) = split_type_name(full_name)?;
        if text.len() > MAX_DEFINITION_LEN {
            return err(format!("definition of {full_name} is too large"));
        }
        let mut fields = Vec::new();
        let mut constants = Vec::new();
        for line in text.lines() {
            let code = strip_comment(line);
            if code.is_empty() {
                continue;
            }
            if code.contains('=') {
                constants.push(parse_constant(full_name, line, code)?);
            } else {
                fields.push(parse_field(full_name, package, code)?);
            }
        }
        Ok(MsgSpec {
            name: full_name.to_string(),
            text: text.to_string(),
            fields,
            constants,
        })
    }

    /// The package (`pkg` of `pkg/Type`).
    pub fn package(&self) -> &str {
        self.name.split('/').next().unwrap_or("")
    }

    /// The type's own name (`Type` of `pkg/Type`).
    pub fn short_name(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or("")
    }

    /// Message types this one names directly, in field order, without repeats.
    pub fn direct_dependencies(&self) -> Vec<&str> {
        let mut deps: Vec<&str> = Vec::new();
        for f in &self.fields {
            if let FieldType::Message(m) = &f.ty {
                if !deps.contains(&m.as_str()) {
                    deps.push(m);
                }
            }
        }
        deps
    }

    /// True when the first field is `std_msgs/Header header`, as ROS tools expect of
    /// stamped messages.
    pub fn has_header(&self) -> bool {
        self.fields.first().is_some_and(|f| {
            f.name == "header"
                && f.shape == Shape::Scalar
                && f.ty == FieldType::Message("std_msgs/Header".into())
        })
    }
}

/// One service type: a `.srv` text split into its request and response messages.
#[derive(Debug, Clone)]
pub struct SrvSpec {
    /// `pkg/Srv`.
    pub name: String,
    /// The `.srv` text exactly as written.
    pub text: String,
    /// The request half, as the message `pkg/SrvRequest`.
    pub request: MsgSpec,
    /// The response half, as the message `pkg/SrvResponse`.
    pub response: MsgSpec,
}

impl SrvSpec {
    /// Parses `text` as the service `full_name` (`pkg/Srv`). As genmsg does, every line
    /// that starts with `---` switches to the response half and is itself dropped (with
    /// anything after the dashes); each half is then an ordinary message text.
    pub fn parse(full_name: &str, text: &str) -> Result<SrvSpec, SpecError> {
        split_type_name(full_name)?;
        if text.len() > MAX_DEFINITION_LEN {
            return err(format!("definition of {full_name} is too large"));
        }
        let (mut request, mut response) = (String::new(), String::new());
        let mut half = &mut request;
        for line in text.split('\n') {
            if line.starts_with("---") {
                half = &mut response;
            } else {
                half.push_str(line);
                half.push('\n');
            }
        }
        Ok(SrvSpec {
            name: full_name.to_string(),
            text: text.to_string(),
            request: MsgSpec::parse(&format!("{full_name}Request"), &request)?,
            response: MsgSpec::parse(&format!("{full_name}Response"), &response)?,
        })
    }

    /// The package (`pkg` of `pkg/Srv`).
    pub fn package(&self) -> &str {
        self.name.split('/').next().unwrap_or("")
    }

    /// The service's own name (`Srv` of `pkg/Srv`).
    pub fn short_name(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or("")
    }
}

/// Splits `pkg/Type` and checks both parts.
pub fn split_type_name(full_name: &str) -> Result<(&str, &str), SpecError> {
    let mut parts = full_name.split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(p), Some(t), None) if is_valid_package(p) && is_valid_identifier(t) => Ok((p, t)),
        _ => err(format!(
            "invalid message type name '{full_name}' (expected package/Type)"
        )),
    }
}

fn is_valid_package(p: &str) -> bool {
    let b = p.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
        && !p.contains("__")
}

fn is_valid_identifier(t: &str) -> bool {
    let b = t.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphabetic()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// A line without its comment, trimmed.
fn strip_comment(line: &str) -> &str {
    line.split('#').next().unwrap_or("").trim()
}

/// `TYPE NAME=VALUE`. A `string` constant's value is everything after the first `=` of
/// the whole line, `#` included; other values end at a comment.
fn parse_constant(full_name: &str, line: &str, code: &str) -> Result<Constant, SpecError> {
    let bad = |why: &str| err(format!("{full_name}: constant '{}' {why}", line.trim()));
    let Some((ty, rest)) = code.split_once(char::is_whitespace) else {
        return bad("has no name");
    };
    let Some(ty) = Primitive::from_ros_name(ty) else {
        return bad("is not of a builtin type");
    };
    if matches!(ty, Primitive::Time | Primitive::Duration) {
        return bad("has a time type, which constants cannot have");
    }
    let (name, value) = if ty == Primitive::String {
        let after_type = line.trim_start()["string".len()..].trim_start();
        let (name, value) = after_type.split_once('=').unwrap_or((after_type, ""));
        (name.trim(), value)
    } else {
        let (name, value) = rest.split_once('=').unwrap_or((rest, ""));
        (name.trim(), value)
    };
    if !is_valid_identifier(name) {
        return bad("has an invalid name");
    }
    let text = value.trim();
    if ty != Primitive::String && !constant_value_fits(ty, text) {
        return bad("has a value its type cannot hold");
    }
    Ok(Constant {
        name: name.to_string(),
        ty,
        text: text.to_string(),
    })
}

/// Whether `text` is one value of the numeric or bool type `ty`, as genmsg converts it.
fn constant_value_fits(ty: Primitive, text: &str) -> bool {
    let int = |lo: i128, hi: i128| text.parse::<i128>().is_ok_and(|v| (lo..=hi).contains(&v));
    match ty {
        Primitive::Bool => {
            !text.is_empty() && !text.contains(char::is_whitespace) && !text.contains('=')
        }
        Primitive::Int8 | Primitive::Byte => int(i8::MIN.into(), i8::MAX.into()),
        Primitive::UInt8 | Primitive::Char => int(0, u8::MAX.into()),
        Primitive::Int16 => int(i16::MIN.into(), i16::MAX.into()),
        Primitive::UInt16 => int(0, u16::MAX.into()),
        Primitive::Int32 => int(i32::MIN.into(), i32::MAX.into()),
        Primitive::UInt32 => int(0, u32::MAX.into()),
        Primitive::Int64 => int(i64::MIN.into(), i64::MAX.into()),
        Primitive::UInt64 => int(0, u64::MAX.into()),
        Primitive::Float32 | Primitive::Float64 => text.parse::<f64>().is_ok(),
        Primitive::String | Primitive::Time | Primitive::Duration => false,
    }
}

/// `TYPE NAME`, where `TYPE` is `base`, `base[]` or `base[N]`.
fn parse_field(full_name: &str, package: &str, code: &str) -> Result<Field, SpecError> {
    let bad = |why: String| err(format!("{full_name}: field '{code}' {why}"));
    let words: Vec<&str> = code.split_whitespace().collect();
    let [ty, name] = words[..] else {
        return bad("is not 'TYPE NAME'".into());
    };
    if !is_valid_identifier(name) {
        return bad("has an invalid name".into());
    }
    let (base, shape) = match ty.split_once('[') {
        None => (ty, Shape::Scalar),
        Some((base, size)) => {
            let Some(size) = size.strip_suffix(']') else {
                return bad("has an unclosed array size".into());
            };
            if size.is_empty() {
                (base, Shape::Vec)
            } else {
                match size.parse::<usize>() {
                    Ok(n)
                        if n <= MAX_FIXED_ARRAY_LEN && size.bytes().all(|b| b.is_ascii_digit()) =>
                    {
                        (base, Shape::Array(n))
                    }
                    _ => return bad(format!("has array size [{size}], which is out of range")),
                }
            }
        }
    };
    let ty = if let Some(p) = Primitive::from_ros_name(base) {
        FieldType::Primitive(p)
    } else if base == "Header" {
        FieldType::Message("std_msgs/Header".into())
    } else if let Some((pkg, short)) = base.split_once('/') {
        if !is_valid_package(pkg) || !is_valid_identifier(short) {
            return bad(format!("has an invalid type '{base}'"));
        }
        FieldType::Message(base.to_string())
    } else if is_valid_identifier(base) {
        FieldType::Message(format!("{package}/{base}"))
    } else {
        return bad(format!("has an invalid type '{base}'"));
    };
    Ok(Field {
        name: name.to_string(),
        ty,
        shape,
    })
}

/// A closed set of message specifications: every dependency of every member is a member.
#[derive(Debug, Clone, Default)]
pub struct SpecSet {
    specs: BTreeMap<String, MsgSpec>,
    services: BTreeMap<String, SrvSpec>,
    /// Actions (`pkg/Name`) whose seven messages the set holds.
    pub(crate) actions: std::collections::BTreeSet<String>,
}

impl SpecSet {
    /// An empty set.
    pub fn new() -> SpecSet {
        SpecSet::default()
    }

    /// Adds (or replaces) one message.
    pub fn insert(&mut self, spec: MsgSpec) {
        self.specs.insert(spec.name.clone(), spec);
    }

    /// The message `name` (`pkg/Type`), if the set has it.
    pub fn get(&self, name: &str) -> Option<&MsgSpec> {
        self.specs.get(name)
    }

    /// Whether the set has the message `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.specs.contains_key(name)
    }

    /// Every message of the set.
    pub fn iter(&self) -> impl Iterator<Item = &MsgSpec> {
        self.specs.values()
    }

    /// Adds (or replaces) one service, and its request and response as messages.
    pub fn insert_service(&mut self, srv: SrvSpec) {
        self.insert(srv.request.clone());
        self.insert(srv.response.clone());
        self.services.insert(srv.name.clone(), srv);
    }

    /// The service `name` (`pkg/Srv`), if the set has it.
    pub fn service(&self, name: &str) -> Option<&SrvSpec> {
        self.services.get(name)
    }

    /// Every service of the set.
    pub fn services(&self) -> impl Iterator<Item = &SrvSpec> {
        self.services.values()
    }

    /// The service md5sum of `name`: the md5 of the request's md5 text immediately
    /// followed by the response's, as genmsg computes it (it is neither half's md5sum).
    pub fn service_md5sum(&self, name: &str) -> Result<String, SpecError> {
        let srv = self
            .services
            .get(name)
            .ok_or_else(|| SpecError(format!("service type {name} is not known")))?;
        let request = self.md5_text(&srv.request.name)?;
        let response = self.md5_text(&srv.response.name)?;
        Ok(md5_hex(format!("{request}{response}").as_bytes()))
    }

    fn require(&self, name: &str) -> Result<&MsgSpec, SpecError> {
        self.specs
            .get(name)
            .ok_or_else(|| SpecError(format!("message type {name} is not known")))
    }

    /// Builds the set a subscriber learns from a connection header: the `message_definition`
    /// field is the main type's text, then for each dependency a line of 80 `=`, a line
    /// `MSG: pkg/Type` and that type's text.
    pub fn from_full_definition(type_name: &str, full_text: &str) -> Result<SpecSet, SpecError> {
        if full_text.len() > MAX_DEFINITION_LEN {
            return err("message definition is too large");
        }
        let mut set = SpecSet::new();
        let mut sections = full_text.split(SECTION_SEPARATOR);
        let main = sections.next().unwrap_or("");
        set.insert(MsgSpec::parse(type_name, main)?);
        for section in sections {
            let section = section.strip_prefix('\n').unwrap_or(section);
            let (first, rest) = section.split_once('\n').unwrap_or((section, ""));
            let Some(name) = first.trim().strip_prefix("MSG:") else {
                return err("message definition section without a 'MSG: pkg/Type' line");
            };
            let name = name.trim();
            if !set.contains(name) {
                set.insert(MsgSpec::parse(name, rest)?);
            }
        }
        set.check_closed(type_name)?;
        Ok(set)
    }

    /// Checks that `name` and everything it depends on is present, with no cycle and no
    /// nesting deeper than [`MAX_NESTING`].
    pub fn check_closed(&self, name: &str) -> Result<(), SpecError> {
        fn walk<'a>(
            set: &'a SpecSet,
            name: &'a str,
            stack: &mut Vec<&'a str>,
        ) -> Result<(), SpecError> {
            if stack.contains(&name) {
                return err(format!("message type {name} contains itself"));
            }
            if stack.len() >= MAX_NESTING {
                return err(format!(
                    "message types nest deeper than {MAX_NESTING} levels"
                ));
            }
            let spec = set.require(name)?;
            stack.push(name);
            for dep in spec.direct_dependencies() {
                walk(set, dep, stack)?;
            }
            stack.pop();
            Ok(())
        }
        walk(self, name, &mut Vec::new())
    }

    /// Every message `name` depends on, directly or not, in genmsg's order: each direct
    /// dependency followed by its own, depth first, each type once.
    pub fn all_dependencies(&self, name: &str) -> Result<Vec<String>, SpecError> {
        self.check_closed(name)?;
        let mut out: Vec<String> = Vec::new();
        fn walk(set: &SpecSet, name: &str, out: &mut Vec<String>) {
            if let Some(spec) = set.specs.get(name) {
                for dep in spec.direct_dependencies() {
                    if !out.iter().any(|d| d == dep) {
                        out.push(dep.to_string());
                    }
                    walk(set, dep, out);
                }
            }
        }
        walk(self, name, &mut out);
        Ok(out)
    }

    /// The full definition text, as genmsg writes it into `_full_text` and roscpp and rospy
    /// send in the `message_definition` connection-header field.
    pub fn full_text(&self, name: &str) -> Result<String, SpecError> {
        let spec = self.require(name)?;
        let mut out = String::with_capacity(spec.text.len() + 1);
        out.push_str(&spec.text);
        out.push('\n');
        for dep in self.all_dependencies(name)? {
            out.push_str(SECTION_SEPARATOR);
            out.push('\n');
            out.push_str("MSG: ");
            out.push_str(&dep);
            out.push('\n');
            out.push_str(&self.require(&dep)?.text);
            out.push('\n');
        }
        out.pop(); // genmsg drops the last newline it added
        Ok(out)
    }

    /// The md5sum of `name`: the md5 of genmsg's md5 text, in which every nested message
    /// type is replaced by its own md5sum.
    pub fn md5sum(&self, name: &str) -> Result<String, SpecError> {
        self.check_closed(name)?;
        let mut memo = HashMap::new();
        self.md5_memo(name, &mut memo)
    }

    /// The text whose md5 is the md5sum (useful when a sum disagrees with a peer's).
    pub fn md5_text(&self, name: &str) -> Result<String, SpecError> {
        self.check_closed(name)?;
        let mut memo = HashMap::new();
        let spec = self.require(name)?;
        self.md5_text_memo(spec, &mut memo)
    }

    fn md5_memo(
        &self,
        name: &str,
        memo: &mut HashMap<String, String>,
    ) -> Result<String, SpecError> {
        if let Some(sum) = memo.get(name) {
            return Ok(sum.clone());
        }
        let spec = self.require(name)?;
        let text = self.md5_text_memo(spec, memo)?;
        let sum = md5_hex(text.as_bytes());
        memo.insert(name.to_string(), sum.clone());
        Ok(sum)
    }

    fn md5_text_memo(
        &self,
        spec: &MsgSpec,
        memo: &mut HashMap<String, String>,
    ) -> Result<String, SpecError> {
        // genmsg's md5 text: constants as `TYPE NAME=VALUE`, then fields as written, with
        // a nested message type (and its array suffix) replaced by that type's md5sum.
        let mut text = String::new();
        for c in &spec.constants {
            text.push_str(&format!("{} {}={}\n", c.ty.ros_name(), c.name, c.text));
        }
        for f in &spec.fields {
            match &f.ty {
                FieldType::Primitive(p) => {
                    let suffix = match f.shape {
                        Shape::Scalar => String::new(),
                        Shape::Vec => "[]".to_string(),
                        Shape::Array(n) => format!("[{n}]"),
                    };
                    text.push_str(&format!("{}{suffix} {}\n", p.ros_name(), f.name));
                }
                FieldType::Message(m) => {
                    text.push_str(&format!("{} {}\n", self.md5_memo(m, memo)?, f.name));
                }
            }
        }
        Ok(text.trim().to_string())
    }

    /// Loads every `.msg` file of a tree laid out as `root/<package>/<Type>.msg` or
    /// `root/<package>/msg/<Type>.msg`. Returns how many files were read.
    pub fn load_tree(&mut self, root: &std::path::Path) -> Result<usize, SpecError> {
        let mut count = 0;
        for (package, dir) in package_dirs(root) {
            count += self.load_package_dir(&package, &dir)?;
        }
        Ok(count)
    }

    /// Loads the `.msg`, `.srv` and `.action` files of `dir` as messages, services and
    /// actions of `package`; when `dir` is a package's `msg`, `srv` or `action` folder, the
    /// other two beside it too.
    pub fn load_package_dir(
        &mut self,
        package: &str,
        dir: &std::path::Path,
    ) -> Result<usize, SpecError> {
        const KINDS: [&str; 3] = ["msg", "srv", "action"];
        let mut dirs = vec![dir.to_path_buf()];
        if let (Some(name), Some(parent)) = (dir.file_name(), dir.parent()) {
            if KINDS.iter().any(|k| name == *k) {
                dirs.extend(
                    KINDS
                        .iter()
                        .map(|k| parent.join(k))
                        .filter(|d| d != dir && d.is_dir()),
                );
            }
        }
        let mut count = 0;
        for d in &dirs {
            for file in files_with_extension(d, "msg") {
                let (name, text) = read_spec_file(package, &file)?;
                self.insert(MsgSpec::parse(&name, &text)?);
                count += 1;
            }
        }
        for d in &dirs {
            for file in files_with_extension(d, "srv") {
                let (name, text) = read_spec_file(package, &file)?;
                self.insert_service(SrvSpec::parse(&name, &text)?);
                count += 1;
            }
            for file in files_with_extension(d, "action") {
                let (name, text) = read_spec_file(package, &file)?;
                self.insert_action(&name, &text)?;
                count += 1;
            }
        }
        Ok(count)
    }
}

/// The files of `dir` whose names end in `.extension`, sorted.
fn files_with_extension(dir: &std::path::Path, extension: &str) -> Vec<std::path::PathBuf> {
    read_dir_sorted(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == extension) && p.is_file())
        .collect()
}

/// `pkg/Stem` and the text of a `.msg`, `.srv` or `.action` file.
fn read_spec_file(package: &str, file: &std::path::Path) -> Result<(String, String), SpecError> {
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| SpecError(format!("{} has no usable name", file.display())))?;
    let text = std::fs::read_to_string(file)
        .map_err(|e| SpecError(format!("cannot read {}: {e}", file.display())))?;
    Ok((format!("{package}/{stem}"), text))
}

/// Package folders below `root`: `root/<pkg>/msg` when it exists (its `srv` and `action`
/// siblings are read with it), else `root/<pkg>/srv`, else `root/<pkg>/action`, else
/// `root/<pkg>` when it holds `.msg`, `.srv` or `.action` files; `root` itself counts when it
/// is a package (it has a `package.xml` and one of those folders).
pub fn package_dirs(root: &std::path::Path) -> Vec<(String, std::path::PathBuf)> {
    let name_of = |p: &std::path::Path| p.file_name().and_then(|n| n.to_str()).map(str::to_string);
    let spec_dir = |pkg: &std::path::Path| {
        let holds_specs = |d: &std::path::Path| {
            ["msg", "srv", "action"]
                .iter()
                .any(|ext| !files_with_extension(d, ext).is_empty())
        };
        [pkg.join("msg"), pkg.join("srv"), pkg.join("action")]
            .into_iter()
            .find(|d| d.is_dir())
            .or_else(|| holds_specs(pkg).then(|| pkg.to_path_buf()))
    };
    if root.join("package.xml").is_file() {
        if let (Some(name), Some(dir)) = (name_of(root), spec_dir(root)) {
            if dir != root {
                return vec![(name, dir)];
            }
        }
    }
    read_dir_sorted(root)
        .into_iter()
        .filter(|child| child.is_dir())
        .filter_map(|child| {
            let name = name_of(&child).filter(|n| is_valid_package(n))?;
            Some((name, spec_dir(&child)?))
        })
        .collect()
}

fn read_dir_sorted(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Lowercase hex md5 of `data`.
pub fn md5_hex(data: &[u8]) -> String {
    use md5::{Digest, Md5};
    let digest = Md5::digest(data);
    let mut s = String::with_capacity(32);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Where the messages of `package` are below `root`, in any layout [`package_dirs`] knows,
/// without listing `root` (which may be as large as `/usr/share`).
pub fn find_package_dir(root: &std::path::Path, package: &str) -> Option<std::path::PathBuf> {
    let is_msg = |p: &std::path::PathBuf| p.extension().is_some_and(|e| e == "msg");
    let candidates = [root.join(package).join("msg"), root.join(package)];
    if let Some(dir) = candidates
        .into_iter()
        .find(|d| d.is_dir() && read_dir_sorted(d).iter().any(is_msg))
    {
        return Some(dir);
    }
    let own = root.file_name().and_then(|n| n.to_str()) == Some(package);
    (own && root.join("msg").is_dir()).then(|| root.join("msg"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_as_genmsg_reads_them() {
        let spec = MsgSpec::parse(
            "pp/T",
            "Header header # stamped\nint8[] a\nOther[3] b\nqq/R c\nstring S= x # y\nint32 N=4 # c\n",
        )
        .unwrap();
        assert!(spec.has_header());
        let shapes: Vec<(&str, &FieldType, Shape)> = spec
            .fields
            .iter()
            .map(|f| (f.name.as_str(), &f.ty, f.shape))
            .collect();
        assert_eq!(
            shapes,
            [
                (
                    "header",
                    &FieldType::Message("std_msgs/Header".into()),
                    Shape::Scalar
                ),
                ("a", &FieldType::Primitive(Primitive::Int8), Shape::Vec),
                ("b", &FieldType::Message("pp/Other".into()), Shape::Array(3)),
                ("c", &FieldType::Message("qq/R".into()), Shape::Scalar),
            ]
        );
        let constants: Vec<(&str, &str)> = spec
            .constants
            .iter()
            .map(|c| (c.name.as_str(), c.text.as_str()))
            .collect();
        assert_eq!(constants, [("S", "x # y"), ("N", "4")]);
    }

    #[test]
    fn malformed_lines_are_errors_not_panics() {
        for text in [
            "int32[99999999999999999999999] x",
            "int32[16777217] x",
            "int32[-1] x",
            "int32[ x",
            "int32[2]] x",
            "int32 x y",
            "int32",
            "in-t x",
            "int32 1x",
            "pkg/Ty/pe x",
            "time T=1",
            "Other C=1",
            "int32 =1",
            "int32 N=",
            "int32 N=1=2 x",
            "int32 N=1 2",
            "uint8 N=256",
            "int8 N=-129",
            "float32 F=abc",
        ] {
            assert!(
                MsgSpec::parse("pp/T", text).is_err(),
                "{text:?} was accepted"
            );
        }
    }
}
