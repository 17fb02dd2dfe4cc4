//! dynamic_reconfigure: settings that `rqt_reconfigure`, `dynparam` and
//! `dynamic_reconfigure.client.Client` change while the node runs.
//!
//! A node describes its settings once ([`Description`]: each [`Param`]'s type, range,
//! default, level, text, enum choices, and the groups rqt draws), then starts a
//! [`ReconfigureServer`] with a callback. The server does what the C++ and Python servers
//! do, on the same names and wire (`<ns>/set_parameters`, the latched
//! `<ns>/parameter_descriptions` and `<ns>/parameter_updates`, `<ns>` being the node's
//! private namespace by default):
//!
//! - At start it takes the defaults, overrides each from the parameter server
//!   (`<ns>/<name>`), clamps, calls the callback with level `0xFFFFFFFF` (every level), and
//!   writes every value back to the parameter server.
//! - On a call it overlays the request by name (each value from the array of its own type;
//!   unknown names and values of the wrong type are ignored, as the C++ server ignores them,
//!   and group states are accepted, which the Python server cannot do), clamps numbers to
//!   their range (strings are never clamped), ORs the levels of the parameters that changed,
//!   and calls the callback with the new config and that level. The callback returns the
//!   config the node **applied**: a value it refused goes back to what it was. That config
//!   is stored, written to the parameter server, published on `parameter_updates`, and is
//!   the service's answer.
//! - Calls are applied one at a time.
//!
//! [`ConfigSpace`] is the part without I/O (overlaying, clamping, levels, the messages),
//! for tests and for other transports.

mod server;

pub use server::{ReconfigureError, ReconfigureServer};

use crate::msgs::dynamic_reconfigure as msg;
use crate::python::{float_repr, str_repr};
use crate::xmlrpc::Value;
use std::collections::HashMap;
use std::fmt;

/// The longest string a `str` setting takes, in bytes: a setting is a name, a frame or a
/// choice, and a client must not make every node hold (and mirror, and publish) megabytes.
pub const MAX_STR_LEN: usize = 4096;

/// A value that a request or the parameter server carried and that the setting did not
/// take; the setting keeps its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The setting's name.
    pub name: String,
    /// Why, in words: the value and what the setting takes.
    pub why: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, self.why)
    }
}

/// What [`ConfigSpace::overlay`] did not take from a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overlay {
    /// Entries that named no setting of their type (ignored, as the C++ server does).
    pub ignored: usize,
    /// Values a setting cannot take ([`Param::admits`]).
    pub refused: Vec<Refusal>,
}

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

    fn same_type(&self, other: &ParamValue) -> bool {
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
    fn python_repr(&self) -> String {
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
    fn clamped(self, min: &ParamValue, max: &ParamValue) -> ParamValue {
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

/// One named choice of an enum parameter (the generator's `const`).
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The name clients show and accept (`dynparam set node gain high`).
    pub name: String,
    /// The value it stands for, of the parameter's type.
    pub value: ParamValue,
    /// What it means.
    pub description: String,
}

impl Choice {
    /// A choice `name` standing for `value`.
    pub fn new(name: &str, value: impl Into<ParamValue>, description: &str) -> Choice {
        Choice {
            name: name.to_string(),
            value: value.into(),
            description: description.to_string(),
        }
    }
}

/// Identifies a group of a [`Description`]; [`GroupId::DEFAULT`] is the root every
/// description has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupId(i32);

impl GroupId {
    /// The root group, `Default` (id 0).
    pub const DEFAULT: GroupId = GroupId(0);
}

/// How rqt_reconfigure draws a group (the `Group.type` string).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKind {
    /// A plain box (`""`).
    Box,
    /// A box that folds (`collapse`); its state says whether it is open.
    Collapse,
    /// A tab (`tab`).
    Tab,
    /// Not shown (`hide`).
    Hide,
    /// Changes are sent together with an Apply button (`apply`).
    Apply,
}

impl GroupKind {
    fn as_str(self) -> &'static str {
        match self {
            GroupKind::Box => "",
            GroupKind::Collapse => "collapse",
            GroupKind::Tab => "tab",
            GroupKind::Hide => "hide",
            GroupKind::Apply => "apply",
        }
    }
}

/// One setting: its name, type, range, default, level and text.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    name: String,
    default: ParamValue,
    min: ParamValue,
    max: ParamValue,
    level: u32,
    description: String,
    choices: Vec<Choice>,
    choices_description: String,
    group: GroupId,
}

