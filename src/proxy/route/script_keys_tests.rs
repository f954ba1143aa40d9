use super::*;

fn keys(code: &str) -> Vec<String> {
    literal_keys(code.as_bytes())
        .iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

#[test]
fn calls_with_literal_keys_give_them_at_the_commands_key_positions() {
    assert_eq!(keys("return redis.call('GET', 'user:1')"), ["user:1"]);
    assert_eq!(
        keys(r#"if redis.call("EXISTS", "key") then return redis.call("GET", "key") end"#),
        ["key", "key"]
    );
    assert_eq!(keys("redis.pcall('mset', 'a', '1', 'b', '2')"), ["a", "b"]);
    assert_eq!(keys("redis.call('set','x','y')"), ["x"]);
    // Key positions from the catalogue: the key of ZADD, not its score;
    // none for a keyless command.
    assert_eq!(keys("redis.call('zadd', 'z', '1', 'm')"), ["z"]);
    assert!(keys("redis.call('ping')").is_empty());
    assert!(keys("redis.call('select', 99)").is_empty());
    // Numkeys commands read their count from the literals.
    assert_eq!(
        keys("redis.call('lmpop', '2', 'l1', 'l2', 'LEFT')"),
        ["l1", "l2"]
    );
}

#[test]
fn keys_built_at_run_time_are_not_guessed() {
    assert!(keys("return redis.call('GET', KEYS[1])").is_empty());
    assert!(keys("local k = 'a' .. ARGV[1]; return redis.call('GET', k)").is_empty());
    assert!(keys("return redis.call(cmd, 'x')").is_empty());
    // A literal key after a computed argument is still not read past it.
    assert_eq!(keys("redis.call('mset', 'a', ARGV[1], 'b', '2')"), ["a"]);
    assert!(keys("redis.call('unknowncommand', 'x')").is_empty());
}

#[test]
fn strings_and_comments_are_not_taken_for_calls() {
    assert!(keys("return 'redis.call(\"GET\", \"x\")'").is_empty());
    assert!(keys("-- redis.call('GET', 'x')\nreturn 1").is_empty());
    assert!(keys("--[[ redis.call('GET', 'x') ]] return 1").is_empty());
    assert!(keys("--[==[ ]] redis.call('GET', 'x') ]==] return 1").is_empty());
    assert!(keys("return [[redis.call('GET', 'x')]]").is_empty());
    assert_eq!(
        keys("--[[ c ]] return redis.call('GET', [[long key]])"),
        ["long key"]
    );
}

#[test]
fn escapes_are_read_as_lua_reads_them() {
    assert_eq!(keys(r#"redis.call('GET', 'a\'b')"#), ["a'b"]);
    assert_eq!(keys(r#"redis.call("GET", "a\"b\\c")"#), ["a\"b\\c"]);
    assert_eq!(keys(r#"redis.call('GET', '\65\066')"#), ["AB"]);
    assert_eq!(keys("redis.call('GET', [==[\nk]]x]==])"), ["k]]x"]);
}

#[test]
fn garbage_never_panics_and_is_bounded() {
    for code in [
        "",
        "redis",
        "redis.",
        "redis.call",
        "redis.call(",
        "redis.call('",
        "redis.call('GET',",
        "redis.call('GET', '",
        "[[",
        "[=",
        "--[[",
        "'\\",
        "'\\9",
        "\"\\",
        "..",
        "1.5e3",
        "redis.call('GET' 'x')",
        "\u{ff}\u{fe}",
    ] {
        let _ = literal_keys(code.as_bytes());
        let _ = library_functions(code.as_bytes());
    }
    let many = "redis.call('GET', 'k') ".repeat(1000);
    assert_eq!(literal_keys(many.as_bytes()).len(), MAX_KEYS);
    let huge = vec![b' '; MAX_SCAN + 1];
    assert!(literal_keys(&huge).is_empty());
}

#[test]
fn a_library_gives_each_function_its_own_keys_and_the_shared_ones() {
    let code = "#!lua name=lib\n\
        local function helper() return redis.call('GET', 'shared') end\n\
        redis.register_function('first', function(keys, args) return redis.call('GET', 'a') end)\n\
        redis.register_function{function_name='second', callback=function(keys, args)\n\
            return redis.call('SET', 'b', '1') end, flags={'no-writes'}}\n\
        redis.register_function('third', function(keys, args) return redis.call('GET', keys[1]) end)";
    let got: Vec<(String, Vec<String>)> = library_functions(code.as_bytes())
        .into_iter()
        .map(|(n, ks)| {
            (
                String::from_utf8_lossy(&n).into_owned(),
                ks.iter()
                    .map(|k| String::from_utf8_lossy(k).into_owned())
                    .collect(),
            )
        })
        .collect();
    let want = |n: &str, ks: &[&str]| (n.to_string(), ks.iter().map(|k| k.to_string()).collect());
    assert_eq!(
        got,
        vec![
            want("first", &["shared", "a"]),
            want("second", &["shared", "b"]),
            want("third", &["shared"]),
        ]
    );
    let f = FunctionKeys::default();
    f.learn(code.as_bytes());
    assert_eq!(
        f.keys(b"first"),
        vec![Bytes::from_static(b"shared"), Bytes::from_static(b"a")]
    );
    assert!(f.keys(b"missing").is_empty());
    f.clear();
    assert!(f.keys(b"first").is_empty());
}
