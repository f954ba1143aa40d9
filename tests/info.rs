//! INFO and MEMORY through the proxy: Redis 7's sections and layout, the
//! fields tools read (summed over the nodes where Redis would report one
//! server's figure), and MEMORY USAGE asked of the key's node.

mod common;

use common::*;

fn info(port: u16, args: &[&str]) -> String {
    info_on(&mut connect(port), args)
}

fn info_on(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd("INFO");
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(con).unwrap()
}

fn titles(info: &str) -> Vec<&str> {
    info.split("\r\n").filter(|l| l.starts_with("# ")).collect()
}

#[test]
fn info_has_redis_7_sections_laid_out_as_redis_and_sums_the_nodes() {
    let up = Up::start(3, &[]);
    let port = up.port();
    set_keys(port, "k", 30);
    let default = info(port, &[]);
    assert_eq!(
        titles(&default),
        [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Modules",
            "# Errorstats",
            "# Cluster",
            "# Keyspace"
        ]
    );
    // Redis ends the text with CRLF and separates sections with one blank line;
    // redis-cli --stat reads a field up to its CRLF.
    assert!(default.ends_with("\r\n"), "{default:?}");
    assert!(!default.contains("\r\n\r\n\r\n"));
    assert_eq!(default.matches("\r\n\r\n# ").count(), 10);
    for field in [
        "used_memory:",
        "used_memory_human:",
        "used_memory_peak:",
        "maxmemory:",
        "maxmemory_human:",
        "maxmemory_policy:",
        "mem_fragmentation_ratio:",
        "blocked_clients:0\r\n",
        "total_connections_received:",
        "total_commands_processed:",
        "instantaneous_ops_per_sec:",
        "keyspace_hits:",
        "keyspace_misses:",
        "evicted_keys:",
        "expired_keys:",
        "role:master\r\n",
        "connected_slaves:0\r\n",
        "cluster_enabled:1\r\n",
        "used_cpu_sys:",
        "db0:keys=30,",
    ] {
        assert!(default.contains(field), "{field} missing from {default}");
    }
    // used_memory is the sum over the nodes.
    let sum: u64 = (0..3)
        .map(|i| {
            let t = info_on(&mut up.node(up.first_node_port + i), &["memory"]);
            field(&t, "used_memory").parse::<u64>().unwrap()
        })
        .sum();
    let proxy_used: u64 = field(&info(port, &["memory"]), "used_memory")
        .parse()
        .unwrap();
    assert_eq!(proxy_used, sum);
    assert_eq!(
        info(port, &["default"])
            .lines()
            .filter(|l| l.starts_with('#'))
            .count(),
        11
    );
    let all = info(port, &["all"]);
    assert!(all.contains("# Commandstats\r\n") && all.contains("# Latencystats\r\n"));
    assert_eq!(titles(&info(port, &["everything"])), titles(&all));
    assert_eq!(
        titles(&info(port, &["keyspace", "MEMORY"])),
        ["# Memory", "# Keyspace"],
        "Redis's order, any case"
    );
    // An unknown section is an empty bulk, as in Redis.
    assert_eq!(
        raw(port, b"*2\r\n$4\r\nINFO\r\n$6\r\nnosuch\r\n", 6),
        b"$0\r\n\r\n"
    );
    // The node's own INFO has the same shape.
    let node = info_on(&mut up.node(up.first_node_port), &[]);
    assert_eq!(titles(&node), titles(&default));
    assert!(node.ends_with("\r\n"));
}

fn field<'a>(info: &'a str, name: &str) -> &'a str {
    info.split("\r\n")
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("{name} missing from {info}"))
}

