//! What a Redis user reaches for in the first hour, against `shardis up`:
//! every redis-cli mode and plain redis-benchmark, each run for real and its
//! output parsed — a mode that exits 0 with nonsense fails here.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::*;

/// Bounds every redis-cli run: a mode that hangs is killed and fails.
const CLI_TIMEOUT_SECS: &str = "60";

fn have_cli() -> bool {
    have_tool("redis-cli") && have_tool("timeout")
}

/// `redis-cli -p port args…` with `input` on stdin, killed after 60 s.
fn cli_with(port: u16, args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new("timeout")
        .args([
            "-s",
            "KILL",
            CLI_TIMEOUT_SECS,
            "redis-cli",
            "-p",
            &port.to_string(),
        ])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_dying()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // Written from another thread so a large input never deadlocks on a full stdout pipe.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn cli(port: u16, args: &[&str]) -> Output {
    cli_with(port, args, b"")
}

/// A mode that runs until stopped: run it for `secs` with line-buffered
/// output (redis-cli fully buffers a pipe), then stop it; its stdout.
fn cli_for(port: u16, secs: &str, args: &[&str]) -> String {
    let out = Command::new("timeout")
        .args([secs, "stdbuf", "-oL", "redis-cli", "-p", &port.to_string()])
        .args(args)
        .output_dying()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn all(o: &Output) -> String {
    format!("{}{}", text(o), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn stat_prints_sane_numbers() {
    if !have_cli() || !have_tool("stdbuf") {
        return;
    }
    let up = Up::start(3, &[]);
    set_keys(up.port(), "k", 25);
    let out = cli_for(up.port(), "2.5", &["--stat", "-i", "0.2"]);
    assert!(out.contains("------- data ------"), "{out}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.first().is_some_and(|f| f.parse::<u64>().is_ok()))
        .collect();
    assert!(rows.len() >= 3, "{out}");
    for r in &rows {
        // keys mem clients blocked requests (+delta) connections
        assert_eq!(r[0], "25", "{out}");
        let mem = r[1];
        assert!(
            mem.len() > 1
                && mem[..mem.len() - 1].parse::<f64>().is_ok_and(|m| m > 0.0)
                && "BKMGT".contains(&mem[mem.len() - 1..]),
            "mem {mem:?} in {out}"
        );
        assert!(r[2].parse::<u64>().unwrap() >= 1);
        assert_eq!(r[3], "0", "blocked");
        assert!(r[4].parse::<u64>().is_ok(), "{out}");
        assert!(r[5].starts_with("(+") && !r[5].contains('-'), "{out}");
        assert!(r[6].parse::<u64>().unwrap() >= 1, "{out}");
    }
}

#[test]
fn scan_mode_lists_each_matching_key_once() {
    scan_mode(&[]);
}

#[test]
fn scan_mode_lists_each_matching_key_once_over_redis_servers() {
    if have_tool("redis-server") {
        scan_mode(&["--backend", "redis-server"]);
    }
}

fn scan_mode(backend: &[&str]) {
    if !have_cli() {
        return;
    }
    let up = Up::start(3, backend);
    set_keys(up.port(), "scan:", 60);
    set_keys(up.port(), "other:", 20);
    // --count arrived in redis-cli 7.2; older ones reject the flag.
    let help = all(&cli(up.port(), &["--help"]));
    let mut args = vec!["--scan", "--pattern", "scan:*"];
    if help.contains("--count") {
        args.extend(["--count", "7"]);
    } else {
        eprintln!("note: this redis-cli has no --count; scanning with its default COUNT");
    }
    let out = cli(up.port(), &args);
    assert!(out.status.success(), "{}", all(&out));
    let mut got: Vec<String> = text(&out).lines().map(str::to_string).collect();
    got.sort();
    let mut want: Vec<String> = (0..60).map(|i| format!("scan:{i}")).collect();
    want.sort();
    assert_eq!(got, want, "{}", all(&out));
}

#[test]
fn bigkeys_and_memkeys_find_the_biggest_string() {
    bigkeys_and_memkeys(&[]);
}

#[test]
fn bigkeys_and_memkeys_find_the_biggest_string_over_redis_servers() {
    if have_tool("redis-server") {
        bigkeys_and_memkeys(&["--backend", "redis-server"]);
    }
}

fn bigkeys_and_memkeys(backend: &[&str]) {
    if !have_cli() {
        return;
    }
    let up = Up::start(3, backend);
    set_keys(up.port(), "small:", 20);
    let big = "x".repeat(5000);
    let _: () = redis::cmd("SET")
        .arg("big:key")
        .arg(&big)
        .query(&mut connect(up.port()))
        .unwrap();
    let out = cli(up.port(), &["--bigkeys"]);
    let t = all(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("Sampled 21 keys in the keyspace!"), "{t}");
    assert!(
        t.contains("Biggest string found '\"big:key\"' has 5000 bytes"),
        "{t}"
    );
    let out = cli(up.port(), &["--memkeys"]);
    let t = all(&out);
    assert!(out.status.success(), "{t}");
    let bytes: u64 = t
        .lines()
        .find_map(|l| {
            l.strip_prefix("Biggest string found '\"big:key\"' has ")?
                .strip_suffix(" bytes")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{t}"));
    assert!(bytes >= 5000, "MEMORY USAGE counts the value: {t}");
}

#[test]
fn hotkeys_reports_the_lfu_requirement_cleanly_or_finds_hot_keys() {
    hotkeys(&[]);
}

#[test]
fn hotkeys_finds_hot_keys_over_redis_servers_switched_to_lfu() {
    if have_tool("redis-server") {
        hotkeys(&["--backend", "redis-server"]);
    }
}

fn hotkeys(backend: &[&str]) {
    if !have_cli() {
        return;
    }
    let up = Up::start(2, backend);
    set_keys(up.port(), "h", 60);
    // Nodes that track LFU can be switched to it; the mode then works.
    for i in 0..2 {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg("allkeys-lfu")
            .query(&mut up.node(up.first_node_port + i))
            .unwrap();
    }
    let out = cli(up.port(), &["--hotkeys"]);
    let t = all(&out);
    assert!(!t.contains("zmalloc") && !t.contains("Segmentation"), "{t}");
    assert!(out.status.success(), "{t}");
    assert!(t.contains("Sampled 60 keys in the keyspace!"), "{t}");
}

#[test]
fn latency_modes_report_sane_samples() {
    if !have_cli() || !have_tool("stdbuf") {
        return;
    }
    let up = Up::start(2, &[]);
    // --latency --raw samples for a second, then prints: min max avg count.
    let out = cli(up.port(), &["--latency", "--raw"]);
    let t = text(&out);
    let nums: Vec<f64> = t.split_whitespace().map(|w| w.parse().unwrap()).collect();
    assert_eq!(nums.len(), 4, "{t}");
    let (min, max, avg, count) = (nums[0], nums[1], nums[2], nums[3]);
    assert!(count > 0.0 && min >= 0.0 && min <= avg && avg <= max, "{t}");

    let t = cli_for(up.port(), "3.5", &["--latency-history", "-i", "1"]);
    assert!(t.matches("seconds range").count() >= 2, "{t}");
    for l in t.lines().filter(|l| !l.contains("range")) {
        let n: Vec<f64> = l.split_whitespace().map(|w| w.parse().unwrap()).collect();
        assert!(n.len() == 4 && n[0] <= n[1] && n[3] >= 1.0, "{l}");
    }

    let t = cli_for(up.port(), "3", &["--latency-dist"]);
    assert!(
        t.contains("milliseconds") && t.contains("From 0 to 100%"),
        "{t}"
    );
}

#[test]
fn pipe_mode_sends_ten_thousand_sets_without_error() {
    if !have_cli() {
        return;
    }
    let up = Up::start(3, &[]);
    let mut input = Vec::new();
    for i in 0..10_000 {
        let (k, v) = (format!("p:{i}"), i.to_string());
        write!(
            input,
            "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
            k.len(),
            v.len()
        )
        .unwrap();
    }
    let out = cli_with(up.port(), &["--pipe"], &input);
    let t = all(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("errors: 0, replies: 10000"), "{t}");
    let n: i64 = redis::cmd("DBSIZE").query(&mut connect(up.port())).unwrap();
    assert_eq!(n, 10_000);
}

#[test]
fn repeat_stdin_csv_raw_and_resp3_modes_print_what_redis_prints() {
    if !have_cli() {
        return;
    }
    let up = Up::start(3, &[]);
    let p = up.port();
    let out = cli(p, &["-r", "5", "-i", "0.1", "INCR", "counter"]);
    assert_eq!(text(&out), "1\n2\n3\n4\n5\n", "{}", all(&out));

    let out = cli_with(p, &["-x", "SET", "fromstdin"], b"hello\nworld");
    assert_eq!(text(&out), "OK\n", "{}", all(&out));
    let v: String = redis::cmd("GET")
        .arg("fromstdin")
        .query(&mut connect(p))
        .unwrap();
    assert_eq!(v, "hello\nworld");

    cli(p, &["MSET", "a", "1", "b", "two"]);
    assert_eq!(
        text(&cli(p, &["--csv", "MGET", "a", "b", "missing"])),
        "\"1\",\"two\",NULL\n"
    );
    assert_eq!(text(&cli(p, &["--no-raw", "GET", "b"])), "\"two\"\n");
    assert_eq!(text(&cli(p, &["--no-raw", "INCR", "a"])), "(integer) 2\n");

    let t = text(&cli(p, &["--no-raw", "-3", "HELLO", "3"]));
    assert!(t.starts_with("1# \"server\" => \"redis\"\n"), "{t}");
    assert!(t.contains("\"proto\" => (integer) 3"), "{t}");
}

#[test]
fn eval_runs_scripts_on_built_in_nodes() {
    if !have_cli() {
        return;
    }
    let up = Up::start(2, &[]);
    let script = up.dir.path().join("s.lua");
    std::fs::write(&script, "return redis.call('GET', KEYS[1])").unwrap();
    cli(up.port(), &["SET", "k", "hello"]);
    let out = cli(
        up.port(),
        &["--eval", script.to_str().unwrap(), "k", ",", "v"],
    );
    assert_eq!(all(&out), "hello\n", "{}", all(&out));
}

#[test]
fn eval_with_keys_on_one_node_runs_on_redis_server_nodes() {
    if !have_cli() || !have_tool("redis-server") {
        return;
    }
    let up = Up::start(3, &["--backend", "redis-server"]);
    let script = up.dir.path().join("s.lua");
    std::fs::write(
        &script,
        "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[1]); return redis.call('GET', KEYS[2])",
    )
    .unwrap();
    let out = cli(
        up.port(),
        &[
            "--eval",
            script.to_str().unwrap(),
            "{u1}:a",
            "{u1}:b",
            ",",
            "hi",
        ],
    );
    assert_eq!(text(&out), "hi\n", "{}", all(&out));
    let v: String = redis::cmd("GET")
        .arg("{u1}:a")
        .query(&mut connect(up.port()))
        .unwrap();
    assert_eq!(v, "hi");
}

/// Every test of plain `redis-benchmark -q` completes without an error,
/// the list, hash, set and sorted-set tests included.
#[test]
fn redis_benchmark_runs_every_default_test_without_errors() {
    redis_benchmark(&[]);
}

#[test]
fn redis_benchmark_runs_every_default_test_over_redis_servers() {
    if have_tool("redis-server") {
        redis_benchmark(&["--backend", "redis-server"]);
    }
}

fn redis_benchmark(backend: &[&str]) {
    if !have_tool("redis-benchmark") || !have_tool("timeout") {
        return;
    }
    let up = Up::start(3, backend);
    let port = up.port().to_string();
    let args = [
        "-s",
        "KILL",
        "300",
        "redis-benchmark",
        "-q",
        "-n",
        "2000",
        "-p",
        &port,
    ];
    // redis-benchmark 7.0's default suite: PING_INLINE, PING_MBULK, SET, GET,
    // INCR, LPUSH, RPUSH, LPOP, RPOP, SADD, HSET, SPOP, ZADD, ZPOPMIN, LPUSH
    // (for LRANGE), LRANGE_100/300/500/600, MSET.
    let expected = 20;
    let out = Command::new("timeout").args(args).output_dying().unwrap();
    let t = all(&out);
    assert!(out.status.success(), "{t}");
    assert!(!t.to_lowercase().contains("error"), "{t}");
    let results: Vec<&str> = t
        .split(['\r', '\n'])
        .filter(|l| l.contains("requests per second"))
        .collect();
    assert_eq!(results.len(), expected, "{t}");
    for r in results {
        let rps: f64 = r
            .split(": ")
            .nth(1)
            .and_then(|x| x.split(' ').next())
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("{r}"));
        assert!(rps > 0.0, "{r}");
    }
}
