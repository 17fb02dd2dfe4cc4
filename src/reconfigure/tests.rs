use super::*;

fn sonar() -> ConfigSpace {
    let mut d = Description::new();
    d.add(
        Param::double("range", 10.0, 0.5, 100.0)
            .level(1)
            .description("m"),
    );
    d.add(Param::int("gain", 1, 0, 2).level(2).choices(
        "receiver gain",
        [
            Choice::new("low", 0, "low gain"),
            Choice::new("normal", 1, "normal gain"),
            Choice::new("high", 2, "it's high"),
        ],
    ));
    let sector = d.group(GroupId::DEFAULT, "sector", GroupKind::Collapse, false);
    let inner = d.group(sector, "inner", GroupKind::Box, true);
    d.add_in(inner, Param::bool("deep", true).level(8));
    d.add_in(sector, Param::str("label", "x").level(4));
    d.add(Param::bool("auto", true).level(16));
    d.validate().unwrap()
}

#[test]
fn settings_are_listed_group_by_group_in_preorder() {
    let space = sonar();
    let names: Vec<&str> = space.params().iter().map(Param::name).collect();
    assert_eq!(names, ["range", "gain", "auto", "label", "deep"]);
}

#[test]
fn a_request_overlays_by_name_and_type_clamps_and_ors_the_levels() {
    let space = sonar();
    let current = space.defaults();
    let request = msg::Config {
        doubles: vec![msg::DoubleParameter {
            name: "range".into(),
            value: 500.0,
        }],
        ints: vec![
            msg::IntParameter {
                name: "gain".into(),
                value: 2,
            },
            // A double sent as an int, and an unknown name: ignored, as C++ ignores them.
            msg::IntParameter {
                name: "range".into(),
                value: 3,
            },
            msg::IntParameter {
                name: "nosuch".into(),
                value: 1,
            },
        ],
        groups: vec![msg::GroupState {
            name: "sector".into(),
            state: true,
            id: 1,
            parent: 0,
        }],
        ..Default::default()
    };
    let (next, report) = space.overlay(&current, &request);
    assert_eq!(report.ignored, 2);
    assert!(report.refused.is_empty());
    assert_eq!(next.double("range"), Some(100.0), "clamped to max");
    assert_eq!(next.int("gain"), Some(2));
    assert_eq!(space.level_between(&current, &next), 1 | 2);
    let message = space.config_msg(&next);
    let sector = message.groups.iter().find(|g| g.name == "sector").unwrap();
    assert!(sector.state, "group state taken from the request");
}

#[test]
fn group_states_go_default_first_then_children_before_parents() {
    let space = sonar();
    let groups: Vec<String> = space
        .config_msg(&space.defaults())
        .groups
        .into_iter()
        .map(|g| format!("{}({},{},{})", g.name, g.id, g.parent, g.state))
        .collect();
    assert_eq!(
        groups,
        ["Default(0,0,true)", "inner(2,1,true)", "sector(1,0,false)"]
    );
    let description = space.description_msg();
    let order: Vec<&str> = description.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(order, ["Default", "sector", "inner"]);
    assert_eq!(description.max.doubles[0].value, 100.0);
    assert_eq!(description.dflt.strs[0].value, "x");
    assert!(description.max.groups.is_empty());
}

#[test]
fn enum_edit_method_is_the_generators_python_literal() {
    let space = sonar();
    let gain = &space.description_msg().groups[0].parameters[1];
    assert_eq!(
        gain.edit_method,
        "{'enum': [{'name': 'low', 'type': 'int', 'value': 0, 'srcline': 0, 'srcfile': '', \
         'description': 'low gain', 'ctype': 'int', 'cconsttype': 'const int'}, \
         {'name': 'normal', 'type': 'int', 'value': 1, 'srcline': 0, 'srcfile': '', \
         'description': 'normal gain', 'ctype': 'int', 'cconsttype': 'const int'}, \
         {'name': 'high', 'type': 'int', 'value': 2, 'srcline': 0, 'srcfile': '', \
         'description': \"it's high\", 'ctype': 'int', 'cconsttype': 'const int'}], \
         'enum_description': 'receiver gain'}"
    );
    assert_eq!(
        space.description_msg().groups[0].parameters[0].edit_method,
        ""
    );
}

#[test]
fn stored_values_override_defaults_when_their_type_fits() {
    let space = sonar();
    let mut config = space.defaults();
    let refused = space.overlay_stored(&mut config, |name| match name {
        "range" => Some(Value::Int(7)), // an int is taken for a double
        "gain" => Some(Value::String("high".into())),
        "auto" => Some(Value::Bool(false)),
        _ => None,
    });
    let names: Vec<&str> = refused.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["gain"]);
    assert_eq!(config.double("range"), Some(7.0));
    assert_eq!(config.int("gain"), Some(1));
    assert_eq!(config.bool("auto"), Some(false));
}

