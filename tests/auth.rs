//! Users with Redis's semantics, compared byte for byte with a redis-server
//! configured the same way (`requirepass` and one restricted user):
//!
//! * before AUTH only AUTH, HELLO … AUTH, QUIT and RESET are served; an
//!   unknown command or a wrong argument count is answered first, as Redis does;
//! * a wrong password, a wrong user, HELLO with a wrong password: `-WRONGPASS`;
//! * a user is refused the commands, keys and channels its class and
//!   patterns do not cover (`-NOPERM`), with Redis 7.2's texts: Debian's
//!   redis-server 7.0 words those four replies differently
//!   ([`as_redis_7_2`] says how), every other reply is the same bytes;
//! * ACL WHOAMI, USERS, CAT and the default user's ACL LIST line are Redis's;
//! * an unauthenticated client gets Redis's tighter request limits.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use common::*;

/// The proxy's users, in its config.
pub const USERS: &str = "requirepass = \"secret\"\n\
    [[users]]\nname = \"alice\"\npassword = \"apw\"\ncommands = \"read\"\n\
    keys = [\"foo:*\"]\nchannels = [\"chan:*\"]\n";

/// The same users for redis-server (an ACL file): `read` is +@read
/// +@connection there; SUBSCRIBE is added so its channel check is reached.
const REDIS_ACL: &str = "user default on >secret ~* &* +@all\n\
    user alice on >apw ~foo:* &chan:* +@read +@connection +subscribe\n";

/// A proxy with [`USERS`] over one built-in node.
pub fn proxy_with_users(extra: &str) -> (Proc, Proc, tempdir::Dir) {
    let node = start_node(free_port());
    let (proxy, dir) = start_proxy(&[node.addr()], &format!("{USERS}{extra}"));
    (node, proxy, dir)
}

fn redis_with_users(dir: &tempdir::Dir) -> Proc {
    let acl = dir.path().join("users.acl");
    std::fs::write(&acl, REDIS_ACL).unwrap();
    let port = free_port();
    let mut args = redis_args(port);
    args.extend(["--aclfile".into(), acl.to_str().unwrap().into()]);
    spawn_redis(port, args)
}

/// Redis 7.0's wording of a reply, as Redis 7.2 words it (for `user`). The
/// four texts that changed between them; anything else is returned as is.
fn as_redis_7_2(reply: &[u8], user: &str) -> Vec<u8> {
    let r = String::from_utf8_lossy(reply).into_owned();
    let r = r
        .replace(
            "-NOPERM this user has no permissions to run the",
            &format!("-NOPERM User {user} has no permissions to run the"),
        )
        .replace(
            "-NOPERM this user has no permissions to access one of the keys used as arguments",
            "-NOPERM No permissions to access a key",
        )
        .replace(
            "-NOPERM this user has no permissions to access one of the channels used as arguments",
            "-NOPERM No permissions to access a channel",
        )
        .replace(
            "the HELLO AUTH <user> <pass> option",
            "the HELLO <proto> AUTH <user> <pass> option",
        );
    r.into_bytes()
}

/// Each step's reply from both servers, on one connection each.
fn both(proxy: u16, redis: u16, steps: &[&[&str]], user: &str) -> Vec<(String, String, bool)> {
    let (mut p, mut r) = (Raw::connect(proxy), Raw::connect(redis));
    steps
        .iter()
        .map(|args| {
            let ours = p.call(args);
            let theirs = String::from_utf8_lossy(
                &r.call_bytes(&args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>()),
            )
            .into_owned();
            let worded =
                String::from_utf8_lossy(&as_redis_7_2(theirs.as_bytes(), user)).into_owned();
            (ours, worded.clone(), worded != theirs)
        })
        .collect()
}

