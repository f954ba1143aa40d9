//! Random bitmap commands for the property test.

use proptest::prelude::*;

/// One random bitmap command over three small keys.
pub fn bit_command() -> impl Strategy<Value = Vec<String>> {
    let key = prop::sample::select(vec!["a", "b", "c"]);
    // Short keys (mostly under 8 bytes) so ranges often fall entirely in
    // set or clear bits, and values that set whole fields to ones.
    let off = prop_oneof![3 => 0u64..64, 1 => 0u64..200];
    let idx = -12i64..12;
    let val = prop_oneof![
        prop::sample::select(vec![-1i64, 0, 1, 255, i64::MAX, i64::MIN]),
        -300i64..300,
        any::<i64>()
    ];
    let unit = prop::sample::select(vec!["", "BYTE", "BIT"]);
    let ty = prop_oneof![
        (1u32..=64).prop_map(|b| format!("i{b}")),
        (1u32..=63).prop_map(|b| format!("u{b}"))
    ];
    let ow = prop::sample::select(vec!["WRAP", "SAT", "FAIL"]);
    let op = prop::sample::select(vec!["AND", "OR", "XOR", "NOT"]);
    prop_oneof![
        (
            key.clone(),
            off.clone(),
            prop_oneof![1 => Just(0u8), 3 => Just(1u8)]
        )
            .prop_map(|(k, o, v)| vec![
                "SETBIT".into(),
                k.into(),
                o.to_string(),
                v.to_string()
            ]),
        (key.clone(), off.clone()).prop_map(|(k, o)| vec![
            "GETBIT".into(),
            k.into(),
            o.to_string()
        ]),
        (key.clone(), idx.clone(), idx.clone(), unit.clone()).prop_map(|(k, s, e, u)| {
            let mut v = vec!["BITCOUNT".into(), k.into(), s.to_string(), e.to_string()];
            if !u.is_empty() {
                v.push(u.into());
            }
            v
        }),
        (
            key.clone(),
            0u8..2,
            prop::option::of((idx.clone(), prop::option::of((idx, unit))))
        )
            .prop_map(|(k, b, range)| {
                let mut v = vec!["BITPOS".into(), k.into(), b.to_string()];
                if let Some((s, end)) = range {
                    v.push(s.to_string());
                    if let Some((e, u)) = end {
                        v.push(e.to_string());
                        if !u.is_empty() {
                            v.push(u.into());
                        }
                    }
                }
                v
            }),
        (op, key.clone(), prop::collection::vec(key.clone(), 1..4)).prop_map(|(op, d, srcs)| {
            let srcs = if op == "NOT" {
                srcs[..1].to_vec()
            } else {
                srcs
            };
            let mut v = vec!["BITOP".into(), op.into(), d.into()];
            v.extend(srcs.into_iter().map(String::from));
            v
        }),
        (
            key,
            prop::collection::vec((ow, ty, off, val, 0u8..3, any::<bool>()), 1..4)
        )
            .prop_map(|(k, ops)| {
                let mut v = vec!["BITFIELD".into(), k.into()];
                for (ow, ty, o, val, kind, hash) in ops {
                    let bits: u64 = ty[1..].parse().unwrap();
                    let o = if hash {
                        format!("#{}", o / bits.max(1))
                    } else {
                        o.to_string()
                    };
                    v.extend(["OVERFLOW".into(), ow.to_string()]);
                    match kind {
                        0 => v.extend(["GET".into(), ty, o]),
                        1 => v.extend(["SET".into(), ty, o, val.to_string()]),
                        _ => v.extend(["INCRBY".into(), ty, o, val.to_string()]),
                    }
                }
                v
            }),
    ]
}