impl Param {
    fn new(name: &str, default: ParamValue, min: ParamValue, max: ParamValue) -> Param {
        Param {
            name: name.to_string(),
            default,
            min,
            max,
            level: 0,
            description: String::new(),
            choices: Vec::new(),
            choices_description: String::new(),
            group: GroupId::DEFAULT,
        }
    }

    /// An `int` setting in `[min, max]`.
    pub fn int(name: &str, default: i32, min: i32, max: i32) -> Param {
        Param::new(name, default.into(), min.into(), max.into())
    }

    /// A `double` setting in `[min, max]` (infinities for no bound).
    pub fn double(name: &str, default: f64, min: f64, max: f64) -> Param {
        Param::new(name, default.into(), min.into(), max.into())
    }

    /// A `bool` setting.
    pub fn bool(name: &str, default: bool) -> Param {
        Param::new(name, default.into(), false.into(), true.into())
    }

    /// A `str` setting.
    pub fn str(name: &str, default: &str) -> Param {
        Param::new(name, default.into(), "".into(), "".into())
    }

    /// The level a change of this setting adds to the callback's level (ORed with the
    /// others that changed), so the node can tell, say, what needs a restart.
    pub fn level(mut self, level: u32) -> Param {
        self.level = level;
        self
    }

    /// What the setting does (rqt shows it as a tooltip).
    pub fn description(mut self, text: &str) -> Param {
        self.description = text.to_string();
        self
    }

    /// Named choices (an enum): clients show a list and accept the names.
    pub fn choices(
        mut self,
        description: &str,
        choices: impl IntoIterator<Item = Choice>,
    ) -> Param {
        self.choices_description = description.to_string();
        self.choices = choices.into_iter().collect();
        self
    }

    /// The setting's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the setting can take `value` (of its type) at all, before clamping: a
    /// `double` must be finite (NaN and infinities are refused, where the reference servers
    /// pass NaN on to the node), a setting with [choices](Param::choices) takes only those,
    /// and a string at most [`MAX_STR_LEN`] bytes. A finite number outside the range is
    /// admitted and then clamped, as every dynamic_reconfigure server clamps.
    pub fn admits(&self, value: &ParamValue) -> Result<(), String> {
        match value {
            ParamValue::Double(v) if !v.is_finite() => {
                return Err(format!(
                    "{} is not a finite number ({} to {})",
                    float_repr(*v),
                    self.min.python_repr(),
                    self.max.python_repr()
                ))
            }
            ParamValue::Str(s) if s.len() > MAX_STR_LEN => {
                return Err(format!(
                    "a string of {} bytes is too long (at most {MAX_STR_LEN})",
                    s.len()
                ))
            }
            _ => {}
        }
        if !self.choices.is_empty() && !self.choices.iter().any(|c| c.value == *value) {
            let names: Vec<String> = self.choices.iter().map(|c| c.value.python_repr()).collect();
            let shown = match value {
                ParamValue::Str(s) => str_repr(&s.chars().take(64).collect::<String>()),
                v => v.python_repr(),
            };
            return Err(format!("{shown} is not one of {}", names.join(", ")));
        }
        Ok(())
    }

    /// The `edit_method` literal clients `eval()`: empty, or the generator's
    /// `repr({'enum': [...], 'enum_description': ...})`.
    fn edit_method(&self) -> String {
        if self.choices.is_empty() {
            return String::new();
        }
        let ty = self.default.type_name();
        let (ctype, cconsttype) = match ty {
            "str" => ("std::string", "const char * const"),
            "int" => ("int", "const int"),
            "double" => ("double", "const double"),
            _ => ("bool", "const bool"),
        };
        let consts: Vec<String> = self
            .choices
            .iter()
            .map(|c| {
                format!(
                    "{{'name': {}, 'type': '{ty}', 'value': {}, 'srcline': 0, 'srcfile': '', \
                     'description': {}, 'ctype': '{ctype}', 'cconsttype': '{cconsttype}'}}",
                    str_repr(&c.name),
                    c.value.python_repr(),
                    str_repr(&c.description)
                )
            })
            .collect();
        format!(
            "{{'enum': [{}], 'enum_description': {}}}",
            consts.join(", "),
            str_repr(&self.choices_description)
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Group {
    name: String,
    kind: GroupKind,
    parent: i32,
    id: i32,
    state: bool,
}

/// What a description does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DescriptionError {
    /// Two settings of one name.
    Duplicate(String),
    /// A name clients cannot use (`[a-zA-Z][a-zA-Z0-9_]*`), or `groups`.
    BadName(String),
    /// Default, minimum and maximum (or an enum choice) of different types.
    MixedTypes(String),
    /// A minimum above the maximum, or a default outside the range.
    Range(String),
    /// A default that is none of the enum's choices (rqt needs it to be one).
    DefaultNotAChoice(String),
    /// A parameter or group in a group the description does not have.
    NoSuchGroup(String),
}

impl fmt::Display for DescriptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DescriptionError::Duplicate(n) => write!(f, "two settings named {n}"),
            DescriptionError::BadName(n) => write!(f, "{n:?} is not a setting name"),
            DescriptionError::MixedTypes(n) => write!(f, "{n}: values of different types"),
            DescriptionError::Range(n) => write!(f, "{n}: the default is outside min..max"),
            DescriptionError::DefaultNotAChoice(n) => {
                write!(f, "{n}: the default is none of its choices")
            }
            DescriptionError::NoSuchGroup(n) => write!(f, "{n}: no such group"),
        }
    }
}