#[test]
fn authentication_errors_and_refusals_match_redis_byte_for_byte() {
    if !have_tool("redis-server") {
        return skip(
            "redis-server is not installed",
            "apt-get install redis-server",
        );
    }
    let (_node, proxy, dir) = proxy_with_users("");
    let redis = redis_with_users(&dir);
    let sessions: &[(&str, &[&[&str]])] = &[
        (
            "-",
            &[
                &["GET", "x"],
                &["PING"],
                &["MULTI"],
                &["HELLO", "3"],
                &["HELLO"],
            ],
        ),
        ("-", &[&["FOO"], &["GET"], &["AUTH"], &["HELLO", "4"]]),
        (
            "-",
            &[
                &["AUTH", "wrong"],
                &["AUTH", "alice", "wrong"],
                &["AUTH", "nobody", "apw"],
            ],
        ),
        (
            "-",
            &[
                &["AUTH", "a", "b", "c"],
                &["HELLO", "3", "AUTH", "alice", "wrong"],
                &["GET", "x"],
            ],
        ),
        ("-", &[&["RESET"], &["QUIT"]]),
        (
            "alice",
            &[
                &["AUTH", "alice", "apw"],
                &["SET", "foo:1", "x"],
                &["GET", "bar"],
                &["GET", "foo:1"],
                &["MGET", "foo:1", "bar"],
                &["FLUSHALL"],
                &["SUBSCRIBE", "x"],
                &["AUTH", "alice", "wrong"],
                &["GET", "bar"],
                &["AUTH", "default", "wrong"],
                &["RESET"],
                &["GET", "foo:1"],
            ],
        ),
        (
            "default",
            &[
                &["AUTH", "secret"],
                &["ACL", "WHOAMI"],
                &["ACL", "USERS"],
                &["ACL", "CAT"],
                &["ACL", "CAT", "nosuch"],
                &["ACL", "WHOAMI", "extra"],
                &["AUTH", "default", "secret"],
                &["GET", "foo:1"],
            ],
        ),
    ];
    let mut reworded = 0;
    for (user, steps) in sessions {
        for ((ours, theirs, changed), args) in both(proxy.port, redis.port, steps, user)
            .into_iter()
            .zip(steps.iter())
        {
            assert_eq!(ours, theirs, "{args:?} as {user}");
            reworded += changed as usize;
        }
    }
    // NOAUTH HELLO twice, SET, GET bar twice, MGET, FLUSHALL, SUBSCRIBE.
    assert_eq!(reworded, 8, "the replies Redis 7.0 words differently");
    // The default user's ACL LIST line, hashed, is Redis's.
    let line = |port: u16| {
        let mut c = Raw::connect(port);
        c.check(&["AUTH", "secret"], "+OK\r\n");
        c.call(&["ACL", "LIST"])
            .split("\r\n")
            .find(|l| l.starts_with("user default"))
            .unwrap()
            .to_string()
    };
    assert_eq!(line(proxy.port), line(redis.port));
}

#[test]
fn an_unauthenticated_client_gets_redis_tighter_request_limits() {
    if !have_tool("redis-server") {
        return skip(
            "redis-server is not installed",
            "apt-get install redis-server",
        );
    }
    let (_node, proxy, dir) = proxy_with_users("");
    let redis = redis_with_users(&dir);
    let big = format!("*2\r\n$4\r\nAUTH\r\n$20000\r\n{}\r\n", "x".repeat(20_000));
    for req in ["*11\r\n".to_string(), "*2\r\n$20000\r\n".into(), big] {
        let answer = |port: u16| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            String::from_utf8_lossy(&read_to_close(&mut s)).into_owned()
        };
        let ours = answer(proxy.port);
        assert_eq!(ours, answer(redis.port), "{:?}", &req[..req.len().min(20)]);
        assert!(
            ours.starts_with("-ERR Protocol error: unauthenticated"),
            "{ours}"
        );
    }
    // Once authenticated, the usual limits apply.
    let mut c = Raw::connect(proxy.port);
    c.check(&["AUTH", "secret"], "+OK\r\n");
    let value = "v".repeat(100_000);
    c.check(&["SET", "foo:big", &value], "+OK\r\n");
    let args: Vec<String> = (0..20).map(|i| format!("foo:{i}")).collect();
    let mut del = vec!["DEL"];
    del.extend(args.iter().map(|s| s.as_str()));
    c.check(&del, ":0\r\n");
}

#[test]
fn hello_authenticates_and_selects_the_protocol_at_once() {
    let (_node, proxy, _dir) = proxy_with_users("");
    let mut c = Raw::connect(proxy.port);
    let r = c.call(&["HELLO", "3", "AUTH", "alice", "apw", "SETNAME", "me"]);
    assert!(r.starts_with("%7\r\n"), "{r}");
    c.check(&["ACL", "WHOAMI"], "$5\r\nalice\r\n");
    c.check(&["CLIENT", "GETNAME"], "$2\r\nme\r\n");
    // A wrong password changes nothing: still alice, still RESP3.
    c.check(
        &["HELLO", "2", "AUTH", "default", "nope"],
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    c.check(&["ACL", "WHOAMI"], "$5\r\nalice\r\n");
    c.check(&["GET", "foo:nothing"], "_\r\n");
}

#[test]
fn redis_cli_authenticates_with_a_user_and_a_password() {
    if !have_tool("redis-cli") {
        return skip("redis-cli is not installed", "apt-get install redis-tools");
    }
    let (_node, proxy, _dir) = proxy_with_users("");
    let port = proxy.port.to_string();
    let run = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["-p", &port, "--no-auth-warning"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(run(&["-a", "secret", "SET", "foo:1", "v"]), "OK");
    assert_eq!(
        run(&["--user", "alice", "--pass", "apw", "GET", "foo:1"]),
        "v"
    );
    assert_eq!(
        run(&["--user", "alice", "--pass", "apw", "SET", "foo:1", "w"]),
        "NOPERM User alice has no permissions to run the 'set' command"
    );
    assert_eq!(run(&["GET", "foo:1"]), "NOAUTH Authentication required.");
}
