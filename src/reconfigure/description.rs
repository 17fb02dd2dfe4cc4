//! What a node's settings are: each [`Param`] (type, range, default, level, text, enum
//! choices) and the groups rqt draws them in, checked once into a [`Description`].

use super::*;

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
pub struct GroupId(pub(super) i32);

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
    pub(super) fn as_str(self) -> &'static str {
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
    pub(super) name: String,
    pub(super) default: ParamValue,
    pub(super) min: ParamValue,
    pub(super) max: ParamValue,
    pub(super) level: u32,
    pub(super) description: String,
    pub(super) choices: Vec<Choice>,
    choices_description: String,
    pub(super) group: GroupId,
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
    pub(super) fn edit_method(&self) -> String {
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
pub(super) struct Group {
    pub(super) name: String,
    pub(super) kind: GroupKind,
    pub(super) parent: i32,
    pub(super) id: i32,
    pub(super) state: bool,
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
    pub(super) params: Vec<Param>,
    pub(super) groups: Vec<Group>,
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