impl std::error::Error for DescriptionError {}

/// A node's settings and their groups, as a `.cfg` file describes them.
///
/// ```
/// use udpros::reconfigure::{Choice, Description, GroupId, GroupKind, Param};
/// let mut d = Description::new();
/// d.add(Param::double("range", 10.0, 0.1, 100.0).level(1).description("scan length, m"));
/// d.add(Param::int("gain", 1, 0, 2).choices(
///     "receiver gain",
///     [Choice::new("low", 0, "low"), Choice::new("normal", 1, "normal"), Choice::new("high", 2, "high")],
/// ));
/// let sector = d.group(GroupId::DEFAULT, "sector", GroupKind::Collapse, true);
/// d.add_in(sector, Param::int("start", 0, 0, 399));
/// assert!(d.clone().validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Description {
    params: Vec<Param>,
    groups: Vec<Group>,
}

impl Default for Description {
    fn default() -> Self {
        Description::new()
    }
}

impl Description {
    /// No settings yet, and the root group `Default`.
    pub fn new() -> Description {
        Description {
            params: Vec::new(),
            groups: vec![Group {
                name: "Default".into(),
                kind: GroupKind::Box,
                parent: 0,
                id: 0,
                state: true,
            }],
        }
    }

    /// Adds a setting to the root group.
    pub fn add(&mut self, param: Param) -> &mut Description {
        self.add_in(GroupId::DEFAULT, param)
    }

    /// Adds a setting to `group`.
    pub fn add_in(&mut self, group: GroupId, mut param: Param) -> &mut Description {
        param.group = group;
        self.params.push(param);
        self
    }

    /// Adds a group under `parent`; `open` is its initial state (for `collapse`, whether it
    /// is unfolded). Ids count up from 1 in the order groups are added, as the generator's.
    pub fn group(&mut self, parent: GroupId, name: &str, kind: GroupKind, open: bool) -> GroupId {
        let id = self.groups.len() as i32;
        self.groups.push(Group {
            name: name.replace(' ', "_"),
            kind,
            parent: parent.0,
            id,
            state: open,
        });
        GroupId(id)
    }

    /// Checks names, types, ranges and choices, and orders the settings as clients list
    /// them: [`ConfigSpace::new`] does this.
    pub fn validate(self) -> Result<ConfigSpace, DescriptionError> {
        ConfigSpace::new(self)
    }
}

/// The current values of every setting, and the state of every group.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    values: Vec<(String, ParamValue)>,
    /// Group states, by group id (index).
    groups: Vec<bool>,
}

