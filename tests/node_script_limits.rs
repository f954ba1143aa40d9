//! A script without end does not hang the built-in node: past
//! busy-reply-threshold (5 s) the node stops it with an error, keeps the
//! writes it made before (as after any script error), and serves every
//! client again. A `pcall` around the loop cannot catch its way out, and
//! a library whose load-time code never ends is stopped the same way.

mod common;

use common::Raw;

fn killed(reply: &str) -> bool {
    reply.starts_with("-ERR Script killed") || reply.contains("Script killed: it ran longer")
}

#[test]
fn a_script_without_end_is_stopped_and_the_node_serves_again() {
    let port = common::free_port();
    let _node = common::start_node(port);
    let mut c = Raw::connect(port);
    c.check(&["SET", "k", "v"], "+OK\r\n");
    let reply = c.call(&["EVAL", "redis.call('set','k','w') while true do end", "0"]);
    assert!(killed(&reply), "{reply}");
    c.check(&["GET", "k"], "$1\r\nw\r\n");

    let reply = c.call(&[
        "EVAL",
        "while true do pcall(function() while true do end end) end",
        "0",
    ]);
    assert!(killed(&reply), "{reply}");

    let reply = c.call(&["FUNCTION", "LOAD", "#!lua name=spin\nwhile true do end"]);
    assert!(killed(&reply), "{reply}");
    c.check(&["FUNCTION", "LIST"], "*0\r\n");

    // The next script runs on a fresh clock.
    c.check(&["EVAL", "return 1", "0"], ":1\r\n");
    let mut other = Raw::connect(port);
    other.check(&["PING"], "+PONG\r\n");
}