#[test]
fn bad_descriptions_are_refused() {
    let refused = |p: Param| {
        let mut d = Description::new();
        d.add(p);
        d.validate().unwrap_err()
    };
    assert!(matches!(
        refused(Param::int("9lives", 0, 0, 1)),
        DescriptionError::BadName(_)
    ));
    assert!(matches!(
        refused(Param::int("x", 5, 0, 1)),
        DescriptionError::Range(_)
    ));
    assert!(matches!(
        refused(Param::int("x", 0, 0, 1).choices("", [Choice::new("a", 1.5, "")])),
        DescriptionError::MixedTypes(_)
    ));
    assert!(matches!(
        refused(Param::int("x", 0, 0, 1).choices("", [Choice::new("one", 1, "")])),
        DescriptionError::DefaultNotAChoice(_)
    ));
    let mut d = Description::new();
    d.add(Param::bool("a", true)).add(Param::bool("a", false));
    assert!(matches!(d.validate(), Err(DescriptionError::Duplicate(_))));
}

#[test]
fn config_set_keeps_types() {
    let space = sonar();
    let mut config = space.defaults();
    assert!(config.set("range", 3.0));
    assert!(!config.set("range", 3), "an int is not a double here");
    assert!(!config.set("nosuch", true));
    assert_eq!(config.double("range"), Some(3.0));
}

#[test]
fn message_md5sums_are_dynamic_reconfigures() {
    use crate::msg::Message;
    use crate::service::Service;
    assert_eq!(msg::Config::MD5SUM, "958f16a05573709014982821e6822580");
    assert_eq!(
        msg::ConfigDescription::MD5SUM,
        "757ce9d44ba8ddd801bb30bc456f946f"
    );
    assert_eq!(msg::Group::MD5SUM, "9e8cd9e9423c94823db3614dd8b1cf7a");
    assert_eq!(msg::GroupState::MD5SUM, "a2d87f51dc22930325041a2f8b1571f8");
    assert_eq!(
        msg::ParamDescription::MD5SUM,
        "7434fcb9348c13054e0c3b267c8cb34d"
    );
    assert_eq!(msg::Reconfigure::MD5SUM, "bb125d226a21982a4a98760418dc2672");
}

#[test]
fn values_a_setting_cannot_take_are_refused_and_the_old_value_stays() {
    let space = sonar();
    let mut current = space.defaults();
    current.set("range", 42.0);
    let huge = "x".repeat(1 << 20);
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let request = msg::Config {
            doubles: vec![msg::DoubleParameter {
                name: "range".into(),
                value: bad,
            }],
            // Not one of the choices 0, 1, 2: refused, not clamped to 2.
            ints: vec![msg::IntParameter {
                name: "gain".into(),
                value: 7,
            }],
            strs: vec![msg::StrParameter {
                name: "label".into(),
                value: huge.clone(),
            }],
            ..Default::default()
        };
        let (next, report) = space.overlay(&current, &request);
        assert_eq!(next, current, "{bad}: nothing changed");
        let names: Vec<&str> = report.refused.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["gain", "range", "label"], "{bad}");
        let said: Vec<String> = report.refused.iter().map(ToString::to_string).collect();
        assert!(said[0].contains("7 is not one of 0, 1, 2"), "{said:?}");
        assert!(said[1].contains("0.5 to 100.0"), "{said:?}");
        assert!(said[2].contains("1048576 bytes"), "{said:?}");
        assert!(said.iter().all(|s| s.len() < 200), "the text is short");
    }
    // Subnormals and extremes are numbers: clamped into the range.
    for (value, expected) in [(5e-324, 0.5), (f64::MAX, 100.0), (-f64::MAX, 0.5)] {
        let request = msg::Config {
            doubles: vec![msg::DoubleParameter {
                name: "range".into(),
                value,
            }],
            ..Default::default()
        };
        let (next, report) = space.overlay(&current, &request);
        assert!(report.refused.is_empty());
        assert_eq!(next.double("range"), Some(expected), "{value}");
    }
}

#[test]
fn stored_values_a_setting_cannot_take_are_left_out() {
    let space = sonar();
    let mut config = space.defaults();
    let refused = space.overlay_stored(&mut config, |name| match name {
        "range" => Some(Value::Double(f64::NAN)),
        "gain" => Some(Value::Int(9)),
        "label" => Some(Value::String("y".repeat(MAX_STR_LEN + 1))),
        _ => None,
    });
    let names: Vec<&str> = refused.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["range", "gain", "label"]);
    assert_eq!(config, space.defaults());
}
