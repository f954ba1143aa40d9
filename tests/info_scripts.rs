//! INFO commandstats, errorstats and total_error_replies for the commands
//! scripts run: through `shardis up` (built-in nodes) they read as one
//! redis-server's do for the same sequence — Redis's own test "Consistent
//! eval error reporting" (unit/scripting.tcl), step by step.

mod common;

use common::*;

/// The commands whose `cmdstat_` lines each step compares.
const WATCHED: &[&str] = &["set", "select", "geoadd", "eval", "eval_ro", "get"];

/// The suite's steps: what runs after `CONFIG RESETSTAT`.
const STEPS: &[&[&[&str]]] = &[
    // OOM refuses the call: the script fails with it.
    &[
        &["CONFIG", "SET", "maxmemory", "1"],
        &["EVAL", "return redis.call('set','x','y')", "1", "x"],
    ],
    // redis.pcall catches the OOM.
    &[&[
        "EVAL",
        "local t = redis.pcall('set','x','y') if t['err'] == \"OOM command not allowed when used memory > 'maxmemory'.\" then return 1 else return 0 end",
        "1",
        "x",
    ]],
    // The error redis.pcall returned is the script's reply.
    &[&["EVAL", "return redis.pcall('set','x','y')", "1", "x"]],
    // The command itself fails.
    &[
        &["CONFIG", "SET", "maxmemory", "0"],
        &["EVAL", "return redis.call('select',99)", "0"],
    ],
    &[&[
        "EVAL",
        "local t = redis.pcall('select',99) if t['err'] == \"ERR DB index is out of range\" then return 1 else return 0 end",
        "0",
    ]],
    // A write from a read-only script.
    &[&["EVAL_RO", "return redis.call('set','x','y')", "1", "x"]],
    &[&[
        "EVAL_RO",
        "local t = redis.pcall('set','x','y') if t['err'] == \"ERR Write commands are not allowed from read-only scripts.\" then return 1 else return 0 end",
        "1",
        "x",
    ]],
    // WRONGTYPE from a command the script ran.
    &[
        &["SET", "Sicily", "1"],
        &[
            "EVAL",
            "return redis.call('GEOADD', 'Sicily', '13.361389', '38.115556', 'Palermo', '15.087269', '37.502669', 'Catania')",
            "1",
            "x",
        ],
    ],
    // Errors a script makes itself are counted as its reply; calls that
    // succeed are counted as calls.
    &[
        &["EVAL", "redis.call('get','x') return redis.error_reply('MY_ERR mine')", "0"],
        &["EVAL", "error('oops')", "0"],
        &["EVAL", "return redis.pcall('nosuchcommand')", "0"],
    ],
];

fn run(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(con) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error: {}", e.code().unwrap_or("?")),
    }
}

fn info(con: &mut redis::Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(con).unwrap()
}

/// What a step leaves in INFO: every errorstat line, total_error_replies and
/// the watched commands' counts (without their times).
fn observe(con: &mut redis::Connection) -> Vec<String> {
    let errors = info(con, "errorstats");
    let mut seen: Vec<String> = errors
        .split("\r\n")
        .filter(|l| l.starts_with("errorstat_"))
        .map(str::to_string)
        .collect();
    let stats = info(con, "stats");
    seen.extend(
        stats
            .split("\r\n")
            .filter(|l| l.starts_with("total_error_replies:"))
            .map(str::to_string),
    );
    let commands = info(con, "commandstats");
    for name in WATCHED {
        let prefix = format!("cmdstat_{name}:");
        let line = commands
            .split("\r\n")
            .find_map(|l| l.strip_prefix(&prefix))
            .map(|v| {
                v.split(',')
                    .filter(|kv| !kv.starts_with("usec"))
                    .collect::<Vec<_>>()
                    .join(",")
            });
        seen.push(format!("{name}: {}", line.unwrap_or_default()));
    }
    seen
}

/// Every step on `port`: the replies, then what INFO shows.
fn sequence(port: u16) -> Vec<Vec<String>> {
    let mut con = connect(port);
    let mut all = Vec::new();
    for step in STEPS {
        run(&mut con, &["CONFIG", "RESETSTAT"]);
        let mut seen: Vec<String> = step.iter().map(|c| run(&mut con, c)).collect();
        seen.extend(observe(&mut con));
        all.push(seen);
    }
    run(&mut con, &["CONFIG", "SET", "maxmemory", "0"]);
    all
}

fn has(step: &[String], line: &str) -> bool {
    step.iter().any(|l| l == line)
}

#[test]
fn script_calls_count_in_info_as_on_one_redis_server() {
    let up = Up::start(3, &[]);
    let ours = sequence(up.port());
    // The suite's expectations, which hold with or without a redis-server.
    let s = &ours[0];
    assert!(has(s, "errorstat_OOM:count=1"), "{s:?}");
    assert!(has(s, "total_error_replies:1"), "{s:?}");
    assert!(
        has(s, "set: calls=0,rejected_calls=1,failed_calls=0"),
        "{s:?}"
    );
    assert!(
        has(s, "eval: calls=1,rejected_calls=0,failed_calls=1"),
        "{s:?}"
    );
    let s = &ours[1];
    assert!(!s.iter().any(|l| l.starts_with("errorstat_ERR")), "{s:?}");
    assert!(has(s, "errorstat_OOM:count=1"), "{s:?}");
    assert!(
        has(s, "eval: calls=1,rejected_calls=0,failed_calls=0"),
        "{s:?}"
    );
    let s = &ours[2];
    assert!(has(s, "total_error_replies:1"), "{s:?}");
    assert!(
        has(s, "eval: calls=1,rejected_calls=0,failed_calls=1"),
        "{s:?}"
    );
    let s = &ours[3];
    assert!(has(s, "errorstat_ERR:count=1"), "{s:?}");
    assert!(
        has(s, "select: calls=1,rejected_calls=0,failed_calls=1"),
        "{s:?}"
    );
    let s = &ours[5];
    assert!(has(s, "errorstat_ERR:count=1"), "{s:?}");
    assert!(
        has(s, "eval_ro: calls=1,rejected_calls=0,failed_calls=1"),
        "{s:?}"
    );
    let s = &ours[7];
    assert!(has(s, "errorstat_WRONGTYPE:count=1"), "{s:?}");
    assert!(
        has(s, "geoadd: calls=1,rejected_calls=0,failed_calls=1"),
        "{s:?}"
    );
    let (status, err) = up.stop();
    assert!(status.success(), "{err}");
    if !Backend::Redis.is_available() {
        return;
    }
    let redis = start_redis(free_port());
    let theirs = sequence(redis.port);
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "step {i}: {:?}", STEPS[i]);
    }
}