impl Config {
    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The `int` `name`.
    pub fn int(&self, name: &str) -> Option<i32> {
        match self.get(name)? {
            ParamValue::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The `double` `name`.
    pub fn double(&self, name: &str) -> Option<f64> {
        match self.get(name)? {
            ParamValue::Double(d) => Some(*d),
            _ => None,
        }
    }

    /// The `bool` `name`.
    pub fn bool(&self, name: &str) -> Option<bool> {
        match self.get(name)? {
            ParamValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The `str` `name`.
    pub fn str(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            ParamValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Sets `name` to `value` if the setting exists and has that type; whether it did.
    /// A callback uses it to put back a value it could not apply.
    pub fn set(&mut self, name: &str, value: impl Into<ParamValue>) -> bool {
        let value = value.into();
        match self.values.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) if v.same_type(&value) => {
                *v = value;
                true
            }
            _ => false,
        }
    }

    /// Every setting and its value, in the description's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ParamValue)> {
        self.values.iter().map(|(n, v)| (n.as_str(), v))
    }
}

/// A validated [`Description`] and what follows from it without I/O: defaults, clamping,
/// overlaying requests, levels, and the `dynamic_reconfigure` messages.
#[derive(Debug, Clone)]
pub struct ConfigSpace {
    /// Settings in the order clients list them: each group's own, then its subgroups'
    /// (pre-order), as the generator's `extract_params`.
    params: Vec<Param>,
    groups: Vec<Group>,
    by_name: HashMap<String, usize>,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name != "groups"
}

impl ConfigSpace {
    /// Checks `description` and orders its settings.
    pub fn new(description: Description) -> Result<ConfigSpace, DescriptionError> {
        let Description { params, groups } = description;
        for g in &groups[1..] {
            if g.parent < 0 || g.parent >= g.id {
                return Err(DescriptionError::NoSuchGroup(g.name.clone()));
            }
        }
        let mut by_name = HashMap::new();
        for p in &params {
            if !valid_name(&p.name) {
                return Err(DescriptionError::BadName(p.name.clone()));
            }
            if p.group.0 < 0 || p.group.0 as usize >= groups.len() {
                return Err(DescriptionError::NoSuchGroup(p.name.clone()));
            }
            if !(p.default.same_type(&p.min) && p.default.same_type(&p.max))
                || p.choices.iter().any(|c| !c.value.same_type(&p.default))
            {
                return Err(DescriptionError::MixedTypes(p.name.clone()));
            }
            if p.default.clone().clamped(&p.min, &p.max) != p.default {
                return Err(DescriptionError::Range(p.name.clone()));
            }
            if !p.choices.is_empty() && !p.choices.iter().any(|c| c.value == p.default) {
                return Err(DescriptionError::DefaultNotAChoice(p.name.clone()));
            }
            if by_name.insert(p.name.clone(), 0).is_some() {
                return Err(DescriptionError::Duplicate(p.name.clone()));
            }
        }
        let mut ordered = Vec::with_capacity(params.len());
        for g in preorder(&groups) {
            ordered.extend(params.iter().filter(|p| p.group.0 == g).cloned());
        }
        let by_name = ordered
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.clone(), i))
            .collect();
        Ok(ConfigSpace {
            params: ordered,
            groups,
            by_name,
        })
    }

    /// The settings, in the order clients list them.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Every setting at its default, every group in its initial state.
    pub fn defaults(&self) -> Config {
        Config {
            values: self
                .params
                .iter()
                .map(|p| (p.name.clone(), p.default.clone()))
                .collect(),
            groups: self.groups.iter().map(|g| g.state).collect(),
        }
    }

    /// `config` with every number within its setting's range.
    pub fn clamp(&self, config: &mut Config) {
        for (p, (_, v)) in self.params.iter().zip(config.values.iter_mut()) {
            *v = std::mem::replace(v, ParamValue::Bool(false)).clamped(&p.min, &p.max);
        }
    }

    /// The OR of the levels of the settings whose values differ between `a` and `b`.
    pub fn level_between(&self, a: &Config, b: &Config) -> u32 {
        self.params
            .iter()
            .zip(a.values.iter().zip(&b.values))
            .filter(|(_, ((_, x), (_, y)))| x != y)
            .fold(0, |level, (p, _)| level | p.level)
    }

    /// `current` with what `request` sets, clamped; also which of its entries named no
    /// setting of that type (ignored, as the C++ server ignores them) and which carried a
    /// value the setting cannot take ([`Param::admits`]: refused, the current value stays).
    pub fn overlay(&self, current: &Config, request: &msg::Config) -> (Config, Overlay) {
        let mut next = current.clone();
        let mut report = Overlay::default();
        let mut put = |name: &str, value: ParamValue| match self.by_name.get(name) {
            Some(&i) if next.values[i].1.same_type(&value) => match self.params[i].admits(&value) {
                Ok(()) => next.values[i].1 = value,
                Err(why) => report.refused.push(Refusal {
                    name: name.to_string(),
                    why,
                }),
            },
            _ => report.ignored += 1,
        };
        request
            .bools
            .iter()
            .for_each(|p| put(&p.name, p.value.into()));
        request
            .ints
            .iter()
            .for_each(|p| put(&p.name, p.value.into()));
        request
            .doubles
            .iter()
            .for_each(|p| put(&p.name, p.value.into()));
        request
            .strs
            .iter()
            .for_each(|p| put(&p.name, p.value.as_str().into()));
        for state in &request.groups {
            match self.groups.iter().position(|g| g.name == state.name) {
                Some(i) => next.groups[i] = state.state,
                None => report.ignored += 1,
            }
        }
        self.clamp(&mut next);
        (next, report)
    }

