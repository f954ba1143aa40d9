//! The built-in node over real TCP: nodes run in-process on port 0, every
//! assertion is on exact RESP bytes, and every read is under a timeout.

mod common;

use common::inproc::{command, node, start, Client};
use shardis::backend::{run, NodeConfig};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

#[tokio::test]
async fn ping_replies_pong_and_echoes_a_message() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(&["PING"], "+PONG\r\n").await;
    c.check(&["ping", "hi"], "$2\r\nhi\r\n").await;
    c.check(
        &["PING", "a", "b"],
        "-ERR wrong number of arguments for 'ping' command\r\n",
    )
    .await;
    c.check(&["ECHO", "x y"], "$3\r\nx y\r\n").await;
}

#[tokio::test]
async fn set_then_get_returns_the_value() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(&["SET", "k", "v"], "+OK\r\n").await;
    c.check(&["GET", "k"], "$1\r\nv\r\n").await;
    c.check(&["GET", "missing"], "$-1\r\n").await;
}

#[tokio::test]
async fn set_with_nx_on_existing_key_returns_nil() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(&["SET", "k", "v"], "+OK\r\n").await;
    c.check(&["SET", "k", "w", "NX"], "$-1\r\n").await;
    c.check(&["SET", "k", "w", "NX", "GET"], "$1\r\nv\r\n")
        .await;
    c.check(&["GET", "k"], "$1\r\nv\r\n").await;
    c.check(&["SET", "other", "w", "XX"], "$-1\r\n").await;
}

#[tokio::test]
async fn set_with_get_returns_the_old_value() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(&["SET", "k", "old"], "+OK\r\n").await;
    c.check(&["SET", "k", "new", "GET"], "$3\r\nold\r\n").await;
    c.check(&["GET", "k"], "$3\r\nnew\r\n").await;
}

#[tokio::test]
async fn set_options_report_redis_errors() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(
        &["SET", "k", "v", "EX", "0"],
        "-ERR invalid expire time in 'set' command\r\n",
    )
    .await;
    c.check(
        &["SET", "k", "v", "EX", "abc"],
        "-ERR value is not an integer or out of range\r\n",
    )
    .await;
    c.check(&["SET", "k", "v", "NX", "XX"], "-ERR syntax error\r\n")
        .await;
    c.check(
        &["SET", "k", "v", "KEEPTTL", "PX", "5"],
        "-ERR syntax error\r\n",
    )
    .await;
}

#[tokio::test]
async fn unknown_command_lists_its_args_and_keeps_the_connection() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(
        &["foo", "a", "b"],
        "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n",
    )
    .await;
    c.check(
        &["GET"],
        "-ERR wrong number of arguments for 'get' command\r\n",
    )
    .await;
    c.check(&["PING"], "+PONG\r\n").await;
}

#[tokio::test]
async fn protocol_error_closes_only_that_client() {
    let n = node().await;
    let mut bad = Client::connect(&n).await;
    let mut good = Client::connect(&n).await;
    bad.send_raw(b"*1\r\n$4\r\nPING\r\n*abc\r\n").await;
    assert_eq!(bad.reply().await, b"+PONG\r\n");
    assert_eq!(
        bad.reply().await,
        b"-ERR Protocol error: invalid multibulk length\r\n"
    );
    bad.expect_closed().await;
    good.check(&["PING"], "+PONG\r\n").await;
}

#[tokio::test]
async fn inline_commands_are_understood() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.send_raw(b"\r\nSET k \"a b\"\r\nGET k\r\n").await;
    assert_eq!(c.reply().await, b"+OK\r\n");
    assert_eq!(c.reply().await, b"$3\r\na b\r\n");
}

#[tokio::test]
async fn hello_3_switches_the_connection_to_resp3() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    let hello = c.call(&["HELLO", "3"]).await;
    assert!(hello.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.0.0\r\n$5\r\nproto\r\n:3\r\n"), "{hello}");
    c.check(&["GET", "missing"], "_\r\n").await;
    c.check(&["MGET", "missing"], "*1\r\n_\r\n").await;
    c.check(&["CONFIG", "GET", "save"], "%1\r\n$4\r\nsave\r\n$0\r\n\r\n")
        .await;
    c.check(&["HELLO", "4"], "-NOPROTO unsupported protocol version\r\n")
        .await;
    let back = c.call(&["HELLO", "2"]).await;
    assert!(back.starts_with("*14\r\n"), "{back}");
    c.check(&["GET", "missing"], "$-1\r\n").await;
}

