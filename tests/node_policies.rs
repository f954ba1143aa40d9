//! The built-in node's `maxmemory-policy`, set with CONFIG SET: what each
//! policy evicts when memory is lowered below what the keys use, and that
//! `noeviction` (or a volatile policy with nothing volatile) refuses writes
//! with Redis's OOM error instead.

mod common;

use common::DieWithTest;
use redis::Connection;

fn used_memory(c: &mut Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn set_config(c: &mut Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(c)
        .unwrap();
}

fn fill(c: &mut Connection, prefix: &str, n: usize, ttl: Option<usize>) {
    let mut pipe = redis::pipe();
    for i in 0..n {
        let cmd = pipe
            .cmd("SET")
            .arg(format!("{prefix}{i}"))
            .arg(vec![b'x'; 200]);
        if let Some(t) = ttl {
            cmd.arg("EX").arg(t + i);
        }
        cmd.ignore();
    }
    let _: () = pipe.query(c).unwrap();
}

fn exists(c: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(c).unwrap() == 1
}

/// Lowers `maxmemory` so that `frac` of the memory the keys use now (above
/// `base`, an empty node's) fits; the node evicts at once.
fn squeeze(c: &mut Connection, base: u64, frac: f64) -> u64 {
    let limit = base + ((used_memory(c) - base) as f64 * frac) as u64;
    set_config(c, "maxmemory", &limit.to_string());
    limit
}

#[test]
fn noeviction_refuses_writes_and_keeps_every_key() {
    let node = common::start_node(common::free_port());
    let mut c = common::connect(node.port);
    let base = used_memory(&mut c);
    set_config(&mut c, "maxmemory-policy", "noeviction");
    fill(&mut c, "k", 500, None);
    squeeze(&mut c, base, 0.9);
    let err = redis::cmd("SET")
        .arg("more")
        .arg("v")
        .query::<()>(&mut c)
        .unwrap_err();
    assert_eq!(err.code(), Some("OOM"), "{err}");
    assert!(err
        .to_string()
        .contains("command not allowed when used memory > 'maxmemory'"));
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 500);
    let v: Vec<u8> = redis::cmd("GET").arg("k1").query(&mut c).unwrap();
    assert_eq!(v.len(), 200, "reads still work");
}

#[test]
fn volatile_policies_evict_only_keys_with_a_ttl_and_refuse_when_none_is_left() {
    let node = common::start_node(common::free_port());
    let mut c = common::connect(node.port);
    let base = used_memory(&mut c);
    set_config(&mut c, "maxmemory-policy", "volatile-ttl");
    fill(&mut c, "keep", 300, None);
    // TTLs 1000.. : "soon" keys expire first, "late" keys much later.
    fill(&mut c, "soon", 300, Some(1000));
    fill(&mut c, "late", 300, Some(100_000));
    let limit = squeeze(&mut c, base, 0.8);
    assert!(used_memory(&mut c) <= limit);
    assert!(
        (0..300).all(|i| exists(&mut c, &format!("keep{i}"))),
        "a key without TTL was evicted"
    );
    let soon_gone = (0..300)
        .filter(|i| !exists(&mut c, &format!("soon{i}")))
        .count();
    let late_gone = (0..300)
        .filter(|i| !exists(&mut c, &format!("late{i}")))
        .count();
    assert!(
        soon_gone > 0 && soon_gone > 3 * late_gone,
        "soon {soon_gone} late {late_gone}"
    );

    // Squeezing below what the keys without TTL need: nothing volatile is
    // left to evict, so writes are refused.
    set_config(&mut c, "maxmemory-policy", "volatile-lru");
    squeeze(&mut c, base, 0.3);
    let err = redis::cmd("SET")
        .arg("more")
        .arg("v")
        .query::<()>(&mut c)
        .unwrap_err();
    assert_eq!(err.code(), Some("OOM"), "{err}");
    assert!((0..300).all(|i| exists(&mut c, &format!("keep{i}"))));
}

#[test]
fn allkeys_random_gets_under_the_limit() {
    let node = common::start_node(common::free_port());
    let mut c = common::connect(node.port);
    let base = used_memory(&mut c);
    set_config(&mut c, "maxmemory-policy", "allkeys-random");
    fill(&mut c, "k", 2000, None);
    let limit = squeeze(&mut c, base, 0.8);
    assert!(used_memory(&mut c) <= limit);
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert!((1400..1800).contains(&n), "{n}");
    let _: () = redis::cmd("SET")
        .arg("more")
        .arg("v")
        .query(&mut c)
        .unwrap();
}

#[test]
fn allkeys_lfu_keeps_frequently_read_keys_and_object_freq_counts_reads() {
    let node = common::start_node(common::free_port());
    let mut c = common::connect(node.port);
    let base = used_memory(&mut c);
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let err = redis::cmd("OBJECT")
        .arg("FREQ")
        .arg("k")
        .query::<()>(&mut c);
    assert!(err.is_err(), "FREQ needs an LFU policy");
    set_config(&mut c, "maxmemory-policy", "allkeys-lfu");
    fill(&mut c, "k", 2000, None);
    let fresh: i64 = redis::cmd("OBJECT")
        .arg("FREQ")
        .arg("k0")
        .query(&mut c)
        .unwrap();
    assert_eq!(fresh, 5, "new keys start at LFU_INIT_VAL");
    let mut pipe = redis::pipe();
    for _ in 0..50 {
        for i in 0..100 {
            pipe.cmd("GET").arg(format!("k{i}")).ignore();
        }
    }
    let _: () = pipe.query(&mut c).unwrap();
    let hot: i64 = redis::cmd("OBJECT")
        .arg("FREQ")
        .arg("k1")
        .query(&mut c)
        .unwrap();
    assert!(hot > fresh, "freq after 50 reads: {hot}");
    squeeze(&mut c, base, 0.5);
    let hot_left = (0..100)
        .filter(|i| exists(&mut c, &format!("k{i}")))
        .count();
    let cold_left = (1000..2000)
        .filter(|i| exists(&mut c, &format!("k{i}")))
        .count();
    assert!(hot_left >= 95, "hot keys left: {hot_left}");
    assert!(cold_left < 700, "cold keys left: {cold_left}");
}

/// `redis-cli --hotkeys` needs an LFU policy and OBJECT FREQ; against the
/// node it lists the most read key first.
#[test]
fn redis_cli_hotkeys_finds_the_most_read_key() {
    if !common::have_tool("redis-cli") {
        return;
    }
    let node = common::start_node(common::free_port());
    let mut c = common::connect(node.port);
    set_config(&mut c, "maxmemory-policy", "allkeys-lfu");
    fill(&mut c, "k", 50, None);
    let mut pipe = redis::pipe();
    for _ in 0..200 {
        pipe.cmd("GET").arg("k7").ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let out = std::process::Command::new("timeout")
        .args(["30", "redis-cli", "-p", &node.port.to_string(), "--hotkeys"])
        .output_dying()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let first = text
        .lines()
        .find(|l| l.starts_with("hot key found with counter"))
        .unwrap_or_else(|| panic!("no hot keys in:\n{text}"));
    assert!(first.ends_with("keyname: \"k7\""), "{text}");
}
