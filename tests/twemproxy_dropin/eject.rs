//! `auto_eject_hosts`: with one of three servers down, nutcracker and
//! shardis eject it and place its keys on the other two alike; once its
//! retry timeout has passed and it answers again, shardis places keys over
//! all three once more.

use super::common::{free_port, redis_args, Proc};
use super::site::{self, show, At, Client, Site};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn yaml(p: [u16; 2], r: &[u16]) -> String {
    let servers = format!(
        "  servers:\n   - 127.0.0.1:{}:1 one\n   - 127.0.0.1:{}:1 two\n   - 127.0.0.1:{}:1 three\n",
        r[0], r[1], r[2]
    );
    format!(
        "ejecting:
  listen: 127.0.0.1:{}
  hash: fnv1a_64
  distribution: ketama
  redis: true
  auto_eject_hosts: true
  server_failure_limit: 1
  server_retry_timeout: 60000
{servers}returning:
  listen: 127.0.0.1:{}
  hash: md5
  distribution: ketama
  redis: true
  redis_db: 1
  auto_eject_hosts: true
  server_failure_limit: 1
  server_retry_timeout: 1500
{servers}",
        p[0], p[1]
    )
}

/// SETs `keys` until every one is +OK (the dead server ejected).
fn write_until_ejected(at: &At, keys: &[Vec<u8>]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut rounds = 0;
    loop {
        rounds += 1;
        let mut c = Client::connect(at);
        let mut failed = 0;
        for k in keys {
            c.send(&[b"SET", k, k]);
        }
        for _ in keys {
            if c.reply() != b"+OK\r\n" {
                failed += 1;
            }
        }
        if failed == 0 {
            return rounds;
        }
        assert!(
            Instant::now() < deadline,
            "{failed} SETs still failing via {at:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_ejected_server_s_keys_go_where_nutcracker_sends_them_until_it_returns() {
    if !site::tools() {
        return;
    }
    let mut redis = site::redis_servers(3, &[]);
    let ports: Vec<u16> = redis.iter().map(|r| r.port).collect();
    let p = [free_port(), free_port()];
    let text = yaml(p, &ports);
    let site = Site::new(&text);
    redis[2].kill();
    let keys = site::keys(400, "ej");
    let live = &redis[..2];
    let placed = |label: &str| {
        let rounds = write_until_ejected(&At::Tcp(p[0]), &keys);
        site::flushall(live);
        site::write_keys(&At::Tcp(p[0]), &keys);
        let placed = site::placement(live, 0);
        assert_eq!(placed.len(), keys.len(), "{label}");
        site::flushall(live);
        (rounds, placed)
    };
    let mut nc = site.nutcracker(p[0], free_port());
    let (nc_rounds, by_nutcracker) = placed("nutcracker");
    nc.kill();
    site::wait_gone(p[0]);
    let shardis = site.shardis(p[0], &[]);
    let (rounds, by_shardis) = placed("shardis");
    let differ = by_nutcracker
        .iter()
        .filter(|(k, s)| by_shardis.get(*k) != Some(s))
        .count();
    println!(
        "ejected after {nc_rounds} round(s) by nutcracker, {rounds} by shardis; {} keys on two servers, {differ} placed differently",
        by_shardis.len()
    );
    assert_eq!(differ, 0);

    // The returning pool: ejected, then back once it answers again.
    write_until_ejected(&At::Tcp(p[1]), &keys);
    redis[2] = Proc::spawn(
        Command::new("redis-server")
            .args(redis_args(ports[2]))
            .stdout(Stdio::null()),
        ports[2],
        "redis-server",
    );
    site::wait_answering(ports[2]);
    site::flushall(&redis);
    std::thread::sleep(Duration::from_millis(1_700));
    site::write_keys(&At::Tcp(p[1]), &keys);
    let parsed = shardis::nutcracker::parse("n.yml", &text).unwrap();
    let ring = parsed.pools[1].ring(1).unwrap();
    let placed = site::placement(&redis, 1);
    let home = keys
        .iter()
        .filter(|k| placed.get(*k) == Some(&ring.locate(k)))
        .count();
    assert_eq!(
        home,
        keys.len(),
        "after the retry timeout, keys are placed over all three"
    );
    let mut c = Client::connect(&At::Tcp(p[0]));
    assert!(show(&c.call(&[b"CLUSTER", b"ADDNODE", b"127.0.0.1:1"]))
        .contains("are ejected (auto_eject_hosts)"));
    shardis.assert_no_panic();
}
