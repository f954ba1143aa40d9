//! A long script on the built-in node, as Redis 7 handles one: it runs on,
//! other clients wait until `busy-reply-threshold` (alias `lua-time-limit`,
//! set with CONFIG SET) and then get `-BUSY`; SCRIPT KILL or FUNCTION KILL
//! from another connection stops it unless it wrote (`-UNKILLABLE`). A
//! script inside EXEC, where no other client can be served, is stopped past
//! the threshold; a library's load-time code past Redis's 500 ms load
//! timeout.

mod common;

use common::{start_call, until_busy, Raw};
use std::time::Duration;

const SPIN: &str = "local a = 1 while true do a = a + 1 end";

#[test]
fn a_busy_script_is_refused_to_others_and_killed_by_script_kill() {
    let port = common::free_port();
    let _node = common::start_node(port);
    let mut c = Raw::connect(port);
    c.check(&["CONFIG", "SET", "lua-time-limit", "50"], "+OK\r\n");
    c.check(
        &["CONFIG", "GET", "busy-reply-threshold"],
        "*2\r\n$20\r\nbusy-reply-threshold\r\n$2\r\n50\r\n",
    );
    c.check(
        &["SCRIPT", "KILL"],
        "-NOTBUSY No scripts in execution right now.\r\n",
    );
    let mut spinning = start_call(port, &["EVAL", SPIN, "0"]);
    assert_eq!(
        until_busy(&mut c),
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    c.check(
        &["FUNCTION", "KILL"],
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n",
    );
    c.check(&["MULTI"], "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n");
    c.check(&["SCRIPT", "KILL"], "+OK\r\n");
    let reply = String::from_utf8_lossy(&spinning.reply()).into_owned();
    assert!(
        reply.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{reply}"
    );
    c.check(&["PING"], "+PONG\r\n");
    // The killed connection goes on.
    spinning.send(&[b"PING"]);
    assert_eq!(spinning.reply(), b"+PONG\r\n");
}

#[test]
fn a_busy_function_is_killed_by_function_kill_and_pcall_cannot_catch_it() {
    let port = common::free_port();
    let _node = common::start_node(port);
    let mut c = Raw::connect(port);
    c.check(&["CONFIG", "SET", "busy-reply-threshold", "50"], "+OK\r\n");
    let lib = "#!lua name=spin\nredis.register_function('spin', function() while true do pcall(function() while true do end end) end end)";
    c.check(&["FUNCTION", "LOAD", lib], "$4\r\nspin\r\n");
    let mut spinning = start_call(port, &["FCALL", "spin", "0"]);
    assert_eq!(
        until_busy(&mut c),
        "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"
    );
    c.check(
        &["SCRIPT", "KILL"],
        "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n",
    );
    c.check(&["FUNCTION", "KILL"], "+OK\r\n");
    let reply = String::from_utf8_lossy(&spinning.reply()).into_owned();
    assert!(reply.contains("Script killed by user"), "{reply}");
    c.check(&["PING"], "+PONG\r\n");
}

#[test]
fn a_script_that_wrote_is_unkillable_and_its_writes_stay() {
    let port = common::free_port();
    let _node = common::start_node(port);
    let mut c = Raw::connect(port);
    c.check(&["CONFIG", "SET", "busy-reply-threshold", "50"], "+OK\r\n");
    // Writes, then spins for 600 ms by the server's clock, then returns.
    let script = "redis.call('set', KEYS[1], 'y') \
        local t0 = redis.call('time') \
        local function ms(t) return t[1] * 1000 + math.floor(t[2] / 1000) end \
        while ms(redis.call('time')) - ms(t0) < 600 do end \
        return 'done'";
    let mut writer = start_call(port, &["EVAL", script, "1", "x"]);
    until_busy(&mut c);
    c.check(
        &["SCRIPT", "KILL"],
        "-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n",
    );
    assert_eq!(writer.reply(), b"$4\r\ndone\r\n");
    c.check(&["GET", "x"], "$1\r\ny\r\n");
}

#[test]
fn others_wait_for_a_short_script_instead_of_being_refused() {
    let port = common::free_port();
    let _node = common::start_node(port);
    let mut c = Raw::connect(port);
    let script = "local t0 = redis.call('time') \
        while redis.call('time')[1] * 1000000 + redis.call('time')[2] - t0[1] * 1000000 - t0[2] < 200000 do end \
        return redis.call('incr', KEYS[1])";
    let mut slow = start_call(port, &["EVAL", script, "1", "n"]);
    std::thread::sleep(Duration::from_millis(50));
    // Queued behind the script, as behind Redis's one thread.
    c.check(&["INCR", "n"], ":2\r\n");
    assert_eq!(slow.reply(), b":1\r\n");
}

#[test]
fn a_script_inside_exec_past_the_threshold_is_stopped_and_the_node_serves_again() {
    let port = common::free_port();
    let _node = common::start_node(port);
    let mut c = Raw::connect(port);
    c.check(&["CONFIG", "SET", "busy-reply-threshold", "100"], "+OK\r\n");
    c.check(&["MULTI"], "+OK\r\n");
    c.check(&["SET", "k", "v"], "+QUEUED\r\n");
    c.check(
        &["EVAL", "redis.call('set','k','w') while true do end", "0"],
        "+QUEUED\r\n",
    );
    let reply = c.call(&["EXEC"]);
    assert!(
        reply.contains("Script killed: it ran longer than 100 ms"),
        "{reply}"
    );
    c.check(&["GET", "k"], "$1\r\nw\r\n");

    let reply = c.call(&["FUNCTION", "LOAD", "#!lua name=spin\nwhile true do end"]);
    assert!(reply.contains("FUNCTION LOAD timeout"), "{reply}");
    c.check(&["FUNCTION", "LIST"], "*0\r\n");
    c.check(&["EVAL", "return 1", "0"], ":1\r\n");
    let mut other = Raw::connect(port);
    other.check(&["PING"], "+PONG\r\n");
}

#[test]
fn a_script_returning_a_table_that_contains_itself_gets_a_nested_reply_and_the_error() {
    let port = common::free_port();
    let _node = common::start_node(port);
    let mut c = Raw::connect(port);
    let r = c.call(&[
        "EVAL",
        "local a = {}; local b = {a}; a[1] = b; return a",
        "0",
    ]);
    let levels = r.matches("*1\r\n").count();
    assert!(levels >= 100, "{levels} levels");
    assert_eq!(
        r,
        format!(
            "{}-ERR reached lua stack limit\r\n",
            "*1\r\n".repeat(levels)
        )
    );
    c.check(&["PING"], "+PONG\r\n");
}

#[test]
fn a_new_connection_logs_in_while_a_script_runs_and_kills_it() {
    let port = common::free_port();
    let mut node = common::Proc::spawn(
        std::process::Command::new(common::BIN)
            .args(["node", "--port", &port.to_string(), "--requirepass", "pw"])
            .stdout(std::process::Stdio::null()),
        port,
        "node",
    );
    node.wait_ready();
    let mut c = Raw::connect(port);
    let mut spinning = Raw::connect(port);
    c.check(&["AUTH", "pw"], "+OK\r\n");
    c.check(&["CONFIG", "SET", "busy-reply-threshold", "50"], "+OK\r\n");
    spinning.check(&["AUTH", "pw"], "+OK\r\n");
    spinning.send(&[b"EVAL", SPIN.as_bytes(), b"0"]);
    // Before the threshold, as a proxy's kill connection may.
    std::thread::sleep(Duration::from_millis(10));
    let mut early = Raw::connect(port);
    early.check(&["AUTH", "pw"], "+OK\r\n");
    until_busy(&mut c);
    // And past it.
    let mut fresh = Raw::connect(port);
    fresh.check(&["AUTH", "pw"], "+OK\r\n");
    let hello = fresh.call(&["HELLO", "2", "AUTH", "default", "pw"]);
    assert!(hello.starts_with("*"), "{hello}");
    fresh.check(&["SCRIPT", "KILL"], "+OK\r\n");
    let reply = String::from_utf8_lossy(&spinning.reply()).into_owned();
    assert!(reply.starts_with("-ERR Script killed by user"), "{reply}");
    fresh.check(&["PING"], "+PONG\r\n");
    node.assert_no_panic();
}

#[test]
fn a_script_that_may_write_is_refused_out_of_memory_before_it_runs() {
    let port = common::free_port();
    let node = common::start_node(port);
    let mut c = Raw::connect(port);
    const OOM: &str = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    c.check(&["CONFIG", "SET", "maxmemory", "1"], "+OK\r\n");
    c.check(&["SET", "x", "y"], OOM);
    for _ in 0..50 {
        c.check(&["EVAL", "#!lua\nreturn 1", "0"], OOM);
    }
    // Declared read-only, or without flags (checked at its first write).
    c.check(&["EVAL", "#!lua flags=no-writes\nreturn 1", "0"], ":1\r\n");
    c.check(&["EVAL", "return 1", "0"], ":1\r\n");
    c.check(&["CONFIG", "SET", "maxmemory", "0"], "+OK\r\n");
    c.check(&["EVAL", "#!lua\nreturn 1", "0"], ":1\r\n");
    node.assert_no_panic();
}

#[test]
fn writes_and_scripts_that_may_write_are_refused_without_enough_good_replicas() {
    let port = common::free_port();
    let node = common::start_node(port);
    let mut c = Raw::connect(port);
    c.check(&["SET", "x", "some value"], "+OK\r\n");
    c.check(&["CONFIG", "SET", "min-replicas-to-write", "1"], "+OK\r\n");
    const NOREPLICAS: &str = "-NOREPLICAS Not enough good replicas to write.\r\n";
    c.check(&["SET", "x", "1"], NOREPLICAS);
    let value = "$10\r\nsome value\r\n";
    let get = "return redis.call('get',KEYS[1])";
    c.check(
        &["EVAL", &format!("#!lua flags=no-writes\n{get}"), "1", "x"],
        value,
    );
    c.check(&["EVAL", get, "1", "x"], value);
    c.check(&["EVAL", &format!("#!lua\n{get}"), "1", "x"], NOREPLICAS);
    let set = c.call(&["EVAL", "return redis.call('set',KEYS[1],1)", "1", "x"]);
    assert!(set.starts_with("-NOREPLICAS"), "{set}");
    // A replica that acknowledges is a good one.
    let rport = common::free_port();
    let replica = common::start_node(rport);
    let mut r = Raw::connect(rport);
    r.check(&["REPLICAOF", "127.0.0.1", &port.to_string()], "+OK\r\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while c.call(&["SET", "x", "2"]) != "+OK\r\n" {
        assert!(
            std::time::Instant::now() < deadline,
            "the replica never counted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    c.check(&["CONFIG", "SET", "min-replicas-to-write", "0"], "+OK\r\n");
    // Out of memory, a script's first write is refused too.
    c.check(&["CONFIG", "SET", "maxmemory", "1"], "+OK\r\n");
    let oom = c.call(&["EVAL", "return redis.call('set',KEYS[1],'y')", "1", "x"]);
    assert!(oom.starts_with("-OOM command not allowed"), "{oom}");
    node.assert_no_panic();
    replica.assert_no_panic();
}
