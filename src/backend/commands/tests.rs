use super::*;

#[test]
fn parse_i64_follows_redis_string2ll() {
    let cases: &[(&str, Option<i64>)] = &[
        ("0", Some(0)),
        ("1", Some(1)),
        ("-1", Some(-1)),
        ("9223372036854775807", Some(i64::MAX)),
        ("-9223372036854775808", Some(i64::MIN)),
        ("9223372036854775808", None),
        ("-9223372036854775809", None),
        ("-0", None),
        ("01", None),
        ("+1", None),
        (" 1", None),
        ("1 ", None),
        ("", None),
        ("-", None),
        ("1a", None),
        ("99999999999999999999", None),
    ];
    for &(s, want) in cases {
        assert_eq!(parse_i64(s.as_bytes()).ok(), want, "{s:?}");
    }
}

#[test]
fn commands_the_proxy_routes_but_the_node_lacks_are_named() {
    assert_eq!(not_served(b"HEXPIRE"), Some("hexpire"));
    assert_eq!(not_served(b"get"), None, "served");
    assert_eq!(not_served(b"cluster"), None, "the proxy's own");
    assert_eq!(not_served(b"nosuchcommand"), None, "not Redis");
    for spec in crate::catalogue::TABLE {
        let served = lookup(spec.name.as_bytes()).is_some();
        let admin = spec.id == crate::catalogue::Id::Cluster;
        assert_eq!(
            not_served(spec.name.as_bytes()).is_some(),
            !served && !admin,
            "{}",
            spec.name
        );
    }
}

#[test]
fn every_command_is_found_in_any_case() {
    for c in COMMANDS {
        assert!(lookup(c.name.as_bytes()).is_some());
        assert!(lookup(c.name.to_uppercase().as_bytes()).is_some());
    }
    assert!(lookup(b"nosuchcommandatall").is_none());
}
