//! Message specifications: `.msg` texts parsed into fields, with the md5sum and the full
//! definition text computed exactly as genmsg computes them.
//!
//! This file is compiled twice: into the library and into the crate's own build script
//! (which cannot depend on the library it builds), so it uses nothing but `std`,
//! `ros_message` and `md5`.

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

    fn from_ros(dt: &ros_message::DataType) -> Option<Primitive> {
        use ros_message::{DataType as D, I8Variant, U8Variant};
        Some(match dt {
            D::Bool => Primitive::Bool,
            D::I8(I8Variant::Int8) => Primitive::Int8,
            D::I8(I8Variant::Byte) => Primitive::Byte,
            D::I16 => Primitive::Int16,
            D::I32 => Primitive::Int32,
            D::I64 => Primitive::Int64,
            D::U8(U8Variant::Uint8) => Primitive::UInt8,
            D::U8(U8Variant::Char) => Primitive::Char,
            D::U16 => Primitive::UInt16,
            D::U32 => Primitive::UInt32,
            D::U64 => Primitive::UInt64,
            D::F32 => Primitive::Float32,
            D::F64 => Primitive::Float64,
            D::String => Primitive::String,
            D::Time => Primitive::Time,
            D::Duration => Primitive::Duration,
            D::LocalMessage(_) | D::GlobalMessage(_) => return None,
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
    parsed: ros_message::Msg,
}

impl MsgSpec {
    /// Parses `text` as the message `full_name` (`pkg/Type`).
    pub fn parse(full_name: &str, text: &str) -> Result<MsgSpec, SpecError> {
        let (package, short) = split_type_name(full_name)?;
        if text.len() > MAX_DEFINITION_LEN {
            return err(format!("definition of {full_name} is too large"));
        }
        screen_lines(full_name, text)?;
        let path = ros_message::MessagePath::new(package, short)
            .map_err(|e| SpecError(format!("invalid type name {full_name}: {e}")))?;
        let parsed = ros_message::Msg::new(path, text)
            .map_err(|e| SpecError(format!("cannot parse {full_name}: {e}")))?;
        let mut fields = Vec::new();
        let mut constants = Vec::new();
        for f in parsed.fields() {
            use ros_message::{DataType as D, FieldCase};
            let ty = match f.datatype() {
                D::LocalMessage(local) => FieldType::Message(format!("{package}/{local}")),
                D::GlobalMessage(p) => FieldType::Message(format!("{}/{}", p.package(), p.name())),
                other => FieldType::Primitive(
                    Primitive::from_ros(other).ok_or_else(|| SpecError("unknown type".into()))?,
                ),
            };
            let shape = match f.case() {
                FieldCase::Unit => Shape::Scalar,
                FieldCase::Vector => Shape::Vec,
                FieldCase::Array(n) => Shape::Array(*n),
                FieldCase::Const(value) => {
                    let FieldType::Primitive(p) = ty else {
                        return err(format!("{full_name}: constant {} is not builtin", f.name()));
                    };
                    if matches!(p, Primitive::Time | Primitive::Duration) {
                        return err(format!(
                            "{full_name}: constant {} has type {}",
                            f.name(),
                            p.ros_name()
                        ));
                    }
                    constants.push(Constant {
                        name: f.name().to_string(),
                        ty: p,
                        text: value.trim().to_string(),
                    });
                    continue;
                }
            };
            fields.push(Field {
                name: f.name().to_string(),
                ty,
                shape,
            });
        }
        Ok(MsgSpec {
            name: full_name.to_string(),
            text: text.to_string(),
            fields,
            constants,
            parsed,
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
        self.parsed.has_header()
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

/// Refuses array sizes that `ros_message` would overflow on (it parses them with a panic on
/// overflow) or that no real message uses.
fn screen_lines(full_name: &str, text: &str) -> Result<(), SpecError> {
    for line in text.lines() {
        let code = line.split('#').next().unwrap_or("");
        if code.trim_start().starts_with("string") && code.contains('=') {
            continue; // a string constant: anything may follow '='
        }
        let Some(open) = code.find('[') else { continue };
        let Some(close) = code[open..].find(']') else {
            continue;
        };
        let digits = code[open + 1..open + close].trim();
        if digits.is_empty() {
            continue;
        }
        match digits.parse::<usize>() {
            Ok(n) if n <= MAX_FIXED_ARRAY_LEN => {}
            _ => {
                return err(format!(
                    "{full_name}: array size [{digits}] is out of range"
                ))
            }
        }
    }
    Ok(())
}

/// A closed set of message specifications: every dependency of every member is a member.
#[derive(Debug, Clone, Default)]
pub struct SpecSet {
    specs: BTreeMap<String, MsgSpec>,
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
        let mut hashes = HashMap::new();
        for dep in spec.direct_dependencies() {
            let (p, t) = split_type_name(dep)?;
            let path = ros_message::MessagePath::new(p, t).map_err(|e| SpecError(e.to_string()))?;
            hashes.insert(path, self.md5_memo(dep, memo)?);
        }
        spec.parsed
            .get_md5_representation(&hashes)
            .map_err(|e| SpecError(format!("md5 of {}: {e}", spec.name)))
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

    /// Loads `dir/*.msg` as messages of `package`.
    pub fn load_package_dir(
        &mut self,
        package: &str,
        dir: &std::path::Path,
    ) -> Result<usize, SpecError> {
        let mut files: Vec<_> = read_dir_sorted(dir)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "msg"))
            .collect();
        files.sort();
        for file in &files {
            let Some(stem) = file.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            let text = std::fs::read_to_string(file)
                .map_err(|e| SpecError(format!("cannot read {}: {e}", file.display())))?;
            self.insert(MsgSpec::parse(&format!("{package}/{stem}"), &text)?);
        }
        Ok(files.len())
    }
}

/// Package folders below `root`: `root/<pkg>/msg` when it exists, else `root/<pkg>` when it
/// holds `.msg` files; `root` itself counts when it is a package (it has a `msg` folder and
/// a `package.xml`).
pub fn package_dirs(root: &std::path::Path) -> Vec<(String, std::path::PathBuf)> {
    let mut out = Vec::new();
    let name_of = |p: &std::path::Path| p.file_name().and_then(|n| n.to_str()).map(str::to_string);
    if root.join("package.xml").is_file() && root.join("msg").is_dir() {
        if let Some(name) = name_of(root) {
            out.push((name, root.join("msg")));
        }
        return out;
    }
    for child in read_dir_sorted(root) {
        if !child.is_dir() {
            continue;
        }
        let Some(name) = name_of(&child) else {
            continue;
        };
        if !is_valid_package(&name) {
            continue;
        }
        if child.join("msg").is_dir() {
            out.push((name, child.join("msg")));
        } else if read_dir_sorted(&child)
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "msg"))
        {
            out.push((name, child));
        }
    }
    out
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
