//! A long script through the proxy, as one redis-server shows it: the
//! script holds only a connection of its own to its node, so other clients
//! reach that node and are answered `-BUSY` past `busy-reply-threshold`
//! (PING included), FUNCTION STATS names the running function, and SCRIPT
//! KILL or FUNCTION KILL stops it. A load and the script that uses it, sent
//! in one pipeline, keep their order. COMMAND GETKEYS answers with Redis's
//! keys and errors. Each runs over built-in nodes and over redis-server
//! nodes: the proxy must give both the same answers.

mod common;

use common::*;

const SPIN: &str = "local a = 1 while true do a = a + 1 end";
const BUSY_EVAL: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

fn a_busy_script_leaves_others_answered_busy_until_script_kill(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(1);
    let port = c.proxy.port;
    let mut other = Raw::connect(port);
    other.check(&["CONFIG", "SET", "busy-reply-threshold", "50"], "+OK\r\n");
    other.check(&["SET", "k", "v"], "+OK\r\n");
    let mut spinning = start_call(port, &["EVAL", SPIN, "0"]);
    assert_eq!(until_busy(&mut other), BUSY_EVAL);
    // The node answers, not a connection stuck behind the script.
    other.check(&["GET", "k"], BUSY_EVAL);
    other.check(&["EVAL", "return 1", "0"], BUSY_EVAL);
    other.check(&["FUNCTION", "STATS"], BUSY_EVAL);
    other.check(&["SCRIPT", "KILL"], "+OK\r\n");
    let reply = String::from_utf8_lossy(&spinning.reply()).into_owned();
    assert!(reply.starts_with("-ERR Script killed by user"), "{reply}");
    other.check(&["GET", "k"], "$1\r\nv\r\n");
    spinning.check(&["PING"], "+PONG\r\n");
    c.proxy.assert_no_panic();
}

fn function_stats_names_the_running_function_and_function_kill_stops_it(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(3);
    let port = c.proxy.port;
    let mut other = Raw::connect(port);
    other.check(&["CONFIG", "SET", "busy-reply-threshold", "50"], "+OK\r\n");
    let lib = format!("#!lua name=spin\nredis.register_function('spin', function() {SPIN} end)");
    other.check(&["FUNCTION", "LOAD", &lib], "$4\r\nspin\r\n");
    let idle = other.call(&["FUNCTION", "STATS"]);
    assert!(
        idle.starts_with("*4\r\n$14\r\nrunning_script\r\n$-1\r\n"),
        "{idle}"
    );
    let mut spinning = start_call(port, &["FCALL", "spin", "0"]);
    until_busy(&mut other);
    let stats = other.call(&["FUNCTION", "STATS"]);
    let running = "*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n$7\r\ncommand\r\n*3\r\n$5\r\nFCALL\r\n$4\r\nspin\r\n$1\r\n0\r\n$11\r\nduration_ms\r\n:";
    assert!(stats.starts_with(running), "{stats}");
    other.check(&["FUNCTION", "KILL"], "+OK\r\n");
    let reply = String::from_utf8_lossy(&spinning.reply()).into_owned();
    assert!(reply.contains("Script killed by user"), "{reply}");
    other.check(&["PING"], "+PONG\r\n");
    c.proxy.assert_no_panic();
}

fn a_pipelined_load_and_the_call_that_uses_it_keep_their_order(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(3);
    let mut conn = Raw::connect(c.proxy.port);
    conn.check(&["SET", "k", "1"], "+OK\r\n");
    let lib = "#!lua name=order\nredis.register_function('bump', function(keys) return redis.call('incr', keys[1]) end)";
    let body = "return redis.call('incr', KEYS[1])";
    let sha = conn.call(&["SCRIPT", "LOAD", body]);
    conn.check(&["SCRIPT", "FLUSH"], "+OK\r\n");
    let sha = sha.trim_end().rsplit('\n').next().unwrap().to_string();
    let pipeline: [&[&str]; 7] = [
        &["FUNCTION", "LOAD", lib],
        &["FCALL", "bump", "1", "k"],
        &["GET", "k"],
        &["SCRIPT", "LOAD", body],
        &["EVALSHA", &sha, "1", "k"],
        &["INCR", "k"],
        &["PING"],
    ];
    for args in pipeline {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        conn.send(&args);
    }
    let replies: Vec<String> = (0..pipeline.len())
        .map(|_| String::from_utf8_lossy(&conn.reply()).into_owned())
        .collect();
    let want = [
        "$5\r\norder\r\n",
        ":2\r\n",
        "$1\r\n2\r\n",
        &format!("${}\r\n{sha}\r\n", sha.len()),
        ":3\r\n",
        ":4\r\n",
        "+PONG\r\n",
    ];
    assert_eq!(replies, want);
    c.proxy.assert_no_panic();
}