#[tokio::test]
async fn quit_replies_ok_then_closes() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.send_raw(&[command(&["QUIT"]), command(&["PING"])].concat())
        .await;
    assert_eq!(c.reply().await, b"+OK\r\n");
    c.expect_closed().await;
}

#[tokio::test]
async fn select_accepts_only_database_zero() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(&["SELECT", "0"], "+OK\r\n").await;
    c.check(&["SELECT", "1"], "-ERR DB index is out of range\r\n")
        .await;
}

#[tokio::test]
async fn counters_report_redis_errors() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(&["INCR", "n"], ":1\r\n").await;
    c.check(&["INCRBY", "n", "41"], ":42\r\n").await;
    c.check(&["DECRBY", "n", "2"], ":40\r\n").await;
    c.check(&["SET", "s", "abc"], "+OK\r\n").await;
    c.check(
        &["INCR", "s"],
        "-ERR value is not an integer or out of range\r\n",
    )
    .await;
    c.check(&["SET", "max", "9223372036854775807"], "+OK\r\n")
        .await;
    c.check(
        &["INCR", "max"],
        "-ERR increment or decrement would overflow\r\n",
    )
    .await;
    c.check(
        &["INCRBYFLOAT", "s", "1"],
        "-ERR value is not a valid float\r\n",
    )
    .await;
    c.check(&["INCRBYFLOAT", "f", "0.1"], "$3\r\n0.1\r\n").await;
    c.check(&["INCRBYFLOAT", "f", "0.2"], "$3\r\n0.3\r\n").await;
}

#[tokio::test]
async fn setrange_past_512_mb_is_refused() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(
        &["SETRANGE", "k", "536870912", "x"],
        "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
    )
    .await;
    c.check(&["SETRANGE", "k", "2", "x"], ":3\r\n").await;
    c.check(&["GET", "k"], "$3\r\n\0\0x\r\n").await;
}

#[tokio::test]
async fn expired_key_is_never_returned() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(&["SET", "k", "v", "PX", "50"], "+OK\r\n").await;
    c.check(&["GET", "k"], "$1\r\nv\r\n").await;
    tokio::time::sleep(Duration::from_millis(80)).await;
    c.check(&["GET", "k"], "$-1\r\n").await;
    c.check(&["EXISTS", "k"], ":0\r\n").await;
    c.check(&["TTL", "k"], ":-2\r\n").await;
}

#[tokio::test]
async fn active_expiry_reclaims_keys_nobody_reads() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    for i in 0..200 {
        c.check(&["SET", &format!("k{i}"), "v", "PX", "30"], "+OK\r\n")
            .await;
    }
    c.check(&["SET", "kept", "v"], "+OK\r\n").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    c.check(&["DBSIZE"], ":1\r\n").await;
}

#[tokio::test]
async fn expire_options_follow_redis_7() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(&["SET", "k", "v"], "+OK\r\n").await;
    c.check(&["EXPIRE", "k", "100", "XX"], ":0\r\n").await;
    c.check(&["EXPIRE", "k", "100", "NX"], ":1\r\n").await;
    c.check(&["EXPIRE", "k", "50", "GT"], ":0\r\n").await;
    c.check(&["EXPIRE", "k", "200", "GT"], ":1\r\n").await;
    c.check(&["TTL", "k"], ":200\r\n").await;
    c.check(
        &["EXPIRE", "k", "1", "NX", "XX"],
        "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
    )
    .await;
    c.check(&["PERSIST", "k"], ":1\r\n").await;
    c.check(&["TTL", "k"], ":-1\r\n").await;
    c.check(&["EXPIRE", "k", "-1"], ":1\r\n").await;
    c.check(&["EXISTS", "k"], ":0\r\n").await;
}

#[tokio::test]
async fn scan_walks_every_key_exactly_once() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    for i in 0..300 {
        c.check(&["SET", &format!("key:{i}"), "v"], "+OK\r\n").await;
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        c.send(&["SCAN", &cursor, "COUNT", "20"]).await;
        let reply = c.reply().await;
        let text = String::from_utf8_lossy(&reply).into_owned();
        let lines: Vec<&str> = text.split("\r\n").collect();
        cursor = lines[2].to_string();
        for key in lines[4..].iter().skip(1).step_by(2) {
            if !key.is_empty() {
                assert!(seen.insert(key.to_string()), "{key} returned twice");
            }
        }
        calls += 1;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 300);
    assert!(calls > 5, "COUNT should split the walk ({calls} calls)");
}

