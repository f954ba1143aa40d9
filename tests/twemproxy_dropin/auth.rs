//! `redis_auth`: the same conversation with nutcracker and with shardis,
//! reply bytes compared; and the password reaches the redis-servers.

use super::common::{free_port, Proc};
use super::site::{self, show, At, Client, Site};

/// Each step's request, in one connection per list.
const CONVERSATIONS: &[&[&[&[u8]]]] = &[
    &[
        &[b"PING"],
        &[b"GET", b"k"],
        &[b"AUTH", b"wrong"],
        &[b"GET", b"k"],
        &[b"AUTH", b"secret"],
        &[b"SET", b"k", b"v"],
        &[b"GET", b"k"],
        &[b"auth", b"secret"],
        &[b"PING"],
        &[b"AUTH", b"bad"],
        &[b"GET", b"k"],
    ],
    &[
        &[b"auth", b"secret"],
        &[b"MGET", b"k", b"x", b"y"],
        &[b"DEL", b"k"],
    ],
];

fn yaml(locked: u16, open: u16, r: &[Proc]) -> String {
    format!(
        "locked:
  listen: 127.0.0.1:{locked}
  redis: true
  redis_auth: secret
  servers:
   - 127.0.0.1:{}:1
open:
  listen: 127.0.0.1:{open}
  redis: true
  servers:
   - 127.0.0.1:{}:1
",
        r[0].port, r[1].port
    )
}

fn converse(locked: u16, open: u16) -> Vec<String> {
    let mut out = Vec::new();
    for steps in CONVERSATIONS {
        let mut c = Client::connect(&At::Tcp(locked));
        for s in *steps {
            out.push(format!(
                "locked {} -> {}",
                show(&s.concat()),
                show(&c.call(s))
            ));
        }
    }
    let mut c = Client::connect(&At::Tcp(open));
    for s in [
        &[&b"AUTH"[..], b"x"][..],
        &[b"SET", b"o", b"1"],
        &[b"GET", b"o"],
    ] {
        out.push(format!(
            "open {} -> {}",
            show(&s.concat()),
            show(&c.call(s))
        ));
    }
    out
}

#[test]
fn redis_auth_answers_as_nutcracker_does_and_reaches_the_servers() {
    if !site::tools() {
        return;
    }
    let protected = site::redis_servers(1, &["--requirepass", "secret"]);
    let plain = site::redis_servers(1, &[]);
    let redis: Vec<Proc> = protected.into_iter().chain(plain).collect();
    let (locked, open) = (free_port(), free_port());
    let site = Site::new(&yaml(locked, open, &redis));

    let mut nc = site.nutcracker(open, free_port());
    let by_nutcracker = converse(locked, open);
    nc.kill();
    site::wait_gone(open);
    let shardis = site.shardis(open, &[]);
    let by_shardis = converse(locked, open);
    assert_eq!(by_shardis, by_nutcracker);
    assert!(by_shardis
        .iter()
        .any(|l| l.ends_with("-NOAUTH Authentication required\r\n")));
    assert!(by_shardis
        .iter()
        .any(|l| l.ends_with("-ERR invalid password\r\n")));
    assert!(by_shardis
        .iter()
        .any(|l| l.ends_with("-ERR Client sent AUTH, but no password is set\r\n")));

    // Where nutcracker closes the connection, shardis answers.
    let mut c = Client::connect(&At::Tcp(locked));
    assert_eq!(
        show(&c.call(&[b"AUTH", b"a", b"b", b"c"])),
        "-ERR wrong number of arguments for 'auth' command\r\n"
    );
    assert_eq!(show(&c.call(&[b"AUTH", b"default", b"secret"])), "+OK\r\n");
    assert_eq!(show(&c.call(&[b"SET", b"through", b"1"])), "+OK\r\n");
    // HELLO, as Redis 7 answers it, the pool's password the default user's.
    let mut h = Client::connect(&At::Tcp(locked));
    assert!(show(&h.call(&[b"HELLO", b"2"])).starts_with("-NOAUTH HELLO must be called"));
    assert_eq!(
        show(&h.call(&[b"HELLO", b"2", b"AUTH", b"default", b"wrong"])),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(
        show(&h.call(&[b"GET", b"through"])),
        "-NOAUTH Authentication required\r\n"
    );
    let hello = show(&h.call(&[b"HELLO", b"2", b"AUTH", b"default", b"secret"]));
    assert!(hello.starts_with("*14\r\n$6\r\nserver\r\n"), "{hello}");
    assert_eq!(show(&h.call(&[b"GET", b"through"])), "$1\r\n1\r\n");
    // The key is on the protected server: the pool's password reached it.
    let mut r = Client::connect(&At::Tcp(redis[0].port));
    assert_eq!(show(&r.call(&[b"AUTH", b"secret"])), "+OK\r\n");
    assert_eq!(show(&r.call(&[b"GET", b"through"])), "$1\r\n1\r\n");
    shardis.assert_no_panic();
}