fn command_getkeys_answers_as_redis_does(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(2);
    let mut conn = Raw::connect(c.proxy.port);
    let cases: &[(&[&str], &str)] = &[
        (
            &["COMMAND", "GETKEYS", "SET", "a", "b"],
            "*1\r\n$1\r\na\r\n",
        ),
        (
            &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"],
            "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        ),
        (
            &["COMMAND", "GETKEYS", "FCALL_RO", "f", "1", "x", "y"],
            "*1\r\n$1\r\nx\r\n",
        ),
        (&["COMMAND", "GETKEYS", "EVAL", "return 1", "0"], "*0\r\n"),
        (
            &["COMMAND", "GETKEYS", "PING", "x"],
            "-ERR The command has no key arguments\r\n",
        ),
        (
            &["COMMAND", "GETKEYS", "SET", "a"],
            "-ERR Invalid number of arguments specified for command\r\n",
        ),
        (
            &["COMMAND", "GETKEYS", "NOSUCH", "a"],
            "-ERR Invalid command specified\r\n",
        ),
        (
            &["COMMAND", "GETKEYS", "GET"],
            "-ERR wrong number of arguments for 'command|getkeys' command\r\n",
        ),
    ];
    let mut redis = have_tool("redis-server").then(|| start_redis(free_port()));
    for (args, want) in cases {
        conn.check(args, want);
        if let Some(r) = &mut redis {
            Raw::connect(r.port).check(args, want);
        }
    }
    c.proxy.assert_no_panic();
}

/// `return 1+1` and `return 'loaded'`, by SHA-1.
const SHA_ADD: &str = "a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bd9";
const SHA_LOADED: &str = "b534286061d4b9e4026607613b95c06c06015ae8";

fn scripts_are_on_every_node_and_a_node_that_joins_gets_them_and_the_libraries(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(3);
    let port = c.proxy.port;
    let mut conn = Raw::connect(port);
    let mut admin = c.client();
    // An EVAL'd body is cached on every node, as on one Redis: SCRIPT
    // EXISTS (1 only where every node has it) and EVALSHA of a key on any
    // node find it.
    conn.check(&["EVAL", "return 1+1", "0"], ":2\r\n");
    conn.check(
        &["SCRIPT", "EXISTS", SHA_ADD, &SHA_LOADED[..39]],
        "*2\r\n:1\r\n:0\r\n",
    );
    let mut nodes = std::collections::HashSet::new();
    for i in 0..300 {
        let key = format!("k{i}");
        if nodes.insert(keynode(&mut admin, &key)) {
            conn.check(&["EVALSHA", SHA_ADD, "1", &key], ":2\r\n");
        }
    }
    assert_eq!(nodes.len(), 3);
    // A body that does not compile is refused by every node and does not
    // stop a node from joining later.
    let broken = conn.call(&["EVAL", "return (", "0"]);
    assert!(
        broken.starts_with("-ERR Error compiling script"),
        "{broken}"
    );
    conn.check(
        &["SCRIPT", "LOAD", "return 'loaded'"],
        &format!("$40\r\n{SHA_LOADED}\r\n"),
    );
    let lib =
        "#!lua name=keys\nredis.register_function('first', function(keys) return keys[1] end)";
    conn.check(&["FUNCTION", "LOAD", lib], "$4\r\nkeys\r\n");
    // A node that joins has them before it serves a key.
    let extra = b.start();
    add_node(&mut admin, &extra.addr(), "n4");
    wait_state_ok(&mut admin, 60);
    let mut direct = Raw::connect(extra.port);
    direct.check(
        &["SCRIPT", "EXISTS", SHA_ADD, SHA_LOADED],
        "*2\r\n:1\r\n:1\r\n",
    );
    let key = (0..2000)
        .map(|i| format!("j{i}"))
        .find(|k| keynode(&mut admin, k) == "n4")
        .expect("a key on the new node");
    conn.check(&["EVALSHA", SHA_LOADED, "1", &key], "$6\r\nloaded\r\n");
    conn.check(
        &["FCALL", "first", "1", &key],
        &format!("${}\r\n{key}\r\n", key.len()),
    );
    // SCRIPT FLUSH empties every node.
    conn.check(&["SCRIPT", "FLUSH"], "+OK\r\n");
    conn.check(&["SCRIPT", "EXISTS", SHA_ADD], "*1\r\n:0\r\n");
    direct.check(&["SCRIPT", "EXISTS", SHA_LOADED], "*1\r\n:0\r\n");
    c.proxy.assert_no_panic();
}

/// A keyless script runs where the keys its code names as literals live
/// (`script_keys`), so `EVAL "return redis.call('GET','k')" 0` reads `k`
/// wherever the ring put it, before and after a node joins, and so does
/// the `EVALSHA` of a body the proxy has seen; a function's
/// literal keys are learnt from `FUNCTION LOAD`. Literals on several nodes
/// are no `-CROSSSLOT`: such a script goes where its body would live.
fn a_keyless_script_runs_where_its_literal_keys_live(b: Backend) {
    if !b.is_available() {
        return;
    }
    let c = b.cluster(4);
    let port = c.proxy.port;
    let mut conn = Raw::connect(port);
    let mut admin = c.client();
    let read = |k: &str| {
        format!(
            "if redis.call(\"EXISTS\", \"{k}\") == 1 then return redis.call(\"GET\", \"{k}\") else return 'missing' end"
        )
    };
    let mut lib = String::from("#!lua name=lits\n");
    for i in 0..40 {
        let k = format!("key:{i}");
        conn.check(&["SET", &k, &format!("v{i}"), "EX", "100"], "+OK\r\n");
        let v = format!("v{i}");
        let want = format!("${}\r\n{v}\r\n", v.len());
        conn.check(&["EVAL", &read(&k), "0"], &want);
        conn.check(&["EVAL_RO", &read(&k), "0"], &want);
        // EVALSHA of a body the proxy has seen runs where its EVAL runs.
        let loaded = conn.call(&["SCRIPT", "LOAD", &read(&k)]);
        let sha = loaded.trim_end().rsplit("\r\n").next().unwrap().to_string();
        conn.check(&["EVALSHA", &sha, "0"], &want);
        conn.check(&["EVALSHA_RO", &sha.to_uppercase(), "0"], &want);
        let write = format!("return redis.call('SET', 's:{i}', 'y')");
        let loaded = conn.call(&["SCRIPT", "LOAD", &write]);
        let sha = loaded.trim_end().rsplit("\r\n").next().unwrap().to_string();
        conn.check(&["EVALSHA", &sha, "0"], "+OK\r\n");
        conn.check(&["GET", &format!("s:{i}")], "$1\r\ny\r\n");
        // A write lands on the key's node: GET finds it there.
        conn.check(
            &[
                "EVAL",
                &format!("return redis.call('SET', 'w:{i}', 'x')"),
                "0",
            ],
            "+OK\r\n",
        );
        conn.check(&["GET", &format!("w:{i}")], "$1\r\nx\r\n");
        if i % 2 == 0 {
            lib.push_str(&format!(
                "redis.register_function{{function_name='f{i}', callback=function() return redis.call('GET', '{k}') end, flags={{'no-writes'}}}}\n"
            ));
        } else {
            lib.push_str(&format!(
                "redis.register_function('f{i}', function() return redis.call('GET', '{k}') end)\n"
            ));
        }
    }
    let nodes: std::collections::HashSet<String> = (0..40)
        .map(|i| keynode(&mut admin, &format!("key:{i}")))
        .collect();
    assert_eq!(nodes.len(), 4, "the keys span every node");
    conn.check(&["FUNCTION", "LOAD", &lib], "$4\r\nlits\r\n");
    let check_functions = |conn: &mut Raw| {
        for i in 0..40 {
            let v = format!("v{i}");
            let want = format!("${}\r\n{v}\r\n", v.len());
            let f = format!("f{i}");
            conn.check(&["FCALL", &f, "0"], &want);
            if i % 2 == 0 {
                conn.check(&["FCALL_RO", &f, "0"], &want);
            }
        }
    };
    check_functions(&mut conn);
    // Literals on two nodes: the script still runs, on one node.
    let other = (0..200)
        .map(|i| format!("o{i}"))
        .find(|k| keynode(&mut admin, k) != keynode(&mut admin, "key:0"))
        .unwrap();
    let two = format!("redis.call('GET', 'key:0'); return redis.call('EXISTS', '{other}')");
    conn.check(&["EVAL", &two, "0"], ":0\r\n");
    // Declared keys still decide.
    let declared = conn.call(&["EVAL", "return redis.call('GET', 'key:0')", "1", &other]);
    assert!(!declared.starts_with("-CROSSSLOT"), "{declared}");
    // After a join, the same scripts follow their keys to their new nodes.
    let extra = b.start();
    add_node(&mut admin, &extra.addr(), "n5");
    wait_state_ok(&mut admin, 60);
    let moved = (0..40)
        .filter(|i| keynode(&mut admin, &format!("key:{i}")) == "n5")
        .count();
    assert!(moved > 0, "some key moved to the new node");
    for i in 0..40 {
        let v = format!("v{i}");
        conn.check(
            &["EVAL", &read(&format!("key:{i}")), "0"],
            &format!("${}\r\n{v}\r\n", v.len()),
        );
    }
    check_functions(&mut conn);
    // FUNCTION FLUSH forgets the functions' keys with the functions.
    conn.check(&["FUNCTION", "FLUSH"], "+OK\r\n");
    let again = "#!lua name=again\nredis.register_function('f0', function() return redis.call('GET', 'key:7') end)";
    conn.check(&["FUNCTION", "LOAD", again], "$5\r\nagain\r\n");
    conn.check(&["FCALL", "f0", "0"], "$2\r\nv7\r\n");
    c.proxy.assert_no_panic();
}

crate::on_both_backends!(
    a_keyless_script_runs_where_its_literal_keys_live,
    scripts_are_on_every_node_and_a_node_that_joins_gets_them_and_the_libraries,
    a_busy_script_leaves_others_answered_busy_until_script_kill,
    function_stats_names_the_running_function_and_function_kill_stops_it,
    a_pipelined_load_and_the_call_that_uses_it_keep_their_order,
    command_getkeys_answers_as_redis_does,
);