#[tokio::test]
async fn keys_matches_redis_globs() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    for k in ["hello", "hallo", "hxllo", "other"] {
        c.check(&["SET", k, "v"], "+OK\r\n").await;
    }
    async fn keys(c: &mut Client, pattern: &str) -> Vec<String> {
        let text = c.call(&["KEYS", pattern]).await;
        let mut keys: Vec<String> = text
            .split("\r\n")
            .skip(2)
            .step_by(2)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        keys.sort();
        keys
    }
    assert_eq!(keys(&mut c, "h[ae]llo").await, ["hallo", "hello"]);
    assert_eq!(keys(&mut c, "h?llo").await, ["hallo", "hello", "hxllo"]);
    assert_eq!(keys(&mut c, "*er").await, ["other"]);
}

#[tokio::test]
async fn pipelined_batch_of_1000_commands_replies_in_order() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    let mut batch = Vec::new();
    let mut want = Vec::new();
    for i in 0..500 {
        batch.extend(command(&["SET", &format!("k{i}"), &format!("value-{i}")]));
        want.extend_from_slice(b"+OK\r\n");
        batch.extend(command(&["GET", &format!("k{i}")]));
        let v = format!("value-{i}");
        want.extend(format!("${}\r\n{v}\r\n", v.len()).into_bytes());
    }
    c.send_raw(&batch).await;
    let mut got = Vec::new();
    for _ in 0..1000 {
        got.extend(c.reply().await);
    }
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
}

#[tokio::test]
async fn maxmemory_evicts_old_keys_instead_of_refusing_writes() {
    let n = start(NodeConfig {
        maxmemory: 4 * 1024 * 1024,
        ..Default::default()
    })
    .await;
    let mut c = Client::connect(&n).await;
    let value = "x".repeat(1000);
    let mut batch = Vec::new();
    for i in 0..10_000 {
        batch.extend(command(&["SET", &format!("key:{i}"), &value]));
    }
    c.send_raw(&batch).await;
    for _ in 0..10_000 {
        assert_eq!(c.reply().await, b"+OK\r\n");
    }
    let info = c.call(&["INFO", "memory", "stats"]).await;
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(used <= 4 * 1024 * 1024 + 2048, "used_memory {used}");
    assert!(info.contains("maxmemory_policy:allkeys-lru"), "{info}");
    let evicted: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("evicted_keys:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(evicted > 5_000, "evicted {evicted}");
    // The most recent keys survive.
    c.check(&["EXISTS", "key:9999"], ":1\r\n").await;
}

#[tokio::test]
async fn info_reports_keyspace_and_stats() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(&["SET", "a", "1", "EX", "100"], "+OK\r\n").await;
    c.check(&["SET", "b", "2"], "+OK\r\n").await;
    c.check(&["GET", "a"], "$1\r\n1\r\n").await;
    c.check(&["GET", "zz"], "$-1\r\n").await;
    let info = c.call(&["INFO"]).await;
    for want in [
        "redis_version:7.0.0\r\n",
        "redis_mode:standalone\r\n",
        &format!("tcp_port:{}\r\n", n.addr.port()),
        "role:master\r\n",
        "keyspace_hits:1\r\n",
        "keyspace_misses:1\r\n",
        "db0:keys=2,expires=1,avg_ttl=0\r\n",
    ] {
        assert!(info.contains(want), "missing {want:?} in {info}");
    }
}

#[tokio::test]
async fn client_commands_track_the_connection() {
    let n = node().await;
    let mut c = Client::connect(&n).await;
    c.check(&["CLIENT", "GETNAME"], "$-1\r\n").await;
    c.check(&["CLIENT", "SETNAME", "worker-1"], "+OK\r\n").await;
    c.check(&["CLIENT", "GETNAME"], "$8\r\nworker-1\r\n").await;
    c.check(
        &["CLIENT", "SETNAME", "a b"],
        "-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    )
    .await;
    c.check(&["CLIENT", "SETINFO", "lib-name", "redis-py"], "+OK\r\n")
        .await;
    c.check(
        &["CLIENT", "FOO"],
        "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n",
    )
    .await;
    let id = c.call(&["CLIENT", "ID"]).await;
    assert!(id.starts_with(':'), "{id}");
}

#[tokio::test]
async fn shutdown_stops_accepting_and_run_returns() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let server = tokio::spawn(run(listener, NodeConfig::default(), async {
        let _ = rx.await;
    }));
    let mut c = Client::to(addr).await;
    c.check(&["PING"], "+PONG\r\n").await;
    tx.send(()).unwrap();
    let finished = tokio::time::timeout(Duration::from_secs(5), server).await;
    assert!(matches!(finished, Ok(Ok(Ok(())))), "run did not return");
    c.expect_closed().await;
    assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
}
