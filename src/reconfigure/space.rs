//! The part without I/O: a [`Config`] of values and the [`ConfigSpace`] that overlays
//! requests on it, clamps, ORs levels and builds the messages in the Python server's order.

use super::description::Group;
use super::*;

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