    /// `config` over the parameter server's values: `lookup(name)` gives the value stored at
    /// `<ns>/<name>`, if any; a value of another type, or one the setting cannot take
    /// ([`Param::admits`]), is left out (returned with the reason).
    pub fn overlay_stored(
        &self,
        config: &mut Config,
        lookup: impl Fn(&str) -> Option<Value>,
    ) -> Vec<Refusal> {
        let mut refused = Vec::new();
        for (p, (name, value)) in self.params.iter().zip(config.values.iter_mut()) {
            let Some(stored) = lookup(name) else { continue };
            let why = match ParamValue::from_xmlrpc(&stored, value) {
                Some(v) => match p.admits(&v) {
                    Ok(()) => {
                        *value = v;
                        continue;
                    }
                    Err(why) => why,
                },
                None => format!("has the wrong type (expected {})", value.type_name()),
            };
            refused.push(Refusal {
                name: name.clone(),
                why,
            });
        }
        self.clamp(config);
        refused
    }

    /// `config` as a `dynamic_reconfigure/Config`: every setting in the array of its type,
    /// in order, and the group states, `Default` first and then the others children first,
    /// as the Python server encodes them.
    pub fn config_msg(&self, config: &Config) -> msg::Config {
        let mut out = values_msg(config.values.iter().map(|(n, v)| (n.as_str(), v)));
        let mut order = vec![0];
        postorder_children(&self.groups, 0, &mut order);
        out.groups = order
            .into_iter()
            .map(|i| {
                let g = &self.groups[i as usize];
                msg::GroupState {
                    name: g.name.clone(),
                    state: config.groups[i as usize],
                    id: g.id,
                    parent: g.parent,
                }
            })
            .collect();
        out
    }

    /// The latched `parameter_descriptions` message: the groups (root first, then
    /// pre-order) with their settings, and every setting's max, min and default.
    pub fn description_msg(&self) -> msg::ConfigDescription {
        let groups = preorder(&self.groups)
            .into_iter()
            .map(|i| {
                let g = &self.groups[i as usize];
                msg::Group {
                    name: g.name.clone(),
                    r#type: g.kind.as_str().into(),
                    parameters: self
                        .params
                        .iter()
                        .filter(|p| p.group.0 == i)
                        .map(|p| msg::ParamDescription {
                            name: p.name.clone(),
                            r#type: p.default.type_name().into(),
                            level: p.level,
                            description: p.description.clone(),
                            edit_method: p.edit_method(),
                        })
                        .collect(),
                    parent: g.parent,
                    id: g.id,
                }
            })
            .collect();
        let column = |pick: fn(&Param) -> &ParamValue| {
            values_msg(self.params.iter().map(|p| (p.name.as_str(), pick(p))))
        };
        msg::ConfigDescription {
            groups,
            max: column(|p| &p.max),
            min: column(|p| &p.min),
            dflt: column(|p| &p.default),
        }
    }
}

/// Values in the arrays of their types, in order (no group states).
fn values_msg<'a>(values: impl Iterator<Item = (&'a str, &'a ParamValue)>) -> msg::Config {
    let mut out = msg::Config::default();
    for (name, value) in values {
        let name = name.to_string();
        match value {
            ParamValue::Bool(value) => out.bools.push(msg::BoolParameter {
                name,
                value: *value,
            }),
            ParamValue::Int(value) => out.ints.push(msg::IntParameter {
                name,
                value: *value,
            }),
            ParamValue::Double(value) => out.doubles.push(msg::DoubleParameter {
                name,
                value: *value,
            }),
            ParamValue::Str(value) => out.strs.push(msg::StrParameter {
                name,
                value: value.clone(),
            }),
        }
    }
    out
}

/// Group ids root first, then each group before its children (children in the order added).
fn preorder(groups: &[Group]) -> Vec<i32> {
    fn visit(groups: &[Group], id: i32, out: &mut Vec<i32>) {
        out.push(id);
        for g in groups.iter().filter(|g| g.parent == id && g.id != 0) {
            visit(groups, g.id, out);
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    visit(groups, 0, &mut out);
    out
}

/// The descendants of `id`, each after its own children.
fn postorder_children(groups: &[Group], id: i32, out: &mut Vec<i32>) {
    for g in groups.iter().filter(|g| g.parent == id && g.id != 0) {
        postorder_children(groups, g.id, out);
        out.push(g.id);
    }
}

#[cfg(test)]
mod tests;