#[test]
fn memory_usage_is_asked_of_the_keys_node_and_other_subcommands_answer() {
    let up = Up::start(3, &[]);
    let mut con = connect(up.port());
    let _: () = redis::cmd("SET")
        .arg("m")
        .arg("x".repeat(1000))
        .query(&mut con)
        .unwrap();
    let used: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("m")
        .query(&mut con)
        .unwrap();
    assert!(used >= 1000, "{used}");
    let used: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("m")
        .arg("SAMPLES")
        .arg("0")
        .query(&mut con)
        .unwrap();
    assert!(used >= 1000);
    let none: Option<i64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("nosuch")
        .query(&mut con)
        .unwrap();
    assert_eq!(none, None);
    let doctor: String = redis::cmd("MEMORY").arg("DOCTOR").query(&mut con).unwrap();
    assert!(doctor.contains("3 of 3 nodes answered"), "{doctor}");
    let stats: Vec<redis::Value> = redis::cmd("MEMORY").arg("STATS").query(&mut con).unwrap();
    assert!(stats.len() >= 6);
    let help: Vec<String> = redis::cmd("MEMORY").arg("HELP").query(&mut con).unwrap();
    assert!(help.iter().any(|l| l.starts_with("USAGE")));
    for (sub, want) in [
        ("MALLOC-STATS", "is per node"),
        ("PURGE", "is per node"),
        ("NOSUCH", "unknown subcommand 'NOSUCH'. Try MEMORY HELP."),
    ] {
        let r: redis::RedisResult<String> = redis::cmd("MEMORY").arg(sub).query(&mut con);
        let e = r.unwrap_err().to_string();
        assert!(e.contains(want), "{sub}: {e}");
    }
}

#[test]
fn commandstats_and_errorstats_count_what_clients_were_answered_until_resetstat() {
    let up = Up::start(3, &[]);
    let port = up.port();
    let mut c = Raw::connect(port);
    c.check(&["CONFIG", "RESETSTAT"], "+OK\r\n");
    c.check(&["SET", "k", "v"], "+OK\r\n");
    // Refused by the proxy before any node saw it: rejected.
    c.check(
        &["SET", "k"],
        "-ERR wrong number of arguments for 'set' command\r\n",
    );
    // Errors a node returned: failed, counted by their code.
    c.check(
        &[
            "EVAL",
            "return redis.error_reply('MY_ERR_CODE custom msg')",
            "0",
        ],
        "-MY_ERR_CODE custom msg\r\n",
    );
    let nogroup = c.call(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "nosuch", ">"]);
    assert!(nogroup.starts_with("-NOGROUP"), "{nogroup}");
    let errors = info(port, &["errorstats"]);
    for line in [
        "errorstat_ERR:count=1\r\n",
        "errorstat_MY_ERR_CODE:count=1\r\n",
        "errorstat_NOGROUP:count=1\r\n",
    ] {
        assert!(errors.contains(line), "{line} in {errors}");
    }
    assert_eq!(field(&info(port, &["stats"]), "total_error_replies"), "3");
    let commands = info(port, &["commandstats"]);
    let set = field(&commands, "cmdstat_set");
    assert!(set.starts_with("calls=1,usec="), "{set}");
    assert!(set.ends_with(",rejected_calls=1,failed_calls=0"), "{set}");
    let xrg = field(&commands, "cmdstat_xreadgroup");
    assert!(xrg.ends_with(",rejected_calls=0,failed_calls=1"), "{xrg}");
    // Not in a plain INFO, as in Redis; errorstats is.
    let plain = info(port, &[]);
    assert!(!plain.contains("cmdstat_"));
    assert!(plain.contains("errorstat_NOGROUP"));
    // A client inventing error codes cannot grow the table without bound.
    for i in 0..300 {
        let script = format!("return redis.error_reply('CODE{i} x')");
        c.check(&["EVAL", &script, "0"], &format!("-CODE{i} x\r\n"));
    }
    let errors = info(port, &["errorstats"]);
    assert_eq!(errors.matches("errorstat_").count(), 128, "{errors}");
    assert_eq!(field(&info(port, &["stats"]), "total_error_replies"), "303");
    // RESETSTAT starts them again.
    c.check(&["CONFIG", "RESETSTAT"], "+OK\r\n");
    assert!(!info(port, &["errorstats"]).contains("errorstat_"));
    assert_eq!(field(&info(port, &["stats"]), "total_error_replies"), "0");
    let commands = info(port, &["commandstats"]);
    assert!(!commands.contains("cmdstat_set:"), "{commands}");
    assert!(!commands.contains("cmdstat_eval:"), "{commands}");
    assert!(commands.contains("cmdstat_config:calls=1,"), "{commands}");
    let (_, stderr) = up.stop();
    assert!(!stderr.contains("panicked at"), "{stderr}");
}
