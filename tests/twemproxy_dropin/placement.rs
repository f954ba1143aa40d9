//! A site's file with several pools starts unchanged under shardis, and
//! every key lands where nutcracker put it.

use super::common::free_port;
use super::site::{self, At, Site};

/// Three pools over three servers, in the style of a site's own file:
/// TCP and unix socket listeners, named and unnamed servers, weights, and
/// every directive shardis maps.
fn yaml(p: [u16; 2], sock: &str, r: &[u16]) -> String {
    format!(
        "# sessions and caches for the web tier
cache:
  listen: 127.0.0.1:{p0}
  hash: fnv1a_64
  hash_tag: \"{{}}\"
  distribution: ketama
  timeout: 400
  backlog: 1024
  preconnect: true
  redis: true
  redis_db: 1
  auto_eject_hosts: false
  server_retry_timeout: 2000
  server_failure_limit: 3
  servers:
   - 127.0.0.1:{r0}:1 app-1
   - 127.0.0.1:{r1}:1 app-2
   - 127.0.0.1:{r2}:1 app-3

sessions:
  listen: {sock} 0666
  hash: md5
  distribution: modula
  redis: true
  redis_db: 2
  server_connections: 2
  servers:
   - 127.0.0.1:{r0}:1
   - 127.0.0.1:{r1}:1
   - 127.0.0.1:{r2}:1

counters:
  listen: 127.0.0.1:{p1}
  hash: murmur
  distribution: ketama
  redis: true
  redis_db: 3
  servers:
   - 127.0.0.1:{r0}:2
   - 127.0.0.1:{r1}:1
   - 127.0.0.1:{r2}:3
",
        p0 = p[0],
        p1 = p[1],
        r0 = r[0],
        r1 = r[1],
        r2 = r[2]
    )
}

#[test]
fn a_nutcracker_yml_with_several_pools_places_keys_where_nutcracker_does() {
    if !site::tools() {
        return;
    }
    let redis = site::redis_servers(3, &[]);
    let ports: Vec<u16> = redis.iter().map(|r| r.port).collect();
    let p = [free_port(), free_port()];
    let dir = super::common::tempdir::Dir::new();
    let sock = dir.path().join("sessions.sock");
    let text = yaml(p, sock.to_str().unwrap(), &ports);
    let site = Site::new(&text);
    let pools = [
        (At::Tcp(p[0]), 1, "cache"),
        (At::Unix(sock.clone()), 2, "sessions"),
        (At::Tcp(p[1]), 3, "counters"),
    ];
    let run = |label: &str| {
        let mut seen = Vec::new();
        for (at, db, name) in &pools {
            let keys = site::keys(600, name);
            site::write_keys(at, &keys);
            let placed = site::placement(&redis, *db);
            assert_eq!(placed.len(), keys.len(), "{label}: pool {name}");
            seen.push(placed);
        }
        site::flushall(&redis);
        seen
    };
    let mut nc = site.nutcracker(p[0], free_port());
    let by_nutcracker = run("nutcracker");
    nc.kill();
    site::wait_gone(p[0]);

    let shardis = site.shardis(p[0], &[]);
    let by_shardis = run("shardis");
    for (i, (_, _, name)) in pools.iter().enumerate() {
        let differ = by_nutcracker[i]
            .iter()
            .filter(|(k, s)| by_shardis[i].get(*k) != Some(s))
            .count();
        assert_eq!(
            differ, 0,
            "pool {name}: keys placed elsewhere than nutcracker placed them"
        );
        let mut spread = [0; 3];
        by_shardis[i].values().for_each(|s| spread[*s] += 1);
        println!(
            "pool {name}: {} keys agree, per server {spread:?}",
            by_shardis[i].len()
        );
    }
    assert_eq!(
        site::read(&site.yml),
        text.as_bytes(),
        "the file is untouched"
    );
    shardis.assert_no_panic();
}
